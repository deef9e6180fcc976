"""The ``croqtile-cli-help`` directive: the ``--help`` text of ``croqtile`` or of one of its
subcommands, from ``python -m croqtile [SUBCOMMAND] --help`` run while the site builds."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from .generated import note

# The subcommands whose help is started together when the build begins (each run imports
# torch, so running them at once saves most of the wait); others run when a page asks.
SUBCOMMANDS: tuple[str, ...] = ("", "check", "explain", "bench")

_POOL = ThreadPoolExecutor(max_workers=len(SUBCOMMANDS))
_RUNS: dict[str, Future[str]] = {}


def _help(subcommand: str) -> str:
    args = [sys.executable, "-m", "croqtile", *([subcommand] if subcommand else []), "--help"]
    # a fixed width, so that the text does not depend on the terminal of the build
    env = {**os.environ, "COLUMNS": "88"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[1:])} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def help_text(subcommand: str) -> str:
    """The help of ``croqtile SUBCOMMAND`` (of ``croqtile`` for ``""``)."""
    if subcommand not in _RUNS:
        _RUNS[subcommand] = _POOL.submit(_help, subcommand)
    return _RUNS[subcommand].result()


def prefetch(app: Sphinx) -> None:
    """Start every subcommand's help as the build begins."""
    for subcommand in SUBCOMMANDS:
        if subcommand not in _RUNS:
            _RUNS[subcommand] = _POOL.submit(_help, subcommand)


class CliHelp(SphinxDirective):
    """```{croqtile-cli-help} SUBCOMMAND``` (no argument: the top-level help)."""

    optional_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        note(self.env)
        subcommand = self.arguments[0] if self.arguments else ""
        try:
            text = help_text(subcommand)
        except RuntimeError as err:
            raise self.error(str(err)) from None
        block = nodes.literal_block(text, text)
        block["language"] = "none"
        return [block]
