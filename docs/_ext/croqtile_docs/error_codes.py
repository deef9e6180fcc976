"""The error-code reference page, rendered by ``croqtile.tools.errors_doc`` while the site builds:
the page ``reference/errors`` in the repository holds only a note, replaced by the render.

The render is Markdown written for any viewer; for MyST its HTML anchors become targets
(``(cq0201)=``), so that the index's ``#cq0201`` links resolve, and its programs are
highlighted as Croqtile."""

from __future__ import annotations

import re

from sphinx.application import Sphinx

DOCNAME = "reference/errors"
_ANCHOR = re.compile(r'^<a id="(cq\d{4})"></a>$', re.M)


def error_codes_page() -> str:
    """The Markdown of the error-code page."""
    from croqtile.tools.errors_doc import render_reference

    text = _ANCHOR.sub(r"(\1)=", render_reference())
    return text.replace("```c\n", "```croqtile\n")


def replace_error_codes(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname == DOCNAME:
        source[0] = error_codes_page()
