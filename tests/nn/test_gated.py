"""croqtile.nn.functional.gated_linear: act(x wg^T) * (x wu^T) as one GEMM with two
accumulators (croqtile/kernels/gated_linear.co), forward and backward, against float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf

from ..e2e.checks import assert_close, poisoned_empty, random
from .ops import croqtile_ops

ACTS = {"silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}


def reference(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor,
              activation: str) -> torch.Tensor:
    x, wg, wu = x.double(), wg.double(), wu.double()
    return ACTS[activation](x @ wg.T) * (x @ wu.T)


@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16,
                                   torch.float64])
def test_gated_linear(activation: str, dtype: torch.dtype) -> None:
    x = random((2, 19, 40), dtype)  # rows and columns past whole tiles
    wg, wu = random((45, 40), dtype) / 6, random((45, 40), dtype) / 6
    out, ran = croqtile_ops(cf.gated_linear, x, wg, wu, activation=activation)
    assert ran and all(op.startswith("croqtile.gated_") for op in ran)
    assert out.shape == (2, 19, 45) and out.dtype == dtype
    assert_close(out, reference(x, wg, wu, activation), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_gated_linear_with_a_row_scale(dtype: torch.dtype) -> None:
    """Both products' rows scaled first (an RMS norm folded in), no gradient wanted; a
    gradient wanted runs torch's, with the same values."""
    x = random((2, 19, 40), dtype)
    wg, wu = random((45, 40), dtype) / 6, random((45, 40), dtype) / 6
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    scale = torch.rand((2, 19), dtype=torch.float64).add(0.5).to(wide)
    with torch.no_grad(), poisoned_empty():
        out, ran = croqtile_ops(cf.gated_linear, x, wg, wu, row_scale=scale)
    assert len(ran) == 1 and ran[0].startswith("croqtile.gated_") and "_rowscale_" in ran[0]
    expected = reference(x.double() * scale.double()[..., None], wg, wu, "silu")
    assert_close(out, expected, dtype)
    xg = x.detach().requires_grad_()
    out, ran = croqtile_ops(cf.gated_linear, xg, wg, wu, row_scale=scale)
    assert ran == [] and out.requires_grad
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("activation", list(ACTS))
def test_gated_linear_gradients(activation: str) -> None:
    x, wg, wu = (random(shape, torch.float32).requires_grad_()
                 for shape in ((33, 40), (45, 40), (45, 40)))
    out = cf.gated_linear(x, wg, wu, activation=activation)
    dy = random(tuple(out.shape), torch.float32)
    grads = torch.autograd.grad(out, (x, wg, wu), dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, wg, wu)]
    want = torch.autograd.grad(reference(*leaves, activation), leaves, dy.double())
    for got, expected in zip(grads, want):
        assert_close(got, expected, torch.float32)


def test_gradcheck_f64() -> None:
    x, wg, wu = (random(shape, torch.float64).requires_grad_()
                 for shape in ((5, 12), (7, 12), (7, 12)))
    assert torch.autograd.gradcheck(lambda a, b, c: cf.gated_linear(a, b, c), (x, wg, wu),
                                    fast_mode=True)


def test_what_the_kernel_does_not_take_runs_torch() -> None:
    x, wg, wu = random((4, 12), torch.float32), random((6, 12), torch.float32), \
        random((6, 12), torch.float32)
    out, ran = croqtile_ops(cf.gated_linear, x, wg, wu, activation="gelu")  # exact gelu
    assert ran == []
    assert torch.equal(out, F.gelu(F.linear(x, wg)) * F.linear(x, wu))
    assert cf.uncovered_gated_linear(x, wg, random((6, 12), torch.float64), "silu") == \
        "gate and up weights of different shapes or dtypes"
    assert cf.uncovered_gated_linear(x, wg, wu, "silu") is None
    with pytest.raises(ValueError, match="activation='tanh'"):
        cf.gated_linear(x, wg, wu, activation="tanh")


@pytest.mark.gpu
@pytest.mark.parametrize("activation, rows", [("silu", 1000), ("gelu_tanh", 1000),
                                              ("silu", 1), ("silu", 16)])
def test_gated_linear_bf16_gpu(activation: str, rows: int) -> None:
    """Wide tiles, and a decode step's skinny ones (at most 16 rows), forward and
    backward."""
    x = random((rows, 1024), torch.bfloat16, "cuda").requires_grad_()
    wg = (random((2816, 1024), torch.bfloat16, "cuda") / 32).requires_grad_()
    wu = (random((2816, 1024), torch.bfloat16, "cuda") / 32).requires_grad_()
    out, ran = croqtile_ops(cf.gated_linear, x, wg, wu, activation=activation)
    assert ran
    assert_close(out, reference(x, wg, wu, activation), torch.bfloat16)
    dy = random(tuple(out.shape), torch.bfloat16, "cuda")
    grads = torch.autograd.grad(out, (x, wg, wu), dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, wg, wu)]
    want = torch.autograd.grad(reference(*leaves, activation), leaves, dy.double())
    for got, expected in zip(grads, want):
        assert_close(got, expected, torch.bfloat16)
