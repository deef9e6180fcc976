"""Fragment programming (spec 5.8 [ext]): ``apply`` blocks, ``copy`` and row reductions.

An accumulator is a register tile, and so is a ``frag`` buffer. ``apply {i, j} in x.span``
runs its body for every element of ``x`` at once: ``i`` and ``j`` become the tile's own
axes (broadcast index tensors), so the body is element-wise tile arithmetic. A write
``y.at(i, j) = v`` replaces the whole tile ``y`` (lanes masked off by an ``if`` keep their
value); a read ``y.at(i)`` of a vector indexed by a row index lays the vector along the
rows. ``reduce_max/reduce_sum(dst, src, dim)`` are ``tl.max/tl.sum`` along ``dim``.
"""

from __future__ import annotations

from ...frontend import syntax as ast
from ...frontend.sema.model import Symbol
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .errors import unsupported
from .instances import refuse_mixing
from .mma import start_layout
from .state import KernelState, broadcast
from .values import Acc, Bounded, Buffer, Tile, padding_mask


def lower_apply(kl: KernelState, stmt: ast.Apply) -> None:
    sym: Symbol = kl.fn.refs[id(stmt)]
    loop = kl.fn.loops[id(stmt)][0]
    dims = span_axes(kl, sym, stmt.span)
    for index, axis, bound in zip(loop.vars, dims, loop.bounds):
        position: ir.Expr = b.axis_index(axis)
        if kl.fused is not None and axis is kl.fused.axis:
            position = kl.fused.row()  # (an index over one instance's rows)
        kl.env[index] = Bounded(position, bound)
    kl.apply_depth += 1
    try:
        kl.block(stmt.body)
    finally:
        kl.apply_depth -= 1


def span_axes(kl: KernelState, sym: Symbol, span: Span) -> tuple[ir.Axis, ...]:
    """The axes of the register tile ``sym`` holds (an accumulator gets its layout here
    when no MMA has run yet: the one it will have, one instance's tile)."""
    value = kl.env.get(sym)
    if isinstance(value, Acc):
        return _acc_axes(kl, value, span)
    if isinstance(value, Buffer) and sym.storage == "local":
        return _buffer_tile(kl, value, span).dims
    # other spanned data: the indices range over its shape (a vectorised loop)
    return tuple(kl.tile_axis(d, sym.name, span) for d in sym.shape or ())


def _acc_axes(kl: KernelState, acc: Acc, span: Span) -> tuple[ir.Axis, ir.Axis]:
    layout = acc.layout or start_layout(kl, acc, span)
    if layout.m_parts or layout.n_parts:
        raise unsupported(span, "element-wise code over an accumulator shared by several "
                                "parallel instances",
                          "give each instance its own MMA (one group per accumulator)")
    return layout.m, layout.n


def _buffer_tile(kl: KernelState, buffer: Buffer, span: Span) -> Tile:
    """A ``frag`` buffer's register tile; one that holds nothing yet starts as zeros."""
    content = buffer.content
    if content is None:
        dims = kl.register_axes(buffer.symbol, buffer.shape, span)
        dtype = b.dtype_of(buffer.elem)
        content = Tile(kl.let(buffer.symbol.name, ir.Full(ir.sort_axes(dims), dtype, 0)),
                       dims, buffer.elem)
        buffer.content = content
    if not isinstance(content, Tile):
        raise unsupported(span, f"element-wise code over '{buffer.symbol.name}', which is "
                                "not held in registers",
                          "declare it with 'frag', or copy its data into a 'frag' buffer")
    return content


def register_tile(kl: KernelState, sym: Symbol, span: Span) -> Tile:
    """The current value of an accumulator or a ``frag`` buffer as a tile."""
    value = kl.env.get(sym)
    if isinstance(value, Acc):
        dims = _acc_axes(kl, value, span)
        return Tile(ir.Var(dims, b.dtype_of(value.elem), value.name), dims, value.elem)
    if isinstance(value, Buffer):
        return _buffer_tile(kl, value, span)
    raise unsupported(span, f"'{sym.name}' as a register tile")


def relabelled(value: ir.Expr, mapping: dict[ir.Axis, ir.Axis]) -> ir.Expr:
    """``value`` with axes renamed by ``mapping`` (axes of equal size)."""
    if not any(a in mapping for a in value.axes):
        return value
    return ir.Relabel(tuple(mapping.get(a, a) for a in value.axes), value.dtype, value)


def _matching(kl: KernelState, have: tuple[ir.Axis, ...], want: list[ir.Expr],
              span: Span) -> dict:
    """The renaming from a tile's axes to the apply axes its element indices name (the
    rows of side-by-side instances are named by their index within the instance)."""
    mapping: dict[ir.Axis, ir.Axis] = {}
    for dim, index in zip(have, want):
        if kl.fused is not None and dim is kl.fused.axis and kl.fused.is_row(index):
            mapping[dim] = dim
            continue
        if not isinstance(index, ir.AxisIndex) or index.axis.size != dim.size or \
                index.axis.extent != dim.extent:
            raise unsupported(span, "element access of a register tile at positions other "
                                    "than the indices of an enclosing 'apply' of its shape")
        mapping[dim] = index.axis
    return mapping


def read_element(kl: KernelState, tile: Tile, index: list[ir.Expr], span: Span) -> ir.Expr:
    """``x.at(i, j)`` inside ``apply``: the tile laid along the apply axes."""
    return relabelled(tile.expr, _matching(kl, tile.dims, index, span))


def store_element(kl: KernelState, sym: Symbol, target: ast.ElemAccess,
                  item: ast.Assign, span: Span) -> None:
    """``x.at(i, j) op= v`` inside ``apply``: a new value for the whole tile."""
    tile = register_tile(kl, sym, target.span)
    index = kl.element_index(target)
    mapping = _matching(kl, tile.dims, index, target.span)
    old = relabelled(_full_over(tile.expr, tile.dims), mapping)
    rhs = kl.value(item.value)
    dtype = b.dtype_of(tile.elem)
    if item.op != "=":
        wide = kl.promoted(tile.elem, item.value)
        rhs = kl.arith(item.op[:-1], old, rhs, wide)
    new = broadcast(b.cast(rhs, dtype), old.axes)
    if set(new.axes) - set(old.axes):
        raise unsupported(item.value.span, "a value that depends on an index its element "
                                           "does not (or on the thread) written into a "
                                           "register tile",
                          "reduce it first, e.g. with reduce_max or reduce_sum")
    predicate = kl.predicate()
    if predicate is not None:
        new = ir.Where(b.merged(predicate, new, old), dtype, predicate, new, old)
    back = {v: k for k, v in mapping.items()}
    _assign(kl, sym, relabelled(new, back), tile, span)


def _full_over(value: ir.Expr, dims: tuple[ir.Axis, ...]) -> ir.Expr:
    return broadcast(value, ir.sort_axes(dims))


def _assign(kl: KernelState, sym: Symbol, value: ir.Expr, tile: Tile, span: Span) -> None:
    """Give the register tile of ``sym`` a new value, under the same variable when it has
    one (so that a loop carries it to its next iteration)."""
    current = kl.env.get(sym)
    value = _full_over(b.cast(value, b.dtype_of(tile.elem)), tile.dims)
    if isinstance(current, Acc):
        kl.emit(ir.Let(span, current.name, value))
        return
    assert isinstance(current, Buffer)
    old = current.content.expr if isinstance(current.content, Tile) else None
    if isinstance(old, ir.Var) and set(old.axes) == set(value.axes):
        kl.emit(ir.Let(span, old.name, value))
        return
    name = kl.fresh(sym.name)
    kl.emit(ir.Let(span, name, value))
    current.content = Tile(ir.Var(value.axes, value.dtype, name), tile.dims, tile.elem)


# ----------------------------------------------------------------------- copy, reductions

_REDUCTIONS = {"reduce_max": "max", "reduce_sum": "sum"}
FRAGMENT_CALLS = frozenset({"copy", *_REDUCTIONS})


def lower_call(kl: KernelState, call: ast.CallExpr, span: Span) -> None:
    """``copy(dst, src)``, ``reduce_max(dst, src, dim)``, ``reduce_sum(dst, src, dim)``."""
    dst_sym, src_sym = (_symbol(kl, a) for a in call.args[:2])
    src = register_tile(kl, src_sym, call.args[1].span)
    tile = register_tile(kl, dst_sym, call.args[0].span)
    if call.name == "copy":
        value = src.expr
        kept = src.dims
    else:
        dim = kl.fn.exprs[id(call.args[2])].static
        assert dim is not None and dim.value is not None  # (checked)
        axis = src.dims[dim.value]
        refuse_mixing(kl, (axis,), call.span, f"'{call.name}'")
        value = _reduced(_full_over(src.expr, src.dims), axis, _REDUCTIONS[call.name])
        kept = tuple(a for a in src.dims if a is not axis)
    mapping = dict(zip(kept, tile.dims))
    _assign(kl, dst_sym, relabelled(value, mapping), tile, span)


def _symbol(kl: KernelState, arg: ast.Expr) -> Symbol:
    sym = kl.fn.refs.get(id(arg)) if isinstance(arg, ast.Ident) else None
    if sym is None:
        raise unsupported(arg.span, "this fragment argument", "name an accumulator or a "
                                                             "'frag' buffer")
    return sym


def _reduced(value: ir.Expr, axis: ir.Axis, op: str) -> ir.Expr:
    """``tl.max``/``tl.sum`` along ``axis``; padding lanes hold the reduction's identity."""
    padding = padding_mask((axis,))
    if padding is not None:
        identity = float("-inf") if op == "max" else 0
        value = ir.Where(value.axes, value.dtype, padding, value,
                         b.cast(b.const(identity, ir.DType.F32), value.dtype))
    return ir.Reduce(tuple(a for a in value.axes if a is not axis), value.dtype, op, value, axis)
