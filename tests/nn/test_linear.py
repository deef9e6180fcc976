"""croqtile.nn.functional.linear and croqtile.nn.Linear (arch 4.1): the GEMM kernel with
the bias, activation and residual fused, against float64 torch, with autograd (gradcheck in
f64 and gradients against torch's), torch.nn.Linear's parameters and state_dict, and
convert()."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import croqtile
import croqtile.nn.functional as cf
from croqtile.nn import kernels

from ..e2e.checks import assert_close, poisoned_empty, random
from .ops import croqtile_ops

ACTIVATIONS = {
    None: lambda t: t,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
}


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
              activation: str | None, residual: torch.Tensor | None = None) -> torch.Tensor:
    out = ACTIVATIONS[activation](F.linear(x.double(), w.double(),
                                           None if b is None else b.double()))
    return out if residual is None else out + residual.double()


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_with_each_activation(activation: str | None, dtype: torch.dtype) -> None:
    # [2, 19, 70] x [40, 70]^T: 38 rows and 40 columns cross two 32-wide tiles, K three
    x, w, b = random((2, 19, 70), dtype), random((40, 70), dtype), random((40,), dtype)
    y, ran = croqtile_ops(cf.linear, x, w, b, activation=activation)
    assert ran and all(op.startswith("croqtile.linear_") for op in ran), ran
    assert y.dtype == dtype
    assert_close(y, reference(x, w, b, activation), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_linear_without_bias(dtype: torch.dtype) -> None:
    x, w = random((33, 48), dtype), random((24, 48), dtype)
    y, ran = croqtile_ops(cf.linear, x, w, activation="silu")
    assert len(ran) == 1
    assert_close(y, reference(x, w, None, "silu"), dtype)


@pytest.mark.parametrize("activation, bias", [(None, False), ("silu", True),
                                              ("gelu_tanh", False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_linear_adds_a_residual_in_its_epilogue(activation: str | None, bias: bool,
                                                dtype: torch.dtype) -> None:
    """``act(x w^T + b) + residual`` as one kernel (its output poisoned before the run):
    rows and columns crossing the 32-wide tiles with tails."""
    x, w = random((2, 19, 70), dtype), random((40, 70), dtype)
    b = random((40,), dtype) if bias else None
    residual = random((2, 19, 40), dtype) * 4
    with poisoned_empty():
        y, ran = croqtile_ops(cf.linear, x, w, b, activation=activation, residual=residual)
    assert len(ran) == 1 and "_residual_" in ran[0], ran
    assert y.dtype == dtype and y.shape == residual.shape
    assert_close(y, reference(x, w, b, activation, residual), dtype)


def test_a_residual_the_kernel_does_not_take_is_added_by_torch() -> None:
    """A residual of another dtype or of a shape that only broadcasts: torch's result."""
    x, w = random((6, 8), torch.float32), random((4, 8), torch.float32)
    for residual in (random((6, 4), torch.float64), random((4,), torch.float32)):
        y, ran = croqtile_ops(cf.linear, x, w, residual=residual)
        assert ran == [] and torch.equal(y, F.linear(x, w) + residual)
        assert cf.uncovered_linear(x, w, None, None, residual) is not None
    assert cf.uncovered_linear(x, w, None, None, random((6, 4), torch.float32)) is None


def test_gradients_through_a_residual() -> None:
    """gradcheck in f64 (the residual's gradient is dy), and f32 gradients of every
    operand against torch's at shapes crossing the tiles."""
    leaves = [random(s, torch.float64).requires_grad_() for s in ((5, 12), (7, 12), (7,),
                                                                  (5, 7))]
    assert torch.autograd.gradcheck(
        lambda x, w, b, r: cf.linear(x, w, b, activation="silu", residual=r), leaves,
        fast_mode=True, atol=1e-8, rtol=1e-6)
    x, w, r = (random(s, torch.float32).requires_grad_() for s in ((3, 20, 40), (36, 40),
                                                                   (3, 20, 36)))
    y = cf.linear(x, w, activation="gelu_tanh", residual=r)
    dy = random(tuple(y.shape), torch.float32)
    grads, ran = croqtile_ops(torch.autograd.grad, y, (x, w, r), dy)
    assert any(op.startswith("croqtile.linear_grad_") for op in ran), ran
    doubles = [t.detach().double().requires_grad_() for t in (x, w, r)]
    expected = torch.autograd.grad(reference(doubles[0], doubles[1], None, "gelu_tanh",
                                             doubles[2]), doubles, dy.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)


def _row_scale(x: torch.Tensor) -> torch.Tensor:
    """Positive scales, one per row of ``x``, in its accumulator's dtype."""
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.rand(x.shape[:-1], dtype=torch.float64).add(0.5).to(wide)


@pytest.mark.parametrize("bias, residual", [(False, False), (True, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_linear_scales_each_row_of_its_product(bias: bool, residual: bool,
                                               dtype: torch.dtype) -> None:
    """``act(row_scale[:, None] * (x w^T) + b) + residual`` as one kernel (its output
    poisoned), with no gradient wanted."""
    x, w = random((2, 19, 70), dtype), random((40, 70), dtype)
    b = random((40,), dtype) if bias else None
    r = random((2, 19, 40), dtype) if residual else None
    scale = _row_scale(x)
    with torch.no_grad(), poisoned_empty():
        y, ran = croqtile_ops(cf.linear, x, w, b, activation="silu", residual=r,
                              row_scale=scale)
    assert len(ran) == 1 and "_rowscale_" in ran[0], ran
    expected = F.silu(F.linear(x.double(), w.double()) * scale.double()[..., None]
                      + (0 if b is None else b.double()))
    assert_close(y, expected + (0 if r is None else r.double()), dtype)


def test_a_row_scale_the_kernel_does_not_take_is_torch_s() -> None:
    """A row scale of another dtype or shape, or with a gradient wanted (its kernels have
    no backward): torch computes the call, gradients included."""
    x, w = random((6, 8), torch.float32), random((4, 8), torch.float32)
    for scale in (_row_scale(x).double(), _row_scale(x)[:3]):
        assert cf.uncovered_linear(x, w, None, None, row_scale=scale) is not None
    scale = _row_scale(x).requires_grad_()
    y, ran = croqtile_ops(cf.linear, x, w, row_scale=scale)
    assert ran == []
    (grad,) = torch.autograd.grad(y.sum(), scale)
    assert_close(grad, F.linear(x, w).double().sum(-1), torch.float32)
    with torch.no_grad():
        assert cf.uncovered_linear(x, w, None, None, row_scale=scale) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_rms_rstd(dtype: torch.dtype) -> None:
    """Each row's reciprocal RMS in one pass (the RMS norm backward's first kernel), in
    the accumulator's dtype; what folds an RMS norm into the next GEMM."""
    x = random((3, 13, 72), dtype) * 3
    with poisoned_empty():
        rstd, ran = croqtile_ops(cf.rms_rstd, x, 1e-5)
    assert ran == [f"croqtile.rms_norm_rstd_{kernels.ELEMENTS[dtype][0]}_cpu.default"], ran
    assert rstd.shape == (3, 13)
    assert rstd.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert_close(rstd, torch.rsqrt(x.double().pow(2).mean(-1) + 1e-5), torch.float32
                 if dtype == torch.bfloat16 else dtype)
    w, nw = random((40, 72), dtype), random((72,), dtype)
    with torch.no_grad():
        folded = cf.linear(x, (w.double() * nw.double()).to(dtype), row_scale=cf.rms_rstd(x))
    expected = F.linear(F.rms_norm(x.double(), (72,), nw.double(), torch.finfo(dtype).eps),
                        w.double())
    assert_close(folded, expected, dtype)
    xg = x.float().requires_grad_()
    assert croqtile_ops(cf.rms_rstd, xg)[1] == []  # (a gradient wanted: torch's)


def test_an_unknown_activation_is_refused_by_name() -> None:
    x, w = random((4, 8), torch.float32), random((3, 8), torch.float32)
    with pytest.raises(ValueError, match="activation='tanh': expected one of None, 'relu'"):
        cf.linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="activation='swish'"):
        croqtile.nn.Linear(8, 3, activation="swish")


def test_uncovered_calls_run_torch() -> None:
    """Integers, mixed dtypes and exact gelu in float64 (the kernel's erf is an f32-grade
    fit) are torch's, with torch's result."""
    xi, wi = torch.randint(-5, 5, (6, 8)), torch.randint(-5, 5, (4, 8))
    y, ran = croqtile_ops(cf.linear, xi, wi)
    assert ran == [] and torch.equal(y, F.linear(xi, wi))
    with pytest.raises(RuntimeError, match="same dtype"):  # torch's own refusal
        cf.linear(xi.double(), wi.float())
    x, w, b = (random(s, torch.float64) for s in ((6, 8), (4, 8), (4,)))
    y, ran = croqtile_ops(cf.linear, x, w, b, activation="gelu")
    assert ran == []
    assert torch.equal(y, F.gelu(F.linear(x, w, b)))
    assert cf.uncovered_linear(x, w, b, "gelu") is not None
    assert cf.uncovered_linear(x, w, b, "silu") is None


@pytest.mark.parametrize("activation", [None, "relu", "gelu_tanh", "silu"])
def test_gradcheck_f64(activation: str | None) -> None:
    """gradcheck's fast mode (the Jacobian against finite differences along random
    directions: a few calls through the interpreter instead of two per input element),
    with tolerances far below its defaults, which would let a 1 % error through; the full
    Jacobian is checked once, without an activation, at a smaller shape."""
    x = random((5, 12), torch.float64).requires_grad_()
    w = random((7, 12), torch.float64).requires_grad_()
    b = random((7,), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x, w, b: cf.linear(x, w, b, activation=activation), (x, w, b), fast_mode=True,
        atol=1e-8, rtol=1e-6)
    if activation is None:
        small = [random(s, torch.float64).requires_grad_() for s in ((3, 4), (2, 4), (2,))]
        assert torch.autograd.gradcheck(cf.linear, small)


@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
def test_gradients_match_torch(activation: str | None) -> None:
    """The backward's Croqtile kernels (activation slope, then the two GEMMs) against
    torch autograd in float64, in f32 at shapes crossing the tiles."""
    x = random((3, 20, 40), torch.float32).requires_grad_()
    w = random((36, 40), torch.float32).requires_grad_()
    b = random((36,), torch.float32).requires_grad_()
    dy = random((3, 20, 36), torch.float32)
    y = cf.linear(x, w, b, activation=activation)
    grads, ran = croqtile_ops(torch.autograd.grad, y, (x, w, b), dy)
    assert any(op.startswith("croqtile.matmul_nn_") for op in ran), ran
    assert any(op.startswith("croqtile.matmul_tn_") for op in ran), ran
    leaves = [t.detach().double().requires_grad_() for t in (x, w, b)]
    expected = torch.autograd.grad(reference(*leaves, activation), leaves, dy.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)


def test_linear_module_is_torch_linear() -> None:
    """Same parameters and state_dict both ways; reset_parameters draws as torch's."""
    torch.manual_seed(7)
    mine = croqtile.nn.Linear(24, 10, activation="relu")
    torch.manual_seed(7)
    theirs = torch.nn.Linear(24, 10)
    assert isinstance(mine, torch.nn.Linear)
    assert mine.state_dict().keys() == theirs.state_dict().keys()
    for key, value in mine.state_dict().items():
        assert torch.equal(value, theirs.state_dict()[key]), key
    theirs.load_state_dict({k: random(tuple(v.shape), v.dtype)
                            for k, v in theirs.state_dict().items()})
    mine.load_state_dict(theirs.state_dict())
    x = random((9, 24), torch.float32)
    assert_close(mine(x), F.relu(theirs(x)).double(), torch.float32)
    round_trip = torch.nn.Linear(24, 10)
    round_trip.load_state_dict(mine.state_dict())
    assert torch.equal(round_trip.weight, theirs.weight)
    torch.manual_seed(3)
    mine.reset_parameters()
    torch.manual_seed(3)
    theirs.reset_parameters()
    assert torch.equal(mine.weight, theirs.weight) and torch.equal(mine.bias, theirs.bias)
    plain = croqtile.nn.Linear(24, 10, bias=False, dtype=torch.float64)
    assert plain.bias is None and plain.weight.dtype == torch.float64
    assert "activation='relu'" in repr(mine)


def test_convert_keeps_the_weights_and_the_outputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Sequential(torch.nn.Linear(32, 8, bias=False)))
    x = random((5, 16), torch.float32)
    expected = model(x).double()
    weights = [p for p in model.parameters()]
    assert croqtile.nn.convert(model) is model
    assert isinstance(model[0], croqtile.nn.Linear) and isinstance(model[2][0], croqtile.nn.Linear)
    assert [p for p in model.parameters()] == weights  # the same tensors
    out, ran = croqtile_ops(model, x)
    assert len(ran) == 2
    assert_close(out, expected, torch.float32)
    single = croqtile.nn.convert(torch.nn.Linear(4, 2, dtype=torch.float64))
    assert isinstance(single, croqtile.nn.Linear) and single.weight.dtype == torch.float64


@pytest.mark.gpu
@pytest.mark.parametrize("activation", [None, "gelu_tanh"])
def test_linear_bf16_4096_gpu(activation: str | None) -> None:
    x = random((4096, 4096), torch.bfloat16, "cuda")
    w = random((4096, 4096), torch.bfloat16, "cuda") / 64
    b = random((4096,), torch.bfloat16, "cuda")
    y, ran = croqtile_ops(cf.linear, x, w, b, activation=activation)
    assert ran
    assert_close(y, reference(x, w, b, activation), torch.bfloat16)


def _check_silu_linear_gpu(rows: int, out_features: int, tiles: str) -> None:
    """A bf16 linear with a bias and SiLU on the GPU, forward and backward against
    float64, run on the variant of ``tiles``."""
    x = random((rows, 4096), torch.bfloat16, "cuda").requires_grad_()
    w = (random((out_features, 4096), torch.bfloat16, "cuda") / 64).requires_grad_()
    b = random((out_features,), torch.bfloat16, "cuda")
    assert kernels.linear_tiles(rows, out_features, "bf16", "gpu", x.device) == tiles
    y, ran = croqtile_ops(cf.linear, x, w, b, activation="silu")
    assert ran and all(f"_{tiles}" in name for name in ran)
    assert_close(y, reference(x, w, b, "silu"), torch.bfloat16)
    dy = random(tuple(y.shape), torch.bfloat16, "cuda")
    grads = torch.autograd.grad(y, (x, w), dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, w)]
    expected = torch.autograd.grad(reference(*leaves, b.double(), "silu"), leaves, dy.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.bfloat16)


@pytest.mark.gpu
def test_linear_narrow_tiles_gpu() -> None:
    """A grid of fewer 128 x 256 tiles than SMs runs on 128 x 128 tiles (forward and
    backward), with tails in both dimensions."""
    _check_silu_linear_gpu(1000, 1000, "narrow")


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 5, 16])
def test_linear_skinny_tiles_gpu(rows: int) -> None:
    """A decode step's few rows run on 16-row tiles with stream-K (forward and backward),
    with a column tail."""
    _check_silu_linear_gpu(rows, 1000, "skinny")


@pytest.mark.gpu
def test_linear_gradients_gpu() -> None:
    x = random((2048, 1024), torch.bfloat16, "cuda").requires_grad_()
    w = (random((3072, 1024), torch.bfloat16, "cuda") / 32).requires_grad_()
    y = cf.linear(x, w, activation="silu")
    dy = random(tuple(y.shape), torch.bfloat16, "cuda")
    grads = torch.autograd.grad(y, (x, w), dy)
    leaves = [t.detach().double().requires_grad_() for t in (x, w)]
    expected = torch.autograd.grad(reference(*leaves, None, "silu"), leaves, dy.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.bfloat16)
