"""Recipes for the tutorial's fused-MoE FP8 pipeline (``optimization/assets/fused-moe-fp8``:
``00_baseline``, ``01_scatter_fusion`` and ``02_qsg_fusion``).

Each program is several kernels that hand data to one another (routing, expert counts, the
layout of the expert-sorted rows, FP8 quantisation, a grouped GEMM, a weighted scatter).
The harness runs one function at a time, so each recipe builds its function's inputs as
the earlier kernels of the host code leave them, computed here from the host code's own
input patterns, and checks its outputs against the host code's reference (float64):
top-k ids exactly, top-k weights to 2e-5, the output within the host check's tolerance
(4e-2 + 1.2e-1 relative).

Sizes are reduced through the files' ``#define`` values (the CPU runs go through Triton's
interpreter): 64 experts, N = 128, K = 256, 4 tokens (files: 256, 512, 2048, 128). Rows of
one expert are laid out in route order (token * top-k + slot): the order in which a serial
run of the atomics hands out the slots. A GPU may hand them out in another order, which the
sort/gather kernels' recipes would report as WRONG.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from croqtile.bench import moe_tutorial

from .e2e_helpers import full, zeros
from .e2e_recipe import Recipe

Key = tuple[str, str]

FOLDER = "tutorial/optimization/assets/fused-moe-fp8/"
SIZES = moe_tutorial.TINY
M, E, N, K, TOPK = SIZES.tokens, SIZES.experts, SIZES.n, SIZES.k, SIZES.top_k
KB, ROUTES = SIZES.k_blocks, SIZES.routes
DEFINES = moe_tutorial.defines(SIZES)
OUTPUT_ATOL, OUTPUT_RTOL = moe_tutorial.OUTPUT_ATOL, moe_tutorial.OUTPUT_RTOL


@cache
def _pipeline() -> dict[str, torch.Tensor]:
    """The host code's inputs and every intermediate result, in float64 where computed
    (``croqtile.bench.moe_tutorial``, which runs the whole pipeline the same way)."""
    given = moe_tutorial.inputs(SIZES)
    return {"inp": given["input"], "gating": given["gating"],
            "wq": given["expert_weights"], "wscale": given["expert_scales"],
            **moe_tutorial.reference(given, SIZES)}


def _p(name: str) -> torch.Tensor:
    return _pipeline()[name].clone()


def _unused_rows(t: torch.Tensor) -> torch.Tensor:
    """A reference over [ROUTES, ...] whose rows past the routes are never written."""
    t = t.to(torch.float64)
    t[int(_pipeline()["n_routes"]):] = float("nan")
    return t


def _recipe(args: Any, reference: Any, note: str, rtol: float = 0.0, atol: float = 0.0
            ) -> Recipe:
    return Recipe(args=args, reference=reference, defines=DEFINES, rtol=rtol, atol=atol,
                  note=f"M={M}, E={E}, N={N}, K={K} (files: 128, 256, 512, 2048); {note}")


ROUTE = _recipe(lambda g: [_p("gating"), full((M, TOPK), -1, "s32"), zeros((M, TOPK), "f32")],
                lambda gating, ids, w: {1: _p("ids"), 2: _p("weights")},
                "top-k ids exactly, weights to 2e-5", rtol=2e-5, atol=2e-5)
COUNT = _recipe(lambda g: [_p("ids"), zeros((E,), "s32")],
                lambda ids, counts: {1: _p("counts")}, "atomic counts")
LAYOUT = _recipe(lambda g: [_p("counts"), zeros((E + 1,), "s32"), zeros((E,), "s32")],
                 lambda c, o, w: {1: _p("offsets"), 2: _p("offsets")[:-1]}, "prefix sums")
QUANTIZE = _recipe(lambda g: [_p("inp"), zeros((M, K), "f8_e4m3"), zeros((M, KB), "f32")],
                   lambda x, q, s: {1: _p("xq"), 2: _p("xs")}, "per-128-block FP8 E4M3",
                   rtol=1e-6)
_GATHERED = {4: lambda: _p("sorted_ids"), 5: lambda: _unused_rows(_p("rep_q")),
             6: lambda: _unused_rows(_p("rep_scales"))}
SORT_GATHER = _recipe(
    lambda g: [_p("xq"), _p("xs").float(), _p("ids"), _p("offsets")[:-1],
               full((ROUTES,), -1, "s32"), zeros((ROUTES, K), "f8_e4m3"),
               zeros((ROUTES, KB), "f32")],
    lambda *a: {3: _p("offsets")[1:], **{i: f() for i, f in _GATHERED.items()}},
    "slots in route order (atomics run serially)", rtol=1e-6)
QUANT_SORT_GATHER = _recipe(
    lambda g: [_p("inp"), _p("ids"), _p("offsets")[:-1], full((ROUTES,), -1, "s32"),
               zeros((ROUTES, K), "f8_e4m3"), zeros((ROUTES, KB), "f32")],
    lambda *a: {2: _p("offsets")[1:], **{i - 1: f() for i, f in _GATHERED.items()}},
    "slots in route order (atomics run serially)", rtol=1e-6)
_GEMM_ARGS = [lambda: _p("rep_q"), lambda: _p("rep_scales"), lambda: _p("wq"),
              lambda: _p("wscale"), lambda: _p("offsets")]
GROUPED_ROWS = _recipe(  # 00: the rows, in bf16
    lambda g: [f() for f in _GEMM_ARGS] + [zeros((ROUTES, N), "bf16")],
    lambda *a: {5: _unused_rows(_p("rows"))}, "grouped GEMM rows (bf16)",
    rtol=OUTPUT_RTOL, atol=OUTPUT_ATOL)
SCATTER = _recipe(  # 00
    lambda g: [_p("rows").bfloat16(), _p("sorted_ids"), _p("weights").float(),
               zeros((M, N), "f32")],
    lambda rows, ids, w, out: {3: _p("out")}, "weighted scatter with atomics",
    rtol=OUTPUT_RTOL, atol=OUTPUT_ATOL)
GROUPED_SCATTER = _recipe(  # 02: the GEMM scatters its rows itself
    lambda g: [f() for f in _GEMM_ARGS] + [_p("sorted_ids"), _p("weights").float(),
                                           zeros((M, N), "f32")],
    lambda *a: {7: _p("out")}, "grouped GEMM scattering into the output",
    rtol=OUTPUT_RTOL, atol=OUTPUT_ATOL)

COMMON = {"fused_moe_route": ROUTE, "fused_moe_count_experts": COUNT,
          "fused_moe_build_layout": LAYOUT, "fused_moe_quantize_input": QUANTIZE,
          "fused_moe_sort_and_gather_quant_input": SORT_GATHER}
RECIPES: dict[Key, Recipe] = {
    **{(FOLDER + "00_baseline.co", name): r for name, r in COMMON.items()},
    (FOLDER + "00_baseline.co", "fused_moe_grouped_wgmma_fp8"): GROUPED_ROWS,
    (FOLDER + "00_baseline.co", "fused_moe_scatter_rows_to_output"): SCATTER,
    **{(FOLDER + "01_scatter_fusion.co", name): r for name, r in COMMON.items()},
    (FOLDER + "01_scatter_fusion.co", "fused_moe_grouped_wgmma_fp8"): GROUPED_SCATTER,
    (FOLDER + "01_scatter_fusion.co", "fused_moe_scatter_rows_to_output"): SCATTER,
    **{(FOLDER + "02_qsg_fusion.co", name): r for name, r in COMMON.items()},
    (FOLDER + "02_qsg_fusion.co", "fused_moe_quant_sort_gather"): QUANT_SORT_GATHER,
    (FOLDER + "02_qsg_fusion.co", "fused_moe_grouped_wgmma_fp8"): GROUPED_SCATTER,
    (FOLDER + "02_qsg_fusion.co", "fused_moe_scatter_rows_to_output"): SCATTER,
}
