"""Imports go one way: croqtile -> backends -> frontend. The frontend imports neither
torch nor triton; the backends never import the public package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "frontend": {"torch", "triton", "numpy", "croqtile.backends", "croqtile.api",
                 "croqtile.module", "croqtile.driver"},
    "backends": {"croqtile.api", "croqtile.module", "croqtile.driver", "croqtile.binding"},
}


def _imports(path: Path, package: str) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    module = "croqtile." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
    parts = module.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
    del package
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_go_one_way(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path, package):
            for forbidden in FORBIDDEN[package]:
                if name == forbidden or name.startswith(forbidden + "."):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_only_settings_reads_the_environment() -> None:
    offenders = []
    for package in ("croqtile", "frontend", "backends"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "settings.py" and "os.environ" in path.read_text():
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders
