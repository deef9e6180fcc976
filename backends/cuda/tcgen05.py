"""Host-side facts of Blackwell's fifth-generation tensor cores (``tcgen05``, sm_100a).

The generated sm_100a GEMM (gemm_sm100.py) takes every constant it hands the tensor cores
from here, so these functions are what the tests check field by field against the PTX ISA
tables:

* `instruction_descriptor`: the 32-bit descriptor of ``tcgen05.mma`` for ``.kind::f16``
  and ``.kind::f8f6f4`` (types of A, B and D, M, N, majors);
* `smem_descriptor`: the 64-bit descriptor of a matrix tile in shared memory (start
  address, leading and stride byte offsets, the fixed version bits, swizzle mode);
* `tmem_columns`: how many tensor-memory columns an accumulator needs (``tcgen05.alloc``
  takes a power of two from 32 to 512);
* `tmem_cell`: which CTA, lane and column of tensor memory hold C[m, n] for each
  accumulator layout the MMA writes (M = 64, 128 or 256, ``cta_group::1`` or ``::2``);
  the epilogue's reads are checked against it (`epilogue_writes`).

Tensor memory is 128 lanes x 512 columns of 32-bit cells per CTA; an address is
``lane << 16 | column``. Every accumulator here is 32 bits wide (f32), one cell per element.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

TMEM_LANES = 128
TMEM_COLUMNS = 512


class Kind(enum.Enum):
    """The ``.kind`` of a ``tcgen05.mma``: which family of operand types it multiplies."""

    F16 = "f16"          # f16 or bf16 operands
    F8F6F4 = "f8f6f4"    # 8-, 6- or 4-bit float operands (f16 too)

    @property
    def k(self) -> int:
        """K of one dense instruction: 32 bytes of each operand row."""
        return 16 if self is Kind.F16 else 32


# The A/B type field (bits 7-9 and 10-12) per kind and operand type.
OPERAND_FORMATS: dict[Kind, dict[str, int]] = {
    Kind.F16: {"f16": 0, "bf16": 1},
    Kind.F8F6F4: {"f8_e4m3": 0, "f8_e5m2": 1, "f6_e2m3": 3, "f6_e3m2": 4, "f4_e2m1": 5},
}
# The D type field (bits 4-5).
ACCUMULATOR_FORMATS = {"f16": 0, "f32": 1, "s32": 2}


class DescriptorError(ValueError):
    """A shape or type that no ``tcgen05.mma`` instruction takes."""


def check_shape(kind: Kind, m: int, n: int, cta_group: int) -> None:
    """Raise `DescriptorError` unless M x N is a dense shape of the PTX ISA's table for
    ``kind`` (without ``.ws``): one CTA takes M = 64 or 128 and N = 8..256 in steps of 8,
    a CTA pair M = 128 or 256 and N = 16..256 in steps of 16."""
    if cta_group == 1:
        rows, step = (64, 128), 8
    elif cta_group == 2:
        rows, step = (128, 256), 16
    else:
        raise DescriptorError(f"cta_group::{cta_group}: expected 1 or 2")
    if m not in rows:
        raise DescriptorError(f"M = {m} with cta_group::{cta_group}: expected one of {rows}")
    if not (step <= n <= 256 and n % step == 0):
        raise DescriptorError(f"N = {n} with cta_group::{cta_group}: expected {step}..256 in "
                              f"steps of {step}")
    del kind  # (the same shapes for .kind::f16 and .kind::f8f6f4)


def instruction_descriptor(kind: Kind, a: str, b: str, d: str, m: int, n: int, *,
                           cta_group: int = 1, a_mn_major: bool = False,
                           b_mn_major: bool = False, negate_a: bool = False,
                           negate_b: bool = False) -> int:
    """The 32-bit instruction descriptor of a dense ``tcgen05.mma.kind::<kind>``.

    Bits: 0-1 sparsity selector, 2 sparsity, 3 saturate (all 0 here), 4-5 D type,
    7-9 A type, 10-12 B type, 13/14 negate A/B, 15/16 A/B major (0: K-major),
    17-22 N >> 3, 24-28 M >> 4, 30-31 maximum shift (``.ws`` only, 0)."""
    check_shape(kind, m, n, cta_group)
    formats = OPERAND_FORMATS[kind]
    for role, name in (("A", a), ("B", b)):
        if name not in formats:
            raise DescriptorError(f"{role} of type {name} with .kind::{kind.value}: expected "
                                  f"one of {', '.join(formats)}")
    if d not in ACCUMULATOR_FORMATS or (kind is Kind.F8F6F4 and d != "f32") or d == "s32":
        raise DescriptorError(f"an accumulator of type {d} with .kind::{kind.value}")
    if (a_mn_major or b_mn_major) and kind is Kind.F8F6F4 and not {a, b} <= {
            "f8_e4m3", "f8_e5m2"}:
        raise DescriptorError("MN-major operands of 6- or 4-bit types")
    return (ACCUMULATOR_FORMATS[d] << 4 | formats[a] << 7 | formats[b] << 10
            | int(negate_a) << 13 | int(negate_b) << 14 | int(a_mn_major) << 15
            | int(b_mn_major) << 16 | (n >> 3) << 17 | (m >> 4) << 24)


class Swizzle(enum.Enum):
    """The layout field (bits 61-63) of a shared-memory matrix descriptor."""

    NONE = 0
    B128_BASE32 = 1  # 128-byte swizzle with 32-byte atomicity
    B128 = 2
    B64 = 4
    B32 = 6

    @property
    def bytes(self) -> int:
        """The width of a swizzled row (16 bytes for no swizzle: one core-matrix row)."""
        return {Swizzle.NONE: 16, Swizzle.B128_BASE32: 128, Swizzle.B128: 128,
                Swizzle.B64: 64, Swizzle.B32: 32}[self]


SMEM_DESCRIPTOR_VERSION = 1  # bits 46-48: the fixed constant 0b001 of tcgen05


def smem_descriptor(address: int, *, leading_bytes: int, stride_bytes: int,
                    swizzle: Swizzle, base_offset: int = 0,
                    absolute_leading: bool = False) -> int:
    """The 64-bit shared-memory matrix descriptor of ``tcgen05.mma`` for a tile at the
    shared-memory byte ``address``.

    Bits: 0-13 address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45
    stride-dimension byte offset >> 4, 46-48 the fixed version 0b001, 49-51 matrix base
    offset, 52 leading-offset mode (0 relative), 61-63 swizzle mode."""
    for name, value in (("address", address), ("leading byte offset", leading_bytes),
                        ("stride byte offset", stride_bytes)):
        if value % 16 or not 0 <= value >> 4 < 1 << 14:
            raise DescriptorError(f"the {name} {value}: expected a multiple of 16 below 256 KiB")
    if not 0 <= base_offset < 8:
        raise DescriptorError(f"the matrix base offset {base_offset}: expected 0..7")
    return ((address >> 4) | (leading_bytes >> 4) << 16 | (stride_bytes >> 4) << 32
            | SMEM_DESCRIPTOR_VERSION << 46 | base_offset << 49 | int(absolute_leading) << 52
            | swizzle.value << 61)


def k_major_sw128_descriptor(address: int = 0) -> int:
    """The descriptor of a K-major operand tile whose rows are 128 bytes (64 16-bit or
    128 8-bit elements of K) in the 128-byte swizzle, as a bulk tensor copy with
    ``CU_TENSOR_MAP_SWIZZLE_128B`` writes it: 8-row groups of 1024 bytes follow each
    other (the stride offset); the leading offset is unused for a swizzled K-major tile
    (the encoded 1 by convention). The address must be 1024-byte aligned; a step of K
    inside the row adds bytes to the start address."""
    return smem_descriptor(address, leading_bytes=16, stride_bytes=1024, swizzle=Swizzle.B128)


def tmem_columns(n: int, *, m: int = 128, cta_group: int = 1) -> int:
    """Columns ``tcgen05.alloc`` must give an f32 M x N accumulator in each CTA: the
    columns the layout uses (N, or N / 2 for the CTA pair's M = 128 layout), rounded up
    to a power of two and at least 32."""
    used = n // 2 if (cta_group, m) == (2, 128) else n
    if not 0 < used <= TMEM_COLUMNS:
        raise DescriptorError(f"an accumulator of {used} columns: tensor memory has "
                              f"{TMEM_COLUMNS}")
    return max(32, 1 << (used - 1).bit_length())


# ---- the accumulator in tensor memory ----------------------------------------------------

@dataclass(frozen=True)
class TmemCell:
    """Where one accumulator element lives: the CTA of the pair (0: the even one), the
    lane and the column (relative to the allocation's base column)."""

    cta: int
    lane: int
    column: int


def tmem_cell(m: int, n: int, *, rows: int, cols: int, cta_group: int = 1,
              lane_offset: int = 0, kind: Kind = Kind.F16,
              accumulator: str = "f32") -> TmemCell:
    """The cell of C[m, n] in the accumulator of a ``tcgen05.mma`` (dense A, no ``.ws``)
    with D of ``rows`` x ``cols`` (M x N) for operands of ``kind``, after seed 001 and
    the PTX ISA data-path layouts. The operand types decide which shapes exist (N in
    steps of 8 for one CTA, of 16 for a pair; `check_shape`), not where elements go. The
    accumulator is 32 bits wide (f32, or s32), one cell per element; 16-bit accumulators
    are not modelled (no kernel here uses them).

    * one CTA, M = 128: row m in lane m, column n;
    * one CTA, M = 64 (layout F): four groups of 16 rows in the four 32-lane quarters,
      at lane ``32 * (m // 16) + lane_offset + m % 16`` (``lane_offset`` 0 or 16);
    * a CTA pair, M = 256: rows 0-127 in the even CTA, 128-255 in the odd one, lane
      ``m % 128``;
    * a CTA pair, M = 128 (layout B): rows 0-63 in the even CTA, 64-127 in the odd one;
      in each, the first half of the columns in lanes 0-63 and the second half in
      lanes 64-127, both at columns 0..N/2-1.
    """
    if accumulator not in ("f32", "s32"):
        raise DescriptorError(f"an accumulator of type {accumulator}: the model has 32-bit "
                              "accumulators only")
    check_shape(kind, rows, cols, cta_group)
    if not (0 <= m < rows and 0 <= n < cols):
        raise IndexError(f"C[{m}, {n}] outside a {rows} x {cols} accumulator")
    if (cta_group, rows) == (1, 128):
        return TmemCell(0, m, n)
    if (cta_group, rows) == (1, 64):
        if lane_offset not in (0, 16):
            raise DescriptorError(f"lane offset {lane_offset}: expected 0 or 16")
        return TmemCell(0, 32 * (m // 16) + lane_offset + m % 16, n)
    if (cta_group, rows) == (2, 256):
        return TmemCell(m // 128, m % 128, n)
    if (cta_group, rows) == (2, 128):
        half = cols // 2
        return TmemCell(m // 64, m % 64 + (64 if n >= half else 0), n % half)
    raise AssertionError("unreachable: check_shape admits these four layouts only")


def tmem_address(base: int, lane: int, column: int) -> int:
    """The 32-bit tensor-memory address of a lane and column from an allocation's base."""
    return base + (lane << 16) + column
