"""Stream-K for the last wave of a persistent MMA launch (compile option ``stream_k``).

A persistent launch runs P programs over T output tiles. When T is not a multiple of P
the last wave leaves SMs idle: 288 tiles on 132 SMs take three waves of which the last
is 18% full. With ``stream_k`` the first ``T - T % P`` tiles run as before, one program
per tile, and the K-loop iterations of the remaining ``T % P`` tiles are dealt out
evenly to all P programs. A program that computes part of a tile adds its partial
accumulator into an f32 workspace (atomically) and then counts its iterations into the
tile's counter; the program that completes the count reads the sum, runs the epilogue
and resets the workspace and counter to zero for the next launch.

The transformation applies to the body of the persistent tile loop when it has the shape
the lowering gives an ordinary GEMM: statements without side effects, one loop over K
starting at 0 whose only state across iterations is f32 accumulators initialised to
zero (f32, or f16/bf16 whose partial sums are then added in f32) and updated by
``acc = dot(a, b, acc)`` or ``acc = acc + x``, then the epilogue. Partial sums are added
in the order the programs arrive, so results can differ in the last bits from one run to
the next (f32 rounding of the partial sums).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from . import build as b
from . import nodes as ir

_EFFECTS = (ir.Store, ir.Atomic, ir.DescStore, ir.Print, ir.Assert)
# accumulator types: partial sums are added in f32 (an f16 accumulator gains precision)
_FLOATS = (ir.DType.F32, ir.DType.F16, ir.DType.BF16)


class NotSplittable(Exception):
    """The tile loop does not have the shape stream-K needs; the message says why."""


@dataclass(frozen=True)
class Names:
    """The kernel-level names the rewrite uses."""

    workspace: str  # pointer to the f32 partial tiles
    counters: str  # pointer to the int32 per-tile iteration counts
    fresh: Callable[[str], str]  # a new unique variable name from a stem


def split_last_wave(loop: ir.For, names: Names, outer: set[str]) -> tuple[list[ir.Stmt], int]:
    """The statements replacing the persistent tile loop ``loop`` (``for tile in
    range(program, tiles, programs)``) and the workspace floats one tile needs.
    ``outer`` holds the names the kernel defines before the loop. Raises
    ``NotSplittable``."""
    body = loop.body
    at = _k_loop_index(body)
    k_loop = body[at]
    if not isinstance(k_loop, ir.For):
        raise NotSplittable("the multiply-accumulate is not inside a loop over K")
    prefix, epilogue = body[:at], body[at + 1:]
    if not b.is_const(k_loop.start, 0) or not (k_loop.step is None or b.is_const(k_loop.step, 1)):
        raise NotSplittable("the K loop does not count 0, 1, 2, ...")
    before = _assigned(prefix) | outer | {loop.var}
    if any(b.mentions(k_loop.stop, name) for name in before - outer):
        raise NotSplittable("the K loop's length depends on the tile")
    if any(isinstance(s, _EFFECTS) for s in _walk(prefix + [k_loop])):
        raise NotSplittable("statements before the epilogue write memory")
    accs = _accumulators(prefix, k_loop, before)
    return _rewrite(loop, prefix, k_loop, epilogue, accs, names), sum(_floats(a) for a in accs)


def _k_loop_index(body: list[ir.Stmt]) -> int:
    with_dot = [i for i, stmt in enumerate(body)
                if any(isinstance(n, ir.Dot) for n in ir._nodes([stmt]))]
    if len(with_dot) != 1:
        raise NotSplittable("the tile body has no single loop of matrix multiplications")
    return with_dot[0]


def _accumulators(prefix: list[ir.Stmt], k_loop: ir.For, before: set[str]) -> list[ir.Let]:
    """The zero-initialised f32 accumulators that the K loop carries, as their `Let`s."""
    carried = _assigned([k_loop]) & before
    if not carried:
        raise NotSplittable("the K loop carries no accumulator")
    inits = {s.name: s for s in prefix if isinstance(s, ir.Let) and s.name in carried}
    for name in sorted(carried):
        init = inits.get(name)
        if init is None or sum(isinstance(s, ir.Let) and s.name == name
                               for s in _walk(prefix)) != 1:
            raise NotSplittable(f"'{name}' carries state across K iterations")
        if not (isinstance(init.value, ir.Full) and init.value.value == 0):
            raise NotSplittable(f"accumulator '{name}' does not start at zero")
        if init.value.dtype not in _FLOATS:
            raise NotSplittable(f"accumulator '{name}' is {init.value.dtype.value}, "
                                "not a floating-point type")
    for stmt in _walk([k_loop]):
        if isinstance(stmt, ir.Let) and stmt.name in carried:
            if not _accumulates(stmt.value, stmt.name, carried):
                raise NotSplittable(f"'{stmt.name}' is not only accumulated in the K loop")
        elif any(b.mentions(e, name) for e in _exprs(stmt) for name in carried):
            raise NotSplittable("an accumulator is read inside the K loop")
    return [inits[name] for name in sorted(carried)]


def _accumulates(value: ir.Expr, name: str, carried: set[str]) -> bool:
    """``value`` is ``dot(a, b, name)`` or ``name + x`` with ``a, b, x`` free of
    accumulators: the loop then sums contributions that do not depend on the sum."""
    def free(e: ir.Expr) -> bool:
        return not any(b.mentions(e, other) for other in carried)

    def is_acc(e: ir.Expr) -> bool:
        return isinstance(e, ir.Var) and e.name == name

    if isinstance(value, ir.Dot):
        return is_acc(value.acc) and free(value.a) and free(value.b)
    if isinstance(value, ir.Binary) and value.op == "+":
        return (is_acc(value.lhs) and free(value.rhs)) or (is_acc(value.rhs) and free(value.lhs))
    return False


def _rewrite(loop: ir.For, prefix: list[ir.Stmt], k_loop: ir.For, epilogue: list[ir.Stmt],
             accs: list[ir.Let], names: Names) -> list[ir.Stmt]:
    fresh, span = names.fresh, loop.span
    program, tiles, programs = loop.start, loop.stop, loop.step
    assert programs is not None  # a persistent loop steps by the program count
    v = {stem: fresh(stem) for stem in ("k_steps", "dp_tiles", "sk_iters", "it", "it_end",
                                        "sk_tile", "k_lo", "k_hi", "steps", "before")}
    var = {stem: b.var(name) for stem, name in v.items()}
    k_steps = var["k_steps"]
    # without K iterations there is nothing to deal out: every tile is data-parallel
    whole = b.mul(b.binary("%", tiles, programs),
                  ir.Call((), b.I32, "minimum", (k_steps, b.const(1))))
    t = var["sk_tile"]

    def workspace(acc: ir.Let, base: int) -> ir.Pointer:
        axes = acc.value.axes
        offset: ir.Expr = b.add(b.mul(t, b.const(sum(_floats(a) for a in accs))),
                                b.const(base))
        stride = 1
        for axis in reversed(axes):
            offset = b.add(offset, b.mul(b.axis_index(axis), b.const(stride)))
            stride *= axis.size
        return ir.Pointer(axes, ir.DType.F32, names.workspace, offset)

    pointers, base = [], 0
    for acc in accs:
        pointers.append(workspace(acc, base))
        base += _floats(acc)
    counter = ir.Pointer((), ir.DType.I32, names.counters, t)
    steps = var["steps"]
    last = [ir.Let(span, acc.name, b.cast(ir.Load(p.axes, ir.DType.F32, p, None, cache=".cg"),
                                          acc.value.dtype))
            for acc, p in zip(accs, pointers)]
    last += [ir.Store(span, p, b.const(0.0, ir.DType.F32), None) for p in pointers]
    last += [ir.Store(span, counter, b.const(0), None)]
    partial = [ir.Atomic(span, "add", p,
                         b.cast(b.var(acc.name, acc.value.dtype, acc.value.axes), ir.DType.F32),
                         None, sem="relaxed") for acc, p in zip(accs, pointers)]
    partial += [
        ir.Barrier(span),  # every thread's partial sums are issued before the count
        ir.Atomic(span, "add", counter, steps, None, result=v["before"], sem="acq_rel"),
        ir.Barrier(span),
        ir.If(span, b.binary("==", b.add(var["before"], steps), k_steps), last + epilogue, []),
    ]
    it, end = var["it"], var["it_end"]
    sk_body = [
        ir.Let(span, v["sk_tile"], b.binary("//", it, k_steps)),
        ir.Let(span, v["k_lo"], b.binary("-", it, b.mul(t, k_steps))),
        ir.Let(span, v["k_hi"], ir.Call((), b.I32, "minimum", (
            k_steps, b.add(var["k_lo"], b.binary("-", end, it))))),
        ir.Let(span, v["steps"], b.binary("-", var["k_hi"], var["k_lo"])),
        ir.Let(span, loop.var, b.add(var["dp_tiles"], t)),
        *prefix,
        replace(k_loop, start=var["k_lo"], stop=var["k_hi"]),
        ir.If(span, b.binary("<", steps, k_steps), partial, epilogue),
        ir.Let(span, v["it"], b.add(it, steps)),
    ]
    sk_iters = var["sk_iters"]
    return [
        ir.Let(span, v["k_steps"], k_loop.stop),
        ir.Let(span, v["dp_tiles"], b.binary("-", tiles, whole)),
        replace(loop, stop=var["dp_tiles"]),
        ir.Comment(span, "stream-K: the K iterations of the last tiles, dealt out evenly"),
        ir.Let(span, v["sk_iters"], b.mul(b.binary("-", tiles, var["dp_tiles"]), k_steps)),
        ir.Let(span, v["it"], b.binary("//", b.mul(program, sk_iters), programs)),
        ir.Let(span, v["it_end"], b.binary("//", b.mul(b.add(program, b.const(1)), sk_iters),
                                           programs)),
        ir.While(span, b.binary("<", it, end), sk_body),
    ]


def _floats(acc: ir.Let) -> int:
    return math.prod(axis.size for axis in acc.value.axes)


def _walk(body: list[ir.Stmt]) -> Iterator[ir.Stmt]:
    """Every statement of ``body``, nested ones included."""
    for stmt in body:
        yield stmt
        for name in ("body", "then", "other"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _walk(inner)


def _assigned(body: list[ir.Stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in _walk(body):
        if isinstance(stmt, ir.Let):
            names.add(stmt.name)
        elif isinstance(stmt, ir.Atomic) and stmt.result:
            names.add(stmt.result)
        elif isinstance(stmt, ir.For):
            names.add(stmt.var)
    return names


def _exprs(stmt: ir.Stmt) -> Iterator[ir.Expr]:
    """The expressions a statement holds itself (not those of nested statements)."""
    for f in dataclasses.fields(stmt):
        value = getattr(stmt, f.name)
        items = value if isinstance(value, tuple) else (value,)
        yield from (item for item in items if isinstance(item, ir.Expr))
