"""The checker: resolves names, computes types, shapes and parallel levels, and reports
rule violations (spec 7) as diagnostics. Output: ``CheckedProgram`` annotations.

The checker never raises for a user mistake: every problem becomes a diagnostic and the
walk continues with an ``ERROR`` type so that one mistake gives one message.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Mapping

from .. import syntax as ast
from ..diagnostics import Reporter
from ..parser import recursion_headroom
from ..source import Span
from . import dtypes
from .dtypes import ElemType
from .levels import DEVICE_NAMES, infer_levels, is_device_scope
from .model import (BoundedTupleType, BoundedType, CheckedFunction, CheckedProgram, DataType,
                    EventType, ExprInfo, FragType, FutureType, IndexItem, Level, LevelInfo, LoopInfo,
                    RuntimeCheck, ScalarType, ShapeType, StringType, Symbol, SymKind, TupleType,
                    Type, ViewInfo, ViewStep)
from .rules_s5000 import EngineRules, MmaOperand
from .targets import DEFAULT_TARGET, TARGETS, Target
from .symbolic import Sym, shape_text
from .views import (TileArg, ViewError, chunkat_step, span_as_step, squeeze_step, subspan_step,
                    view_from_step)


@dataclass(frozen=True)
class _Error(Type):
    """The type of an expression that already produced a diagnostic."""

    def describe(self) -> str:
        return "an invalid expression"


ERROR = ExprInfo(_Error())
_INT = ScalarType(dtypes.INT)
_BOOL = ScalarType(dtypes.BOOL)

_ARITH = {"+", "-", "*", "/", "%"}
# The view steps that name the shape a later `.sqz()` drops unit dimensions from.
_SHAPING_STEPS = frozenset({"subspan", "modspan", "view", "span_as"})
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_LOGIC = {"&&", "||"}
_BITS = {"&", "|", "^", "<<", ">>"}

_ATOMIC_ARITY = {
    "__atomic_add": 2, "__atomic_sub": 2, "__atomic_exch": 2, "__atomic_min": 2,
    "__atomic_max": 2, "__atomic_and": 2, "__atomic_or": 2, "__atomic_xor": 2,
    "__atomic_cas": 3,
}

_FLOAT_BUILTINS = {
    "__exp", "__exp2f", "__expm1", "__log", "__log1p", "__pow", "__sqrt", "__rsqrt",
    "__frcp_rn", "__fabs", "__fmaf", "__sin", "__cos", "__tan", "__asin", "__acos", "__atan",
    "__atan2", "__sinh", "__cosh", "__tanh", "__ceil", "__floor", "__round", "__sign",
    "__gelu", "__sigmoid", "__softplus",
}


@dataclass
class _Context:
    """Where the walk is: host or device, enclosing parallel levels and loops."""

    levels: list[LevelInfo] = field(default_factory=list)
    loops: int = 0
    level_of: dict[int, Level] = field(default_factory=dict)

    @property
    def on_device(self) -> bool:
        return bool(self.levels)


class Checker:
    """``specialize`` gives parameter dimensions their values from one call's arguments:
    they become constants, so shapes and bounds built from them are static. Without it,
    a symbolic dimension used where a constant is needed (a shared buffer's shape, a group
    bound) is recorded in ``CheckedFunction.specialize_on`` instead of being an error."""

    def __init__(self, reporter: Reporter, target: Target | None = None,
                 specialize: Mapping[str, int] | None = None) -> None:
        self.reporter = reporter
        self.target = target or TARGETS[DEFAULT_TARGET]
        # a target with tensor-engine tables (the S5000) checks MMA and TMA against them
        self.engine = (EngineRules(self.target.engine, reporter)
                       if self.target.engine is not None else None)
        self.specialize = dict(specialize or {})
        self.scopes: list[dict[str, Symbol]] = []
        self.fn: CheckedFunction | None = None
        self.ctx = _Context()
        self._reset_function_state()

    def _reset_function_state(self) -> None:
        # async futures: where each was made asynchronous, which were waited or bound
        self.async_defs: dict[Symbol, Span] = {}
        self.waited: set[Symbol] = set()
        self.waited_in_block: list[set[Symbol]] = [set()]
        self.placeholders: dict[Symbol, bool] = {}  # dma.any -> used
        self.swizzles: dict[Symbol, int] = {}  # buffer -> swizzle of the copy that filled it
        self.kernel_shared: list[tuple[str, int, Span]] = []  # shared buffers of a kernel
        self.inner_parallels = 0
        self._in_tma = False
        self.swap_groups: list[set[Symbol]] = []
        self.kernel_threads: tuple[int, Span] | None = None
        self.scalar_bounds: dict[Symbol, int] = {}  # runtime ints with a static upper bound
        self.apply_depth = 0  # inside `apply` blocks: accumulators are read element-wise
        # ranges of bounded variables narrowed by enclosing `if` / `inthreads` conditions
        self.known: dict[Symbol, tuple[int | None, int | None]] = {}

    # ------------------------------------------------------------------ entry points
    def check_program(self, program: ast.Program) -> CheckedProgram:
        with recursion_headroom():  # the walk takes a few frames per level, MAX_DEPTH deep
            return CheckedProgram([self.check_function(f) for f in program.functions])

    def check_function(self, node: ast.Function) -> CheckedFunction:
        """One walk; a second one when an ``apply`` spans an accumulator before the MMA
        that gives it its shape (the loop body of online softmax rescales the output
        accumulator before this iteration's MMA): the second walk knows every shape."""
        self.acc_shapes: dict[Span, tuple[Sym, ...]] = {}
        self.shapes_pending = False
        mark = self.reporter.checkpoint()
        fn = self._check_function(node)
        if self.shapes_pending:
            self.acc_shapes = {sym.span: sym.shape for sym in self._all_frags()
                               if sym.shape is not None}
            self.reporter.rollback(mark)
            fn = self._check_function(node)
        return fn

    def _check_function(self, node: ast.Function) -> CheckedFunction:
        self.shapes_pending = False
        self.scopes = [{}]
        self.ctx = _Context()
        self._reset_function_state()
        params: list[Symbol] = []
        dims: dict[str, Symbol] = {}
        self.fn = fn = CheckedFunction(node, params, dims, "void", None)
        for param in node.params:
            sym = self._param(param, dims)
            if sym is not None:
                params.append(sym)
        self._return_type(node)
        self._block(node.body, new_scope=False)
        if fn.returns != "void" and not _has_return(node.body):
            if node.ret is not None and node.ret.elem == "auto":
                fn.returns = "void"  # `auto` with nothing returned is a void function
            else:
                self._error("CQ0212", node.name_span, name=node.name)
        for sym in self._all_frags():
            if sym.frag_role == "acc" and not sym.frag_executed:
                self._error("CQ0506", sym.span, name=sym.name)
        self._report_unwaited(node)
        for sym, used in self.placeholders.items():
            if not used:
                self._error("CQ0418", sym.span, name=sym.name)
        return fn

    def _report_unwaited(self, node: ast.Function) -> None:
        """Every async future must be waited; futures exchanged by swap/rotate share one
        another's waits. One diagnostic per function, a note at each unwaited copy."""
        waited = set(self.waited)
        for group in self.swap_groups:
            if group & waited:
                waited |= group
        missing = [(sym, span) for sym, span in self.async_defs.items() if sym not in waited]
        if not missing:
            return
        names = ", ".join(sym.name for sym, _ in missing)
        notes = tuple((f"'{sym.name}' is made asynchronous here", span) for sym, span in missing)
        self.reporter.report("CQ0413", node.name_span, notes=notes, name=names)

    def _runtime_check(self, lhs: Sym, op: str, rhs: Sym, what: str, span: Span) -> None:
        """A condition on parameter dimensions to test at call time (cannot be proven)."""
        loc = self.reporter.source_map.locate(span)
        self._fn().runtime_checks.append(
            RuntimeCheck(lhs, op, rhs, f"{what} ({loc.filename}:{loc.line})"))
    # ------------------------------------------------------------------ helpers
    def _error(self, code: str, span: Span, **fields: object) -> None:
        self.reporter.report(code, span, **fields)

    def _declare(self, sym: Symbol) -> Symbol:
        scope = self.scopes[-1]
        if sym.name in scope or (sym.name in self._fn().dims and len(self.scopes) == 1):
            self._error("CQ0202", sym.span, name=sym.name)
        scope[sym.name] = sym
        return sym

    def _declare_poisoned(self, name: str, span: Span) -> None:
        """A name whose declaration had an error: later uses report nothing more."""
        self.scopes[-1][name] = Symbol(name, SymKind.FUTURE, span, poisoned=True)

    def _lookup(self, name: str) -> Symbol | None:
        for scope in reversed(self.scopes):
            if name in scope:
                sym = scope[name]
                if sym in self.placeholders:
                    self.placeholders[sym] = True
                return sym
        return self._fn().dims.get(name)

    def _scope_depth(self, name: str) -> int:
        for depth in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[depth]:
                return depth
        return -1

    def _fn(self) -> CheckedFunction:
        assert self.fn is not None
        return self.fn

    def _note_decl(self, stmt: ast.Node, sym: Symbol) -> None:
        self._fn().decls.setdefault(id(stmt), []).append(sym)

    def _all_frags(self) -> Iterator[Symbol]:
        seen: set[int] = set()
        for syms in self._fn().decls.values():
            for sym in syms:
                if sym.kind is SymKind.FRAG and id(sym) not in seen:
                    seen.add(id(sym))
                    yield sym

    # ------------------------------------------------------------------ signature
    def _param(self, param: ast.Param, dims: dict[str, Symbol]) -> Symbol | None:
        ptype = param.type
        if param.storage in ("shared", "local"):
            self._error("CQ0219", param.span, what=param.storage)
        elem = self._elem(ptype.elem, ptype.span)
        name = param.name or f"_arg{len(self._fn().params)}"
        if param.by_ref and param.storage == "global":
            self._error("CQ0220", param.span, name=name)
        elif param.by_ref and ptype.shape is None:
            self._error("CQ0221", param.span, name=name)
        if ptype.shape is not None and ptype.shape.dims and param.storage != "global" and any(
                isinstance(d, ast.AnonDim) and d.unbounded for d in ptype.shape.dims):
            self._error("CQ0222", param.span, name=name)
        if ptype.shape is None:
            sym = Symbol(name, SymKind.SCALAR, param.span, elem=elem, is_param=True,
                         is_stream=ptype.elem == "stream")
        else:
            shape = self._param_shape(ptype.shape, dims)
            sym = Symbol(name, SymKind.DATA, param.span, elem=elem, shape=shape,
                         storage="global", is_param=True, by_ref=param.by_ref)
        if param.name is not None:
            self._declare(sym)
        return sym

    def _anonymous_dim(self, dims: dict[str, Symbol], index: int, span: Span) -> Sym:
        """``?``/``??`` and ``mdspan<N>`` dimensions: bound from the argument like a named
        dimension, under a name no program can write (``__arg3_0``)."""
        name = f"__arg{len(self._fn().params)}_{index}"
        value = self._dim_value(name)
        dims.setdefault(name, Symbol(name, SymKind.DIM, span, elem=dtypes.INT, value=value))
        return value

    def _dim_value(self, name: str) -> Sym:
        """A parameter dimension: its call's value when specialising, else the symbol."""
        value = self.specialize.get(name)
        return Sym.var(name) if value is None else Sym(value)

    def _specialisable(self, value: Sym) -> bool:
        """``value`` is built from parameter dimensions only: it becomes a constant when
        the function is compiled for one call's shapes, so it is recorded, not rejected."""
        names = value.free_vars()
        if not names or not names <= set(self._fn().dims):
            return False
        self._fn().specialize_on |= names
        return True

    def _param_shape(self, spec: ast.ShapeSpec, dims: dict[str, Symbol]) -> tuple[Sym, ...]:
        if spec.dims is None:
            return tuple(self._anonymous_dim(dims, i, spec.span) for i in range(spec.rank or 0))
        shape: list[Sym] = []
        for i, dim in enumerate(spec.dims):
            if isinstance(dim, ast.Ident):
                if dim.name not in dims:
                    dims[dim.name] = Symbol(dim.name, SymKind.DIM, dim.span, elem=dtypes.INT,
                                            value=self._dim_value(dim.name))
                self._fn().refs[id(dim)] = dims[dim.name]
                shape.append(self._dim_value(dim.name))
            elif isinstance(dim, ast.AnonDim):
                shape.append(self._anonymous_dim(dims, i, dim.span))
            else:
                value = self._expr(dim).static
                if value is None or not value.is_const:
                    self._error("CQ0209", dim.span, what="a parameter dimension",
                                actual="a non-constant expression")
                    value = Sym(1)
                elif (value.value or 0) <= 0:
                    self._error("CQ0306", dim.span, value=value.value)
                shape.append(value)
        return tuple(shape)

    def _return_type(self, node: ast.Function) -> None:
        fn = self._fn()
        ret = node.ret
        if ret is None:
            fn.returns = "void"
        elif ret.elem == "auto":
            fn.returns = "data"
        elif ret.shape is None:
            fn.returns = "scalar"
            fn.ret_type = ScalarType(self._elem(ret.elem, ret.span))
        else:
            fn.returns = "data"
            elem = self._elem(ret.elem, ret.span)
            shape = self._param_shape(ret.shape, fn.dims) if ret.shape.dims else ()
            fn.ret_type = DataType(elem, shape, "global")

    def _elem(self, name: str, span: Span) -> ElemType:
        if name == "stream":
            return dtypes.INT
        elem = dtypes.ELEM_TYPES.get(name)
        if elem is None:
            self._error("CQ0204", span, name=name, actual="not a type", expected="an element type")
            return dtypes.F32
        if not elem.supported and name != "int":
            self._error("CQ0214", span, elem=name)
        return elem

    # ------------------------------------------------------------------ statements
    def _block(self, block: ast.Block, new_scope: bool = True) -> None:
        if new_scope:
            self.scopes.append({})
        self.waited_in_block.append(set())
        for stmt in block.stmts:
            self._stmt(stmt)
        self.waited_in_block.pop()
        if new_scope:
            self.scopes.pop()

    def _stmt(self, stmt: ast.Stmt) -> None:
        method = getattr(self, "_stmt_" + type(stmt).__name__, None)
        if method is None:
            self._walk_unknown(stmt)
        else:
            method(stmt)

    def _walk_unknown(self, stmt: ast.Stmt) -> None:
        """Statements this checker does not analyse yet: check nested blocks only."""
        for name in ("body", "then", "other"):
            child = getattr(stmt, name, None)
            if isinstance(child, ast.Block):
                self._block(child)

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
                        init.type, (_Error, ScalarType)) or (
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
            if isinstance(info.type, _Error):
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
                    self._error("CQ0209", item.span, what="a dimension",
                                actual=info.type.describe())
                return None
        return tuple(dims)

    def _static_int(self, expr: ast.Expr, what: str) -> Sym:
        info = self._expr(expr)
        if info.static is None:
            if not isinstance(info.type, _Error):
                self._error("CQ0209", expr.span, what=what, actual=info.type.describe())
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
        elif not isinstance(info.type, _Error):
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
        elif not isinstance(info.type, _Error):
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
                self._error("CQ0203", target.span, name=target.name, type=_type_word(sym))
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
        if item.op == "=" or not isinstance(info.type, (ScalarType, _Error)):
            self._error("CQ0213", item.span, name=sym.name, kind=_a(sym.kind.value),
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
        if isinstance(cond, ast.Binary) and cond.op in _COMPARE:
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
        for ident in _idents(expr):
            sym = self._fn().refs.get(id(ident))
            if sym is None:
                continue
            if sym.kind is SymKind.BOUNDED and sym.level is not None and sym.level.is_parallel:
                return True
            init = _initialiser(sym)
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
                if not isinstance(info.type, _Error):
                    self._error("CQ0204", stmt.value.span, name=_text(stmt.value),
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
            if None in (a, b, c, d):
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

    # ------------------------------------------------------------------ parallel / loops
    def _stmt_Parallel(self, stmt: ast.Parallel) -> None:
        for node in stmt.levels:
            if node.device_name is not None and node.device_name not in DEVICE_NAMES:
                self._error("CQ0623", node.span, name=node.device_name,
                            known=", ".join(DEVICE_NAMES))
        if not self.ctx.on_device and is_device_scope(stmt):
            self._device_scope(stmt)
            return
        outermost = not self.ctx.on_device
        if outermost:
            level_of, problems = infer_levels(stmt)
            for problem in problems:
                self._error(problem.code, problem.node.span, **problem.fields)
            self.ctx.level_of = level_of
            self.kernel_shared = []
        else:
            if stmt.is_async:
                self._error("CQ0619", stmt.span)
        if outermost:
            self.kernel_threads = None
        inner_before = self.inner_parallels
        self.inner_parallels += 1
        infos: list[LevelInfo] = []
        self.scopes.append({})
        seen: set[str] = set()
        for node in stmt.levels:
            level = self.ctx.level_of.get(id(node), Level.THREAD)
            info = self._parallel_level(node, level, seen)
            infos.append(info)
            self.ctx.levels.append(info)
        self._fn().parallels[id(stmt)] = tuple(infos)
        self._check_stream(stmt, infos[0].level if infos else Level.THREAD)
        self._block(stmt.body, new_scope=False)
        if self.inner_parallels == inner_before + 1:  # a leaf: the whole level path is known
            self._check_threads(stmt)
        for _ in infos:
            self.ctx.levels.pop()
        self.scopes.pop()
        self._check_launch_attributes(stmt, infos[0].level if infos else Level.THREAD)
        if outermost:
            self._check_shared_budget(stmt)

    def _device_scope(self, stmt: ast.Parallel) -> None:
        """``parallel by 1 : device(cpu) { ... }`` (spec 5.2 [ext]): which device runs the
        kernels inside. With one instance it is a scope of host code (the kernels run on
        the tensors' device); its variables are 0."""
        self.scopes.append({})
        for node in stmt.levels:
            bounds = self._bounds(node.bounds, len(node.vars), node.span, parallel=True)
            if node.level == "device" and any(bound.value != 1 for bound in bounds):
                self._error("CQ0701", node.span, hint="give the device level the bound 1",
                            construct="a device level with more than one instance")
            # a block's rank in its cluster has no value here: using it is a backend gap
            value = Sym(0) if node.level == "device" else None
            for name in node.vars:
                self._declare(Symbol(name, SymKind.SCALAR, node.span, elem=dtypes.INT,
                                     value=value, decl_node=stmt))
        self._block(stmt.body, new_scope=False)
        self.scopes.pop()

    def _check_stream(self, stmt: ast.Parallel, level: Level) -> None:
        """``parallel<s>`` binds a stream: a `stream` variable, on a block level."""
        if stmt.stream is None:
            return
        sym = self._lookup(stmt.stream)
        if sym is None:
            self._error("CQ0201", stmt.span, name=stmt.stream)
        elif not sym.is_stream:
            self._error("CQ0617", stmt.span, name=stmt.stream)
        elif level is not Level.BLOCK:
            self._error("CQ0618", stmt.span, level=level.value)

    def _check_launch_attributes(self, stmt: ast.Parallel, level: Level) -> None:
        """``[[launch_bounds(max_threads, ...)]]`` and ``[[maxnreg(n)]]``: block levels only,
        constant non-negative (positive for maxnreg) integers, enough threads."""
        for attr in stmt.attrs:
            if attr.name not in ("launch_bounds", "maxnreg"):
                continue
            if level is not Level.BLOCK:
                self._error("CQ0614", attr.span, attr=attr.name, level=level.value)
                continue
            values = [self._attribute_int(attr, arg) for arg in attr.args]
            if attr.name == "launch_bounds" and values and values[0] is not None:
                threads = self.kernel_threads[0] if self.kernel_threads else None
                if threads is not None and values[0] < threads:
                    self._error("CQ0616", attr.span, limit=values[0], threads=threads)

    def _attribute_int(self, attr: ast.Attribute, arg: ast.Expr) -> int | None:
        info = self._expr(arg)
        if isinstance(info.type, ScalarType) and not info.type.elem.is_int:
            self._error("CQ0615", arg.span, attr=attr.name, what="an integer",
                        actual=f"'{info.type.elem.name}'")
            return None
        if info.static is None or info.static.value is None:
            self._error("CQ0615", arg.span, attr=attr.name,
                        what="a compile-time integer constant", actual=f"'{_text(arg)}'")
            return None
        value = info.static.value
        if value < 0 or (attr.name == "maxnreg" and value == 0):
            what = "a positive integer" if attr.name == "maxnreg" else "a non-negative integer"
            self._error("CQ0615", arg.span, attr=attr.name, what=what, actual=value)
            return None
        return value

    def _check_threads(self, stmt: ast.Parallel) -> None:
        """Threads of one block (spec 5.2): at most 1024, whole warps when a group level
        exists, whole warpgroups when a group-4 level exists."""
        inner = [lv for lv in self.ctx.levels if lv.level is not Level.BLOCK]
        if not inner:
            return
        total = 1
        for info in inner:
            for bound in info.bounds:
                if bound.value is None:
                    return
                total *= bound.value
        leaf = inner[-1].level
        total *= {Level.GROUP: 32, Level.GROUP4: 128}.get(leaf, 1)
        if self.kernel_threads is None:
            self.kernel_threads = (total, stmt.span)
        elif self.kernel_threads[0] != total:
            self._error("CQ0620", stmt.span, threads=total, other=self.kernel_threads[0])
        kinds = {info.level for info in inner}
        if total > 1024:
            self._error("CQ0604", stmt.span, threads=total)
        elif Level.GROUP4 in kinds and total % 128:
            self._error("CQ0605", stmt.span, threads=total, multiple=128, level="group-4")
        elif Level.GROUP in kinds and total % 32:
            self._error("CQ0605", stmt.span, threads=total, multiple=32, level="group")

    def _check_shared_budget(self, stmt: ast.Parallel) -> None:
        """Every shared buffer of a kernel is live for the whole kernel (spec 7 row 36)."""
        used = sum(size for _, size, _ in self.kernel_shared)
        if self.target.shared_bytes is None or used <= self.target.shared_bytes:
            return  # (None: the target's budget is not known)
        biggest = sorted(self.kernel_shared, key=lambda item: -item[1])[:4]
        notes = tuple((f"'{name}' uses {size} bytes", span) for name, size, span in biggest)
        self.reporter.report("CQ0612", stmt.span, notes=notes, target=self.target.name,
                             used=used, limit=self.target.shared_bytes)

    def _note_shared(self, name: str, elem: ElemType, shape: tuple[Sym, ...], span: Span,
                     count: int = 1) -> None:
        size = _count(shape)
        if size is not None:
            self.kernel_shared.append((name, size * max(1, elem.bits // 8) * count, span))

    def _stmt_SyncStmt(self, stmt: ast.SyncStmt) -> None:
        if stmt.kind == "barrier" and stmt.level == "device" and not any(
                info.node is not None and info.node.cooperative for info in self.ctx.levels):
            self._error("CQ0622", stmt.span, what="sync.barrier : device",
                        where="inside a 'parallel ... : block<cooperative>'")

    def _parallel_level(self, node: ast.ParallelLevel, level: Level, seen: set[str]) -> LevelInfo:
        bounds = self._bounds(node.bounds, len(node.vars), node.span, parallel=True)
        if node.cooperative and level is not Level.BLOCK:
            self._error("CQ0622", node.span, what="<cooperative>", where="on a block level")
        if level is not Level.BLOCK:
            for bound in bounds:
                if not bound.is_const and not self._specialisable(bound):
                    self._error("CQ0610", node.span, level=level.value, bound=bound)
        syms = []
        # an anonymous level (`parallel by 1, by 1`) cannot be referenced: each of its
        # variables gets a fresh name no program can write and no duplicate check
        names = node.vars or tuple(f"__anon{len(seen) + i}" for i in range(len(bounds)))
        for name, bound in zip(names, bounds):
            if name in seen and node.vars:
                self._error("CQ0602", node.span, name=name)
            seen.add(name)
            if name == "_":
                self._error("CQ0208", node.span, what="a parallel variable")
            sym = Symbol(name, SymKind.BOUNDED, node.span, elem=dtypes.INT, bound=bound,
                         level=level)
            syms.append(sym)
            if node.vars:
                self._declare(sym)
        tuple_sym = None
        if node.tuple_name:
            tuple_sym = Symbol(node.tuple_name, SymKind.BOUNDED_TUPLE, node.span,
                               members=tuple(syms), level=level)
            self._declare(tuple_sym)
        return LevelInfo(level, tuple(syms), tuple(bounds), node.level is None, node, tuple_sym)

    def _bounds(self, exprs: tuple[ast.Expr, ...], count: int, span: Span,
                parallel: bool) -> list[Sym]:
        """Bounds of ``by [a, b]`` / ``in [a, b]``: one per variable, static or symbolic."""
        dims = self._shape_items(exprs, span, "CQ0601" if parallel else "CQ0306")
        if dims is None:
            return [Sym(1)] * max(count, 1)
        if count and len(dims) != count:
            self._error("CQ0311", span, what="the bound list", expected=count, actual=len(dims))
            dims = (list(dims) + [Sym(1)] * count)[:count]
        return list(dims)

    def _stmt_Foreach(self, stmt: ast.Foreach) -> None:
        self._loop(stmt, Level.LOOP)

    def _stmt_With(self, stmt: ast.With) -> None:
        self._loop(stmt, Level.WITH)

    def _loop(self, stmt: ast.Foreach | ast.With, level: Level) -> None:
        self.scopes.append({})
        infos: list[LoopInfo] = []
        for item in stmt.items:
            if isinstance(item, ast.Within):
                infos.append(self._within(item, level))
            else:
                infos.append(self._range_item(item))
        if isinstance(stmt, ast.Foreach):
            self._check_unroll(stmt, infos)
        self._fn().loops[id(stmt)] = tuple(infos)
        self.ctx.loops += 1
        self._block(stmt.body, new_scope=False)
        self.ctx.loops -= 1
        self.scopes.pop()

    def _check_unroll(self, stmt: ast.Foreach, infos: list[LoopInfo]) -> None:
        """``: unroll(n)``: a positive factor no larger than the trip count."""
        innermost = infos[-1].bounds[-1] if infos and infos[-1].bounds else None
        trips = innermost.value if innermost is not None and innermost.value else 0
        for suffix in stmt.suffixes:
            if suffix.kind != "unroll" or not suffix.args:
                continue
            factor = self._expr(suffix.args[0]).static
            if factor is None or factor.value is None:
                continue
            if factor.value <= 0:
                self._error("CQ0621", suffix.span, factor=factor.value, problem="must be positive")
            elif trips and factor.value > trips:
                self._error("CQ0621", suffix.span, factor=factor.value,
                            problem=f"exceeds the innermost loop's {trips} iterations")

    def _within(self, item: ast.Within, level: Level) -> LoopInfo:
        runtime = self._runtime_trips(item.shape)
        # `foreach y in [n]`, n a runtime integer: its item was checked already
        info = self._fn().exprs[id(runtime)] if runtime is not None else self._expr(item.shape)
        dynamic: tuple[ast.Expr | None, ...] = ()
        if runtime is not None and (bound := self._loop_bound(runtime, 4)) is not None:
            bounds = [bound]
            dynamic = (runtime,)
        elif isinstance(info.type, ShapeType):
            bounds = list(info.type.dims)
            for bound in bounds:
                if bound.value is not None and bound.value <= 0:
                    self._error("CQ0306", item.shape.span, value=bound.value)
                    break
        elif info.static is not None:
            bounds = [info.static]
        elif isinstance(info.type, _Error):
            bounds = [Sym(1)]
        elif _is_intlike(info) and (self._static_bound(item.shape) or 0) > 0:
            # `foreach y in X`, X a runtime integer with a static bound: X trips
            bounds = [Sym(self._static_bound(item.shape) or 1)]
            dynamic = (item.shape,)
        else:
            self._error("CQ0209", item.shape.span, what="a loop bound",
                        actual=info.type.describe())
            bounds = [Sym(1)]
        names = item.vars
        if len(names) != len(bounds) and not (len(names) == 1 and not item.braced):
            self._error("CQ0311", item.span, what="the variable list", expected=len(bounds),
                        actual=len(names))
        syms = []
        if len(names) == 1 and not item.braced and len(bounds) > 1:
            # `foreach idx in [a, b]`: idx is a bounded ituple of rank 2
            members = tuple(Symbol(f"{names[0]}({i})", SymKind.BOUNDED, item.span,
                                   elem=dtypes.INT, bound=b, level=level)
                            for i, b in enumerate(bounds))
            tup = Symbol(names[0], SymKind.BOUNDED_TUPLE, item.span, members=members, level=level)
            self._declare(tup)
            return LoopInfo(members, tuple(bounds), tup)
        for name, bound in zip(names, bounds):
            if name == "_":
                self._error("CQ0208", item.span, what="an iteration variable")
            sym = Symbol(name, SymKind.BOUNDED, item.span, elem=dtypes.INT, bound=bound,
                         level=level)
            self._declare(sym)
            syms.append(sym)
        tup = None
        if item.tuple_name == "_":
            self._error("CQ0208", item.span, what="a with variable" if level is Level.WITH
                        else "an iteration variable")
        if item.tuple_name:
            tup = Symbol(item.tuple_name, SymKind.BOUNDED_TUPLE, item.span, members=tuple(syms),
                         level=level)
            self._declare(tup)
        return LoopInfo(tuple(syms), tuple(bounds[:len(syms)]), tup,
                        dynamic=dynamic[:len(syms)])

    def _range_item(self, item: ast.RangeItem) -> LoopInfo:
        """``foreach y(lb : ub : step)`` over an existing bounded variable: from ``lb``
        while below ``#y + ub``, by ``step`` (spec 5.1); a bounded ituple loops over all
        its members."""
        if item.var == "_" or item.name == "_":
            self._error("CQ0208", item.span, what="an iteration variable")
        sym = self._lookup(item.var)
        if sym is not None and sym.kind is SymKind.BOUNDED_TUPLE and not item.has_range:
            return self._tuple_range(item, sym)
        if sym is None or sym.kind is not SymKind.BOUNDED:
            self._error("CQ0207", item.span, name=item.var)
            sym = Symbol(item.var, SymKind.BOUNDED, item.span, elem=dtypes.INT, bound=Sym(1))
        for part in (item.lb, item.ub, item.step):
            if part is not None:
                self._expr(part)
        if item.step is not None:
            step = self._fn().exprs[id(item.step)].static
            if step is not None and step.value is not None and step.value <= 0:
                self._error("CQ0306", item.step.span, value=step.value)
        loop_sym = Symbol(item.name or item.var, SymKind.BOUNDED, item.span, elem=dtypes.INT,
                          bound=sym.bound, level=Level.LOOP)
        self.scopes[-1][loop_sym.name] = loop_sym
        self._fn().refs[id(item)] = sym
        return LoopInfo((loop_sym,), (sym.bound or Sym(1),), None, (item.lb,), (item.ub,),
                        (item.step,))

    def _tuple_range(self, item: ast.RangeItem, sym: Symbol) -> LoopInfo:
        members = tuple(Symbol(m.name, SymKind.BOUNDED, item.span, elem=dtypes.INT,
                               bound=m.bound, level=Level.LOOP) for m in sym.members)
        tup = Symbol(item.name or item.var, SymKind.BOUNDED_TUPLE, item.span, members=members,
                     level=Level.LOOP)
        self.scopes[-1][tup.name] = tup
        self._fn().refs[id(item)] = sym
        return LoopInfo(members, tuple(m.bound or Sym(1) for m in members), tup)

    # ------------------------------------------------------------------ DMA
    def _stmt_DmaStmt(self, stmt: ast.DmaStmt) -> None:
        self._dma_modifiers(stmt)
        self._in_tma = stmt.engine == "tma"
        try:
            self._dma(stmt)
        finally:
            self._in_tma = False

    def _dma(self, stmt: ast.DmaStmt) -> None:
        src = self._view_operand(stmt.src)
        if src is None:
            if stmt.future is not None and self._lookup(stmt.future) is None:
                self._declare_poisoned(stmt.future, stmt.span)
            return
        src_type = self._dma_result_shape(stmt, src)
        dst_type = self._dma_dest(stmt, src_type)
        if stmt.engine == "tma" and dst_type is not None:
            self._tma_rules(stmt, src_type, dst_type)
        if stmt.is_async and stmt.future is None and not stmt.after:
            self._error("CQ0411", stmt.span)
        if stmt.after:
            self._check_after(stmt)
        self._note_swizzle(stmt)
        if stmt.future is not None and dst_type is not None:
            self._bind_future(stmt, dst_type)
        elif stmt.future is not None and self._lookup(stmt.future) is None:
            self._declare_poisoned(stmt.future, stmt.span)

    def _dma_modifiers(self, stmt: ast.DmaStmt) -> None:
        if stmt.op == "load" and stmt.engine == "dma":
            self._error("CQ0406", stmt.span, op="load")
        for attr in stmt.attrs:
            if attr.name == "swiz" and attr.args:
                value = self._expr(attr.args[0]).static
                if value is not None and value.value not in (32, 64, 128, 0, 1, 2, 3):
                    self._error("CQ0407", attr.span, value=value)
            if attr.name in ("evict_first", "evict_last") and not (
                    stmt.engine == "tma" and stmt.op == "load"):
                self._error("CQ0422", attr.span, attr=attr.name)
            if attr.name == "sp" and attr.args:
                pattern = [self._expr(a).static for a in attr.args]
                values = [p.value if p is not None else None for p in pattern]
                if values != [2, 4]:
                    self._error("CQ0435", attr.span,
                                pattern=":".join("?" if v is None else str(v) for v in values))

    def _bind_future(self, stmt: ast.DmaStmt, dst_type: DataType) -> None:
        existing = self._lookup(stmt.future) if stmt.future else None
        if existing is not None and existing.kind is SymKind.FUTURE and existing.mutable:
            # a `dma.any` placeholder being filled
            existing.elem, existing.shape, existing.storage = (dst_type.elem, dst_type.shape,
                                                                dst_type.storage)
            existing.is_async = stmt.is_async
            future = existing
        else:
            previous = self.scopes[-1].get(stmt.future or "")
            if previous is not None and previous.kind is SymKind.FUTURE:
                # a future is bound once per scope; only dma.any placeholders are refilled
                self._error("CQ0202", stmt.span, name=stmt.future)
            future = Symbol(stmt.future or "", SymKind.FUTURE, stmt.span, elem=dst_type.elem,
                            shape=dst_type.shape, storage=dst_type.storage,
                            is_async=stmt.is_async, decl_node=stmt,
                            decl_depth=len(self.scopes) - 1)
            self.scopes[-1][future.name] = future
        self._note_decl(stmt, future)
        future.assigned_depth = len(self.scopes) - 1
        if stmt.is_async:
            self.async_defs.setdefault(future, stmt.span)
        for waited in self.waited_in_block:
            waited.discard(future)

    def _note_swizzle(self, stmt: ast.DmaStmt) -> None:
        """Remember the swizzle a buffer was filled with, for the consumer's mma.load."""
        swiz = [a for a in stmt.attrs if a.name == "swiz"]
        if not isinstance(stmt.dst, ast.View):
            return
        info = self._fn().views.get(id(stmt.dst))
        if info is None:
            return
        value = 128
        if swiz and swiz[0].args:
            static = self._fn().exprs.get(id(swiz[0].args[0]))
            value = static.static.value if static and static.static is not None else 128
        self.swizzles[info.root] = value if swiz else 0

    def _tma_rules(self, stmt: ast.DmaStmt, src: DataType, dst: DataType) -> None:
        """TMA moves tiles between global and shared memory, issued by one thread of the
        block or of each warpgroup (spec 5.7): warp and thread indices cannot pick a tile."""
        if not 1 <= len(src.shape) <= 5:
            self._error("CQ0437", stmt.span, rank=len(src.shape))
        pair = (src.storage, dst.storage)
        legal = {("global", "shared")} if stmt.op == "load" else {("global", "shared"),
                                                                   ("shared", "global")}
        if pair not in legal:
            self._error("CQ0414", stmt.span, src=src.storage, dst=dst.storage)
        elif self.engine is not None and 1 <= len(src.shape) <= 5:  # (else: CQ0437)
            tile = dst if dst.storage == "shared" else src
            self.engine.tme(stmt.span, tile.shape, tile.elem, f"tma.{stmt.op}",
                            self._swizzle_of(stmt))
        for operand in (stmt.src, stmt.dst):
            for ident in _idents(operand):
                sym = self._fn().refs.get(id(ident))
                if sym is not None and sym.kind is SymKind.BOUNDED and sym.level in (
                        Level.GROUP, Level.THREAD):
                    self._error("CQ0421", ident.span, name=sym.name, level=sym.level.value)
                    return

    def _swizzle_of(self, stmt: ast.DmaStmt) -> int | None:
        """The ``.swiz<N>`` of a copy in bytes (128 when written without N); None when the
        copy is not swizzled or N is not a known constant."""
        swiz = [a for a in stmt.attrs if a.name == "swiz"]
        if not swiz:
            return None
        if not swiz[0].args:
            return 128
        static = self._fn().exprs.get(id(swiz[0].args[0]))
        return static.static.value if static and static.static is not None else None

    def _dma_result_shape(self, stmt: ast.DmaStmt, src: DataType) -> DataType:
        """The shape a DMA produces from its source: transposed or padded for those ops."""
        if (stmt.op == "pad" and stmt.pad is None) or (stmt.op == "transp" and stmt.perm is None):
            # `dma.pad` without `<{low}, {high}, {mid}, value>`, `dma.transp` without `<perm>`
            what = "pad" if stmt.op == "pad" else "transpose"
            self._error("CQ0408", stmt.span, what=what, actual=0, rank=len(src.shape))
            return src
        if stmt.op == "transp" and stmt.perm is not None:
            perm = [self._static_int(p, "a transpose index").value for p in stmt.perm]
            rank = len(src.shape)
            if len(perm) != rank:
                self._error("CQ0408", stmt.span, what="transpose", actual=len(perm), rank=rank)
            elif sorted(p for p in perm if p is not None) != list(range(rank)):
                self._error("CQ0409", stmt.span, perm=", ".join(map(str, perm)), last=rank - 1)
            else:
                return DataType(src.elem, tuple(src.shape[p] for p in perm if p is not None),
                                src.storage)
        if stmt.op == "pad" and stmt.pad is not None:
            rank = len(src.shape)
            parts = [stmt.pad.low, stmt.pad.high, stmt.pad.mid]
            for part in parts:
                if len(part) != rank:
                    self._error("CQ0408", stmt.span, what="pad", actual=len(part), rank=rank)
                    return src
            self._expr(stmt.pad.value)
            shape = list(src.shape)
            for part in parts:
                for d, e in enumerate(part):
                    shape[d] = shape[d] + self._static_int(e, "a pad amount")
            return DataType(src.elem, tuple(shape), src.storage)
        return src

    def _dma_dest(self, stmt: ast.DmaStmt, src: DataType) -> DataType | None:
        dst = stmt.dst
        if isinstance(dst, ast.StorageDest):
            if dst.storage in ("shared", "local") and not self.ctx.on_device:
                self._error("CQ0405", dst.span, storage=dst.storage)
            if dst.storage == "shared":
                self._note_shared(stmt.future or "a copy", src.elem, src.shape, stmt.span)
            return DataType(src.elem, src.shape, dst.storage)
        if isinstance(dst, ast.SelectExpr):
            info = self._expr(dst)  # `=> select(k, bufA, bufB)`: one of same-typed buffers
            return info.type if isinstance(info.type, DataType) else None
        dst_type = self._view_operand(dst)
        if dst_type is None:
            return None
        if dst_type.elem != src.elem:
            self._error("CQ0401", stmt.span, src=src.elem.name, dst=dst_type.elem.name)
            return dst_type
        if len(dst_type.shape) != len(src.shape):
            self._error("CQ0402", stmt.span, src=len(src.shape), dst=len(dst_type.shape))
            return dst_type
        self._check_dma_shapes(stmt, src, dst_type)
        return dst_type

    def _check_dma_shapes(self, stmt: ast.DmaStmt, src: DataType, dst: DataType) -> None:
        """Equal shapes copy totally; a smaller source may fill part of a bigger
        destination (the rest is zero with .zfill); symbolic mismatches are tested at
        call time."""
        zfill = any(a.name == "zfill" for a in stmt.attrs)
        equal = [a.provably_eq(b) for a, b in zip(src.shape, dst.shape)]
        if all(e is True for e in equal):
            if zfill and stmt.op == "copy":
                self._error("CQ0425", stmt.span, shape=shape_text(src.shape))
            return
        fits = [a.provably_le(b) for a, b in zip(src.shape, dst.shape)]
        if all(f is not False for f in fits):
            for d, (a, b, f) in enumerate(zip(src.shape, dst.shape, fits)):
                if f is None:
                    self._runtime_check(a, "<=", b, f"the copy's source dimension {d} must fit "
                                        "its destination", stmt.span)
            if not zfill and stmt.engine == "dma" and all(f is True for f in fits):
                self._error("CQ0426", stmt.span, src=shape_text(src.shape),
                            dst=shape_text(dst.shape))
            return
        src_count = _count(src.shape)
        dst_count = _count(dst.shape)
        if src_count is not None and dst_count is not None and src_count > dst_count:
            self._error("CQ0404", stmt.span, src=src_count, dst=dst_count)
        self._error("CQ0403", stmt.span, src=shape_text(src.shape), dst=shape_text(dst.shape))

    def _stmt_DmaAny(self, stmt: ast.DmaAny) -> None:
        sym = Symbol(stmt.future, SymKind.FUTURE, stmt.span, mutable=True, decl_node=stmt,
                     decl_depth=len(self.scopes) - 1)
        self._declare(sym)
        self._note_decl(stmt, sym)
        self.placeholders[sym] = False

    def _stmt_WaitStmt(self, stmt: ast.WaitStmt) -> None:
        for target in stmt.targets:
            if not isinstance(target, ast.Ident):
                self._sync_target(target)
                continue
            sym = self._lookup(target.name)
            if sym is None:
                self._error("CQ0201", target.span, name=target.name)
                continue
            self._fn().refs[id(target)] = sym
            if sym.kind is SymKind.EVENT or sym.poisoned:
                continue
            if sym.kind is not SymKind.FUTURE:
                self._error("CQ0429", target.span, name=target.name, kind=_a(sym.kind.value))
                continue
            if not sym.is_async and not sym.mutable:
                self._error("CQ0412", target.span, name=target.name)
                continue
            if sym in self.waited_in_block[-1]:
                self._error("CQ0417", target.span, name=target.name)
            self.waited_in_block[-1].add(sym)
            self.waited.add(sym)

    def _stmt_SwapStmt(self, stmt: ast.SwapStmt) -> None:
        """``swap(a, b)`` / ``rotate(a, b, ...)`` exchange future names. Placeholders
        (``dma.any`` not yet filled) go with anything; filled futures must come from
        copies in the same scope and agree on being asynchronous."""
        wanted = "2" if stmt.kind == "swap" else "2 or more"
        if (stmt.kind == "swap" and len(stmt.names) != 2) or len(stmt.names) < 2:
            self._error("CQ0428", stmt.span, kind=stmt.kind, expected=wanted,
                        actual=len(stmt.names))
            return
        syms = []
        for name in stmt.names:
            sym = self._lookup(name)
            if sym is None:
                self._error("CQ0201", stmt.span, name=name)
                return
            syms.append(sym)
        self.swap_groups.append(set(syms))
        self._fn().swaps[id(stmt)] = list(syms)
        first = syms[0]
        for name, sym in zip(stmt.names[1:], syms[1:]):
            depths = (self._scope_depth(stmt.names[0]), self._scope_depth(name))
            reason = _swap_problem(first, sym, stmt.names[0], name, depths)
            if reason:
                self._error("CQ0419", stmt.span, a=stmt.names[0], b=name, reason=reason)
                return  # a rejected swap exchanges nothing
        # the names now hold one another's futures (a <- b, ..., last <- a): the futures'
        # state moves, the names (and what later uses refer to) stay
        states = [_future_state(sym) for sym in syms]
        for sym, state in zip(syms, states[1:] + states[:1]):
            _set_future_state(sym, state)

    def _stmt_EventDecl(self, stmt: ast.EventDecl) -> None:
        for var in stmt.vars:
            dims = tuple(self._static_int(d, "an array dimension") for d in var.array_dims)
            sym = Symbol(var.name, SymKind.EVENT, var.span, storage=stmt.storage or "shared",
                         array_dims=dims, decl_node=stmt)
            self._declare(sym)
            self._note_decl(stmt, sym)

    def _sync_target(self, target: ast.Expr) -> Symbol | None:
        """A wait/trigger target: a future, an event, an event-array element or
        ``e.at(order)``."""
        info = self._expr(target)
        if isinstance(info.type, _Error):
            return None
        if isinstance(info.type, EventType):
            return info.type.symbol
        if isinstance(info.type, FutureType):
            return info.type.symbol
        self._error("CQ0429", target.span, name=_text(target), kind=info.type.describe())
        return None

    def _stmt_TriggerStmt(self, stmt: ast.TriggerStmt) -> None:
        for target in stmt.targets:
            self._sync_target(target)
            if stmt.after and len(stmt.after) > 1 and isinstance(target, ast.ElemAccess) and \
                    any(isinstance(i, ast.Postfix) for i in target.indices):
                self._error("CQ0434", target.span)
        for item in stmt.after:
            if not isinstance(item, ast.Ident):
                continue
            sym = self._lookup(item.name)
            if sym is None:
                self._error("CQ0201", item.span, name=item.name)
                continue
            reason = _trigger_after_problem(sym, self.waited)
            if reason:
                self._error("CQ0423", item.span, name=item.name, reason=reason)
            self.waited.add(sym)

    # ------------------------------------------------------------------ views
    def _view_operand(self, expr: ast.Expr) -> DataType | None:
        info = self._expr(expr)
        if isinstance(info.type, DataType):
            return info.type
        if isinstance(info.type, FutureType):
            sym = info.type.symbol
            if sym.elem is not None and sym.shape is not None:
                return DataType(sym.elem, sym.shape, sym.storage or "shared")
        if not isinstance(info.type, _Error):
            self._error("CQ0204", expr.span, name=_text(expr), actual=info.type.describe(),
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
            self._error("CQ0204", base.span, name=_text(base), actual="an expression",
                        expected="spanned data, a future or a view")
            return None
        sym = self._lookup(base.name)
        if sym is None:
            self._error("CQ0201", base.span, name=base.name)
            return None
        self._fn().refs[id(base)] = sym
        if sym.poisoned:
            return None
        self._check_array_index(sym, array_index)
        if sym.kind is SymKind.VIEW and sym.view is not None:
            return sym.view.root, sym.view.type, tuple(array_index)
        if sym.kind in (SymKind.DATA, SymKind.FUTURE, SymKind.FRAG) and sym.shape is not None \
                and sym.elem is not None:
            return sym, DataType(sym.elem, sym.shape, sym.storage or "shared"), tuple(array_index)
        self._error("CQ0213", base.span, name=base.name, kind=_a(sym.kind.value),
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
                self._error("CQ0315", index.span, index=_text(index), name=sym.name,
                            high=high if high is not None and high >= count.value else low,
                            count=count.value)

    def _modulus(self, index: ast.Expr, depth: int) -> int | None:
        """``c`` when ``index`` is ``x % c`` of a bounded (non-negative) ``x`` with a
        constant ``c > 0``, directly or through a name defined so (``stage = k % 4``):
        its values stay below ``c`` whatever the bound of ``x``."""
        if isinstance(index, ast.Ident) and depth:
            sym = self._fn().refs.get(id(index))
            init = _initialiser(sym) if sym is not None else None
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
            step = self._strided(step, op)
        if step is not None:
            self._check_view_step(step, shape)
        return step

    def _check_after(self, stmt: ast.DmaStmt) -> None:
        """``dma.copy ... after g``: ``g`` names a copy made before (spec 5.6)."""
        sym = self._lookup(stmt.after or "")
        if sym is None:
            self._error("CQ0201", stmt.span, name=stmt.after)
        elif sym.kind is not SymKind.FUTURE:
            self._error("CQ0204", stmt.span, name=stmt.after, actual=_a(sym.kind.value),
                        expected="a DMA future")

    def _strided(self, step: ViewStep, op: ast.ViewOp) -> ViewStep:
        """``view(E : T)`` / ``subspan(E : T)``: one stride per extent, known when the
        kernel is compiled or from parameter sizes."""
        if len(op.strides) != len(step.extents):
            raise ViewError("CQ0311", op.span, what="strides", expected=len(step.extents),
                            actual=len(op.strides))
        strides = tuple(self._extent(s, "an element stride") for s in op.strides)
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
            if d >= len(step.indices) or step.indices[d].expr is None or step.strides:
                continue  # (a strided view's origin is not bounded by its parent's shape)
            item = step.indices[d]
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
            at = self._index_items(op.at) if op.at is not None else None
            return _with_dynamic(subspan_step(op.kind, shape, extents, step, at, op.span),
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
        if info.static is None and _is_intlike(info):
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
            init = _initialiser(sym) if sym is not None else None
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
                self._error("CQ0415", expr.span, extent=_text(expr))
            else:
                self._error("CQ0704", expr.span, extent=_text(expr))
        elif not isinstance(info.type, _Error):
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
                    name = expr.name if isinstance(expr, ast.Ident) else _text(expr)
                    self._error("CQ0314", expr.span, name=name)
                    return None
                args.append(TileArg(IndexItem(expr), None, expr.span))
            elif isinstance(t, _Error):
                return None
            else:
                self._error("CQ0209", expr.span, what="a tile index", actual=t.describe())
                return None
        return args

    # ------------------------------------------------------------------ MMA
    def _stmt_MmaFill(self, stmt: ast.MmaFill) -> None:
        value = self._expr(stmt.value)
        elem = self._elem(stmt.elem, stmt.span) if stmt.elem else None
        if stmt.declares:
            name = _target_name(stmt.target)
            sym = Symbol(name, SymKind.FRAG, stmt.target.span, elem=elem, frag_role="acc",
                         mutable=True, decl_node=stmt,
                         shape=self.acc_shapes.get(stmt.target.span))
            self._declare(sym)
            self._note_decl(stmt, sym)
            self._fn().frags[id(stmt)] = sym
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
            self._error("CQ0508", expr.span, name=_text(expr))
            return None
        sym = self._lookup(base.name)
        if sym is None:
            self._error("CQ0201", base.span, name=base.name)
            return None
        self._fn().refs[id(base)] = sym
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
            self._error("CQ0508", expr.span, name=_text(expr))
            return None
        self._check_array_index(sym, indices)
        return sym

    def _stmt_MmaLoad(self, stmt: ast.MmaLoad) -> None:
        data = self._view_operand(stmt.src)
        if data is None:
            return
        self._check_swizzle(stmt)
        if len(data.shape) != 2 or not all(d.is_const for d in data.shape):
            self._error("CQ0501", stmt.src.span, name=_text(stmt.src), shape=shape_text(data.shape))
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
            self._error("CQ0501", expr.span, name=_text(expr), shape=shape_text(data.shape))
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
            self._error("CQ0502", stmt.span, a=f"'{_text(stmt.a)}' {shape_text(sa)}",
                        b=f"'{_text(stmt.b)}' {shape_text(sb)}", la=stmt.layout_a,
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
            self._error("CQ0514", expr.span, name=_text(expr), elem=elem.name,
                        shape=shape_text(shape), expected=shape_text(expected), k=k.value)

    def _check_sparse_metadata_source(self, expr: ast.Expr) -> None:
        """A warpgroup sparse MMA reads its metadata from registers: it must come through
        ``mma.load`` (a warp MMA may also take a view)."""
        sym = self._fn().refs.get(id(expr.base)) if isinstance(expr, ast.View) else None
        from_load = sym is not None and sym.kind is SymKind.FRAG
        if not from_load and any(lv.level is Level.GROUP4 for lv in self.ctx.levels):
            self._error("CQ0515", expr.span, name=_text(expr))

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
                return MmaOperand(_text(expr), _memory(memory), expr.span)
        info = self._fn().exprs.get(id(expr))
        if info is not None and isinstance(info.type, DataType):
            memory = info.type.storage
        elif info is not None and isinstance(info.type, FutureType):
            memory = info.type.symbol.storage or "shared"
        return MmaOperand(_text(expr), _memory(memory), expr.span)

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

    # ------------------------------------------------------------------ expressions
    def _expr(self, expr: ast.Expr) -> ExprInfo:
        method = getattr(self, "_expr_" + type(expr).__name__, None)
        info = ERROR if method is None else method(expr)
        self._fn().exprs[id(expr)] = info
        return info

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
        sym = self._lookup(e.name)
        if sym is None:
            self._error("CQ0201", e.span, name=e.name)
            return ERROR
        self._fn().refs[id(e)] = sym
        if sym.poisoned:
            return ERROR
        return _symbol_info(sym)

    def _expr_Member(self, e: ast.Member) -> ExprInfo:
        obj = self._expr(e.obj)
        t = obj.type
        if isinstance(t, _Error):
            return ERROR
        if e.member == "span":
            shape = _shape_of(t)
            if shape is None:
                self._error("CQ0213", e.span, name=_text(e.obj), kind=t.describe(),
                            usage="with .span")
                return ERROR
            return ExprInfo(ShapeType(shape))
        if e.member in ("data", "mdata"):
            if isinstance(t, FutureType) and t.symbol.shape is not None and t.symbol.elem:
                return ExprInfo(DataType(t.symbol.elem, t.symbol.shape,
                                         t.symbol.storage or "shared"))
            if isinstance(t, DataType):
                return obj
            self._error("CQ0410", e.span, name=_text(e.obj))
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
            if not _is_intlike(info) and not isinstance(info.type, _Error):
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
        if isinstance(t, _Error):
            return ERROR
        if isinstance(t, FragType) and self.apply_depth:
            t = self._accumulator_elements(t.symbol)
            if t is None:
                return ExprInfo(ScalarType(dtypes.F32))  # (shape known in the second walk)
        if not isinstance(t, DataType):
            self._error("CQ0213", e.span, name=_text(e.base), kind=t.describe(),
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
            self._error("CQ0305", e.span, name=_text(e.base), rank=len(t.shape), count=count)
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
            self._error("CQ0213", stmt.span, name=sym.name, kind=_a(sym.kind.value),
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
        base = self._expr(e.base)
        index = self._expr(e.index)
        t = base.type
        i = index.static.value if index.static is not None else None
        if isinstance(t, _Error):
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
        if isinstance(lhs.type, _Error) or isinstance(rhs.type, _Error):
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
        if e.op in _COMPARE or e.op in _LOGIC:
            return ExprInfo(_BOOL, _fold(e.op, lhs.static, rhs.static))
        if isinstance(lhs.type, (ShapeType, TupleType)) or isinstance(rhs.type, (ShapeType, TupleType)):
            return self._shape_arith(e, lhs, rhs)
        if isinstance(lhs.type, BoundedType) and _is_intlike(rhs):
            return ExprInfo(lhs.type)
        if isinstance(rhs.type, BoundedType) and _is_intlike(lhs):
            return ExprInfo(rhs.type)
        lt, rt = _scalar_elem(lhs), _scalar_elem(rhs)
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
                self._error("CQ0209", e.span, what="a shape dimension", actual="a runtime value")
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
                    self._error("CQ0203", e.span, name=e.operand.name, type=_type_word(sym))
            return ExprInfo(info.type)
        return ExprInfo(info.type)

    def _expr_Postfix(self, e: ast.Postfix) -> ExprInfo:
        return self._expr_Unary(ast.Unary(e.span, e.op, e.operand))

    def _expr_Ternary(self, e: ast.Ternary) -> ExprInfo:
        self._expr(e.cond)
        a, b = self._expr(e.then), self._expr(e.other)
        ea, eb = _scalar_elem(a), _scalar_elem(b)
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
        if e.name in _FLOAT_BUILTINS:
            elem = _scalar_elem(args[0]) if args else None
            return ExprInfo(ScalarType(elem if elem and elem.is_float else dtypes.F32))
        if e.name in ("__max", "__min") and len(args) == 2:
            ea, eb = _scalar_elem(args[0]), _scalar_elem(args[1])
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
            self._error("CQ0560", e.span, call=e.name, dst=_text(e.args[0]),
                        dst_shape=shape_text(dst), src=_text(e.args[1]),
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
        if not isinstance(t, _Error):
            self._error("CQ0213", arg.span, name=_text(arg), kind=t.describe() if t else "?",
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
                self._error("CQ0436", expr.span, a=_text(e.options[0]), ta=first.describe(),
                            b=_text(expr), tb=other.describe())
                return ERROR
        if first is not None and not isinstance(options[0].type, FutureType):
            return ExprInfo(first)
        return options[0]

    def _expr_Derive(self, e: ast.Derive) -> ExprInfo:
        base = self._expr(e.base)
        dims = _dims_of(base)
        if dims is None:  # `p[a, b]` of a loop variable, a buffer...: nothing to derive from
            if not isinstance(base.type, _Error):
                self._error("CQ0204", e.base.span, name=_text(e.base),
                            actual=base.type.describe(), expected="a shape or an ituple")
            return ERROR
        reported = len(self.reporter.diagnostics)
        out = [self._derive_item(item, dims) for item in e.items]
        if e.brackets == "[]":
            missing = next((item for item, dim in zip(e.items, out) if dim is None), None)
            if missing is not None:
                if len(self.reporter.diagnostics) == reported:  # the items reported nothing
                    self._error("CQ0209", missing.span, what="a derived dimension",
                                actual="a value computed at run time")
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

    def _expr_ExternCall(self, e: ast.ExternCall) -> ExprInfo:
        for a in e.args:
            self._expr(a)
        return ExprInfo(_INT)

    def _expr_NullLit(self, e: ast.NullLit) -> ExprInfo:
        return ExprInfo(_INT)

    def _expr_StorageDest(self, e: ast.StorageDest) -> ExprInfo:
        return ERROR


# ---------------------------------------------------------------------- module helpers


def _view_base_name(base: ast.Expr) -> ast.Expr:
    """The identifier under ``buf[i][j]`` (the name a view starts from)."""
    while isinstance(base, ast.Index):
        base = base.base
    return base


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


def _a(noun: str) -> str:
    """``noun`` with its indefinite article ("an MMA fragment", "a future")."""
    return ("an " if noun[:1].lower() in "aeio" or noun.startswith("MMA") else "a ") + noun


def _type_word(sym: Symbol) -> str:
    """How a declaration of ``sym`` spells its type, for hints."""
    if sym.kind in (SymKind.SCALAR, SymKind.DIM):
        return sym.elem.name if sym.elem is not None else "int"
    return {SymKind.ITUPLE: "ituple", SymKind.MDSPAN: "mdspan"}.get(sym.kind, "int")


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
    return ExprInfo(_INT)


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


def _scalar_elem(info: ExprInfo) -> ElemType | None:
    if isinstance(info.type, ScalarType):
        return info.type.elem
    if isinstance(info.type, BoundedType):
        return dtypes.INT
    return None


def _is_intlike(info: ExprInfo) -> bool:
    elem = _scalar_elem(info)
    return elem is not None and elem.is_int


_FRAGMENT_CALLS = frozenset({"copy", "reduce_max", "reduce_sum"})


def _is_minimum(expr: ast.Ternary) -> bool:
    """``(a < b) ? a : b`` and its mirror forms: the smaller of a and b."""
    cond = expr.cond
    if not isinstance(cond, ast.Binary) or cond.op not in ("<", "<=", ">", ">="):
        return False
    pair = (_text(cond.lhs), _text(cond.rhs))
    chosen = (_text(expr.then), _text(expr.other))
    return chosen == (pair if cond.op in ("<", "<=") else pair[::-1])


def _with_dynamic(step: ViewStep, dynamic: list[ast.Expr | None]) -> ViewStep:
    return replace(step, dynamic=tuple(dynamic)) if any(d is not None for d in dynamic) \
        else step


def _is_wildcard(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Ident) and expr.name == "_"


def _target_name(expr: ast.Expr) -> str:
    while isinstance(expr, ast.Index):
        expr = expr.base
    return expr.name if isinstance(expr, ast.Ident) else "<fragment>"


def _count(shape: tuple[Sym, ...]) -> int | None:
    total = 1
    for d in shape:
        if d.value is None:
            return None
        total *= d.value
    return total


def _swap_problem(a: Symbol, b: Symbol, a_name: str, b_name: str,
                  depths: tuple[int, int]) -> str | None:
    """Why two names cannot exchange their futures; ``depths`` are the scopes the *names*
    were declared in (a swap exchanges futures, the names stay where they are)."""
    if a.kind is not b.kind:
        return f"'{a_name}' is {_a(a.kind.value)}, '{b_name}' {_a(b.kind.value)}"
    if a.kind is not SymKind.FUTURE or a.assigned_depth < 0 or b.assigned_depth < 0:
        return None  # placeholders take any future
    if depths[0] != depths[1]:
        return "they are declared in different scopes"
    if a.is_async != b.is_async:
        return "one is asynchronous and the other is not"
    if a.shape is not None and b.shape is not None and (
            len(a.shape) != len(b.shape) or a.elem != b.elem or
            any(x.provably_eq(y) is False for x, y in zip(a.shape, b.shape))):
        return "their data have different types"
    return None


def _trigger_after_problem(sym: Symbol, waited: set[Symbol]) -> str | None:
    """Why a future cannot complete an event through `trigger ... after`, if it cannot."""
    node = sym.decl_node
    if sym.kind is not SymKind.FUTURE or not isinstance(node, ast.DmaStmt):
        return "only asynchronous TMA copies into shared memory complete events by themselves"
    if sym in waited:
        return "it was already waited"
    if node.engine != "tma" or not sym.is_async or sym.storage != "shared":
        return "only asynchronous TMA copies into shared memory complete events by themselves"
    return None


# `c op x` read as `x FLIP[op] c`
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def _conjuncts(cond: ast.Expr) -> list[ast.Expr]:
    """The terms of ``a && b && ...``."""
    if isinstance(cond, ast.Binary) and cond.op == "&&":
        return _conjuncts(cond.lhs) + _conjuncts(cond.rhs)
    return [cond]
def _initialiser(sym: Symbol) -> ast.Expr | None:
    """The value an immutable scalar was declared with (None when it may change)."""
    node = sym.decl_node
    if sym.kind not in (SymKind.SCALAR, SymKind.BOUNDED) or sym.mutable:
        return None
    if isinstance(node, ast.ScalarDecl):
        return next((i.init for i in node.items if i.name == sym.name), None)
    if isinstance(node, ast.AssignStmt):
        return next((i.value for i in node.items if isinstance(i.target, ast.Ident)
                     and i.target.name == sym.name and i.op == "="), None)
    return None


def _idents(node: ast.Node) -> list[ast.Ident]:
    """Every identifier under ``node``."""
    from dataclasses import fields

    found: list[ast.Ident] = []
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Ident):
            found.append(item)
        elif isinstance(item, ast.Node):
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif isinstance(item, tuple):
            stack.extend(item)
    return found


def _is_literal(expr: ast.Expr) -> bool:
    return isinstance(expr, (ast.IntLit, ast.FloatLit, ast.BoolLit, ast.InfLit))


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


_STATE = ("is_async", "assigned_depth", "elem", "shape", "storage")


def _future_state(sym: Symbol) -> tuple[object, ...]:
    return tuple(getattr(sym, name) for name in _STATE)


def _set_future_state(sym: Symbol, state: tuple[object, ...]) -> None:
    for name, value in zip(_STATE, state):
        setattr(sym, name, value)


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


def _has_return(block: ast.Block) -> bool:
    for stmt in block.stmts:
        if isinstance(stmt, ast.ReturnStmt):
            return True
        for name in ("body", "then", "other"):
            child = getattr(stmt, name, None)
            if isinstance(child, ast.Block) and _has_return(child):
                return True
    return False


def _text(expr: ast.Expr) -> str:
    """Short source-like text of an expression for messages."""
    try:
        from ..printer import format_expr

        return format_expr(expr)
    except Exception:  # the printer is best effort inside messages
        return type(expr).__name__
