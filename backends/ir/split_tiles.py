"""Tiles whose extent is not a power of two, computed in power-of-two pieces (compile
option ``split_tiles``).

Triton tensors have power-of-two shapes, so a 128 x 192 block tile is lowered as
128 x 256 with the last 64 columns masked off: a quarter of the loads and multiplies are
wasted. This pass splits such an axis into two power-of-two pieces (192 = 128 + 64): every
value over the axis becomes two values, one per piece, and every statement over it two
statements. Values without the axis (the A operand of ``C = A @ B``) are shared by the
pieces. Tensor-descriptor loads and stores of the axis get one descriptor per piece
(the lowering made them for the whole padded tile, to be split here).

The pass applies when the axis is only ever a row or column of a tile: not reduced, not
the K axis of a dot, not relabelled, not in an atomic, print or assertion.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable

from . import build as b
from . import nodes as ir

DOT_MIN = 16  # tl.dot needs every dimension >= 16


class NotSplit(Exception):
    """The axis is used in a way the pass does not split; the message says how."""


def piece_sizes(extent: int) -> tuple[int, int] | None:
    """The two powers of two, larger first and each at least 16, that add up to
    ``extent`` (192 -> (128, 64)); None when there are none."""
    high = 1 << (extent.bit_length() - 1)
    low = extent - high
    if low < DOT_MIN or low & (low - 1):
        return None
    return high, low


# A descriptor of a piece: (name of the whole tile's descriptor, memory-order dims of the
# piece) -> the name of the piece's descriptor (made by the lowering).
PieceDesc = Callable[[str, tuple[ir.Axis, ...]], str]


class _Split:
    def __init__(self, axis: ir.Axis, pieces: list[tuple[ir.Axis, ir.Expr]],
                 piece_desc: PieceDesc) -> None:
        self.axis, self.pieces, self.piece_desc = axis, pieces, piece_desc
        self.split: set[str] = set()  # variables that now exist once per piece

    # ---------------------------------------------------------------- statements
    def body(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            out.extend(self.stmt(stmt))
        return out

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        x = self.axis
        if isinstance(s, ir.Let):
            if x in s.value.axes:
                self.split.add(s.name)
                return [ir.Let(s.span, _name(s.name, i), self.expr(s.value, i))
                        for i in range(len(self.pieces))]
            if s.name in self.split:
                raise NotSplit(f"'{s.name}' is assigned with and without the split axis")
            return [self.scalar(s)]
        if isinstance(s, ir.Store):
            exprs = [s.pointer, s.value] + ([s.mask] if s.mask is not None else [])
            if not any(x in e.axes for e in exprs):
                return [self.scalar(s)]
            return [ir.Store(s.span, self.pointer(s.pointer, i), self.expr(s.value, i),
                             None if s.mask is None else self.expr(s.mask, i))
                    for i in range(len(self.pieces))]
        if isinstance(s, ir.DescStore):
            if x not in s.dims:
                return [self.scalar(s)]
            return [ir.DescStore(s.span, *self.desc(s.desc, s.offsets, s.dims, i),
                                 self.expr(s.value, i), self.dims(s.dims, i))
                    for i in range(len(self.pieces))]
        if isinstance(s, ir.For):
            return [replace(s, start=self.expr(s.start, 0), stop=self.expr(s.stop, 0),
                            step=None if s.step is None else self.expr(s.step, 0),
                            body=self.body(s.body))]
        if isinstance(s, ir.While):
            return [replace(s, cond=self.expr(s.cond, 0), body=self.body(s.body))]
        if isinstance(s, ir.If):
            return [replace(s, cond=self.expr(s.cond, 0), then=self.body(s.then),
                            other=self.body(s.other))]
        if isinstance(s, ir.Branch):
            return [replace(s, then=self.body(s.then), other=self.body(s.other))]
        if isinstance(s, (ir.Barrier, ir.Comment, ir.DefineDesc)):
            return [s]
        return [self.scalar(s)]  # atomics, prints, assertions: only without the axis

    def scalar(self, s: ir.Stmt) -> ir.Stmt:
        """A statement whose expressions do not have the axis, kept once (``expr``
        refuses one that hides the axis inside, such as a reduction along it)."""
        changes: dict[str, Any] = {}  # field -> its new value (of that field's type)
        for f in fields(s):
            value = getattr(s, f.name)
            if isinstance(value, ir.Expr):
                if self.axis in value.axes:
                    raise NotSplit(f"a {type(s).__name__.lower()} statement uses the axis")
                changes[f.name] = self.expr(value, 0)
        return replace(s, **changes) if changes else s

    # ---------------------------------------------------------------- expressions
    def pointer(self, p: ir.Pointer, i: int) -> ir.Pointer:
        """``p`` for piece ``i`` (``expr`` rebuilds a pointer as a pointer)."""
        rebuilt = self.expr(p, i)
        assert isinstance(rebuilt, ir.Pointer)
        return rebuilt

    def expr(self, e: ir.Expr, i: int) -> ir.Expr:
        """``e`` for piece ``i`` (unchanged when it does not involve the axis)."""
        x = self.axis
        if x not in e.axes:
            reason = self.removes_axis(e)
            if reason:
                raise NotSplit(reason)
            return e
        piece, offset = self.pieces[i]
        axes = tuple(piece if a is x else a for a in e.axes)
        if isinstance(e, ir.AxisIndex):
            return b.add(b.axis_index(piece), offset)
        if isinstance(e, ir.Var):
            if e.name not in self.split:
                raise NotSplit(f"'{e.name}' comes from outside the tile body")
            return replace(e, axes=axes, name=_name(e.name, i))
        if isinstance(e, ir.Binary):
            return b.binary(e.op, self.expr(e.lhs, i), self.expr(e.rhs, i), e.dtype)
        if isinstance(e, ir.Reduce) or isinstance(e, ir.Relabel):
            raise NotSplit(f"a {type(e).__name__.lower()} involves the axis")
        if isinstance(e, ir.Dot):
            if e.k is x:
                raise NotSplit("the axis is the K axis of a matrix multiplication")
            return replace(e, axes=axes, a=self.expr(e.a, i), b=self.expr(e.b, i),
                           acc=self.expr(e.acc, i), m=piece if e.m is x else e.m,
                           n=piece if e.n is x else e.n)
        if isinstance(e, ir.DescLoad):
            desc, offsets = self.desc(e.desc, e.offsets, e.dims, i)
            return replace(e, axes=axes, desc=desc, offsets=offsets, dims=self.dims(e.dims, i))
        if isinstance(e, ir.Collapsed):
            raise NotSplit("an unmerged MMA slice involves the axis")
        changes: dict[str, Any] = {"axes": axes}  # field -> its new value (of its type)
        for f in fields(e):
            if f.name in ("axes", "dtype"):
                continue
            old = getattr(e, f.name)
            if isinstance(old, ir.Expr):
                changes[f.name] = self.expr(old, i)
            elif isinstance(old, tuple) and any(isinstance(v, ir.Expr) for v in old):
                changes[f.name] = tuple(self.expr(v, i) if isinstance(v, ir.Expr) else v
                                        for v in old)
        return replace(e, **changes)

    def removes_axis(self, e: ir.Expr) -> str | None:
        """Why ``e``, a value without the axis, cannot be computed once for all pieces:
        something inside it has the axis (a reduction over it, a dot along it) or reads a
        split value; None when nothing does."""
        if isinstance(e, ir.Reduce) and e.axis is self.axis:
            return "a reduction runs along the axis"
        if isinstance(e, ir.Dot) and e.k is self.axis:
            return "the axis is the K axis of a matrix multiplication"
        if isinstance(e, ir.Relabel) and self.axis in e.operand.axes:
            return "a relabel involves the axis"
        if isinstance(e, ir.Var) and e.name in self.split:
            return f"'{e.name}' is read without the split axis"
        for child in b.children(e):
            reason = self.removes_axis(child)
            if reason:
                return reason
        return None

    def dims(self, dims: tuple[ir.Axis, ...], i: int) -> tuple[ir.Axis, ...]:
        return tuple(self.pieces[i][0] if d is self.axis else d for d in dims)

    def desc(self, name: str, offsets: tuple[ir.Expr, ...], dims: tuple[ir.Axis, ...],
             i: int) -> tuple[str, tuple[ir.Expr, ...]]:
        """The descriptor of piece ``i`` and its block's origin (shifted along the axis)."""
        offset = self.pieces[i][1]
        moved = tuple(b.add(self.expr(o, i), offset) if d is self.axis
                      else self.expr(o, i) for o, d in zip(offsets, dims))
        return self.piece_desc(name, self.dims(dims, i)), moved


def _name(name: str, piece: int) -> str:
    return f"{name}_p{piece}"


def split_axis(body: list[ir.Stmt], axis: ir.Axis,
               make_axis: Callable[[ir.Axis, int], ir.Axis],
               piece_desc: PieceDesc) -> tuple[list[ir.Stmt], list[ir.Axis]]:
    """``body`` with ``axis`` computed in two power-of-two pieces, and the pieces' axes
    (``make_axis(axis, size)`` makes one). Raises ``NotSplit``."""
    sizes = piece_sizes(axis.extent)
    if sizes is None:
        raise NotSplit(f"{axis.extent} is not the sum of two powers of two of at least "
                       f"{DOT_MIN}")
    pieces: list[tuple[ir.Axis, ir.Expr]] = [(make_axis(axis, sizes[0]), b.const(0)),
                                             (make_axis(axis, sizes[1]), b.const(sizes[0]))]
    return _Split(axis, pieces, piece_desc).body(body), [p for p, _ in pieces]


def one_piece(body: list[ir.Stmt], axis: ir.Axis, piece: ir.Axis, offset: ir.Expr,
              piece_desc: PieceDesc) -> list[ir.Stmt]:
    """``body`` computing only the indices ``offset`` to ``offset + piece.size`` of
    ``axis`` (``offset`` may be a run-time value), over the axis ``piece``: the same
    rules as ``split_axis``, with one piece. Raises ``NotSplit``."""
    return _Split(axis, [(piece, offset)], piece_desc).body(body)


def uses_axis(stmts: list[ir.Stmt], axis: ir.Axis) -> bool:
    """Whether any expression or descriptor block under ``stmts`` involves ``axis``."""
    for node in ir.nodes_of(stmts):
        if isinstance(node, ir.Expr) and axis in node.axes:
            return True
        if isinstance(node, (ir.DescLoad, ir.DescStore)) and axis in node.dims:
            return True
    return False


def pointer_paths(stmts: list[ir.Stmt], padded: Callable[[ir.Axis], bool]) -> list[ir.Stmt]:
    """``stmts`` with every descriptor branch over a padded axis replaced by its pointer
    branch (the descriptors of a tile that stays unsplit)."""
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, ir.Branch) and any(
                isinstance(n, (ir.DescLoad, ir.DescStore)) and any(padded(d) for d in n.dims)
                for n in ir.nodes_of(s.then)):
            out.extend(pointer_paths(s.other, padded))
            continue
        for attr in ("body", "then", "other"):
            inner = getattr(s, attr, None)
            if isinstance(inner, list):
                changed: dict[str, Any] = {attr: pointer_paths(inner, padded)}
                s = replace(s, **changed)
        out.append(s)
    return out
