"""Stream-K for the last wave of a persistent MMA launch (compile option ``stream_k``).

A persistent launch runs P programs over T output tiles. When T is not a multiple of P
the last wave leaves SMs idle: 288 tiles on 132 SMs take three waves of which the last
is 18% full. With ``stream_k`` the first ``T - T % P`` tiles run as before, one program
per tile, and the K-loop iterations of the remaining ``T % P`` tiles are dealt out
evenly to all P programs (no more than there are iterations), or to ``parts`` programs
per tile when the option gives that limit. By default only a last wave at most half full
is split (a fuller one gains less, and the parts cost their workspace traffic); with
``stream_k="always"`` any partial last wave is: a launch of a single wave of 96 tiles on
132 SMs then keeps every SM busy, each with 96/132 of a tile's iterations. (On the H200
that split section of 512 x 6144 x 4096 took 53 us against 46 unsplit; without the
parts' stores and sums it took cuBLAS's time, so the f32 parts of 128 x 256 tiles, about
two per tile, cost more than the idle SMs' share; the autotuner does not try "always".)

A program that computes part of a tile stores its partial accumulator (in f32) in its
own workspace slot, then adds its iteration count to the tile's counter; the program
that completes the count adds up the tile's parts, from the last program's to the
first's, resets the counter to zero for the next launch and runs the epilogue. The order
of the sum does not depend on which part arrives last, so results are the same from run
to run. Each program walks its share of iterations from the end, so the part of a tile's
last iterations is computed after the tile's other parts began (they open their
programs' shares); for parts of ``_KEPT_FLOATS`` or more, its program reads the counter
before storing it, and when the other parts are all counted it keeps its own part in
registers as the first term of the sum instead of writing and reading it back. (The
interpreter runs programs one after the other, so there that part is always kept; the
tests force the other path.)

The transformation applies to the body of the persistent tile loop when it has the shape
the lowering gives an ordinary GEMM: statements without side effects, one loop over K
starting at 0 whose only state across iterations is accumulators initialised to zero
(f32, or f16/bf16 whose parts are then added in f32) and updated by
``acc = dot(a, b, acc)`` or ``acc = acc + x``, then the epilogue.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from ...frontend.source import Span
from . import build as b
from . import nodes as ir

# The part that completes a tile is kept in registers from this size on (floats): on the
# H200, keeping the 32768-float parts of 128 x 256 tiles saved 6-9 us of a 53-103 us
# split; smaller parts were not measured with it.
_KEPT_FLOATS = 16384
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
    flag: str  # constexpr: the host found a last wave worth splitting
    fresh: Callable[[str], str]  # a new unique variable name from a stem
    parts: int | None = None  # the most programs sharing one tile (None: no limit)
    # runs of this many consecutive tiles, from tile 0 on, share an operand (the rows of
    # one column of B in a grouped walk); None: no such runs (see ``_rewrite``)
    runs: ir.Expr | None = None


def split_last_wave(loop: ir.For, names: Names, outer: set[str]) -> tuple[list[ir.Stmt], int]:
    """The statements replacing the persistent tile loop ``loop`` (``for tile in
    range(program, tiles, programs)``) and the workspace floats one program needs.
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
    return _rewrite(loop, prefix, k_loop, epilogue, accs, names), 2 * sum(_floats(a) for a in accs)


def _k_loop_index(body: list[ir.Stmt]) -> int:
    with_dot = [i for i, stmt in enumerate(body)
                if any(isinstance(n, ir.Dot) for n in ir.nodes_of([stmt]))]
    if len(with_dot) != 1:
        raise NotSplittable("the tile body has no single loop of matrix multiplications")
    return with_dot[0]


def _accumulators(prefix: list[ir.Stmt], k_loop: ir.For, before: set[str]) -> list[ir.Let]:
    """The zero-initialised float accumulators that the K loop carries, as their `Let`s."""
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
    v = {stem: fresh(stem) for stem in (
        "k_steps", "dp_tiles", "sk_iters", "sharing", "it_start", "it", "it_end", "sk_tile",
        "k_lo", "k_hi", "steps", "before", "tile_start", "first", "last", "part", "runs",
        "lanes", "lane", "member", "members", "lane_tiles", "peek", "kept", "done",
        "seg_start", "rank")}
    var = {stem: b.var(name) for stem, name in v.items()}
    k_steps, t, steps, it, end, sk_iters = (var[n] for n in (
        "k_steps", "sk_tile", "steps", "it", "it_end", "sk_iters"))
    lanes = _Lanes(names.runs, var, program, programs,
                   b.binary("-", tiles, var["dp_tiles"]), var["dp_tiles"])
    per_slot = sum(_floats(a) for a in accs)

    def slot_pointer(acc: ir.Let, slot: ir.Expr) -> ir.Pointer:
        offset: ir.Expr = b.add(b.mul(slot, b.const(per_slot)), b.const(_offset(accs, acc)))
        stride = 1
        for axis in reversed(acc.value.axes):
            offset = b.add(offset, b.mul(b.axis_index(axis), b.const(stride)))
            stride *= axis.size
        return ir.Pointer(acc.value.axes, ir.DType.F32, names.workspace, offset)

    # the programs the iterations are dealt to: no more than there are iterations, since a
    # program with an empty share would lie between a tile's first and last owner with
    # nothing in its slot
    sharing = var["sharing"]

    def owner(iteration: ir.Expr) -> ir.Expr:
        """The program whose share of the stream-K iterations holds ``iteration``."""
        return b.binary("-", b.binary("//", b.add(b.mul(b.add(iteration, b.const(1)), sharing),
                                                  b.binary("-", sk_iters, b.const(1))),
                                      sk_iters), b.const(1))

    def first_iteration(prog: ir.Expr) -> ir.Expr:
        """Where program ``prog``'s share starts (the end, for programs left out)."""
        return ir.Call((), b.I32, "minimum", (b.binary("//", b.mul(prog, sk_iters), sharing),
                                              sk_iters))

    # A partial segment goes to slot 2p (program p's first segment) or 2p + 1 (its last).
    own_slot = b.add(b.mul(program, b.const(2)),
                     ir.Call((), b.I32, "minimum", (b.binary("-", var["seg_start"],
                                                             var["it_start"]), b.const(1))))
    q = v["part"]
    q_slot = b.add(b.mul(lanes.program(b.var(q)), b.const(2)),
                   b.cast(b.binary("<", first_iteration(b.var(q)), var["tile_start"]), b.I32))
    counter = ir.Pointer((), ir.DType.I32, names.counters, lanes.tile(t))
    # The program that completes a tile sums its parts from the last program's to the
    # first's: the same sum whichever part arrives last. A program walks its share from
    # its end, so the program of a tile's last iterations computes them last, after the
    # other programs' parts of that tile (the first of their shares); when it finds them
    # all counted, its own part starts the sum from its registers, neither written nor
    # read back (parts of _KEPT_FLOATS or more: a smaller one costs less to write and read
    # than the count's read before it).
    keeps = per_slot >= _KEPT_FLOATS
    kept = b.var(v["kept"], ir.DType.I1) if keeps else b.const(False, ir.DType.I1)
    rank = b.var(v["rank"])
    sums = {acc.name: fresh(acc.name + "_sum") for acc in accs}
    zeros: list[ir.Stmt] = [ir.Let(span, sums[a.name], ir.Full(a.value.axes, ir.DType.F32, 0.0))
                            for a in accs]
    own: list[ir.Stmt] = [
        ir.Let(span, sums[a.name], b.cast(b.var(a.name, a.value.dtype, a.value.axes), ir.DType.F32))
        for a in accs]
    finish: list[ir.Stmt] = [
        ir.Let(span, v["tile_start"], b.mul(t, k_steps)),
        ir.Let(span, v["first"], owner(var["tile_start"])),
        ir.Let(span, v["last"], owner(b.binary("-", b.add(var["tile_start"], k_steps),
                                               b.const(1)))),
        *([ir.If(span, kept, own, zeros)] if keeps else zeros),
        ir.For(span, v["rank"], b.cast(kept, b.I32),
               b.add(b.binary("-", var["last"], var["first"]), b.const(1)), [
            ir.Let(span, q, b.binary("-", var["last"], rank)),
            *[ir.Let(span, sums[a.name], b.add(
                b.var(sums[a.name], ir.DType.F32, a.value.axes),
                ir.Load(a.value.axes, ir.DType.F32, slot_pointer(a, q_slot), None, cache=".cg")))
              for a in accs]], pipelined=True, stages=1),  # (no shared-memory ring for tiles)
        *[ir.Let(span, a.name, b.cast(b.var(sums[a.name], ir.DType.F32, a.value.axes),
                                      a.value.dtype)) for a in accs],
        ir.Store(span, counter, b.const(0), None),  # (zero again for the next launch)
        *epilogue,
    ]
    # A part is written, then counted; the program that completes the count sums the
    # parts.
    count: list[ir.Stmt] = [
        *[ir.Store(span, slot_pointer(a, own_slot),
                   b.cast(b.var(a.name, a.value.dtype, a.value.axes), ir.DType.F32), None)
          for a in accs],
        ir.Barrier(span),  # every thread's part is written before the count
        ir.Atomic(span, "add", counter, steps, None, result=v["before"], sem="acq_rel"),
        ir.Barrier(span),
        ir.Let(span, v["done"], b.binary("==", b.add(var["before"], steps), k_steps)),
    ]
    done = b.var(v["done"], ir.DType.I1)
    partial = count + [ir.If(span, done, finish, [])]
    if keeps:
        # The part of a tile's last iterations reads the count first: complete without
        # it, the part is kept (the others are written before they are counted).
        partial = [
            ir.Atomic(span, "add", counter, b.const(0), None, result=v["peek"],
                      sem="acquire"),
            ir.Barrier(span),  # (the parts read below after the count read here)
            ir.Let(span, v["kept"], b.and_(b.binary("==", var["k_hi"], k_steps), b.binary(
                "==", b.add(var["peek"], steps), k_steps))),
            ir.Let(span, v["done"], kept),
            ir.If(span, ir.Unary((), b.I1, "not", kept), count, []),
            ir.If(span, done, finish, []),
        ]
    # the segments of a share from its end: [seg_start, it) within one tile
    sk_body = [
        ir.Let(span, v["sk_tile"], b.binary("//", b.binary("-", it, b.const(1)), k_steps)),
        ir.Let(span, v["seg_start"], ir.Call((), b.I32, "maximum", (
            b.mul(t, k_steps), var["it_start"]))),
        ir.Let(span, v["k_lo"], b.binary("-", var["seg_start"], b.mul(t, k_steps))),
        ir.Let(span, v["k_hi"], b.binary("-", it, b.mul(t, k_steps))),
        ir.Let(span, v["steps"], b.binary("-", var["k_hi"], var["k_lo"])),
        ir.Let(span, loop.var, b.add(var["dp_tiles"], lanes.tile(t))),
        *prefix,
        replace(k_loop, start=var["k_lo"], stop=var["k_hi"]),
        ir.If(span, b.binary("<", steps, k_steps), partial, epilogue),
        ir.Let(span, v["it"], var["seg_start"]),
    ]
    # The host decides whether there is a last wave worth splitting (``names.flag``: not
    # empty, and at most half full unless the option is "always"), so a
    # launch that does not split runs a kernel without the stream-K code. Without K
    # iterations there is nothing to deal out.
    tail = ir.Where((), b.I32, b.binary(">", k_steps, b.const(0)),
                    b.binary("%", tiles, programs), b.const(0))
    return [
        ir.Let(span, v["k_steps"], k_loop.stop),
        ir.Branch(span, names.flag, [ir.Let(span, v["dp_tiles"], b.binary("-", tiles, tail))],
                  [ir.Let(span, v["dp_tiles"], tiles)]),
        replace(loop, stop=var["dp_tiles"]),
        ir.Branch(span, names.flag, [
            ir.Comment(span, "stream-K: the K iterations of the last tiles, dealt out evenly"),
            *lanes.define(span),
            ir.Let(span, v["sk_iters"], b.mul(lanes.tiles, k_steps)),
            ir.Let(span, v["sharing"], _at_least_one(_smallest(sk_iters, lanes.members, *(
                [] if names.parts is None else [b.mul(lanes.tiles, b.const(names.parts))])))),
            ir.Let(span, v["it_start"], first_iteration(lanes.member)),
            ir.Let(span, v["it_end"], first_iteration(b.add(lanes.member, b.const(1)))),
            ir.Let(span, v["it"], end),
            ir.While(span, b.binary(">", it, var["it_start"]), sk_body),
        ], []),
    ]


class _Lanes:
    """The stream-K tiles and the programs, dealt out in lanes.

    In one lane (``runs`` None) the programs take even shares of all the split tiles'
    iterations in tile order, so programs working at the same time are at different K
    steps of the tiles they share an operand with. In a grouped walk over few rows, the
    ``r`` tiles of one column of B are consecutive; then (where the split tiles start at a
    multiple of ``r`` and there are at least two programs per lane) tile ``t`` goes to lane
    ``t % r`` and program ``p`` to lane ``p % r``, and each lane deals its own tiles'
    iterations to its own programs as one lane would. Programs ``p - p % r`` to ``p - p %
    r + r - 1`` then compute the ``r`` tiles of one column over the same K steps at the
    same time and read its B tiles from memory once, as the unsplit wave does. (With one
    lane, a weight-streaming GEMM whose B does not stay in the L2 cache between those
    times reads it up to ``r`` times.)"""

    def __init__(self, runs: ir.Expr | None, var: dict[str, ir.Var], program: ir.Expr,
                 programs: ir.Expr, split_tiles: ir.Expr, dp_tiles: ir.Expr) -> None:
        self.runs, self.var, self.program_id, self.programs = runs, var, program, programs
        self.split_tiles, self.dp_tiles = split_tiles, dp_tiles
        # this program's place in its lane, the programs of a lane, and the lane's tiles
        if runs is None:
            self.member, self.members, self.tiles = program, programs, split_tiles
        else:
            self.member, self.members, self.tiles = (var["member"], var["members"],
                                                     var["lane_tiles"])

    def define(self, span: Span | None) -> list[ir.Stmt]:
        """The statements that bind the lane variables (none for one lane)."""
        if self.runs is None:
            return []
        var = self.var
        runs, lanes, lane = var["runs"], var["lanes"], var["lane"]
        aligned = b.and_(b.binary("<=", b.mul(runs, b.const(2)), self.programs),
                         b.binary("==", b.binary("%", self.dp_tiles, runs), b.const(0)))
        return [
            ir.Let(span, runs.name, _at_least_one(self.runs)),
            ir.Let(span, lanes.name, ir.Where((), b.I32, aligned, runs, b.const(1))),
            ir.Let(span, lane.name, b.binary("%", self.program_id, lanes)),
            ir.Let(span, var["member"].name, b.binary("//", self.program_id, lanes)),
            ir.Let(span, var["members"].name, b.binary("//", self.programs, lanes)),
            # the split tiles t with t % lanes == lane
            ir.Let(span, var["lane_tiles"].name, b.binary("//", b.add(
                b.binary("-", self.split_tiles, lane), b.binary("-", lanes, b.const(1))),
                lanes)),
        ]

    def tile(self, index: ir.Expr) -> ir.Expr:
        """The split tile (counted from the first split one) of a lane's ``index``-th."""
        if self.runs is None:
            return index
        return b.add(b.mul(index, self.var["lanes"]), self.var["lane"])

    def program(self, member: ir.Expr) -> ir.Expr:
        """The program id of the lane's ``member``-th program."""
        return self.tile(member)


def _smallest(*values: ir.Expr) -> ir.Expr:
    smallest = values[0]
    for value in values[1:]:
        smallest = ir.Call((), b.I32, "minimum", (smallest, value))
    return smallest


def _at_least_one(value: ir.Expr) -> ir.Expr:
    return ir.Call((), b.I32, "maximum", (b.const(1), value))


def _offset(accs: list[ir.Let], acc: ir.Let) -> int:
    """Where ``acc`` starts within a workspace slot (the accumulators one after another)."""
    return sum(_floats(a) for a in accs[:accs.index(acc)])


def _floats(acc: ir.Let) -> int:
    return math.prod(axis.size for axis in acc.value.axes)


def _walk(body: list[ir.Stmt]) -> Iterator[ir.Stmt]:
    """Every statement of ``body``, nested ones included (through the IR's node walk)."""
    return (node for node in ir.nodes_of(body) if isinstance(node, ir.Stmt))


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
