"""Constructors for tile IR expressions: axes are merged by name, constants fold, and
affine index expressions can be split into per-axis coefficients (``linearize``)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, fields, replace
from typing import Any, overload

from ...frontend.sema.dtypes import ElemType
from ...frontend.sema.symbolic import Sym
from . import nodes as ir

I32 = ir.DType.I32
I1 = ir.DType.I1

_ELEM_TO_DTYPE = {
    "f64": ir.DType.F64, "f32": ir.DType.F32, "tf32": ir.DType.F32, "f16": ir.DType.F16,
    "bf16": ir.DType.BF16, "f8_e4m3": ir.DType.F8E4, "f8_e5m2": ir.DType.F8E5,
    "s64": ir.DType.I64, "s32": ir.DType.I32, "int": ir.DType.I32, "s16": ir.DType.I16,
    "s8": ir.DType.I8, "u64": ir.DType.U64, "u32": ir.DType.U32, "u16": ir.DType.U16,
    "u8": ir.DType.U8, "bool": ir.DType.I1,
}


def dtype_of(elem: ElemType) -> ir.DType:
    return _ELEM_TO_DTYPE[elem.name]


def const(value: int | float | bool, dtype: ir.DType = I32) -> ir.Const:
    return ir.Const((), dtype, value)


def var(name: str, dtype: ir.DType = I32, axes: tuple[ir.Axis, ...] = (),
        high: int | None = None) -> ir.Var:
    return ir.Var(axes, dtype, name, high)


def axis_index(axis: ir.Axis) -> ir.AxisIndex:
    return ir.AxisIndex((axis,), I32, axis)


def merged(*exprs: ir.Expr) -> tuple[ir.Axis, ...]:
    axes: set[ir.Axis] = set()
    for e in exprs:
        axes.update(e.axes)
    return ir.sort_axes(axes)


def is_const(e: ir.Expr, value: int | float | None = None) -> bool:
    if not isinstance(e, ir.Const):
        return False
    return value is None or e.value == value


_FOLD = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b if b else None, "%": lambda a, b: a % b if b else None,
}

_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


def binary(op: str, lhs: ir.Expr, rhs: ir.Expr, dtype: ir.DType | None = None) -> ir.Expr:
    """``lhs op rhs`` with constant folding and the identities x+0, x*1, x*0 and, for
    booleans, true & b."""
    if dtype is None:
        dtype = I1 if op in _COMPARE else lhs.dtype
    if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const) and op in _FOLD \
            and not dtype.is_float:
        value = _FOLD[op](lhs.value, rhs.value)
        if value is not None:
            return const(value, dtype)
    if op == "+":
        if is_const(rhs, 0):
            return lhs
        if is_const(lhs, 0):
            return rhs
    if op == "-" and is_const(rhs, 0):
        return lhs
    if op == "*":
        if is_const(rhs, 1):
            return lhs
        if is_const(lhs, 1):
            return rhs
        if (is_const(rhs, 0) or is_const(lhs, 0)) and not dtype.is_float:
            return const(0, dtype)
    if op == "&" and dtype == I1:  # true & b is b for booleans only: x & 1 is x's low bit
        if is_const(lhs, True) and rhs.dtype == I1:
            return rhs
        if is_const(rhs, True) and lhs.dtype == I1:
            return lhs
    return ir.Binary(merged(lhs, rhs), dtype, op, lhs, rhs)


def add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return binary("+", a, b)


def mul(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return binary("*", a, b)


@overload
def and_(a: ir.Expr, b: ir.Expr | None) -> ir.Expr: ...
@overload
def and_(a: ir.Expr | None, b: ir.Expr) -> ir.Expr: ...
@overload
def and_(a: ir.Expr | None, b: ir.Expr | None) -> ir.Expr | None: ...


def and_(a: ir.Expr | None, b: ir.Expr | None) -> ir.Expr | None:
    """Conjunction of masks (None: no mask); a term already present is not repeated."""
    if a is None:
        return b
    if b is None:
        return a
    present = {key(t) for t in _conjuncts(a)}
    for term in _conjuncts(b):
        if key(term) not in present:
            present.add(key(term))
            a = binary("&", a, term, I1)
    return a


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Binary) and e.op == "&" and e.dtype is I1:
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


# each expression's key, made once (the nodes are immutable): a chain of conjunctions is
# keyed again at every term ``and_`` adds
_KEYS: weakref.WeakKeyDictionary[ir.Expr, tuple[object, ...]] = weakref.WeakKeyDictionary()


def key(e: ir.Expr) -> tuple[object, ...]:
    """A structural identity of an expression (IR nodes compare by identity)."""
    found = _KEYS.get(e)
    if found is None:
        found = _KEYS[e] = _key(e)
    return found


def _key(e: ir.Expr) -> tuple[object, ...]:
    parts: list[object] = [type(e).__name__, e.dtype]
    for f in fields(e):
        if f.name in ("axes", "dtype"):
            continue
        value = getattr(e, f.name)
        if isinstance(value, ir.Expr):
            parts.append(key(value))
        elif isinstance(value, tuple):
            parts.append(tuple(key(v) if isinstance(v, ir.Expr) else v for v in value))
        else:
            parts.append(value)
    return tuple(parts)


def cast(e: ir.Expr, dtype: ir.DType) -> ir.Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, ir.Const):
        value = e.value
        if dtype.is_float:
            value = float(value)
        elif dtype is I1:
            value = bool(value)
        else:
            value = int(value)
        return ir.Const((), dtype, value)
    return ir.Cast(e.axes, dtype, e)


def sym(value: Sym) -> ir.Expr:
    """An IR expression for a host-computable integer (constants or dimension args)."""
    if value.value is not None:
        return const(value.value)
    return var(value.render(ir.dim_var_name))


def sym_names(value: Sym) -> set[str]:
    return value.free_vars()


# ---------------------------------------------------------------------- affine analysis


@dataclass(frozen=True)
class Linear:
    """``sum(coef * leaf) + rest``: leaves are axis indices and collapsed loop indices
    that occur linearly with constant coefficients; ``rest`` has none of them. With
    ``groups`` asked for, ``axis // size`` is a leaf too (the instance that owns a lane of
    a fused row axis, see ``state.FusedRows``), keyed by ``(axis, size)``; with
    ``residues``, so is ``axis % size`` (a lane's row within its instance)."""

    axes: dict[ir.Axis, int]
    collapsed: dict[str, tuple[int, int]]  # name -> (coefficient, extent)
    rest: ir.Expr
    groups: dict[tuple[ir.Axis, int], int] = field(default_factory=dict)
    residues: dict[tuple[ir.Axis, int], int] = field(default_factory=dict)

    def has_leaves(self) -> bool:
        return bool(self.axes or self.collapsed or self.groups or self.residues)

    def upper_bound(self) -> ir.Expr | None:
        """The largest value over every valid lane (leaves range from 0 up: an axis index
        to its extent, a group to its count, a residue to its size), or None when the rest
        differs between lanes or a loop is collapsed."""
        if self.collapsed or self.rest.axes or self.rest.dtype.is_float:
            return None
        top = 0
        ranges = [(coef, axis.extent - 1) for axis, coef in self.axes.items()]
        ranges += [(coef, -(-axis.extent // size) - 1) for (axis, size), coef in self.groups.items()]
        ranges += [(coef, size - 1) for (_, size), coef in self.residues.items()]
        for coef, high in ranges:
            top += max(coef * high, 0)
        return add(self.rest, const(top, self.rest.dtype))


def linearize(e: ir.Expr, groups: bool = False, residues: bool = False) -> Linear | None:
    """Split ``e`` into leaves and rest; None when a leaf occurs non-linearly."""
    found = Linear({}, {}, const(0), {}, {})
    rest = _linear(e, 1, found, groups, residues)
    if rest is None or _has_leaf(rest):
        return None
    return replace(found, rest=rest)


def _part(e: ir.Expr, op: str) -> tuple[ir.Axis, int] | None:
    """``(axis, size)`` when ``e`` is ``axis op size`` (``//`` or ``%``)."""
    if isinstance(e, ir.Binary) and e.op == op and isinstance(e.lhs, ir.AxisIndex) \
            and isinstance(e.rhs, ir.Const):
        return e.lhs.axis, int(e.rhs.value)
    return None


def _linear(e: ir.Expr, scale: int, found: Linear, groups: bool,
            residues: bool) -> ir.Expr | None:
    if isinstance(e, ir.AxisIndex):
        found.axes[e.axis] = found.axes.get(e.axis, 0) + scale
        return const(0)
    if isinstance(e, ir.Collapsed):
        coef, _ = found.collapsed.get(e.name, (0, e.extent))
        found.collapsed[e.name] = (coef + scale, e.extent)
        return const(0)
    for wanted, op, leaves in ((groups, "//", found.groups), (residues, "%", found.residues)):
        part = _part(e, op) if wanted else None
        if part is not None:
            leaves[part] = leaves.get(part, 0) + scale
            return const(0)
    if isinstance(e, ir.Binary) and e.op in ("+", "-"):
        lhs = _linear(e.lhs, scale, found, groups, residues)
        rhs = _linear(e.rhs, scale if e.op == "+" else -scale, found, groups, residues)
        if lhs is None or rhs is None:
            return None
        return binary(e.op, lhs, rhs)
    if isinstance(e, ir.Binary) and e.op == "*":
        if isinstance(e.rhs, ir.Const) and _has_leaf(e.lhs):
            inner = _linear(e.lhs, scale * int(e.rhs.value), found, groups, residues)
            return None if inner is None else mul(inner, e.rhs)
        if isinstance(e.lhs, ir.Const) and _has_leaf(e.rhs):
            inner = _linear(e.rhs, scale * int(e.lhs.value), found, groups, residues)
            return None if inner is None else mul(e.lhs, inner)
    if _has_leaf(e):
        return None
    return e


def _has_leaf(e: ir.Expr) -> bool:
    if isinstance(e, (ir.AxisIndex, ir.Collapsed)):
        return True
    return any(_has_leaf(child) for child in children(e))


def children(e: ir.Expr) -> list[ir.Expr]:
    """The sub-expressions of ``e`` (every field that holds an expression)."""
    found: list[ir.Expr] = []
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, ir.Expr):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(v for v in value if isinstance(v, ir.Expr))
    return found


def next_pow2(n: int) -> int:
    size = 1
    while size < n:
        size *= 2
    return size


def substitute(e: ir.Expr, name: str, value: ir.Expr) -> ir.Expr:
    """``e`` with the variable ``name`` replaced by ``value`` (an expression without axes)."""
    if isinstance(e, ir.Var) and e.name == name:
        return value
    if isinstance(e, ir.Binary):  # rebuilt through `binary` so that constants fold again
        lhs, rhs = substitute(e.lhs, name, value), substitute(e.rhs, name, value)
        if lhs is e.lhs and rhs is e.rhs:
            return e
        return binary(e.op, lhs, rhs, e.dtype)
    changes: dict[str, Any] = {}  # field -> its new value (of that field's type)
    for f in fields(e):
        if f.name in ("axes", "dtype"):
            continue
        old = getattr(e, f.name)
        if isinstance(old, ir.Expr):
            new = substitute(old, name, value)
            if new is not old:
                changes[f.name] = new
        elif isinstance(old, tuple) and any(isinstance(v, ir.Expr) for v in old):
            items = tuple(substitute(v, name, value) if isinstance(v, ir.Expr) else v
                          for v in old)
            if any(a is not b for a, b in zip(items, old)):
                changes[f.name] = items
    return replace(e, **changes) if changes else e


def mentions(e: ir.Expr, name: str) -> bool:
    """Whether the variable ``name`` occurs in ``e``."""
    if isinstance(e, ir.Var):
        return e.name == name
    return any(mentions(child, name) for child in children(e))
