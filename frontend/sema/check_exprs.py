"""Expressions: literals, names, members, element access, operators and their promoted
types, calls to built-ins and atomics, casts, ``sizeof``, ``select`` and derived shapes.
"""

from __future__ import annotations

from .. import syntax as ast
from ..builtin_names import (BIT_BUILTINS, FLOAT_BUILTINS, MATH_BUILTINS, builtin_hint,
                             suggest_builtin)
from . import dtypes
from .check_common import (COMPARE, ERROR, CheckerBase, ErrorType, expr_text, is_intlike,
                           scalar_elem, type_word, with_article)
from .model import (BoundedTupleType, BoundedType, DataType, EventType, ExprInfo, FragType,
                    FutureType, Level, LoopInfo, ScalarType, ShapeType, StringType, Symbol, SymKind,
                    TupleType, Type)
from .symbolic import Sym, shape_text


_INT = ScalarType(dtypes.INT)
_BOOL = ScalarType(dtypes.BOOL)

_ARITH = {"+", "-", "*", "/", "%"}
_LOGIC = {"&&", "||"}
_BITS = {"&", "|", "^", "<<", ">>"}

_ATOMIC_ARITY = {
    "__atomic_add": 2, "__atomic_sub": 2, "__atomic_exch": 2, "__atomic_min": 2,
    "__atomic_max": 2, "__atomic_and": 2, "__atomic_or": 2, "__atomic_xor": 2,
    "__atomic_cas": 3,
}


_FRAGMENT_CALLS = frozenset({"copy", "reduce_max", "reduce_sum"})


class ExprChecks(CheckerBase):
    """Mixin of ``Checker``: one ``_expr_<Node>`` method per expression node."""

    def _expr_IntLit(self, e: ast.IntLit) -> ExprInfo:
        elem = dtypes.INT
        if "u" in e.suffix:
            elem = dtypes.ELEM_TYPES["u64" if "ll" in e.suffix or e.value >= 2**32 else "u32"]
        elif "ll" in e.suffix or e.value >= 2**31:
            elem = dtypes.S64
        return ExprInfo(ScalarType(elem), Sym(e.value))

    def _expr_FloatLit(self, e: ast.FloatLit) -> ExprInfo:
        return ExprInfo(ScalarType(dtypes.F32 if e.is_f32 else dtypes.F64))

    def _expr_BoolLit(self, e: ast.BoolLit) -> ExprInfo:
        return ExprInfo(_BOOL)

    def _expr_InfLit(self, e: ast.InfLit) -> ExprInfo:
        return ExprInfo(ScalarType(dtypes.F32))

    def _expr_StrLit(self, e: ast.StrLit) -> ExprInfo:
        return ExprInfo(StringType())

    def _expr_Ident(self, e: ast.Ident) -> ExprInfo:
        if e.name == "_":
            self._error("CQ0208", e.span, what="a value (it is the wildcard of tile arguments)")
            return ERROR
        sym = self._resolve(e)
        if sym is None or sym.poisoned:
            return ERROR
        return _symbol_info(sym)

    def _expr_Member(self, e: ast.Member) -> ExprInfo:
        obj = self._expr(e.obj)
        t = obj.type
        if isinstance(t, ErrorType):
            return ERROR
        if e.member == "span":
            shape = _shape_of(t)
            if shape is None:
                self._error("CQ0213", e.span, name=expr_text(e.obj), kind=t.describe(),
                            usage="with .span")
                return ERROR
            return ExprInfo(ShapeType(shape))
        if e.member in ("data", "mdata"):
            if isinstance(t, FutureType) and t.symbol.shape is not None and t.symbol.elem:
                return ExprInfo(DataType(t.symbol.elem, t.symbol.shape,
                                         t.symbol.storage or "shared"))
            if isinstance(t, DataType):
                return obj
            self._error("CQ0410", e.span, name=expr_text(e.obj))
            return ERROR
        return ERROR

    def _event_generation(self, e: ast.ElemAccess, event: EventType) -> ExprInfo:
        """``e.at(order)``: slot ``order % N`` of a one-dimensional event array."""
        if event.array != 1:
            self._error("CQ0430", e.span, name=event.symbol.name, kind=event.describe()
                        if event.array == 0 else "a multi-dimensional event array")
            return ERROR
        for index in e.indices:
            if isinstance(index, (ast.Postfix, ast.Unary)) and index.op in ("++", "--"):
                continue  # `.at(order++)`: the documented way to advance the order
            if _has_increment(index):
                self._error("CQ0432", index.span)
                return ERROR
            info = self._fn().exprs[id(index)]
            if not is_intlike(info) and not isinstance(info.type, ErrorType):
                actual = f"'{info.type.elem.name}'" if isinstance(info.type, ScalarType) \
                    else info.type.describe()
                self._error("CQ0431", index.span, actual=actual)
                return ERROR
        return ExprInfo(EventType(event.symbol))

    def _expr_ElemAccess(self, e: ast.ElemAccess) -> ExprInfo:
        base = self._expr(e.base) if not isinstance(e.base, ast.Index) else self._index_base(e.base)
        for index in e.indices:
            self._expr(index)
        t = base.type
        if isinstance(t, EventType):
            return self._event_generation(e, t)
        if isinstance(t, FutureType) and isinstance(e.base, ast.Ident):
            self._error("CQ0229", e.base.span, name=e.base.name)
            return ERROR
        if isinstance(t, FutureType) and t.symbol.shape is not None and t.symbol.elem:
            t = DataType(t.symbol.elem, t.symbol.shape, t.symbol.storage or "shared")
        if isinstance(t, ErrorType):
            return ERROR
        if isinstance(t, FragType) and self.apply_depth:
            elements = self._accumulator_elements(t.symbol)
            if elements is None:
                return ExprInfo(ScalarType(dtypes.F32))  # (shape known in the second walk)
            t = elements
        if not isinstance(t, DataType):
            self._error("CQ0213", e.span, name=expr_text(e.base), kind=t.describe(),
                        usage="with .at(...) outside an 'apply' block" if isinstance(
                            t, FragType) else "with .at(...) (it reads elements of spanned "
                        "data)")
            return ERROR
        count = 0
        for index in e.indices:
            it = self._fn().exprs[id(index)].type
            count += len(it.symbol.members) if isinstance(it, BoundedTupleType) else (
                len(it.values) if isinstance(it, TupleType) else 1)
        if count != len(t.shape):
            self._error("CQ0305", e.span, name=expr_text(e.base), rank=len(t.shape), count=count)
            return ERROR
        for index in e.indices:  # `.at(1.5)`, `.at(inf)`: no element is there
            it = self._fn().exprs[id(index)].type
            if isinstance(it, ScalarType) and it.elem.is_float:
                self._error("CQ0209", index.span, what="an element index",
                            actual=f"'{it.elem.name}'")
                return ERROR
        for d, (index, size) in enumerate(zip(e.indices, t.shape)):
            static = self._fn().exprs[id(index)].static
            if static is not None and static.value is not None and size.value is not None and \
                    not 0 <= static.value < size.value:
                self._error("CQ0304", index.span, dim=d, index=static.value, bound=size.value)
        return ExprInfo(ScalarType(t.elem))

    def _accumulator_elements(self, sym: Symbol) -> DataType | None:
        """An accumulator read or written element by element inside ``apply``: its
        elements, once an MMA gave it a shape."""
        if sym.shape is None:
            self.shapes_pending = True
            return None
        return DataType(sym.elem or dtypes.F32, sym.shape, "local")

    def _stmt_Apply(self, stmt: ast.Apply) -> None:
        """``apply {i, j} in x.span body``: the body for every element of an accumulator
        or a ``frag`` buffer, ``i, j`` its indices (bounded by its extents)."""
        sym = self._lookup(stmt.frag)
        if sym is None:
            self._error("CQ0201", stmt.span, name=stmt.frag)
            return
        if sym.kind is SymKind.FRAG and sym.shape is None:
            self.shapes_pending = True  # (an MMA later in the function gives the shape)
            return
        if sym.kind not in (SymKind.FRAG, SymKind.DATA, SymKind.VIEW) or sym.shape is None:
            self._error("CQ0213", stmt.span, name=sym.name, kind=with_article(sym.kind.value),
                        usage="with 'apply' (it spans an accumulator or a 'frag' buffer)")
            return
        if len(stmt.vars) != len(sym.shape):
            self._error("CQ0311", stmt.span, what="the apply index list",
                        expected=len(sym.shape), actual=len(stmt.vars))
            return
        self.scopes.append({})
        syms = []
        for name, bound in zip(stmt.vars, sym.shape):
            index = Symbol(name, SymKind.BOUNDED, stmt.span, elem=dtypes.INT, bound=bound,
                           level=Level.LOOP)
            self._declare(index)
            syms.append(index)
        self._fn().loops[id(stmt)] = (LoopInfo(tuple(syms), tuple(sym.shape)),)
        self._fn().refs[id(stmt)] = sym
        self.apply_depth += 1
        self.ctx.loops += 1
        self._block(stmt.body, new_scope=False)
        self.ctx.loops -= 1
        self.apply_depth -= 1
        self.scopes.pop()

    def _index_base(self, e: ast.Index) -> ExprInfo:
        base = self._expr(e.base)
        self._expr(e.index)
        return base

    def _expr_Index(self, e: ast.Index) -> ExprInfo:
        info = self._index_base(e)
        if isinstance(info.type, EventType) and info.type.array:
            return ExprInfo(EventType(info.type.symbol, info.type.array - 1))
        return info

    def _expr_Select(self, e: ast.Select) -> ExprInfo:
        if isinstance(e.base, ast.Ident) and self._lookup(e.base.name) is None:
            hint = builtin_hint(e.base.name)  # `__expf(x)`: a call of a misspelt built-in
            if hint is not None:
                self.reporter.report("CQ0201", e.base.span, name=e.base.name, hint=hint)
                self._expr(e.index)
                return ERROR
        base = self._expr(e.base)
        index = self._expr(e.index)
        t = base.type
        i = index.static.value if index.static is not None else None
        if isinstance(t, ErrorType):
            return ERROR
        if isinstance(t, ShapeType):
            if i is None or not -len(t.dims) <= i < len(t.dims):
                self._error("CQ0210", e.index.span, index=i, what="an mdspan", rank=len(t.dims))
                return ERROR
            return ExprInfo(_INT, t.dims[i])
        if isinstance(t, TupleType):
            if i is None or not -len(t.values) <= i < len(t.values):
                self._error("CQ0210", e.index.span, index=i, what="an ituple", rank=len(t.values))
                return ERROR
            return ExprInfo(_INT, t.values[i])
        if isinstance(t, BoundedTupleType):
            members = t.symbol.members
            if i is None or not 0 <= i < len(members):
                self._error("CQ0210", e.index.span, index=i, what="a bounded ituple",
                            rank=len(members))
                return ERROR
            return ExprInfo(BoundedType(members[i].bound or Sym(1)))
        if isinstance(t, BoundedType) and i is not None:
            # `k(-1)` is the last index #k - 1; it keeps k's bound (a chunkat factor)
            return ExprInfo(t, t.bound + i if i < 0 else Sym(i))
        return ERROR

    def _expr_BoundOf(self, e: ast.BoundOf) -> ExprInfo:
        sym = self._lookup(e.name)
        if sym is None:
            self._error("CQ0201", e.span, name=e.name)
            return ERROR
        if sym.kind is SymKind.BOUNDED and sym.bound is not None:
            return ExprInfo(_INT, sym.bound)
        if sym.kind is SymKind.BOUNDED_TUPLE:
            return ExprInfo(TupleType(tuple(m.bound for m in sym.members)))
        self._error("CQ0207", e.span, name=e.name)
        return ERROR

    def _expr_Binary(self, e: ast.Binary) -> ExprInfo:
        lhs, rhs = self._expr(e.lhs), self._expr(e.rhs)
        if e.op in ("#*", "#/", "#%"):
            self._error("CQ0265", e.span, op=e.op)
            return ERROR
        if isinstance(lhs.type, ErrorType) or isinstance(rhs.type, ErrorType):
            return ERROR
        if e.op == "#":
            return self._compose(e, lhs, rhs)
        if e.op in ("#+", "#-"):
            if isinstance(lhs.type, BoundedType) and rhs.static is not None:
                delta = rhs.static if e.op == "#+" else -rhs.static
                return ExprInfo(BoundedType(lhs.type.bound + delta))
            self._error("CQ0205", e.span, op=e.op, lhs=lhs.type.describe(), rhs=rhs.type.describe())
            return ERROR
        if e.op in _LOGIC:
            events = [isinstance(x.type, EventType) for x in (lhs, rhs)]
            if any(events) and not all(events):
                self._error("CQ0433", e.span)
                return ERROR
        if e.op in COMPARE or e.op in _LOGIC:
            return ExprInfo(_BOOL, _fold(e.op, lhs.static, rhs.static))
        if isinstance(lhs.type, (ShapeType, TupleType)) or isinstance(rhs.type, (ShapeType, TupleType)):
            return self._shape_arith(e, lhs, rhs)
        if isinstance(lhs.type, BoundedType) and is_intlike(rhs):
            return ExprInfo(lhs.type)
        if isinstance(rhs.type, BoundedType) and is_intlike(lhs):
            return ExprInfo(rhs.type)
        lt, rt = scalar_elem(lhs), scalar_elem(rhs)
        if lt is None or rt is None:
            self._error("CQ0205", e.span, op=e.op, lhs=lhs.type.describe(), rhs=rhs.type.describe())
            return ERROR
        common = dtypes.promote(lt, rt)
        if common is None:
            self._error("CQ0205", e.span, op=e.op, lhs=f"'{lt.name}'", rhs=f"'{rt.name}'")
            return ERROR
        if lt.name == "int" and rt.name == "int":
            common = dtypes.INT
        static = None
        if common.is_int:
            try:
                static = _fold(e.op, lhs.static, rhs.static)
            except ZeroDivisionError:
                self._error("CQ0215", e.span)
                return ERROR
        return ExprInfo(ScalarType(common), static)

    def _compose(self, e: ast.Binary, lhs: ExprInfo, rhs: ExprInfo) -> ExprInfo:
        """``a # b``: value ``a * #b + b``, bound ``#a * #b`` (spec 5.1)."""
        if isinstance(lhs.type, BoundedType) and isinstance(rhs.type, BoundedType):
            return ExprInfo(BoundedType(lhs.type.bound * rhs.type.bound))
        self._error("CQ0205", e.span, op="#", lhs=lhs.type.describe(), rhs=rhs.type.describe())
        return ERROR

    def _shape_arith(self, e: ast.Binary, lhs: ExprInfo, rhs: ExprInfo) -> ExprInfo:
        """Element-wise shape/ituple arithmetic with a scalar or a same-rank tuple."""
        left = _dims_of(lhs)
        right = _dims_of(rhs)
        if left is None or right is None:
            self._error("CQ0205", e.span, op=e.op, lhs=lhs.type.describe(), rhs=rhs.type.describe())
            return ERROR
        if len(left) == 1 and len(right) > 1 and not isinstance(lhs.type, (ShapeType, TupleType)):
            left = left * len(right)
        if len(right) == 1 and len(left) > 1 and not isinstance(rhs.type, (ShapeType, TupleType)):
            right = right * len(left)
        if len(left) != len(right):
            self._error("CQ0309", e.span, op=e.op, lhs=len(left), rhs=len(right))
            return ERROR
        try:
            dims = tuple(_fold(e.op, a, b) for a, b in zip(left, right))
        except ZeroDivisionError:
            self._error("CQ0215", e.span)
            return ERROR
        if isinstance(lhs.type, ShapeType) or isinstance(rhs.type, ShapeType):
            if any(d is None for d in dims):
                self._error("CQ0266", e.span, what="a shape dimension", expr=expr_text(e))
                return ERROR
            return ExprInfo(ShapeType(tuple(d for d in dims if d is not None)))
        return ExprInfo(TupleType(dims))

    def _expr_Unary(self, e: ast.Unary) -> ExprInfo:
        info = self._expr(e.operand)
        if e.op == "!":
            return ExprInfo(_BOOL)
        if e.op in ("++", "--"):
            if isinstance(e.operand, ast.Ident):
                sym = self._lookup(e.operand.name)
                if sym is not None and not sym.mutable:
                    self._error("CQ0203", e.span, name=e.operand.name, type=type_word(sym))
            return ExprInfo(info.type)
        return ExprInfo(info.type)

    def _expr_Postfix(self, e: ast.Postfix) -> ExprInfo:
        return self._expr_Unary(ast.Unary(e.span, e.op, e.operand))

    def _expr_Ternary(self, e: ast.Ternary) -> ExprInfo:
        self._expr(e.cond)
        a, b = self._expr(e.then), self._expr(e.other)
        ea, eb = scalar_elem(a), scalar_elem(b)
        if ea is not None and eb is not None:
            common = dtypes.promote(ea, eb) or ea
            return ExprInfo(ScalarType(common))
        return a

    def _expr_TupleLit(self, e: ast.TupleLit) -> ExprInfo:
        values = tuple(self._expr(item).static for item in e.items)
        return ExprInfo(TupleType(values))

    def _expr_ShapeLit(self, e: ast.ShapeLit) -> ExprInfo:
        dims = self._shape_items(e.items, e.span)
        return ERROR if dims is None else ExprInfo(ShapeType(dims))

    def _expr_CallExpr(self, e: ast.CallExpr) -> ExprInfo:
        if self._is_helper_call(e):
            return self._shuffle(e)
        if e.name in BIT_BUILTINS:
            return self._bits(e)
        args = [self._expr(a) for a in e.args]
        if e.name == "cdiv":
            if len(args) != 2:
                self._error("CQ0311", e.span, what="cdiv", expected=2, actual=len(args))
                return ERROR
            a, b = args
            static = None
            if a.static is not None and b.static is not None:
                if b.static.value == 0:
                    self._error("CQ0215", e.span)
                    return ERROR
                static = a.static.cdiv(b.static)
            return ExprInfo(_INT, static)
        # a CUDA spelling of a float built-in (`__expf`), refused later with a hint, is typed
        # as the built-in so that it adds no conversion warnings of its own
        if e.name in FLOAT_BUILTINS or (e.name not in MATH_BUILTINS
                                        and suggest_builtin(e.name) in FLOAT_BUILTINS):
            elem = scalar_elem(args[0]) if args else None
            return ExprInfo(ScalarType(elem if elem and elem.is_float else dtypes.F32))
        if e.name in ("__max", "__min") and len(args) == 2:
            ea, eb = scalar_elem(args[0]), scalar_elem(args[1])
            common = dtypes.promote(ea, eb) if ea and eb else None
            static = None
            if args[0].static is not None and args[1].static is not None and \
                    args[0].static.is_const and args[1].static.is_const:
                pick = max if e.name == "__max" else min
                static = Sym(pick(args[0].static.value or 0, args[1].static.value or 0))
            return ExprInfo(ScalarType(common or dtypes.INT), static)
        if e.name in _ATOMIC_ARITY:
            return self._atomic(e, args)
        if e.name in _FRAGMENT_CALLS:
            self._fragment_call(e)
        return ExprInfo(_INT)

    def _fragment_call(self, e: ast.CallExpr) -> None:
        """``copy(dst, src)`` and ``reduce_max/reduce_sum(dst, src, dim)`` on accumulators
        and ``frag`` buffers: the destination has the shape the source gives."""
        arity = 2 if e.name == "copy" else 3
        if len(e.args) != arity:
            self._error("CQ0311", e.span, what=f"'{e.name}'", expected=arity,
                        actual=len(e.args))
            return
        shapes = [self._fragment_shape(e, a) for a in e.args[:2]]
        dst, src = shapes
        if dst is None or src is None:
            return
        expected = src
        if e.name != "copy":
            dim = self._static_int(e.args[2], "a reduction dimension").value
            if dim is None:
                return
            if not 0 <= dim < len(src):
                self._error("CQ0304", e.args[2].span, dim=0, index=dim, bound=len(src))
                return
            expected = src[:dim] + src[dim + 1:]
        if len(dst) != len(expected) or any(
                x.provably_eq(y) is False for x, y in zip(dst, expected)):
            self._error("CQ0560", e.span, call=e.name, dst=expr_text(e.args[0]),
                        dst_shape=shape_text(dst), src=expr_text(e.args[1]),
                        expected=shape_text(expected))

    def _fragment_shape(self, e: ast.CallExpr, arg: ast.Expr) -> tuple[Sym, ...] | None:
        info = self._fn().exprs.get(id(arg))
        t = info.type if info is not None else None
        if isinstance(t, FragType):
            if t.symbol.shape is None:
                self.shapes_pending = True
            return t.symbol.shape
        if isinstance(t, DataType) and isinstance(arg, ast.Ident):
            return t.shape
        if not isinstance(t, ErrorType):
            self._error("CQ0213", arg.span, name=expr_text(arg), kind=t.describe() if t else "?",
                        usage=f"with '{e.name}' (it takes accumulators and 'frag' buffers)")
        return None

    def _atomic(self, e: ast.CallExpr, args: list[ExprInfo]) -> ExprInfo:
        """``__atomic_op(x.at(i), v[, w])``: the element of shared/global data to update."""
        expected = _ATOMIC_ARITY[e.name]
        if len(args) != expected:
            self._error("CQ0227", e.span, name=e.name, expected=expected, actual=len(args))
            return ERROR
        target = e.args[0]
        if isinstance(target, ast.Unary) and target.op == "&":
            target = target.operand
        storage = None
        if isinstance(target, ast.ElemAccess):
            base = self._fn().exprs.get(id(target.base))
            if base is not None and isinstance(base.type, DataType):
                storage = base.type.storage
        if storage not in ("shared", "global"):
            self._error("CQ0228", e.args[0].span, name=e.name)
            return ERROR
        return ExprInfo(args[1].type)

    def _expr_Cast(self, e: ast.Cast) -> ExprInfo:
        info = self._expr(e.operand)
        if e.quoted:
            elem = dtypes.c_type(e.target)
            if elem is None:  # a verbatim C++ cast: nothing known about the result
                return ExprInfo(info.type)
        else:
            elem = self._elem(e.target, e.span)
        return ExprInfo(ScalarType(elem), info.static if elem.is_int else None)

    def _expr_SizeOf(self, e: ast.SizeOf) -> ExprInfo:
        if e.elem_type is not None:
            elem = self._elem(e.elem_type, e.span)
            return ExprInfo(_INT, Sym(max(1, elem.bits // 8)))
        if e.operand is None:
            return ERROR
        info = self._expr(e.operand)
        shape = _shape_of(info.type)
        if shape is None and (isinstance(info.type, BoundedType) or isinstance(
                info.type, ScalarType) and info.type.elem.is_int):
            return ExprInfo(_INT, info.static)  # `|n|` of an integer is n (its count)
        if shape is None:
            return ExprInfo(_INT)
        total = Sym(1)
        for d in shape:
            total = total * d
        return ExprInfo(_INT, total)

    def _expr_SelectExpr(self, e: ast.SelectExpr) -> ExprInfo:
        index = self._expr(e.index)
        if index.static is not None and index.static.value is not None and not (
                0 <= index.static.value < len(e.options)):
            self._error("CQ0420", e.index.span, index=index.static.value, count=len(e.options))
        options = [self._expr(o) for o in e.options]
        if not options:
            return ERROR
        first = _option_type(options[0])
        for expr, info in zip(e.options[1:], options[1:]):
            other = _option_type(info)
            if first is not None and other is not None and not _same_data(first, other):
                self._error("CQ0436", expr.span, a=expr_text(e.options[0]), ta=first.describe(),
                            b=expr_text(expr), tb=other.describe())
                return ERROR
        if first is not None and not isinstance(options[0].type, FutureType):
            return ExprInfo(first)
        return options[0]

    def _expr_Derive(self, e: ast.Derive) -> ExprInfo:
        base = self._expr(e.base)
        dims = _dims_of(base)
        if dims is None:  # `p[a, b]` of a loop variable, a buffer...: nothing to derive from
            if not isinstance(base.type, ErrorType):
                self._error("CQ0204", e.base.span, name=expr_text(e.base),
                            actual=base.type.describe(), expected="a shape or an ituple")
            return ERROR
        reported = len(self.reporter.diagnostics)
        out = [self._derive_item(item, dims) for item in e.items]
        if e.brackets == "[]":
            missing = next((item for item, dim in zip(e.items, out) if dim is None), None)
            if missing is not None:
                if len(self.reporter.diagnostics) == reported:  # the items reported nothing
                    self._error("CQ0266", missing.span, what="a derived dimension",
                                expr=expr_text(missing))
                return ERROR
            return ExprInfo(ShapeType(tuple(d for d in out if d is not None)))
        return ExprInfo(TupleType(tuple(out)))

    def _derive_item(self, item: ast.Expr, dims: list[Sym | None]) -> Sym | None:
        if isinstance(item, ast.DimRef):
            if not 0 <= item.index < len(dims):
                self._error("CQ0210", item.span, index=item.index, what="the derived shape",
                            rank=len(dims))
                return None
            return dims[item.index]
        if isinstance(item, ast.Binary):
            a = self._derive_item(item.lhs, dims)
            b = self._derive_item(item.rhs, dims)
            try:
                return _fold(item.op, a, b)
            except ZeroDivisionError:
                self._error("CQ0215", item.span)
                return None
        return self._expr(item).static

    def _expr_AnonDim(self, e: ast.AnonDim) -> ExprInfo:
        return ExprInfo(_INT)

    def _expr_NullLit(self, e: ast.NullLit) -> ExprInfo:
        return ExprInfo(_INT)

    def _expr_StorageDest(self, e: ast.StorageDest) -> ExprInfo:
        return ERROR


def _symbol_info(sym: Symbol) -> ExprInfo:
    kind = sym.kind
    if kind is SymKind.DIM:
        return ExprInfo(_INT, sym.value)
    if kind is SymKind.SCALAR:
        return ExprInfo(ScalarType(sym.elem or dtypes.INT), sym.value)
    if kind is SymKind.BOUNDED:
        return ExprInfo(BoundedType(sym.bound or Sym(1)))
    if kind is SymKind.BOUNDED_TUPLE:
        return ExprInfo(BoundedTupleType(sym))
    if kind is SymKind.MDSPAN:
        return ExprInfo(ShapeType(sym.shape or ()))
    if kind is SymKind.ITUPLE:
        return ExprInfo(TupleType(sym.values))
    if kind in (SymKind.DATA, SymKind.VIEW):
        return ExprInfo(DataType(sym.elem or dtypes.F32, sym.shape or (), sym.storage or "global"))
    if kind is SymKind.FUTURE:
        return ExprInfo(FutureType(sym))
    if kind is SymKind.FRAG:
        return ExprInfo(FragType(sym))
    if kind is SymKind.EVENT:
        return ExprInfo(EventType(sym, len(sym.array_dims)))
    raise AssertionError(f"unhandled symbol kind {kind}")


def _shape_of(t: Type) -> tuple[Sym, ...] | None:
    if isinstance(t, DataType):
        return t.shape
    if isinstance(t, ShapeType):
        return t.dims
    if isinstance(t, (FutureType, FragType)):
        return t.symbol.shape
    if isinstance(t, BoundedTupleType):
        return t.bounds
    return None


def _dims_of(info: ExprInfo) -> list[Sym | None] | None:
    t = info.type
    if isinstance(t, ShapeType):
        return list(t.dims)
    if isinstance(t, TupleType):
        return list(t.values)
    if info.static is not None or isinstance(t, ScalarType):
        return [info.static]
    return None


def _fold(op: str, a: Sym | None, b: Sym | None) -> Sym | None:
    """Constant-fold an integer operation on static values (None when unknown)."""
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b.value == 0:
            raise ZeroDivisionError
        return a.floordiv(b)
    if op == "%":
        if b.value == 0:
            raise ZeroDivisionError
        return a.mod(b)
    if a.value is None or b.value is None:
        return None
    x, y = a.value, b.value
    table = {
        "==": lambda: int(x == y), "!=": lambda: int(x != y), "<": lambda: int(x < y),
        "<=": lambda: int(x <= y), ">": lambda: int(x > y), ">=": lambda: int(x >= y),
        "&&": lambda: int(bool(x) and bool(y)), "||": lambda: int(bool(x) or bool(y)),
        "&": lambda: x & y, "|": lambda: x | y, "^": lambda: x ^ y,
        "<<": lambda: x << y if 0 <= y < 64 else None, ">>": lambda: x >> y if 0 <= y < 64 else None,
    }
    fn = table.get(op)
    result = fn() if fn else None
    return None if result is None else Sym(result)


def _has_increment(expr: ast.Expr) -> bool:
    """Whether ``++``/``--`` occurs anywhere inside ``expr``."""
    from dataclasses import fields

    stack: list[object] = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.Postfix, ast.Unary)) and item.op in ("++", "--"):
            return True
        if isinstance(item, ast.Node):
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif isinstance(item, tuple):
            stack.extend(item)
    return False


def _option_type(info: ExprInfo) -> DataType | None:
    t = info.type
    if isinstance(t, DataType):
        return t
    if isinstance(t, FutureType) and t.symbol.elem is not None and t.symbol.shape is not None:
        return DataType(t.symbol.elem, t.symbol.shape, t.symbol.storage or "shared")
    return None


def _same_data(a: DataType, b: DataType) -> bool:
    return a.elem == b.elem and a.storage == b.storage and len(a.shape) == len(b.shape) and all(
        x.provably_eq(y) is not False for x, y in zip(a.shape, b.shape))
