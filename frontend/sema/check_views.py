"""Views of data: ``subspan`` / ``chunkat`` / ``at`` steps, array indexing and the extents
and static bounds that view shapes are built from.
"""

from __future__ import annotations

from dataclasses import replace

from .. import syntax as ast
from ..source import Span
from .check_common import (ERROR, CheckerBase, ErrorType, expr_text, initialiser, is_intlike,
                           with_article)
from .model import (BoundedTupleType, BoundedType, DataType, ExprInfo, FutureType, IndexItem,
                    ScalarType, Symbol, SymKind, TupleType, ViewInfo, ViewStep)
from .symbolic import Sym
from .views import (TileArg, ViewError, chunkat_step, span_as_step, squeeze_step, subspan_step,
                    view_from_step)


# The view steps that name the shape a later `.sqz()` drops unit dimensions from.
_SHAPING_STEPS = frozenset({"subspan", "modspan", "view", "span_as"})


class ViewChecks(CheckerBase):
    """Mixin of ``Checker``: view expressions, view steps and extents."""

    def _view_operand(self, expr: ast.Expr) -> DataType | None:
        info = self._expr(expr)
        if isinstance(info.type, DataType):
            return info.type
        if isinstance(info.type, FutureType):
            sym = info.type.symbol
            if sym.elem is not None and sym.shape is not None:
                return DataType(sym.elem, sym.shape, sym.storage or "shared")
        if not isinstance(info.type, ErrorType):
            self._error("CQ0204", expr.span, name=expr_text(expr), actual=info.type.describe(),
                        expected="spanned data or a view")
        return None

    def _expr_View(self, view: ast.View) -> ExprInfo:
        root_info = self._view_root(view.base)
        if root_info is None:
            return ERROR
        root, data, array_index = root_info
        steps: list[ViewStep] = []
        shape = data.shape
        alias = self._fn().refs.get(id(_view_base_name(view.base)))
        if alias is not None and alias.kind is SymKind.VIEW and alias.view is not None:
            steps = list(alias.view.steps)  # a view of a view alias continues the alias's steps
            array_index = alias.view.array_index
        for op in view.ops:
            if op.kind == "sqz" and not any(s.kind in _SHAPING_STEPS for s in steps):
                self._error("CQ0317", op.span)
                return ERROR
            try:
                step = self._view_step(op, shape)
            except ViewError as err:
                self._error(err.code, err.span, **err.fields)
                return ERROR
            if step is None:
                return ERROR
            steps.append(step)
            shape = step.extents
        dtype = DataType(data.elem, shape, data.storage)
        self._fn().views[id(view)] = ViewInfo(root, tuple(steps), dtype, array_index)
        return ExprInfo(dtype)

    def _view_root(self, base: ast.Expr) -> tuple[Symbol, DataType, tuple[ast.Expr, ...]] | None:
        array_index: list[ast.Expr] = []
        while isinstance(base, ast.Index):
            array_index.insert(0, base.index)
            self._expr(base.index)
            base = base.base
        if isinstance(base, ast.Member) and base.member in ("data", "mdata"):
            base = base.obj
        if not isinstance(base, ast.Ident):
            self._error("CQ0204", base.span, name=expr_text(base), actual="an expression",
                        expected="spanned data, a future or a view")
            return None
        sym = self._resolve(base)
        if sym is None or sym.poisoned:
            return None
        self._check_array_index(sym, array_index)
        if sym.kind is SymKind.VIEW and sym.view is not None:
            return sym.view.root, sym.view.type, tuple(array_index)
        if sym.kind in (SymKind.DATA, SymKind.FUTURE, SymKind.FRAG) and sym.shape is not None \
                and sym.elem is not None:
            return sym, DataType(sym.elem, sym.shape, sym.storage or "shared"), tuple(array_index)
        self._error("CQ0213", base.span, name=base.name, kind=with_article(sym.kind.value),
                    usage="as data (it has no shape yet)" if sym.kind is SymKind.FUTURE
                    else "as data")
        return None

    def _check_array_index(self, sym: Symbol, indices: list[ast.Expr]) -> None:
        """``buf[i]`` on an array of buffers: rank and the range of each index (a bounded
        index reaches its bound minus one)."""
        if not indices:
            return
        if len(indices) != len(sym.array_dims):
            self._error("CQ0305", indices[0].span, name=sym.name, rank=len(sym.array_dims),
                        count=len(indices))
            return
        for index, count in zip(indices, sym.array_dims):
            info = self._fn().exprs.get(id(index))
            if info is None or count.value is None:
                continue
            low, high = self._index_range(index)
            modulus = self._modulus(index, 4)
            if modulus is not None and low is None:
                high = modulus - 1 if high is None else min(high, modulus - 1)
            if (high is not None and high >= count.value) or (low is not None and low < 0):
                self._error("CQ0315", index.span, index=expr_text(index), name=sym.name,
                            high=high if high is not None and high >= count.value else low,
                            count=count.value)

    def _modulus(self, index: ast.Expr, depth: int) -> int | None:
        """``c`` when ``index`` is ``x % c`` of a bounded (non-negative) ``x`` with a
        constant ``c > 0``, directly or through a name defined so (``stage = k % 4``):
        its values stay below ``c`` whatever the bound of ``x``."""
        if isinstance(index, ast.Ident) and depth:
            sym = self._fn().refs.get(id(index))
            init = initialiser(sym) if sym is not None else None
            return self._modulus(init, depth - 1) if init is not None else None
        if not isinstance(index, ast.Binary) or index.op != "%":
            return None
        lhs, rhs = self._fn().exprs.get(id(index.lhs)), self._fn().exprs.get(id(index.rhs))
        if lhs is None or rhs is None or not isinstance(lhs.type, BoundedType) or \
                rhs.static is None or rhs.static.value is None or rhs.static.value <= 0:
            return None
        return rhs.static.value

    def _view_step(self, op: ast.ViewOp, shape: tuple[Sym, ...]) -> ViewStep | None:
        step = self._view_step_shape(op, shape)
        if step is not None and op.strides is not None:
            step = self._strided(step, op.strides, op.span)
        if step is not None:
            self._check_view_step(step, shape)
        return step

    def _strided(self, step: ViewStep, exprs: tuple[ast.Expr, ...], span: Span) -> ViewStep:
        """``view(E : T)`` / ``subspan(E : T)``: one stride per extent, known when the
        kernel is compiled or from parameter sizes."""
        if len(exprs) != len(step.extents):
            raise ViewError("CQ0311", span, what="strides", expected=len(step.extents),
                            actual=len(exprs))
        strides = tuple(self._extent(s, "an element stride") for s in exprs)
        return replace(step, strides=strides)

    def _check_view_step(self, step: ViewStep, shape: tuple[Sym, ...]) -> None:
        """Static bounds of tile indices (spec 7 row 28) and chunkat over cdiv bounds whose
        divisibility is unknown (a warning). Tiles that run past symbolic sizes are tails:
        masked, not errors."""
        uneven = [d for d, (size, extent) in enumerate(zip(shape, step.extents))
                  if step.ceil and step.ceil[d] and size.mod(extent).provably_eq(0) is not True]
        if uneven:
            self._error("CQ0310", step.span, dim=", ".join(map(str, uneven)),
                        size=", ".join(str(shape[d]) for d in uneven),
                        tile=", ".join(str(step.extents[d]) for d in uneven))
        for d, size in enumerate(shape):
            factor = step.factors[d] if d < len(step.factors) else None
            if factor is not None and not step.ceil[d] and factor.provably_le(size) is None:
                self._runtime_check(factor, "<=", size, f"the tiling factor of dimension {d} "
                                    "must not exceed the data size", step.span)
            item = step.indices[d] if d < len(step.indices) else None
            if item is None or item.expr is None or step.strides:
                continue  # (a strided view's origin is not bounded by its parent's shape)
            info = self._fn().exprs.get(id(item.expr))
            if info is None or info.static is None or item.member is not None:
                continue
            index = info.static.value
            scale = step.scales[d]
            if index is None or scale.value is None or size.value is None or scale.value <= 0:
                continue
            start = index * scale.value
            if index < 0 or start >= size.value:
                count = -(-size.value // scale.value)
                self._error("CQ0304", item.expr.span, dim=d, index=index,
                            bound=count if step.kind != "view" else size.value)

    def _view_step_shape(self, op: ast.ViewOp, shape: tuple[Sym, ...]) -> ViewStep | None:
        if op.kind == "chunkat":
            args = self._tile_args(op.args, factors=True)
            return None if args is None else chunkat_step(shape, args, op.span)
        if op.kind == "chunk":
            factors = [self._static_int(a, "a chunk factor") for a in op.args]
            at = self._index_items(op.at or ())
            if len(at) != len(factors):
                raise ViewError("CQ0311", op.span, what="at", expected=len(factors),
                                actual=len(at))
            args = [TileArg(item, f, op.span) for item, f in zip(at, factors)]
            return chunkat_step(shape, args, op.span)
        if op.kind in ("subspan", "modspan"):
            # a runtime extent cannot scale `.at` indices (the tile's position would vary)
            fixed = op.step is not None or op.at is not None or op.kind == "modspan"
            extents, dynamic = self._view_extents(op.args, "a subspan extent", fixed)
            step = [self._static_int(s, "a step") for s in op.step] if op.step else None
            offsets = self._index_items(op.at) if op.at is not None else None
            return _with_dynamic(subspan_step(op.kind, shape, extents, step, offsets, op.span),
                                 dynamic)
        if op.kind == "view":
            extents, dynamic = self._view_extents(op.args, "a view extent", False)
            origin = self._index_items(op.at) if op.at is not None else None
            return _with_dynamic(view_from_step(shape, extents, origin, op.span), dynamic)
        if op.kind == "span_as":
            new_shape = self._shape_items(op.args, op.span)
            return None if new_shape is None else span_as_step(shape, list(new_shape), op.span)
        if op.kind == "sqz":
            return squeeze_step(shape, op.span)
        self._error("CQ0701", op.span, construct=f"'.{op.kind}'", hint=None)
        return None

    def _view_extents(self, args: tuple[ast.Expr, ...], what: str, fixed: bool,
                      ) -> tuple[list[Sym | None], list[ast.Expr | None]]:
        """Extents of ``subspan``/``view``: ``_`` is the whole dimension (None); unless
        ``fixed``, runtime integers with a static bound are allowed (see _view_extent)."""
        extents: list[Sym | None] = []
        dynamic: list[ast.Expr | None] = []
        for arg in args:
            if _is_wildcard(arg):
                extents.append(None)
                dynamic.append(None)
            elif fixed:
                extents.append(self._extent(arg, what))
                dynamic.append(None)
            else:
                extent, runtime = self._view_extent(arg, what)
                extents.append(extent)
                dynamic.append(runtime)
        return extents, dynamic

    def _static_bound(self, expr: ast.Expr) -> int | None:
        """The largest value a runtime integer can take, when the program makes it plain:
        constants, ``c ? a : b`` (the larger bound), ``(a < b) ? a : b`` (a minimum: the
        smaller bound) and names declared from those."""
        info = self._fn().exprs.get(id(expr))
        if info is not None and info.static is not None:
            return info.static.value
        if isinstance(expr, ast.Ident):
            sym = self._fn().refs.get(id(expr))
            return self.scalar_bounds.get(sym) if sym is not None else None
        if isinstance(expr, ast.Ternary):
            then, other = self._static_bound(expr.then), self._static_bound(expr.other)
            if _is_minimum(expr):
                known = [b for b in (then, other) if b is not None]
                return min(known) if known else None
            return max(then, other) if then is not None and other is not None else None
        return None

    def _runtime_trips(self, shape: ast.Expr) -> ast.Expr | None:
        """The single item of ``[n]`` when it is a runtime integer (a trip count known
        only when the kernel runs, like a causal KV bound)."""
        if not isinstance(shape, ast.ShapeLit) or len(shape.items) != 1:
            return None
        item = shape.items[0]
        mark = self.reporter.checkpoint()
        info = self._expr(item)
        if info.static is None and is_intlike(info):
            return item
        self.reporter.rollback(mark)  # (checked again as part of the shape)
        return None

    def _loop_bound(self, expr: ast.Expr, depth: int) -> Sym | None:
        """An upper bound of a runtime integer, possibly in terms of parameter sizes:
        constants and sizes, ``__min(a, b)`` and ``(a < b) ? a : b`` (either bound),
        ``c ? a : b`` (the provably larger bound) and names declared from those."""
        info = self._fn().exprs.get(id(expr))
        if info is not None and info.static is not None:
            return info.static
        if isinstance(expr, ast.Ident) and depth:
            sym = self._fn().refs.get(id(expr))
            init = initialiser(sym) if sym is not None else None
            if sym is not None and sym in self.scalar_bounds:
                return Sym(self.scalar_bounds[sym])
            return self._loop_bound(init, depth - 1) if init is not None else None
        if isinstance(expr, ast.CallExpr) and expr.name == "__min" and len(expr.args) == 2:
            return self._smaller_bound(*(self._loop_bound(a, depth) for a in expr.args))
        if isinstance(expr, ast.Ternary):
            then, other = self._loop_bound(expr.then, depth), self._loop_bound(expr.other, depth)
            if _is_minimum(expr):
                return self._smaller_bound(then, other)
            if then is None or other is None:
                return None
            if then.provably_le(other):
                return other
            return then if other.provably_le(then) else None
        return None

    @staticmethod
    def _smaller_bound(a: Sym | None, b: Sym | None) -> Sym | None:
        if a is None or b is None:
            return a if b is None else b
        return a if a.provably_le(b) else b

    def _view_extent(self, expr: ast.Expr, what: str) -> tuple[Sym, ast.Expr | None]:
        """A view extent; a runtime integer with a static bound gives the bound and
        itself (elements past its value are masked). Not in a TMA copy: its box shape is
        fixed on the host (CQ0415)."""
        info = self._expr(expr)
        if not self._in_tma and info.static is None and isinstance(info.type, ScalarType) \
                and info.type.elem.is_int:
            high = self._static_bound(expr)
            if high is not None and high > 0:
                return Sym(high), expr
        return self._extent(expr, what), None

    def _extent(self, expr: ast.Expr, what: str) -> Sym:
        """A tile extent: known when the program is compiled or from parameter sizes.
        TMA boxes must be computable on the host; other tiles need a static size here."""
        info = self._expr(expr)
        if info.static is not None:
            return info.static
        if isinstance(info.type, ScalarType) and info.type.elem.is_int:
            if self._in_tma:
                self._error("CQ0415", expr.span, extent=expr_text(expr))
            else:
                self._error("CQ0704", expr.span, extent=expr_text(expr))
        elif not isinstance(info.type, ErrorType):
            self._error("CQ0209", expr.span, what=what, actual=info.type.describe())
        return Sym(1)

    def _index_items(self, exprs: tuple[ast.Expr, ...]) -> list[IndexItem]:
        items = self._tile_args(exprs, factors=False)
        return [a.item for a in items] if items is not None else []

    def _tile_args(self, exprs: tuple[ast.Expr, ...], factors: bool) -> list[TileArg] | None:
        """Flatten chunkat/at arguments; bounded ituples contribute all their members."""
        args: list[TileArg] = []
        for expr in exprs:
            if _is_wildcard(expr):
                args.append(TileArg(IndexItem(None), None, expr.span))
                continue
            info = self._expr(expr)
            t = info.type
            if isinstance(t, BoundedTupleType):
                for i, member in enumerate(t.symbol.members):
                    args.append(TileArg(IndexItem(expr, i), member.bound, expr.span))
            elif isinstance(t, BoundedType):
                args.append(TileArg(IndexItem(expr), t.bound, expr.span))
            elif isinstance(t, TupleType):
                for i in range(len(t.values)):
                    args.append(TileArg(IndexItem(expr, i), None, expr.span))
            elif isinstance(t, ScalarType) and t.elem.is_int:
                if factors:
                    name = expr.name if isinstance(expr, ast.Ident) else expr_text(expr)
                    self._error("CQ0314", expr.span, name=name)
                    return None
                args.append(TileArg(IndexItem(expr), None, expr.span))
            elif isinstance(t, ErrorType):
                return None
            else:
                self._error("CQ0209", expr.span, what="a tile index", actual=t.describe())
                return None
        return args


def _view_base_name(base: ast.Expr) -> ast.Expr:
    """The identifier under ``buf[i][j]`` (the name a view starts from)."""
    while isinstance(base, ast.Index):
        base = base.base
    return base


def _is_minimum(expr: ast.Ternary) -> bool:
    """``(a < b) ? a : b`` and its mirror forms: the smaller of a and b."""
    cond = expr.cond
    if not isinstance(cond, ast.Binary) or cond.op not in ("<", "<=", ">", ">="):
        return False
    pair = (expr_text(cond.lhs), expr_text(cond.rhs))
    chosen = (expr_text(expr.then), expr_text(expr.other))
    return chosen == (pair if cond.op in ("<", "<=") else pair[::-1])


def _with_dynamic(step: ViewStep, dynamic: list[ast.Expr | None]) -> ViewStep:
    return replace(step, dynamic=tuple(dynamic)) if any(d is not None for d in dynamic) \
        else step


def _is_wildcard(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Ident) and expr.name == "_"
