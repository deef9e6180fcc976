"""What Croqtile names stand for while a kernel is lowered, and the view record.

A ``Region`` is the one representation of every view (arch 3.4): a global tensor, the
element coordinates of the view's origin, the view's extents and the limits past which
coordinates are masked (tensor bounds, the valid part of a smaller staged source).
Loads and stores of views, tiles and single elements are all built by ``access``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    @property
    def pointer(self) -> str:
        return self.name + "_ptr"

    @property
    def dtype(self) -> ir.DType:
        return b.dtype_of(self.elem)

    def strides(self) -> tuple[Sym, ...]:
        strides: list[Sym] = []
        running = Sym(1)
        for dim in reversed(self.dims):
            strides.append(running)
            running = running * dim
        return tuple(reversed(strides))


@dataclass(frozen=True)
class Region:
    tensor: TensorRef
    origin: tuple[ir.Expr, ...]
    extents: tuple[Sym, ...]
    limits: tuple[tuple[ir.Expr, ...], ...]  # per dim: exclusive bounds of coordinates
    fill: int | float = 0
    # masked elements are data (zeros of .zfill / TMA) rather than "nothing copied here"
    zero_fill: bool = False

    @staticmethod
    def whole(tensor: TensorRef) -> Region:
        return Region(tensor, tuple(b.const(0) for _ in tensor.dims), tensor.dims,
                      tuple((b.sym(d),) for d in tensor.dims))

    @property
    def rank(self) -> int:
        return len(self.origin)

    def shifted(self, offsets: list[ir.Expr], extents: tuple[Sym, ...]) -> Region:
        origin = tuple(b.add(o, d) for o, d in zip(self.origin, offsets))
        return Region(self.tensor, origin, extents, self.limits, self.fill, self.zero_fill)

    def clipped(self, extents: tuple[Sym, ...], zero_fill: bool) -> Region:
        """The same origin with a bigger shape whose extra part holds no data (a smaller
        source staged into a bigger buffer), or zeros with ``zero_fill``."""
        limits = []
        for d, (lim, src, dst) in enumerate(zip(self.limits, self.extents, extents)):
            if src.provably_eq(dst):
                limits.append(lim)
            else:
                limits.append(lim + (b.add(self.origin[d], b.sym(src)),))
        return Region(self.tensor, self.origin, extents, tuple(limits), self.fill,
                      zero_fill or self.zero_fill)


@dataclass(frozen=True)
class Tile:
    """A register tile: ``expr`` over ``dims`` (axis of buffer dimension d), ``valid``
    masks elements that hold no data."""

    expr: ir.Expr
    dims: tuple[ir.Axis, ...]
    elem: ElemType
    valid: ir.Expr | None = None


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


@dataclass
class Acc:
    """An MMA accumulator: a register tile named ``name`` in the kernel."""

    symbol: Symbol
    name: str
    elem: ElemType
    fill: float | int
    layout: AccLayout | None = None
    # where the initialising `tl.full` goes once the shape is known
    pending: list[tuple[list[ir.Stmt], int]] = field(default_factory=list)


@dataclass
class Operand:
    """``ma = mma.load view``: the operand's view, loaded when the MMA runs."""

    source: Region | Tile
    elem: ElemType


Value = Scalar | Bounded | Buffer | Acc | Operand | TensorRef | Region | list


def access(region: Region, index: list[ir.Expr]) -> tuple[ir.Pointer, ir.Expr | None]:
    """Pointer and mask of ``region`` at per-dimension indices (scalars, vectors or tile
    axes). Coordinates are masked by every limit of their dimension."""
    offset: ir.Expr = b.const(0)
    mask: ir.Expr | None = None
    strides = region.tensor.strides()
    for d, idx in enumerate(index):
        coord = b.add(region.origin[d], idx)
        offset = b.add(offset, b.mul(coord, b.sym(strides[d])))
        for limit in region.limits[d]:
            if _provably_below(coord, limit):
                continue
            mask = b.and_(mask, b.binary("<", coord, limit))
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
