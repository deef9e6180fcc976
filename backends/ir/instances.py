"""Warp and warpgroup instances that run element-wise fragment code (``apply``, ``frag``
vectors, row reductions) over their own slices of a tile (arch 3.2).

The MMA lowering merges the accumulators of side-by-side instances into one tile, but the
``frag`` vectors and row indices of element-wise code belong to one instance each. Two
ways to lower such a ``parallel ... : group-4`` level:

- **side by side** (preferred): when every instance owns a slice of rows of the same
  height (the first dimension of the accumulators the body declares), the instances
  become one block-wide computation over a fused row axis (``state.FusedRows``): the
  instance index is ``rows // height``, a ``frag`` row vector spans every instance's
  rows, each instance's MMA tile lands in its rows of one larger ``tl.dot`` (the two
  warpgroups over the halves of a 128-row attention tile make one 128-row dot). A
  construct that would mix the rows of different instances (a reduction along the rows,
  a fused tile as the B operand or along K) is refused while lowering, and the kernel is
  lowered again with the instances in turn (``lower.FunctionLowering``);
- **in turn**: a loop over the instances, each running the body on its own (correct for
  any body whose instances share nothing but read-only data; every load of the body is
  repeated per instance, so it is the fallback).
"""

from __future__ import annotations

from ...frontend import syntax as ast
from ...frontend.sema.model import Level, Symbol
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .errors import unsupported
from .state import FusedRows, KernelState, iter_stmts
from .values import Bounded

_INSTANCE_LEVELS = (Level.GROUP4, Level.GROUP)
# statements whose meaning depends on instances running as separate threads: events and
# roles (their protocol is between threads), future swaps, early exits
_NOT_FUSED = (ast.InThreads, ast.WaitStmt, ast.TriggerStmt, ast.EventDecl, ast.SwapStmt,
              ast.DmaAny, ast.YieldStmt, ast.Parallel)


def lower_instances(kl: KernelState, stmt: ast.Parallel) -> bool:
    """Lower a level of instances that run fragment code; False when ``stmt`` is not
    one (its levels become tensor axes as usual)."""
    if not _runs_fragment_code(kl, stmt):
        return False
    fused = _fused_rows(kl, stmt) if kl.fuse_instances else None
    if fused is not None:
        _lower_side_by_side(kl, stmt, fused)
    else:
        _lower_in_turn(kl, stmt)
    return True


def _runs_fragment_code(kl: KernelState, stmt: ast.Parallel) -> bool:
    """Whether ``stmt`` is a warp(-group) level of more than one instance whose body runs
    element-wise fragment code."""
    levels = kl.fn.parallels[id(stmt)]
    if not any(level.level in _INSTANCE_LEVELS for level in levels):
        return False
    if all((bound.value or 1) == 1 for level in levels for bound in level.bounds):
        return False
    return any(isinstance(inner, ast.Apply) for inner in iter_stmts(stmt.body))


def _count(kl: KernelState, stmt: ast.Parallel) -> int:
    """The number of instances, recorded for the warp count (``kernel.py``)."""
    count = 1
    for level in kl.fn.parallels[id(stmt)]:
        total = 1
        for bound in level.bounds:
            total *= bound.value or 1
        kl.level_bounds[level.level] = max(kl.level_bounds.get(level.level, 1), total)
        count *= total
    return count


# ----------------------------------------------------------------------- side by side


def _fused_rows(kl: KernelState, stmt: ast.Parallel) -> FusedRows | None:
    """The fused row axis of ``stmt``'s instances, or None when they cannot be lowered
    side by side: instances nested in fused ones, levels other than warps and
    warpgroups, statements that need separate threads, no accumulator, accumulators of
    different heights, or a fused extent that is not a power of two."""
    levels = kl.fn.parallels[id(stmt)]
    if kl.fused is not None or not all(level.level in _INSTANCE_LEVELS for level in levels):
        return None
    body = list(iter_stmts(stmt.body))
    if any(isinstance(s, _NOT_FUSED) for s in body):
        return None
    heights: set[int | None] = set()
    local: set[Symbol] = set()
    for inner in body:
        local.update(kl.fn.decls.get(id(inner), []))
        if isinstance(inner, (ast.MmaFill, ast.FragDecl)) and id(inner) in kl.fn.frags:
            sym = kl.fn.frags[id(inner)]
            local.add(sym)
            shape = sym.shape or ()
            heights.add(shape[0].value if len(shape) == 2 and not sym.array_dims else None)
    if len(heights) != 1 or None in heights:
        return None
    rows = heights.pop()
    assert rows is not None
    instances = 1
    for level in levels:
        for bound in level.bounds:
            if bound.value is None:
                return None
            instances *= bound.value
    extent = instances * rows
    if extent & (extent - 1) or extent < 16:
        return None
    axis = kl.axis(object(), extent, "rows")
    return FusedRows(axis, rows, frozenset(local))


def _lower_side_by_side(kl: KernelState, stmt: ast.Parallel, fused: FusedRows) -> None:
    """The body once, over the fused row axis: each instance variable is computed from
    the instance that owns each row (outer variables vary slowest)."""
    kl.fusion_tried = True
    _count(kl, stmt)
    instance = fused.instance()
    pairs = [(sym, bound) for level in kl.fn.parallels[id(stmt)]
             for sym, bound in zip(level.vars, level.bounds)]
    inner = 1
    for sym, bound in reversed(pairs):
        extent = bound.value or 1
        value = instance if inner == 1 else b.binary("//", instance, b.const(inner))
        if len(pairs) > 1:
            value = b.binary("%", value, b.const(extent))
        kl.env[sym] = Bounded(value, bound)
        inner *= extent
    for level in kl.fn.parallels[id(stmt)]:
        kl.bind_tuple(level)
    kl.bodies.add(id(stmt.body))
    kl.fused = fused
    kl.active.append(fused.axis)
    try:
        kl.block(stmt.body)
    finally:
        kl.active.remove(fused.axis)
        kl.fused = None


def refuse_mixing(kl: KernelState, axes: tuple[ir.Axis, ...], span: Span, what: str) -> None:
    """Raise when ``what`` would combine the rows of different fused instances (the
    kernel is then lowered with the instances in turn)."""
    if kl.fused is not None and kl.fused.axis in axes:
        raise unsupported(span, f"{what} across the rows of warpgroup instances lowered "
                                "side by side")


# ----------------------------------------------------------------------- in turn


def _lower_in_turn(kl: KernelState, stmt: ast.Parallel) -> None:
    """The body once per instance, in a loop over each level variable."""
    loops: list[tuple[str, int]] = []
    for level in kl.fn.parallels[id(stmt)]:
        for sym, bound in zip(level.vars, level.bounds):
            extent = bound.value or 1
            if extent == 1:
                kl.env[sym] = Bounded(b.const(0), bound)
                continue
            name = kl.fresh(sym.name)
            kl.env[sym] = Bounded(b.var(name, high=extent - 1), bound)
            loops.append((name, extent))
    _count(kl, stmt)
    kl.bodies.add(id(stmt.body))
    _nest(kl, stmt, loops)


def _nest(kl: KernelState, stmt: ast.Parallel, loops: list[tuple[str, int]]) -> None:
    if not loops:
        kl.block(stmt.body)
        return
    name, extent = loops[0]
    with kl.nested(binds=(name,)) as inner:
        kl.loop_depth += 1
        try:
            _nest(kl, stmt, loops[1:])
        finally:
            kl.loop_depth -= 1
    kl.emit(ir.For(stmt.span, name, b.const(0), b.const(extent), inner.body, pipelined=False))
