"""Lowering of ``dma.copy`` / ``tma.copy`` / ``tma.load`` (spec 5.6, 5.7).

A copy into ``shared``/``local`` memory moves nothing at the copy: the buffer becomes a
view of the source (reads through it are forwarded to the source). A copy into global
memory stores a tile: a register-resident buffer directly, a forwarded view after one
whole-tile load.
"""

from __future__ import annotations

from ...frontend import syntax as ast
from ...frontend.sema.model import SymKind
from ...frontend.sema.symbolic import Sym
from . import build as b
from .errors import unsupported
from .lower import BufferSlot, KernelLowering
from .tiles import load_tile, store_tile
from .values import Buffer, Region, Tile


def lower_dma(kl: KernelLowering, stmt: ast.DmaStmt) -> None:
    if stmt.op in ("pad", "transp"):
        raise unsupported(stmt.span, f"'{stmt.engine}.{stmt.op}'")
    if any(attr.name in ("sp", "multicast") for attr in stmt.attrs):
        raise unsupported(stmt.span, "sparse or multicast copies")
    if stmt.after:
        raise unsupported(stmt.span, "'after' ordering of copies")
    source = kl.resolve_view_read(stmt.src)
    dst = stmt.dst
    future = _future_symbol(kl, stmt)
    if isinstance(dst, ast.StorageDest):
        if dst.storage == "global":
            raise unsupported(dst.span, "copies into a fresh global buffer")
        content = source
        if isinstance(source, Region) and (stmt.engine == "tma" or any(
                a.name == "zfill" for a in stmt.attrs)):
            content = source.clipped(source.extents, True)
        shape = source.extents if isinstance(source, Region) else tuple(
            Sym(d.extent) for d in source.dims)
        elem = source.tensor.elem if isinstance(source, Region) else source.elem
        if future is not None:
            kl.env[future] = Buffer(future, shape, elem, content)
        return
    if not isinstance(dst, ast.View):
        raise unsupported(dst.span, "this copy destination")
    target = kl.resolve_view(dst, write=True)
    if isinstance(target, BufferSlot):
        content = _fill_buffer(target, source, stmt)
        target.buffer.content = content
        if future is not None:
            kl.env[future] = Buffer(future, target.buffer.shape, target.buffer.elem, content)
        return
    if isinstance(target, Tile):
        raise unsupported(dst.span, "copying into part of a register-resident buffer")
    tile = source if isinstance(source, Tile) else _materialize(kl, source, stmt)
    store_tile(kl, target, tile, stmt.span)
    if future is not None:
        kl.env[future] = Buffer(future, target.extents, target.tensor.elem, target)


def _future_symbol(kl: KernelLowering, stmt: ast.DmaStmt):
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
        return source
    # TMA zero-fills out-of-bounds reads in hardware; dma does it when asked (.zfill)
    zero_fill = stmt.engine == "tma" or any(a.name == "zfill" for a in stmt.attrs)
    return source.clipped(slot.buffer.shape, zero_fill)


def _materialize(kl: KernelLowering, region: Region, stmt: ast.DmaStmt) -> Tile:
    dims = tuple(kl.tile_axis(extent, f"{region.tensor.name}{d}", stmt.span)
                 for d, extent in enumerate(region.extents))
    return load_tile(kl, region, dims, stmt.span, f"{region.tensor.name}_tile")
