"""Whole-tile loads and stores of regions: pointer tiles with masks, and tensor
descriptors (TMA on Hopper) when the host finds the tensor aligned at launch time."""

from __future__ import annotations

from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import checks
from . import nodes as ir
from .state import KernelState
from .split_tiles import piece_sizes
from .values import Region, TensorRef, Tile, access, padding_mask

MAX_BOX = 256  # the largest box dimension a tensor descriptor accepts


def load_tile(kl: KernelState, region: Region, dims: tuple[ir.Axis, ...], span: Span | None,
              base: str) -> Tile:
    """Load ``region`` as a register tile whose dimension d lies along ``dims[d]``."""
    kl.use_tensor(region.tensor)
    checks.check_origin(kl, region, span, "a tile read")
    if kl.loop_depth:
        kl.loop_loaded.add(region.tensor.name)
    pointer, mask = access(region, [b.axis_index(d) for d in dims])
    full_mask = b.and_(mask, padding_mask(dims))
    dtype = region.tensor.dtype
    # the tile's own axes, plus any vector axes its origin depends on (per-instance tiles)
    axes = b.merged(pointer, *([full_mask] if full_mask is not None else []),
                    *(b.axis_index(d) for d in dims))
    pointer_load = ir.Load(axes, dtype, pointer, full_mask, region.fill, region.eviction)
    name = kl.fresh(base)
    desc = _descriptor(kl, region, dims)
    if desc is None:
        kl.emit(ir.Let(span, name, pointer_load))
    else:
        flag, desc_name, squeezed, offsets = desc
        described = ir.DescLoad(axes, dtype, desc_name, offsets, tuple(dims), squeezed)
        kl.emit(ir.Branch(span, flag, [ir.Let(None, name, described)],
                          [ir.Let(None, name, pointer_load)]))
    valid = None if region.filled else mask
    return Tile(ir.Var(axes, dtype, name), tuple(dims), region.tensor.elem, valid)


def load_operand(kl: KernelState, region: Region, dims: tuple[ir.Axis, ...],
                 span: Span | None, base: str) -> Tile:
    """An MMA operand tile of ``region``: the tile an earlier operand load of the same
    region and shape left in registers when nothing since could change it (the same
    statement list, and since then only new names defined: no store, no barrier or wait,
    no control flow, no new value for a name the load used), relabelled to ``dims``; else
    a new load. Two products of one K step that share an operand (a gated MLP's gate and
    up projections read the same x tile) then load it once."""
    key = (region.key(), tuple((d.size, d.extent) for d in dims))
    scope = kl.scopes[-1]
    earlier = kl.operand_loads.get(key)
    if earlier is not None:
        tile, where, start, loading = earlier
        end = start + len(loading)
        unmoved = len(scope) >= end and all(a is b for a, b in zip(scope[start:end], loading))
        if where is scope and unmoved and tile.valid is None and \
                _undisturbed(loading, scope[end:]):
            mapping = dict(zip(tile.dims, dims))
            expr = ir.Relabel(tuple(mapping.get(a, a) for a in tile.expr.axes), tile.expr.dtype,
                              tile.expr)
            return Tile(expr, dims, tile.elem, None)
    start = len(scope)
    tile = load_tile(kl, region, dims, span, base)
    widen_bf16_on_cpu(kl, tile.expr)
    kl.operand_loads[key] = (tile, scope, start, tuple(scope[start:]))
    return tile


def _undisturbed(loading: tuple[ir.Stmt, ...], since: list[ir.Stmt]) -> bool:
    """Whether the statements ``since`` a load (``loading``) leave its value as it is:
    only definitions of names the load does not read, and comments."""
    read = {n.name for n in ir.nodes_of(loading) if isinstance(n, ir.Var)}
    return _defines_only(since, read)


def _defines_only(stmts: list[ir.Stmt], read: set[str]) -> bool:
    for stmt in stmts:
        if isinstance(stmt, ir.Comment):
            continue
        if isinstance(stmt, ir.Branch):  # (a constexpr flag: loads by descriptor or pointer)
            if not (_defines_only(stmt.then, read) and _defines_only(stmt.other, read)):
                return False
            continue
        if not isinstance(stmt, ir.Let) or stmt.name in read:
            return False
    return True


def widen_bf16_on_cpu(kl: KernelState, operand: ir.Expr) -> None:
    """Triton 3.6's interpreter multiplies bf16 tiles as raw integers; on the CPU path the
    operands of a dot are widened to f32 first (exact: every bf16 value is an f32 value)."""
    if operand.dtype is ir.DType.BF16 and isinstance(operand, ir.Var):
        widened = ir.Cast(operand.axes, ir.DType.F32, operand)
        kl.emit(ir.Branch(None, kl.cpu_flag(), [ir.Let(None, operand.name, widened)], []))


def staging_scope(kl: KernelState, region: Region) -> list[ir.Stmt] | None:
    """Where a tile of a staged ``region`` is best loaded: in the statement list where its
    copy ran, when that list encloses a loop around the current statement (arch 3.3: a
    buffer staged once before a loop is loaded once there and kept as a value, not loaded
    again on every trip), the view's coordinates are known there, and nothing there has
    stored into its tensor since the copy (then that load reads what the copy read, as the
    language says a copy does). None: here."""
    staged = region.staged
    if staged is None or kl.loop_depth <= staged.loop_depth:
        return None
    depth = next((d for d, scope in enumerate(kl.scopes) if scope is staged.scope), None)
    if depth is None or depth == len(kl.scopes) - 1:
        return None
    stores = {region.tensor.pointer} | {desc for (tensor, *_), desc in kl.descs.items()
                                          if tensor == region.tensor.name}
    if stores & ir.stored_to(staged.scope[staged.start:]):
        return None
    exprs = [*region.origin, *(x for lim in region.limits for x in lim),
             *(x for low in region.lows for x in low)]
    return staged.scope if all(kl.readable_at(depth, e) for e in exprs) else None


def store_tile(kl: KernelState, region: Region, tile: Tile, span: Span | None) -> None:
    """Store ``tile`` into ``region`` (converted to the region's element type)."""
    kl.use_tensor(region.tensor)
    checks.check_origin(kl, region, span, "a tile write")
    kl.fl.written.add(region.tensor.name)
    pointer, mask = access(region, [b.axis_index(d) for d in tile.dims])
    for d, (extent, axis) in enumerate(zip(region.extents, tile.dims)):
        if extent.value is not None and extent.value < axis.extent:
            index = b.axis_index(axis)
            mask = b.and_(mask, b.binary("<", index, b.const(extent.value)))
        del d
    mask = kl.guarded(b.and_(b.and_(mask, tile.valid), padding_mask(tile.dims)))
    value = b.cast(tile.expr, region.tensor.dtype)
    pointer_store = ir.Store(span, pointer, value, mask)
    if kl.loop_depth and region.tensor.name in kl.loop_loaded:
        # the loop read this tensor (and reads it again next trip, maybe through other
        # threads): plain stores between barriers, in order with those loads
        kl.emit(ir.Barrier(span))
        kl.emit(pointer_store)
        kl.emit(ir.Barrier(span))
        return
    desc = _descriptor(kl, region, tile.dims) if tile.valid is None and not kl.predicates else None
    if desc is None:
        kl.emit(pointer_store)
        return
    flag, desc_name, squeezed, offsets = desc
    kl.emit(ir.Branch(span, flag, [ir.DescStore(None, desc_name, offsets, value,
                                                tuple(tile.dims), squeezed)],
                      [ir.Store(None, pointer, value, mask)]))


def _descriptor(kl: KernelState, region: Region, dims: tuple[ir.Axis, ...]
                ) -> tuple[str, str, tuple[int, ...], tuple[ir.Expr, ...]] | None:
    """(flag, descriptor name, squeezed block shape or (), the block's offsets in the
    descriptor's order) when a tensor descriptor can
    move this tile. A ``.sqz()`` view of a higher-rank tensor (a head of ``[B, H, S, D]``)
    takes a descriptor of the whole tensor whose block is 1 along the dropped dimensions."""
    tensor = region.tensor
    if kl.fl.options.descriptor_maker is None or not 2 <= len(tensor.dims) <= 5:
        return None
    squeezing = len(region.extents) != len(tensor.dims)
    if squeezing and (not region.axes or any(d.padded for d in dims)):
        return None  # a view of fewer dimensions than its tensor (scratch slices)
    if tensor.name in kl.read_back:  # TMA stores are not ordered by a thread barrier
        return None
    if any(d.size > MAX_BOX or (d.padded and not _splits(kl, d)) for d in dims):
        return None
    if any(e.value != d.extent for e, d in zip(region.extents, dims)):
        return None
    if any(len(limits) != 1 for limits in region.limits) or region.lows or region.fill:
        return None
    if region.axes and list(region.axes) != sorted(region.axes):
        return None  # a transposed view: pointer loads handle any order
    if any(o.axes for o in region.origin):
        return None
    if squeezing and kl.fl.options.descriptor_maker == "kernel" \
            and kl.fl.options.warp_specialize:
        view = _view_descriptor(kl, region, dims)
        if view is not None:
            return view
    block = [1] * len(tensor.dims)
    kept = [region.axis_of(view_dim) for view_dim in range(len(dims))]
    for view_dim, axis in enumerate(dims):
        block[kept[view_dim]] = axis.size
    # The dropped dimensions of a squeezed view go outermost in the descriptor (its shape
    # and strides permuted, which a tensor map allows): the block is [1, ..., 1, tile]
    # whichever dimensions the view kept. (A head of [B, S, H, D], block [1, S, 1, D] in
    # the tensor's order, gave wrong attention results in pipelined loops on the H200
    # with Triton 3.6; as [B, H, S, D], block [1, 1, S, D], it is right.)
    order = tuple([i for i in range(len(block)) if i not in kept] + sorted(kept))
    block = [block[i] for i in order]
    elem_bytes = tensor.elem.bits // 8
    if elem_bytes not in (1, 2, 4, 8) or block[-1] * elem_bytes < 16:
        return None
    flag = kl.tma_flag(tensor)
    name = make_descriptor(kl, tensor, tuple(block), order)
    offsets = tuple(region.origin[i] for i in order)
    return flag, name, tuple(block) if squeezing else (), offsets


def _view_descriptor(kl: KernelState, region: Region, dims: tuple[ir.Axis, ...]
                     ) -> tuple[str, str, tuple[int, ...], tuple[ir.Expr, ...]] | None:
    """A squeezed view's own descriptor (``_descriptor``'s result): of the view's rank,
    starting at the view's coordinates along the dropped dimensions, made by each program
    once those coordinates are known (they must be computable in the kernel's outermost
    statement list, before its loops: a head of ``[B, H, S, D]`` picked by the block).
    Triton 3.6's warp specialisation on Hopper partitions loads of such a block's tile
    among its consumer warpgroups, but not of a ``[1, ..., 1, tile]`` block reshaped.

    A dropped coordinate past its dimension (a block beyond the tensor) shifts the
    block's first kept coordinate past the view's end, so that the descriptor reads zeros
    and writes nothing there, as the whole tensor's descriptor would."""
    tensor = region.tensor
    kept = [region.axis_of(view_dim) for view_dim in range(len(dims))]
    dropped = [t for t in range(len(tensor.dims)) if t not in kept]
    coords = [region.origin[t] for t in dropped]
    if not all(kl.readable_at(0, c) for c in coords) or kept[-1] != len(tensor.dims) - 1:
        return None
    elem_bytes = tensor.elem.bits // 8
    block = tuple(axis.size for axis in dims)
    if elem_bytes not in (1, 2, 4, 8) or block[-1] * elem_bytes < 16:
        return None
    flag = kl.tma_flag(tensor)
    key = (tensor.name, block, tuple(kl.canonical(c) for c in coords))
    made = kl.view_descs.get(key)
    if made is None:
        name = kl.fresh(f"{tensor.name}_view_desc")
        shift = kl.fresh(f"{tensor.name}_view_past")
        strides = tensor.strides()
        offset: ir.Expr = b.const(0)
        inside: ir.Expr | None = None
        for t, coord in zip(dropped, coords):
            offset = b.add(offset, b.mul(coord, b.sym(strides[t])))
            inside = b.and_(inside, b.binary("<", coord, b.sym(tensor.dims[t])))
        assert inside is not None  # (a squeezed view drops a dimension)
        past = ir.Where((), b.I32, inside, b.const(0), b.sym(tensor.dims[kept[0]]))
        # (the last stride is 1: the host's flag checks it of a strided tensor, and
        # Triton takes only a constant 1 there)
        kept_strides = tuple(strides[t] for t in kept[:-1]) + (Sym(1),)
        define = ir.DefineDesc(None, name, tensor.pointer, tuple(tensor.dims[t] for t in kept),
                               kept_strides, block, offset)
        with kl.emitting_into(kl.scopes[0], 0):
            kl.emit(ir.Branch(None, flag, [define, ir.Let(None, shift, past)], []))
        for dim in tensor.dims + strides:
            kl.use_sym(dim)
        made = (name, shift)
        kl.view_descs[key] = made
    name, shift = made
    offsets = tuple(region.origin[t] for t in kept)
    offsets = (b.add(offsets[0], b.var(shift)),) + offsets[1:]
    return flag, name, (), offsets


def make_descriptor(kl: KernelState, tensor: TensorRef, block: tuple[int, ...],
                    order: tuple[int, ...] | None = None) -> str:
    """The name of the tensor descriptor of ``tensor`` with block shape ``block``: a kernel
    argument made by the host, or made once by each program in the kernel's prologue.
    ``order`` permutes the tensor's dimensions (shape and strides) in the descriptor."""
    order = order or tuple(range(len(tensor.dims)))
    key = (tensor.name, block, order)
    name = kl.descs.get(key)
    if name is None:
        flag = kl.tma_flag(tensor)
        name = kl.fresh(f"{tensor.name}_desc")
        kl.descs[key] = name
        shape = tuple(tensor.dims[i] for i in order)
        strides = tuple(tensor.strides()[i] for i in order)
        if kl.fl.options.descriptor_maker == "host":  # an argument: none built per program
            kl.params[name] = ir.KernelParam(name, ir.ParamKind.DESC, tensor.dtype, ir.HostDesc(
                tensor.name, shape, strides, block, flag))
        else:
            kl.prologue.append(ir.Branch(None, flag, [ir.DefineDesc(
                None, name, tensor.pointer, shape, strides, block)], []))
        for dim in tensor.dims + tensor.strides():
            kl.use_sym(dim)
        if order == tuple(range(len(tensor.dims))):
            kl.desc_tensors[name] = tensor
    return name


def _splits(kl: KernelState, axis: ir.Axis) -> bool:
    """Whether ``split_tiles`` may compute this padded axis in two pieces (its descriptor
    is then split with it)."""
    return kl.fl.options.split_tiles and piece_sizes(axis.extent) is not None
