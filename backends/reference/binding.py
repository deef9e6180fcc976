"""Binding call arguments to parameters (spec 6): element types, ranks, static sizes,
symbolic dimensions read from the argument shapes, and the call-time conditions the
checker could not prove. Tensors may have any strides (the interpreter runs on
contiguous copies of strided ones: ``interpret.run``), except that a tensor written in
place must not have elements that share memory."""

from __future__ import annotations

from typing import Any

import torch

from ...frontend.sema.effects import written_parameters
from ...frontend.sema.model import CheckedFunction, SymKind
from ..layouts import shared_elements
from .arith import torch_dtype
from .errors import ArgumentError


def bind_arguments(fn: CheckedFunction, args: list[Any],
                   given: dict[str, int] | None = None) -> dict[str, int]:
    """Symbolic dimensions (named ones and anonymous ``?``) from the argument shapes,
    checked against ``given`` and against each other."""
    name = fn.node.name
    written = written_parameters(fn)
    if len(args) != len(fn.params):
        raise ArgumentError(f"{name}() takes {len(fn.params)} argument(s), got {len(args)}")
    dims: dict[str, int] = dict(given or {})
    for sym, arg in zip(fn.params, args):
        if sym.kind is SymKind.SCALAR:
            if isinstance(arg, torch.Tensor) and arg.dim() > 0:
                raise ArgumentError(f"{name}(): parameter '{sym.name}' is a scalar")
            continue
        if not isinstance(arg, torch.Tensor):
            raise ArgumentError(f"{name}(): parameter '{sym.name}' expects a torch.Tensor")
        elem = sym.elem
        assert elem is not None and sym.shape is not None
        if arg.dtype != torch_dtype(elem):
            raise ArgumentError(f"{name}(): parameter '{sym.name}' expects {elem.name}, got "
                                f"{arg.dtype}")
        if arg.dim() != len(sym.shape):
            raise ArgumentError(f"{name}(): parameter '{sym.name}' expects rank "
                                f"{len(sym.shape)}, got {arg.dim()}")
        if sym.name in written and not arg.is_contiguous():
            problem = shared_elements(arg)
            if problem is not None:
                raise ArgumentError(f"{name}(): parameter '{sym.name}' is written in place, "
                                    f"but {problem}")
        for d, (want, got) in enumerate(zip(sym.shape, arg.shape)):
            got = int(got)
            if want.value is not None:
                if want.value != got:
                    raise ArgumentError(f"{name}(): parameter '{sym.name}', dimension {d}: "
                                        f"expected {want.value}, got {got}")
                continue
            names = sorted(want.free_vars())
            if len(names) != 1:
                continue
            if names[0] in dims and dims[names[0]] != got:
                raise ArgumentError(f"{name}(): parameter '{sym.name}', dimension {d} "
                                    f"({names[0]}): expected {dims[names[0]]}, got {got}")
            if got <= 0:
                raise ArgumentError(f"{name}(): parameter '{sym.name}', dimension {d} must be "
                                    f"positive, got {got}")
            dims[names[0]] = got
    for check in fn.runtime_checks:
        if check.holds(dims) is False:
            raise ArgumentError(f"{name}(): {check.message(dims)}")
    return dims
