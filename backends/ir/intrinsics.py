"""CUDA intrinsics of inlined device helpers (``frontend.device_helpers``) as tile IR: warp
shuffles as gathers along a ``: thread`` level's lane axis, and the bit built-ins
``__popc`` / ``__clz`` as formulas.

Triton has no shuffles: a ``: thread`` level is one tensor axis of the program, so lane
``l`` reading lane ``j``'s value is ``tl.gather`` along that axis with index ``j``. Lanes
are grouped as CUDA groups them: a warp of 32 and, inside it, segments of ``width`` lanes.
A lane whose source falls outside its segment (or past the level's extent) keeps its own
value, as ``shfl.sync`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...frontend import syntax as ast
from ...frontend.device_helpers import SHUFFLES
from . import build as b
from . import nodes as ir
from .errors import unsupported
from .values import Bounded

if TYPE_CHECKING:
    from .state import KernelState

_WARP = 32


def shuffle(kl: KernelState, call: ast.CallExpr) -> ir.Expr:
    """``__shfl_<kind>_sync(v, k[, width])`` (the member mask dropped by the inliner)."""
    kind = SHUFFLES[call.name][0]
    value = kl.value(call.args[0])
    k = b.cast(kl.value(call.args[1]), b.I32)
    width = b.cast(kl.value(call.args[2]), b.I32) if len(call.args) > 2 else b.const(_WARP)
    lane_sym = kl.fn.lanes[id(call)]
    lane = kl.env.get(lane_sym)
    if not isinstance(lane, Bounded):
        raise unsupported(call.span, f"a warp shuffle over the lanes of '{lane_sym.name}'")
    if isinstance(lane.expr, ir.Const) or not value.axes:
        return value  # (one lane, or the same value in every lane)
    if not isinstance(lane.expr, ir.AxisIndex):
        raise unsupported(call.span, f"a warp shuffle over the lanes of '{lane_sym.name}'",
                          "shuffle inside a ': thread' level that is its own tensor axis")
    axis = lane.expr.axis
    if axis not in value.axes:
        return value
    l = lane.expr
    if isinstance(width, ir.Const) and isinstance(width.value, int):
        width = b.const(min(width.value, _WARP))
    else:
        width = ir.Call(width.axes, b.I32, "minimum", (width, b.const(_WARP)))
    seg = b.binary("-", l, b.binary("%", l, width))  # the first lane of l's segment
    end = b.add(seg, width)
    if kind == "xor":
        j = b.binary("^", l, k)
        valid = b.and_(b.binary(">=", j, seg), b.binary("<", j, end))
    elif kind == "down":
        j = b.add(l, k)
        valid = b.binary("<", j, end)
    elif kind == "up":
        j = b.binary("-", l, k)
        valid = b.binary(">=", j, seg)
    else:  # idx: lane k of the segment
        j = b.add(seg, b.binary("%", k, width))
        valid = b.binary("<", j, end)
    if axis.padded:
        valid = b.and_(valid, b.binary("<", j, b.const(axis.extent)))
    source = ir.Where(b.merged(valid, j, l), b.I32, valid, j, l)
    axes = ir.sort_axes(set(value.axes) | set(source.axes))
    return ir.Gather(axes, value.dtype, value, source, axis)


def bits(kl: KernelState, name: str, arg: ir.Expr) -> ir.Expr:
    """``__popc(x)`` (set bits) or ``__clz(x)`` (leading zero bits) of a 32-bit ``x``."""
    u32 = ir.DType.U32
    x = kl.let("bits", b.cast(arg, u32))

    def c(value: int) -> ir.Expr:
        return b.const(value, u32)

    def op(o: str, lhs: ir.Expr, rhs: ir.Expr) -> ir.Expr:
        return b.binary(o, lhs, rhs, u32)

    if name == "__popc":  # the SWAR count: pairs, nibbles, bytes, then their sum
        x = kl.let("bits", op("-", x, op("&", op(">>", x, c(1)), c(0x55555555))))
        x = kl.let("bits", op("+", op("&", x, c(0x33333333)),
                              op("&", op(">>", x, c(2)), c(0x33333333))))
        x = kl.let("bits", op("&", op("+", x, op(">>", x, c(4))), c(0x0F0F0F0F)))
        return b.cast(op(">>", op("*", x, c(0x01010101)), c(24)), b.I32)
    # __clz: a binary search for the highest set bit; zero has 32
    zero = b.binary("==", x, c(0))
    count: ir.Expr = b.const(0)
    for shift in (16, 8, 4, 2, 1):
        empty = b.binary("==", op(">>", x, c(32 - shift)), c(0))
        count = kl.let("zeros", ir.Where(b.merged(empty, count), b.I32, empty,
                                         b.add(count, b.const(shift)), count))
        x = kl.let("bits", ir.Where(b.merged(empty, x), u32, empty, op("<<", x, c(shift)), x))
    return ir.Where(b.merged(zero, count), b.I32, zero, b.const(32), count)
