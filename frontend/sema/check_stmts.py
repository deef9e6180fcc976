"""Statements of the checker: declarations, assignment, print/assert, return, ``if`` /
``while`` and the facts an enclosing condition proves about bounded variables.
"""

from __future__ import annotations

from dataclasses import replace

from .. import syntax as ast
from ..source import Span
from . import dtypes
from .check_common import (COMPARE, CheckerBase, ErrorType, expr_text, idents, initialiser,
                           type_word, with_article)
from .dtypes import ElemType
from .model import (BoundedType, DataType, ExprInfo, FutureType, ScalarType, ShapeType, Symbol,
                    SymKind, TupleType)
from .symbolic import Sym, shape_text


# `c op x` read as `x FLIP[op] c`
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


class StatementChecks(CheckerBase):
    """Mixin of ``Checker``: the statement rules outside parallel, DMA and MMA."""

    def _stmt_Block(self, stmt: ast.Block) -> None:
        self._block(stmt)

    def _stmt_Empty(self, stmt: ast.Empty) -> None:
        pass

    def _stmt_MmaCommit(self, stmt: ast.MmaCommit) -> None:
        pass

    def _stmt_SpannedDecl(self, stmt: ast.SpannedDecl) -> None:
        storage = stmt.storage
        if storage is None:
            storage = "local" if self.ctx.on_device else "global"
        if storage in ("shared", "local") and not self.ctx.on_device:
            self._error("CQ0607", stmt.span, storage=storage, name=stmt.vars[0].name,
                        where="inside a parallel block")
        if storage == "global" and self.ctx.on_device:
            self._error("CQ0607", stmt.span, storage=storage, name=stmt.vars[0].name,
                        where="outside parallel blocks")
        elem = self._elem(stmt.elem, stmt.span)
        shape = self._shape_items(stmt.dims or (), stmt.span)
        if shape is None:
            shape = ()
        for var in stmt.vars:
            if self.ctx.on_device:
                for dim in shape:
                    if not dim.is_const and not self._specialisable(dim):
                        self._error("CQ0307", var.span, name=var.name, dim=dim)
                        break
            array_dims = tuple(self._static_int(d, "an array dimension") for d in var.array_dims)
            if var.init is not None:
                init = self._expr(var.init)
                if (init.static is None or init.static.value is None) and not isinstance(
                        init.type, (ErrorType, ScalarType)) or (
                        isinstance(init.type, ScalarType) and not _is_literal(var.init)
                        and init.static is None):
                    self._error("CQ0226", var.init.span, name=var.name,
                                actual=init.type.describe())
            if storage == "global":
                for d, dim in enumerate(shape):
                    if not dim.is_const and dim.provably_le(0) is not False:
                        self._runtime_check(dim, ">", Sym(0), f"'{var.name}' dimension {d} must "
                                            "be positive", var.span)
            if storage == "shared":
                count = 1
                for dim in array_dims:
                    count *= dim.value or 1
                self._note_shared(var.name, elem, shape, var.span, count)
            sym = Symbol(var.name, SymKind.DATA, var.span, elem=elem, shape=shape,
                         storage=storage, mutable=True, array_dims=array_dims, decl_node=stmt)
            self._declare(sym)
            self._note_decl(stmt, sym)

    def _shape_items(self, items: tuple[ast.Expr, ...], span: Span,
                     nonpositive: str = "CQ0306") -> tuple[Sym, ...] | None:
        """Dimensions from an item list; mdspan items (``x.span``) are spliced in.
        ``nonpositive`` is the code for a dimension <= 0 (CQ0601 for parallel bounds)."""
        dims: list[Sym] = []
        for item in items:
            info = self._expr(item)
            if isinstance(info.type, ErrorType):
                return None
            if isinstance(info.type, ShapeType):
                dims.extend(info.type.dims)
            elif isinstance(info.type, TupleType) and all(v is not None for v in info.type.values):
                dims.extend(v for v in info.type.values if v is not None)
            elif info.static is not None:
                if info.static.value is not None and info.static.value <= 0:
                    self._error(nonpositive, item.span, value=info.static.value)
                    return None
                dims.append(info.static)
            else:
                if nonpositive == "CQ0601":
                    actual = info.type.elem.name if isinstance(info.type, ScalarType) else \
                        info.type.describe()
                    self._error("CQ0608", item.span, actual=actual)
                else:
                    self._not_static(item, "a dimension", info)
                return None
        return tuple(dims)

    def _static_int(self, expr: ast.Expr, what: str) -> Sym:
        info = self._expr(expr)
        if info.static is None:
            if not isinstance(info.type, ErrorType):
                self._not_static(expr, what, info)
            return Sym(1)
        return info.static

    def _stmt_ScalarDecl(self, stmt: ast.ScalarDecl) -> None:
        elem = self._elem(stmt.type, stmt.span) if stmt.type else None
        for item in stmt.items:
            info = self._expr(item.init) if item.init is not None else None
            if stmt.type is None and info is None:
                self._error("CQ0224", item.span, name=item.name)
            elif stmt.type is None and info is not None and isinstance(
                    info.type, (TupleType, ShapeType, DataType, FutureType)):
                self._error("CQ0225", item.span, name=item.name, kind=info.type.describe())
            item_elem = elem
            if item_elem is None:
                item_elem = info.type.elem if info and isinstance(info.type, ScalarType) else dtypes.INT
            # control scalars (`int`, `bool`, untyped) are immutable unless declared
            # `mutable`; element-typed scalars (`s32 acc = 0;`) are variables, as in the
            # reference compiler
            mutable = stmt.mutable or stmt.type not in (None, "int", "bool")
            if item.init is None and not mutable:
                self._error("CQ0204", item.span, name=item.name, actual="not initialised",
                            expected="an initial value for an immutable scalar")
            value = info.static if info is not None and not mutable else None
            if info is not None and elem is not None:
                self._check_convert(info, elem, item.init.span if item.init else item.span,
                                    item.init)
            sym = Symbol(item.name, SymKind.SCALAR, item.span, elem=item_elem, mutable=mutable,
                         value=value if item_elem.is_int or item_elem.name == "bool" else None,
                         decl_node=stmt)
            self._declare(sym)
            self._note_decl(stmt, sym)

    def _check_convert(self, info: ExprInfo, dst: ElemType, span: Span,
                       value: ast.Expr | None = None) -> None:
        if not isinstance(info.type, ScalarType) or not dtypes.is_lossy(info.type.elem, dst):
            return
        if info.static is not None and info.static.value is not None:
            return  # an integer constant: its value is known to fit or is checked elsewhere
        if isinstance(value, ast.FloatLit) and dtypes.exact_in(value.value, dst):
            return  # a literal that converts exactly (1.5 to f16, 0.0 to anything)
        self._error("CQ0206", span, src=info.type.elem.name, dst=dst.name)

    def _stmt_MdspanDecl(self, stmt: ast.MdspanDecl) -> None:
        info = self._expr(stmt.value)
        dims: tuple[Sym, ...] = ()
        if isinstance(info.type, ShapeType):
            dims = info.type.dims
        elif not isinstance(info.type, ErrorType):
            self._error("CQ0217", stmt.value.span)
        if stmt.rank is not None and dims and stmt.rank != len(dims):
            self._error("CQ0218", stmt.span, name=stmt.name, declared=f"mdspan<{stmt.rank}>",
                        actual=f"mdspan<{len(dims)}>")
        sym = Symbol(stmt.name, SymKind.MDSPAN, stmt.span, shape=dims, decl_node=stmt)
        self._declare(sym)
        self._note_decl(stmt, sym)

    def _stmt_ItupleDecl(self, stmt: ast.ItupleDecl) -> None:
        info = self._expr(stmt.value)
        values: tuple[Sym | None, ...] = ()
        if isinstance(info.type, TupleType):
            values = info.type.values
        elif not isinstance(info.type, ErrorType):
            self._error("CQ0216", stmt.value.span)
        if stmt.rank is not None and values and stmt.rank != len(values):
            self._error("CQ0218", stmt.span, name=stmt.name, declared=f"ituple<{stmt.rank}>",
                        actual=f"ituple<{len(values)}>")
        sym = Symbol(stmt.name, SymKind.ITUPLE, stmt.span, values=values, decl_node=stmt)
        self._declare(sym)
        self._note_decl(stmt, sym)

    def _stmt_AssignStmt(self, stmt: ast.AssignStmt) -> None:
        for item in stmt.items:
            self._assign(stmt, item)

    def _assign(self, stmt: ast.AssignStmt, item: ast.Assign) -> None:
        target = item.target
        if isinstance(target, ast.Ident):
            sym = self._lookup(target.name)
            if sym is None:
                if item.op != "=":
                    self._error("CQ0201", target.span, name=target.name)
                    self._expr(item.value)
                    return
                self._declare_by_assignment(stmt, target, item.value)
                return
            self._fn().refs[id(target)] = sym
            info = self._expr(item.value)
            if sym.kind is SymKind.FRAG:
                self._frag_arith(sym, info, item)
                return
            if sym.kind is SymKind.FUTURE and isinstance(info.type, FutureType):
                return
            if sym.kind is SymKind.DATA and item.op != "=":
                self._spanned_arith(sym, info, item)
                return
            if not sym.mutable:
                self._error("CQ0203", target.span, name=target.name, type=type_word(sym))
            elif sym.kind is SymKind.SCALAR and sym.elem is not None:
                self._check_convert(info, sym.elem, item.value.span, item.value)
            return
        if isinstance(target, ast.Index):  # `mc[1] *= s;` on an element of a fragment array
            sym = self._frag_ref(target)
            info = self._expr(item.value)
            if sym is not None:
                self._frag_arith(sym, info, item)
            return
        target_info = self._expr(target)
        value = self._expr(item.value)
        if isinstance(target_info.type, ScalarType):
            self._check_convert(value, target_info.type.elem, item.value.span, item.value)

    def _spanned_arith(self, sym: Symbol, info: ExprInfo, item: ast.Assign) -> None:
        """``a *= c``: element-wise on whole spanned data; shapes must match (or a scalar)."""
        if not isinstance(info.type, DataType):
            return
        shape, other = sym.shape or (), info.type.shape
        if len(shape) != len(other) or any(
                x.provably_eq(y) is False for x, y in zip(shape, other)):
            self._error("CQ0316", item.span, op=item.op[:-1], lhs=shape_text(shape),
                        rhs=shape_text(other))

    def _frag_arith(self, sym: Symbol, info: ExprInfo, item: ast.Assign) -> None:
        """``mc += bias;``: element-wise arithmetic of an accumulator with a scalar."""
        if item.op == "=" or not isinstance(info.type, (ScalarType, ErrorType)):
            self._error("CQ0213", item.span, name=sym.name, kind=with_article(sym.kind.value),
                        usage="with this assignment (only `+= -= *= /=` with a scalar)")

    def _declare_by_assignment(self, stmt: ast.AssignStmt, target: ast.Ident,
                               value: ast.Expr) -> None:
        """``x = expr;`` with a new name declares ``x`` with the value's type."""
        if isinstance(value, ast.ShapeLit):
            self._error("CQ0216", value.span)  # an ituple takes braces, an mdspan takes ':'
        if isinstance(value, ast.StrLit):
            self._error("CQ0223", target.span, name=target.name)
        if isinstance(value, ast.Ident):
            source = self._lookup(value.name)
            if source is not None and source in self.placeholders and source.assigned_depth < 0:
                self._error("CQ0427", value.span, name=target.name, source=value.name)
        info = self._expr(value)
        t = info.type
        span = target.span
        if isinstance(t, DataType) and isinstance(value, ast.View):
            sym = Symbol(target.name, SymKind.VIEW, span, elem=t.elem, shape=t.shape,
                         storage=t.storage, view=self._fn().views.get(id(value)))
        elif isinstance(t, BoundedType):
            sym = Symbol(target.name, SymKind.BOUNDED, span, bound=t.bound, elem=dtypes.INT)
        elif isinstance(t, ShapeType):
            sym = Symbol(target.name, SymKind.MDSPAN, span, shape=t.dims)
        elif isinstance(t, TupleType):
            sym = Symbol(target.name, SymKind.ITUPLE, span, values=t.values)
        elif isinstance(t, DataType) and isinstance(value, ast.SelectExpr):
            # a buffer chosen at run time: data of the choices' type
            sym = Symbol(target.name, SymKind.DATA, span, elem=t.elem, shape=t.shape,
                         storage=t.storage)
        elif isinstance(t, FutureType) and isinstance(value, ast.SelectExpr):
            # the future chosen at run time gets a name of its own (the choices keep
            # theirs): the same kind of copy as the first choice
            sym = replace(t.symbol, name=target.name, span=span)
        elif isinstance(t, FutureType):
            sym = t.symbol
            self._fn().refs[id(target)] = sym
            self.scopes[-1][target.name] = sym
            return
        elif isinstance(t, ScalarType):
            sym = Symbol(target.name, SymKind.SCALAR, span, elem=t.elem,
                         value=info.static if t.elem.is_int else None)
            if t.elem.is_int and info.static is None:
                high = self._static_bound(value)
                if high is not None:
                    self.scalar_bounds[sym] = high
        else:
            sym = Symbol(target.name, SymKind.SCALAR, span, elem=dtypes.INT)
        sym.decl_node = stmt
        self._fn().refs[id(target)] = sym
        self._declare(sym)
        self._note_decl(stmt, sym)

    def _stmt_ExprStmt(self, stmt: ast.ExprStmt) -> None:
        if isinstance(stmt.expr, ast.ExternCall) and not self.ctx.on_device:
            self._error("CQ0606", stmt.span, what="'call'", where="outside a parallel block")
        self._expr(stmt.expr)

    def _stmt_PrintStmt(self, stmt: ast.PrintStmt) -> None:
        for arg in stmt.args:
            self._expr(arg)

    def _stmt_AssertStmt(self, stmt: ast.AssertStmt) -> None:
        """Static assertions fail the compile; ones over parameter dimensions are tested
        at call time; the rest are device assertions."""
        info = self._expr(stmt.cond)
        if info.static is not None and info.static.value is not None:
            if info.static.value == 0:
                self._error("CQ0611", stmt.span, message=stmt.message)
            self._fn().host_asserts.add(id(stmt))
            return
        conditions = self._host_conditions(stmt.cond)
        if conditions is None:
            return  # depends on values computed in the kernel: a device assertion
        self._fn().host_asserts.add(id(stmt))
        for lhs, op, rhs in conditions:
            self._runtime_check(lhs, op, rhs, f"assertion '{stmt.message}'", stmt.span)

    def _host_conditions(self, cond: ast.Expr) -> list[tuple[Sym, str, Sym]] | None:
        """``a op b [&& ...]`` over compile-time or parameter-dimension values."""
        if isinstance(cond, ast.Binary) and cond.op == "&&":
            left, right = self._host_conditions(cond.lhs), self._host_conditions(cond.rhs)
            return None if left is None or right is None else left + right
        if isinstance(cond, ast.Binary) and cond.op in COMPARE:
            lhs = self._fn().exprs[id(cond.lhs)].static
            rhs = self._fn().exprs[id(cond.rhs)].static
            if lhs is not None and rhs is not None:
                return [(lhs, cond.op, rhs)]
        return None

    def _stmt_InThreads(self, stmt: ast.InThreads) -> None:
        if not self.ctx.on_device:
            self._error("CQ0606", stmt.span, what="'inthreads'", where="outside a parallel block")
        self._expr(stmt.pred)
        if not self._divergent(stmt.pred, 8):
            self._error("CQ0613", stmt.pred.span)
        self._block_under(stmt.pred, stmt.body)

    def _divergent(self, expr: ast.Expr, depth: int) -> bool:
        """Whether ``expr`` depends on a parallel variable, directly or through immutable
        scalars defined from one (``pred = p < 128; inthreads (pred)``)."""
        for ident in idents(expr):
            sym = self._fn().refs.get(id(ident))
            if sym is None:
                continue
            if sym.kind is SymKind.BOUNDED and sym.level is not None and sym.level.is_parallel:
                return True
            init = initialiser(sym)
            if depth and init is not None and self._divergent(init, depth - 1):
                return True
        return False

    def _stmt_ReturnStmt(self, stmt: ast.ReturnStmt) -> None:
        fn = self._fn()
        if self.ctx.on_device:
            self._error("CQ0606", stmt.span, what="return", where="inside a parallel block")
            return
        if stmt.value is None:
            if fn.returns != "void":
                self._error("CQ0212", stmt.span, name=fn.node.name)
            return
        if fn.returns == "void":
            self._error("CQ0211", stmt.span, name=fn.node.name)
            return
        info = self._expr(stmt.value)
        auto = fn.node.ret is not None and fn.node.ret.elem == "auto"
        if auto and isinstance(info.type, ScalarType):
            fn.returns, fn.ret_type = "scalar", info.type  # `auto` returning a scalar
            return
        value = stmt.value
        if isinstance(value, ast.Member) and value.member == "data":
            value = value.obj  # a future's data: the buffer it filled
        if fn.returns == "data":
            if not isinstance(info.type, DataType) or not isinstance(value, ast.Ident):
                if not isinstance(info.type, ErrorType):
                    self._error("CQ0204", stmt.value.span, name=expr_text(stmt.value),
                                actual=info.type.describe(), expected="a spanned buffer name")
                return
            sym = self._lookup(value.name)
            fn.returned = sym
            declared = fn.ret_type
            if isinstance(declared, DataType) and declared.shape and sym is not None:
                self._check_same_shape(declared.shape, sym.shape or (), value.span, sym.name)

    def _check_same_shape(self, expected: tuple[Sym, ...], actual: tuple[Sym, ...], span: Span,
                          name: str) -> None:
        if len(expected) != len(actual) or any(
                a.provably_eq(b) is False for a, b in zip(expected, actual)):
            self._error("CQ0312", span, name=name, actual=shape_text(actual),
                        expected=shape_text(expected))
            return
        for d, (a, b) in enumerate(zip(expected, actual)):
            if a.provably_eq(b) is None:
                self._runtime_check(b, "==", a, f"the returned '{name}' dimension {d} must match "
                                    "the declared return shape", span)

    def _stmt_If(self, stmt: ast.If) -> None:
        self._expr(stmt.cond)
        self._block_under(stmt.cond, stmt.then)
        if stmt.other is not None:
            self._block(stmt.other)

    def _block_under(self, cond: ast.Expr, block: ast.Block) -> None:
        """``block`` runs only where ``cond`` holds: comparisons of a bounded variable with
        a constant (``wg > 0 && wg < 3``) narrow its range there (buffer-array indices)."""
        saved = dict(self.known)
        for term in _conjuncts(cond):
            self._narrow(term)
        try:
            self._block(block)
        finally:
            self.known = saved

    def _narrow(self, term: ast.Expr) -> None:
        if not isinstance(term, ast.Binary) or term.op not in _FLIP:
            return
        var, op, value = term.lhs, term.op, self._fn().exprs.get(id(term.rhs))
        if not isinstance(var, ast.Ident):
            var, op, value = term.rhs, _FLIP[term.op], self._fn().exprs.get(id(term.lhs))
        sym = self._fn().refs.get(id(var)) if isinstance(var, ast.Ident) else None
        if sym is None or sym.kind is not SymKind.BOUNDED or value is None \
                or value.static is None or value.static.value is None:
            return
        low, high = self._range_of(sym)
        c = value.static.value
        if op in ("<", "<=", "=="):
            limit = c - 1 if op == "<" else c
            high = limit if high is None else min(high, limit)
        if op in (">", ">=", "=="):
            limit = c + 1 if op == ">" else c
            low = limit if low is None else max(low, limit)
        self.known[sym] = (low, high)

    def _range_of(self, sym: Symbol) -> tuple[int | None, int | None]:
        if sym in self.known:
            return self.known[sym]
        bound = sym.bound.value if sym.bound is not None else None
        return 0, None if bound is None else bound - 1

    def _index_range(self, expr: ast.Expr) -> tuple[int | None, int | None]:
        """The values an index expression takes: constants, bounded variables (narrowed by
        enclosing conditions), and sums, differences and constant multiples of them."""
        info = self._fn().exprs.get(id(expr))
        if info is not None and info.static is not None and info.static.value is not None:
            return info.static.value, info.static.value
        if isinstance(expr, ast.Ident):
            sym = self._fn().refs.get(id(expr))
            if sym is not None and sym.kind is SymKind.BOUNDED:
                return self._range_of(sym)
        if isinstance(expr, ast.Binary) and expr.op in ("+", "-", "*"):
            (a, b), (c, d) = self._index_range(expr.lhs), self._index_range(expr.rhs)
            if a is None or b is None or c is None or d is None:
                return None, None
            if expr.op == "+":
                return a + c, b + d
            if expr.op == "-":
                return a - d, b - c
            products = [a * c, a * d, b * c, b * d]
            return min(products), max(products)
        if info is not None and isinstance(info.type, BoundedType) \
                and info.type.bound.value is not None:
            return None, info.type.bound.value - 1
        return None, None

    def _stmt_While(self, stmt: ast.While) -> None:
        self._expr(stmt.cond)
        self.ctx.loops += 1
        self._block(stmt.body)
        self.ctx.loops -= 1

    def _stmt_BreakStmt(self, stmt: ast.BreakStmt) -> None:
        if not self.ctx.loops:
            self._error("CQ0606", stmt.span, what="break", where="outside a loop")

    def _stmt_ContinueStmt(self, stmt: ast.ContinueStmt) -> None:
        if not self.ctx.loops:
            self._error("CQ0606", stmt.span, what="continue", where="outside a loop")

    def _stmt_YieldStmt(self, stmt: ast.YieldStmt) -> None:
        if not self.ctx.on_device:
            self._error("CQ0606", stmt.span, what="yield", where="outside a parallel block")


def _conjuncts(cond: ast.Expr) -> list[ast.Expr]:
    """The terms of ``a && b && ...``."""
    if isinstance(cond, ast.Binary) and cond.op == "&&":
        return _conjuncts(cond.lhs) + _conjuncts(cond.rhs)
    return [cond]


def _is_literal(expr: ast.Expr) -> bool:
    return isinstance(expr, (ast.IntLit, ast.FloatLit, ast.BoolLit, ast.InfLit))
