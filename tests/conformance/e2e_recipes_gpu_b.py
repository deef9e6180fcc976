"""Recipes for the upstream ``gpu/end2end`` kernels in files ``m`` to ``w``.

Covered files: ``memreuse*.co``, ``numerics.co``, ``stream.co``, ``tiled_dma.co``, ``tma_*.co``,
``wgmma_*.co`` and ``wmma.co``. Each recipe was written by reading the file's host ``main``:
the argument shapes, value patterns and output buffers follow it, and the reference is the
host's check restated as a float64 torch formula.

Host fills that are written with unsigned index arithmetic (``(i * 7 + j) % 19 - 9`` on
``size_t``) wrap around for the negative half before the conversion to a float type, which
turns those elements into huge values (inf or NaN once rounded to f16). The evident intent is
the signed residue, and that is what these recipes use; for integer element types the two
readings agree.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from .e2e_helpers import (excluded, f64, gemm, index_grids, index_pattern, rand, rand_float,
                          rand_int, zeros)
from .e2e_recipe import TORCH_DTYPES, Recipe

F64 = torch.float64
Formula = Callable[..., torch.Tensor]


# ---------------------------------------------------------------------------------------------
# Input builders (random fills come from e2e_helpers)


def pattern(shape: tuple[int, ...], dtype: str, formula: Formula) -> torch.Tensor:
    """A tensor whose element at ``(i, j, ...)`` is ``formula(i, j, ...)``."""
    return formula(*index_grids(shape)).to(TORCH_DTYPES[dtype])


# ---------------------------------------------------------------------------------------------
# memreuse*.co: two u8 tensors staged through shared memory and added


def _u8_add() -> Recipe:
    return Recipe(
        args=lambda gen: [rand_int(gen, (8, 256), 0, 10, "u8"), rand_int(gen, (8, 256), 0, 10, "u8")],
        reference=lambda a, b: f64(a) + f64(b),
        note="values 0..10 as on the host, so the u8 sum cannot wrap")


# ---------------------------------------------------------------------------------------------
# numerics.co: transcendental built-ins, checked as the host does with |d| <= 2e-4 + 2e-4 |ref|


def _core6(x: torch.Tensor) -> torch.Tensor:
    x = f64(x)
    return (torch.sqrt(x + 2) + torch.rsqrt(x + 2) + torch.sin(x) + torch.sinh(x * 0.25)
            + torch.cos(x) + torch.cosh(x * 0.25))


def _unary_mix(x: torch.Tensor) -> torch.Tensor:
    x = f64(x)
    return (torch.acos(x * 0.5) + torch.asin(x * 0.5) + torch.atan(x) + torch.sin(x)
            + torch.cos(x) + torch.cosh(x * 0.25) + torch.sinh(x * 0.25) + torch.exp(x * 0.25)
            + torch.log(x + 2.5) + torch.log1p(x * 0.25 + 0.5) + torch.expm1(x * 0.25)
            + torch.sqrt(x + 2.5) + torch.rsqrt(x + 2.5) + torch.tan(x * 0.25) + torch.tanh(x))


def _binary_mix(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = f64(x), f64(y)
    return torch.pow(x + 1.5, y + 1.5) + torch.atan2(x, y)


def _numerics(reference: Formula, operands: int) -> Recipe:
    return Recipe(
        args=lambda gen: [rand_float(gen, (512,), -0.5, 1.0) for _ in range(operands)],
        reference=reference, rtol=2e-4, atol=2e-4,
        note="the host's tolerance 2e-4 + 2e-4*|ref| for f32 built-ins (approximate on GPUs)")


# ---------------------------------------------------------------------------------------------
# tiled_dma.co: tile copies through shared memory, filled with residue patterns

# (row factor, column factor, modulus, offset): element (i, j) = (i*a + j*b) % m - c; a rank-1
# fill uses (i*a + b) % m - c.
_RESIDUE_2D = {"s32": (17, 5, 41, 20), "f16": (7, 1, 19, 9), "f32": (13, 3, 37, 18),
               "s8": (7, 3, 127, 63)}
_RESIDUE_1D = {"s32": (17, 5, 41, 20), "f16": (7, 3, 19, 9), "s8": (7, 3, 127, 63)}


def residue(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    """The host's deterministic fill for ``dtype`` (signed residues, see the module note)."""
    if len(shape) == 1:
        a, b, m, c = _RESIDUE_1D[dtype]
        return pattern(shape, dtype, lambda i: (i * a + b) % m - c)
    a, b, m, c = _RESIDUE_2D[dtype]
    return index_pattern(shape, (a, b), m, -c, dtype)


def tile_copy(shape: tuple[int, ...], dtype: str,
              expect: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
              fill: Callable[[tuple[int, ...], str], torch.Tensor] = residue) -> Recipe:
    """One input of ``shape`` filled by ``fill``; the result is ``expect(input)``, exactly."""
    return Recipe(args=lambda gen: [fill(shape, dtype)], reference=lambda x: expect(f64(x)))


def rows_cols(rows: slice, cols: slice) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x[rows, cols]


def zero_rows_below(total: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The input followed by zero rows up to ``total`` (a shared tile zero-filled past the source)."""
    return lambda x: F.pad(x, (0, 0, 0, total - x.shape[0]))


def padded(low: tuple[int, int], high: tuple[int, int], value: int) -> Callable[..., torch.Tensor]:
    """``dma.pad<low, high, {0, 0}, value>`` of a rank-2 tile."""
    return lambda x: F.pad(x, (low[1], high[1], low[0], high[0]), value=value)


def _tail_fill(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    return index_pattern(shape, (3, 1), 29, -14, dtype)


def transposed(x: torch.Tensor) -> torch.Tensor:
    return x.T


# ---------------------------------------------------------------------------------------------
# tma_*.co


def _tma_copy(shape: tuple[int, ...]) -> Recipe:
    return Recipe(args=lambda gen: [rand_float(gen, shape, -10, 10, "f32")], reference=f64)


def _f32_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The float64 sum of two f32 values is exact; rounding it once gives the f32 sum.
    return (f64(a) + f64(b)).to(torch.float32).to(F64)


# ---------------------------------------------------------------------------------------------
# GEMMs (``gemm``: exact float64 / int64 products of the rounded inputs)


def gemm_rr(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """``mma.row.row``: rhs is [N, K] and the product is ``lhs @ rhs^T``."""
    return gemm(lhs, rhs, rhs_nk=True)


# wgmma_*.co operands: (m + 2k) % 3 * 0.5 and (2n + k) % 3 * 0.5. Every product is a multiple
# of 0.25 and every partial sum a multiple of 0.25 no larger than 128, which f16 (and so f32)
# holds exactly: the GEMMs are exact whatever the accumulator type or summation order.
_EXACT_NOTE = ("operands in {0, 0.5, 1}: every partial sum is a multiple of 0.25 up to 128, "
               "exact in an f16 or f32 accumulator, so the check is exact")


def wgmma_lhs(rows: int, k: int, dtype: str) -> torch.Tensor:
    return pattern((rows, k), dtype, lambda m, kk: ((m + 2 * kk) % 3) * 0.5)


def wgmma_rhs(cols: int, k: int, dtype: str) -> torch.Tensor:
    return pattern((cols, k), dtype, lambda n, kk: ((2 * n + kk) % 3) * 0.5)


_SS = (384, 384, 128)   # M, N, K of wgmma_ss.co's host


def wgmma_ss(dtype: str, out: str, *, m: int = _SS[0], n: int = _SS[1],
             transpose: bool = False) -> Recipe:
    """``kernel(lhs [M, K], rhs [N, K], output)`` writing ``lhs @ rhs^T`` (or its transpose)."""
    k = _SS[2]

    def args(gen: torch.Generator) -> list[Any]:
        shape = (n, m) if transpose else (m, n)
        return [wgmma_lhs(m, k, dtype), wgmma_rhs(n, k, dtype), zeros(shape, out)]

    def reference(lhs: torch.Tensor, rhs: torch.Tensor, output: torch.Tensor) -> dict[int, Any]:
        product = gemm_rr(lhs, rhs)
        return {2: product.T if transpose else product}

    return Recipe(args=args, reference=reference, note=_EXACT_NOTE, poison=(2,))


def _blockscale_n48() -> Recipe:
    m, n, k = _SS

    def args(gen: torch.Generator) -> list[Any]:
        return [wgmma_lhs(m, k, "f8_e4m3"), torch.ones(m, k // 128),
                wgmma_rhs(n, k, "f8_e4m3"), torch.ones(n // 48, k // 128), zeros((m, n), "f16")]

    def reference(lhs, scale_lhs, rhs, scale_rhs, output):  # type: ignore[no-untyped-def]
        return {4: blockscaled(lhs, scale_lhs, rhs, scale_rhs, 48)}

    return Recipe(args=args, reference=reference, poison=(4,),
                  note=_EXACT_NOTE + "; the host's scales are all 1")


def blockscaled(lhs: torch.Tensor, scale_lhs: torch.Tensor, rhs: torch.Tensor,
                scale_rhs: torch.Tensor, block_n: int, block_k: int = 128) -> torch.Tensor:
    """``sum_kb (lhs_kb @ rhs_kb^T) * scale_lhs[m, kb] * scale_rhs[n // block_n, kb]``."""
    out = torch.zeros(lhs.shape[0], rhs.shape[0], dtype=F64)
    for kb in range(scale_lhs.shape[1]):
        cols = slice(kb * block_k, (kb + 1) * block_k)
        col_scale = f64(scale_rhs[:, kb]).repeat_interleave(block_n)[: rhs.shape[0]]
        out += gemm_rr(lhs[:, cols], rhs[:, cols]) * f64(scale_lhs[:, kb])[:, None] * col_scale
    return out


def _wgmma_rs(with_lhs: bool) -> Recipe:
    def args(gen: torch.Generator) -> list[Any]:
        rhs = wgmma_rhs(64, 16, "f16")
        return [wgmma_lhs(64, 16, "f16"), rhs] if with_lhs else [rhs]

    def reference(*operands: torch.Tensor) -> torch.Tensor:
        if with_lhs:
            return gemm_rr(*operands)
        # An all-ones A fragment: every row of the result holds the row sums of B.
        return f64(operands[0]).sum(dim=1).expand(64, 64)

    return Recipe(args=args, reference=reference, note=_EXACT_NOTE)


# wgmma_persis.co


def hilbert_schedule(tiles_m: int, tiles_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tile coordinates in Hilbert-curve order over the smallest enclosing power-of-2 square."""
    size = 1
    while size < max(tiles_m, tiles_n):
        size *= 2
    rows: list[int] = []
    cols: list[int] = []
    for index in range(size * size):
        x, y = _hilbert_point(size, index)
        if x < tiles_m and y < tiles_n:
            rows.append(x)
            cols.append(y)
    return torch.tensor(rows, dtype=torch.int32), torch.tensor(cols, dtype=torch.int32)


def _hilbert_point(size: int, index: int) -> tuple[int, int]:
    x = y = 0
    scale = 1
    while scale < size:
        rx = 1 & (index // 2)
        ry = 1 & (index ^ rx)
        if ry == 0:
            if rx == 1:
                x, y = scale - 1 - x, scale - 1 - y
            x, y = y, x
        x += scale * rx
        y += scale * ry
        index //= 4
        scale *= 2
    return x, y


_PERSIS = (1536, 2048, 128)
_PERSIS_NOTE = ("f16 operands in [0, 2] with an f16 accumulator; the host's sampled check "
                "|d| <= 0.5 + 0.02*|ref|, applied here to every element")


def _persistent(schedule: bool) -> Recipe:
    m, n, k = _PERSIS

    def args(gen: torch.Generator) -> list[Any]:
        operands = [rand_float(gen, (m, k), 0, 2, "f16"), rand_float(gen, (n, k), 0, 2, "f16"),
                    zeros((m, n), "f16")]
        return operands + list(hilbert_schedule(m // 64, n // 128)) if schedule else operands

    def reference(lhs: torch.Tensor, rhs: torch.Tensor, *rest: torch.Tensor) -> dict[int, Any]:
        return {2: gemm_rr(lhs, rhs)}

    return Recipe(args=args, reference=reference, rtol=0.02, atol=0.5, poison=(2,),
                  note=_PERSIS_NOTE)


def _blockscale_persistent() -> Recipe:
    m, n, k = 512, 2048, 128

    def args(gen: torch.Generator) -> list[Any]:
        return [rand_float(gen, (m, k), 0, 2, "f8_e4m3"), rand_float(gen, (m, 1), 1, 3),
                rand_float(gen, (n, k), 0, 2, "f8_e4m3"), rand_float(gen, (n // 128, 1), 1, 3),
                zeros((m, n), "f16")]

    def reference(lhs, scale_lhs, rhs, scale_rhs, output):  # type: ignore[no-untyped-def]
        return {4: blockscaled(lhs, scale_lhs, rhs, scale_rhs, 128)}

    return Recipe(args=args, reference=reference, rtol=0.08, atol=0.5, poison=(4,),
                  note="e4m3 operands in [0, 2], scales in [1, 3], f16 accumulator; the host's "
                       "sampled check |d| <= 0.5 + 0.08*|ref|, applied to every element")


# wmma.co: lhs @ rhs with 16x16 (8x8) warp tiles; the host checks |d / ref| < tolerance.


def wmma(dtype: str, shape: tuple[int, int, int] = (128, 256, 256), *, lo: int = 1, hi: int = 10,
         rr: bool = False, rtol: float = 0.0, note: str = "", compile_only: bool = False,
         extra: tuple[Any, ...] = ()) -> Recipe:
    m, n, k = shape

    def args(gen: torch.Generator) -> list[Any]:
        lhs = rand(gen, (m, k), lo, hi, dtype)
        return [lhs, rand(gen, (n, k) if rr else (k, n), lo, hi, dtype), *extra]

    def reference(lhs: torch.Tensor, rhs: torch.Tensor, *rest: Any) -> torch.Tensor:
        return gemm(lhs, rhs, rhs_nk=rr)

    return Recipe(args=args, reference=reference, rtol=rtol, note=note, compile_only=compile_only)


_WMMA_NOTE = ("operands in [1, 10]; the host's relative check |d| < 0.005*|ref| covers f16/bf16 "
              "product rounding and tf32 operands")
_SUB_BYTE = "sub-byte float element type ({}) has no torch storage type"

_TILED = "gpu/end2end/tiled_dma.co"
_WGMMA_SS = "gpu/end2end/wgmma_ss.co"

RECIPES: dict[tuple[str, str], Recipe] = {
    ("gpu/end2end/memreuse-static.co", "mem_reuse_static"): _u8_add(),
    ("gpu/end2end/memreuse.co", "mem_reuse_dynamic"): _u8_add(),
    ("gpu/end2end/numerics.co", "numerics_core6"): _numerics(_core6, 1),
    ("gpu/end2end/numerics.co", "unary_mix"): _numerics(_unary_mix, 1),
    ("gpu/end2end/numerics.co", "binary_mix"): _numerics(_binary_mix, 2),
    ("gpu/end2end/stream.co", "foo"): excluded(
        "OUT", "prints from device code (println) on a caller-provided CUDA stream; no data result"),
    # tiled_dma.co
    (_TILED, "foo1"): tile_copy((32, 32), "s32"),
    (_TILED, "foo2"): tile_copy((31, 32), "f16", zero_rows_below(32)),
    (_TILED, "foo3"): tile_copy((32, 1024), "f16", rows_cols(slice(0, 7), slice(0, 32))),
    (_TILED, "foo4"): tile_copy((32, 64), "s32"),
    (_TILED, "foo5"): tile_copy((31, 64), "f16", zero_rows_below(32)),
    (_TILED, "foo6"): tile_copy((128, 128), "f32", rows_cols(slice(32, 64), slice(64, 96))),
    (_TILED, "foo7"): tile_copy((64, 32), "s32"),
    (_TILED, "foo8"): tile_copy((16, 48), "s32"),
    (_TILED, "foo9"): tile_copy((32, 128), "s8"),
    (_TILED, "foo10"): tile_copy((13, 32), "s32"),
    (_TILED, "foo11"): tile_copy((13, 64), "s32"),
    (_TILED, "foo12"): tile_copy((64, 64), "f16"),
    (_TILED, "foo13"): tile_copy((128, 128), "f16"),
    (_TILED, "foo14"): tile_copy((4, 128), "f16"),
    (_TILED, "foo15"): tile_copy((128, 16), "s32"),
    (_TILED, "foo16"): tile_copy((64, 128), "s8", rows_cols(slice(0, 32), slice(0, 64))),
    (_TILED, "foo17"): tile_copy((48, 64), "s32", rows_cols(slice(0, 16), slice(0, 32))),
    (_TILED, "foo18"): tile_copy((64, 128), "s8", rows_cols(slice(0, 13), slice(0, 64))),
    (_TILED, "foo19"): tile_copy((128, 128), "s32", rows_cols(slice(32, 64), slice(64, 96))),
    (_TILED, "foo20"): tile_copy((64, 128), "s32", transposed),
    (_TILED, "foo21"): tile_copy((64, 64), "s32", lambda x: x[:16, :32].T),
    (_TILED, "foo22"): tile_copy((32, 64), "s32", padded((2, 4), (2, 4), 99)),
    (_TILED, "foo23"): tile_copy((32, 64), "s32", padded((2, 4), (2, 4), 99)),
    (_TILED, "foo24"): tile_copy((30, 60), "s32", padded((2, 1), (3, 2), -1)),
    (_TILED, "foo25"): tile_copy((128,), "s32"),
    (_TILED, "foo26"): tile_copy((256,), "f16"),
    (_TILED, "foo27"): tile_copy((64,), "s32"),
    (_TILED, "foo28"): tile_copy((512,), "s8"),
    (_TILED, "copy_tail_m"): tile_copy((70, 64), "f16", fill=_tail_fill),
    (_TILED, "copy_tail_k"): tile_copy((64, 72), "f16", fill=_tail_fill),
    (_TILED, "copy_tail_mk"): tile_copy((70, 72), "f16", fill=_tail_fill),
    # tma_*.co
    ("gpu/end2end/tma_f32.co", "tma_copy_async"): _tma_copy((6, 16, 64)),
    ("gpu/end2end/tma_f32.co", "tma_copy_multi_subspan"): _tma_copy((6, 16, 64)),
    ("gpu/end2end/tma_f32.co", "tma_copy_tiled"): _tma_copy((6, 16, 128)),
    ("gpu/end2end/tma_f32.co", "tma_ab_buffer_fp8"): Recipe(
        args=lambda gen: [rand_float(gen, (16, 16, 128), -2, 2, "f8_e4m3") for _ in range(2)],
        reference=lambda a, b: f64(a) + f64(b), atol=0.2,
        note="the host's |d| <= 0.2: an e4m3 + e4m3 sum (|sum| <= 4) rounded to e4m3 is off "
             "by at most 0.125"),
    ("gpu/end2end/tma_v2.co", "tma_ab_buffer"): Recipe(
        args=lambda gen: [rand_float(gen, (6, 16, 128), -10, 10) for _ in range(2)],
        reference=_f32_sum, compile_only=True,
        note="upstream's RUN line is disabled (NOTRUNYET); exact f32 sums as its host checks"),
    ("gpu/end2end/tma_fp6_fp4.co", "tma_ab_buffer_f6"): excluded(
        "ESC", _SUB_BYTE.format("f6_e2m3")),
    ("gpu/end2end/tma_fp6_fp4.co", "tma_ab_buffer_f4"): excluded(
        "ESC", _SUB_BYTE.format("f4_e2m1")),
    # wgmma_*.co
    ("gpu/end2end/wgmma_rs.co", "wgmma_rs1"): _wgmma_rs(with_lhs=False),
    ("gpu/end2end/wgmma_rs.co", "wgmma_rs2"): _wgmma_rs(with_lhs=True),
    (_WGMMA_SS, "matmul_e4m3"): wgmma_ss("f8_e4m3", "f32"),
    (_WGMMA_SS, "matmul_f16"): wgmma_ss("f16", "f16"),
    (_WGMMA_SS, "matmul_e4m3_mwg"): wgmma_ss("f8_e4m3", "f16"),
    (_WGMMA_SS, "matmul_e4m3_mwg_tbc"): wgmma_ss("f8_e4m3", "f16"),
    (_WGMMA_SS, "blockscale_gemm_e4m3_n48"): _blockscale_n48(),
    (_WGMMA_SS, "matmul_f16_tbc"): wgmma_ss("f16", "f16"),
    (_WGMMA_SS, "matmul_st_trans"): wgmma_ss("f16", "f16", transpose=True),
    (_WGMMA_SS, "matmul_st_masked"): wgmma_ss("f16", "f16", m=70, n=130),
    (_WGMMA_SS, "matmul_f16_ws_1p1c"): wgmma_ss("f16", "f16"),
    (_WGMMA_SS, "matmul_f16_ws_1p3c"): wgmma_ss("f16", "f16"),
    (_WGMMA_SS, "matmul_e4m3_ws_tbc"): wgmma_ss("f8_e4m3", "f16"),
    ("gpu/end2end/wgmma_persis.co", "matmul_persis_hilbert_sm90"): _persistent(schedule=True),
    ("gpu/end2end/wgmma_persis.co", "matmul_f16_ws_1p3c_persis"): _persistent(schedule=False),
    ("gpu/end2end/wgmma_persis.co", "blockscale_gemm_e4m3_ws_persis"): _blockscale_persistent(),
    # wmma.co
    ("gpu/end2end/wmma.co", "matmul_f16_f32"): wmma("f16", rtol=0.005, note=_WMMA_NOTE),
    ("gpu/end2end/wmma.co", "matmul_f16_f16"): wmma(
        "f16", rtol=0.005, note=_WMMA_NOTE + "; also the f16 accumulator's rounding"),
    ("gpu/end2end/wmma.co", "matmul_bf16_f32"): wmma("bf16", rtol=0.005, note=_WMMA_NOTE),
    ("gpu/end2end/wmma.co", "matmul_s8_s32"): wmma("s8"),
    ("gpu/end2end/wmma.co", "matmul_u8_s32"): wmma("u8"),
    ("gpu/end2end/wmma.co", "matmul_tf32_f32"): wmma("f32", rtol=0.005, note=_WMMA_NOTE),
    ("gpu/end2end/wmma.co", "matmul_rr"): wmma(
        "f16", lo=0, hi=1, rr=True, rtol=0.005, compile_only=True,
        note="upstream never calls it (and its check is commented out); operands in [0, 1], "
             "the commented-out relative tolerance 0.005"),
    ("gpu/end2end/wmma.co", "matmul_mc_array"): wmma(
        "f16", (128, 256, 64), rtol=0.002, compile_only=True,
        note="upstream never calls it; operands in [1, 10], its relative tolerance 0.002"),
    ("gpu/end2end/wmma.co", "matmul_cmma"): wmma(
        "s8", (128, 128, 64), lo=-10, hi=10, compile_only=True, extra=(1,),
        note="upstream never calls it; accumulator element [0][1] selected by i = 1; exact"),
}
