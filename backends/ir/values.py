"""What Croqtile names stand for while a kernel is lowered, and the view record.

A ``Region`` is the one representation of every view (arch 3.4): a global tensor, the
element coordinates of the view's origin, the view's extents and the limits past which
coordinates are masked (tensor bounds, the valid part of a smaller staged source).
Loads and stores of views, tiles and single elements are all built by ``access``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Sequence
from typing import Any

from ...frontend.sema.dtypes import ElemType
from ...frontend.sema.model import Symbol
from ...frontend.sema.symbolic import Sym
from . import build as b
from . import nodes as ir


@dataclass(frozen=True)
class TensorRef:
    """A global tensor of the function (a parameter or a host allocation)."""

    name: str
    elem: ElemType
    dims: tuple[Sym, ...]
    # element strides when they are not row-major over ``dims`` (a strided view, see
    # ``Region.restrided``)
    explicit: tuple[Sym, ...] = ()

    @property
    def pointer(self) -> str:
        return self.name + "_ptr"

    @property
    def dtype(self) -> ir.DType:
        return b.dtype_of(self.elem)

    def strides(self) -> tuple[Sym, ...]:
        if self.explicit:
            return self.explicit
        strides: list[Sym] = []
        running = Sym(1)
        for dim in reversed(self.dims):
            strides.append(running)
            running = running * dim
        return tuple(reversed(strides))


@dataclass(frozen=True)
class Staging:
    """Where a copy into a shared or local buffer ran: the statement list it was lowered
    into, how long that list was then, and how many sequential loops enclosed it."""

    scope: list = field(compare=False)
    start: int
    loop_depth: int


@dataclass(frozen=True)
class Region:
    """A view of a global tensor.

    ``axes[i]`` is the tensor dimension that view dimension ``i`` walks along (a
    permutation: ``dma.transp`` reorders it). ``origin`` holds, per *tensor* dimension,
    the coordinate of the view's first element; ``extents`` the view's shape (per view
    dimension). Coordinates outside ``[low, limit)`` bounds are masked: the tensor's own
    bounds, the valid part of a smaller staged source, the interior of a ``dma.pad``.
    Masked elements read as ``fill``; when ``filled`` they are data (``.zfill``, TMA,
    padding), otherwise they mark "nothing was copied here" and are not stored.
    """

    tensor: TensorRef
    origin: tuple[ir.Expr, ...]
    extents: tuple[Sym, ...]
    limits: tuple[tuple[ir.Expr, ...], ...]  # per tensor dim: exclusive upper bounds
    fill: int | float = 0
    filled: bool = False
    axes: tuple[int, ...] = ()  # view dim -> tensor dim; empty means the identity
    lows: tuple[tuple[ir.Expr, ...], ...] = ()  # per tensor dim: inclusive lower bounds
    eviction: str | None = None  # cache hint of a `tma.load.evict_first/last` copy
    # a copy's content: where the copy was made (see ``tiles.staging_scope``); not part of
    # the view's identity
    staged: Staging | None = field(default=None, compare=False)

    @staticmethod
    def whole(tensor: TensorRef) -> Region:
        return Region(tensor, tuple(b.const(0) for _ in tensor.dims), tensor.dims,
                      tuple((b.sym(d),) for d in tensor.dims))

    @property
    def rank(self) -> int:
        return len(self.extents)

    def axis_of(self, view_dim: int) -> int:
        """The tensor dimension view dimension ``view_dim`` walks along."""
        return self.axes[view_dim] if self.axes else view_dim

    def origin_of(self, view_dim: int) -> ir.Expr:
        return self.origin[self.axis_of(view_dim)]

    def with_origin(self, view_dim: int, value: ir.Expr) -> tuple[ir.Expr, ...]:
        origin = list(self.origin)
        origin[self.axis_of(view_dim)] = value
        return tuple(origin)

    def _replace(self, **changes: Any) -> Region:
        """This region with the given fields replaced (each of its field's type)."""
        return replace(self, **changes)

    def shifted(self, offsets: list[ir.Expr], extents: tuple[Sym, ...]) -> Region:
        """A sub-view: ``offsets`` per view dimension, new extents."""
        origin = list(self.origin)
        for d, offset in enumerate(offsets):
            t = self.axis_of(d)
            origin[t] = b.add(origin[t], offset)
        return self._replace(origin=tuple(origin), extents=extents)

    def limited(self, ends: Sequence[tuple[int, ir.Expr]]) -> Region:
        """This region masked past runtime extents: ``ends`` holds (view dimension, end
        offset from the region's origin) pairs (``view(1, X, _).from(...)``,
        ``buf.subspan(rows, K)``)."""
        if not ends:
            return self
        limits = list(self.limits)
        for d, end in ends:
            t = self.axis_of(d)
            limits[t] = limits[t] + (b.add(self.origin[t], end),)
        return self._replace(limits=tuple(limits))

    def squeezed(self) -> Region:
        """``.sqz()``: the view without its dimensions of size 1; their tensor
        coordinates stay at the origin."""
        kept = [d for d, e in enumerate(self.extents) if e.value != 1]
        return self._replace(extents=tuple(self.extents[d] for d in kept),
                             axes=tuple(self.axis_of(d) for d in kept))

    def restrided(self, origin: list[ir.Expr], extents: tuple[Sym, ...],
                  strides: tuple[Sym, ...]) -> Region:
        """``view(E : T).from(o)``: element ``i`` lies at this view's first element plus
        ``sum((o_d + i_d) * T_d)`` in the underlying buffer (spec 5.4). The result walks a
        tensor of the same storage whose leading unit dimension (stride 1) carries this
        view's flat start, and whose other dimensions have the explicit strides; the
        parent's bounds no longer describe its elements, so nothing is masked."""
        start: ir.Expr = b.const(0)
        for coord, stride in zip(self.origin, self.tensor.strides()):
            start = b.add(start, b.mul(coord, b.sym(stride)))
        tensor = TensorRef(self.tensor.name, self.tensor.elem, (Sym(1),) + extents,
                           (Sym(1),) + strides)
        rank = len(extents)
        return Region(tensor, (start, *origin), extents, tuple(() for _ in range(rank + 1)),
                      axes=tuple(range(1, rank + 1)))

    def clipped(self, extents: tuple[Sym, ...], filled: bool) -> Region:
        """The same origin with a bigger shape whose extra part holds no data (a smaller
        source staged into a bigger buffer), or zeros with ``filled``."""
        limits = list(self.limits)
        for d, (src, dst) in enumerate(zip(self.extents, extents)):
            if not src.provably_eq(dst):
                t = self.axis_of(d)
                limits[t] = limits[t] + (b.add(self.origin[t], b.sym(src)),)
        return self._replace(extents=extents, limits=tuple(limits),
                             filled=filled or self.filled)

    def substituted(self, name: str, value: ir.Expr) -> Region:
        """The same view with the variable ``name`` replaced by ``value``."""
        def sub(e: ir.Expr) -> ir.Expr:
            return b.substitute(e, name, value)

        return self._replace(origin=tuple(sub(o) for o in self.origin),
                             limits=tuple(tuple(sub(x) for x in lim) for lim in self.limits),
                             lows=tuple(tuple(sub(x) for x in low) for low in self.lows))

    def mentions(self, name: str) -> bool:
        exprs = list(self.origin) + [x for lim in self.limits for x in lim] + [
            x for low in self.lows for x in low]
        return any(b.mentions(e, name) for e in exprs)

    def key(self) -> tuple[object, ...]:
        """A structural identity (two views of the same elements compare equal)."""
        return (self.tensor.name, tuple(str(s) for s in self.tensor.explicit),
                tuple(b.key(o) for o in self.origin),
                tuple(str(e) for e in self.extents), self.axes, self.fill, self.filled,
                tuple(tuple(b.key(x) for x in lim) for lim in self.limits),
                tuple(tuple(b.key(x) for x in low) for low in self.lows))

    def transposed(self, perm: list[int]) -> Region:
        """``dma.transp<perm>``: output dimension i is input dimension perm[i]."""
        axes = tuple(self.axis_of(p) for p in perm)
        return self._replace(axes=axes, extents=tuple(self.extents[p] for p in perm))

    def padded(self, low: list[int], high: list[int], value: int | float) -> Region:
        """``dma.pad<low, high, 0, value>``: a bigger view whose border reads ``value``."""
        origin = list(self.origin)
        limits = list(self.limits)
        lows: list[tuple[ir.Expr, ...]] = list(self.lows) if self.lows else [
            () for _ in self.origin]
        extents = []
        for d, (lo, hi, extent) in enumerate(zip(low, high, self.extents)):
            t = self.axis_of(d)
            start = origin[t]
            lows[t] = lows[t] + (start,)
            limits[t] = limits[t] + (b.add(start, b.sym(extent)),)
            origin[t] = b.binary("-", start, b.const(lo))
            extents.append(extent + lo + hi)
        return self._replace(origin=tuple(origin), extents=tuple(extents), limits=tuple(limits),
                             lows=tuple(lows), fill=value, filled=True)


@dataclass(frozen=True)
class Tile:
    """A register tile: ``expr`` over ``dims`` (axis of buffer dimension d), ``valid``
    masks elements that hold no data.

    ``split`` marks a per-instance view of a tile the instances filled together (each
    warpgroup reading back its own rows of a fused MMA result): per dimension, the instance
    axes that select the part (outermost first) and one part's extent. The tile itself
    stays whole; where it is stored, the destination must place the parts the same way."""

    expr: ir.Expr
    dims: tuple[ir.Axis, ...]
    elem: ElemType
    valid: ir.Expr | None = None
    split: tuple[tuple[tuple[ir.Axis, ...], int], ...] = ()


@dataclass
class Scalar:
    """A runtime integer/float value (a tensor when it depends on vector axes)."""

    expr: ir.Expr
    elem: ElemType


@dataclass
class Bounded:
    expr: ir.Expr
    bound: Sym


@dataclass
class Buffer:
    """A ``shared``/``local`` buffer or a DMA future: its current content."""

    symbol: Symbol
    shape: tuple[Sym, ...]
    elem: ElemType
    content: Region | Tile | None = None
    # element-wise writes (scratch.py): the statement list the buffer was declared in,
    # the vector axes it has one copy per, whether ``content`` is its own scratch memory
    scope: list | None = None
    lanes: tuple[ir.Axis, ...] = ()
    owned: bool = False
    # the statement list a register tile stored into the buffer (``mma.store mc, buf``) was
    # made in, with that tile: where the tile can move to scratch (scratch.py)
    made: tuple[Tile, list] | None = None
    index: tuple[ir.Expr, ...] | None = None  # an element of a BufferArray: its indices


@dataclass
class BufferArray:
    """``shared f16 [64, 64] ring[4];``: an array of buffers. Each element is a ``Buffer``
    keyed by the structural identity of the index expression that selected it: a read
    finds the copy only when it names the element the same way the copy did (``ring[s]``
    after ``=> ring[s]``), which is what a ring buffer indexed by ``k % STAGES`` does."""

    symbol: Symbol
    shape: tuple[Sym, ...]
    elem: ElemType
    count: int
    # the structural key of each index (one per array dimension) -> its element
    slots: dict[tuple[tuple[object, ...], ...], Buffer] = field(default_factory=dict)


@dataclass
class AccLayout:
    """How a fused accumulator's rows and columns decompose: the vector axes merged in
    (outermost first, with their extents) and the per-instance extents."""

    m: ir.Axis
    n: ir.Axis
    m_parts: tuple[ir.Axis, ...]
    n_parts: tuple[ir.Axis, ...]
    tile_m: int
    tile_n: int
    # the rows of side-by-side instances (state.FusedRows): ``m`` is their fused row axis,
    # ``tile_m`` one instance's height
    fused: bool = False


@dataclass
class Acc:
    """An MMA accumulator: a register tile named ``name`` in the kernel."""

    symbol: Symbol
    name: str
    elem: ElemType
    fill: float | int
    layout: AccLayout | None = None
    # where each initialising `tl.full` goes once the shape is known: the statement list,
    # the index of its placeholder, the variable, its type and its value
    pending: list[tuple[list[ir.Stmt], int, str, ir.DType, float | int]] = field(
        default_factory=list)
    # with `mma.scale`: the raw products since the last scale point (spec 5.8)
    part: str | None = None


@dataclass
class FragArray:
    """``frag mc[2][3] {v};``: one accumulator per element, made at its first use. Each
    element's initialisation goes where the declaration stands: ``slots`` holds, per
    element, the placeholders (statement list, index) for its tile and its raw partial sum.
    ``dynamic`` records whether elements are selected by constants or by one runtime index."""

    symbol: Symbol
    fill: float | int
    slots: dict[tuple[int, ...], list[tuple[list[ir.Stmt], int]]]
    elements: dict[object, Acc] = field(default_factory=dict)
    dynamic: bool | None = None


@dataclass
class Operand:
    """``ma = mma.load view``: the operand's view, loaded when the MMA runs."""

    source: Region | Tile
    elem: ElemType


Value = (Scalar | Bounded | Buffer | BufferArray | Acc | FragArray | Operand | TensorRef | Region
         | list)


def access(region: Region, index: list[ir.Expr]) -> tuple[ir.Pointer, ir.Expr | None]:
    """Pointer and mask of ``region`` at per-view-dimension indices (scalars, vectors or
    tile axes). Coordinates are masked by every bound of their tensor dimension."""
    coords = list(region.origin)
    for d, idx in enumerate(index):
        t = region.axis_of(d)
        coords[t] = b.add(coords[t], idx)
    offset: ir.Expr = b.const(0)
    mask: ir.Expr | None = None
    strides = region.tensor.strides()
    for t, coord in enumerate(coords):
        offset = b.add(offset, b.mul(coord, b.sym(strides[t])))
        for limit in region.limits[t]:
            if not _provably_below(coord, limit):
                mask = b.and_(mask, b.binary("<", coord, limit))
        for low in (region.lows[t] if region.lows else ()):
            mask = b.and_(mask, b.binary(">=", coord, low))
    pointer = ir.Pointer(offset.axes, region.tensor.dtype, region.tensor.pointer, offset)
    return pointer, mask


def _provably_below(coord: ir.Expr, limit: ir.Expr) -> bool:
    """Cheap static proof that ``coord < limit`` for every lane."""
    if isinstance(limit, ir.Const):
        high = _max_value(coord)
        return high is not None and high < limit.value
    return False


def _max_value(e: ir.Expr) -> int | None:
    if isinstance(e, ir.Const):
        return int(e.value)
    if isinstance(e, ir.AxisIndex):
        return e.axis.size - 1
    if isinstance(e, ir.Var):
        return e.high
    if isinstance(e, ir.Binary) and e.op in ("+", "*"):
        lhs, rhs = _max_value(e.lhs), _max_value(e.rhs)
        if lhs is None or rhs is None or lhs < 0 or rhs < 0:
            return None
        return lhs + rhs if e.op == "+" else lhs * rhs
    return None


def padding_mask(axes: tuple[ir.Axis, ...]) -> ir.Expr | None:
    mask: ir.Expr | None = None
    for axis in axes:
        if axis.padded:
            mask = b.and_(mask, b.binary("<", b.axis_index(axis), b.const(axis.extent)))
    return mask
