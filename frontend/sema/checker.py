"""The checker: resolves names, computes types, shapes and parallel levels, and reports
rule violations (spec 7) as diagnostics. Output: ``CheckedProgram`` annotations.

The checker never raises for a user mistake: every problem becomes a diagnostic and the
walk continues with an ``ERROR`` type so that one mistake gives one message.

``Checker`` holds the walk's state, the scopes and the statement / expression dispatch; the
rules live in one mixin per construct family: ``check_stmts`` (declarations, assignment,
control flow), ``check_parallel`` (parallel levels, loops), ``check_dma`` (copies, futures,
events), ``check_views`` (views and extents), ``check_mma`` (tensor-core statements) and
``check_exprs`` (expressions). ``check_common`` holds what several of them use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import syntax as ast
from ..diagnostics import Reporter
from ..parser import recursion_headroom
from ..source import Span
from . import dtypes
from .check_common import ERROR, WalkContext, expr_text, is_intlike
from .check_dma import DmaChecks
from .check_exprs import ExprChecks
from .check_helpers import HelperChecks
from .check_mma import MmaChecks
from .check_parallel import ParallelChecks
from .check_stmts import StatementChecks
from .check_views import ViewChecks
from .dtypes import ElemType
from .effects import written_copies
from .model import (CheckedFunction, CheckedProgram, DataType, ExprInfo, RuntimeCheck,
                    ScalarType, Symbol, SymKind)
from .rules_s5000 import EngineRules
from .symbolic import Sym
from .targets import DEFAULT_TARGET, TARGETS, Target


class Checker(StatementChecks, ParallelChecks, DmaChecks, ViewChecks, MmaChecks, HelperChecks,
              ExprChecks):
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
        self.ctx = WalkContext()
        self._reset_function_state()

    def _reset_function_state(self) -> None:
        self.helper_calls: list[ast.ExternCall] = []  # inlined helper calls being checked
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
        self.ctx = WalkContext()
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
        if fn.returns == "void":  # (a function that returns a tensor may return the copy)
            for sym, target in written_copies(fn):
                self.reporter.report("CQ0230", target.span, name=sym.name)
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
    def _error(self, code: str, span: Span, **fields: Any) -> None:
        """Report ``code`` at ``span``; ``fields`` fill its message (and may give a hint)."""
        self.reporter.report(code, span, **fields)

    def _not_static(self, expr: ast.Expr, what: str, info: ExprInfo) -> None:
        """``expr`` should be a compile-time integer: CQ0266 for an integer known only at
        run time, CQ0209 for a value of another type."""
        if is_intlike(info):
            self._error("CQ0266", expr.span, what=what, expr=expr_text(expr))
        else:
            self._error("CQ0209", expr.span, what=what, actual=info.type.describe())

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

    def _resolve(self, ident: ast.Ident) -> Symbol | None:
        """The symbol ``ident`` names, recorded as its reference (CQ0201 when there is none)."""
        sym = self._lookup(ident.name)
        if sym is None:
            self._error("CQ0201", ident.span, name=ident.name)
            return None
        self._fn().refs[id(ident)] = sym
        return sym

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

    # ------------------------------------------------------------------ expressions
    def _expr(self, expr: ast.Expr) -> ExprInfo:
        method: Callable[[ast.Expr], ExprInfo] | None = getattr(
            self, "_expr_" + type(expr).__name__, None)
        info = ERROR if method is None else method(expr)
        self._fn().exprs[id(expr)] = info
        return info


def _has_return(block: ast.Block) -> bool:
    for stmt in block.stmts:
        if isinstance(stmt, ast.ReturnStmt):
            return True
        for name in ("body", "then", "other"):
            child = getattr(stmt, name, None)
            if isinstance(child, ast.Block) and _has_return(child):
                return True
    return False
