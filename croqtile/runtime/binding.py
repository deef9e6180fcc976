"""Binding call arguments to a function's parameters (spec 6): dtype, rank, static and
symbolic dimensions, one device for all tensors, and the layout of each tensor
(contiguous or strided: arch 4.1). Every mismatch raises ``ArgumentError`` naming the
parameter, the dimension, the expected and actual value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..backends.ir.nodes import HostParam
from ..backends.layouts import shared_elements
from ..errors import ArgumentError
from ..frontend.sema import dtypes


@dataclass(frozen=True)
class Bound:
    args: list[Any]
    dims: dict[str, int]
    device: torch.device
    strided: frozenset[str] = frozenset()  # the tensor parameters that are not contiguous


Signature = tuple[Any, ...]
Signer = Callable[[Sequence[Any]], "Signature | None"]


def make_signer(params: Sequence[HostParam]) -> Signer:
    """A function from call arguments to a hashable signature holding everything ``bind``
    reads: per tensor its type, dtype, shape (rank and dimensions), device, layout
    (True when contiguous, else its strides: the written-in-place check reads them) and
    whether it requires grad (``grad_error``); per scalar its type. Two argument lists
    with the same signature bind alike (same checks passed or failed, same dimensions,
    same device, same strided tensors), so a signature that bound once can skip the
    checks. ``None`` (never cached) for a wrong argument
    count or an object that lacks a tensor's attributes: those take the checked path,
    which explains them."""
    tensor = tuple(p.kind != "scalar" for p in params)
    count = len(tensor)

    def sign(args: Sequence[Any]) -> Signature | None:
        if len(args) != count:
            return None
        try:
            return tuple([(type(a), a.dtype, a.shape, a.device, a.is_contiguous() or a.stride(),
                           a.requires_grad) if t else type(a) for a, t in zip(args, tensor)])
        except Exception:  # not a tensor: the checked path names the mistake
            return None

    def sign_tensors(args: Sequence[Any]) -> Signature | None:
        """``sign`` for tensors only (most kernels): no per-argument kind test."""
        if len(args) != count:
            return None
        try:
            return tuple([(type(a), a.dtype, a.shape, a.device, a.is_contiguous() or a.stride(),
                           a.requires_grad) for a in args])
        except Exception:
            return None

    return sign_tensors if all(tensor) else sign


_MISSING = object()


def positional(fn_name: str, names: Sequence[str], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The arguments of a call that names some by keyword, in parameter order (bound as
    Python binds a function's arguments); a keyword that is not a parameter, a parameter
    given twice or one left out is an ``ArgumentError`` naming the function and it."""
    listed = ", ".join(names)
    if len(args) > len(names):
        raise ArgumentError(f"{fn_name}() takes {len(names)} argument(s) ({listed}), got "
                            f"{len(args)} positional and {len(kwargs)} by keyword")
    values: list[Any] = list(args) + [_MISSING] * (len(names) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError(f"{fn_name}() got an unexpected keyword argument '{key}' "
                                f"(its parameters: {listed})")
        index = names.index(key)
        if index < len(args):
            raise ArgumentError(f"{fn_name}() got multiple values for parameter '{key}' "
                                f"(argument {index + 1} by position, and by keyword)")
        values[index] = value
    missing = [name for name, value in zip(names, values) if value is _MISSING]
    if missing:
        raise ArgumentError(f"{fn_name}() is missing the argument(s) for "
                            f"{', '.join(repr(n) for n in missing)} (its parameters: {listed})")
    return tuple(values)


def requires_grad(args: Sequence[Any]) -> bool:
    """Whether a tensor among ``args`` requires grad."""
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def grad_error(fn_name: str, names: Sequence[str], args: Sequence[Any],
               op: Any = None) -> ArgumentError | None:
    """The error of a call that wants a gradient (grad mode on and an argument that
    requires grad) from a function that has none (``op``: its registered operator, whose
    backward, when registered, runs the call with grad mode off): a result without a
    gradient path would silently break training. None when the call wants no gradient."""
    if not torch.is_grad_enabled():
        return None
    for name, arg in zip(names, args):
        if isinstance(arg, torch.Tensor) and arg.requires_grad:
            how = (f"register one for {op} with torch.library.register_autograd" if op is not None
                   else f"compile with library='NS' and register one for torch.ops.NS.{fn_name} "
                   "with torch.library.register_autograd")
            return ArgumentError(
                f"{fn_name}(): argument '{name}' requires grad, but {fn_name} has no backward, "
                "so its result would have no gradient path. For inference, call it under "
                f"torch.no_grad() or pass {name}.detach(); for gradients, {how}")
    return None


def scalar_converters(fn_name: str, params: Sequence[HostParam],
                      args: Sequence[Any]) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
    """Per scalar parameter whose value ``bind`` changes, its position and the change,
    for arguments of the types in ``args`` (which bound without error). Plain ints for
    integer parameters pass as they are and are left out."""
    converters: list[tuple[int, Callable[[Any], Any]]] = []
    for index, (param, arg) in enumerate(zip(params, args)):
        if param.kind != "scalar":
            continue
        kind = type(arg)
        if dtypes.lookup(param.elem).is_float and kind in (int, float):
            converters.append((index, float))
        elif kind is bool:
            converters.append((index, int))
        elif kind is not int:  # a 0-dim tensor, a numpy number...: the full check each time
            converters.append((index, _ScalarCheck(fn_name, param)))
    return tuple(converters)


@dataclass(frozen=True)
class _ScalarCheck:
    """``_scalar`` with its parameter bound: it reads the value (a tensor's item), which a
    signature does not capture, so it runs on every call."""

    fn_name: str
    param: HostParam

    def __call__(self, arg: Any) -> int | float:
        return _scalar(self.fn_name, self.param, arg)


def _torch_dtype(elem: str) -> torch.dtype | None:
    name = dtypes.lookup(elem).torch
    return getattr(torch, name, None) if name else None


def mixed_devices(fn_name: str, param: str, device: Any, first: str,
                  first_device: Any) -> ArgumentError:
    """The error of a call whose tensors are on two devices (one kernel launch runs on
    one device): it names both parameters and both devices."""
    return ArgumentError(f"{fn_name}(): parameter '{param}' is on {device} but '{first}' is "
                         f"on {first_device}; all tensors of a call must be on one device "
                         f"(move them with .to({str(first_device)!r}))")


def bind(fn_name: str, params: Sequence[HostParam], args: Sequence[Any],
         checks: Sequence[Any] = (), written: frozenset[str] = frozenset()) -> Bound:
    """The arguments checked against ``params``; ``written``: the tensor parameters the
    function writes in place (their elements must not share memory)."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise ArgumentError(f"{fn_name}() takes {len(params)} argument(s) ({names}), "
                            f"got {len(args)}")
    dims: dict[str, int] = {}
    origin: dict[str, str] = {}
    device: torch.device | None = None
    device_from = ""
    values: list[Any] = []
    strided: list[str] = []
    for param, arg in zip(params, args):
        if param.kind == "scalar":
            values.append(_scalar(fn_name, param, arg))
            continue
        tensor = tensor_argument(fn_name, param, arg)
        if not tensor.is_contiguous():
            strided.append(param.name)
            if param.name in written:
                problem = shared_elements(tensor)
                if problem is not None:
                    raise ArgumentError(f"{fn_name}(): parameter '{param.name}' is written in "
                                        f"place, but {problem}")
        if device is None:
            device, device_from = tensor.device, param.name
        elif tensor.device != device:
            raise mixed_devices(fn_name, param.name, tensor.device, device_from, device)
        _dims(fn_name, param, tensor, dims, origin)
        values.append(tensor)
    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for check in checks:
        if check.holds(dims) is False:
            raise ArgumentError(f"{fn_name}(): {check.message(dims)}")
    return Bound(values, dims, device, frozenset(strided))


def _scalar(fn_name: str, param: HostParam, arg: Any) -> int | float:
    elem = dtypes.lookup(param.elem)
    if isinstance(arg, torch.Tensor) and arg.numel() == 1 and arg.dim() == 0:
        arg = arg.item()
    if elem.is_float:
        if isinstance(arg, bool) or not isinstance(arg, (int, float)):
            raise ArgumentError(f"{fn_name}(): parameter '{param.name}' expects a Python number "
                                f"({param.elem}), got {type(arg).__name__}")
        return float(arg)
    if isinstance(arg, bool) and param.elem == "bool":
        return int(arg)
    if not isinstance(arg, int) or isinstance(arg, bool):
        raise ArgumentError(f"{fn_name}(): parameter '{param.name}' expects an integer "
                            f"({param.elem}), got {type(arg).__name__}")
    return arg


def tensor_argument(fn_name: str, param: HostParam, arg: Any) -> torch.Tensor:
    """``arg`` checked as the tensor of ``param``: a tensor of its dtype and rank (also
    what the fake implementation of a registered op checks: sizes may be symbolic there)."""
    if not isinstance(arg, torch.Tensor):
        raise ArgumentError(f"{fn_name}(): parameter '{param.name}' expects a torch.Tensor of "
                            f"{param.elem}, got {type(arg).__name__}")
    expected = _torch_dtype(param.elem)
    if arg.dtype != expected:
        raise ArgumentError(f"{fn_name}(): parameter '{param.name}' expects dtype {expected} "
                            f"({param.elem}), got {arg.dtype}")
    if arg.dim() != len(param.dims):
        raise ArgumentError(f"{fn_name}(): parameter '{param.name}' expects rank "
                            f"{len(param.dims)}, got a tensor of rank {arg.dim()} "
                            f"(shape {list(arg.shape)})")
    return arg


def _dims(fn_name: str, param: HostParam, tensor: torch.Tensor, dims: dict[str, int],
          origin: dict[str, str]) -> None:
    for d, (want, got) in enumerate(zip(param.dims, tensor.shape)):
        got = int(got)
        if want.value is not None:
            if got != want.value:
                raise ArgumentError(f"{fn_name}(): parameter '{param.name}', dimension {d}: "
                                    f"expected {want.value}, got {got}")
            continue
        names = sorted(want.free_vars())
        if len(names) != 1:
            continue
        name = names[0]
        if name in dims and dims[name] != got:
            raise ArgumentError(f"{fn_name}(): parameter '{param.name}', dimension {d} ({name}): "
                                f"expected {dims[name]} (bound by {origin[name]}), got {got}")
        if got <= 0:
            raise ArgumentError(f"{fn_name}(): parameter '{param.name}', dimension {d} ({name}) "
                                f"must be positive, got {got}")
        dims.setdefault(name, got)
        origin.setdefault(name, f"'{param.name}'")
