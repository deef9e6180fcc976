"""croqtile.nn.functional.rms_norm (arch 4.1): torch's semantics (normalized_shape of one
or more trailing dimensions, optional weight, eps defaulting to the dtype's epsilon) on the
Croqtile kernel, with autograd; uncovered calls give torch's result."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn
import croqtile.nn.functional as cf

from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def reference(x: torch.Tensor, shape: tuple[int, ...], weight: torch.Tensor | None,
              eps: float | None) -> torch.Tensor:
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    return F.rms_norm(x.double(), list(shape), None if weight is None else weight.double(), eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("weighted", [True, False])
def test_rms_norm(dtype: torch.dtype, weighted: bool) -> None:
    # 3 * 13 = 39 rows (tiles of 16 and a tail), 72 columns (32-wide steps and a tail)
    x = random((3, 13, 72), dtype) * 3
    weight = random((72,), dtype) if weighted else None
    y, ran = croqtile_ops(cf.rms_norm, x, (72,), weight)
    assert len(ran) == 1 and ran[0].startswith("croqtile.rms_norm_"), ran
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y, reference(x, (72,), weight, None), dtype)


def test_several_normalized_dimensions_and_eps() -> None:
    x, weight = random((5, 4, 12), torch.float32) * 1e-3, random((4, 12), torch.float32)
    y, ran = croqtile_ops(cf.rms_norm, x, [4, 12], weight, eps=1e-5)
    assert ran
    # (inputs of size 1e-3 make eps a visible part of the result)
    assert_close(y, reference(x, (4, 12), weight, 1e-5), torch.float32)
    assert_close(cf.rms_norm(x, 12, eps=0.5), reference(x, (12,), None, 0.5), torch.float32)


def test_uncovered_calls_give_torch_results() -> None:
    x, weight = random((6, 16), torch.float32), random((16,), torch.float64)
    with warnings.catch_warnings():  # (torch's, about the weight's dtype)
        warnings.simplefilter("ignore", UserWarning)
        y, ran = croqtile_ops(cf.rms_norm, x, (16,), weight)
        assert ran == []
        assert torch.equal(y, F.rms_norm(x, [16], weight))
    with pytest.raises(RuntimeError):  # torch's refusal of a shape that is not x's end
        cf.rms_norm(x, (8,))
    assert cf.uncovered_rms_norm(x, (8,), None) is not None


def test_gradients() -> None:
    """gradcheck in f64 (fast mode, tight tolerances), and the backward's Croqtile kernels
    against torch autograd at shapes crossing the tiles."""
    x = random((4, 40), torch.float64).requires_grad_()
    weight = random((40,), torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w: cf.rms_norm(x, (40,), w), (x, weight),
                                    fast_mode=True, atol=1e-8, rtol=1e-6)
    x32 = random((3, 7, 48), torch.float32).requires_grad_()
    w32 = random((48,), torch.float32).requires_grad_()
    dy = random((3, 7, 48), torch.float32)
    grads, ran = croqtile_ops(torch.autograd.grad, cf.rms_norm(x32, (48,), w32), (x32, w32),
                              dy)
    assert [op.split("_")[2] for op in ran] == ["rstd", "dx", "dw"], ran
    leaves = [t.detach().double().requires_grad_() for t in (x32, w32)]
    expected = torch.autograd.grad(reference(leaves[0], (48,), leaves[1], None), leaves,
                                   dy.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)


@pytest.mark.gpu
def test_rms_norm_bf16_gpu() -> None:
    x, weight = random((4096, 4096), torch.bfloat16, "cuda"), random((4096,), torch.bfloat16,
                                                                    "cuda")
    y, ran = croqtile_ops(cf.rms_norm, x, (4096,), weight)
    assert ran
    assert_close(y, reference(x, (4096,), weight, None), torch.bfloat16)


def test_threads_using_a_new_variant_at_once_compile_it_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(float16 without a weight is a variant no other test uses)"""
    import threading

    from croqtile.nn import kernels

    compiled: list[str] = []
    real = kernels.compile_source

    def counting(source: str, **kw: object) -> object:
        compiled.append(str(kw.get("filename")))
        return real(source, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(kernels, "compile_source", counting)
    inputs = [random((20, 40), torch.float16) for _ in range(4)]
    results: list[torch.Tensor | None] = [None] * 4

    def run(i: int) -> None:
        results[i] = cf.rms_norm(inputs[i], (40,))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert compiled == ["croqtile/kernels/rms_norm.co"]
    for x, y in zip(inputs, results):
        assert y is not None
        assert_close(y, reference(x, (40,), None, None), torch.float16)


@pytest.mark.parametrize("eps", [None, 1e-5])
def test_the_module_is_torchs_with_the_croqtile_kernel(eps: float | None) -> None:
    """croqtile.nn.RMSNorm: torch.nn.RMSNorm's parameter, state_dict and output; convert()
    swaps torch's module for it, keeping the weight tensor."""
    torch.manual_seed(0)
    theirs = torch.nn.RMSNorm(40, eps=eps)
    with torch.no_grad():
        theirs.weight.copy_(random((40,), torch.float32))
    mine = croqtile.nn.RMSNorm(40, eps=eps)
    mine.load_state_dict(theirs.state_dict())
    assert list(mine.state_dict()) == list(theirs.state_dict()) == ["weight"]
    x = random((3, 7, 40), torch.float32) * 2
    y, ran = croqtile_ops(mine, x)
    assert len(ran) == 1 and ran[0].startswith("croqtile.rms_norm_"), ran
    assert_close(y, reference(x, (40,), theirs.weight.detach(), eps), torch.float32)
    model = torch.nn.Sequential(torch.nn.Linear(40, 40), theirs)
    weight = theirs.weight
    assert croqtile.nn.convert(model) is model
    assert isinstance(model[1], croqtile.nn.RMSNorm) and model[1].weight is weight
    assert model[1].eps == eps and model[1].normalized_shape == (40,)
    single = croqtile.nn.convert(torch.nn.RMSNorm(8, elementwise_affine=False))
    assert isinstance(single, croqtile.nn.RMSNorm) and single.weight is None
    y, ran = croqtile_ops(single, x[..., :8])
    assert ran and torch.allclose(y.double(), reference(x[..., :8], (8,), None, None),
                                  rtol=1e-5, atol=1e-6)
