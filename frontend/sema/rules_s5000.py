"""The checker's tensor-engine rules for a target that has engine tables (the S5000):
MMA statements against the WMMA and SQMMA tables, TME copies against the TME limits.

The checker calls these where it checks MMA and TMA statements; each rule reports at the
user's statement, names the table row it looked up and says how to fix the program.

What a rule decides, and why:

- Scope picks the table. An MMA inside a ``group-4`` level is warpgroup-scope and must
  map onto SQMMA; any other MMA is warp-scope and must map onto WMMA (the same split the
  NVIDIA targets make between WGMMA and mma.sync).
- Types: the operand types (f32 operands count as tf32) and the accumulator type must
  form a row of the table. The default accumulator of ``mma.fill v`` with f16 operands is
  f16 (spec 12.2), which neither table has: such programs need ``mma.fill.f32``.
- Shapes: a tile is fine when it is a whole number of one shape of its row in every
  dimension (M, N and K multiples of the shape's), because a warp or a warpgroup issues
  one instruction per piece. A tile no shape divides cannot be cut into instructions.
- Output layout: the tf32 16x8x4 WMMA shape stores its accumulator row-major only, so an
  accumulator whose tile only that shape divides cannot be stored with
  ``mma.store.transp`` (a column-major store).
- Operand memory: SQMMA reads A and B through shared-memory descriptors; a warpgroup
  operand in global memory or in registers has no SQMMA form. WMMA loads fragments from
  memory, so warp-scope operands may live anywhere.
- TME swizzle: the guide lists swizzle configurations for rank-1 tiles, and SL (the
  contiguous length) must be the tile's own length. These are warnings: a swizzle only
  arranges shared memory, so the copy is correct without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Reporter
from ..source import Span
from .dtypes import ElemType
from .model import Symbol
from .symbolic import Sym
from .targets_s5000 import EngineTables, MmaRow, Shape


@dataclass(frozen=True)
class MmaOperand:
    """An MMA operand as the engine rules see it: its text, where it lives ("global",
    "shared", "registers"; None when unknown) and its span."""

    text: str
    memory: str | None
    span: Span


@dataclass
class EngineRules:
    tables: EngineTables
    reporter: Reporter
    # warp-scope accumulator (symbols compare by identity) -> its tile, a row and shape
    # that divide it, and the output layouts of all the shapes that divide it
    layouts: dict[Symbol, tuple[Shape, MmaRow, Shape, frozenset[str]]] = field(
        default_factory=dict)

    # ------------------------------------------------------------------ MMA
    def mma(self, span: Span, warpgroup: bool, a: ElemType, b: ElemType, acc: Symbol,
            tile: tuple[Sym, Sym, Sym], operands: tuple[MmaOperand, ...]) -> None:
        """One ``mma.LA.LB acc, A, B`` at warp (WMMA) or warpgroup (SQMMA) scope."""
        table = "SQMMA" if warpgroup else "WMMA"
        rows = self.tables.sqmma if warpgroup else self.tables.wmma
        pair = (_operand_type(a), _operand_type(b))
        c = acc.elem.name if acc.elem is not None else "?"
        if warpgroup:
            for operand in operands:
                if operand.memory is not None and operand.memory != "shared":
                    where = ("in registers" if operand.memory == "registers"
                             else f"in {operand.memory} memory")
                    self.reporter.report("CQ0521", operand.span, name=operand.text, where=where)
        matching = [row for row in rows if pair in row.operands]
        fitting = [row for row in matching if row.acc == c]
        if not fitting:
            code = "CQ0519" if warpgroup else "CQ0516"
            self.reporter.report(code, span, a=pair[0], b=pair[1], c=c,
                                 entry=_type_entry(table, pair, matching, rows),
                                 hint=self._type_hint(warpgroup, pair, matching, rows))
            return
        sizes = [d.value for d in tile if d.value is not None]
        if len(sizes) != len(tile):
            return  # a symbolic tile: checked again when the function is specialised
        m, n, k = sizes
        pieces = [(row, s) for row in fitting for s in row.shapes
                  if m % s[0] == 0 and n % s[1] == 0 and k % s[2] == 0]
        if not pieces:
            row = fitting[0]
            self.reporter.report("CQ0520" if warpgroup else "CQ0517", span,
                                 tile=_shape(m, n, k), row=row.label, shapes=_shapes(row),
                                 hint=_shape_hint(row, m, n, k))
            return
        if not warpgroup:
            layouts = frozenset().union(*(row.layouts for row, _ in pieces))
            row, shape = pieces[0]
            self.layouts[acc] = ((m, n, k), row, shape, layouts)

    def sparse_mma(self, span: Span, warpgroup: bool) -> None:
        """``mma.LA.LB.sp``: neither the WMMA nor the SQMMA table has a sparse row."""
        self.reporter.report("CQ0524", span, table="SQMMA" if warpgroup else "WMMA")

    def mma_store(self, span: Span, acc: Symbol, transposed: bool) -> None:
        """``mma.store.transp`` stores the accumulator column-major."""
        found = self.layouts.get(acc)
        if not transposed or found is None:
            return
        tile, row, shape, layouts = found
        if "col" not in layouts:
            both = [r for r in self.tables.wmma if "col" in r.layouts
                    and set(r.operands) & set(row.operands) and r.acc == row.acc]
            hint = "store it with `mma.store` (row-major)"
            if both:
                hint += (f", or use a tile that a shape of the row {both[0].label} divides "
                         f"({_shapes(both[0])}), which stores column-major too")
            self.reporter.report("CQ0518", span, name=acc.name, tile=_shape(*tile), row=row.label,
                                 shape=_shape(*shape), hint=hint)

    def _type_hint(self, warpgroup: bool, pair: tuple[str, str], matching: list[MmaRow],
                   rows: tuple[MmaRow, ...]) -> str:
        if matching:
            accs = sorted({row.acc for row in matching})
            zero = "0" if accs[0].startswith(("s", "u")) else "0.0f"
            return (f"declare the accumulator as {' or '.join(accs)}, e.g. "
                    f"`mc = mma.fill.{accs[0]} {zero};`")
        if warpgroup and any(pair in row.operands for row in self.tables.wmma):
            return ("the S5000 WMMA table takes these operands: compute at warp scope "
                    "(a `: group` level) instead of a `group-4` level")
        takes = sorted({t for row in rows for p in row.operands for t in p})
        return f"use operands of a type the table takes: {', '.join(takes)}"

    # ------------------------------------------------------------------ TME
    def tme(self, span: Span, shape: tuple[Sym, ...], elem: ElemType, op: str,
            swizzle: int | None) -> None:
        """A ``tma`` copy whose shared-memory tile is ``shape`` of ``elem``; ``swizzle`` is
        the ``.swiz<N>`` value in bytes (None: not swizzled)."""
        if swizzle is None:
            return
        t = self.tables
        if len(shape) != t.swizzle_rank:
            self.reporter.report("CQ0438", span, rank=len(shape), op=op, allowed=t.swizzle_rank)
            return
        length = shape[-1].value
        if length is None:
            return
        sl = int(length) * max(elem.bits // 8, 1)
        config = (t.swizzle_granule, swizzle, sl)
        if config in t.swizzles:
            return
        lengths = sorted({c[2] for c in t.swizzles if c[:2] == config[:2]})
        per = max(elem.bits // 8, 1)
        options = " or ".join(f"{x} bytes ({x // per} {elem.name} elements)" for x in lengths)
        hint = (f"the table's SL for SG {config[0]}B and SS {swizzle}B is {options}"
                if lengths else f"the table has no entry with SG {config[0]}B and SS "
                f"{swizzle}B: drop the swizzle")
        self.reporter.report("CQ0439", span, sg=config[0], ss=swizzle, sl=sl, hint=hint)


def _operand_type(elem: ElemType) -> str:
    # an f32 MMA operand is a tf32 operand (language spec 3.1)
    return "tf32" if elem.name == "f32" else elem.name


def _shape(m: int, n: int, k: int) -> str:
    return f"{m}x{n}x{k}"


def _shapes(row: MmaRow) -> str:
    """A row's shapes, short: ``16x16x16, 16x16x32``, or pairs with their common Ks."""
    ks: dict[tuple[int, int], list[int]] = {}
    for m, n, k in row.shapes:
        ks.setdefault((m, n), []).append(k)
    common = {tuple(v) for v in ks.values()}
    if len(ks) <= 2 or len(common) != 1:
        return ", ".join(_shape(*s) for s in row.shapes)
    pairs = " ".join(f"{m}x{n}" for m, n in ks)
    return f"M x N in {pairs}; K in {', '.join(map(str, next(iter(common))))}"


def _shape_hint(row: MmaRow, m: int, n: int, k: int) -> str:
    """The table shape that needs the smallest change of the tile, and that change."""
    tile = (m, n, k)

    def cost(shape: Shape) -> tuple[int, int, int]:
        failing = [d for v, d in zip(tile, shape) if v % d]
        return len(failing), sum(failing), -shape[0] * shape[1] * shape[2]

    best = min(row.shapes, key=cost)
    need = [f"{name} = {v} a multiple of {d}" for name, v, d in zip("MNK", tile, best) if v % d]
    return f"with the shape {_shape(*best)}, make {' and '.join(need)}"


def _type_entry(table: str, pair: tuple[str, str], matching: list[MmaRow],
                rows: tuple[MmaRow, ...]) -> str:
    a, b = pair
    if matching:
        accs = " or ".join(sorted({row.acc for row in matching}))
        return f"its rows for {a} x {b} accumulate in {accs} only"
    takes = ", ".join(sorted({f"{x} x {y}" for row in rows for x, y in row.operands
                              if x == y}))
    return f"no row takes {a} x {b} operands (the rows take {takes})"
