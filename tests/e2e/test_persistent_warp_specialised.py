"""Persistent warp-specialised kernels (spec 5.9): each block loops over output tiles, and
its roles run one ring pipeline per tile. The consumers release the ring only on the first
tile (``if (round == 0)``); later tiles find every slot free again because each tile's loop
waits for and triggers every slot equally often. The Triton backend counts that release
once and serialises each tile's roles into one loop. Checked against float64 torch
references with more tiles than blocks, so blocks run several tiles and some rounds skip
(``tile < tiles`` false), and more K steps than ring slots, so the ring wraps."""

from __future__ import annotations


import pytest
import torch


from .checks import DEVICES, assert_close, compile_clean, line_of, only_error, poison, random

# Two consumer warpgroups, each multiplying half of a 2*BM-row A tile.
PERSISTENT = """\
#define STAGES 2
#define BLOCKS 4
#define BM 64
#define BN 64
#define BK 32

__co__ void persistent_gemm(global f16 [M, K] lhs, global f16 [N, K] rhs, global f32 [M, N] out) {
  int tiles_n = cdiv(N, BN);
  int tiles = cdiv(M, 2 * BM) * tiles_n;
  parallel p by BLOCKS : block {
    shared event filled[STAGES], drained[STAGES];
    shared f16 [2 * BM, BK] a_ring[STAGES];
    shared f16 [BN, BK] b_ring[STAGES];
    foreach {round} in [cdiv(tiles, BLOCKS)] {
      tile = round # p;
      if (tile < tiles) {
        tm = tile / tiles_n;
        tn = tile % tiles_n;
        parallel role by 3 : group-4 {
          inthreads.async (role == 0) {
            foreach {k} in [cdiv(K, BK)] {
              wait drained.at(k);
              fa = tma.copy.async lhs.subspan(2 * BM, BK).at(tm, k) => a_ring[k % STAGES];
              fb = tma.copy.async rhs.subspan(BN, BK).at(tn, k) => b_ring[k % STAGES];
              trigger filled.at(k) after fa, fb;
            }
          }
          inthreads.async (role > 0) {
            acc = mma.fill.f32 0.0f;
            if (round == 0) {
              foreach {s} in [STAGES] { trigger drained.at(s); }
            }
            foreach {k} in [cdiv(K, BK)] {
              slot = k % STAGES;
              wait filled.at(k);
              mma.row.row acc, a_ring[slot].subspan(BM, BK).at(role - 1, 0), b_ring[slot];
              trigger drained.at(k);
            }
            mma.store acc, out.subspan(BM, BN).at(tm * 2 + (role - 1), tn);
          }
        }
      }
    }
  }
}
"""

# Block-scaled FP8: one scale per row and 128-wide K block of A, one per 128x128 block
# of B, applied once per K step by mma.scale.
BLOCKSCALED = """\
#define STAGES 3
#define BLOCKS 3
#define BM 64
#define BN 128
#define BK 128

__co__ void persistent_fp8(global f8_e4m3 [M, K] lhs, global f32 [M, KB] sa,
                           global f8_e4m3 [N, K] rhs, global f32 [NB, KB] sb,
                           global f32 [M, N] out) {
  int tiles_n = cdiv(N, BN);
  int tiles = cdiv(M, BM) * tiles_n;
  parallel p by BLOCKS : block {
    shared event filled[STAGES], drained[STAGES];
    shared f8_e4m3 [BM, BK] a_ring[STAGES];
    shared f8_e4m3 [BN, BK] b_ring[STAGES];
    foreach {round} in [cdiv(tiles, BLOCKS)] {
      tile = round # p;
      if (tile < tiles) {
        tm = tile / tiles_n;
        tn = tile % tiles_n;
        parallel role by 2 : group-4 {
          inthreads.async (role == 0) {
            foreach {k} in [cdiv(K, BK)] {
              stage = k % STAGES;
              wait drained.at(k);
              fa = tma.copy.async lhs.subspan(BM, BK).at(tm, k) => a_ring[stage];
              fb = tma.copy.async rhs.subspan(BN, BK).at(tn, k) => b_ring[stage];
              trigger filled.at(k) after fa, fb;
            }
          }
          inthreads.async (role == 1) {
            acc = mma.fill.f32 0.0f;
            if (round == 0) {
              foreach {s} in [STAGES] { trigger drained.at(s); }
            }
            foreach {k} in [cdiv(K, BK)] {
              stage = k % STAGES;
              wait filled.at(k);
              foreach {w} in [BK / 32] {
                mma.row.row acc, a_ring[stage].chunkat(_, w), b_ring[stage].chunkat(_, w);
              }
              mma.scale acc, sa.subspan(BM, 1).at(tm, k), sb.at(tn, k);
              trigger drained.at(k);
            }
            mma.store acc, out.subspan(BM, BN).at(tm, tn);
          }
        }
      }
    }
  }
}
"""


# 6 tiles over 4 blocks (K: 4 steps through 2 slots); 4 tiles over 3 blocks (K: 5 steps
# through 3 slots).
@pytest.mark.parametrize("device", DEVICES)
def test_persistent_ring_gemm(device: str) -> None:
    m, n, k = 256, 192, 128
    lhs = random((m, k), torch.float16, device)
    rhs = random((n, k), torch.float16, device)
    out = poison(torch.empty((m, n), dtype=torch.float32, device=device))
    assert compile_clean(PERSISTENT).persistent_gemm(lhs, rhs, out) is None
    assert_close(out, lhs.double() @ rhs.double().T, torch.float32, 1e-5)


def _blockscaled_reference(lhs: torch.Tensor, sa: torch.Tensor, rhs: torch.Tensor,
                           sb: torch.Tensor, block: int = 128) -> torch.Tensor:
    """``sum_kb (lhs_kb @ rhs_kb^T) * sa[m, kb] * sb[n // block, kb]`` in float64."""
    a, b = lhs.cpu().double(), rhs.cpu().double()
    out = torch.zeros(a.shape[0], b.shape[0], dtype=torch.float64)
    for kb in range(sa.shape[1]):
        cols = slice(kb * block, (kb + 1) * block)
        col_scale = sb[:, kb].cpu().double().repeat_interleave(block)[: b.shape[0]]
        out += (a[:, cols] @ b[:, cols].T) * sa[:, kb].cpu().double()[:, None] * col_scale
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_persistent_blockscaled_fp8(device: str) -> None:
    m, n, k = 128, 256, 640
    lhs = random((m, k), torch.float8_e4m3fn, device)
    rhs = random((n, k), torch.float8_e4m3fn, device)
    sa = (torch.rand((m, k // 128)) + 0.5).to(device)
    sb = (torch.rand((n // 128, k // 128)) + 0.5).to(device)
    out = poison(torch.empty((m, n), dtype=torch.float32, device=device))
    assert compile_clean(BLOCKSCALED).persistent_fp8(lhs, sa, rhs, sb, out) is None
    # Hopper's FP8 tensor cores add products in a narrower accumulator than f32 (measured
    # on the H200: 1.3e-4 here, as torch._scaled_mm gives on such operands)
    tolerance = 1e-5 if device == "cpu" else 1e-3
    assert_close(out.cpu(), _blockscaled_reference(lhs, sa, rhs, sb), torch.float32, tolerance)


def test_each_tile_is_one_pipelined_loop() -> None:
    """The release adds no code; each tile runs one loop of the ring's depth."""
    source = compile_clean(PERSISTENT).persistent_gemm.triton_source
    assert source.count("num_stages=2)") == 1
    assert "round == 0" not in source
    assert source.count("tl.dot(") == 1


RELEASE = "if (round == 0) {"

IRREGULAR = {
    # not the first iteration: on the GPU the first tile would find no free slot
    "later_round": ("if (round == 1) {", "if (round == 1) {",
                    "events inside nested control flow of a role"),
    # the release in an else: not on the first tile, so the ring never starts
    "in_an_else": ("if (round == 0) { } else {", "if (round == 0) { } else {",
                   "events inside nested control flow of a role"),
    # a parameter-dependent test instead of the loop's first iteration
    "not_a_loop_variable": ("if (tiles == 0) {", "if (tiles == 0) {",
                            "events inside nested control flow of a role"),
}


@pytest.mark.parametrize("case", IRREGULAR)
def test_other_guarded_releases_are_rejected(case: str) -> None:
    new, line, message = IRREGULAR[case]
    text = PERSISTENT.replace(RELEASE, new)
    diag = only_error(text)
    assert diag.code == "CQ0755", diag.render()
    assert message in diag.message
    assert diag.line == line_of(text, line), diag.render()


def test_a_guarded_release_after_the_loop_is_rejected() -> None:
    release = "            if (round == 0) {\n              foreach {s} in [STAGES] " \
              "{ trigger drained.at(s); }\n            }\n"
    assert release in PERSISTENT
    text = PERSISTENT.replace(release, "").replace(
        "            mma.store acc,", release + "            mma.store acc,")
    diag = only_error(text)
    assert (diag.code, diag.line) == ("CQ0755", line_of(text, RELEASE)), diag.render()
    assert "before the role's pipelined loop" in diag.message
