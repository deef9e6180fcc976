"""Which parallel statements may run their instances side by side as lanes.

The interpreter's reference semantics is one instance at a time, statement by statement
(spec 5.2). For speed, a ``parallel`` whose body only computes scalars, reads and writes
single elements and branches may instead run all its instances at once: every value
becomes a tensor with one entry per instance, branches become masks. For programs without
data races both orders give the same result; the lane runner also reports races (two
instances writing different values to one element). Everything else -- copies, MMA,
nested parallels, local buffers, loops with early exits -- runs instance by instance.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Iterator

from ...frontend import syntax as ast
from ...frontend.sema.model import CheckedFunction, SymKind, Symbol

_SIMPLE_STMTS = (ast.Block, ast.Empty, ast.ScalarDecl, ast.AssignStmt, ast.If, ast.Foreach,
                 ast.With, ast.SyncStmt, ast.AssertStmt, ast.ExprStmt, ast.InThreads,
                 ast.MmaCommit)
_SIMPLE_EXPRS = (ast.IntLit, ast.FloatLit, ast.BoolLit, ast.InfLit, ast.Ident, ast.Member,
                 ast.ElemAccess, ast.Select, ast.BoundOf, ast.Binary, ast.Ternary,
                 ast.TupleLit, ast.ShapeLit, ast.Derive, ast.DimRef, ast.SizeOf, ast.CallExpr,
                 ast.Cast, ast.Unary, ast.Postfix, ast.StrLit)


def lane_safe(fn: CheckedFunction, stmt: ast.Parallel) -> bool:
    """Whether ``stmt``'s body may run with all instances as lanes."""
    declared = _declared_inside(fn, stmt.body)
    for level in fn.parallels.get(id(stmt), ()):
        declared.update(level.vars)
        if level.tuple_symbol is not None:
            declared.add(level.tuple_symbol)
    return all(_stmt_ok(fn, s, declared) for s in stmt.body.stmts)


def _declared_inside(fn: CheckedFunction, block: ast.Block) -> set[Symbol]:
    found: set[Symbol] = set()
    for node in walk(block):
        if isinstance(node, ast.Stmt):
            found.update(fn.decls.get(id(node), ()))
        if isinstance(node, (ast.Foreach, ast.With)):
            for loop in fn.loops.get(id(node), ()):
                found.update(loop.vars)
                if loop.tuple_symbol is not None:
                    found.add(loop.tuple_symbol)
    return found


def _stmt_ok(fn: CheckedFunction, stmt: ast.Stmt, declared: set[Symbol]) -> bool:
    if not isinstance(stmt, _SIMPLE_STMTS):
        return False
    if isinstance(stmt, ast.InThreads) and stmt.is_async:
        return False
    if isinstance(stmt, ast.ExprStmt) and not isinstance(stmt.expr, (ast.Unary, ast.Postfix)):
        return False
    if isinstance(stmt, ast.AssignStmt):
        for item in stmt.items:
            if isinstance(item.value, (ast.View, ast.SelectExpr)):
                return False
            target = item.target
            if isinstance(target, ast.Ident) and fn.refs.get(id(target)) not in declared:
                return False
            if not isinstance(target, (ast.Ident, ast.ElemAccess)):
                return False
    if isinstance(stmt, ast.Foreach):
        for loop_item in stmt.items:
            if isinstance(loop_item, ast.RangeItem):
                for part in (loop_item.lb, loop_item.ub, loop_item.step):
                    if part is not None and (fn.exprs.get(id(part)) is None
                                             or fn.exprs[id(part)].static is None):
                        return False
    for node in walk(stmt):
        if isinstance(node, ast.Stmt) and node is not stmt and not _stmt_ok(fn, node, declared):
            return False
        if isinstance(node, ast.Expr) and not _expr_ok(fn, node, declared):
            return False
    return True


def _expr_ok(fn: CheckedFunction, expr: ast.Expr, declared: set[Symbol]) -> bool:
    if not isinstance(expr, _SIMPLE_EXPRS):
        return False
    if isinstance(expr, ast.CallExpr) and expr.name.startswith("__atomic"):
        return False
    if isinstance(expr, (ast.Unary, ast.Postfix)) and expr.op in ("++", "--", "&"):
        operand = expr.operand
        if expr.op == "&" or not isinstance(operand, ast.Ident) or \
                fn.refs.get(id(operand)) not in declared:
            return False
    if isinstance(expr, ast.Ident):
        sym = fn.refs.get(id(expr))
        if sym is not None and sym not in declared:
            # values private to each instance (fragments, outer local buffers) need the
            # instance-by-instance runner
            if sym.kind is SymKind.FRAG or (sym.kind is SymKind.DATA and sym.storage == "local"):
                return False
    return True


def walk(node: ast.Node) -> Iterator[ast.Node]:
    """Every AST node under ``node`` (itself included)."""
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Node):
            yield item
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif isinstance(item, tuple):
            stack.extend(item)


def contains(block: ast.Block, kinds: tuple[type, ...]) -> bool:
    return any(isinstance(node, kinds) for node in walk(block))
