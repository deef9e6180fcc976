"""An MMA operand tile loaded in a loop body is loaded once for every product of the same
step that reads it (a gated MLP's gate and up projections share the x tile), and loaded
again where something in between could change it."""

from __future__ import annotations

import torch

from .checks import assert_close, compile_clean, random

# two products of one K step share the x tile; SHIFT > 0 moves the second product's x
# tile by a mutable scalar updated between the products
SHARED = """
#define SHIFT 0
__co__ auto two(f16 [M, K] x, f16 [N, K] wg, f16 [N, K] wu) {
  f32 [2, M, N] out;
  first = out.subspan(1, M, N).at(0, 0, 0).sqz();
  second = out.subspan(1, M, N).at(1, 0, 0).sqz();
  parallel {bm, bn} by [cdiv(M, 16), cdiv(N, 16)] : block {
    g = mma.fill.f32 0.0f;
    u = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, 16) - SHIFT] {
      mutable int step = kk;
      xs = dma.copy.zfill x.subspan(16, 16).at(bm, step) => shared;
      gs = dma.copy.zfill wg.subspan(16, 16).at(bn, kk) => shared;
      us = dma.copy.zfill wu.subspan(16, 16).at(bn, kk) => shared;
      parallel p by 1 : group-4 {
        mg = mma.load gs.data;
        mma.row.row g, xs.data, mg;
      }
#if SHIFT
      step += SHIFT;
#endif
      xt = dma.copy.zfill x.subspan(16, 16).at(bm, step) => shared;
      parallel p by 1 : group-4 {
        mu = mma.load us.data;
        mma.row.row u, xt.data, mu;
      }
    }
    mma.store g, first.subspan(16, 16).at(bm, bn);
    mma.store u, second.subspan(16, 16).at(bm, bn);
  }
  return out;
}
"""


def _loop(source: str) -> str:
    return source[source.index("for kk in"):source.index("g_out")]


def _reference(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor, shift: int) -> torch.Tensor:
    x, wg, wu = x.double(), wg.double(), wu.double()
    steps = -(-x.shape[1] // 16) - shift
    keys = steps * 16
    g = x[:, :keys] @ wg[:, :keys].T
    u = x[:, 16 * shift:16 * shift + keys] @ wu[:, :keys].T
    return torch.stack([g, u])


def test_a_shared_operand_is_loaded_once_per_step() -> None:
    mod = compile_clean(SHARED)
    x, wg, wu = random((40, 64), torch.float16), random((24, 64), torch.float16), \
        random((24, 64), torch.float16)
    out = mod.two(x, wg, wu)
    assert_close(out, _reference(x, wg, wu, 0), torch.float32)
    loop = _loop(mod.two.triton_source)
    assert loop.count("tl.dot(") == 2
    assert loop.count("x_desc") == 1 and loop.count("tl.load(x_ptr") == 1


def test_an_operand_whose_origin_changed_in_between_is_loaded_again() -> None:
    mod = compile_clean(SHARED, SHIFT=1)
    x, wg, wu = random((40, 64), torch.float16), random((24, 64), torch.float16), \
        random((24, 64), torch.float16)
    out = mod.two(x, wg, wu)
    assert_close(out, _reference(x, wg, wu, 1), torch.float32)
    loop = _loop(mod.two.triton_source)
    assert loop.count("x_desc") == 2 and loop.count("tl.load(x_ptr") == 2
