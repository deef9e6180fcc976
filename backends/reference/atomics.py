"""``__atomic_*`` built-ins (spec 5.10): read-modify-write of one element of shared or
global data, returning the old value. Instances run one at a time, so each update is
atomic by construction."""

from __future__ import annotations

from typing import Any

from ...frontend import syntax as ast
from . import arith
from .errors import InterpretError, not_implemented

_OPS = {"__atomic_add": "+", "__atomic_sub": "-", "__atomic_and": "&", "__atomic_or": "|",
        "__atomic_xor": "^"}


def atomic(it: Any, e: ast.CallExpr) -> Any:
    if not e.args:
        raise InterpretError(f"'{e.name}' needs an element to update")
    target = e.args[0]
    if isinstance(target, ast.Unary) and target.op == "&":
        target = target.operand
    if not isinstance(target, ast.ElemAccess):
        raise not_implemented(f"'{e.name}' on '{type(target).__name__}'")
    data, index = it.element_target(target)
    old = data.load(index)
    elem = data.elem
    values = [it.eval(a) for a in e.args[1:]]
    if e.name in _OPS:
        new = arith.binary(_OPS[e.name], old, values[0], elem)
    elif e.name in ("__atomic_min", "__atomic_max"):
        new = arith.builtin("__min" if e.name == "__atomic_min" else "__max",
                            [old, values[0]], elem)
    elif e.name == "__atomic_exch":
        new = values[0]
    elif e.name == "__atomic_cas":  # (address, compare, value)
        equal = arith.compare("==", old, values[0], elem)
        new = values[1] if equal else old
    else:
        raise not_implemented(f"the built-in '{e.name}'")
    data.store(index, arith.as_tensor(new, elem))
    return old
