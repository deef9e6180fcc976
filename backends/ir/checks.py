"""Run-time checks of the ``debug`` compile option: device assertions on what the checker
cannot prove at compile time.

- every element index ``x.at(i, j)`` computed from data (a gather, a schedule table) lies
  in ``[0, extent)`` of its view's dimension;
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

from ...frontend import printer
from ...frontend import syntax as ast
from ...frontend.sema.model import (BoundedTupleType, BoundedType, DataType, Symbol,
                                    TupleType)
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .state import KernelState
from .values import Region, padding_mask


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
        _assert_within(kl, idx, b.const(0), _extent(kl, extent), what, e.span)


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
                   span: Span) -> None:
    named = kl.let("dbg_index", value, span)
    cond = b.and_(b.binary(">=", named, low, b.I1), b.binary("<", named, high, b.I1))
    values = (named.name,) if isinstance(named, ir.Var) else ()
    kl.emit(ir.Assert(span, cond, message, kl.guarded(padding_mask(cond.axes)),
                      located=True, values=values))


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
    bounded integer (a parallel index and arithmetic on it): lanes of a tail block past
    the extent are masked by the lowering, as they are without ``debug``."""
    if isinstance(idx, ir.Const):
        return extent.value is not None and 0 <= int(idx.value) < extent.value
    info = kl.fn.exprs.get(id(expr))
    return info is not None and isinstance(info.type, BoundedType)


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
