"""``Module`` (the result of ``croqtile.compile``) and ``Function`` (one ``__co__``
function, callable with torch tensors)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterable, Protocol

from .. import settings
from ..backends import dispatch
from ..backends.bounded import LRU
from ..backends.protocol import Toolchain
from ..backends.triton.codegen import Artifact
from ..backends.triton.launcher import Launcher, PlannedLauncher, load_module
from .binding import (Bound, Signature, bind, grad_error, make_signer, positional,
                      requires_grad, scalar_converters)
from .driver import CompiledFunction
from ..errors import ArgumentError, CompileError
from ..frontend.sema.effects import written_parameters
from .lru import CacheInfo, resolve_size


@dataclass(frozen=True)
class _Warm:
    """Everything a call needs once its argument signature has bound: the host function,
    the device, the dimension values in the host function's order and the scalar
    conversions. Read on every warm call, so it holds ready values, not recipes."""

    key: tuple[Any, ...]
    artifact: Artifact
    host: Callable[..., Any]
    device: Any
    dims: tuple[int, ...]
    scalars: tuple[tuple[int, Callable[[Any], Any]], ...]
    grad: bool = False  # a tensor of the signature requires grad (see ``grad_error``)


class Plan:
    """A warm call of a ``Function`` held by its caller: calling it runs the generated
    host function for the arguments' signature with no lookup, and launches each kernel
    as the previous call of the plan did (``PlannedLauncher``). It performs none of the
    checks of a call, so it is only for arguments with the signature of the call that
    made it (``Function.plan``: tensor types, dtypes, shapes, strides, devices; scalar
    types) and the same 16-byte alignment of each tensor: its holder keys it on them
    (``croqtile.nn``'s functions do, for their hot paths). A gradient is never recorded:
    the holder calls it only when none is wanted."""

    __slots__ = ("host", "launcher", "device", "dims", "scalars")

    def __init__(self, warm: _Warm, launcher: Launcher) -> None:
        self.host, self.device, self.dims = warm.host, warm.device, warm.dims
        self.scalars = warm.scalars
        self.launcher = PlannedLauncher(launcher)

    def __call__(self, *args: Any) -> Any:
        if self.scalars:  # (as a warm call converts them: a bool to an int...)
            values = list(args)
            for index, convert in self.scalars:
                values[index] = convert(values[index])
            args = tuple(values)
        return self.host(self.launcher.begin(), self.device, *args, *self.dims)


class Function:
    """One compiled ``__co__`` function. Call it with torch tensors and Python scalars.

    A call whose arguments have the signature of an earlier successful call (same tensor
    types, dtypes, shapes, devices and layouts; same scalar types) skips ``bind``: that
    signature decides every check, so it passed again. Anything else is bound and checked
    in full, and raises the same ``ArgumentError`` as a first call would.

    Contiguous tensors run the artifact compiled for them; a call with strided tensors
    (transposed views, slices, permuted dimensions) runs a variant compiled on first use
    for the set of parameters that are strided, whose kernels take their strides (arch
    4.1); any other strides of the same parameters run the same variant.

    Variants, loaded modules and warm-call signatures are kept in least-recently-used
    tables of ``cache_size`` entries each (``croqtile.runtime.lru``; ``cache_info()`` reports
    them): a variant evicted by a sweep over many shapes is compiled again when its shape
    returns."""

    def __init__(self, compiled: CompiledFunction, cache_size: int | None = None) -> None:
        self._compiled = compiled
        self._names = tuple(p.name for p in self._host_params())
        size = resolve_size(cache_size)
        self.cache_size = size
        self._launcher = Launcher(size)
        self.name = compiled.name
        self.op: Any = None  # the torch.library operator, when compiled with library=
        self.loads = 0  # how many times a generated module was loaded (1 after a call)
        self.warm_calls = 0  # calls that skipped the argument checks (a known signature)
        self._sign = make_signer(self._host_params())
        self._written = written_parameters(compiled.checked)
        self._warm: LRU[Signature, _Warm] = LRU(size)
        # artifacts and loaded modules by variant key: the dimension values of a function
        # specialised per shape, then the strided parameters when there are any (() when
        # neither: the compiled artifact, never evicted). A variant evicted takes its
        # module and the warm calls that ran it along.
        self._artifacts: LRU[tuple[Any, ...], Artifact] = LRU(size, self._evicted)
        self._modules: LRU[tuple[Any, ...], ModuleType] = LRU(size, self._unloaded)
        self._last: Artifact | None = None
        # held while a variant is compiled or a module loaded: threads making their first
        # calls at once compile and load each variant once, and none sees it half made
        self._making = threading.Lock()

    @property
    def triton_source(self) -> str:
        """The generated Python module: the Triton kernels and the host function. A
        function specialised per call on its dimensions has one per shape, and calls with
        strided tensors run a variant of their own: this is the last one called (a
        comment saying so before the first call of a specialised function)."""
        last = self._last or self._compiled.artifact
        if last is not None:
            return last.source
        dims = ", ".join(self._compiled.specialize_on)
        return (f"# '{self.name}' is compiled per call, specialised on the dimensions {dims}; "
                "call it to generate its kernels\n")

    @property
    def cuda_source(self) -> str | None:
        """The source of the kernel another backend than Triton runs for the function
        where the GPU suits it (``backend="cuda"``: the tcgen05 GEMM generated for
        ``target="sm_100a"``, the Hopper GEMM otherwise); None for a Triton-only function."""
        plan = self._compiled.plan
        return plan.source() if plan is not None else None

    @property
    def specialize_on(self) -> tuple[str, ...]:
        """Dimensions the kernels are specialised on (one compile per distinct value)."""
        return self._compiled.specialize_on

    @property
    def compiled(self) -> CompiledFunction:
        """What the compiler made of the function (its checked form, parameters, kernels)."""
        return self._compiled

    @property
    def params(self) -> list[str]:
        return list(self._names)

    @property
    def launches(self) -> int:
        return self._launcher.launches

    @property
    def launcher(self) -> Launcher:
        """The launcher of this function's calls (compiled kernels, stage counts)."""
        return self._launcher

    def host(self) -> tuple[Artifact, Callable[..., Any]]:
        """The artifact and generated host function of a function compiled once for all
        shapes, loaded now if no call has loaded it (``ValueError`` for a function
        compiled per call shape, which has one per shape)."""
        artifact = self._compiled.artifact
        if artifact is None:
            raise ValueError(f"'{self.name}' is compiled per call shape: it has no host "
                             "function for all shapes")
        return artifact, getattr(self._load((), artifact), artifact.function)

    def _host_params(self) -> tuple[Any, ...]:
        artifact = self._compiled.artifact
        return artifact.params if artifact is not None else self._compiled.params

    def _load(self, key: tuple[Any, ...], artifact: Artifact) -> ModuleType:
        module = self._modules.get(key)
        if module is None:
            with self._making:
                module = self._modules.peek(key)  # (another thread may have loaded it)
                if module is None:
                    module = load_module(artifact, settings.cache_dir())
                    self._modules[key] = module
                    self.loads += 1
        return module

    def _evicted(self, key: tuple[Any, ...], artifact: Artifact) -> None:
        """A variant left the table: its module and warm calls go too."""
        del artifact
        module = self._modules.pop(key)
        if module is not None:
            self._unloaded(key, module)

    def _unloaded(self, key: tuple[Any, ...], module: ModuleType) -> None:
        """A module left the table: the warm calls that ran its host function and what
        the launcher remembered of its kernels go too."""
        self._warm.drop_if(lambda _, warm: warm.key == key)
        self._launcher.forget(module)

    def _variant(self, key: tuple[Any, ...]) -> Artifact | None:
        if key == () and self._compiled.artifact is not None:
            return self._compiled.artifact
        return self._artifacts.get(key)

    def cache_info(self) -> CacheInfo:
        """The tables of this function (see ``croqtile.runtime.lru``): warm-call signatures'
        hits and misses, and each table's entries against its size."""
        warm = self._warm.info()
        return CacheInfo(warm.hits, warm.misses, warm.size, self.cache_size,
                         {"signatures": warm, "variants": self._artifacts.info(),
                          "modules": self._modules.info(),
                          "launches": self._launcher.info()})

    def _bind(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any]:
        """Bind the arguments; the key of the artifact for their shapes and layouts
        (compiled now when it is new)."""
        key, bound, _ = self._bind_variant(args)
        return key, bound

    def _bind_variant(self, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, Artifact]:
        """``_bind``, and the artifact of the key (held: the table may evict it)."""
        compiled = self._compiled
        checks = compiled.artifact.checks if compiled.artifact is not None else \
            compiled.checked.runtime_checks
        bound = bind(self.name, self._host_params(), args, checks, self._written)
        layout: tuple[Any, ...] = (bound.strided,) if bound.strided else ()
        if compiled.artifact is not None:
            key = layout

            def make() -> Artifact:
                assert compiled.restride is not None
                return compiled.restride(bound.strided)
        else:
            dims = {name: bound.dims[name] for name in compiled.specialize_on
                    if name in bound.dims}
            key = tuple(dims.get(name, 0) for name in compiled.specialize_on) + layout

            def make() -> Artifact:
                return self._specialise(dims, bound.strided)
        artifact = self._variant(key)
        if artifact is None:
            with self._making:
                artifact = self._artifacts.peek(key)
                if artifact is None:
                    artifact = make()
                    self._artifacts[key] = artifact
        self._last = artifact
        return key, bound, artifact

    def _specialise(self, dims: dict[str, int], strided: frozenset[str]) -> Artifact:
        """The artifact for these dimensions and strided parameters, compiled now."""
        assert self._compiled.specialize is not None
        try:
            return self._compiled.specialize(dims, strided)
        except CompileError as err:
            if all(d.code.startswith(("CQ07", "CQ09")) for d in err.diagnostics):
                raise  # a construct the backend cannot lower, whatever the shapes
            raise ArgumentError(_specialisation_problem(self.name, dims, err)) from None

    def artifact_for(self, *args: Any) -> Artifact:
        """The generated artifact that a call with ``args`` runs (compiled if needed)."""
        return self._bind_variant(args)[2]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function: arguments by position or by parameter name, as a Python
        function takes them. Tensors that require grad while grad mode is on are an
        ``ArgumentError`` unless a backward is registered for the function's operator
        (``library=`` and ``torch.library.register_autograd``): a result without a
        gradient path would silently break training."""
        if kwargs:
            args = positional(self.name, self._names, args, kwargs)
        if self.op is not None:  # (its implementation calls `call`)
            return self.op(*args)
        return self.call_signed(self._sign(args), args)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """The call itself, not through the registered operator."""
        if kwargs:
            args = positional(self.name, self._names, args, kwargs)
        return self.call_signed(self._sign(args), args)

    def plan(self, *args: Any) -> Plan | None:
        """A ``Plan`` of warm calls with the signature of ``args``, when a call with it
        ran before (None otherwise). Like a plan's calls, the arguments may require
        grad only where none is recorded (grad mode off): the plan's holder checks."""
        signature = self._sign(args)
        warm = self._warm.get(signature) if signature is not None else None
        return None if warm is None else Plan(warm, self._launcher)

    def call_signed(self, signature: Signature | None, args: tuple[Any, ...]) -> Any:
        """A call whose arguments' signature (``self._sign(args)``) the caller computed
        (an autotuned function, which picks this function by it)."""
        warm = self._warm.get(signature) if signature is not None else None
        if warm is None:
            return self._cold_call(args, signature)
        if warm.grad:
            error = grad_error(self.name, self._names, args, self.op)
            if error is not None:
                raise error
        self.warm_calls += 1
        self._last = warm.artifact
        if warm.scalars:
            values = list(args)
            for index, convert in warm.scalars:
                values[index] = convert(values[index])
            args = tuple(values)
        return warm.host(self._launcher, warm.device, *args, *warm.dims)

    def _cold_call(self, args: tuple[Any, ...], signature: Signature | None) -> Any:
        """A call with a new argument signature: full checks, then remember the result."""
        key, bound, artifact = self._bind_variant(args)
        error = grad_error(self.name, self._names, args, self.op)
        if error is not None:
            raise error
        warm = self._remember(key, artifact, bound, args)
        if signature is not None:
            self._warm[signature] = warm
        return warm.host(self._launcher, warm.device, *bound.args, *warm.dims)

    def _remember(self, key: tuple[Any, ...], artifact: Artifact, bound: Bound,
                  args: tuple[Any, ...]) -> _Warm:
        """What later calls with these arguments' signature reuse, read off this binding."""
        host = getattr(self._load(key, artifact), artifact.function)
        if self._compiled.plan is not None:  # another backend's kernel where a call suits it
            host = dispatch.host(self._compiled.plan, self.name, args, bound.device, host,
                                 _toolchain)
        dims = tuple(bound.dims[d] for d in artifact.dims)
        scalars = scalar_converters(self.name, self._host_params(), args)
        return _Warm(key, artifact, host, bound.device, dims, scalars, requires_grad(args))

    def __repr__(self) -> str:
        return f"<croqtile.Function {self.name}({', '.join(self.params)})>"


def _toolchain() -> Toolchain:
    """What building another backend's kernel reads from the environment."""
    return Toolchain(settings.cache_dir(), settings.nvcc())


def _specialisation_problem(name: str, dims: dict[str, int], err: CompileError) -> str:
    """The message of an ``ArgumentError`` for shapes that break a rule of the kernel
    compiled for them (too many threads, too much shared memory...)."""
    values = ", ".join(f"{d} = {v}" for d, v in dims.items() if not d.startswith("__"))
    problems = "; ".join(f"{d.code} {d.message} ({d.location.filename}:{d.location.line})"
                         for d in err.diagnostics)
    return (f"{name}(): the kernel is compiled for the argument shapes ({values}), and with "
            f"these dimensions: {problems}")


class ModuleFunction(Protocol):
    """A function of a ``Module``: a ``Function``, or an autotuned ``tuning.TunedFunction``
    (which holds one ``Function`` per configuration)."""

    name: str
    op: Any  # the torch.library operator, when compiled with library=

    @property
    def compiled(self) -> CompiledFunction: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def call(self, *args: Any, **kwargs: Any) -> Any: ...


class Module:
    """The ``__co__`` functions of one source, as attributes."""

    def __init__(self, functions: Iterable[ModuleFunction], filename: str) -> None:
        self._functions = {f.name: f for f in functions}
        self.filename = filename

    def __getattr__(self, name: str) -> ModuleFunction:
        functions: dict[str, ModuleFunction] = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        known = ", ".join(functions) or "none"
        raise AttributeError(f"no __co__ function named '{name}' in {self.__dict__.get('filename')}"
                             f" (functions: {known})")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._functions))

    @property
    def functions(self) -> dict[str, ModuleFunction]:
        return dict(self._functions)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(self._functions) != 1:
            raise TypeError(f"{self.filename} defines {len(self._functions)} __co__ functions "
                            f"({', '.join(self._functions)}); call one by name, "
                            "e.g. mod.<name>(...)")
        return next(iter(self._functions.values()))(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<croqtile.Module {self.filename}: {', '.join(self._functions)}>"
