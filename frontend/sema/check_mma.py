"""Tensor-core statements: fragments, ``mma.fill`` / ``load`` / ``exec`` / ``store`` /
``scale``, sparse metadata and K schedules, and the operand types MMA accepts.
"""

from __future__ import annotations

from .. import syntax as ast
from ..source import Span
from . import dtypes
from .check_common import CheckerBase, expr_text
from .dtypes import ElemType
from .model import DataType, FutureType, Level, Symbol, SymKind
from .rules_s5000 import MmaOperand
from .symbolic import Sym, shape_text


_MMA_OK = {
    "f16": {"f16", "f32"},
    "bf16": {"f32"},
    "f32": {"f32"},
    "tf32": {"f32"},
    "f64": {"f64"},
    "f8_e4m3": {"f32", "f16"},
    "f8_e5m2": {"f32", "f16"},
    "s8": {"s32"},
    "u8": {"s32"},
}


class MmaChecks(CheckerBase):
    """Mixin of ``Checker``: MMA statements and fragments."""

    def _stmt_MmaFill(self, stmt: ast.MmaFill) -> None:
        value = self._expr(stmt.value)
        elem = self._elem(stmt.elem, stmt.span) if stmt.elem else None
        if stmt.declares:
            name = _target_name(stmt.target)
            acc = Symbol(name, SymKind.FRAG, stmt.target.span, elem=elem, frag_role="acc",
                         mutable=True, decl_node=stmt,
                         shape=self.acc_shapes.get(stmt.target.span))
            self._declare(acc)
            self._note_decl(stmt, acc)
            self._fn().frags[id(stmt)] = acc
            return
        sym = self._frag_ref(stmt.target)
        if sym is None:
            return
        if sym.frag_role != "acc":
            self._error("CQ0505", stmt.target.span, usage="re-filled", name=sym.name)
        if elem is not None:
            sym.elem = elem
        self._fn().frags[id(stmt)] = sym
        del value

    def _stmt_FragDecl(self, stmt: ast.FragDecl) -> None:
        """``frag[.T] mc[2][3] {v};``: accumulators filled with ``v`` -- one, or an array of
        them selected as ``mc[i][j]``; the shape comes from the first mma, as for mma.fill."""
        self._expr(stmt.value)
        elem = self._elem(stmt.elem, stmt.span) if stmt.elem else None
        dims = tuple(self._static_int(d, "an array dimension") for d in stmt.array_dims)
        sym = Symbol(stmt.name, SymKind.FRAG, stmt.span, elem=elem, frag_role="acc",
                     mutable=True, decl_node=stmt, array_dims=dims)
        self._declare(sym)
        self._note_decl(stmt, sym)
        self._fn().frags[id(stmt)] = sym

    def _register_tile(self, expr: ast.Expr) -> Symbol | None:
        """The ``frag T [M, K] x {v};`` register tile ``expr`` names, if it names one."""
        if not isinstance(expr, ast.Ident):
            return None
        sym = self._lookup(expr.name)
        if sym is None or sym.kind is not SymKind.DATA or not (
                isinstance(sym.decl_node, ast.SpannedDecl) and sym.decl_node.frag):
            return None
        self._fn().refs[id(expr)] = sym
        return sym

    def _frag_ref(self, expr: ast.Expr) -> Symbol | None:
        """The fragment ``expr`` names: ``mc``, or ``mc[i][j]`` of an array of fragments."""
        indices: list[ast.Expr] = []
        base = expr
        while isinstance(base, ast.Index):
            indices.insert(0, base.index)
            self._expr(base.index)
            base = base.base
        if not isinstance(base, ast.Ident):
            self._error("CQ0508", expr.span, name=expr_text(expr))
            return None
        sym = self._resolve(base)
        if sym is None:
            return None
        if sym.kind is not SymKind.FRAG:
            self._error("CQ0508", expr.span, name=base.name)
            return None
        if sym.array_dims and not indices:
            sym.frag_executed = True  # reported here; "never executed" would only echo it
            self._error("CQ0550", expr.span, name=base.name,
                        dims="".join(f"[{d}]" for d in sym.array_dims),
                        first="[0]" * len(sym.array_dims))
            return None
        if indices and not sym.array_dims:
            self._error("CQ0508", expr.span, name=expr_text(expr))
            return None
        self._check_array_index(sym, indices)
        return sym

    def _stmt_MmaLoad(self, stmt: ast.MmaLoad) -> None:
        data = self._view_operand(stmt.src)
        if data is None:
            return
        self._check_swizzle(stmt)
        if len(data.shape) != 2 or not all(d.is_const for d in data.shape):
            self._error("CQ0501", stmt.src.span, name=expr_text(stmt.src), shape=shape_text(data.shape))
        if not stmt.declares:  # `mma.load view, frag;`: new contents for a fragment
            tile = self._register_tile(stmt.target)
            if tile is not None:  # or for a `frag T [M, K] x` register tile (RS-mode A)
                if any(x.provably_eq(y) is False for x, y in zip(tile.shape or (), data.shape)):
                    self._error("CQ0403", stmt.span, src=shape_text(data.shape),
                                dst=shape_text(tile.shape or ()))
                self._fn().frags[id(stmt)] = tile
                return
            sym = self._frag_ref(stmt.target)
            if sym is not None:
                self._fn().frags[id(stmt)] = sym
            return
        name = _target_name(stmt.target)
        existing = self._lookup(name)
        view = self._fn().views.get(id(stmt.src))
        if existing is not None and existing.kind is SymKind.FRAG and existing.frag_role == "acc":
            # `mc = mma.load out.chunkat(...)`: reload an accumulator from memory
            existing.shape = existing.shape or data.shape
            self._fn().frags[id(stmt)] = existing
            return
        sym = Symbol(name, SymKind.FRAG, stmt.target.span, elem=data.elem, shape=data.shape,
                     frag_role="operand", view=view, decl_node=stmt)
        if existing is not None and existing.kind is SymKind.FRAG and existing.frag_role == "operand":
            self.scopes[-1][name] = sym  # operand fragments are re-bound every K step
        else:
            self._declare(sym)
        self._note_decl(stmt, sym)
        self._fn().frags[id(stmt)] = sym

    def _check_swizzle(self, stmt: ast.MmaLoad) -> None:
        """The swizzle an operand is loaded with should be the one its buffer was filled
        with (both written explicitly): a mismatch reads garbage on the reference target."""
        info = self._fn().views.get(id(stmt.src))
        if not stmt.has_swiz or info is None or info.root not in self.swizzles:
            return
        producer = self.swizzles[info.root]
        consumer = 128
        if stmt.swiz is not None:
            static = self._expr(stmt.swiz).static
            consumer = static.value if static is not None and static.value is not None else 128
        if producer and producer != consumer:
            self._error("CQ0424", stmt.span, name=info.root.name, producer=producer,
                        consumer=consumer)

    def _operand(self, expr: ast.Expr) -> tuple[ElemType, tuple[Sym, ...]] | None:
        if isinstance(expr, ast.View) and not expr.ops and isinstance(expr.base, ast.Ident):
            sym = self._lookup(expr.base.name)
            if sym is not None and sym.kind is SymKind.FRAG:
                self._fn().refs[id(expr.base)] = sym
                sym.frag_as_operand = True
                if sym.shape is None or sym.elem is None:
                    self._error("CQ0505", expr.span, usage="used as an operand before mma.load",
                                name=sym.name)
                    return None
                return sym.elem, sym.shape
        data = self._view_operand(expr)
        if data is None:
            return None
        if len(data.shape) != 2 or not all(d.is_const for d in data.shape):
            self._error("CQ0501", expr.span, name=expr_text(expr), shape=shape_text(data.shape))
            return None
        return data.elem, data.shape

    def _check_k_schedule(self, attr: ast.Attribute, span: Span) -> None:
        """``[[schedule(k_tiles(t0, t1, ...))]]``: the order in which the MMA takes its K
        tiles, so each of ``0 .. n-1`` exactly once (reported at the MMA, ``span``)."""
        call = attr.args[0] if attr.args else None
        if not isinstance(call, ast.CallExpr):
            return  # (the parser reported it)
        values = [self._expr(arg).static for arg in call.args]
        order = [v.value if v is not None else None for v in values]
        if sorted(order, key=lambda v: -1 if v is None else v) != list(range(len(order))):
            shown = ", ".join("?" if v is None else str(v) for v in order)
            self._error("CQ0522", span, order=shown, n=len(order))

    def _stmt_MmaExec(self, stmt: ast.MmaExec) -> None:
        if stmt.schedule is not None:
            self._check_k_schedule(stmt.schedule, stmt.span)
        acc = self._frag_ref(stmt.acc)
        a = self._operand(stmt.a)
        b = self._operand(stmt.b)
        meta = None
        if stmt.kind == "sp" and stmt.extra:
            meta = self._operand(stmt.extra[0])  # a view, or a fragment from mma.load
            self._check_sparse_metadata_source(stmt.extra[0])
        elif stmt.kind == "sp":
            self._error("CQ0513", stmt.span, la=stmt.layout_a, lb=stmt.layout_b)
        else:
            for extra in stmt.extra:
                self._expr(extra)
        if acc is not None and (a is None or b is None):
            acc.frag_executed = True  # its operands were reported; CQ0506 would only echo that
        if acc is None or a is None or b is None:
            return
        if acc.frag_role != "acc" and not _loaded_as_accumulator(acc):
            self._error("CQ0505", stmt.acc.span, usage="accumulated into", name=acc.name)
            return
        acc.frag_role = "acc"
        (ea, sa), (eb, sb) = a, b
        m, ka = (sa[0], sa[1]) if stmt.layout_a == "row" else (sa[1], sa[0])
        n, kb = (sb[0], sb[1]) if stmt.layout_b == "row" else (sb[1], sb[0])
        if stmt.kind == "sp":
            ka = ka * 2
        if ka.provably_eq(kb) is False:
            self._error("CQ0502", stmt.span, a=f"'{expr_text(stmt.a)}' {shape_text(sa)}",
                        b=f"'{expr_text(stmt.b)}' {shape_text(sb)}", la=stmt.layout_a,
                        lb=stmt.layout_b, hint=_layout_hint(stmt, sa, sb))
            return
        shape = (m, n)
        if acc.shape is None:
            acc.shape = shape
        elif any(x.provably_eq(y) is False for x, y in zip(acc.shape, shape)):
            self._error("CQ0503", stmt.span, name=acc.name, acc=shape_text(acc.shape),
                        expected=shape_text(shape))
        if acc.elem is None:
            acc.elem = default_accumulator(ea)
        warpgroup = any(lv.level is Level.GROUP4 for lv in self.ctx.levels)
        if not mma_types_ok(ea, eb, acc.elem):
            self._error("CQ0504", stmt.span, a=ea.name, b=eb.name, c=acc.elem.name)
        elif self.engine is not None and stmt.kind == "sp":
            self.engine.sparse_mma(stmt.span, warpgroup)
        elif self.engine is not None:
            self.engine.mma(stmt.span, warpgroup, ea, eb, acc, (m, n, ka),
                            (self._mma_operand(stmt.a), self._mma_operand(stmt.b)))
        elif ea.name not in self.target.mma_types:
            self._error("CQ0509", stmt.span, a=ea.name, target=self.target.name)
        if warpgroup and not self.target.wgmma:
            self._error("CQ0510", stmt.span, target=self.target.name)
        if stmt.kind == "sp" and kb.value is not None and kb.value % 4:
            self._error("CQ0511", stmt.span, k=kb.value)
        elif stmt.kind == "sp" and meta is not None:
            self._check_sparse_metadata(stmt.extra[0], meta, m, kb)
        if stmt.kind == "scale" and stmt.extra:
            self._check_scale_operand(stmt.extra[0], m)
        acc.frag_executed = True
        self._fn().frags[id(stmt)] = acc
        if stmt.future is not None:
            future = Symbol(stmt.future, SymKind.FUTURE, stmt.span, is_async=True,
                            decl_node=stmt)
            self.scopes[-1][stmt.future] = future
            self._note_decl(stmt, future)

    def _check_sparse_metadata(self, expr: ast.Expr, meta: tuple[ElemType, tuple[Sym, ...]],
                               m: Sym, k: Sym) -> None:
        """The metadata of a 2:4 sparse MMA (spec 5.8): u8 ``[M, K/8]``, one nibble per
        group of four columns of K (a byte per eight, rounded up)."""
        if k.value is None:
            return
        elem, shape = meta
        expected = (m, Sym(-(-k.value // 8)))
        if elem.name != "u8" or len(shape) != 2 or any(
                x.provably_eq(y) is False for x, y in zip(shape, expected)):
            self._error("CQ0514", expr.span, name=expr_text(expr), elem=elem.name,
                        shape=shape_text(shape), expected=shape_text(expected), k=k.value)

    def _check_sparse_metadata_source(self, expr: ast.Expr) -> None:
        """A warpgroup sparse MMA reads its metadata from registers: it must come through
        ``mma.load`` (a warp MMA may also take a view)."""
        sym = self._fn().refs.get(id(expr.base)) if isinstance(expr, ast.View) else None
        from_load = sym is not None and sym.kind is SymKind.FRAG
        if not from_load and any(lv.level is Level.GROUP4 for lv in self.ctx.levels):
            self._error("CQ0515", expr.span, name=expr_text(expr))

    def _mma_operand(self, expr: ast.Expr) -> MmaOperand:
        """Where an MMA operand lives, for the engine rules: the memory of the view it
        names or was loaded from; registers for accumulators and register tiles."""
        memory: str | None = None
        if isinstance(expr, ast.View) and not expr.ops and isinstance(expr.base, ast.Ident):
            sym = self._fn().refs.get(id(expr.base))
            if sym is not None and sym.kind is SymKind.FRAG:
                if sym.view is not None:
                    memory = sym.view.type.storage
                elif sym.frag_role == "acc":
                    memory = "registers"
                return MmaOperand(expr_text(expr), _memory(memory), expr.span)
        info = self._fn().exprs.get(id(expr))
        if info is not None and isinstance(info.type, DataType):
            memory = info.type.storage
        elif info is not None and isinstance(info.type, FutureType):
            memory = info.type.symbol.storage or "shared"
        return MmaOperand(expr_text(expr), _memory(memory), expr.span)

    def _check_scale_operand(self, expr: ast.Expr, m: Sym) -> None:
        """Per-row scales of an MMA: a [M, 1] or [1, M] view (spec 5.8)."""
        info = self._fn().exprs.get(id(expr))
        if info is None or not isinstance(info.type, DataType):
            return
        shape = info.type.shape
        ok = len(shape) == 2 and ((shape[0].provably_eq(m) is not False and shape[1] == Sym(1))
                                  or (shape[0] == Sym(1) and shape[1].provably_eq(m) is not False))
        if not ok:
            self._error("CQ0512", expr.span, m=m, shape=shape_text(shape))
    def _stmt_MmaStore(self, stmt: ast.MmaStore) -> None:
        acc = self._frag_ref(stmt.frag)
        dst = self._view_operand(stmt.dst)
        for e in stmt.mask:
            self._expr(e)
        if acc is None or dst is None:
            return
        self._fn().frags[id(stmt)] = acc
        if acc.shape is None:
            return
        if self.engine is not None:
            self.engine.mma_store(stmt.span, acc, stmt.modifier == "transp")
        expected = tuple(reversed(acc.shape)) if stmt.modifier == "transp" else acc.shape
        if len(dst.shape) != 2 or any(
                x.provably_eq(y) is False for x, y in zip(dst.shape, expected)):
            if stmt.modifier == "mask" and len(dst.shape) == 2:
                return
            self._error("CQ0507", stmt.dst.span, dst=shape_text(dst.shape),
                        acc=shape_text(expected))

    def _stmt_MmaScale(self, stmt: ast.MmaScale) -> None:
        acc = self._frag_ref(stmt.frag)
        self._expr(stmt.scale_a)
        self._expr(stmt.scale_b)
        if acc is not None:
            self._fn().frags[id(stmt)] = acc
        if acc is not None and acc.shape is not None:
            self._check_scale_operand(stmt.scale_a, acc.shape[0])


def _loaded_as_accumulator(sym: Symbol) -> bool:
    """``mc = mma.load out.chunkat(...)`` followed by ``mma ... mc, ...``: a fragment loaded
    from memory that no MMA has read as an operand becomes the accumulator (C input)."""
    return isinstance(sym.decl_node, ast.MmaLoad) and not sym.frag_as_operand


def _memory(storage: str | None) -> str | None:
    # `local` data inside a kernel (frag register tiles, local buffers) lives in registers
    return "registers" if storage == "local" else storage


def default_accumulator(a: ElemType) -> ElemType:
    """Accumulator type of ``mma.fill v`` without a type: A's element type when the
    tensor cores accumulate in it (f16, f64, f32/tf32), else f32 (bf16, fp8) or s32."""
    if a.name in ("f16", "f32", "f64", "tf32"):
        return dtypes.lookup("f32") if a.name == "tf32" else a
    if a.is_int:
        return dtypes.S32
    return dtypes.F32


def mma_types_ok(a: ElemType, b: ElemType, c: ElemType) -> bool:
    if a.name in ("f8_e4m3", "f8_e5m2") and b.name in ("f8_e4m3", "f8_e5m2"):
        return c.name in _MMA_OK[a.name]
    if a != b and not (a.is_int and b.is_int and a.bits == b.bits == 8):
        return False
    return c.name in _MMA_OK.get(a.name, set())


def _layout_hint(stmt: ast.MmaExec, sa: tuple[Sym, ...], sb: tuple[Sym, ...]) -> str:
    """Suggest the layout suffix under which the operand shapes agree on K."""
    for la in ("row", "col"):
        for lb in ("row", "col"):
            ka = sa[1] if la == "row" else sa[0]
            kb = sb[1] if lb == "row" else sb[0]
            if ka.provably_eq(kb):
                return (f"with A {shape_text(sa)} and B {shape_text(sb)} the shapes agree as "
                        f"`mma.{la}.{lb}` (row: K is the second dimension; col: the first)")
    return "A is [M, K] (row) or [K, M] (col); B is [N, K] (row) or [K, N] (col)"


def _target_name(expr: ast.Expr) -> str:
    while isinstance(expr, ast.Index):
        expr = expr.base
    return expr.name if isinstance(expr, ast.Ident) else "<fragment>"
