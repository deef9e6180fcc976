"""The Sphinx extension of the croqtile documentation: the Croqtile lexer, and the reference
pages generated at build time (error codes, command-line help, the options table)."""

from __future__ import annotations

from typing import Any

from pygments.lexers.python import PythonLexer
from sphinx.application import Sphinx

from .cli_help import CliHelp, prefetch
from .error_codes import replace_error_codes
from .generated import setup_events
from .lexer import CroqtileLexer
from .options_table import OptionsTable


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_lexer("croqtile", CroqtileLexer)
    app.add_lexer("triton", PythonLexer)  # excerpts of generated Triton are Python
    app.add_directive("croqtile-cli-help", CliHelp)
    app.add_directive("croqtile-options", OptionsTable)
    app.connect("builder-inited", prefetch)
    app.connect("source-read", replace_error_codes)
    setup_events(app)  # generated pages are read again on every build
    # env_version: raised when what the extension keeps in the environment changes
    return {"version": "1", "env_version": 2, "parallel_read_safe": True,
            "parallel_write_safe": True}
