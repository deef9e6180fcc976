"""Croqtile programs inside other documents: the fenced code blocks of a markdown page, and
whether a text defines a given ``__co__`` function. Used to compile kernels published in
tutorials as written, read from a checkout at run time."""

from __future__ import annotations

import re

# A fence opens with three backticks at the start of a line (an info string may follow)
# and closes with three backticks at the start of a later line.
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def fenced_blocks(markdown: str) -> list[str]:
    """The text of every fenced code block of a page, in order."""
    return _FENCE.findall(markdown)


def defines_function(text: str, name: str) -> bool:
    """Whether ``text`` has a ``__co__`` function called ``name``: ``__co__``, a return
    type without braces or semicolons (``void``, ``auto``, ``f16 [M, N]``), the name and
    its parameter list."""
    return re.search(rf"__co__[^;{{}}]*?\b{re.escape(name)}\s*\(", text) is not None


def program_block(markdown: str, function: str) -> str | None:
    """The first code block of a page that defines the ``__co__`` function ``function``."""
    return next((b for b in fenced_blocks(markdown) if defines_function(b, function)), None)
