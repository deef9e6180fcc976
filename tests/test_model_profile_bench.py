"""bench/model_profile.py: how kernels are grouped (names seen on the H200), and without
a GPU it says that it needs one."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from .bench_scripts import BENCH, load

SCRIPT = BENCH / "model_profile.py"


def _module():
    return load("model_profile")


def test_kernels_fall_in_their_groups() -> None:
    group_of = _module().group_of
    assert group_of("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") == "gemm"
    assert group_of("linear_bf16_none_gpu_narrow_k0") == "gemm"
    assert group_of("gated_bf16_silu_gpu_k0") == "gemm"  # (the gated MLP's two GEMMs)
    assert group_of("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16") == "attention"
    assert group_of("attention_bf16_d128_gpu_k0") == "attention"
    assert group_of("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0") == "other"
    assert group_of("void at::native::vectorized_elementwise_kernel<4>") == "other"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_without_a_gpu_it_says_so() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "needs a CUDA device" in run.stderr
