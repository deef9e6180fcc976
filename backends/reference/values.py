"""Runtime values of the reference interpreter: spanned data as strided views over flat
storage (spec 5.4), arrays of buffers, futures (3.5), MMA fragments (5.8), values private
to each instance of an inner parallel level (5.2), and the frames that hold variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ...frontend.sema.dtypes import ElemType
from .arith import Value, torch_dtype
from .errors import InterpretError, not_implemented


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for dim in reversed(shape):
        strides.append(running)
        running *= dim
    return tuple(reversed(strides))


@dataclass(frozen=True)
class DataView:
    """Spanned data: ``shape`` elements at ``offset + sum(i_d * strides_d)`` of the flat
    ``storage`` of its root buffer. Views are zero-copy (spec 5.4).

    ``valid[d]`` counts the leading indices of dimension ``d`` that lie inside the view's
    root and every view it was cut from: a tail tile (``in.subspan(64).at(1)`` over 100
    elements) has ``valid = (36,)``. Copies read and write only that part (spec 5.6).
    """

    storage: torch.Tensor
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    valid: tuple[int, ...]
    elem: ElemType
    space: str  # "global" | "shared" | "local"
    name: str

    @staticmethod
    def whole(tensor: torch.Tensor, elem: ElemType, space: str, name: str) -> DataView:
        shape = tuple(int(d) for d in tensor.shape)
        return DataView(tensor.reshape(-1), 0, shape, row_major(shape), shape, elem, space, name)

    @staticmethod
    def allocate(shape: tuple[int, ...], elem: ElemType, space: str, name: str,
                 fill: int | float) -> DataView:
        tensor = torch.full(shape, fill, dtype=torch.float64).to(torch_dtype(elem)) \
            if isinstance(fill, float) else torch.full(shape, fill, dtype=torch_dtype(elem))
        return DataView.whole(tensor, elem, space, name)

    @property
    def complete(self) -> bool:
        return self.valid == self.shape

    @property
    def is_dense(self) -> bool:
        return self.strides == row_major(self.shape)

    def as_tensor(self) -> torch.Tensor:
        """The whole view as a (possibly strided) tensor sharing the storage."""
        if not self.complete:
            raise InterpretError(f"'{self.name}' reaches past the end of its data")
        return self.part()

    def part(self) -> torch.Tensor:
        """The valid part as a tensor view of the storage (writes go through)."""
        if 0 in self.valid:
            return torch.empty(self.valid, dtype=self.storage.dtype)
        return torch.as_strided(self.storage, self.valid, self.strides,
                                self.storage.storage_offset() + self.offset)

    def read(self, fill: int | float | None) -> torch.Tensor:
        """A copy of the tile; elements past the end of the data are ``fill``."""
        if self.complete:
            return self.part().clone()
        if fill is None:
            raise InterpretError(f"'{self.name}' reaches past the end of its data")
        out = torch.full(self.shape, fill, dtype=torch.float64).to(self.storage.dtype) \
            if isinstance(fill, float) else torch.full(self.shape, fill, dtype=self.storage.dtype)
        out[_box(self.valid)] = self.part()
        return out

    def write(self, tile: torch.Tensor, limit: tuple[int, ...] | None = None) -> None:
        """Store ``tile`` (this view's shape or bigger); only the valid part (and the
        leading ``limit`` box when given) is written."""
        box = tuple(min(v, t) for v, t in zip(self.valid, tile.shape))
        if limit is not None:
            box = tuple(min(b, max(0, lim)) for b, lim in zip(box, limit))
        if 0 in box:
            return
        target = torch.as_strided(self.storage, box, self.strides,
                                  self.storage.storage_offset() + self.offset)
        target.copy_(tile[_box(box)].to(self.storage.dtype))

    # -- view steps (spec 5.4) ------------------------------------------------------
    def tiled(self, offsets: list[int], extents: list[int]) -> DataView:
        """The tile of ``extents`` at element ``offsets`` (chunkat, subspan, view.from)."""
        if any(o < 0 for o in offsets):
            raise InterpretError(f"a view of '{self.name}' starts before its data "
                                 f"(offsets {offsets})")
        offset = self.offset + sum(o * s for o, s in zip(offsets, self.strides))
        valid = tuple(max(0, min(v - o, e)) for v, o, e in zip(self.valid, offsets, extents))
        return replace(self, offset=offset, shape=tuple(extents), valid=valid)

    def restrided(self, extents: list[int], strides: list[int], origin: list[int]) -> DataView:
        """``view(E : T).from(o)``: explicit element strides into the underlying buffer."""
        offset = self.offset + sum(o * t for o, t in zip(origin, strides))
        last = offset + sum((e - 1) * t for e, t in zip(extents, strides))
        if offset < 0 or last >= self.storage.numel():
            raise InterpretError(f"the strided view of '{self.name}' reaches outside its buffer")
        return replace(self, offset=offset, shape=tuple(extents), strides=tuple(strides),
                       valid=tuple(extents))

    def squeezed(self) -> DataView:
        """``.sqz()``: the same elements without the dimensions of size 1."""
        kept = [d for d, size in enumerate(self.shape) if size != 1]
        return replace(self, shape=tuple(self.shape[d] for d in kept),
                       strides=tuple(self.strides[d] for d in kept),
                       valid=tuple(self.valid[d] for d in kept))

    def reshaped(self, shape: list[int]) -> DataView:
        """``span_as``: the same contiguous elements with a new shape."""
        if not self.complete:
            raise InterpretError(f"span_as of '{self.name}', a view that reaches past its data")
        if not self.is_dense:
            raise not_implemented("'span_as' of a non-contiguous view")
        count = 1
        for d in shape:
            count *= d
        if count != _count(self.shape):
            raise InterpretError(f"span_as of '{self.name}': {list(self.shape)} has "
                                 f"{_count(self.shape)} elements, {shape} has {count}")
        new = tuple(shape)
        return replace(self, shape=new, strides=row_major(new), valid=new)

    # -- elements (spec 5.5) --------------------------------------------------------
    def address(self, index: list[Any], mask: torch.Tensor | None = None,
                masked: bool = False) -> tuple[Any, Any]:
        """Flat storage position of element ``index`` (ints, or lane tensors; inactive
        lanes use index 0) and which positions lie inside the data: None when all do.
        Outside positions are program errors unless ``masked``."""
        if len(index) != len(self.shape):
            raise InterpretError(f"'{self.name}' has rank {len(self.shape)}, "
                                 f"indexed with {len(index)} indices")
        address: Any = self.offset
        inside: Any = None
        for d, i in enumerate(index):
            valid = self.valid[d]
            if isinstance(i, torch.Tensor):
                if i.dim() == 0:
                    i = int(i.item())
                else:
                    if mask is not None:
                        i = torch.where(mask, i, 0)
                    low, high = torch.aminmax(i)
                    if int(low) < 0 or int(high) >= valid:
                        good = (i >= 0) & (i < valid)
                        if not masked:
                            raise InterpretError(self._out_of_bounds(d, int(i[~good][0]),
                                                                     self.shape[d]))
                        inside = good if inside is None else inside & good
                        i = torch.where(good, i, 0)
                    if self.storage.numel() >= 2**31:
                        i = i.to(torch.int64)
                    address = address + i * self.strides[d]
                    continue
            if not 0 <= i < valid:
                if not (mask is not None and not bool(mask.any())):
                    if not masked:
                        raise InterpretError(self._out_of_bounds(d, int(i), self.shape[d]))
                    inside = False
                i = 0
            address = address + i * self.strides[d]
        return address, inside

    def _out_of_bounds(self, dim: int, index: int, size: int) -> str:
        if 0 <= index < size:
            return (f"element index {index} of dimension {dim} of '{self.name}' lies past "
                    f"the end of the data the view was cut from")
        return f"index {index} is out of bounds for dimension {dim} of '{self.name}' (size {size})"

    def load(self, index: list[Any], mask: torch.Tensor | None = None,
             fill: Value | None = None) -> torch.Tensor:
        """Element ``index``; with ``fill``, elements outside the data read as ``fill``."""
        return self.load_at(*self.address(index, mask, fill is not None), fill)

    def _raw(self) -> torch.Tensor:
        """The storage as a dtype torch can index (unsigned types as their signed twin)."""
        signed = _SIGNED.get(self.storage.dtype)
        return self.storage if signed is None else self.storage.view(signed)

    def load_at(self, address: Any, inside: Any, fill: Value | None) -> torch.Tensor:
        if inside is False:
            address = self.offset if self.storage.numel() > self.offset else 0
        value = self._raw()[address].view(self.storage.dtype)
        if not isinstance(address, torch.Tensor):
            value = value.clone()  # a copy, not a view that later writes would change
        if inside is None:
            return value
        filler = torch.tensor(fill).to(value.dtype)
        return filler.expand(value.shape).clone() if inside is False else \
            torch.where(inside, value, filler)

    def store(self, index: list[Any], value: torch.Tensor, mask: torch.Tensor | None = None,
              drop_outside: bool = False) -> None:
        """Write element ``index``; with ``drop_outside``, writes outside the data are
        dropped. Lanes writing different values to one element are a data race."""
        self.store_at(*self.address(index, mask, drop_outside), value, mask)

    def store_at(self, address: Any, inside: Any, value: torch.Tensor,
                 mask: torch.Tensor | None) -> None:
        if inside is False:
            return
        if inside is not None:
            mask = inside if mask is None else mask & inside
        if value.dtype != self.storage.dtype:
            value = value.to(self.storage.dtype)
        if not isinstance(address, torch.Tensor) or address.dim() == 0:
            if value.dim() > 0:  # lanes writing one element
                values = value if mask is None else value[mask]
                if values.numel() == 0:
                    return
                _check_same(values, self.name)
                value = values[0]
            raw = self._raw()
            raw[address] = value.view(raw.dtype)
            return
        if value.dim() == 0:
            value = value.expand(address.shape)
        if mask is not None:
            address, value = address[mask], value[mask]
        _check_race(address, value, self.name)
        raw = self._raw()
        raw[address] = value.view(raw.dtype)

    def clone(self) -> DataView:
        storage = self.storage.clone()
        return replace(self, storage=storage)


_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _check_same(values: torch.Tensor, name: str) -> None:
    if values.numel() > 1 and not bool((values == values[0]).all()):
        raise InterpretError(f"data race: several instances write different values to one "
                             f"element of '{name}'")


def _check_race(address: torch.Tensor, value: torch.Tensor, name: str) -> None:
    """Instances running side by side must not write different values to one element."""
    if address.numel() < 2:
        return
    a, order = torch.sort(address, stable=True)
    same_place = a[1:] == a[:-1]
    if not bool(same_place.any()):
        return
    v = value[order]
    differ = v[1:] != v[:-1]
    if bool((same_place & differ).any()):
        raise InterpretError(f"data race: several instances write different values to one "
                             f"element of '{name}'")


def _box(extents: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(0, e) for e in extents)


def _count(shape: tuple[int, ...]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


@dataclass(frozen=True)
class BufferArray:
    """``shared f16 [64, 64] tiles[4];`` -- ``tiles[s]`` is one buffer (spec 3.4)."""

    tensor: torch.Tensor  # array dims + buffer shape
    elem: ElemType
    space: str
    name: str
    array_dims: tuple[int, ...]

    def element(self, indices: list[int]) -> DataView:
        for d, (i, size) in enumerate(zip(indices, self.array_dims)):
            if not 0 <= i < size:
                raise InterpretError(f"array index {i} is out of bounds for '{self.name}' "
                                     f"(dimension {d} has {size} buffers)")
        return DataView.whole(self.tensor[tuple(indices)], self.elem, self.space,
                              f"{self.name}{''.join(f'[{i}]' for i in indices)}")

    def clone(self) -> BufferArray:
        return replace(self, tensor=self.tensor.clone())


@dataclass
class Future:
    """The result of a DMA (``data`` is its destination) or of an async MMA (no data)."""

    data: DataView | None
    is_async: bool
    name: str


@dataclass
class Frag:
    """An MMA fragment: an operand tile or an accumulator (spec 5.8).

    With ``mma.scale`` the accumulator is two: ``value`` is the scaled running result and
    ``part`` the raw products since the last scale point; ``pending`` is set while
    ``part`` holds products not scaled yet."""

    elem: ElemType
    value: torch.Tensor | None
    fill: Value = 0
    part: torch.Tensor | None = None
    pending: bool = False

    def clone(self) -> Frag:
        return Frag(self.elem, None if self.value is None else self.value.clone(), self.fill,
                    None if self.part is None else self.part.clone(), self.pending)


@dataclass
class FragArray:
    """``frag mc[2][3] {v};``: the accumulators of an array of fragments, row-major."""

    dims: tuple[int, ...]
    items: list[Frag]

    def clone(self) -> FragArray:
        return FragArray(self.dims, [f.clone() for f in self.items])

    def at(self, index: list[int]) -> Frag:
        flat = 0
        for i, d in zip(index, self.dims):
            if not 0 <= i < d:
                raise InterpretError(f"fragment index {index} outside the array {list(self.dims)}")
            flat = flat * d + i
        return self.items[flat]


def copy_value(value: object) -> object:
    if isinstance(value, (Frag, FragArray, DataView, BufferArray)):
        return value.clone()
    return value


@dataclass
class PrivateCell:
    """A fragment or local buffer declared at an outer level: every instance of the inner
    parallel levels that uses it owns a copy, made from the outer value at first use and
    kept across parallel statements of the same levels (spec 5.2: each warpgroup of
    ``parallel wg by 2 : group-4`` owns its own ``mc`` even if ``mc = mma.fill`` is written
    at block level)."""

    base: object
    name: str
    copies: dict[tuple, object] = field(default_factory=dict)

    def resolve(self, key: tuple) -> object:
        if key:
            if key not in self.copies:
                self.copies[key] = copy_value(self.base)
            return self.copies[key]
        if not self.copies:
            return self.base
        if len(self.copies) == 1:
            return next(iter(self.copies.values()))
        raise InterpretError(f"'{self.name}' is private to each of {len(self.copies)} inner "
                             "parallel instances; use it inside that parallel level")


class Frame:
    """Variables of one scope instance: the host, one parallel instance (``key`` names
    it: level and instance index per level), or the lanes of a vectorised level.
    ``shared`` is one dict for all instances of one run of a parallel statement: the
    shared buffers its instances declare (spec 3.4: shared memory is per block)."""

    __slots__ = ("parent", "vars", "key", "shared")

    def __init__(self, parent: Frame | None, key: tuple | None = None,
                 shared: dict | None = None) -> None:
        self.parent = parent
        self.vars: dict[tuple, object] = {}
        self.key = key
        self.shared = shared
