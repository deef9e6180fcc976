"""croqtile.nn.functional.fused_moe with FP8 E4M3 expert weights and 128 x 128 block scales
(croqtile/kernels/moe_fp8.co): against a float64 emulation of the same quantisation
(tight) and against float64 of the unquantised activations (loose), the operators under
``opcheck``, and the refused arguments."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf
from croqtile.nn import moe, moe_fp8, moe_ops

from ..e2e.checks import poisoned_empty, random
from .ops import croqtile_ops

E4M3 = torch.float8_e4m3fn
ACTS = {"silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}
# The tight comparison: |out - emulation| <= half an ulp of the output's dtype (its own
# rounding, eps / 2 * |emulation|) + TIGHT * max |emulation|, TIGHT for the f32
# accumulation's order and for a rounding decided differently in the intermediate h (it
# rounds to the hidden dtype in both and is quantised again, so that such a case, rare,
# moves one element of h by an E4M3 step). Measured over 5 shapes x 3 seeds on the CPU:
# past the output's rounding at most 5.9e-4 (bf16) and 1.3e-6 (f16) of max |emulation|;
# raw, 3.2e-3 (bf16) and 4.3e-4 (f16).
TIGHT = 1e-3
# The loose comparison, against the unquantised activations: two E4M3 quantisations (x
# and h, 3 mantissa bits, about 2.5 % each) give a relative norm error of 3.9e-2 to
# 4.6e-2 in the same runs.
LOOSE = 6e-2


def quantize_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``w`` [E, R, C] as E4M3 with a float32 scale per 128 x 128 block (amax / 448), the
    layout of fine-grained FP8 checkpoints; R and C need not be multiples of 128."""
    experts, rows, cols = w.shape
    rb, cb = -(-rows // 128), -(-cols // 128)
    padded = torch.zeros(experts, rb * 128, cb * 128, dtype=torch.float32)
    padded[:, :rows, :cols] = w.float()
    blocks = padded.view(experts, rb, 128, cb, 128)
    amax = blocks.abs().amax(dim=(2, 4))
    scale = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
    q = (blocks / scale[:, :, None, :, None]).to(E4M3).view(experts, rb * 128, cb * 128)
    return q[:, :rows, :cols].contiguous(), scale


def dequantize_weight(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """float64 ``q * scale`` over each 128 x 128 block."""
    full = scale.double().repeat_interleave(128, 1).repeat_interleave(128, 2)
    return q.double() * full[:, :q.shape[1], :q.shape[2]]


def quantized_rows(x: torch.Tensor) -> torch.Tensor:
    """float64 emulation of the activations' quantisation per row per 128 columns: the
    dequantised values ``E4M3(x / s) * s``, s = amax / 448 (1 for zeros)."""
    groups = x.double().view(x.shape[0], -1, 128)
    amax = groups.abs().amax(-1, keepdim=True)
    scale = torch.where(amax > 0, amax / 448, torch.ones_like(amax))
    return ((groups / scale).to(E4M3).double() * scale).view(x.shape)


def emulation(hidden: torch.Tensor, logits: torch.Tensor, gate_up: torch.Tensor,
              down: torch.Tensor, top_k: int, quantize: bool = True,
              activation: str = "silu") -> torch.Tensor:
    """The layer in float64 torch, expert by expert, from the dequantised weights: with
    ``quantize`` the activations are quantised as the kernels do (h also rounded to the
    hidden dtype first, as the kernel stores it, and the experts' rows y too); without,
    the unquantised activations."""
    weights, ids = torch.softmax(logits.float(), -1).topk(top_k, -1)
    weights = (weights / weights.sum(-1, keepdim=True)).double()
    out = torch.zeros(hidden.shape, dtype=torch.float64, device=hidden.device)
    half = gate_up.shape[1] // 2
    for e in range(gate_up.shape[0]):
        token, slot = torch.where(ids == e)
        if token.numel() == 0:
            continue
        x = hidden[token]
        x = quantized_rows(x) if quantize else x.double()
        gu = x @ gate_up[e].T
        h = ACTS[activation](gu[:, :half]) * gu[:, half:]
        if quantize:
            h = quantized_rows(h.to(hidden.dtype))
        y = h @ down[e].T
        if quantize:
            y = y.to(hidden.dtype).double()
        out = out.index_add(0, token, y * weights[token, slot, None])
    return out


def _layer(tokens: int, hidden: int, inter: int, experts: int, dtype: torch.dtype,
           seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Hidden states, router logits, and the FP8 weights with their scales (random scales
    of the blocks' sizes vary per block, as a real checkpoint's do)."""
    g = torch.Generator().manual_seed(seed)
    size = torch.rand((experts, 2 * inter // 128, hidden // 128), generator=g) + 0.25
    gate_up = random((experts, 2 * inter, hidden), torch.float32, generator=g) / 6
    gate_up = gate_up * size.repeat_interleave(128, 1).repeat_interleave(128, 2)
    down = random((experts, hidden, inter), torch.float32, generator=g) / 4
    return (random((tokens, hidden), dtype, generator=g),
            random((tokens, experts), torch.float32, generator=g),
            *quantize_weight(gate_up), *quantize_weight(down))


def _check_against_emulation(out: torch.Tensor, x: torch.Tensor, logits: torch.Tensor,
                             wgu: torch.Tensor, sgu: torch.Tensor, wd: torch.Tensor,
                             sd: torch.Tensor, top_k: int,
                             activation: str = "silu") -> tuple[float, float]:
    """Every element finite and within the output's rounding and TIGHT of the
    emulation; the relative norm error against the unquantised activations below LOOSE
    (on the output's device). Returns both errors."""
    gate_up, down = dequantize_weight(wgu, sgu), dequantize_weight(wd, sd)
    assert out.shape == x.shape and out.dtype == x.dtype
    out64 = out.double()
    assert torch.isfinite(out64).all()
    ref = emulation(x, logits, gate_up, down, top_k, activation=activation)
    rounding = torch.finfo(x.dtype).eps / 2 * ref.abs()
    tight = (((out64 - ref).abs() - rounding).max() / ref.abs().max()).item()
    assert tight <= TIGHT, tight
    exact = emulation(x, logits, gate_up, down, top_k, False, activation)
    loose = ((out64 - exact).norm() / exact.norm()).item()
    assert loose < LOOSE, loose
    return tight, loose


# (dtype, tokens, hidden, intermediate, experts, top_k): ragged runs over 16-row tiles,
# experts without tokens (5 tokens, top-2 over 8 experts)
CASES = [
    (torch.bfloat16, 5, 256, 128, 8, 2),
    (torch.bfloat16, 37, 256, 256, 4, 2),
    (torch.float16, 37, 256, 128, 6, 2),
]


@pytest.mark.parametrize("dtype,tokens,hidden,inter,experts,top_k", CASES)
def test_fused_moe_fp8(dtype: torch.dtype, tokens: int, hidden: int, inter: int,
                       experts: int, top_k: int) -> None:
    x, logits, wgu, sgu, wd, sd = _layer(tokens, hidden, inter, experts, dtype)
    with torch.no_grad(), poisoned_empty():
        out, ran = croqtile_ops(cf.fused_moe, x, logits, wgu, wd, top_k,
                                gate_up_scale=sgu, down_scale=sd)
    assert [op.split(".")[1].rsplit("_", 4)[0] for op in ran] == [
        "moe_fp8_gate_up", "moe_fp8_down", "moe_combine"]
    _check_against_emulation(out, x, logits, wgu, sgu, wd, sd, top_k)


def test_experts_without_tokens_and_other_activations() -> None:
    """Routing that leaves experts empty (every token to experts 1 and 3), through
    ``moe_experts`` (the routed form), with gelu_tanh; and a group of zeros (scale 1)."""
    x, logits, wgu, sgu, wd, sd = _layer(9, 256, 128, 5, torch.bfloat16, seed=3)
    x[2, :128] = 0
    logits = torch.full_like(logits, -10.0)
    logits[:, 1], logits[:4, 3], logits[4:, 3] = 2.0, 1.0, 1.5
    weights, ids = moe_ops.route(logits, 2)
    with torch.inference_mode():
        out = moe.moe_experts(x, ids, weights, wgu, wd, activation="gelu_tanh",
                              gate_up_scale=sgu, down_scale=sd)
    _check_against_emulation(out, x, logits, wgu, sgu, wd, sd, 2, "gelu_tanh")


def test_quantize_rows() -> None:
    x = random((3, 256), torch.bfloat16)
    x[1, 128:] = 0
    q, scale = moe_fp8.quantize_rows(x)
    assert q.dtype == E4M3 and scale.shape == (3, 2) and scale[1, 1] == 1
    back = (q.double().view(3, 2, 128) * scale.double()[..., None]).view(3, 256)
    # (the same E4M3 values; the scales differ by their float32 rounding only)
    assert torch.allclose(back, quantized_rows(x), rtol=1e-7, atol=0)
    assert back[1, 128:].eq(0).all()


def test_opcheck() -> None:
    gate_up_name, down_name = moe_fp8.moe_fp8_names("bf16", "silu", "cpu")
    gate_up_op = getattr(torch.ops.croqtile, gate_up_name)
    down_op = getattr(torch.ops.croqtile, down_name)
    _, _, wgu, sgu, wd, sd = _layer(1, 256, 128, 4, torch.bfloat16)
    counts = torch.tensor([5, 0, 19, 8])
    ends = counts.cumsum(0).to(torch.int32)
    runs = torch.stack((ends - counts.to(torch.int32), ends), 1)
    tiles = moe_ops.tile_table(runs, moe_fp8.FP8_TILES["cpu", "medium"][0], 32)
    xq, xs = moe_fp8.quantize_rows(random((32, 256), torch.bfloat16))
    hq, hs = moe_fp8.quantize_rows(random((32, 128), torch.bfloat16))
    # (all but test_schema, whose check that the inputs were not mutated compares them
    # with torch.allclose, which torch does not implement for float8 on the CPU)
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(gate_up_op, (xq, xs, wgu[:, :128], wgu[:, 128:], sgu[:, :1],
                                       sgu[:, 1:], tiles), test_utils=utils)
    torch.library.opcheck(down_op, (hq, hs, wd, sd, tiles), test_utils=utils)


def test_refused() -> None:
    x, logits, wgu, sgu, wd, sd = _layer(3, 256, 128, 4, torch.bfloat16)
    with pytest.raises(ValueError, match="FP8 weights need gate_up_scale"):
        cf.fused_moe(x, logits, wgu, wd, 2, down_scale=sd)
    with pytest.raises(ValueError, match="FP8 weights need down_scale"):
        cf.fused_moe(x, logits, wgu, wd, 2, gate_up_scale=sgu)
    with pytest.raises(ValueError, match=r"gate_up_scale of shape \[4, 2, 1\]"):
        cf.fused_moe(x, logits, wgu, wd, 2, gate_up_scale=sgu[:, :, :1], down_scale=sd)
    with pytest.raises(ValueError, match="down_scale of shape .* dtype torch.float64"):
        cf.fused_moe(x, logits, wgu, wd, 2, gate_up_scale=sgu, down_scale=sd.double())
    for dtype in (torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        with pytest.raises(NotImplementedError, match=str(dtype)):
            cf.fused_moe(x, logits, wgu.to(dtype), wd.to(dtype), 2, gate_up_scale=sgu,
                         down_scale=sd)
    with pytest.raises(ValueError, match="down_weight of dtype torch.bfloat16 beside FP8"):
        cf.fused_moe(x, logits, wgu, wd.to(torch.bfloat16), 2, gate_up_scale=sgu,
                     down_scale=sd)
    with pytest.raises(ValueError, match="go with FP8 weights only"):
        cf.fused_moe(x, logits, wgu.to(torch.bfloat16), wd.to(torch.bfloat16), 2,
                     gate_up_scale=sgu, down_scale=sd)
    with pytest.raises(ValueError, match="multiples of 128; got H = 256, I = 64"):
        q, s = quantize_weight(random((4, 128, 256), torch.float32))
        qd, sdd = quantize_weight(random((4, 256, 64), torch.float32))
        cf.fused_moe(x, logits, q, qd, 2, gate_up_scale=s, down_scale=sdd)
    with pytest.raises(ValueError, match="hidden states of dtype torch.float32"):
        cf.fused_moe(x.float(), logits, wgu, wd, 2, gate_up_scale=sgu, down_scale=sd)
    # inference only: a tensor that requires grad, with gradients enabled
    with pytest.raises(RuntimeError, match="inference only"):
        cf.fused_moe(x.requires_grad_(), logits, wgu, wd, 2, gate_up_scale=sgu,
                     down_scale=sd)
    with pytest.raises(RuntimeError, match="inference only"):
        cf.fused_moe(x.detach(), logits.requires_grad_(), wgu, wd, 2, gate_up_scale=sgu,
                     down_scale=sd)


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 16, 1000])
def test_fused_moe_fp8_on_the_gpu(tokens: int) -> None:
    """Qwen3-30B-A3B widths (128 experts, top-8, hidden 2048, expert width 768): the GPU
    tiles of each size class, ragged runs and many experts without tokens."""
    x, logits, wgu, sgu, wd, sd = _layer(tokens, 2048, 768, 128, torch.bfloat16)
    x, logits, wgu, sgu, wd, sd = (t.cuda() for t in (x, logits, wgu, sgu, wd, sd))
    with torch.no_grad():
        out, ran = croqtile_ops(cf.fused_moe, x, logits, wgu, wd, 8, gate_up_scale=sgu,
                                down_scale=sd)
    assert len(ran) == 3
    # (the layer as a whole against the unquantised activations: h is re-quantised to
    # E4M3 between the GEMMs, and the GPU's f32 sums round h differently from float64,
    # which moves some of its E4M3 values by a step; each GEMM is checked tightly below)
    gate_up, down = dequantize_weight(wgu, sgu), dequantize_weight(wd, sd)
    exact = emulation(x, logits, gate_up, down, 8, False)
    assert torch.isfinite(out.double()).all()
    assert ((out.double() - exact).norm() / exact.norm()).item() < LOOSE


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 16, 1000])
def test_each_fp8_gemm_on_the_gpu(tokens: int) -> None:
    """Each block-scaled GEMM alone, on the operands the other steps give it (the GPU's
    tiles of each size class): h of the gate/up GEMM against float64 from the same
    quantised rows, and y of the down GEMM from the kernel's own h quantised, every
    element within the output's rounding and TIGHT of the largest."""
    x, logits, wgu, sgu, wd, sd = (t.cuda() for t in _layer(tokens, 2048, 768, 128,
                                                             torch.bfloat16))
    top_k, experts = 8, 128
    _, ids = moe_ops.route(logits, top_k)
    rows = tokens * top_k
    size = moe_fp8.fp8_size(rows, experts, "gpu")
    gate_up_op, down_op = moe_fp8.moe_fp8_names("bf16", "silu", "gpu", size)
    pairs, tiles, _ = moe_ops.layout(ids, experts, moe_fp8.FP8_TILES["gpu", size][0])
    xq, xs = moe_fp8.quantize_rows(x)
    token = torch.div(pairs, top_k, rounding_mode="floor")
    xq, xs = xq.view(torch.uint8)[token].view(xq.dtype), xs[token]
    blocks = 768 // 128
    with torch.no_grad():
        h = moe.kernels.run(gate_up_op, xq, xs, wgu[:, :768], wgu[:, 768:], sgu[:, :blocks],
                            sgu[:, blocks:], tiles)
        hq, hs = moe_fp8.quantize_rows(h)
        y = moe.kernels.run(down_op, hq, hs, wd, sd, tiles)
    gate_up, down = dequantize_weight(wgu, sgu), dequantize_weight(wd, sd)
    x64 = xq.double() * xs.double().repeat_interleave(128, 1)
    h64 = hq.double() * hs.double().repeat_interleave(128, 1)
    sorted_ids = ids.reshape(-1)[pairs]
    want_h = torch.empty(rows, 768, dtype=torch.float64, device="cuda")
    want_y = torch.empty(rows, 2048, dtype=torch.float64, device="cuda")
    for e in torch.unique(sorted_ids).tolist():
        at = torch.nonzero(sorted_ids == e)[:, 0]
        gu = x64[at] @ gate_up[e].T
        want_h[at] = F.silu(gu[:, :768]) * gu[:, 768:]
        want_y[at] = h64[at] @ down[e].T
    for got, want in ((h, want_h), (y, want_y)):
        rounding = torch.finfo(torch.bfloat16).eps / 2 * want.abs()
        excess = ((got.double() - want).abs() - rounding).max() / want.abs().max()
        assert excess.item() <= TIGHT, excess.item()
