"""The hand-written flash-attention forward (backends/cuda/attention_sm90.cu): its nvcc
build for sm_90a without spills (no GPU needed), the layout of its tensor maps, the calls
it refuses, and on a Hopper GPU every element of its output and log-sum-exp against
float64 torch."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from croqtile import settings
from croqtile.backends.cuda import driver
from croqtile.backends.cuda.attention import SOURCE, HopperAttention, map_layout, unsupported

from ..e2e.checks import assert_close, poison, random

ENTRIES = [f"croq_attention_sm90_{t}_{d}" for t in ("f16", "bf16") for d in (128, 64)]


# ---- building -------------------------------------------------------------------------

@pytest.mark.skipif(settings.nvcc() is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("defines", [(), ("CROQ_ATTN_PINGPONG=0",), ("CROQ_ATTN_STAGES=3",)])
def test_the_kernel_builds_for_sm_90a_without_spills(tmp_path: Path,
                                                     defines: tuple[str, ...]) -> None:
    path = tmp_path / SOURCE
    path.write_text(driver.kernel_text(SOURCE))
    done = subprocess.run([settings.nvcc(), *driver.nvcc_flags("90a", defines), "-Xptxas", "-v",
                           "-o", str(path.with_suffix(".cubin")), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = done.stderr
    for name in ENTRIES:
        assert f"Compiling entry function '{name}' for 'sm_90a'" in report
    assert report.count("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") == 4
    # 384 threads a block, one block a multiprocessor: 168 registers at launch (setmaxnreg
    # moves them from the loader to the computing warpgroups)
    assert all(int(n) <= 168 for n in re.findall(r"Used (\d+) registers", report))
    # ptxas serialises wgmmas whose registers the compiler touches while they run
    assert "serialized" not in report


@pytest.mark.skipif(settings.nvcc() is None, reason="no nvcc on this machine")
def test_the_driver_builds_the_kernel(tmp_path: Path) -> None:
    assert driver.build(SOURCE, "90a", tmp_path, nvcc=settings.nvcc())[:4] == b"\x7fELF"


# ---- the arguments --------------------------------------------------------------------

def test_sequence_major_tensors_are_mapped_with_their_strides() -> None:
    q = torch.empty(2, 100, 32, 128, dtype=torch.bfloat16).transpose(1, 2)  # [B, H, L, D]
    assert map_layout(q.shape, q.stride(), 2) == ((128, 100, 32, 2),
                                                  (32 * 128 * 2, 128 * 2, 100 * 32 * 128 * 2))
    # a dimension of size 1 gets a stride that is a multiple of 16 bytes, whatever its own
    one = torch.empty(1, 40, 1, 64, dtype=torch.float16).transpose(1, 2)
    dims, strides = map_layout(one.shape, (7, 1, 64, 1), 2)
    assert dims == (64, 40, 1, 1) and strides[0] == 128 and all(s % 16 == 0 for s in strides)


def _call(b: int = 2, h: int = 32, hkv: int = 8, l: int = 100, s: int = 100, d: int = 128,
          dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, ...]:
    q = torch.empty(b, l, h, d, dtype=dtype).transpose(1, 2)
    k = torch.empty(b, s, hkv, d, dtype=dtype).transpose(1, 2)
    return q, k, k.clone(), torch.empty(b, l, h, d, dtype=dtype)


def test_why_arguments_do_not_suit_the_kernel() -> None:
    q, k, v, out = _call()
    assert unsupported(q, k, v, out) == "the tensors are not on a CUDA device"
    assert unsupported(q, k, v, out, device=False) is None
    assert unsupported(q, k, v, out, torch.empty(2, 32, 100), device=False) is None
    assert unsupported(*_call(h=12), device=False) == \
        "the query heads are not a multiple of the kv heads"
    assert unsupported(*_call(d=96), device=False) == "the head dim is 96, not one of (128, 64)"
    assert unsupported(q, k, v.float(), out, device=False) == \
        "q, k, v and out are not all f16 or all bf16"
    assert unsupported(q, k, v, out.transpose(1, 2), device=False) == "out is not [B, L, H, D]"
    assert unsupported(q[..., ::2], k[..., ::2], v[..., ::2], out[..., ::2].contiguous(),
                       device=False).startswith("q, k or v has a strided last dimension")
    assert unsupported(q, k, v, out, torch.empty(2, 100, 32), device=False) == \
        "lse is not a contiguous f32 [B, H, L] tensor"
    assert unsupported(q, k, v, out, scale=-1.0, device=False) == \
        "the scale is not a positive finite number"


# ---- on a Hopper GPU -------------------------------------------------------------------

def _hopper() -> bool:
    return (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
            and shutil.which("nvcc") is not None)


@pytest.fixture(scope="module", params=[(), ("CROQ_ATTN_PINGPONG=0",)],
                ids=["pingpong", "no-pingpong"])
def kernel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if not _hopper():
        pytest.skip("the CUDA attention needs a Hopper GPU and nvcc")
    return HopperAttention(tmp_path_factory.mktemp("cuda"), request.param, settings.nvcc())


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 attention of [B, H, L, D] q over [B, HKV, S, D] k and v: the output as
    [B, L, H, D] and the log-sum-exp of the scaled scores [B, H, L]."""
    group = q.shape[1] // k.shape[1]
    q64 = q.double()
    k64, v64 = (t.double().repeat_interleave(group, dim=1) for t in (k, v))
    out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
    scores = (q64 @ k64.transpose(-1, -2)) * scale
    if causal:  # top-left: query i sees keys 0..i
        l, s = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(l, s, dtype=torch.bool,
                                                device=q.device).tril(), float("-inf"))
    return out.transpose(1, 2), torch.logsumexp(scores, dim=-1)


def check(kernel: HopperAttention, b: int, h: int, hkv: int, l: int, s: int, d: int,
          dtype: torch.dtype, causal: bool) -> None:
    gen = torch.Generator().manual_seed(l * 131 + s * 7 + h + int(causal))
    # sequence-major projections [B, L, H, D] read transposed, as a model passes them
    q = random((b, l, h, d), dtype, "cuda", gen).transpose(1, 2)
    k = random((b, s, hkv, d), dtype, "cuda", gen).transpose(1, 2)
    v = random((b, s, hkv, d), dtype, "cuda", gen).transpose(1, 2)
    out = poison(torch.empty(b, l, h, d, dtype=dtype, device="cuda"))
    lse = poison(torch.empty(b, h, l, dtype=torch.float32, device="cuda"))
    scale = 1.0 / math.sqrt(d)
    kernel(q, k, v, out, lse, causal=causal, scale=scale)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    assert_close(out, ref, dtype)
    # and element by element: a masked or unwritten row stands out here, not in the norm
    atol, rtol = (1e-2, 2e-2) if dtype == torch.bfloat16 else (2e-3, 5e-3)
    err = (out.double() - ref).abs()
    bad = err > atol + rtol * ref.abs()
    assert not bad.any(), (f"{int(bad.sum())} elements off, first at "
                           f"{bad.nonzero()[0].tolist()}: error {err.max().item():.3g}")
    assert torch.isfinite(lse).all()
    lse_err = (lse.double() - ref_lse).abs().max().item()
    assert lse_err <= 1e-3, f"log-sum-exp off by {lse_err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("h, hkv", [(32, 8), (8, 8)], ids=["gqa", "mha"])
@pytest.mark.parametrize("s", [128, 1000, 2048])
def test_the_kernel_computes_attention(kernel: HopperAttention, s: int, h: int, hkv: int,
                                       causal: bool, dtype: torch.dtype) -> None:
    check(kernel, 2, h, hkv, s, s, 128, dtype, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("l, s", [(1000, 2048), (300, 128), (1, 700), (129, 129)])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_queries_and_keys_of_other_lengths(kernel: HopperAttention, l: int, s: int,
                                           causal: bool) -> None:
    check(kernel, 2, 8, 2, l, s, 128, torch.bfloat16, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_head_dim_64(kernel: HopperAttention, dtype: torch.dtype, causal: bool) -> None:
    check(kernel, 2, 16, 4, 1000, 1000, 64, dtype, causal)


@pytest.mark.gpu
def test_a_call_the_kernel_cannot_take_is_refused(kernel: HopperAttention) -> None:
    q, k, v, out = (t.cuda() for t in _call(h=12))
    with pytest.raises(ValueError, match="not a multiple of the kv heads"):
        kernel(q, k, v, out)


@pytest.mark.gpu
@pytest.mark.parametrize("order_max", [0, 1 << 40], ids=["by-kv-head", "by-row-tile"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_both_orders_of_the_blocks(kernel: HopperAttention, monkeypatch: pytest.MonkeyPatch,
                                   order_max: int, causal: bool) -> None:
    """The blocks walk the work kv head by kv head or row tile by row tile (chosen by the
    keys' and values' bytes): both orders compute every row, with 3 query heads a kv
    head and two batches."""
    from croqtile.backends.cuda import attention

    monkeypatch.setattr(attention, "ROW_TILE_ORDER_MAX_BYTES", order_max)
    check(kernel, 2, 12, 4, 1000, 1000, 128, torch.bfloat16, causal)
