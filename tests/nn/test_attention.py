"""croqtile.nn.functional.scaled_dot_product_attention (arch 4.1): torch's signature and
semantics on the attention kernel (causal and not, L != S, scale, boolean and additive
masks, grouped-query attention, head dimensions 16 to 256), with autograd; what the kernel
does not cover gives torch's result."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf

from ..backends.sm90 import HAVE_CUDA_BACKEND, compile_for_sm90, sm90_metadata
from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def qkv(b: int, h: int, hkv: int, length: int, keys: int, d: int, dtype: torch.dtype,
        device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (random((b, h, length, d), dtype, device), random((b, hkv, keys, d), dtype, device),
            random((b, hkv, keys, d), dtype, device))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
    mask = kw.pop("attn_mask", None)
    if mask is not None and mask.dtype != torch.bool:
        mask = mask.double()
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask,
                                          **kw)


def check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decode: bool | None = None,
          **kw: Any) -> None:
    """The kernel's result against torch's in float64 (``decode``: whether the decode
    kernel, attention_decode.co, must be the one that ran; None: either)."""
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, **kw)
    assert len(ran) == 1 and ran[0].startswith("croqtile.attention_"), ran
    assert decode is None or ran[0].startswith("croqtile.attention_decode_") == decode, ran
    assert out.dtype == q.dtype and out.shape == q.shape
    assert_close(out, reference(q, k, v, **kw), q.dtype)


def check_causal_gqa_gradients(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               causal: bool = True) -> None:
    """Gradients of (causal) grouped-query attention against torch autograd in float64.
    (Causal with one query over many keys is no test: the query sees key 0 alone, and the
    exact gradients of q and k are 0.)"""
    do = random(tuple(q.shape), q.dtype, q.device)
    out = cf.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    grads = torch.autograd.grad(out, (q, k, v), do)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, is_causal=causal, enable_gqa=True),
                                   leaves, do.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, q.dtype)


# (B, H, HKV, L, S): several query and key tiles with tails (32-wide on the CPU), L < S,
# L > S, grouped heads
SHAPES = [(2, 2, 2, 40, 40), (1, 4, 2, 24, 70), (1, 2, 1, 70, 33)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_f32(shape: tuple[int, ...], causal: bool) -> None:
    b, h, hkv, length, keys = shape
    check(*qkv(b, h, hkv, length, keys, 64, torch.float32), is_causal=causal,
          enable_gqa=hkv != h)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_attention_dtypes_with_a_scale(dtype: torch.dtype) -> None:
    check(*qkv(1, 2, 2, 36, 50, 64, dtype), is_causal=True, scale=0.3)


@pytest.mark.parametrize("d", [128, 256])
def test_attention_large_head_dimensions(d: int) -> None:
    check(*qkv(1, 2, 1, 33, 40, d, torch.bfloat16), enable_gqa=True)


def test_heads_transposed_from_sequence_major_tensors() -> None:
    """A model's projections are [B, L, H, D] viewed as [B, H, L, D] (strided, last
    dimension dense): the kernels read them in place, forward and backward."""
    b, h, hkv, length, d = 1, 4, 2, 37, 64
    q, k, v = (random((b, length, heads, d), torch.float32).transpose(1, 2).requires_grad_()
               for heads in (h, hkv, hkv))
    assert not q.is_contiguous()
    check(q, k, v, is_causal=True, enable_gqa=True)
    check_causal_gqa_gradients(q, k, v)


def test_a_boolean_mask_with_fully_masked_rows() -> None:
    """Broadcast over the batch ([H, L, S]); rows with no key give 0, as torch's do."""
    q, k, v = qkv(2, 2, 2, 40, 45, 64, torch.float32)
    mask = torch.rand(2, 40, 45) > 0.4
    mask[:, 5] = False
    mask[1, 38] = False
    check(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("mask_shape", [(40, 45), (2, 1, 40, 45), (2, 2, 1, 45)])
def test_an_additive_mask(mask_shape: tuple[int, ...]) -> None:
    q, k, v = qkv(2, 2, 1, 40, 45, 64, torch.float32)
    mask = random(mask_shape, torch.float32)
    mask[..., 3] = float("-inf")
    check(q, k, v, attn_mask=mask, scale=0.2, enable_gqa=True)


def test_three_and_five_dimensional_tensors() -> None:
    """[H, L, D] is one batch of heads (a mask broadcasts as torch's does); [N1, N2, H, L,
    D] flattens its batch dimensions."""
    q, k, v = (t[0] for t in qkv(1, 2, 2, 20, 24, 32, torch.float32))
    mask = torch.rand(20, 24) > 0.3
    check(q, k, v, attn_mask=mask)
    q, k, v = (t.unflatten(0, (2, 3)) for t in qkv(6, 2, 1, 20, 24, 32, torch.float32))
    check(q, k, v, is_causal=True, enable_gqa=True)


def test_uncovered_calls_give_torch_results() -> None:
    q, k, v = qkv(1, 2, 2, 20, 24, 48, torch.float32)  # head dimension 48
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, is_causal=True)
    assert ran == []
    assert torch.equal(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    q, k, v = qkv(1, 2, 2, 20, 24, 64, torch.float32)
    torch.manual_seed(5)
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, dropout_p=0.5)
    torch.manual_seed(5)
    assert ran == [] and torch.equal(out, F.scaled_dot_product_attention(q, k, v,
                                                                         dropout_p=0.5))
    assert cf.uncovered_attention(q, k, v, torch.ones(3, 20, 24, dtype=torch.bool), 0.0,
                                  False, False) == "a mask of shape (3, 20, 24)"
    # a scale that is not positive, unmasked: torch's (a mask takes the kernel)
    for scale in (-0.5, 0.0):
        out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, scale=scale)
        assert ran == [] and torch.equal(out, F.scaled_dot_product_attention(q, k, v,
                                                                             scale=scale))
    mask = torch.rand(20, 24) > 0.3
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, attn_mask=mask,
                            scale=-0.5)
    assert ran
    assert_close(out, F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                     attn_mask=mask, scale=-0.5), torch.float32)
    q, k, v = qkv(1, 4, 2, 20, 24, 64, torch.float32)
    with pytest.raises(RuntimeError):  # torch's refusal: different head counts, no GQA
        cf.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("length", [1, 5, 16])
def test_decode_steps_split_the_keys(length: int) -> None:
    """At most 16 queries take attention_decode.co: the keys in pieces of 128 on the CPU
    (here 2 whole pieces and a short one), each piece a block, then the pieces' outputs
    weighed by their log-sum-exp. Grouped heads, causal, a padding mask with a row that
    sees no key, an additive mask with a piece that sees none."""
    q, k, v = qkv(2, 4, 2, length, 300, 64, torch.float32)
    check(q, k, v, enable_gqa=True, decode=True)
    check(q, k, v, is_causal=True, enable_gqa=True, decode=True)
    mask = torch.rand(2, 1, length, 300) > 0.2
    mask[1, 0, length - 1] = False
    check(q, k, v, attn_mask=mask, enable_gqa=True, decode=True)
    additive = random((length, 300), torch.float32)
    additive[:, 128:256] = float("-inf")
    check(q, k, v, attn_mask=additive, scale=0.4, enable_gqa=True, decode=True)


def test_seventeen_queries_take_the_prefill_kernel() -> None:
    check(*qkv(1, 2, 2, 17, 300, 64, torch.float32), decode=False)


def test_decode_step_gradients() -> None:
    """A decode step that wants gradients runs the training form (the prefill kernel,
    which also writes the log-sum-exp the backward reads); heads read in place from
    sequence-major tensors, as a model's projections give them."""
    q, k, v = (random((1, length, heads, 32), torch.float32).transpose(1, 2).requires_grad_()
               for heads, length in ((4, 3), (2, 200), (2, 200)))
    with torch.no_grad():
        check(q, k, v, enable_gqa=True, decode=True)
    check(q, k, v, enable_gqa=True, decode=False)
    check_causal_gqa_gradients(q, k, v, causal=False)


TIGHT = {"fast_mode": True, "atol": 1e-8, "rtol": 1e-6}


def test_gradcheck_f64() -> None:
    """gradcheck through the forward kernel and the backward kernels, causal with grouped
    heads, and with an additive mask. Fast mode (the Jacobian along random directions: a
    few interpreted calls instead of two per input element) with tolerances far below its
    defaults, which would let a 1 % error in one gradient through."""
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 1, 6, 9, 16, torch.float64))
    assert torch.autograd.gradcheck(
        lambda q, k, v: cf.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                        enable_gqa=True), (q, k, v),
        **TIGHT)
    mask = random((6, 9), torch.float64)
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 2, 6, 9, 16, torch.float64))
    assert torch.autograd.gradcheck(
        lambda q, k, v: cf.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.7),
        (q, k, v), **TIGHT)


@pytest.mark.parametrize("kw", [{"is_causal": True, "enable_gqa": True},
                                {"attn_mask": "bool"}], ids=["causal-gqa", "bool-mask"])
def test_gradients_match_torch(kw: dict[str, Any]) -> None:
    """The backward's three Croqtile kernels (the rows' statistics, dq, then dk and dv)
    against torch autograd in float64, at shapes crossing the tiles."""
    q, k, v = (t.requires_grad_() for t in qkv(2, 4, 2, 40, 36, 64, torch.float32))
    if kw.get("attn_mask") == "bool":
        kw = {"attn_mask": torch.rand(40, 36) > 0.3, "enable_gqa": True}
    do = random((2, 4, 40, 64), torch.float32)
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, **kw)
    assert ran
    grads, ran = croqtile_ops(torch.autograd.grad, out, (q, k, v), do)
    assert [op.split("_")[1] for op in ran] == ["delta", "dq", "dkv"], ran
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, **kw), leaves, do.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)



# (B, H, HKV, L, S, D): odd lengths crossing the CPU's backward tiles (dq: 32 rows by 16
# keys, dk/dv: 32 keys by 16 rows, warpgroups of 16), L < S and L > S, grouped heads
GRADIENT_SHAPES = [(1, 4, 2, 45, 45, 32), (2, 2, 1, 23, 71, 16), (1, 2, 2, 67, 29, 64)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive"])
@pytest.mark.parametrize("shape", GRADIENT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_of_the_training_form(shape: tuple[int, ...], mask: str | None,
                                        dtype: torch.dtype) -> None:
    """Every element of dq, dk and dv against torch autograd in float64: the forward's
    training form (o and each row's log-sum-exp) then the backward's delta, dq and dk/dv
    kernels, unmasked, causal (the diagonal tiles masked, the others not), with a boolean
    mask (a row with no key: zero gradients) and an additive one."""
    b, h, hkv, length, keys, d = shape
    q, k, v = (t.requires_grad_() for t in qkv(b, h, hkv, length, keys, d, dtype))
    kw = _mask_kwargs(mask, b, 1, length, keys, dtype)  # (an additive mask shared by heads)
    do = random((b, h, length, d), dtype)
    out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, **kw)
    assert len(ran) == 1 and ran[0].startswith("croqtile.attention_") and "_train_" in ran[0]
    grads, ran = croqtile_ops(torch.autograd.grad, out, (q, k, v), do)
    assert [op.split("_")[1] for op in ran] == ["delta", "dq", "dkv"], ran
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, **kw), leaves, do.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, dtype)


def test_the_training_form_writes_each_rows_log_sum_exp() -> None:
    """The training form's second output: log2 of each row's sum of exp2 of the scaled
    scores (+inf for a row with every key masked), beside the forward's output; a call
    that needs no gradient runs the forward without it."""
    from croqtile.nn import attention_ops, kernels

    q, k, v = qkv(1, 2, 1, 37, 41, 32, torch.float32)
    mask = torch.zeros(1, 1, 37, 41).masked_fill(torch.rand(37, 41) > 0.6, float("-inf"))
    mask[..., 7, :] = float("-inf")
    scale = torch.full((1,), 32 ** -0.5 * attention_ops.LOG2E)
    for masked, causal in ((False, True), (True, False)):
        train = kernels.operator(attention_ops.training_name("f32", 32, masked, "cpu"))
        out, lse = train(q, k, v, mask if masked else None, causal, scale)
        scores = q.double() @ k.double().repeat_interleave(2, 1).transpose(-1, -2) * 32 ** -0.5
        if causal:
            scores = scores.masked_fill(torch.ones(37, 41, dtype=torch.bool).triu(1),
                                        float("-inf"))
        else:
            scores = scores + mask.double()
        want = torch.logsumexp(scores, -1) * attention_ops.LOG2E
        want = want.masked_fill(want == float("-inf"), float("inf"))
        assert lse.shape == (1, 2, 37) and torch.equal(lse.isinf(), want.isinf())
        assert_close(lse.nan_to_num(posinf=0.0), want.nan_to_num(posinf=0.0), torch.float32)
        assert_close(out.transpose(1, 2), reference(q, k, v, is_causal=causal, enable_gqa=True,
                                                    attn_mask=None if causal else mask),
                     torch.float32)
    _, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, is_causal=True,
                          enable_gqa=True)
    assert len(ran) == 1 and "_train_" not in ran[0] and "_lse_" not in ran[0]



def test_gradients_of_a_sum_and_of_sequence_major_outputs() -> None:
    """The output's gradient as it comes: broadcast from a sum (stride 0: copied), or
    dense in the [B, L, H, D] layout a model's next step reads (taken in place)."""
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 1, 33, 33, 32, torch.float32))
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out = cf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    expected = torch.autograd.grad(reference(*leaves, is_causal=True, enable_gqa=True).sum(),
                                   leaves)
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)
    out = cf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    do = random((1, 33, 2, 32), torch.float32)
    grads = torch.autograd.grad(out.transpose(1, 2), (q, k, v), do)
    expected = torch.autograd.grad(
        reference(*leaves, is_causal=True, enable_gqa=True).transpose(1, 2), leaves,
        do.double())
    for got, want in zip(grads, expected):
        assert_close(got, want, torch.float32)


# ------------------------------------------------------------------ dk/dv: grouped and split

# (B, H, HKV, L, S, D): groups of 4, 2 and 1 query heads (1: the rule never splits), L = S,
# L < S and L > S off the CPU's backward tiles (dk/dv: 32 keys by 16 rows)
SPLIT_SHAPES = [(1, 4, 1, 45, 45, 32), (2, 4, 2, 23, 71, 16), (1, 2, 2, 67, 29, 64)]
# per element: |got - want| <= tolerance * (|want| + max |want|) (measured: f32 within
# 5e-7 of the largest, bf16 within 6e-3)
ELEMENT_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def assert_every_element_close(got: torch.Tensor, want: torch.Tensor,
                               dtype: torch.dtype) -> None:
    """Each element of ``got`` against the float64 ``want``: finite, and off by at most
    the dtype's tolerance of its own magnitude plus the largest one's."""
    got64 = got.detach().to("cpu", torch.float64)
    bound = ELEMENT_TOLERANCE[dtype] * (want.abs() + want.abs().max())
    bad = ~torch.isfinite(got64) | ((got64 - want).abs() > bound)
    if bad.any():
        first = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{int(bad.sum())} of {bad.numel()} elements off, first at "
                             f"{list(first)}: {got64[first].item()} != {want[first].item()}")


def _mask_kwargs(mask: str | None, b: int, h: int, length: int, keys: int,
                 dtype: torch.dtype) -> dict[str, Any]:
    """SDPA's keywords for no mask, causal, a boolean mask (row 3 with no key: zero
    gradients) or an additive one of every batch and head (each split block reads its
    query head's own)."""
    kw: dict[str, Any] = {"enable_gqa": True}
    if mask == "causal":
        kw["is_causal"] = True
    elif mask == "bool":
        kw["attn_mask"] = torch.rand(length, keys) > 0.3
        kw["attn_mask"][3] = False
    elif mask == "additive":
        kw["attn_mask"] = random((b, h, length, keys), dtype)
    return kw


def _gradients_against_float64(shape: tuple[int, ...], mask: str | None,
                               dtype: torch.dtype) -> list[str]:
    """Every element of dq, dk and dv through croqtile.nn (the training form, then the
    backward) against torch autograd in float64; the backward's operators."""
    b, h, hkv, length, keys, d = shape
    q, k, v = (t.requires_grad_() for t in qkv(b, h, hkv, length, keys, d, dtype))
    kw = _mask_kwargs(mask, b, h, length, keys, dtype)
    do = random((b, h, length, d), dtype)
    out = cf.scaled_dot_product_attention(q, k, v, **kw)
    grads, ran = croqtile_ops(torch.autograd.grad, out, (q, k, v), do)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, **kw), leaves, do.double())
    for got, want in zip(grads, expected):
        assert got.dtype == dtype
        assert_close(got, want, dtype)
        assert_every_element_close(got, want, dtype)
    return [op.split(".")[1] for op in ran]


def _force_dkv_form(monkeypatch: pytest.MonkeyPatch, split: bool) -> None:
    """The rule's threshold on the CPU set so that every grid splits, or none does."""
    from croqtile.nn import attention_ops

    monkeypatch.setitem(attention_ops.BACKWARD_SPLIT_BLOCKS, "cpu", 1 << 40 if split else 0)


@pytest.mark.parametrize("split", [False, True], ids=["grouped", "split"])
@pytest.mark.parametrize("mask", [None, "causal", "bool", "additive"])
@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_of_both_dkv_forms(shape: tuple[int, ...], mask: str | None, split: bool,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """dk and dv by either form of the dk/dv kernel (the rule forced either way): grouped
    (a block per key tile of a key/value head, summing its group's query heads) or split
    (a block per key tile of a query head, the group's partials summed after; never
    with groups of one query head). Every element of dq, dk and dv against float64,
    unmasked, causal, with a boolean and with an additive mask."""
    _force_dkv_form(monkeypatch, split)
    b, h, hkv, length, keys, d = shape
    ran = _gradients_against_float64(shape, mask, torch.float32)
    dkv = "attention_dkv_split_" if split and h > hkv else "attention_dkv_"
    assert [op.split("_f32")[0] + "_" for op in ran] == [
        "attention_delta_", "attention_dq_", dkv], ran


@pytest.mark.parametrize("split", [False, True], ids=["grouped", "split"])
@pytest.mark.parametrize("causal", [False, True])
def test_both_dkv_forms_in_bf16(causal: bool, split: bool,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """In bf16 the split form's partials stay f32 and the sum is rounded once, as the
    grouped form's accumulator is: both as close to float64, element by element."""
    _force_dkv_form(monkeypatch, split)
    ran = _gradients_against_float64((1, 4, 1, 45, 45, 32), "causal" if causal else None,
                                     torch.bfloat16)
    assert ran[-1].startswith("attention_dkv_split_" if split else "attention_dkv_bf16"), ran


@pytest.mark.parametrize("heads", [(2, 2), (6, 3)], ids=["groups-of-1", "groups-of-2"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_split_operator(heads: tuple[int, int], causal: bool) -> None:
    """The split form's operator called itself: each query head's partial dk and dv,
    [2, B, H, S, D] in the accumulator type, whose sum over a group's heads is the
    gradient (with groups of one, which the rule never splits, the gradient itself),
    every element against float64; and torch.library.opcheck."""
    from croqtile.nn import attention_ops, kernels

    h, hkv = heads
    b, length, keys, d = 2, 37, 41, 32
    q, k, v = qkv(b, h, hkv, length, keys, d, torch.float32)
    scale = torch.full((1,), d ** -0.5 * attention_ops.LOG2E)
    train = kernels.operator(attention_ops.training_name("f32", d, False, "cpu"))
    out, lse = train(q, k, v, None, causal, scale)
    do = random((b, h, length, d), torch.float32)
    delta_op, _, split_op = attention_ops.attention_backward_ops("f32", d, False, "cpu",
                                                                 split=True)
    delta = delta_op(out.transpose(1, 2), do)
    args = (q, k, v, do, lse, delta, causal, scale)
    partial = split_op(*args)
    assert partial.shape == (2, b, h, keys, d) and partial.dtype == torch.float32
    dk, dv = partial.view(2, b, hkv, h // hkv, keys, d).sum(3)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, is_causal=causal, enable_gqa=True),
                                   leaves, do.double())
    for got, want in zip((dk, dv), expected[1:]):
        assert_close(got, want, torch.float32)
        assert_every_element_close(got, want, torch.float32)
    torch.library.opcheck(split_op, args)


def test_the_split_form_is_chosen_for_small_grids() -> None:
    """backward_split: groups of several query heads and a grouped dk/dv grid (key tiles x
    key/value heads x batch) of fewer than BACKWARD_SPLIT_BLOCKS blocks. On the GPU,
    where it was timed slower, never (Llama-3-8B's attention at S = 2048 to 8192); were
    the threshold two waves of an H100, it would split at S = 2048 (128 blocks) and 4096
    (256), and not at 8192 (512), 4 batches of 2048 or groups of one. On the CPU the
    tests' grids fall on both sides."""
    from croqtile.nn import attention_ops
    from croqtile.nn.attention_ops import backward_split

    llama = [(1, 32, 8, s) for s in (2048, 4096, 8192)] + [(4, 32, 8, 2048), (1, 32, 32, 2048)]
    assert not any(backward_split("gpu", "bf16", 128, *shape) for shape in llama)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(attention_ops.BACKWARD_SPLIT_BLOCKS, "gpu", 2 * 132)
        assert [backward_split("gpu", "bf16", 128, *shape) for shape in llama] == [
            True, True, False, False, False]
    # GRADIENT_SHAPES: 4 blocks of groups of 2 split; 6 blocks, and groups of 1, do not
    assert [backward_split("cpu", "f32", d, b, h, hkv, keys)
            for b, h, hkv, _, keys, d in GRADIENT_SHAPES] == [True, False, False]


def _backward_sources(kind: str) -> dict[str, str]:
    import croqtile
    from croqtile.nn import attention_ops, kernels

    tiles = attention_ops.attention_backward_tiles(kind, "bf16", 128)
    module = croqtile.compile((kernels.KERNELS / "attention_backward.co").read_text(),
                              defines=dict(attention_ops.attention_defines(
                                  "bf16", 128, False, tiles.defines())),
                              **dict(attention_ops.BACKWARD_OPTIONS[kind]))
    return {name: fn.triton_source for name, fn in module.functions.items()}


def test_the_backward_masks_only_the_tiles_that_need_it() -> None:
    """dq and dk/dv (GPU tiles) each walk the tiles with no hidden score in a loop
    without a mask, then the others (the causal diagonal, dq's keys past S) in a second
    loop; the warpgroups of a block are one computation (8 warps, no loop over them);
    3 products a step for dq, 4 for dk/dv (both forms), none in delta."""
    sources = _backward_sources("gpu")
    assert "tl.dot(" not in sources["attention_delta"]
    for name, dots in (("attention_dq", 3), ("attention_dkv", 4), ("attention_dkv_split", 4)):
        source = sources[name]
        kernel = source[source.index("@triton.jit\ndef " + name):]
        assert "num_warps=8, num_stages=2" in source and "for wg in" not in source
        loops = [part for part in re.split(r"\n    +for (?:kt|i|i_1) in ", kernel)[1:]]
        assert len(loops) == 2, name
        assert [loop.count("tl.dot(") for loop in loops] == [dots, dots]
        assert "float('-inf')" not in loops[0] and "float('-inf')" in loops[1]


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="needs Triton's NVIDIA backend")
def test_the_backward_compiles_for_sm90() -> None:
    """The GPU variant (bf16, D = 128) compiled for sm_90 by Triton (no GPU needed): 8
    warps for dq and dk/dv, within a block's shared memory; the forward's training form
    (its lse written after the key loop) and the masked variants compile too."""
    import croqtile
    from croqtile.nn import attention_ops, kernels


    tiles = attention_ops.attention_backward_tiles("gpu", "bf16", 128)
    module = croqtile.compile((kernels.KERNELS / "attention_backward.co").read_text(),
                              defines=dict(attention_ops.attention_defines(
                                  "bf16", 128, False, tiles.defines())),
                              **dict(attention_ops.BACKWARD_OPTIONS["gpu"]))
    for name, fn in module.functions.items():
        metadata = sm90_metadata(fn._compiled.artifact)  # type: ignore[attr-defined]
        assert metadata.num_warps == (4 if name == "attention_delta" else 8)
        assert metadata.shared <= 227 * 1024
    # the training form of the forward, and the masked variants (pointers and descriptors)
    for masked in (False, True):
        variant = attention_ops.attention_variant("bf16", 128, masked, "gpu", lse=True)
        forward = croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                                   defines={**dict(variant.defines), "NAME": "train"},
                                   **dict(variant.options)).train
        compile_for_sm90(forward._compiled.artifact, 0, "train")  # type: ignore[attr-defined]
    masked_backward = croqtile.compile(
        (kernels.KERNELS / "attention_backward.co").read_text(),
        defines=dict(attention_ops.attention_defines("bf16", 128, True, tiles.defines())),
        **dict(attention_ops.BACKWARD_OPTIONS["gpu"]))
    for name, fn in masked_backward.functions.items():
        compile_for_sm90(fn._compiled.artifact, 0, name)  # type: ignore[attr-defined]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
def test_attention_bf16_1024_gpu(causal: bool) -> None:
    check(*qkv(2, 8, 8, 1024, 1024, 128, torch.bfloat16, "cuda"), is_causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
def test_attention_gradients_gpu(d: int) -> None:
    q, k, v = (t.requires_grad_() for t in qkv(2, 8, 2, 1024, 1024, d, torch.bfloat16, "cuda"))
    check_causal_gqa_gradients(q, k, v)


@pytest.mark.gpu
@pytest.mark.parametrize("length", [1, 5, 16])
def test_decode_step_attention_gpu(length: int) -> None:
    """A decode step's few queries over a long cache (attention_decode.co): grouped heads,
    without a mask and with a padding-style boolean one, with gradients."""
    q, k, v = (t.requires_grad_() for t in qkv(2, 32, 8, length, 3000, 128,
                                                torch.bfloat16, "cuda"))
    mask = torch.rand(2, 1, length, 3000, device="cuda") > 0.1
    with torch.no_grad():
        check(q, k, v, enable_gqa=True, decode=True)
        check(q, k, v, attn_mask=mask, enable_gqa=True, decode=True)
    check_causal_gqa_gradients(q, k, v, causal=False)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 256])
def test_attention_gqa_and_mask_gpu(d: int) -> None:
    q, k, v = qkv(2, 8, 2, 1000, 1500, d, torch.float16, "cuda")
    check(q, k, v, enable_gqa=True)
    mask = torch.rand(1000, 1500, device="cuda") > 0.2
    check(q, k, v, attn_mask=mask, enable_gqa=True)


@pytest.mark.parametrize("budget,causal", [(2 * 40 * 32 * 2, True), (2 * 40 * 32 * 3, False),
                                           (1, True)], ids=["bands-of-2", "bands-of-3", "one"])
def test_blocks_in_bands_of_heads(budget: int, causal: bool) -> None:
    """attention.co starts its blocks a band of planes (a head of a batch) at a time,
    the last row tiles first; with a small KV_BUDGET the bands hold 2 or 3 of the 14
    planes of 2 batches of 7 heads (the last band short, one band across the batches)
    or 1: every (batch, head, row tile) is still computed once."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    defines = dict(attention_ops.attention_defines("f32", 32, False, (
        ("ROWS", 16), ("COLS", 16), ("WG_ROWS", 16))))
    module = croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                              defines={**defines, "NAME": "bands", "KV_BUDGET": budget})
    b, h, hkv, length, keys, d = 2, 7, 7, 50, 40, 32
    q, k, v = qkv(b, h, hkv, length, keys, d, torch.float32)
    scale = torch.full((1,), d ** -0.5 * attention_ops.LOG2E)
    out = module.bands(q, k, v, causal, scale).transpose(1, 2)
    assert_close(out, reference(q, k, v, is_causal=causal), torch.float32)



@pytest.mark.parametrize("budget,causal", [(2 * 2 * 50 * 32 * 2, True), (1, False)],
                         ids=["bands-of-2", "one"])
def test_backward_blocks_in_bands_of_heads(budget: int, causal: bool) -> None:
    """attention_backward.co's dq and dk/dv kernels start their blocks in bands too (dq:
    of query heads, the last row tiles first; dk/dv: of key/value heads, the first key
    tiles first); with a small KV_BUDGET (dk/dv's bands of 2 of the 6 key/value heads of
    2 batches of 3, each read by 2 query heads of 50 rows, the split form's of 4 of the 12
    query heads; or 1) every gradient element is still computed once."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    tiles = attention_ops.attention_backward_tiles("cpu", "f32", 32)
    module = croqtile.compile((kernels.KERNELS / "attention_backward.co").read_text(),
                              defines={**dict(attention_ops.attention_defines(
                                  "f32", 32, False, tiles.defines())), "KV_BUDGET": budget})
    b, h, hkv, length, keys, d = 2, 6, 3, 50, 40, 32
    q, k, v = qkv(b, h, hkv, length, keys, d, torch.float32)
    scale = torch.full((1,), d ** -0.5 * attention_ops.LOG2E)
    train = kernels.operator(attention_ops.training_name("f32", d, False, "cpu"))
    out, lse = train(q, k, v, None, causal, scale)
    do = random((b, h, length, d), torch.float32)
    out = out.transpose(1, 2)
    delta = module.attention_delta(out, do)
    dq = module.attention_dq(q, k, v, do, lse, delta, causal, scale)
    dkv = module.attention_dkv(q, k, v, do, lse, delta, causal, scale)
    partial = module.attention_dkv_split(q, k, v, do, lse, delta, causal, scale)
    split = partial.view(2, b, hkv, h // hkv, keys, d).sum(3)
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*leaves, is_causal=causal, enable_gqa=True),
                                   leaves, do.double())
    for got, want in zip((dq, dkv[0], dkv[1], split[0], split[1]),
                         expected + expected[1:]):
        assert_close(got, want, torch.float32)

@pytest.mark.parametrize("causal", [False, True])
def test_every_output_element_is_written(causal: bool) -> None:
    """croqtile.nn compiles attention.co with ``fill_buffers=False`` (its output made
    uninitialised): under ``debug`` an unwritten element would stay NaN. Row and key
    counts off the tiles, two batches of grouped heads."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    defines = dict(attention_ops.attention_defines("f32", 32, False, (
        ("ROWS", 16), ("COLS", 16), ("WG_ROWS", 16))))
    module = croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                              defines={**defines, "NAME": "written"}, fill_buffers=False,
                              debug=True)
    assert "float('nan')" in module.written.triton_source
    q, k, v = qkv(2, 4, 2, 37, 29, 32, torch.float32)
    scale = torch.full((1,), 32 ** -0.5 * attention_ops.LOG2E)
    out = module.written(q, k, v, causal, scale).transpose(1, 2)
    assert not torch.isnan(out).any()
    assert_close(out, reference(q, k, v, is_causal=causal, enable_gqa=True), torch.float32)


def test_the_output_is_divided_by_one_reciprocal_a_row() -> None:
    """The epilogue takes one reciprocal of each row's sum and multiplies the row by it
    (a division of every element cost 192 more instructions a block on sm_90). The
    results against float64 are the other tests' (rows without keys still give 0:
    test_a_boolean_mask_with_fully_masked_rows)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    defines = dict(attention_ops.attention_defines("bf16", 64, False, (
        ("ROWS", 32), ("COLS", 32), ("WG_ROWS", 16))))
    source = croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                              defines={**defines, "NAME": "recip"}).recip.triton_source
    assert "(1.0 / denominator)" in source and "(acc * denominator[:, None])" in source
    assert "(acc / denominator" not in source


# ------------------------------------------------------------------ the warp-specialised form


def _form(element: str, d: int, ws: bool, kind: str = "cpu", name: str = "form") -> Any:
    """attention.co compiled as croqtile.nn compiles a form of it (attention_variant)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    variant = attention_ops.attention_variant(element, d, False, kind, ws)
    return getattr(croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                                    defines={**dict(variant.defines), "NAME": name},
                                    **dict(variant.options)), name)


def test_warp_specialised_form_has_one_branchless_key_loop() -> None:
    """The form croqtile.nn runs with CROQTILE_ATTENTION_WS: every key tile masked by one
    comparison an element (no uniform `if` in the loop, which Triton 3.6's Hopper warp
    specialisation refuses), the loop warp-specialised, 4 warps a program and 2 stages,
    each head's q, k, v and o described by a 2-D descriptor of its own (no reshape). The
    default form keeps its branch around the mask of the tiles that need it."""
    source = _form("bf16", 64, True).triton_source
    loops = re.findall(r"for kt in (.*):", source)
    assert loops == ["tl.range(0, key_tiles, warp_specialize=True)"]
    assert "if (kt >= whole_tiles)" not in source and "last_key" in source
    assert "num_warps=4, num_stages=2" in source
    assert sorted(re.findall(r"(\w+)_view_desc = tl\.make_tensor_descriptor", source)) == [
        "k", "o", "q", "v"]
    assert "tl.reshape" not in source
    default = _form("bf16", 64, False).triton_source
    assert "if (kt >= whole_tiles):" in default and "warp_specialize" not in default


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_warp_specialised_form_against_float64(shape: tuple[int, ...], causal: bool,
                                               dtype: torch.dtype) -> None:
    """The warp-specialised form (run by Triton's interpreter: the same kernel text) at
    shapes with query and key tails, L < S, L > S and grouped heads, q strided as a
    model's [B, L, H, D] projections make it."""
    from croqtile.nn import attention_ops, kernels

    element = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    b, h, hkv, length, keys = shape
    d = 64
    form = _form(element, d, True, name=f"ws_{element}")
    q = random((b, length, h, d), dtype).transpose(1, 2)
    k, v = (random((b, hkv, keys, d), dtype) for _ in range(2))
    scale = torch.full((1,), d ** -0.5 * attention_ops.LOG2E)
    out = form(q, k, v, causal, scale).transpose(1, 2)
    assert_close(out, reference(q, k, v, is_causal=causal, enable_gqa=hkv != h), dtype)


def test_warp_specialised_form_is_chosen_by_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from croqtile.nn import attention_ops, kernels

    monkeypatch.delenv("CROQTILE_ATTENTION_WS", raising=False)
    assert not attention_ops.attention_ws("bf16", 128, False, "gpu")
    monkeypatch.setenv("CROQTILE_ATTENTION_WS", "1")
    assert attention_ops.attention_ws("bf16", 128, False, "gpu")
    assert attention_ops.attention_ws("f16", 64, False, "gpu")
    # not on the CPU, with a mask, for 4- and 8-byte types or at head dimension 256
    assert not attention_ops.attention_ws("bf16", 128, False, "cpu")
    assert not attention_ops.attention_ws("bf16", 128, True, "gpu")
    assert not attention_ops.attention_ws("f32", 128, False, "gpu")
    assert not attention_ops.attention_ws("bf16", 256, False, "gpu")
    variant = attention_ops.attention_variant("bf16", 128, False, "gpu", True)
    assert dict(variant.names)["NAME"] == "attention_bf16_d128_ws_gpu"
    assert dict(variant.defines)["EVERY_TILE"] == 1
    assert dict(variant.options) == {"fill_buffers": False,
                                     **dict(attention_ops.ATTENTION_WS_OPTIONS)}


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="needs Triton's NVIDIA backend")
@pytest.mark.parametrize("d", [64, 128])
def test_warp_specialised_form_compiles_warp_specialised_for_sm90(d: int) -> None:
    """Compiled for sm_90 by Triton 3.6 (no GPU needed), the form is warp-specialised: a
    producer warpgroup and two consumer warpgroups (12 warps from a 4-warp program), and
    fits a block's shared memory; the default form stays one 8-warp program."""

    for ws, warps in ((True, 12), (False, 8)):
        metadata = sm90_metadata(_form("bf16", d, ws, kind="gpu")._compiled.artifact)
        assert metadata.num_warps == warps
        assert metadata.shared <= 227 * 1024


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="needs Triton's NVIDIA backend")
@pytest.mark.parametrize("element,d", [("bf16", 128), ("f16", 64), ("bf16", 256), ("f32", 128)])
@pytest.mark.parametrize("short", [True, False], ids=["short", "long"])
def test_decode_kernels_compile_for_sm90(element: str, d: int, short: bool) -> None:
    """attention_decode.co at croqtile.nn's GPU tiles (short and long caches), with and
    without a mask: both kernels (the pieces, their combination) compile for sm_90 (no
    GPU needed)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels


    rows, cols, chunk, stages = attention_ops.attention_decode_tiles("gpu", element, d, short)
    assert chunk % cols == 0
    for masked in (False, True):
        defines = dict(attention_ops.attention_defines(element, d, masked, (
            ("ROWS", rows), ("COLS", cols), ("CHUNK", chunk))))
        module = croqtile.compile((kernels.KERNELS / "attention_decode.co").read_text(),
                                  defines={**defines, "NAME": "decode"},
                                  **({"num_stages": stages} if stages else {}))
        artifact = module.decode._compiled.artifact
        assert len(artifact.kernels) == 2
        for index in range(2):
            compile_for_sm90(artifact, index, f"decode {element} d{d} mask={masked}")


def test_the_cuda_forward_is_chosen_where_it_was_timed_faster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """croqtile.nn.attention_cuda: the hand-written Hopper kernel takes unmasked calls
    not causal, and causal ones from 2,048 queries on, at head dimension 128, unless
    CROQTILE_ATTENTION_CUDA=0; never a CPU call or one that wants gradients."""
    from croqtile import settings
    from croqtile.nn import attention_cuda

    assert attention_cuda.faster(False, 2048, 128) and attention_cuda.faster(True, 4096, 128)
    assert attention_cuda.faster(True, 2048, 128) and not attention_cuda.faster(True, 1024, 128)
    assert not attention_cuda.faster(False, 4096, 64)
    q = torch.randn(1, 2, 40, 128)
    monkeypatch.delenv("CROQTILE_ATTENTION_CUDA", raising=False)
    assert settings.attention_cuda()  # (on by default)
    assert not attention_cuda.cuda_attention(q, q, q, False, 0.1)  # (on the CPU)
    for off in ("0", ""):
        monkeypatch.setenv("CROQTILE_ATTENTION_CUDA", off)
        assert not settings.attention_cuda()
    check(q, q[:, :1], q[:, :1], enable_gqa=True)  # (the Triton kernel's result)


@pytest.mark.gpu
def test_the_cuda_forward_through_croqtile_nn_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a Hopper GPU: every element against float64 (causal at 4,096 queries, not
    causal at 1,000, sequence-major projections, grouped heads); a causal call of 1,024
    queries, one that wants gradients and any with CROQTILE_ATTENTION_CUDA=0 stay on
    Triton; the operator traces into one graph and replays in a CUDA graph."""
    from croqtile.nn import attention_cuda

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a Hopper GPU")
    monkeypatch.setenv("CROQTILE_ATTENTION_CUDA", "1")
    for causal, length in ((True, 4096), (False, 1000)):
        q, k, v = (random((2, length, heads, 128), torch.bfloat16, "cuda").transpose(1, 2)
                   for heads in (32, 8, 8))
        out, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, is_causal=causal,
                                enable_gqa=True)
        assert [r.removesuffix(".default") for r in ran] == ["croqtile.attention_cuda"], ran
        assert_close(out, reference(q, k, v, is_causal=causal, enable_gqa=True),
                     torch.bfloat16)
    q, k, v = qkv(1, 8, 2, 1024, 1024, 128, torch.bfloat16, "cuda")
    check(q, k, v, is_causal=True, enable_gqa=True, decode=False)
    _, ran = croqtile_ops(cf.scaled_dot_product_attention, q, k, v, is_causal=True,
                          enable_gqa=True)
    assert "croqtile.attention_cuda" not in [r.removesuffix(".default") for r in ran], ran
    q, k, v = qkv(1, 8, 2, 4096, 4096, 128, torch.bfloat16, "cuda")
    assert attention_cuda.cuda_attention(q, k, v, True, 0.1)
    monkeypatch.setenv("CROQTILE_ATTENTION_CUDA", "0")
    assert not attention_cuda.cuda_attention(q, k, v, True, 0.1)
    monkeypatch.setenv("CROQTILE_ATTENTION_CUDA", "1")
    assert not attention_cuda.cuda_attention(q.requires_grad_(), k, v, True, 0.1)
    q = q.detach()
    compiled = torch.compile(lambda q, k, v: cf.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True), fullgraph=True)
    assert_close(compiled(q, k, v), reference(q, k, v, is_causal=True, enable_gqa=True),
                 torch.bfloat16)
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    cf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (warm)
    with torch.cuda.graph(graph):
        out.copy_(cf.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(out, reference(q, k, v, is_causal=True, enable_gqa=True), torch.bfloat16)
