"""Recipes for the upstream ``tests/gpu/end2end`` files whose names start with a..i.

Each recipe builds the arguments the way that file's host ``main`` does (shapes, value
ranges, index patterns, defines) and states the expected result in float64 (or exactly,
for integers). Tolerances are the host check's unless a note says otherwise. See
``e2e_recipe.Recipe`` for the fields and ``e2e_upstream`` for how they are used.

Precision notes for the GEMMs: references are exact (float64 over the rounded inputs).
Kernels that accumulate in f16 (``mma.fill 0.0`` on f16 operands) round partial sums; the
host's relative tolerances (0.5% for positive operands in [1, 10)) cover a few roundings
of 2**-11 each, which is what MMA tiles of K=16 produce.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .e2e_helpers import (add_reference, cast, dtype_of, excluded, f64, gemm, identity,
                          index_grids, index_pattern, rand, rand_float, rand_int, zeros)
from .e2e_recipe import Recipe

GPU = "gpu/end2end/"
Key = tuple[str, str]

SUB_BYTE_FLOAT = "sub-byte float dtype (fp6/fp4): no torch or Triton storage type"
SUB_BYTE_INT = "sub-byte integer dtype: no torch or Triton storage type"
INLINE_PTX = "inline PTX (__asm__): Triton only offers element-wise inline asm"
HETERO = "heterogeneous CPU+GPU program (-t hetero, parallel.async : device(...))"


def _pair(shape: tuple[int, ...], lo: float, hi: float, dtype: str) -> Callable[..., list[Any]]:
    """Arguments: two tensors filled like ``fill_random(lo, hi)``."""
    return lambda g: [rand(g, shape, lo, hi, dtype), rand(g, shape, lo, hi, dtype)]


def _add(shape: tuple[int, ...], dtype: str, out: str | None = None, lo: float = -10,
         hi: float = 10, atol: float = 0.0, note: str = "") -> Recipe:
    """An element-wise add of two random tensors, stored as ``out``."""
    return Recipe(args=_pair(shape, lo, hi, dtype), reference=add_reference(out or dtype),
                  atol=atol, note=note)


def _copy(args: Callable[[torch.Generator], list[Any]], note: str = "") -> Recipe:
    """A kernel that returns its input unchanged (checked exactly)."""
    return Recipe(args=args, reference=identity, note=note)


# ----------------------------------------------------------------------------- add*, copy


def _add_span_as(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).reshape(6, 64)


ADD: dict[Key, Recipe] = {
    (GPU + "add-shared.co", "ele_add"): _add((6, 17, 64), "s32"),
    (GPU + "add.co", "ele_add_span_as"): Recipe(args=_pair((2, 3, 64), -10, 10, "s32"),
                                                reference=_add_span_as),
    (GPU + "add.co", "ele_add_local_dma"): _add((6, 17, 64), "s32"),
    (GPU + "add_fp6_fp4.co", "ele_add_f6"): excluded("ESC", SUB_BYTE_FLOAT),
    (GPU + "add_fp6_fp4.co", "ele_add_f4"): excluded("ESC", SUB_BYTE_FLOAT),
}

COPY: dict[Key, Recipe] = {
    (GPU + "copy.co", "dma_copy_sync"): _copy(lambda g: [rand_int(g, (6, 17, 64), -10, 10)]),
    (GPU + "copy.co", "dma_copy_async"): _copy(lambda g: [rand_int(g, (6, 17, 64), -10, 10)]),
    (GPU + "copy.co", "dma_copy_group"): _copy(lambda g: [rand_int(g, (6, 17, 32), -10, 10)],
                                               note="M = 6"),
    # Every warp writes the whole shared sum back; the result is the plain sum.
    (GPU + "copy.co", "dma_add"): _add((6, 17, 32), "s32", note="M = 6, N = 17"),
    (GPU + "copy.co", "dma_add1"): _add((6, 17, 32), "s32", note="M = 6, N = 17"),
    (GPU + "copy_fp6_fp4.co", "dma_copy_sync_f6_e3m2"): excluded("ESC", SUB_BYTE_FLOAT),
    (GPU + "copy_fp6_fp4.co", "dma_copy_sync_f6_e2m3"): excluded("ESC", SUB_BYTE_FLOAT),
    (GPU + "copy_fp6_fp4.co", "dma_copy_sync_f4_e2m1"): excluded("ESC", SUB_BYTE_FLOAT),
}


# ----------------------------------------------------------------------------- ampere_mma.co


def _pattern(shape: tuple[int, int], row: float, col: float) -> torch.Tensor:
    """``f16(i * row + j * col)`` computed in float32, as the host's nested loops do."""
    i, j = (g.to(torch.float32) for g in index_grids(shape))
    return (i * row + j * col).to(torch.float16)


def _mma(m: int, k: int, n: int, out: str, dtype: str = "f16", lo: float = 1, hi: float = 10,
         rtol: float = 0.005, note: str = "") -> Recipe:
    """``lhs [m,k] @ rhs [k,n]`` of operands filled like ``fill_random``."""
    return Recipe(args=lambda g: [rand(g, (m, k), lo, hi, dtype), rand(g, (k, n), lo, hi, dtype)],
                  reference=lambda a, b: gemm(a, b, out), rtol=rtol, note=note)


def _fusion_args(g: torch.Generator) -> list[Any]:
    lhs, rhs = rand_float(g, (128, 256), 1, 10, "f16"), rand_float(g, (256, 256), 1, 10, "f16")
    bias = float(rand_float(g, (1,), 1, 10, "f16")[0])
    return [lhs, rhs, bias]


def _fusion_reference(lhs: torch.Tensor, rhs: torch.Tensor, bias: float) -> torch.Tensor:
    return cast(gemm(lhs, rhs) + bias, "f16")


def _pattern_mma(m: int, k: int, n: int, lhs: tuple[float, float], rhs: tuple[float, float],
                 out: str, rtol: float, init: float = 0.0, note: str = "") -> Recipe:
    """A GEMM of the host's index-pattern operands, accumulator starting at ``init``."""
    return Recipe(args=lambda g: [_pattern((m, k), *lhs), _pattern((k, n), *rhs)],
                  reference=lambda a, b: cast(gemm(a, b) + init, out), rtol=rtol, note=note)


# The *_sm86 kernels have symbolic M, N, K (upstream pops the defines) and are only
# compiled upstream; these sizes are ours: 16 x 8 output tiles, so the persistent kernels
# (82 blocks) take two rounds of their tile loop.
SM86_M, SM86_N, SM86_K = 256, 128, 64


def _nt_args(g: torch.Generator, transposed: bool = False) -> list[Any]:
    lhs = rand_float(g, (SM86_M, SM86_K), 1, 10, "f16")
    rhs = rand_float(g, (SM86_N, SM86_K), 1, 10, "f16")
    out = zeros((SM86_N, SM86_M) if transposed else (SM86_M, SM86_N), "f16")
    return [lhs, rhs, out]


def _nt_reference(lhs: torch.Tensor, rhs: torch.Tensor, out: torch.Tensor,
                  *schedule: torch.Tensor) -> dict[int, torch.Tensor]:
    return {2: gemm(lhs, rhs, "f16", rhs_nk=True)}


def _nt_transposed_reference(lhs: torch.Tensor, rhs: torch.Tensor,
                             out: torch.Tensor) -> dict[int, torch.Tensor]:
    return {2: gemm(lhs, rhs, "f16", rhs_nk=True).T.contiguous()}


def _scheduled_args(g: torch.Generator) -> list[Any]:
    """NT GEMM operands plus tile-order tables: a random permutation of all tiles."""
    tiles_m, tiles_n = SM86_M // 16, SM86_N // 16
    order = torch.randperm(tiles_m * tiles_n, generator=g)
    return [*_nt_args(g), (order // tiles_n).to(torch.int32), (order % tiles_n).to(torch.int32)]


def _nt(args: Callable[[torch.Generator], list[Any]] = _nt_args,
        reference: Callable[..., Any] = _nt_reference, note: str = "") -> Recipe:
    sizes = f"M={SM86_M}, N={SM86_N}, K={SM86_K} (ours: upstream only compiles it)"
    return Recipe(args=args, reference=reference, rtol=0.005, poison=(2,), compile_only=True,
                  note=f"{sizes}{'; ' + note if note else ''}")


AMPERE = GPU + "ampere_mma.co"
AMPERE_MMA: dict[Key, Recipe] = {
    (AMPERE, "matmul_group_rc"): _mma(128, 256, 256, "f16", note="f16 accumulator"),
    (AMPERE, "matmul_pipeline"): _mma(64, 16, 32, "f16", rtol=0.002,
                                      note="host: 1e-3 + 0.2% on an 8x8 subset; all checked"),
    (AMPERE, "matmul_fusion_scalar"): Recipe(args=_fusion_args, reference=_fusion_reference,
                                             rtol=0.005, note="f16 accumulator plus a bias"),
    (AMPERE, "matmul_loadc"): _pattern_mma(
        256, 256, 256, (0.02, 0.01), (0.07, 0.03), "f16", rtol=0.007,
        note="host check under if(false); the output round-trips through f16 every K tile"),
    (AMPERE, "mma_m8n8k4_f16_f16"): _pattern_mma(
        128, 64, 256, (0.02, 0.1), (0.1, 0.03), "f16", rtol=0.005, init=1.5,
        note="accumulator re-filled with 1.5"),
    (AMPERE, "mma_m8n8k16_s8_s32"): _mma(128, 64, 128, "s32", dtype="s8", lo=-10, hi=10, rtol=0),
    (AMPERE, "mma_m16n8k8_f16_f32"): _pattern_mma(
        64, 64, 128, (0.02, 0.1), (0.07, 0.03), "f32", rtol=0.002),
    (AMPERE, "matmul_f16_sm86"): _nt(),
    (AMPERE, "matmul_trans_sm86"): _nt(lambda g: _nt_args(g, transposed=True),
                                       _nt_transposed_reference),
    (AMPERE, "matmul_persis_sta_sm86"): _nt(),
    (AMPERE, "matmul_persis_colmajor_sm86"): _nt(),
    (AMPERE, "matmul_persis_swizzle_sm86"): _nt(_scheduled_args,
                                                note="tile order: a random permutation"),
    (AMPERE, "matmul_persis_hilbert_sm86"): _nt(_scheduled_args,
                                                note="tile order: a random permutation"),
}


# ----------------------------------------------------------------------------- a..c, misc


def _histogram_reference(values: torch.Tensor) -> torch.Tensor:
    return torch.bincount(values.to(torch.int64) % 16, minlength=16).to(torch.int32)


MISC: dict[Key, Recipe] = {
    **{(GPU + "asm_basic.co", name): excluded("ESC", INLINE_PTX)
       for name in ("test_volatile_copy", "test_basic_copy", "test_readwrite",
                    "test_named_copy", "test_named_readwrite")},
    (GPU + "atomic_add.co", "histogram_shared"): Recipe(
        args=lambda g: [torch.arange(256, dtype=torch.int32)], reference=_histogram_reference),
    (GPU + "cooperative_grid_sync.co", "coop_grid_sync"): excluded(
        "ESC", "grid-wide barrier under a cooperative launch: Triton has none"),
    (GPU + "debug_rtti_GDB_types.co", "debug_builtin_non_scalar_types"): excluded(
        "OUT", "debugger test: prints values for cuda-gdb, no data result"),
    **{(GPU + f"hetero_cpu_gpu{suffix}.co", name): excluded("OUT", HETERO)
       for suffix, name in (("", "hetero_add"), ("_dma", "hetero_dma_roundtrip"),
                            ("_multi", "hetero_multi_phase"),
                            ("_scale", "hetero_parallel_scale"))},
    (GPU + "hopper_mma.co", "matmul_f6"): excluded("ESC", SUB_BYTE_FLOAT),
    (GPU + "hopper_mma.co", "matmul_f4"): excluded("ESC", SUB_BYTE_FLOAT),
}


# ----------------------------------------------------------------------------- gemm_sp.co

def _sparse_lhs(gen: torch.Generator, m: int, k: int, dtype: str) -> torch.Tensor:
    """The host's 2:4 A: in each group of four columns two distinct random positions hold
    uniform values in [-1, 1) (a value that rounds to 0 becomes +1 or -1), the rest 0."""
    groups = k // 4
    first = torch.randint(0, 4, (m, groups), generator=gen)
    second = (first + torch.randint(1, 4, (m, groups), generator=gen)) % 4  # distinct
    values = rand_float(gen, (m, groups, 2), -1, 1, dtype).to(torch.float32)
    values[..., 0][values[..., 0] == 0] = 1.0
    values[..., 1][values[..., 1] == 0] = -1.0
    dense = torch.zeros(m, groups, 4)
    dense.scatter_(2, torch.stack([first, second], dim=-1), values)
    return dense.reshape(m, k).to(dtype_of(dtype))


def _sparse_rhs(gen: torch.Generator, n: int, k: int, dtype: str) -> torch.Tensor:
    """B [N, K]: uniform in [-1, 1), values under 0.1 in magnitude pushed to +-0.25."""
    values = rand_float(gen, (n, k), -1, 1)
    small = values.abs() < 0.1
    values[small] = torch.where(values[small] < 0, -0.25, 0.25)
    return values.to(dtype_of(dtype))


def _pack(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The host's WGMMA encoding (spec 5.8), written out independently of the library's
    encoder: the two non-zero positions i0 < i1 of each group, packed values in column
    order, nibble i0 | i1 << 2, two groups per byte (even group low)."""
    m, k = dense.shape
    nonzero = (dense.to(torch.float32) != 0).reshape(m, k // 4, 4)
    positions = torch.nonzero(nonzero)[:, 2].reshape(m, k // 4, 2)  # row-major: i0 < i1
    bits = dense.view(torch.uint8 if dense.element_size() == 1 else torch.int16)
    packed = bits.reshape(m, k // 4, 4).gather(2, positions).reshape(m, k // 2)
    nibbles = positions[..., 0] | positions[..., 1] << 2
    meta = (nibbles[:, 0::2] | nibbles[:, 1::2] << 4).to(torch.uint8)
    return packed.view(dense.dtype), meta


def _unpack_reference(packed: torch.Tensor, meta: torch.Tensor, rhs: torch.Tensor
                      ) -> torch.Tensor:
    """A_dense @ Bᵀ in float64, A_dense[m, 4g + i_t] = packed[m, 2g + t]."""
    m, half = packed.shape
    dense = torch.zeros(m, 2 * half, dtype=torch.float64)
    values = f64(packed)
    for g in range(half // 2):
        nibble = (meta[:, g // 2].to(torch.int64) >> (4 * (g % 2))) & 0xF
        for t, index in enumerate((nibble & 3, nibble >> 2)):
            dense[torch.arange(m), 4 * g + index] = values[:, 2 * g + t]
    return dense @ f64(rhs).T


def _gemm_sp(n: int, k: int, dtype: str, atol: float) -> Recipe:
    """One gemm_sp.co kernel: M = 64, the host's inputs and its absolute tolerance."""
    def args(gen: torch.Generator) -> list[Any]:
        packed, meta = _pack(_sparse_lhs(gen, 64, k, dtype))
        return [packed, meta, _sparse_rhs(gen, n, k, dtype)]
    return Recipe(args=args, reference=_unpack_reference, atol=atol)


SP = GPU + "gemm_sp.co"
GEMM_SP: dict[Key, Recipe] = {
    (SP, "matmul_f16_n32_k64"): _gemm_sp(32, 64, "f16", 0.1),
    (SP, "matmul_f16_n32_k32"): _gemm_sp(32, 32, "f16", 0.1),
    (SP, "matmul_fp8_n32"): _gemm_sp(32, 64, "f8_e4m3", 0.5),
    (SP, "matmul_fp8_n64"): _gemm_sp(64, 64, "f8_e4m3", 0.5),
    (SP, "matmul_fp8_n8"): _gemm_sp(8, 64, "f8_e4m3", 0.5),
    (SP, "matmul_f16_n8k64"): _gemm_sp(8, 64, "f16", 0.1),
    (SP, "matmul_bf16_n8k64"): _gemm_sp(8, 64, "bf16", 0.2),
    (SP, "matmul_f16_n16_k64"): _gemm_sp(16, 64, "f16", 0.1),
}


# ----------------------------------------------------------------------------- dma_3d, 4d/5d

# The host fills: (sum of index * coefficient) % modulo + offset, per dtype and rank.
_S32_3D, _F16_3D, _S8_3D = ((31, 17, 5), 41, -20), ((11, 7, 1), 19, -9), ((7, 3, 1), 127, -63)
_S32_4D, _F16_4D = ((31, 17, 5, 3), 41, -20), ((11, 7, 3, 1), 19, -9)
_S32_5D = ((31, 17, 13, 5, 3), 41, -20)


def _filled(shape: tuple[int, ...], fill: tuple[tuple[int, ...], int, int], dtype: str,
            note: str = "") -> Recipe:
    """A copy kernel of one index-pattern tensor."""
    return _copy(lambda g: [index_pattern(shape, *fill, dtype)], note=note)


D3 = GPU + "dma_3d.co"
D45 = GPU + "dma_4d5d.co"
DMA_ND: dict[Key, Recipe] = {
    (D3, "test_flat_s32"): _filled((2, 4, 8), _S32_3D, "s32"),
    (D3, "test_flat_f16"): _filled((3, 8, 16), _F16_3D, "f16"),
    (D3, "test_flat_async"): _filled((2, 8, 32), _S32_3D, "s32"),
    (D3, "test_flat_large"): _filled((4, 16, 32), _S32_3D, "s32"),
    (D3, "test_flat_s8"): _filled((2, 16, 64), _S8_3D, "s8"),
    (D3, "test_batch_s32"): _filled((2, 4, 8), _S32_3D, "s32"),
    (D3, "test_batch_f16"): _filled((3, 8, 16), _F16_3D, "f16"),
    (D3, "test_batch_async"): _filled((2, 8, 32), _S32_3D, "s32"),
    (D3, "test_mixed_flatten"): _filled((3, 4, 8), _S32_3D, "s32"),
    (D3, "test_mixed_flatten_f16"): _filled((4, 8, 16), _F16_3D, "f16"),
    (D3, "test_mixed_batch"): _filled((2, 4, 8), _S32_3D, "s32"),
    (D3, "test_mixed_batch_inner_static"): _filled((3, 4, 8), _S32_3D, "s32"),
    (D45, "test_4d_flat_s32"): _filled((2, 3, 4, 8), _S32_4D, "s32"),
    (D45, "test_4d_flat_f16"): _filled((2, 2, 4, 16), _F16_4D, "f16"),
    (D45, "test_4d_dyn_s32"): _filled((2, 3, 4, 8), _S32_4D, "s32"),
    (D45, "test_4d_mixed"): _filled((2, 3, 5, 7), _S32_4D, "s32"),
    (D45, "test_4d_dyn_outer"): _filled((3, 3, 4, 8), _S32_4D, "s32"),
    (D45, "test_5d_flat_s32"): _filled((2, 2, 3, 4, 8), _S32_5D, "s32"),
    (D45, "test_5d_dyn"): _filled((2, 2, 3, 4, 5), _S32_5D, "s32"),
    (D45, "test_5d_mixed"): _filled((2, 3, 3, 4, 8), _S32_5D, "s32"),
}


# ----------------------------------------------------------------------------- flash_atten.co

FA_B, FA_H, FA_SEQ, FA_DIM, FA_BLOCK_N = 2, 2, 100, 64, 64
FA_SCALE = 0.18033688  # the kernel's constant: log2(e) / sqrt(64)


def _flash_args(causal: bool) -> Callable[[torch.Generator], list[Any]]:
    def args(g: torch.Generator) -> list[Any]:
        shape = (FA_B, FA_H, FA_SEQ, FA_DIM)
        return [rand_float(g, shape, -0.5, 0.5, "f16"), rand_float(g, shape, -0.5, 0.5, "f16"),
                rand_float(g, shape, -1.0, 1.0, "f16"), causal]
    return args


def flash_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
                    ) -> torch.Tensor:
    """The host's reference, in float64. Non-causal: the K tail that the kernel zero-fills
    up to a multiple of the KV tile joins the softmax with score 0 (no mask), so the
    denominator has extra exp2(-max) terms; the numerator only sees real rows. The softmax
    numerators are rounded to f16 before the PV product, as the kernel does."""
    q64, k64, v64 = f64(q), f64(k), f64(v)
    scores = q64 @ k64.transpose(-1, -2)
    sq, skv = q.shape[-2], k.shape[-2]
    if causal:
        future = torch.arange(skv)[None, :] > torch.arange(sq)[:, None] + (skv - sq)
        scores = scores.masked_fill(future, float("-inf"))
    else:
        pad = -(-skv // FA_BLOCK_N) * FA_BLOCK_N - skv
        scores = torch.cat([scores, scores.new_zeros(*scores.shape[:-1], pad)], dim=-1)
    top = scores.max(dim=-1, keepdim=True).values
    p = torch.exp2((scores - top) * FA_SCALE)
    numerators = f64(p[..., :skv].to(torch.float16))
    out = (numerators @ v64) / p.sum(dim=-1, keepdim=True)
    return out.to(torch.float16)


def _flash(causal: bool) -> Recipe:
    return Recipe(args=_flash_args(causal), reference=flash_reference, atol=0.01, rtol=0.05)


FLASH: dict[Key, Recipe] = {
    (GPU + "flash_atten.co", "flash_atten"): Recipe(
        args=_flash_args(False), reference=flash_reference, atol=0.01, rtol=0.05,
        also=(_flash(True),),
        note="B=H=2, S=100, D=64; non-causal and causal; host: fail if rel>5% and abs>0.01"),
}


# ----------------------------------------------------------------------------- float/fp8/int


FLOATS: dict[Key, Recipe] = {
    (GPU + "float_types.co", f"ele_add_{t}"): _add((6, 64), t, atol=0.1, note="host: |err| <= 0.1")
    for t in ("f32", "f16", "bf16")
}
FLOATS.update({
    (GPU + "float_types.co", f"copy_{t}"): _copy(lambda g, t=t: [rand_float(g, (6, 64), -10, 10, t)])
    for t in ("f8_e4m3", "f8_e5m2")
})
FLOATS.update({
    (GPU + "float_types_fp6_fp4.co", name): excluded("ESC", SUB_BYTE_FLOAT)
    for name in ("copy_f6_e3m2", "copy_f6_e2m3", "copy_f4_e2m1")
})
FLOATS.update({
    (GPU + "fp6_fp4_copy.co", name): excluded("ESC", SUB_BYTE_FLOAT)
    for name in ("dma_copy_f6", "dma_add_f6", "dma_copy_f4")
})

FP8 = GPU + "fp8_ops.co"
FLOATS.update({
    (FP8, "ele_add_fp8_e4m3"): _add((6, 64), "f8_e4m3", "f16", -2, 2, atol=0.35),
    (FP8, "ele_add_fp8_e5m2"): _add((6, 64), "f8_e5m2", "f16", -2, 2, atol=0.5),
    (FP8, "fp8_dma_copy_sync"): _copy(lambda g: [rand_float(g, (6, 17, 64), -2, 2, "f8_e4m3")]),
    (FP8, "fp8_dma_copy_async"): _copy(lambda g: [rand_float(g, (6, 17, 64), -2, 2, "f8_e5m2")]),
    (FP8, "fp8_dma_copy_group"): _copy(lambda g: [rand_float(g, (6, 17, 32), -2, 2, "f8_e5m2")],
                                       note="M = 6"),
    (FP8, "fp8_dma_add"): _add((6, 17, 32), "f8_e5m2", "f16", -2, 2, atol=0.35,
                               note="M = 6, N = 17"),
    (FP8, "fp8_dma_add1"): _add((6, 17, 32), "f8_e5m2", "f16", -2, 2, atol=0.35,
                                note="M = 6, N = 17"),
})

INTEGRAL = GPU + "integral_types.co"
FLOATS.update({
    (INTEGRAL, f"ele_add_{t}"): _add((6, 64), t, lo=0, hi=10)
    for t in ("s32", "u32", "s16", "u16", "s8", "u8")
})
FLOATS.update({
    (INTEGRAL, name): excluded("ESC", SUB_BYTE_INT)
    for name in ("ele_add_u6", "ele_add_s6", "ele_add_u4", "ele_add_s4", "copy_u2", "copy_s2",
                 "copy_u1", "copy_bin1")
})


# ----------------------------------------------------------------------------- gdn_recurrence

GDN_BH, GDN_SEQ, GDN_D, GDN_CHUNK = 2, 128, 64, 64


def gdn_reference(k: torch.Tensor, w: torch.Tensor, u: torch.Tensor, g: torch.Tensor,
                  state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked gated-delta recurrence in float64: per chunk of 64 steps,
    ``v = (U - W @ S^T) * exp(g_last - g)`` and ``S = S * exp(g_last) + v^T @ K``.
    Returns (final state, v for every step)."""
    s = f64(state).clone()
    v_all = torch.zeros(u.shape, dtype=torch.float64)
    for start in range(0, k.shape[1], GDN_CHUNK):
        t = slice(start, start + GDN_CHUNK)
        gates = g[:, t].to(torch.float64)
        last = gates[:, -1:]
        v = (f64(u[:, t]) - f64(w[:, t]) @ s.transpose(-1, -2)) * torch.exp(last - gates)[..., None]
        v_all[:, t] = v
        s = s * torch.exp(last)[..., None] + v.transpose(-1, -2) @ f64(k[:, t])
    return s, v_all


def _gdn_args(gen: torch.Generator) -> list[Any]:
    """Inputs as the host makes them; ``V_new_T`` is the host reference's own V_new,
    rounded to bf16 and transposed (the kernel reads it, never writes it)."""
    shape = (GDN_BH, GDN_SEQ, GDN_D)
    k, w, u = (rand_float(gen, shape, -0.05, 0.05, "bf16") for _ in range(3))
    g = rand_float(gen, (GDN_BH, GDN_SEQ), -0.01, 0.0, "f32")
    state = zeros((GDN_BH, GDN_D, GDN_D), "bf16")
    _, v = gdn_reference(k, w, u, g, state)
    v_new_t = v.to(torch.bfloat16).transpose(-1, -2).contiguous()
    return [k, w, u, g, state, zeros(shape, "bf16"), v_new_t]


def _gdn_expected(k: torch.Tensor, w: torch.Tensor, u: torch.Tensor, g: torch.Tensor,
                  state: torch.Tensor, v_out: torch.Tensor, v_new_t: torch.Tensor
                  ) -> dict[int, torch.Tensor]:
    s, v = gdn_reference(k, w, u, g, state)
    return {4: s, 5: v}


GDN: dict[Key, Recipe] = {
    (GPU + "gdn_recurrence.co", "gdn_chunk_state"): Recipe(
        args=_gdn_args, reference=_gdn_expected, atol=5e-3, poison=(5,),
        note="BH=2, SEQ=128; host checks State with atol 5e-3; V_new_out checked the same"),
}


RECIPES: dict[Key, Recipe] = {**ADD, **COPY, **AMPERE_MMA, **MISC, **GEMM_SP, **DMA_ND, **FLASH,
                              **FLOATS, **GDN}
