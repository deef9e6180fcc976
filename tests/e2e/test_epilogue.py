"""Epilogues after the K loop (scale, bias, activation, conversion) written element-wise
over the stored accumulator stay in registers and fuse into the output store: no
shared-memory or global round trip."""

from __future__ import annotations

import pytest
import torch

import croqtile

LINEAR = """
#define TM 64
#define TN 64
#define TK 32
__co__ void linear(global f16 [M, K] x, global f16 [N, K] w, global f32 [N] bias,
                   global f16 [M, N] y, f32 alpha) {
  parallel {bm, bn} by [cdiv(M, TM), cdiv(N, TN)] : block {
    mc = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, TK)] {
      xs = dma.copy x.subspan(TM, TK).at(bm, kk) => shared;
      ws = dma.copy w.subspan(TN, TK).at(bn, kk) => shared;
      parallel p by 1 : group-4 {
        ma = mma.load xs.data;
        mb = mma.load ws.data;
        mma.row.row mc, ma, mb;
      }
    }
    shared f32 [TM, TN] acc_s;
    mma.store mc, acc_s;
    shared f16 [TM, TN] out_s;
    foreach {i, j} in [TM, TN]
      out_s.at(i, j) = __to<f16>(__max(acc_s.at(i, j) * alpha + bias.at(bn # j), 0.0f));
    dma.copy out_s => y.subspan(TM, TN).at(bm, bn);
  }
}
"""


def _linear(device: str, persistent: bool) -> None:
    mod = croqtile.compile(LINEAR, persistent=persistent)
    gen = torch.Generator().manual_seed(11)
    for m, n, k in [(100, 70, 80), (64, 128, 32)]:
        x = torch.randn(m, k, generator=gen).half().to(device)
        w = torch.randn(n, k, generator=gen).half().to(device)
        bias = torch.randn(n, generator=gen).to(device)
        y = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        mod.linear(x, w, bias, y, 0.5)
        ref = torch.relu((x.double() @ w.double().T) * 0.5 + bias.double())
        assert not torch.isnan(y).any()
        assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("persistent", [False, True])
def test_bias_scale_relu_epilogue(persistent: bool) -> None:
    _linear("cpu", persistent)


@pytest.mark.gpu
@pytest.mark.parametrize("persistent", [False, True])
def test_bias_scale_relu_epilogue_gpu(persistent: bool) -> None:
    _linear("cuda", persistent)


def test_the_epilogue_stays_in_registers_and_fuses_into_the_store() -> None:
    text = croqtile.compile(LINEAR).linear.triton_source
    kernel = text[text.index("def linear_k0"):text.index("def host_linear")]
    # one store of the output (a descriptor store, or the masked fallback), no other memory
    assert kernel.count("y_desc.store(") == 1 and kernel.count("tl.store(") == 1
    assert "y_ptr +" not in kernel.split("out_s =")[0]  # y is never read
    epilogue = next(line for line in kernel.splitlines() if line.strip().startswith("out_s ="))
    assert "tl.maximum(((mc_out * alpha) + tl.load(bias_ptr" in epilogue
    assert epilogue.endswith(".to(tl.float16)")


def test_a_transposing_read_of_the_accumulator_is_still_refused() -> None:
    source = LINEAR.replace("acc_s.at(i, j) * alpha + bias.at(bn # j)",
                            "acc_s.at(j, i) * alpha + bias.at(bn # j)")
    with pytest.raises(croqtile.CompileError, match="CQ0701"):
        croqtile.compile(source)
