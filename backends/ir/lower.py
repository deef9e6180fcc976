"""Checked AST -> tile IR (arch 3): the host program of a ``__co__`` function and one
kernel per outermost ``parallel``.

Blocks become programs, inner parallel levels and independent ``foreach`` loops become
tensor axes, staged buffers become views of their source (loads are forwarded), and the
four-step MMA becomes one ``tl.dot`` over the whole block tile (see ``mma.py``).

The lowering is layered: ``state.py`` (the state and shared helpers) at the bottom, one
module per construct family above it, and this module on top: ``FunctionLowering`` lowers
a function's host statements and launches, and ``KernelLowering`` combines the rule
families and dispatches each statement to its rule (``STATEMENT_RULES``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ...frontend import syntax as ast
from ...frontend.parser import recursion_headroom
from ...frontend.sema import dtypes
from ...frontend.sema.levels import is_device_scope
from ...frontend.sema.model import CheckedFunction, ExprInfo, Symbol, SymKind
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import apply, builtins, dma, loops, mma
from . import build as b
from . import coverage
from . import nodes as ir
from .assign import Assignments
from .control import Control
from .errors import LoweringError, NeedsContiguous, NeedsSpecialization, unsupported
from .exprs import Expressions
from .kernel import KernelAssembly
from .state import FunctionState, HostScalar, describe
from .values import Region, Scalar, TensorRef
from .views import Views

__all__ = ["FunctionLowering", "KernelLowering"]


# --------------------------------------------------------------------------- functions


class FunctionLowering(FunctionState):
    """The host program of a function: parameters, allocations, launches, the return."""

    def lower(self) -> ir.Function:
        with recursion_headroom():  # statements and expressions nest up to MAX_DEPTH deep
            return self._lower()

    def host_params(self) -> list[ir.HostParam]:
        """The parameters the host function binds (without lowering the body)."""
        for sym in self.fn.params:
            self._param(sym)
        return self.params

    def _lower(self) -> ir.Function:
        node = self.fn.node
        self.host_params()
        self.written_first = coverage.written_before_read(self.fn)
        pending: list[ast.Stmt] = []
        for stmt in node.body.stmts:
            if _touches_data(stmt):
                pending.append(stmt)
                continue
            self._host_program(pending)
            self._host_stmt(stmt)
        self._host_program(pending)
        clones = [p.name for p in self.params
                  if p.kind == "tensor" and p.storage != "global" and not p.by_ref
                  and p.name in self.written]
        copy_back = [p.name for p in self.params if p.name in self.layout.copied
                     and p.name in self.written and p.name not in clones]
        return ir.Function(node.name, self.params, self.body, self.fn.returns,
                           sorted(self.fn.dims), self.kernels, clones,
                           list(self.fn.runtime_checks), self.layout, copy_back)

    def _param(self, sym: Symbol) -> None:
        elem = sym.elem or dtypes.F32
        if sym.kind is SymKind.DATA:
            shape = sym.shape or ()
            strides = tuple(Sym.var(ir.stride_var_name(sym.name, d)) for d in range(len(shape))) \
                if sym.name in self.layout.strided else ()
            tensor = TensorRef(sym.name, elem, shape, strides)
            self.tensors[sym.name] = tensor
            self.env[sym] = tensor
            storage = "global" if _declared_global(self.fn, sym) else "host"
            self.params.append(ir.HostParam(sym.name, "tensor", elem.name, sym.shape or (),
                                            by_ref=sym.by_ref, storage=storage))
        else:
            # Python numbers arrive as 32-bit ints or floats; narrower types are rounded in
            # the kernel, so an `f16` parameter holds an f16 value as the reference's does
            arrives = ir.DType.F32 if elem.is_float else ir.DType.I32
            self.env[sym] = Scalar(b.cast(b.var(sym.name, arrives), b.dtype_of(elem)), elem)
            self.params.append(ir.HostParam(sym.name, "scalar", elem.name))

    def _host_stmt(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, (ast.Empty, ast.MmaCommit, ast.SyncStmt)):
            return  # (launches finish before the host goes on: a host sync has nothing to do)
        if isinstance(stmt, ast.SpannedDecl):
            for sym in self.fn.decls.get(id(stmt), []):
                self._alloc(stmt, sym)
            return
        if isinstance(stmt, ast.Parallel) and is_device_scope(stmt):
            for inner in stmt.body.stmts:  # host code choosing a device: see the checker
                self._host_stmt(inner)
            return
        if isinstance(stmt, ast.Parallel):
            index = len(self.kernels)
            kernel = self._kernel(stmt, f"{self.fn.node.name}_k{index}")
            self.kernels.append(kernel)
            self.body.append(ir.HostLaunch(kernel))
            return
        if isinstance(stmt, ast.ReturnStmt):
            if self.fn.returns == "scalar" and stmt.value is not None:
                info = self.fn.exprs.get(id(stmt.value))
                if info is None or info.static is None:
                    raise unsupported(stmt.span, "returning a scalar computed at run time")
                self.body.append(ir.HostReturn(None, info.static))
                return
            returned = self.fn.returned
            self.body.append(ir.HostReturn(returned.name if returned is not None else None))
            if returned is not None and returned.is_param:
                self.written.add(returned.name)  # returning a parameter returns a copy
            return
        if isinstance(stmt, ast.ScalarDecl):
            for item, sym in zip(stmt.items, self.fn.decls.get(id(stmt), [])):
                self._host_scalar(sym, item.init, stmt.span)
            return
        decls = self.fn.decls.get(id(stmt), [])
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind is SymKind.SCALAR for s in decls):  # `n = cdiv(SEQ, 64);`
            for assign, sym in zip(stmt.items, decls):
                self._host_scalar(sym, assign.value, stmt.span)
            return
        if isinstance(stmt, (ast.MdspanDecl, ast.ItupleDecl)):
            return  # compile-time values: the checker folded their uses
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind in (SymKind.ITUPLE, SymKind.MDSPAN) for s in decls):
            return  # `t = {1, 2};` declares a compile-time ituple (other assignments: below)
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind is SymKind.VIEW for s in decls):
            self._host_views(stmt, decls)
            return
        if isinstance(stmt, ast.PrintStmt):
            return  # `print!`: nothing to run
        if isinstance(stmt, ast.CppStmt):
            return  # host C++: skipped (the checker warned, CQ0709)
        if isinstance(stmt, ast.AssertStmt):
            if id(stmt) in self.fn.host_asserts:
                return  # decided at compile time, or tested when the arguments are bound
            raise unsupported(stmt.span, "an assert on values computed at run time")
        raise unsupported(stmt.span, f"the host statement '{type(stmt).__name__}'",
                          "host code may allocate buffers, launch parallel blocks and return")

    def _kernel(self, root: ast.Parallel | ast.Block, name: str) -> ir.Kernel:
        """One kernel. Warpgroup instances over row slices are lowered side by side where
        they can be (instances.py); when that meets a construct that would mix their rows,
        the kernel is lowered again with the instances in turn (what the first try added
        to the host program is taken back first)."""
        body, written, tensors = len(self.body), set(self.written), dict(self.tensors)
        lowering = KernelLowering(self, root, name)
        try:
            return lowering.lower()
        except LoweringError:
            if not lowering.fusion_tried:
                raise
        del self.body[body:]
        self.written, self.tensors = written, tensors
        return KernelLowering(self, root, name, fuse_instances=False).lower()

    def _host_scalar(self, sym: Symbol, init: ast.Expr | None, span: Span) -> None:
        if sym.value is not None and not sym.mutable:
            return  # known from constants and sizes: uses are folded by the checker
        value = _literal_value(init, self.fn.exprs.get(id(init))) if init is not None else 0
        if value is None and init is not None and _from_scalars(init):
            # computed from scalar parameters: each kernel computes it again
            self.env[sym] = HostScalar(init, sym.elem or dtypes.INT)
            return
        if value is None:
            raise unsupported(span, "a host scalar computed at run time",
                              "host code computes scalars from parameters and "
                              "constants; read data inside a parallel block")
        elem = sym.elem or dtypes.INT
        self.env[sym] = Scalar(b.const(value, b.dtype_of(elem)), elem)

    def _host_program(self, stmts: list[ast.Stmt]) -> None:
        """Host statements that read or write data element by element (``foreach i ...
        M.at(i) = ...;`` between blocks) run in order as one program of one thread."""
        if not stmts:
            return
        span = stmts[0].span.join(stmts[-1].span)
        block = ast.Block(span, tuple(stmts))
        index = len(self.kernels)
        kernel = self._kernel(block, f"{self.fn.node.name}_k{index}")
        self.kernels.append(kernel)
        self.body.append(ir.HostLaunch(kernel))
        stmts.clear()

    def _host_views(self, stmt: ast.AssignStmt, decls: list[Symbol]) -> None:
        """``l = lhs.span_as(6, 64);`` on the host: a view the kernels read through. It
        is resolved as a kernel would resolve it; views that need run-time values (which
        the host does not compute) are rejected."""
        probe = KernelLowering(self, None, "host")
        for item, sym in zip(stmt.items, decls):
            view = probe.resolve_view_read(item.value)
            if probe.scopes[0] or not isinstance(view, Region):
                raise unsupported(item.span, "a host view that needs values computed at run "
                                             "time", "declare the view inside the parallel block")
            self.env[sym] = view

    def _alloc(self, stmt: ast.SpannedDecl, sym: Symbol) -> None:
        elem = sym.elem or dtypes.F32
        if elem.torch is None:
            raise LoweringError("CQ0214", stmt.span, elem=elem.name)
        tensor = TensorRef(sym.name, elem, sym.shape or ())
        self.tensors[sym.name] = tensor
        self.env[sym] = tensor
        var = next(v for v in stmt.vars if v.name == sym.name)
        fill = None
        if var.init is not None:
            info = self.fn.exprs.get(id(var.init))
            fill = _literal_value(var.init, info)
            if fill is None:
                raise unsupported(var.init.span, "a buffer initialiser that is not a constant")
        written_first = sym in self.written_first
        if fill is None and not written_first and not self.options.fill_buffers:
            if not self.options.debug:
                written_first = True  # (torch.empty)
            elif elem.is_float:
                fill = math.nan  # (an element read before it is written shows)
        self.body.append(ir.HostAlloc(sym.name, tensor.dims, elem.torch, fill, stmt.span,
                                      written_first=written_first))


def _from_scalars(expr: ast.Expr) -> bool:
    """Whether ``expr`` reads no data (only names, literals, operators and math)."""
    allowed = (ast.Ident, ast.IntLit, ast.FloatLit, ast.BoolLit, ast.Binary, ast.Unary,
               ast.Ternary, ast.Cast)
    for node in ast.walk(expr):
        if isinstance(node, ast.CallExpr) and node.name in builtins.SUPPORTED:
            continue
        if isinstance(node, ast.Expr) and not isinstance(node, allowed):
            return False
    return True


def _touches_data(stmt: ast.Stmt) -> bool:
    """Host statements that run as a one-thread program: loops, branches, element
    writes and atomics (what only computes views, shapes or constants stays on the host;
    a loop that launches parallel blocks is not one program)."""
    if any(isinstance(node, ast.Parallel) for node in ast.walk(stmt)):
        return False
    if isinstance(stmt, (ast.Foreach, ast.If, ast.While, ast.ExprStmt)):
        return True
    if isinstance(stmt, ast.PrintStmt):
        return not stmt.static  # (`print!` prints when compiling: nothing runs)
    return isinstance(stmt, ast.AssignStmt) and all(
        isinstance(item.target, ast.ElemAccess) for item in stmt.items)


def _declared_global(fn: CheckedFunction, sym: Symbol) -> bool:
    for param in fn.node.params:
        if param.name == sym.name:
            return param.storage == "global"
    return False


def _literal_value(expr: ast.Expr | None, info: ExprInfo | None) -> float | int | None:
    if isinstance(expr, ast.IntLit):
        return expr.value
    if isinstance(expr, ast.FloatLit):
        return expr.value
    if isinstance(expr, ast.BoolLit):
        return int(expr.value)
    static = info.static if info is not None else None
    if static is not None and static.is_const:
        return static.value
    return None


# --------------------------------------------------------------------------- kernels


class KernelLowering(Expressions, Views, Control, Assignments, KernelAssembly):
    """One kernel's lowering: the rule families combined; statements are dispatched to
    their rule by ``STATEMENT_RULES``."""

    def stmt(self, stmt: ast.Stmt) -> None:
        rule = STATEMENT_RULES.get(type(stmt))
        if rule is None:
            raise unsupported(stmt.span, describe(stmt))
        try:
            rule(self, stmt)
        except (LoweringError, NeedsSpecialization, NeedsContiguous):
            raise
        except Exception as exc:  # a lowering bug: report it at the statement, not line 1
            if isinstance(stmt, (ast.Block, ast.Parallel, ast.Foreach, ast.With, ast.If)):
                raise
            raise LoweringError("CQ0901", stmt.span,
                                detail=f"lowering: {type(exc).__name__}: {exc}") from exc


def _nothing(kl: KernelLowering, stmt: ast.Stmt) -> None:
    """Statements with nothing to lower: ``;``, ``mma.commit`` (MMAs complete in program
    order) and event declarations (events carry no data: only their protocol is checked,
    roles.py)."""


# Statement type -> its rule: a method of a rule family (called with the kernel's lowering
# as ``self``) or a function of a construct module (called with it as ``kl``). A type not
# listed is unsupported (CQ0701).
STATEMENT_RULES: dict[type, Callable[[Any, Any], None]] = {
    ast.Block: Control.block,
    ast.Empty: _nothing,
    ast.MmaCommit: _nothing,
    ast.EventDecl: _nothing,
    ast.SyncStmt: Control.lower_sync,
    ast.WaitStmt: Control.lower_wait,
    ast.TriggerStmt: Control.lower_trigger,
    ast.Parallel: Control.lower_parallel,
    ast.With: Control.lower_with,
    ast.If: Control.lower_if,
    ast.InThreads: Control.lower_inthreads,
    ast.While: Control.lower_while,
    ast.AssertStmt: Control.lower_assert,
    ast.PrintStmt: Control.lower_print,
    ast.SpannedDecl: Assignments.lower_spanned_decl,
    ast.ScalarDecl: Assignments.lower_scalar_decl,
    ast.AssignStmt: Assignments.lower_assign,
    ast.DmaAny: Assignments.lower_dma_any,
    ast.SwapStmt: Assignments.lower_swap,
    ast.ExprStmt: Expressions.lower_expr_stmt,
    ast.Foreach: loops.lower_foreach,
    ast.DmaStmt: dma.lower_dma,
    ast.MmaFill: mma.lower_fill,
    ast.MmaLoad: mma.lower_load,
    ast.MmaExec: mma.lower_exec,
    ast.MmaStore: mma.lower_store,
    ast.MmaScale: mma.lower_scale,
    ast.FragDecl: mma.lower_frag_decl,
    ast.Apply: apply.lower_apply,
}
