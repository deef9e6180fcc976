"""Binding call arguments to a function's parameters (spec 6): dtype, rank, static and
symbolic dimensions, contiguity, one device for all tensors. Every mismatch raises
``ArgumentError`` naming the parameter, the dimension, the expected and actual value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from .backends.ir.nodes import HostParam
from .errors import ArgumentError
from .frontend.sema import dtypes


@dataclass(frozen=True)
class Bound:
    args: list[Any]
    dims: dict[str, int]
    device: torch.device


def _torch_dtype(elem: str) -> torch.dtype | None:
    name = dtypes.lookup(elem).torch
    return getattr(torch, name, None) if name else None


def bind(fn_name: str, params: Sequence[HostParam], args: Sequence[Any],
         checks: Sequence[Any] = ()) -> Bound:
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise ArgumentError(f"{fn_name}() takes {len(params)} argument(s) ({names}), "
                            f"got {len(args)}")
    dims: dict[str, int] = {}
    origin: dict[str, str] = {}
    device: torch.device | None = None
    device_from = ""
    values: list[Any] = []
    for param, arg in zip(params, args):
        if param.kind == "scalar":
            values.append(_scalar(fn_name, param, arg))
            continue
        tensor = _tensor(fn_name, param, arg)
        if device is None:
            device, device_from = tensor.device, param.name
        elif tensor.device != device:
            raise ArgumentError(f"{fn_name}(): parameter '{param.name}' is on {tensor.device} but "
                                f"'{device_from}' is on {device}; all tensors must be on one device")
        _dims(fn_name, param, tensor, dims, origin)
        values.append(tensor)
    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for check in checks:
        if check.holds(dims) is False:
            raise ArgumentError(f"{fn_name}(): {check.message(dims)}")
    return Bound(values, dims, device)


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


def _tensor(fn_name: str, param: HostParam, arg: Any) -> torch.Tensor:
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
    if not arg.is_contiguous():
        raise ArgumentError(f"{fn_name}(): parameter '{param.name}' must be contiguous "
                            f"(row-major); got strides {list(arg.stride())}; pass "
                            f"'{param.name}.contiguous()'")
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
