"""Recipes for the complete kernels of the Croqtile tutorial repository.

Keys are ``tutorial/<path>`` (see ``e2e_upstream.tutorial_sources``): loose ``.co`` files,
``archive.tar.gz:member`` for the GEMM archive, ``page.md#N`` for the N-th code block of a
page that holds a ``__co__`` function.

The tutorial GEMMs default to 8192^3 and check a 128 x 128 corner; they are shape-generic,
so these recipes use small shapes (CPU runs go through Triton's interpreter) and check
every element.
"""

from __future__ import annotations

from typing import Any

import torch

from .e2e_helpers import add_reference, excluded, f64, gemm, identity, rand, rand_float, zeros
from .e2e_recipe import Recipe

Key = tuple[str, str]

ARCHIVE = "tutorial/optimization/assets/matmul_tutorial_kernels.tar.gz:"
GEMM_M, GEMM_N, GEMM_K = 64, 128, 256
LEGACY = ("written in a dialect the compiler no longer accepts (event-bound "
          "tma.copy.async<...>, mma.commit)")


def _nt_gemm_args(g: torch.Generator) -> list[Any]:
    """``fill_random(0, 2)`` operands, lhs [M,K] and rhs [N,K]; the output is overwritten."""
    return [rand_float(g, (GEMM_M, GEMM_K), 0, 2, "f16"), rand_float(g, (GEMM_N, GEMM_K), 0, 2, "f16"),
            zeros((GEMM_M, GEMM_N), "f16")]


def _nt_gemm_reference(lhs: torch.Tensor, rhs: torch.Tensor, out: torch.Tensor
                       ) -> dict[int, torch.Tensor]:
    return {2: gemm(lhs, rhs, rhs_nk=True)}


def _tutorial_gemm(note: str) -> Recipe:
    # The kernels accumulate in f16 (a scalar `f16 acc` or `mma.fill.f16`): over K=256 of
    # products in [0, 4) the partial sums reach ~256 where the f16 spacing is 0.25; the
    # host's 5% relative tolerance leaves ample room.
    return Recipe(args=_nt_gemm_args, reference=_nt_gemm_reference, rtol=0.05, poison=(2,),
                  note=f"M={GEMM_M}, N={GEMM_N}, K={GEMM_K} (tutorial: 8192^3); {note}")


# ----------------------------------------------------------------------------- attention

FA_B, FA_H, FA_SEQ, FA_DIM = 1, 2, 256, 128
FA_SCALE = 0.12751743  # the kernel's constant: log2(e) / sqrt(128)


def _attention_args(g: torch.Generator) -> list[Any]:
    shape = (FA_B, FA_SEQ, FA_H, FA_DIM)  # [B, S, H, D]
    return [rand_float(g, shape, -0.5, 0.5, "bf16"), rand_float(g, shape, -0.5, 0.5, "bf16"),
            rand_float(g, shape, -1.0, 1.0, "bf16"), zeros(shape, "bf16")]


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor
                     ) -> dict[int, torch.Tensor]:
    """Causal softmax attention over [B, S, H, D] tensors in float64, with the softmax
    numerators rounded to bf16 before the PV product as the kernel does (its denominator
    sums the unrounded values)."""
    q64, k64, v64 = (f64(t).transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    scores = q64 @ k64.transpose(-1, -2)
    sq, skv = q.shape[1], k.shape[1]
    future = torch.arange(skv)[None, :] > torch.arange(sq)[:, None] + (skv - sq)
    scores = scores.masked_fill(future, float("-inf"))
    p = torch.exp2((scores - scores.max(dim=-1, keepdim=True).values) * FA_SCALE)
    out = (f64(p.to(torch.bfloat16)) @ v64) / p.sum(dim=-1, keepdim=True)
    return {3: out.transpose(1, 2)}


# ----------------------------------------------------------------------------- recipes

FUSED_MOE = ("fused MoE pipeline with raw CUDA (`__cpp__`) inside its kernels (CQ0708); "
             "00-02 have recipes in e2e_recipes_moe")

RECIPES: dict[Key, Recipe] = {
    ("tutorial/tutorial/ch00-installation.md#0", "identity"): Recipe(
        args=lambda g: [torch.tensor([1, 2, 3, 4], dtype=torch.int32)], reference=identity),
    ("tutorial/tutorial/ch01-hello-croqtile.md#0", "ele_add"): Recipe(
        args=lambda g: [rand(g, (4, 8), -10, 10, "s32"), rand(g, (4, 8), -10, 10, "s32")],
        reference=add_reference("s32")),
    ("tutorial/tutorial/ch08-cpp-interop.md#0", "my_kernel"): excluded(
        "OUT", "an illustration: the body is a comment plus inline asm through __cpp__, and "
               "its main uses undefined sizes"),
    (ARCHIVE + "matmul_f16_v0_naive.co", "matmul"): _tutorial_gemm("naive, f16 scalar accumulator"),
    (ARCHIVE + "matmul_f16_v1_shared_memory.co", "matmul"): _tutorial_gemm(
        "shared-memory tiles, f16 scalar accumulator"),
    (ARCHIVE + "matmul_f16_v2_hopper_tma_wgmma.co", "matmul"): _tutorial_gemm(
        "TMA + WGMMA, f16 accumulator"),
    (ARCHIVE + "matmul_f16_v3_warpspec.co", "matmul"): excluded("OUT", LEGACY),
    (ARCHIVE + "matmul_f16_v4_auto_tuned.co", "matmul"): excluded("OUT", LEGACY),
    ("tutorial/optimization/flash-attention-causal-prefill.md#0", "flash_atten"): Recipe(
        args=_attention_args, reference=causal_attention, atol=0.01, rtol=0.02, poison=(3,),
        note=f"first version on the page (no host code): B={FA_B}, H={FA_H}, "
             f"S={FA_SEQ}, D={FA_DIM}; bf16 output"),
    **{(f"tutorial/optimization/assets/fused-moe-fp8/{name}.co", "*"): excluded("ESC", FUSED_MOE)
       for name in ("03_all_fusions", "04_host_micro", "05_cuda_optimized")},
}
