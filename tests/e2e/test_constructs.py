"""What the corpus (``test_corpus.py``) does not check by results: warnings, the Triton
source, launch counts and result types of some of its programs."""

from __future__ import annotations

import pytest
import torch

import croqtile

from .checks import DATA, DEVICES, assert_close, poison, random


def load(name: str) -> croqtile.Module:
    return croqtile.compile((DATA / name).read_text(), filename=name)


def test_mixed_precision_arithmetic_computes_in_f32() -> None:
    """f16 * f32 literal computes in f32 (spec 3.6) and converts back on the store."""
    with pytest.warns(croqtile.CompileWarning, match="CQ0206"):
        mod = load("mixed_precision.co")
    assert ".to(tl.float32)" in mod.mixed.triton_source


def test_two_kernels_in_one_function() -> None:
    mod = load("two_launches.co")
    a = random((64,), torch.int32)
    assert_close(mod(a), (a.double() + 1) * 3, torch.int32)
    assert mod.two_steps.launches == 2


@pytest.mark.parametrize("device", DEVICES)
def test_auto_return_type_and_device(device: str) -> None:
    x = random((5, 32), torch.float16, device)
    y = load("auto_bias.co")(x, 0.5)
    assert y.dtype == torch.float16 and y.device.type == torch.device(device).type
    assert_close(y, x.double() + 0.5, torch.float16)


@pytest.mark.parametrize("device", DEVICES)
def test_multi_warp_mma_fusion(device: str) -> None:
    """2x4 warps of 16x16 MMA tiles per block fuse into one 32x64 dot."""
    text = (DATA / "seed000_sm86_gemm.co").read_text()
    mod = croqtile.compile(text, defines={"MATMUL_TILE_M": 32, "MATMUL_TILE_N": 64,
                                          "MATMUL_TILE_K": 32})
    source = mod.matmul.triton_source
    assert source.count("tl.dot(") == 1 and "ax_m = tl.arange(0, 32)" in source
    lhs, rhs = random((70, 48), torch.float16, device), random((90, 48), torch.float16, device)
    out = poison(torch.empty((70, 90), dtype=torch.float16, device=device))
    mod(lhs, rhs, out)
    assert_close(out, lhs.double() @ rhs.double().T, torch.float16)
