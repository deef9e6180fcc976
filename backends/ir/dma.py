"""Lowering of ``dma.copy`` / ``tma.copy`` / ``tma.load`` (spec 5.6, 5.7).

A copy into ``shared``/``local`` memory moves nothing at the copy: the buffer becomes a
view of the source (reads through it are forwarded to the source). A copy into global
memory stores a tile: a register-resident buffer directly, a forwarded view after one
whole-tile load.
"""

from __future__ import annotations

from dataclasses import replace

from ...frontend import syntax as ast
from ...frontend.sema.model import Symbol, SymKind
from ...frontend.sema.symbolic import Sym
from . import build as b
from . import checks, scratch
from . import nodes as ir
from .errors import LoweringError, unsupported
from .state import BufferSlot, KernelState
from .tiles import load_tile, store_tile
from .values import Buffer, Region, Staging, Tile


def lower_dma(kl: KernelState, stmt: ast.DmaStmt) -> None:
    # `.multicast` shares one block's copy with its cluster; each program making the same
    # copy itself gives the same data (clusters are ignored, spec 8)
    if any(attr.name == "sp" for attr in stmt.attrs):
        raise unsupported(stmt.span, "sparse copies")
    # `after g` orders this copy after copy g (spec 5.6): copies run in program order
    # here, and g comes first
    source = _transformed(kl, kl.resolve_view_read(stmt.src), stmt)
    dst = stmt.dst
    future = _future_symbol(kl, stmt)
    checks.issued(kl, future, stmt)
    if isinstance(dst, ast.StorageDest):
        # (a fresh global buffer belongs to the program that copies into it, as a shared
        # one does: both hold what the source held)
        content = _made_here(kl, staged(source, stmt))
        shape = source.extents if isinstance(source, Region) else tuple(
            Sym(d.extent) for d in source.dims)
        elem = source.tensor.elem if isinstance(source, Region) else source.elem
        if future is not None:
            kl.env[future] = scratch.settle(
                kl, Buffer(future, shape, elem, content, scope=kl.scopes[-1]), stmt.span)
        return
    if isinstance(dst, ast.SelectExpr):
        _copy_into_select(kl, stmt, dst, source, future)
        return
    if not isinstance(dst, ast.View):
        raise unsupported(dst.span, "this copy destination")
    target = kl.resolve_view(dst, write=True)
    if isinstance(target, BufferSlot) and target.buffer.owned:
        _copy_into_scratch(kl, target, source, stmt)
        if future is not None:
            kl.env[future] = target.buffer
        return
    if isinstance(target, BufferSlot):
        target.buffer.content = _made_here(kl, _fill_buffer(target, source, stmt))
        scratch.settle(kl, target.buffer, stmt.span)
        if future is not None and target.buffer.owned:
            kl.env[future] = target.buffer  # its elements are written: one storage for both
        elif future is not None:
            kl.env[future] = scratch.settle(
                kl, Buffer(future, target.buffer.shape, target.buffer.elem,
                           target.buffer.content, scope=kl.scopes[-1]), stmt.span)
        return
    if isinstance(target, Tile):
        raise unsupported(dst.span, "copying into part of a register-resident buffer")
    tile = source if isinstance(source, Tile) else _materialize(kl, source, stmt)
    if tile.split:
        target, tile = _whole_tile_store(target, tile, stmt), replace(tile, split=())
    store_tile(kl, target, tile, stmt.span)
    if future is not None:
        kl.env[future] = Buffer(future, target.extents, target.tensor.elem, target)


def staged(source: Region | Tile, stmt: ast.DmaStmt) -> Region | Tile:
    """What a copy ``=> shared`` / ``=> local`` holds: the source, whose masked part is
    data (zeros) when TMA or ``.zfill`` fills it."""
    hint = next((a.name for a in stmt.attrs if a.name in ("evict_first", "evict_last")), None)
    if isinstance(source, Region) and hint:
        source = source._replace(eviction=hint)
    if isinstance(source, Region) and _zero_filled(stmt):
        return source.clipped(source.extents, True)
    return source


def _made_here(kl: KernelState, content: Region | Tile) -> Region | Tile:
    """A copy's content, marked with where the copy runs (``tiles.staging_scope``)."""
    if isinstance(content, Region):
        return replace(content, staged=Staging(kl.scopes[-1], len(kl.scopes[-1]), kl.loop_depth))
    return content


def _whole_tile_store(target: Region, tile: Tile, stmt: ast.DmaStmt) -> Region:
    """Each instance copies its part of a tile the instances share (``Tile.split``) to a
    destination that places the parts side by side: together they store the whole tile
    once, from the destination's common origin (per-warpgroup TMA stores of one result)."""
    origin = list(target.origin)
    for d, (axes, extent) in enumerate(tile.split):
        t = target.axis_of(d)
        lin = b.linearize(origin[t])
        expected = extent
        coefs = dict(lin.axes) if lin is not None and not lin.collapsed else None
        for axis in reversed(axes):
            if coefs is None or coefs.pop(axis, None) != expected:
                coefs = None
                break
            expected *= axis.extent
        if lin is None or coefs is None or coefs:
            raise unsupported(stmt.dst.span, "a per-instance copy whose destination does not "
                                             "place the instances' parts as their source does")
        origin[t] = lin.rest
    extents = tuple(Sym(dim.extent) for dim in tile.dims)
    return replace(target, origin=tuple(origin), extents=extents)


def _transformed(kl: KernelState, source: Region | Tile, stmt: ast.DmaStmt) -> Region | Tile:
    """``dma.transp`` and ``dma.pad`` change how the source is viewed, nothing else."""
    if stmt.op not in ("transp", "pad"):
        return source
    if isinstance(source, Tile):
        raise unsupported(stmt.span, f"'{stmt.engine}.{stmt.op}' of a register-resident buffer",
                          "transpose or pad while copying from global memory")
    if stmt.op == "transp":
        perm = [_constant(kl, p) for p in stmt.perm or ()]
        return source.transposed(perm)
    pad = stmt.pad
    assert pad is not None
    if any(_constant(kl, m) for m in pad.mid):
        raise LoweringError("CQ0702", stmt.span, construct="interior padding (dma.pad mid)",
                            reason="only low and high padding of each dimension is supported")
    value = kl.value(pad.value)
    if not isinstance(value, ir.Const):
        raise unsupported(pad.value.span, "a padding value that is not a constant")
    low = [_constant(kl, e) for e in pad.low]
    high = [_constant(kl, e) for e in pad.high]
    return source.padded(low, high, value.value)


def _constant(kl: KernelState, expr: ast.Expr) -> int:
    info = kl.fn.exprs.get(id(expr))
    if info is None or info.static is None or info.static.value is None:
        raise unsupported(expr.span, "a configuration value that is not a constant")
    return info.static.value


def _copy_into_select(kl: KernelState, stmt: ast.DmaStmt, dst: ast.SelectExpr,
                      source: Region | Tile, future: Symbol | None) -> None:
    """``f = dma.copy src => select(k, bufA, bufB)``: the copy lands in one of several
    same-typed buffers. Reads go through ``f``, which forwards to the source. With a
    constant ``k`` the chosen buffer holds the copy; otherwise reading the buffers by name
    afterwards would depend on ``k`` at run time, so they are left empty."""
    options = [_option_slot(kl, option) for option in dst.options]
    slots = [slot for slot in options if isinstance(slot, BufferSlot) and not slot.buffer.owned]
    if len(slots) != len(options):
        raise unsupported(dst.span, "a select of destinations that are not shared or local "
                                    "buffers")
    index = kl.fn.exprs[id(dst.index)].static
    chosen = index.value if index is not None else None
    slot = slots[chosen or 0]
    content = _fill_buffer(slot, source, stmt)
    for other in slots:
        other.buffer.content = None
    if chosen is not None:
        slot.buffer.content = content
        scratch.settle(kl, slot.buffer, stmt.span)
    if future is not None:
        kl.env[future] = Buffer(future, slot.buffer.shape, slot.buffer.elem, content)


def _option_slot(kl: KernelState, option: ast.Expr) -> BufferSlot | Region | Tile:
    if isinstance(option, ast.Ident):
        sym = kl.fn.refs.get(id(option))
        buffer = kl.env.get(sym) if sym is not None else None
        if isinstance(buffer, Buffer):
            return BufferSlot(buffer, tuple(b.const(0) for _ in buffer.shape), buffer.shape)
        raise unsupported(option.span, f"'{option.name}' as a copy destination")
    return kl.resolve_view(option, write=True)


def _future_symbol(kl: KernelState, stmt: ast.DmaStmt) -> Symbol | None:
    for sym in kl.fn.decls.get(id(stmt), []):
        if sym.kind is SymKind.FUTURE:
            return sym
    return None


def _fill_buffer(slot: BufferSlot, source: Region | Tile, stmt: ast.DmaStmt) -> Region | Tile:
    """A copy that fills a whole shared/local buffer: the buffer now stands for the source.
    A source smaller than the buffer leaves the rest invalid (masked, read as zero)."""
    whole = all(b.is_const(o, 0) for o in slot.offsets) and all(
        e.provably_eq(s) for e, s in zip(slot.extents, slot.buffer.shape))
    if not whole:
        raise unsupported(stmt.dst.span, "copying into part of a shared or local buffer",
                          "copy whole buffers; write partial tiles straight to global memory")
    if isinstance(source, Tile):
        if source.split:
            raise unsupported(stmt.src.span, "copying an instance's part of a register-"
                                             "resident buffer into another buffer")
        if slot.ends:
            raise _runtime_part_of_tile(stmt)
        return source
    # A destination of run-time extent (`sa.subspan(rows, K)`) receives only that part of
    # the source: the rest holds no data, or zeros.
    return source.limited(slot.ends).clipped(slot.buffer.shape, _zero_filled(stmt))


def _runtime_part_of_tile(stmt: ast.DmaStmt) -> LoweringError:
    return unsupported(stmt.dst.span, "copying a register-resident buffer into a part of a "
                                      "buffer whose extent is known only at run time",
                       "copy from global memory, or copy the whole buffer")


def _zero_filled(stmt: ast.DmaStmt) -> bool:
    """Whether a copy writes zeros where its source has no data: TMA zero-fills
    out-of-bounds reads in hardware; dma does it when asked (.zfill)."""
    return stmt.engine == "tma" or any(a.name == "zfill" for a in stmt.attrs)


def _copy_into_scratch(kl: KernelState, slot: BufferSlot, source: Region | Tile,
                       stmt: ast.DmaStmt) -> None:
    """A copy into a buffer that lives in scratch memory (scratch.py) moves the data:
    the buffer keeps its own storage, which later element writes update."""
    ends = slot.ends
    if ends:
        # a part of run-time extent: the source's rows past it are not copied (or arrive
        # as zeros with .zfill)
        if isinstance(source, Tile):
            raise _runtime_part_of_tile(stmt)
        rel = [(d, b.add(end, b.mul(slot.offsets[d], b.const(-1)))) for d, end in ends]
        source = source.limited(rel).clipped(source.extents, _zero_filled(stmt))
        if source.filled:
            ends = ()
    tile = source if isinstance(source, Tile) else _materialize(kl, source, stmt)
    scratch.store_into(kl, slot.buffer, slot.offsets, slot.extents, tile, stmt.span, ends)


def _materialize(kl: KernelState, region: Region, stmt: ast.DmaStmt) -> Tile:
    dims = tuple(kl.tile_axis(extent, f"{region.tensor.name}{d}", stmt.span)
                 for d, extent in enumerate(region.extents))
    return load_tile(kl, region, dims, stmt.span, f"{region.tensor.name}_tile")


def chosen_data(kl: KernelState, sym: Symbol, expr: ast.SelectExpr) -> Buffer:
    """``f = select(k, a, b, ...)`` of futures (or buffers): ``f`` holds the chosen
    copy's data. A constant ``k`` names one copy. With a runtime ``k``, views of one
    tensor that differ only in where they start become one view starting where the
    chosen one does; other choices are loaded into registers along the same axes and
    picked element by element."""
    contents = [_choice_content(kl, option) for option in expr.options]
    first = kl.env[kl.fn.refs[id(expr.options[0])]]
    assert isinstance(first, Buffer)  # (_choice_content took every option for a buffer)
    index = kl.fn.exprs[id(expr.index)].static
    if index is not None and index.value is not None:
        return Buffer(sym, first.shape, first.elem, contents[index.value])
    moved = _moved_view(kl, contents, expr)
    if moved is not None:
        return Buffer(sym, first.shape, first.elem, moved)
    dims = tuple(kl.tile_axis(extent, f"{sym.name}{d}", expr.span)
                 for d, extent in enumerate(first.shape))
    tiles = [_as_tile(kl, content, dims, expr, sym.name) for content in contents]
    value = kl.choice(kl.value(expr.index), [t.expr for t in tiles])
    valid = None
    if any(t.valid is not None for t in tiles):
        valid = kl.choice(kl.value(expr.index), [b.const(True, b.I1) if t.valid is None
                                                 else t.valid for t in tiles])
    return Buffer(sym, first.shape, first.elem, Tile(value, dims, first.elem, valid))


def _moved_view(kl: KernelState, contents: list[Region | Tile],
                expr: ast.SelectExpr) -> Region | None:
    """One view whose origin is the chosen view's, when every choice is the same view
    of the same tensor but for its origin (its bounds included); else None."""
    regions = [c for c in contents if isinstance(c, Region)]
    if len(regions) != len(contents):
        return None
    base = regions[0]
    # (the key holds the bounds too: bounds that follow the origin would need choosing)
    if any(r._replace(origin=base.origin).key() != base.key() for r in regions):
        return None
    index = kl.value(expr.index)
    origin = tuple(kl.choice(index, [r.origin[t] for r in regions])
                   for t in range(len(base.origin)))
    return base._replace(origin=origin)


def _choice_content(kl: KernelState, option: ast.Expr) -> Region | Tile:
    sym = kl.fn.refs.get(id(option)) if isinstance(option, ast.Ident) else None
    future = kl.env.get(sym) if sym is not None else None
    if not isinstance(future, Buffer) or future.content is None:
        raise unsupported(option.span, "this choice of 'select'",
                          "choose between futures, or buffers that copies filled before")
    return future.content


def _as_tile(kl: KernelState, content: Region | Tile, dims: tuple[ir.Axis, ...],
             expr: ast.SelectExpr, base: str) -> Tile:
    if isinstance(content, Region):
        return load_tile(kl, content, dims, expr.span, base)
    if content.dims != dims:
        raise unsupported(expr.span, "a runtime 'select' of register-resident buffers",
                          "select between copies of global memory, or use a constant index")
    return content
