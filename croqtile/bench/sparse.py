"""The 2:4 sparse GEMM sweep (``croqtile bench sparse``): ``kernels/gemm_sp.co``,
written as a user would, compiled with ``backend="cuda"`` (the wgmma .sp kernel on a
Hopper GPU), computing ``C = A @ B^T`` with A [M, K] 2:4 sparse (given packed, with its
metadata: ``croqtile.sparse.compress_2_4``) and B [N, K] dense. Timed beside

* dense cuBLAS on the same product with A decompressed (``torch.matmul``): the ``ratio``;
* torch's semi-structured sparse GEMM (``torch.sparse.to_sparse_semi_structured`` of A,
  cuSPARSELt where torch has it): the ``compiled_ratio`` column (the second baseline of
  the harness), on CUDA devices only.

Shapes: 4096^3, 8192^3, and the Llama-3-8B projections with 4096 tokens, where the
weight W [N_proj, K] is the sparse operand: C^T = W @ X^T, so M = N_proj and N = 4096.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..sparse import compress_2_4, prune_2_4
from .harness import DTYPES, LLM_SHAPES, Case, Prepared, random_tensors

KERNEL = "gemm_sp"
KERNEL_FILE = "gemm_sp.co"
SQUARE_SIZES = (4096, 8192)
TOKENS = 4096
PROJECTIONS = tuple(s for s in LLM_SHAPES if s[0] == "llama3-8b")
TOLERANCE = 1e-2  # f32 accumulation: the output's rounding


def sparse_cases(dtypes: Sequence[str] = ("f16", "bf16"),
                 sizes: Sequence[int] = SQUARE_SIZES, tokens: int = TOKENS,
                 projections: Sequence[tuple[str, str, int, int]] = PROJECTIONS
                 ) -> list[Case]:
    cases = [Case("sparse", KERNEL, dt, s, s, s) for dt in dtypes for s in sizes]
    cases += [Case("sparse", KERNEL, dt, n, tokens, k, f"{model} {proj}")
              for dt in dtypes for model, proj, n, k in projections]
    return cases


def quick_cases(dtypes: Sequence[str] = ("f16", "bf16")) -> list[Case]:
    return sparse_cases(dtypes, (8192,), projections=())


def tiny_cases(dtypes: Sequence[str] = ("f16", "bf16")) -> list[Case]:
    """CPU shapes with ragged edges (M, N not tile multiples; K a multiple of 16)."""
    return [Case("sparse", KERNEL, dt, 150, 70, 80) for dt in dtypes]


def defines(case: Case) -> dict[str, Any]:
    return {"DT": case.dtype}


def options() -> dict[str, Any]:
    """Compile options of the sweep: the CUDA backend (on the CPU the Triton kernel runs
    all the same)."""
    return {"backend": "cuda"}


def semi_structured(dense: torch.Tensor) -> Any:
    """torch's semi-structured tensor of ``dense`` (cuSPARSELt when available), or None
    where torch cannot make one (CPU tensors, GPUs before sm_80)."""
    if not dense.is_cuda:
        return None
    from torch.sparse import to_sparse_semi_structured
    return to_sparse_semi_structured(dense)


def prepare_sparse(case: Case, fn: Any, device: str) -> Prepared:
    """A pruned to 2:4 and packed, B dense; ours on (packed, meta), cuBLAS on the dense A,
    torch's semi-structured GEMM on A's semi-structured tensor."""
    randn = random_tensors(case, device)
    a = prune_2_4(randn(case.M, case.K))
    b = randn(case.N, case.K)
    packed, meta = compress_2_4(a)
    out = torch.empty((case.M, case.N), dtype=DTYPES[case.dtype], device=device)
    semi = semi_structured(a)
    torch_sparse = None if semi is None else (lambda: torch.mm(semi, b.t()))
    return Prepared(lambda: fn(packed, meta, b, out), lambda: torch.matmul(a, b.t()), out,
                    lambda: a.double() @ b.double().T, compiled=torch_sparse,
                    tolerance=TOLERANCE)
