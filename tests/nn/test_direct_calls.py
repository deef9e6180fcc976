"""croqtile.nn's eager calls skip torch's operator dispatch when nothing needs to see the
operator (``kernels.run``): the same results, the compiled function called directly; the
operator is still what runs when a gradient is wanted, under a dispatch mode (the tests'
recorder), and for tensor subclasses."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf
from croqtile.nn import attention_ops, kernels

from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def _calls() -> dict[str, Any]:
    x, w, b = random((5, 40), torch.float32), random((24, 40), torch.float32), \
        random((24,), torch.float32)
    q, k, v = (random((1, 2, 20, 32), torch.float32) for _ in range(3))
    up = random((24, 40), torch.float32)
    norm_w = random((40,), torch.float32)
    return {
        "linear": (lambda: cf.linear(x, w, b, activation="silu"),
                   lambda: F.silu(F.linear(x.double(), w.double(), b.double()))),
        "attention": (lambda: cf.scaled_dot_product_attention(q, k, v, is_causal=True),
                      lambda: F.scaled_dot_product_attention(q.double(), k.double(),
                                                             v.double(), is_causal=True)),
        "gated": (lambda: cf.gated_linear(x, w, up),
                  lambda: F.silu(x.double() @ w.double().T) * (x.double() @ up.double().T)),
        "rms_norm": (lambda: cf.rms_norm(x, (40,), norm_w, 1e-5),
                     lambda: F.rms_norm(x.double(), (40,), norm_w.double(), 1e-5)),
    }


def _no_operator(name: str) -> Any:
    raise AssertionError(f"the operator {name} was called")


@pytest.mark.parametrize("call", list(_calls()))
def test_eager_calls_without_gradients_call_the_function(call: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run, reference = _calls()[call]
    run()  # (compiles and registers the variant)
    monkeypatch.setattr(kernels, "operator", _no_operator)
    assert_close(run(), reference(), torch.float32)
    with torch.no_grad():
        assert_close(run(), reference(), torch.float32)


def test_the_operator_runs_where_it_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = random((5, 40), torch.float32), random((24, 40), torch.float32)
    cf.linear(x, w)
    # under a torch dispatch mode (which records the operators), and with a gradient
    _, ran = croqtile_ops(cf.linear, x, w)
    assert len(ran) == 1 and ran[0].startswith("croqtile.linear_"), ran
    monkeypatch.setattr(kernels, "operator", _no_operator)
    with pytest.raises(AssertionError, match="the operator croqtile::linear_|operator linear_"):
        cf.linear(x, w.requires_grad_())
    with torch.no_grad():  # no gradient recorded: direct again
        cf.linear(x, w)


def test_scalar_tensors_are_reused_and_usable_outside_inference_mode() -> None:
    q, k, v = (random((1, 2, 20, 32), torch.float64) for _ in range(3))
    with torch.inference_mode():
        first = kernels.scalar_tensor(0.125, torch.float64, q.device)
        cf.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert kernels.scalar_tensor(0.125, torch.float64, q.device) is first
    assert not first.is_inference() and first.item() == 0.125
    # the scale made under inference mode is saved for this call's backward
    q.requires_grad_()
    out = cf.scaled_dot_product_attention(q, k, v, scale=0.3)
    (grad,) = torch.autograd.grad(out.sum(), q)
    leaf = q.detach().requires_grad_()
    expected = torch.autograd.grad(F.scaled_dot_product_attention(leaf, k, v, scale=0.3).sum(),
                                   leaf)[0]
    assert_close(grad, expected, torch.float64)


@pytest.mark.gpu
def test_direct_calls_are_captured_by_cuda_graphs() -> None:
    """Direct eager calls inside ``torch.cuda.graph``: the kernels are captured and replay
    on new inputs, with a scale first seen during the capture (made in the graph's
    memory, not kept for later calls)."""
    q, k, v = (random((1, 4, 256, 64), torch.bfloat16, "cuda") for _ in range(3))
    x, w = random((16, 256), torch.bfloat16, "cuda"), random((512, 256), torch.bfloat16, "cuda")
    scale = 0.1234  # (a value no other test uses)
    for _ in range(2):  # compile and warm outside the capture, as torch requires
        cf.linear(x, w)
        cf.scaled_dot_product_attention(q, k, v, is_causal=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = cf.linear(x, w)
        o = cf.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    # the capture kept nothing: the first scale made outside it is new, and kept
    kept = kernels.scalar_tensor(scale * attention_ops.LOG2E, torch.float32, q.device)
    assert kernels.scalar_tensor(scale * attention_ops.LOG2E, torch.float32, q.device) is kept
    for t in (q, k, v, x, w):
        t.copy_(random(tuple(t.shape), torch.bfloat16, "cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(y, F.linear(x.double(), w.double()), torch.bfloat16)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                              is_causal=True, scale=scale)
    assert_close(o, expected, torch.bfloat16)
