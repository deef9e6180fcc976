"""The one place that reads ``CROQTILE_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where generated Triton modules (and later tuning results) are kept.

    ``CROQTILE_CACHE_DIR`` overrides the default ``~/.cache/croqtile``.
    """
    root = os.environ.get("CROQTILE_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "croqtile"
    path.mkdir(parents=True, exist_ok=True)
    return path


def dump_dir() -> Path | None:
    """``CROQTILE_DUMP_DIR``: when set, every compile writes its stages' text there."""
    root = os.environ.get("CROQTILE_DUMP_DIR")
    if not root:
        return None
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
