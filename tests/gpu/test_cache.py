"""On the GPU, a second call with the same shapes compiles nothing (Triton's JIT cache
is keyed per specialization; croqtile loads each generated module once)."""

from __future__ import annotations

import pytest
import torch

import croqtile

from ..e2e.checks import DATA


@pytest.mark.gpu
def test_second_call_compiles_nothing_on_the_gpu() -> None:
    import triton

    compiles = []
    hook = triton.knobs.runtime.jit_post_compile_hook
    triton.knobs.runtime.jit_post_compile_hook = lambda *a, **k: compiles.append(1)
    try:
        mod = croqtile.load(DATA / "seed000_sm90_gemm.co")
        a = torch.randn(256, 128, device="cuda").half()
        b = torch.randn(256, 128, device="cuda").half()
        c = torch.empty(256, 256, device="cuda").half()
        mod.matmul(a, b, c)
        torch.cuda.synchronize()
        first = len(compiles)
        mod.matmul(a, b, c)
        torch.cuda.synchronize()
        assert first >= 1 and len(compiles) == first
    finally:
        triton.knobs.runtime.jit_post_compile_hook = hook
