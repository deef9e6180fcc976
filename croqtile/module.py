"""``Module`` (the result of ``croqtile.compile``) and ``Function`` (one ``__co__``
function, callable with torch tensors)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import settings
from .backends.triton.launcher import Launcher, load_module
from .binding import bind
from .driver import CompiledFunction


class Function:
    """One compiled ``__co__`` function. Call it with torch tensors and Python scalars."""

    def __init__(self, compiled: CompiledFunction) -> None:
        self._compiled = compiled
        self._module: ModuleType | None = None
        self._launcher = Launcher()
        self.name = compiled.name
        self.loads = 0  # how many times the generated module was loaded (1 after a call)

    @property
    def triton_source(self) -> str:
        """The generated Python module: the Triton kernels and the host function."""
        return self._compiled.artifact.source

    @property
    def params(self) -> list[str]:
        return [p.name for p in self._compiled.artifact.params]

    @property
    def launches(self) -> int:
        return self._launcher.launches

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = load_module(self._compiled.artifact, settings.cache_dir())
            self.loads += 1
        return self._module

    def __call__(self, *args: Any) -> Any:
        artifact = self._compiled.artifact
        bound = bind(self.name, artifact.params, args, artifact.checks)
        host = getattr(self._load(), artifact.function)
        dims = [bound.dims[d] for d in artifact.dims]
        return host(self._launcher, bound.device, *bound.args, *dims)

    def __repr__(self) -> str:
        return f"<croqtile.Function {self.name}({', '.join(self.params)})>"


class Module:
    """The ``__co__`` functions of one source, as attributes."""

    def __init__(self, functions: list[Function], filename: str) -> None:
        self._functions = {f.name: f for f in functions}
        self.filename = filename

    def __getattr__(self, name: str) -> Function:
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        known = ", ".join(functions) or "none"
        raise AttributeError(f"no __co__ function named '{name}' in {self.__dict__.get('filename')}"
                             f" (functions: {known})")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._functions))

    @property
    def functions(self) -> dict[str, Function]:
        return dict(self._functions)

    def __call__(self, *args: Any) -> Any:
        if len(self._functions) != 1:
            raise TypeError(f"{self.filename} defines {len(self._functions)} __co__ functions "
                            f"({', '.join(self._functions)}); call one by name, "
                            "e.g. mod.<name>(...)")
        return next(iter(self._functions.values()))(*args)

    def __repr__(self) -> str:
        return f"<croqtile.Module {self.filename}: {', '.join(self._functions)}>"
