"""The scripts of bench/ as modules, for the tests of their pieces."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(stem: str) -> ModuleType:
    """``bench/<stem>.py`` imported as the module ``<stem>`` (registered in sys.modules:
    dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(stem, BENCH / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[stem] = module
    spec.loader.exec_module(module)
    return module
