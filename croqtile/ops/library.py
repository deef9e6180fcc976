"""``__co__`` functions as PyTorch operators (arch 4.1): ``croqtile.compile(src,
library="NS")`` registers each function as ``torch.ops.NS.<name>`` through
``torch.library``.

The schema follows torch's rules: spanned parameters are ``Tensor``, those the function
writes in place (``global`` parameters it stores into, ``frontend.sema.effects``) are
``Tensor(a!)`` with an alias set each, scalar parameters are ``float``, ``SymInt`` or
``bool``; a function returning new data returns ``Tensor``, a ``void`` one nothing, one
returning a scalar (folded from the sizes when compiling) ``SymInt`` or ``float``. The
fake (meta) implementation builds the returned tensor from the declared shape, its
symbolic dimensions bound from the arguments' sizes (symbolic sizes under dynamic
shapes), so that ``torch.library.opcheck`` passes and ``torch.compile`` traces through
the op without a graph break.

Eager calls run the compiled function's own call path (registered for every backend):
it picks the kernel of the call's shapes and launches it, or, on CPU tensors, runs it in
Triton's interpreter. Under ``torch.compile`` the operator of a function whose kernels
can be traced decomposes, on CUDA tensors, into those Triton kernels
(``croqtile.ops.traced``): Inductor sees, compiles and launches them as kernels written in
the model, and CUDA graphs capture them. Other functions and devices keep the operator
as one opaque call, each for the reason ``croqtile.ops.traced`` gives.

That is what ``torch.library.triton_op`` registers -- a custom operator, its fake
implementation, and a decomposition under ``FunctionalTensorMode`` (which falls back to
the mode's own handling, as triton_op's does under ``torch.export``) -- made here piece by
piece because triton_op itself does not fit (torch 2.13):

- it infers the schema from the function's annotations (its ``schema=`` is not used:
  ``Tensor(a!)`` comes out as ``Tensor(a1!)``), where these schemas are built from the
  checked function;
- it decomposes on every device, and runs the traced function on eager calls: CPU
  tensors then fail (a launch recorded by ``wrap_triton`` runs compiled kernels only,
  not Triton's interpreter), and eager CUDA calls would bypass croqtile's launcher;
- it finds the kernels for AOTAutograd's cache key by reading the function's source for
  ``wrap_triton(name)`` calls; generated kernels are recorded here instead (without them,
  a cached graph could run the kernels of an earlier source of the same operator).

Compiling the same source again with the same library points the operator at the new
function (a model ``torch.compile`` traced before keeps the kernels it traced); another
function under a name already taken with a different schema is an error.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

from ..backends.ir.nodes import HostParam
from ..runtime.binding import tensor_argument
from ..runtime.driver import CompiledFunction
from ..frontend import syntax as ast
from ..frontend.sema import dtypes
from ..frontend.sema.effects import written_parameters
from ..frontend.sema.symbolic import Sym

if TYPE_CHECKING:
    from .traced import TracedCall

Call = Callable[..., Any]


@dataclass
class _Operator:
    """A registered operator: its schema, the implementation it runs now, and its
    decomposition under tracing (None: opaque)."""

    schema: str
    impl: Call
    fake: Call
    traced: TracedCall | None = None


# torch.library.Library objects must stay alive for their registrations to hold
_LIBRARIES: dict[str, torch.library.Library] = {}
_OPERATORS: dict[tuple[str, str], _Operator] = {}


def register(namespace: str, compiled: CompiledFunction, impl: Call,
             traced: TracedCall | None = None) -> Any:
    """Register ``compiled`` (whose call is ``impl``) as ``torch.ops.<namespace>.<name>``
    and return that operator. ``traced`` (a ``croqtile.ops.traced.TracedCall``, or None for
    an opaque operator) is what the operator decomposes into while torch traces it."""
    if not namespace.isidentifier():
        raise ValueError(f"library={namespace!r}: a torch.library namespace must be a "
                         "Python identifier")
    name = compiled.name
    schema = schema_of(compiled)
    fake = _fake(compiled)
    key = (namespace, name)
    qualname = f"{namespace}::{name}"
    registered = _OPERATORS.get(key)
    if registered is None:
        library = _LIBRARIES.get(namespace)
        if library is None:
            library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
        library.define(name + schema)
        registered = _OPERATORS[key] = _Operator(schema, impl, fake)
        library.impl(name, lambda *args: registered.impl(*args), "CompositeExplicitAutograd")
        torch.library.register_fake(qualname, lambda *args: registered.fake(*args),
                                    lib=library)
        torch.library.register_torch_dispatch(qualname, FunctionalTensorMode,
                                              _decomposition(registered), lib=library)
    elif registered.schema != schema:
        raise ValueError(f"torch.ops.{namespace}.{name} is already registered with the schema "
                         f"{name}{registered.schema}; this '{name}' needs {name}{schema}: "
                         "give it another library= namespace")
    registered.impl, registered.fake, registered.traced = impl, fake, traced
    _record_kernels(qualname, traced.kernels() if traced is not None else [])
    return getattr(getattr(torch.ops, namespace), name)


def retrace(namespace: str, name: str, traced: TracedCall | None) -> None:
    """Make the registered operator ``torch.ops.<namespace>.<name>`` decompose under
    tracing into ``traced`` (a ``croqtile.ops.traced.TracedCall`` of another compilation of
    the same function, e.g. with tensor descriptors made in the kernel where the eager
    form takes the host's, which tracing cannot capture); None makes it opaque. Eager
    calls keep the registered function."""
    registered = _OPERATORS.get((namespace, name))
    if registered is None:
        raise KeyError(f"torch.ops.{namespace}.{name} is not registered by croqtile")
    registered.traced = traced
    _record_kernels(f"{namespace}::{name}", traced.kernels() if traced is not None else [])


def decomposition(namespace: str, name: str) -> Any:
    """What the registered operator decomposes into under tracing (None: opaque)."""
    return _OPERATORS[(namespace, name)].traced


def _decomposition(registered: _Operator) -> Call:
    """The operator under ``FunctionalTensorMode`` (AOTAutograd's tracing): its kernels
    (``registered.traced``) where the call decomposes, else the operator itself, opaque
    (the mode's own handling: functionalised, its mutations made explicit)."""

    def rule(mode: Any, op: Any, types: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        traced = registered.traced
        values = _positional(op, args, kwargs)
        if traced is None or not traced.decomposes(values):
            return mode.__torch_dispatch__(op, types, args, kwargs)
        if any(not issubclass(t, (FakeTensor, FunctionalTensor)) and t is not torch.Tensor
               for t in types):
            return NotImplemented  # another tensor subclass decides (as triton_op does)
        with mode:
            return traced(*values)

    return rule


def _positional(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The operator's arguments in schema order (keywords placed by name)."""
    if not kwargs:
        return args
    names = [a.name for a in op._schema.arguments]
    return args + tuple(kwargs[n] for n in names[len(args):])


def _record_kernels(qualname: str, kernels: list[Any]) -> None:
    """Tell AOTAutograd's cache which Triton kernels ``qualname`` runs, as
    ``torch.library.triton_op`` does: its key then includes their source, and a graph
    cached with the kernels of an earlier source of the operator is not reused."""
    from torch._library import triton as torch_triton

    table = getattr(torch_triton, "triton_ops_to_kernels", None)
    if isinstance(table, dict):  # (a torch without the table has no such cache key)
        if kernels:
            table[qualname] = list(kernels)
        else:
            table.pop(qualname, None)


def schema_of(compiled: CompiledFunction) -> str:
    """The torch.library schema of a function (without its name)."""
    checked = compiled.checked
    written = written_parameters(checked)
    aliases = iter(string.ascii_lowercase)
    parts = []
    for param in _params(compiled):
        if param.kind == "tensor":
            kind = f"Tensor({next(aliases)}!)" if param.name in written else "Tensor"
        else:
            elem = dtypes.lookup(param.elem)
            kind = "float" if elem.is_float else "bool" if elem.name == "bool" else "SymInt"
        parts.append(f"{kind} {param.name}")
    result = {"data": "Tensor", "void": "()"}.get(checked.returns)
    if result is None:  # a scalar, computed from the sizes when compiling
        ret = checked.ret_type
        result = "float" if ret is not None and ret.elem.is_float else "SymInt"
    return f"({', '.join(parts)}) -> {result}"


def _params(compiled: CompiledFunction) -> tuple[HostParam, ...]:
    return compiled.artifact.params if compiled.artifact is not None else compiled.params


def _fake(compiled: CompiledFunction) -> Call:
    """The fake implementation: a new tensor of the returned shape (dimensions bound from
    the arguments' sizes) on the arguments' device, the returned scalar (an expression of
    the sizes), or nothing."""
    checked = compiled.checked
    params = _params(compiled)
    returned = checked.returned
    if checked.returns == "scalar":
        value = _returned_scalar(compiled)
        return lambda *args: value.evaluate(_dims(_check_tensors(compiled.name, params, args),
                                                  args))
    if checked.returns != "data" or returned is None:
        return lambda *args: _check_tensors(compiled.name, params, args) and None
    dtype = getattr(torch, (returned.elem or dtypes.F32).torch or "float32")
    shape = returned.shape or ()

    def fake(*args: Any) -> torch.Tensor:
        _check_tensors(compiled.name, params, args)
        device = next(a.device for p, a in zip(params, args) if p.kind == "tensor")
        dims = _dims(params, args)
        return torch.empty([extent.evaluate(dims) for extent in shape], dtype=dtype,
                           device=device)

    return fake


def _check_tensors(name: str, params: tuple[HostParam, ...],
                   args: tuple[Any, ...]) -> tuple[HostParam, ...]:
    """Raise ``ArgumentError`` for a tensor argument of the wrong dtype or rank, as a
    call does: a traced call must fail where the eager one would, not bind the wrong
    sizes. Returns ``params``."""
    for param, arg in zip(params, args):
        if param.kind == "tensor":
            tensor_argument(name, param, arg)
    return params


def _dims(params: tuple[HostParam, ...], args: tuple[Any, ...]) -> dict[str, Any]:
    """The symbolic dimensions the arguments' sizes give (symbolic sizes when traced)."""
    dims: dict[str, Any] = {}
    for param, arg in zip(params, args):
        if param.kind == "tensor":
            for extent, size in zip(param.dims, arg.shape):
                name = _dimension(extent)
                if name is not None:
                    dims.setdefault(name, size)
    return dims


def _returned_scalar(compiled: CompiledFunction) -> Sym:
    """The value a function returning a scalar returns: the checker folds it from the
    sizes (a value computed at run time is refused when compiling)."""
    for stmt in compiled.checked.node.body.stmts:
        if isinstance(stmt, ast.ReturnStmt) and stmt.value is not None:
            info = compiled.checked.exprs.get(id(stmt.value))
            if info is not None and info.static is not None:
                return info.static
    raise ValueError(f"'{compiled.name}': no return value known when compiling")


def _dimension(extent: Sym) -> str | None:
    """The name of a parameter's dimension that is a plain symbolic size."""
    names = extent.free_vars()
    if len(names) == 1:
        name = next(iter(names))
        if extent == Sym.var(name):
            return name
    return None
