"""Sphinx configuration of the croqtile documentation (Markdown pages through MyST; API
pages from the docstrings; the Croqtile lexer and the generated reference pages come from
the extension in _ext/croqtile_docs). Built with warnings as errors by `make test`."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the checkout's croqtile when it is not installed

import croqtile  # noqa: E402

project = "croqtile"
author = "the croqtile authors"
copyright = "the croqtile authors"
release = croqtile.__version__
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc", "croqtile_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build", "_ext", "Thumbs.db", ".DS_Store",
]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings: list[str] = []

# Docstrings are reStructuredText; a `name` in single backquotes reads as code there.
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": False}

highlight_language = "none"
pygments_style = "sphinx"
html_theme = "furo"
html_title = f"croqtile {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
