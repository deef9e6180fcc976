"""Pages whose content is generated while the site builds: Sphinx cannot see when the
generated text changes (a new error code, a new option, a new command-line flag), so these
pages are read again on every build."""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

_KEY = "croqtile_generated_docs"


def note(env: BuildEnvironment) -> None:
    """Record that the page being read holds generated content."""
    getattr(env, _KEY, _ensure(env)).add(env.docname)


def _ensure(env: BuildEnvironment) -> set[str]:
    if not hasattr(env, _KEY):
        setattr(env, _KEY, set())
    return getattr(env, _KEY)


def outdated(app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str],
             removed: set[str]) -> list[str]:
    """``env-get-outdated``: every page with generated content is read again."""
    from .error_codes import DOCNAME

    pages = set(_ensure(env)) | ({DOCNAME} if DOCNAME in env.found_docs else set())
    return sorted(pages - removed)


def purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _ensure(env).discard(docname)


def merge(app: Sphinx, env: BuildEnvironment, docnames: set[str], other: Any) -> None:
    _ensure(env).update(getattr(other, _KEY, set()) & docnames)


def setup_events(app: Sphinx) -> None:
    app.connect("env-get-outdated", outdated)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
