"""Imports go one way: croqtile -> backends -> frontend. The frontend imports neither
torch nor triton; the backends never import the public package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {"frontend": {"torch", "triton", "numpy"}, "backends": set()}
# the only parts of the installed package each folder may import: its own and those below it
ALLOWED_CROQTILE = {"frontend": ("croqtile.frontend",),
                    "backends": ("croqtile.backends", "croqtile.frontend")}


def _forbidden(package: str, name: str) -> bool:
    if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package]):
        return True
    if name == "croqtile" or name.startswith("croqtile."):
        return not any(name == a or name.startswith(a + ".") for a in ALLOWED_CROQTILE[package])
    return False


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
            if _forbidden(package, name):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_only_settings_reads_the_environment() -> None:
    offenders = []
    for package in ("croqtile", "frontend", "backends"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name != "settings.py" and "os.environ" in path.read_text():
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, offenders


# ----------------------------------------------------------------------------- one-way modules
# Within the packages, module dependencies form no cycle (the lowering: state at the bottom,
# one module per construct family, the dispatcher on top), and no module imports another
# module's private (underscore) names. Imports under `if TYPE_CHECKING:` count too.

_PACKAGES = ("croqtile", "frontend", "backends")


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_modules() -> dict[str, Path]:
    return {_module_of(p): p for top in _PACKAGES for p in (ROOT / top).rglob("*.py")}


def _local_name(name: str) -> str:
    """``croqtile.backends.ir.x`` -> ``backends.ir.x`` (the installed spelling of a folder)."""
    for prefix in ("croqtile.frontend", "croqtile.backends"):
        if name == prefix or name.startswith(prefix + "."):
            return name[len("croqtile."):]
    return name


def _edges(modules: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the project modules it imports (package __init__ re-exports excluded), and
    every import of a private name from another module."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    private: list[str] = []
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = _local_name(node.module or "")
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    dest = sub if sub in modules else target
                    if dest not in modules or dest == module:
                        continue
                    if modules[dest].name != "__init__.py":
                        graph[module].add(dest)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append(f"{module} imports {alias.name} from {dest}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    dest = _local_name(alias.name)
                    if dest in modules and dest != module and modules[dest].name != "__init__.py":
                        graph[module].add(dest)
    return graph, private


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for dest in sorted(graph[module]):
            if state.get(dest) == 1:
                return path[path.index(dest):] + [dest]
            if dest not in state:
                found = visit(dest)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_no_import_cycles_and_no_private_imports() -> None:
    graph, private = _edges(_project_modules())
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    assert not private, "\n".join(private)


def test_the_check_sees_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    """The checker above on two made-up modules that import each other, one of them a
    private name."""
    (tmp_path / "a.py").write_text("from .b import _hidden\n")
    (tmp_path / "b.py").write_text("from . import a\n")
    graph, private = _edges({"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"})
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert private == ["pkg.a imports _hidden from pkg.b"]
    assert _cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert _cycle({"pkg.a": {"pkg.b"}, "pkg.b": set()}) is None


def test_lowering_modules_stay_small() -> None:
    """No module of the lowering passes ~800 lines (split it by role instead)."""
    long = [f"{p.name}: {n}" for p in sorted((ROOT / "backends" / "ir").glob("*.py"))
            if (n := len(p.read_text().splitlines())) > 850]
    assert not long, long
