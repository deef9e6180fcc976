"""The Moore Threads S5000 tensor engine (compile target ``mp_31``) as data: which MMA
element types and shapes its warp-level (WMMA) and warpgroup-level (SQMMA) instructions
take, and what its tensor memory engine (TME) copies can do.

Every number here comes from the vendor's tensor-programming guide for the S5000 (seed
003); the comment above each table names the section it comes from. Nothing else in the
compiler knows these numbers: the rules in ``rules_s5000`` read them from here, and
the error-code page quotes them through the diagnostics.

Croqtile element types stand for the guide's C types: f16 = ``__half``, bf16 =
``__mt_bfloat16``, f8_e4m3 / f8_e5m2 = ``__mt_fp8_e4m3`` / ``__mt_fp8_e5m2``, s8 =
``signed char``, u8 = ``unsigned char``, s32 = ``int``, f32 = ``float`` and tf32 = the
TF32 precision tag. An f32 MMA operand is a tf32 operand, as on every other target
(language spec 3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[int, int, int]  # M x N x K of one instruction


@dataclass(frozen=True)
class MmaRow:
    """One row of an MMA table: operand types (A, B), the accumulator type, the shapes
    (M x N x K) one instruction computes and the memory layouts it can store the
    accumulator in ("row": ``mma.store``; "col": ``mma.store.transp``)."""

    operands: tuple[tuple[str, str], ...]
    acc: str
    shapes: tuple[Shape, ...]
    layouts: frozenset[str]

    @property
    def label(self) -> str:
        """The row as a reader finds it in the guide: ``f16 x f16 -> f32``."""
        pairs = " | ".join(f"{a} x {b}" for a, b in self.operands)
        return f"{pairs} -> {self.acc}"


_ROW_COL = frozenset({"row", "col"})
_ROW = frozenset({"row"})
_K16_32 = ((16, 16, 16), (16, 16, 32))


def _same(*types: str) -> tuple[tuple[str, str], ...]:
    return tuple((t, t) for t in types)


# Seed 003, section "WMMA / 支持组合" (supported combinations): one row per line of the
# guide's table. The guide pairs f16 or bf16 with signed char in one row; it does not say
# which side is which, so both orders are listed.
WMMA_ROWS: tuple[MmaRow, ...] = (
    MmaRow(_same("f16"), "f32", _K16_32, _ROW_COL),
    MmaRow(_same("bf16"), "f32", _K16_32, _ROW_COL),
    MmaRow(_same("f8_e4m3"), "f32", _K16_32, _ROW_COL),
    MmaRow(_same("f8_e5m2"), "f32", _K16_32, _ROW_COL),
    MmaRow((("f16", "s8"), ("s8", "f16"), ("bf16", "s8"), ("s8", "bf16")), "f32", _K16_32,
           _ROW_COL),
    MmaRow(_same("s8"), "s32", _K16_32 + ((16, 16, 64),), _ROW_COL),
    MmaRow(_same("u8"), "s32", _K16_32 + ((16, 16, 64),), _ROW_COL),
    MmaRow(_same("tf32"), "f32", ((16, 16, 16),), _ROW_COL),
    MmaRow(_same("tf32"), "f32", ((16, 8, 4),), _ROW),  # the guide: row-major output only
)


def _grid(mn: str, ks: tuple[int, ...]) -> tuple[Shape, ...]:
    """Shapes written as the guide lists them: every ``MxN`` pair with every K."""
    pairs = [tuple(int(x) for x in pair.split("x")) for pair in mn.split()]
    return tuple((m, n, k) for m, n in pairs for k in ks)


# Seed 003, section "SQMMA / 支持组合": the three shape lists. Within each list every
# M x N pair comes with the same three K values, so the lists are written as pairs x Ks.
_SQMMA_HALF_MN = "16x64 32x32 32x64 32x128 64x16 64x32 64x64 64x128 128x32 128x64 128x128"
SQMMA_ROWS: tuple[MmaRow, ...] = (
    MmaRow(_same("f16", "bf16"), "f32", _grid(_SQMMA_HALF_MN, (16, 32, 64)), _ROW_COL),
    MmaRow(_same("s8", "u8"), "s32", _grid(_SQMMA_HALF_MN, (32, 64, 128)), _ROW_COL),
    MmaRow(_same("tf32"), "f32",
           _grid("16x64 32x32 32x64 64x16 64x32 64x64 128x64 128x128", (8, 16, 32)), _ROW_COL),
)

# Seed 003, section "TME tile、im2col、swizzle": tile copies have rank 1 to 5. (The
# checker's TMA rank rule, CQ0437, has the same limit for every target.)
TME_TILE_RANKS = range(1, 6)

# Seed 003, section "TME swizzle": the (SG, SS, SL) combinations a rank-1 tile load or
# store may use, in bytes (SG swizzle granularity, 0 = none; SS swizzle stride; SL the
# contiguous length of the tile's data). The guide lists them for rank-1 tiles only.
TME_SWIZZLE_RANK = 1
TME_SWIZZLES: frozenset[tuple[int, int, int]] = frozenset({
    (0, 256, 256),
    (16, 32, 128), (16, 64, 128), (16, 128, 128),
    (32, 64, 128), (32, 128, 128),
    (16, 32, 256), (16, 64, 256), (16, 128, 256), (16, 256, 256),
    (32, 64, 256), (32, 128, 256), (32, 256, 256),
    (64, 128, 256), (64, 256, 256),
})

# How Croqtile's `.swiz<N>` reads as a TME configuration: N bytes is the swizzle stride
# (SS) and the permuted unit is 16 bytes (SG), which is what `.swiz<N>` means on the
# NVIDIA targets (16-byte chunks permuted within N bytes). SL is the tile's own length.
TME_SWIZZLE_GRANULE = 16


@dataclass(frozen=True)
class EngineTables:
    """What a target's tensor engine takes, for the checker's engine rules."""

    name: str  # as diagnostics name the target: "S5000"
    wmma: tuple[MmaRow, ...]
    sqmma: tuple[MmaRow, ...]
    swizzles: frozenset[tuple[int, int, int]]
    swizzle_rank: int
    swizzle_granule: int


S5000 = EngineTables("S5000", WMMA_ROWS, SQMMA_ROWS, TME_SWIZZLES, TME_SWIZZLE_RANK,
                     TME_SWIZZLE_GRANULE)


def operand_types(rows: tuple[MmaRow, ...]) -> frozenset[str]:
    """Every operand element type some row of ``rows`` takes."""
    return frozenset(t for row in rows for pair in row.operands for t in pair)
