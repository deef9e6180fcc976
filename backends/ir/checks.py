"""Run-time checks of the ``debug`` compile option: device assertions on what the checker
cannot prove at compile time.

- every element index ``x.at(i, j)`` the checker cannot prove in range lies in
  ``[0, extent)`` of its view's dimension: indices computed from data (a gather, a
  schedule table) and arithmetic on lane indices (``p # t + off``, ``i - 1``, a local
  holding one). Only constants inside the extent and lane indices as written (``p``,
  ``p # t``, ``k(-1)``) are proven; lanes of a tail block (a lane index past the extent,
  or a store whose own element is outside its tensor) are masked by the lowering, as
  without ``debug``, and not checked;
- an element read through a view whose origin comes from data
  (``x.subspan(16).at(p + off)``, ``x.view(16).from(off)``) lies inside the tensor;
- every tile a copy or a tile load/store moves starts inside its tensor;
- a ``wait`` finds its future in flight: in debug mode each future of an asynchronous
  copy has a flag, set where the copy is issued, exchanged by ``swap``/``rotate``, tested
  and cleared by the wait (scalar code; copies under per-lane conditions are not tracked).

Each check is an ``ir.Assert`` whose message codegen prefixes with the Croqtile
``file:line``; the index is let-bound first, so that on the CPU the error can report its
value at the failing lanes. Without ``debug`` nothing here emits anything: the generated
source is the one of a compile without the option.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from ...frontend import printer
from ...frontend import syntax as ast
from ...frontend.sema.model import BoundedTupleType, DataType, Symbol, SymKind, TupleType
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .errors import LoweringError
from .state import KernelState
from .values import Region, access, padding_mask


def enabled(kl: KernelState) -> bool:
    return kl.fl.options.debug


def check_element(kl: KernelState, e: ast.ElemAccess, index: list[ir.Expr]) -> None:
    """``x.at(i, ...)``: each index not proven in range by the checker is asserted to lie
    in ``[0, extent)`` of the view's dimension."""
    if not enabled(kl):
        return
    info = kl.fn.exprs.get(id(e.base))
    if info is None or not isinstance(info.type, DataType):
        return
    shape = info.type.shape
    written = _written_indices(kl, e)
    if len(written) != len(index) or len(index) != len(shape):
        return  # (ituples spread into several indices: their members are bounded)
    access_text = printer.format_expr(e)
    for d, (expr, idx, extent) in enumerate(zip(written, index, shape)):
        if expr is None or _proven(kl, expr, idx, extent):
            continue
        what = (f"index out of range in {access_text}: index {d} "
                f"({printer.format_expr(expr)}) not in [0, {extent})")
        _assert_within(kl, idx, b.const(0), _extent(kl, extent), what, e.span,
                       _lanes_inside(kl, expr, extent))


@contextlib.contextmanager
def kept_lanes(kl: KernelState, region: Region, index: list[ir.Expr]) -> Iterator[None]:
    """While the value of a store into ``region`` at ``index`` is lowered: its checks skip
    the lanes whose element lies outside the tensor, whose value is not stored. (A tail
    block's lanes, ``parallel p by cdiv(M, 16)``, read past other data as they go past
    their output.)"""
    mask = access(region, index)[1] if enabled(kl) else None
    if mask is None:
        yield
        return
    kl.kept_lanes.append(mask)
    try:
        yield
    finally:
        kl.kept_lanes.pop()


def check_origin(kl: KernelState, region: Region, span: Span | None, what: str) -> None:
    """A tile load or store of ``region``: its origin lies inside the tensor in every
    dimension whose coordinate comes from data (a value loaded from memory, a scalar
    argument) and is masked by the tensor's bounds (a tail tile may extend past the end,
    masked; its first element may not). Origins made of block and loop indices are in
    range by construction and cost nothing."""
    if not enabled(kl) or span is None or region.lows:
        return
    for t, (coord, dim) in enumerate(zip(region.origin, region.tensor.dims)):
        if not region.limits[t] or not _from_data(kl, coord, set()) or _collapsed(coord):
            continue  # (no limits: a strided reinterpretation, whose dims bound nothing)
        message = (f"{what} of '{region.tensor.name}' out of range: its origin in dimension "
                   f"{t} not in [0, {dim})")
        _assert_within(kl, coord, b.const(0), _extent(kl, dim), message, span)


def issued(kl: KernelState, future: Symbol | None, stmt: ast.DmaStmt) -> None:
    """An asynchronous copy bound to ``future`` was issued: its flag is set."""
    if enabled(kl) and future is not None and stmt.is_async and kl.predicate() is None:
        kl.emit(ir.Let(stmt.span, _flag(kl, future).name, b.const(1)))


def waited(kl: KernelState, future: Symbol, span: Span) -> None:
    """``wait future``: it must be in flight (issued since its last wait); then it is not.
    (Futures no tracked copy was issued into, such as those of asynchronous MMAs, are
    not checked.)"""
    if not enabled(kl) or kl.predicate() is not None or future not in kl.in_flight:
        return
    flag = _flag(kl, future)
    kl.emit(ir.Assert(span, b.binary("==", flag, b.const(1), b.I1),
                      f"wait on future '{future.name}', which is not in flight (no "
                      "asynchronous copy into it since it was last waited)", located=True))
    kl.emit(ir.Let(span, flag.name, b.const(0)))


def swapped(kl: KernelState, futures: list[Symbol], span: Span) -> None:
    """``swap``/``rotate``: each future takes the next one's flag, the last the first's."""
    if (not enabled(kl) or kl.predicate() is not None
            or not any(sym in kl.in_flight for sym in futures)):
        return
    flags = [_flag(kl, sym) for sym in futures]
    first = kl.fresh("in_flight_swap")
    kl.emit(ir.Let(span, first, flags[0]))
    for flag, following in zip(flags, flags[1:]):
        kl.emit(ir.Let(span, flag.name, following))
    kl.emit(ir.Let(span, flags[-1].name, b.var(first)))


def _flag(kl: KernelState, future: Symbol) -> ir.Var:
    """The flag of ``future``: 1 while a copy into it is in flight; made 0 in the
    kernel's prologue, so that loops carry it."""
    name = kl.in_flight.get(future)
    if name is None:
        name = kl.in_flight[future] = kl.fresh(f"{future.name}_in_flight")
        kl.prologue.append(ir.Let(None, name, b.const(0)))
    return b.var(name)


def _assert_within(kl: KernelState, value: ir.Expr, low: ir.Expr, high: ir.Expr, message: str,
                   span: Span, lanes: ir.Expr | None = None) -> None:
    """Assert ``low <= value < high`` in the executing lanes (and those of ``lanes``)."""
    mask = kl.guarded(b.and_(padding_mask(b.merged(value, low, high)), lanes))
    for kept in kl.kept_lanes:
        mask = b.and_(mask, kept)
    if mask is not None and set(mask.axes) - set(value.axes):
        # the index over the lanes the mask tells apart (an element of `apply {r, c}` under
        # a condition on both), so that on the CPU its failing values line up with them
        value = ir.Where(b.merged(mask, value), value.dtype, mask, value, value)
    named = kl.let("dbg_index", value, span)
    cond = b.and_(b.binary(">=", named, low, b.I1), b.binary("<", named, high, b.I1))
    values = (named.name,) if isinstance(named, ir.Var) else ()
    kl.emit(ir.Assert(span, cond, message, mask, located=True, values=values))


def _written_indices(kl: KernelState, e: ast.ElemAccess) -> list[ast.Expr | None]:
    """The index expressions as written, one per computed index (None where an ituple
    spreads into several)."""
    written: list[ast.Expr | None] = []
    for expr in e.indices:
        info = kl.fn.exprs.get(id(expr))
        if info is not None and isinstance(info.type, TupleType):
            written.extend(None for _ in info.type.values)
        elif info is not None and isinstance(info.type, BoundedTupleType):
            written.extend(None for _ in info.type.bounds)
        else:
            written.append(expr)
    return written


def _proven(kl: KernelState, expr: ast.Expr, idx: ir.Expr, extent: Sym) -> bool:
    """Whether ``idx`` is in range by construction: a constant inside the extent, or a
    lane index as written (see ``_lane_index``): lanes of a tail block past the extent
    are masked by the lowering, as they are without ``debug``. Arithmetic on a lane
    index (``p # t + off``, ``i - 1``) keeps its bound in the checker's types but not its
    range, so it is checked."""
    if isinstance(idx, ir.Const):
        return extent.value is not None and 0 <= int(idx.value) < extent.value
    return _lane_index(kl, expr)


def _lane_index(kl: KernelState, expr: ast.Expr, seen: frozenset[Symbol] = frozenset()) -> bool:
    """Whether ``expr`` is a lane's own index: a parallel, foreach or ``with`` variable,
    a member of a bounded ituple (``k(-1)`` included), a composition ``a # b`` of such,
    or a local declared with one (``j = p # t;``). Its values lie in ``[0, bound)``;
    where the bound passes the extent (``cdiv`` blocks), the lanes past it are a tail."""
    if isinstance(expr, ast.Binary) and expr.op == "#":
        return _lane_index(kl, expr.lhs, seen) and _lane_index(kl, expr.rhs, seen)
    if isinstance(expr, ast.Select):
        expr = expr.base
    if not isinstance(expr, ast.Ident):
        return False
    sym = kl.fn.refs.get(id(expr))
    if sym is None or sym.kind not in (SymKind.BOUNDED, SymKind.BOUNDED_TUPLE):
        return False
    if sym.level is not None:
        return True
    value = _bounded_locals(kl).get(sym)  # a local: what it was declared with
    return value is not None and sym not in seen and _lane_index(kl, value, seen | {sym})


def _lanes_inside(kl: KernelState, expr: ast.Expr, extent: Sym) -> ir.Expr | None:
    """The lanes whose own indices in ``expr`` lie inside ``extent``: the others belong to
    a tail block, whose accesses the lowering masks (checking them would reject the
    usual ``parallel p by cdiv(N, 16)`` over a tail)."""
    mask: ir.Expr | None = None
    for part in _lane_indices(kl, expr, frozenset()):
        try:
            value = kl.value(part)
        except LoweringError:  # (a local's index out of its scope: that part is not known)
            continue
        if not isinstance(value, ir.Const):
            mask = b.and_(mask, b.binary("<", value, _extent(kl, extent), b.I1))
    return mask


def _lane_indices(kl: KernelState, expr: ast.Expr, seen: frozenset[Symbol]) -> list[ast.Expr]:
    """The maximal lane indices (``_lane_index``) inside ``expr`` and the bounded locals
    it uses, outside the element accesses it reads (``idx.at(p)``: those index other
    data and are checked there)."""
    if _lane_index(kl, expr):
        return [expr]
    if isinstance(expr, ast.ElemAccess):
        return []
    if isinstance(expr, ast.Ident):
        sym = kl.fn.refs.get(id(expr))
        if sym is None or sym in seen:
            return []
        value = _bounded_locals(kl).get(sym)
        if value is None:
            return []
        return _lane_indices(kl, value, seen | {sym})
    found: list[ast.Expr] = []
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        for child in value if isinstance(value, tuple) else (value,):
            if isinstance(child, ast.Expr):
                found.extend(_lane_indices(kl, child, seen))
    return found


def _bounded_locals(kl: KernelState) -> dict[Symbol, ast.Expr]:
    """The value each bounded local of the function (``j = p # t + 1;``) is declared with."""
    if kl.bounded_locals is None:
        found: dict[Symbol, ast.Expr] = {}
        for node in ast.walk(kl.fn.node):
            if not isinstance(node, ast.AssignStmt):
                continue
            declared = {sym.name: sym for sym in kl.fn.decls.get(id(node), ())
                        if sym.kind is SymKind.BOUNDED}
            for item in node.items:
                if isinstance(item.target, ast.Ident) and item.target.name in declared:
                    found[declared[item.target.name]] = item.value
        kl.bounded_locals = found
    return kl.bounded_locals


def check_element_origin(kl: KernelState, region: Region, index: list[ir.Expr],
                         e: ast.ElemAccess) -> None:
    """``x.at(i, ...)`` through a view whose origin comes from data (a scalar argument, a
    value loaded from memory: ``x.subspan(16).at(p + off)``, ``x.view(4).from(off)``):
    the element's coordinate in the tensor is asserted to lie inside it in each such
    dimension, as its index is inside the view (``check_element``). The lanes whose
    coordinate without the data-made part is already past the tensor are a tail block's,
    masked by the lowering as without ``debug``."""
    if not enabled(kl) or region.lows or len(index) != region.rank:
        return
    coords = list(region.origin)
    for d, idx in enumerate(index):
        coords[region.axis_of(d)] = b.add(coords[region.axis_of(d)], idx)
    access_text = printer.format_expr(e)
    for t, (origin, coord, dim) in enumerate(zip(region.origin, coords, region.tensor.dims)):
        if not region.limits[t] or not _from_data(kl, origin, set()) or _collapsed(coord):
            continue
        extent = _extent(kl, dim)
        position = _lane_position(kl, coord, frozenset())
        lanes = None if isinstance(position, ir.Const) else b.and_(
            b.binary(">=", position, b.const(0), b.I1), b.binary("<", position, extent, b.I1))
        message = (f"index out of range in {access_text}: the element's coordinate in "
                   f"dimension {t} of '{region.tensor.name}' not in [0, {dim})")
        _assert_within(kl, coord, b.const(0), extent, message, e.span, lanes)


def _lane_position(kl: KernelState, e: ir.Expr, seen: frozenset[str]) -> ir.Expr:
    """``e`` with the parts made from data (scalar arguments, loaded values) taken as 0:
    where the lane's own indices put it."""
    if not _from_data(kl, e, set()):
        return e
    if isinstance(e, ir.Var) and e.name in kl.definitions and e.name not in seen:
        return _lane_position(kl, kl.definitions[e.name], seen | {e.name})
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*"):
        return b.binary(e.op, _lane_position(kl, e.lhs, seen), _lane_position(kl, e.rhs, seen),
                        e.dtype)
    if isinstance(e, ir.Cast):
        return b.cast(_lane_position(kl, e.operand, seen), e.dtype)
    return b.const(0)


def _from_data(kl: KernelState, e: ir.Expr, seen: set[str]) -> bool:
    """Whether ``e`` depends on a value loaded from memory or on a scalar argument."""
    if isinstance(e, (ir.Load, ir.DescLoad)):
        return True
    if isinstance(e, ir.Var):
        if e.name in seen:
            return False
        seen.add(e.name)
        if e.name in kl.definitions:
            return _from_data(kl, kl.definitions[e.name], seen)
        param = kl.params.get(e.name)
        return param is not None and param.kind is ir.ParamKind.INT and isinstance(
            param.source, str)
    return any(_from_data(kl, child, seen) for child in b.children(e))


def _extent(kl: KernelState, extent: Sym) -> ir.Expr:
    return b.const(extent.value) if extent.value is not None else kl.sym(extent)


def _collapsed(e: ir.Expr) -> bool:
    if isinstance(e, ir.Collapsed):
        return True
    return any(_collapsed(child) for child in b.children(e))
