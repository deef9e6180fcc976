"""The A operand of a 2:4 sparse MMA (``mma.LA.LB.sp acc, a_packed, b, meta``, spec 5.8),
decompressed into the dense ``[M, K]`` tile that an ordinary ``tl.dot`` multiplies.

Triton has no sparse dot, so the dense tile is rebuilt from the packed values and the
metadata nibbles (layout in ``croqtile.sparse``). For dense column ``k`` of row ``m``:

    g = k // 4                    the group of four columns, j = k % 4 its position
    nibble = meta[m, g // 2] >> 4 * (g % 2)          (even groups in the low nibble)
    i0 = nibble % 4,  i1 = (nibble >> 2) % 4        the two kept positions
    A[m, k] = packed[m, 2g]      if j == i0
              packed[m, 2g + 1]  if j == i1
              0                  otherwise

The two candidate values are loaded over the dense tile's own axes (each lane reads
``packed[m, 2g + t]``, an address that does not depend on the metadata), masked to the
lanes where ``j == i_t`` so that the zeros come from the load itself, and merged with one
``tl.where``: no gather, no data-dependent address, nothing per warp. Each packed element
is read by the four lanes of its group (cache hits); this path is correct on every target
and is the reference a hardware sparse path must match. An entry with ``i0 == i1`` is not
valid 2:4 metadata (the spec leaves it undefined); here that lane takes
``packed[m, 2g + 1]``.

The metadata view must follow A's rows (the same instance indices select both) and step
along K in whole bytes: a K-slice loop collapses into one dot only when each slice of the
metadata is ``K_slice / 8`` bytes (otherwise the loop stays a loop, CQ0703 explains why).
"""

from __future__ import annotations

from dataclasses import replace

from ...frontend import syntax as ast
from . import build as b
from . import nodes as ir
from .errors import LoweringError, unsupported
from .state import KernelState
from .tiles import staging_scope, widen_bf16_on_cpu
from .values import Region, Tile, access, padding_mask


def dense_k(lin_ak: b.Linear) -> b.Linear:
    """A's origin along K in dense columns: the packed operand moves half as far."""
    collapsed = {name: (2 * coef, extent) for name, (coef, extent) in lin_ak.collapsed.items()}
    return replace(lin_ak, collapsed=collapsed)


def packed_region(source: Region | Tile, node: ast.Expr, what: str) -> Region:
    if isinstance(source, Tile):
        raise unsupported(node.span, f"a sparse MMA {what} held in registers",
                          "pass a view of the global or staged data (or its mma.load)")
    return source


def dense_operand(kl: KernelState, packed: Region, meta: Region, a_m: int,
                  lin_am: b.Linear, lin_ak: b.Linear, lin_bk: b.Linear,
                  m_axis: ir.Axis, k_axis: ir.Axis, stmt: ast.MmaExec) -> Tile:
    """The dense ``[M, K]`` A tile over the dot's axes ``(m_axis, k_axis)``."""
    if packed.fill not in (0, 0.0):
        raise unsupported(stmt.a.span, "a sparse MMA operand padded with a value other than 0")
    meta_node = stmt.extra[0]
    groups = kl.fused is not None
    lin_mm = b.linearize(meta.origin_of(0), groups=groups)
    lin_mk = b.linearize(meta.origin_of(1), groups=groups)
    if lin_mm is None or lin_mk is None:
        raise _fail(meta_node, "its offset is not an affine function of the parallel and "
                               "loop indices")
    if (lin_mm.axes, lin_mm.groups, lin_mm.collapsed) != (lin_am.axes, lin_am.groups, {}):
        raise _fail(meta_node, "the metadata rows are not selected like the rows of A")
    if lin_mk.axes or lin_mk.groups or set(lin_mk.collapsed) != set(lin_bk.collapsed):
        raise _fail(meta_node, "the metadata does not move along K with the operands")
    for name, (coef, _) in lin_mk.collapsed.items():
        if 8 * coef != lin_bk.collapsed[name][0]:
            raise _fail(meta_node, "a K slice of the metadata is not one byte per 8 columns "
                                   "of the slice")
    packed = replace(packed, origin=_at(packed, a_m, lin_am.rest, 1 - a_m, lin_ak.rest))
    meta = replace(meta, origin=_at(meta, 0, lin_mm.rest, 1, lin_mk.rest))
    size = _bytes(m_axis, k_axis, packed) // 2 + _bytes(m_axis, k_axis, meta) // 8
    scope = _common_scope(kl, packed, meta)
    if scope is None:
        kl.stage_bytes += size  # (a stage of the loop's pipeline)
        return _decompress(kl, packed, meta, a_m, m_axis, k_axis, stmt)
    key = ("sparse", id(scope), packed.key(), meta.key(), id(m_axis), id(k_axis))
    if key not in kl.hoisted:  # staged before the loop: decompressed once there, kept
        depth = packed.staged.loop_depth if packed.staged else 0
        with kl.emitting_into(scope, depth):
            kl.hoisted[key] = _decompress(kl, packed, meta, a_m, m_axis, k_axis, stmt)
        kl.resident_bytes += size
    return kl.hoisted[key]


def _decompress(kl: KernelState, packed: Region, meta: Region, a_m: int, m_axis: ir.Axis,
                k_axis: ir.Axis, stmt: ast.MmaExec) -> Tile:
    for region in (packed, meta):
        kl.use_tensor(region.tensor)
        if kl.loop_depth:
            kl.loop_loaded.add(region.tensor.name)
    m, k = b.axis_index(m_axis), b.axis_index(k_axis)
    group = b.binary("//", k, b.const(4))
    position = b.binary("%", k, b.const(4))
    pad = padding_mask((m_axis, k_axis))
    # the group's metadata byte, then its nibble
    pointer, mask = access(meta, [m, b.binary("//", group, b.const(2))])
    byte = kl.let("sp_meta", ir.Load(b.merged(pointer, m, k), ir.DType.U8, pointer,
                                     b.and_(mask, pad), 0), stmt.span)
    shift = b.mul(b.const(4), b.binary("%", group, b.const(2)))
    nibble = kl.let("sp_nib", b.binary(">>", b.cast(byte, b.I32), shift))
    kept = [b.binary("%", nibble, b.const(4)),
            b.binary("%", b.binary(">>", nibble, b.const(2)), b.const(4))]
    values = []
    for t, index in enumerate(kept):
        column = b.add(b.mul(group, b.const(2)), b.const(t))
        at = [m, column] if a_m == 0 else [column, m]
        pointer, mask = access(packed, at)
        chosen = b.binary("==", position, index)
        load = ir.Load(b.merged(pointer, m, k), packed.tensor.dtype, pointer,
                       b.and_(b.and_(mask, pad), chosen), 0, packed.eviction)
        values.append(kl.let(f"sp_a{t}", load, stmt.span))
    dense = ir.Where(values[0].axes, values[0].dtype, b.binary("==", position, kept[1]),
                     values[1], values[0])
    tile = kl.let("a_dense", dense, stmt.span)
    widen_bf16_on_cpu(kl, tile)
    return Tile(tile, (m_axis, k_axis), packed.tensor.elem)


def _at(region: Region, d0: int, v0: ir.Expr, d1: int, v1: ir.Expr) -> tuple[ir.Expr, ...]:
    origin = list(region.origin)
    origin[region.axis_of(d0)] = v0
    origin[region.axis_of(d1)] = v1
    return tuple(origin)


def _common_scope(kl: KernelState, packed: Region, meta: Region) -> list[ir.Stmt] | None:
    """Where both were staged, when that is before a loop around the MMA (see
    ``tiles.staging_scope``); None when either is read here."""
    first, second = staging_scope(kl, packed), staging_scope(kl, meta)
    return first if first is not None and first is second else None


def _bytes(m_axis: ir.Axis, k_axis: ir.Axis, region: Region) -> int:
    return m_axis.size * k_axis.size * max(1, region.tensor.elem.bits // 8)


def _fail(node: ast.Node, reason: str) -> LoweringError:
    return LoweringError("CQ0703", node.span, reason=reason)
