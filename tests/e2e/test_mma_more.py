"""MMA forms beyond the basic four steps (spec 5.8): accumulators loaded from global or
shared memory (C input), re-filled accumulators and scalar fragment arithmetic, FP8
operands with fused ``.scale`` and standalone ``mma.scale`` (block-scaled GEMM with
1x128 activation and 128x128 weight scales), arrays of fragments (``frag mc[2] {v}``,
selected by constants or a scalar parameter), u8 operands accumulating in s32, operands
held in registers (a filled ``frag`` tile, an accumulator as the A of the next MMA),
asynchronous MMA futures and ``mma.commit`` (no-ops), ``mma.load view, frag``,
per-warpgroup TMA copies of the parts of one fused result, arrays of shared buffers
(a ring selected by ``k % 2``, constant elements, one element per warpgroup, one element
per warp written by mma.store and copied out).

Every program runs through the reference interpreter and the Triton path on the CPU
against a float64 torch reference (``check``), and through the Triton path on the GPU
where there is one. ``tests/backends/test_cuda_compile.py`` compiles every kernel here
for sm_90 as well."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import croqtile
from croqtile.backends.reference import interpret_source

from ..reference.test_interpret import Case, check
from .checks import assert_close, poison, random

ACC_FROM_MEMORY = """
// C += A·B: each K block reloads the accumulator from the output it was stored to
__co__ void gemm_acc_global(global f16 [M, K] a, global f16 [K, N] b, global f32 [M, N] c) {
  parallel {bm, bn} by [M / 32, N / 16] : block {
    foreach {kb} in [K / 16] {
      sa = dma.copy a.subspan(32, 16).at(bm, kb) => shared;
      sb = dma.copy b.subspan(16, 16).at(kb, bn) => shared;
      parallel {wm, wn} by [4, 2] : group {
        mc = mma.load c.subspan(8, 8).at(bm # wm, bn # wn);
        foreach {ks} in [4] {
          mma.row.col mc, sa.data.chunkat(wm, ks), sb.data.chunkat(ks, wn);
        }
        mma.store mc, c.subspan(8, 8).at(bm # wm, bn # wn);
      }
    }
  }
}

// out = bias + A·Bᵀ, the accumulator starting from a bias tile staged in shared memory
__co__ auto gemm_acc_shared(f16 [M, K] a, f16 [N, K] b, f16 [M, N] bias) {
  f16 [M, N] out;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    cs = dma.copy bias.subspan(32, 32).at(bm, bn) => shared;
    parallel {wm, wn} by [2, 2] : group {
      mc = mma.load cs.data.chunkat(wm, wn);
      foreach {k} in [K / 16] {
        ma = mma.load a.subspan(16, 16).at(bm # wm, k);
        mb = mma.load b.subspan(16, 16).at(bn # wn, k);
        mma.row.row mc, ma, mb;
      }
      mma.store mc, out.subspan(16, 16).at(bm # wm, bn # wn);
    }
  }
  return out;
}
"""

REFILL = """
// left half: A·B + 1.5; right half: (A·B - 2) * s + bias, from one re-filled accumulator
__co__ void refill(global f16 [64, 32] a, global f16 [32, 64] b, global f32 [64, 128] c,
                   f32 s, f32 bias) {
  parallel bm by 2 : block {
    mc = mma.fill.f32 0.0f;
    parallel {g0, g1} by [4, 8] : group {
      mma.fill mc, 1.5f;
      foreach k in [8] {
        mma.row.col mc, a.subspan(8, 4).at(bm # g0, k), b.subspan(4, 8).at(k, g1);
      }
      mma.store mc, c.subspan(8, 8).at(bm # g0, g1);
      mma.fill mc, -2.0f;
      foreach k in [8] {
        mma.row.col mc, a.subspan(8, 4).at(bm # g0, k), b.subspan(4, 8).at(k, g1);
      }
      mc *= s;
      mc += bias;
      mma.store mc, c.subspan(8, 8).at(bm # g0, g1 + 8);
    }
  }
}
"""

FP8_SCALED = """
// block-scaled FP8 GEMM: sa holds one scale per row and 128-wide K block (1x128),
// sw one per 128x128 block of W; the scales are fused into each MMA
__co__ void fp8_fused(global f8_e4m3 [M, K] a, global f32 [M, KB] sa,
                      global f8_e4m3 [N, K] w, global f32 [NB, KB] sw,
                      global f16 [M, N] out) {
  parallel {bm, bn} by [M / 32, N / 32] : block {
    acc = mma.fill.f32 0.0f;
    foreach {k} in [K / 128] {
      as = dma.copy a.subspan(32, 128).at(bm, k) => shared;
      ws = dma.copy w.subspan(32, 128).at(bn, k) => shared;
      sw_k = sw.at(bn * 32 / 128, k);
      parallel g by 2 : group {
        sa_k = sa.subspan(16, 1).at(bm # g, k);
        foreach {s} in [4] {
          ma = as.data.subspan(16, 32).at(g, s);
          mma.row.row.scale acc, ma, ws.data.chunkat(_, s), sa_k, sw_k;
        }
      }
    }
    parallel g by 2 : group {
      mma.store acc, out.subspan(16, 32).at(bm # g, bn);
    }
  }
}

// the same scales applied once per K block by mma.scale: e5m2 x e4m3 into an f16
// accumulator, the raw products of each block kept apart until they are scaled
__co__ void fp8_scale_points(global f8_e5m2 [M, K] a, global f32 [M, KB] sa,
                             global f8_e4m3 [N, K] w, global f32 [NB, KB] sw,
                             global f16 [M, N] out) {
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel g by 2 : group {
      acc = mma.fill.f16 0.0f;
      foreach {k} in [K / 128] {
        foreach {s} in [4] {
          ma = mma.load a.subspan(16, 32).at(bm # g, k # s);
          mb = mma.load w.subspan(32, 32).at(bn, k # s);
          mma.row.row acc, ma, mb;
        }
        mma.scale acc, sa.subspan(16, 1).at(bm # g, k), sw.at(bn / 4, k);
      }
      mma.store acc, out.subspan(16, 32).at(bm # g, bn);
    }
  }
}

// plain FP8: the accumulator type defaults to f32
__co__ auto fp8_plain(f8_e4m3 [M, K] a, f8_e4m3 [K, N] b) {
  f32 [M, N] out;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill 0.0;
      foreach {k} in [K / 32] {
        mma.row.col mc, a.subspan(16, 32).at(bm # g0, k), b.subspan(32, 16).at(k, bn # g1);
      }
      mma.store mc, out.subspan(16, 16).at(bm # g0, bn # g1);
    }
  }
  return out;
}
"""

FRAG_ARRAYS = """
// two products of one activation tile, each in its own element of a fragment array (the
// second one doubled)
__co__ void two_products(global f16 [64, 32] a, global f16 [32, 64] b, global f16 [32, 64] c,
                         global f32 [64, 128] out) {
  parallel bm by 2 : block {
    frag.f32 acc[2] {0.5f};
    parallel {g0, g1} by [2, 4] : group {
      foreach k in [2] {
        mma.row.col acc[0], a.subspan(16, 16).at(bm # g0, k), b.subspan(16, 16).at(k, g1);
        mma.row.col acc[1], a.subspan(16, 16).at(bm # g0, k), c.subspan(16, 16).at(k, g1);
      }
      acc[1] *= 2.0f;
      mma.store acc[0], out.subspan(16, 16).at(bm # g0, g1);
      mma.store acc[1], out.subspan(16, 16).at(bm # g0, g1 + 4);
    }
  }
}

// one fragment declared with its fill, the type from A (f16), shared by 2x2 warps
__co__ auto single_frag(f16 [32, 32] a, f16 [32, 32] b) {
  f16 [32, 32] out;
  parallel p by 1 : block {
    frag mc {1.0};
    parallel {g0, g1} by [2, 2] : group {
      mma.row.col mc, a.chunkat(g0, _), b.chunkat(_, g1);
      mma.store mc, out.chunkat(g0, g1);
    }
  }
  return out;
}

// the element used is chosen by a scalar parameter
__co__ auto pick(s8 [32, 64] a, s8 [64, 32] b, int i) {
  s32 [32, 32] out;
  parallel p by 1 : block {
    frag.s32 acc[1][3] {7};
    parallel {g0, g1} by [2, 2] : group {
      foreach k in [2] {
        mma.row.col acc[0][i], a.chunkat(g0, k), b.chunkat(k, g1);
      }
      mma.store acc[0][i], out.chunkat(g0, g1);
    }
  }
  return out;
}
"""

UNSIGNED_BYTES = """
// u8 operands accumulate exactly in s32 (K has a partial last slice)
__co__ auto gemm_u8(u8 [M, K] a, u8 [K, N] b) {
  s32 [M, N] out;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill 0;
      foreach k in [cdiv(K, 32)] {
        mma.row.col mc, a.subspan(16, 32).at(bm # g0, k), b.subspan(32, 16).at(k, bn # g1);
      }
      mma.store mc, out.subspan(16, 16).at(bm # g0, bn # g1);
    }
  }
  return out;
}

__co__ auto gemm_u8_s8(u8 [M, K] a, s8 [N, K] b) {
  s32 [M, N] out;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill.s32 0;
      foreach k in [cdiv(K, 32)] {
        mma.row.row mc, a.subspan(16, 32).at(bm # g0, k), b.subspan(16, 32).at(bn # g1, k);
      }
      mma.store mc, out.subspan(16, 16).at(bm # g0, bn # g1);
    }
  }
  return out;
}
"""

REGISTER_OPERANDS = """
// A held in registers: a fragment filled with a constant (each output is a row sum of B)
__co__ auto ones_times(f16 [64, 32] b) {
  f32 [64, 64] out;
  parallel bn by 2 : block {
    bs = dma.copy b.subspan(32, 32).at(bn, 0) => shared;
    parallel by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      frag f16 [64, 32] a {0.5f};
      mma.row.row mc, a, bs.data;
      mma.store mc, out.subspan(64, 32).at(0, bn);
    }
  }
  return out;
}

// a register tile given its contents by `mma.load view, tile` (B has a padded N of 48)
__co__ auto staged_a(f16 [64, 32] a, f16 [48, 32] b) {
  f32 [64, 48] out;
  parallel p by 1 : block {
    frag f16 [64, 32] ra {0.0f};
    as = dma.copy a => shared;
    parallel by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.load as.data, ra;
      mma.row.row mc, ra, b;
      mma.store mc, out;
    }
  }
  return out;
}

// S = Q·Kᵀ into an f16 accumulator, then O = S·V with S as the register A operand
__co__ auto qk_v(f16 [64, 32] q, f16 [48, 32] k, f16 [48, 16] v) {
  f16 [64, 16] out;
  parallel bm by 2 : block {
    parallel by 1 : group-4 {
      s = mma.fill.f16 0.0f;
      mma.row.row s, q.subspan(32, 32).at(bm, 0), k;
      o = mma.fill.f32 0.0f;
      mma.row.col o, s, v;
      mma.store o, out.subspan(32, 16).at(bm, 0);
    }
  }
  return out;
}
"""

ASYNC_AND_RELOAD = """
// an asynchronous MMA with its future, mma.commit and wait (no-ops), stored transposed
__co__ auto async_transp(f16 [32, 48] a, f16 [48, 32] b) {
  f32 [32, 32] out;
  parallel p by 1 : block {
    parallel by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      ma = mma.load.async a;
      f = mma.row.col.async mc, ma, b;
      mma.commit;
      wait f;
      mma.store.transp mc, out;
    }
  }
  return out;
}

// `mma.load view, frag`: new contents for an existing operand and accumulator
__co__ auto reload(f16 [32, 32] a, f16 [32, 32] b, f32 [32, 32] c) {
  f32 [32, 32] out;
  parallel p by 1 : block {
    parallel by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mma.row.col mc, ma, b;
      mma.load c, mc;
      mma.load b, ma;
      mma.row.col mc, ma, a;
      mma.store mc, out;
    }
  }
  return out;
}
"""

WARPGROUP_COPIES = """
// each warpgroup loads its own rows with TMA, stores its half of the block's result into
// its part of one shared tile, and copies that part out with TMA
__co__ void per_warpgroup(global f16 [M, K] a, global f16 [N, K] b, global f16 [M, N] out) {
  parallel {bm, bn} by [M / 128, N / 64] : block {
    shared f16 [128, 64] out_s;
    parallel wg by 2 : group-4 {
      mc = mma.fill.f32 0.0f;
      foreach k in [K / 32] {
        as = tma.copy a.subspan(64, 32).at(bm # wg, k) => shared;
        bs = tma.copy b.subspan(64, 32).at(bn, k) => shared;
        mma.row.row mc, as.data, bs.data;
      }
      mma.store mc, out_s.subspan(64, 64).at(wg, 0);
      tma.copy out_s.subspan(64, 64).at(wg, 0) => out.subspan(64, 64).at(bm # wg, bn);
    }
  }
}
"""

BUFFER_ARRAYS = """
// two-stage ring of shared buffers selected by k % 2 (each copied into and read in one step)
__co__ void ring(global f16 [M, K] a, global f16 [N, K] b, global f32 [M, N] c) {
  parallel {bm, bn} by [M / 32, N / 32] : block {
    shared f16 [32, 32] as[2], bs[2];
    mc = mma.fill.f32 0.0f;
    foreach k in [K / 32] {
      stage = k % 2;
      fa = dma.copy.async a.subspan(32, 32).at(bm, k) => as[stage];
      fb = dma.copy.async b.subspan(32, 32).at(bn, k) => bs[stage];
      wait fa, fb;
      mma.row.row mc, as[stage], bs[stage];
    }
    mma.store mc, c.subspan(32, 32).at(bm, bn);
  }
}
// constant elements: the halves of K staged into element 0 and 1
__co__ void halves(global f16 [M, 64] a, global f16 [N, 64] b, global f32 [M, N] c) {
  parallel {bm, bn} by [M / 32, N / 32] : block {
    shared f16 [32, 32] as[2];
    dma.copy a.subspan(32, 32).at(bm, 0) => as[0];
    dma.copy a.subspan(32, 32).at(bm, 1) => as[1];
    mc = mma.fill.f32 0.0f;
    mma.row.row mc, as[0], b.subspan(32, 32).at(bn, 0);
    mma.row.row mc, as[1], b.subspan(32, 32).at(bn, 1);
    mma.store mc, c.subspan(32, 32).at(bm, bn);
  }
}
// one element per warpgroup
__co__ void per_wg(global f16 [M, 32] a, global f16 [N, 32] b, global f32 [M, N] c) {
  parallel {bm, bn} by [M / 128, N / 32] : block {
    shared f16 [64, 32] as[2];
    parallel wg by 2 : group-4 {
      tma.copy a.subspan(64, 32).at(bm # wg, 0) => as[wg];
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, as[wg], b.subspan(32, 32).at(bn, 0);
      mma.store mc, c.subspan(64, 32).at(bm # wg, bn);
    }
  }
}
"""

ELEMENT_STORES = """
// each warp stores its tile into its own element of an array of shared buffers
__co__ void per_warp_elements(global f16 [M, K] a, global f16 [K, N] b, global f32 [M, N] c) {
  parallel {bm, bn} by [M / 64, N / 16] : block {
    shared f32 [16, 16] out_s[4];
    parallel g0 by 4 : group {
      mc = mma.fill.f32 0.0f;
      foreach k in [K / 16] {
        mma.row.col mc, a.subspan(16, 16).at(bm # g0, k), b.subspan(16, 16).at(k, bn);
      }
      mma.store mc, out_s[3 - g0];
      dma.copy out_s[3 - g0] => c.subspan(16, 16).at(bm # g0, bn);
    }
  }
}

// the same, transposed: element [n, m] tiles written to Cᵀ
__co__ void per_warp_transposed(global f16 [M, K] a, global f16 [K, N] b, global f32 [N, M] ct) {
  parallel {bm, bn} by [M / 64, N / 16] : block {
    shared f32 [8, 32] out_s[2][2];
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill.f32 0.0f;
      foreach k in [K / 16] {
        mma.row.col mc, a.subspan(32, 16).at(bm # g0, k), b.subspan(16, 8).at(k, bn # g1);
      }
      mma.store.transp mc, out_s[g0][g1];
      dma.copy out_s[g0][g1] => ct.subspan(8, 32).at(bn # g1, bm # g0);
    }
  }
}
"""

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _gemm_acc_global(m: int, n: int, k: int) -> Case:
    def inputs() -> list[Any]:
        return [random((m, k), torch.float16), random((k, n), torch.float16),
                random((m, n), torch.float32)]

    return Case(f"gemm_acc_global-{m}x{n}x{k}", ACC_FROM_MEMORY, inputs,
                lambda x: x[2].double() + x[0].double() @ x[1].double(), torch.float32,
                output=2, tolerance=1e-5, function="gemm_acc_global")


def _gemm_acc_shared(m: int, n: int, k: int) -> Case:
    def inputs() -> list[Any]:
        return [random((m, k), torch.float16), random((n, k), torch.float16),
                random((m, n), torch.float16)]

    return Case(f"gemm_acc_shared-{m}x{n}x{k}", ACC_FROM_MEMORY, inputs,
                lambda x: x[2].double() + x[0].double() @ x[1].double().T, torch.float16,
                function="gemm_acc_shared")


def _refill_reference(x: list[Any]) -> torch.Tensor:
    product = x[0].double() @ x[1].double()
    return torch.cat([product + 1.5, (product - 2.0) * x[3] + x[4]], dim=1)


REFILL_CASE = Case("refill", REFILL,
                   lambda: [random((64, 32), torch.float16), random((32, 64), torch.float16),
                            poison(torch.empty((64, 128))), 0.75, -1.25],
                   _refill_reference, torch.float32, output=2, tolerance=1e-5)


def block_scaled_reference(a: torch.Tensor, sa: torch.Tensor, w: torch.Tensor,
                           sw: torch.Tensor, block: int = 128) -> torch.Tensor:
    """sum over K blocks kb of (A[:, kb] @ W[:, kb]ᵀ) * sa[m, kb] * sw[n // block, kb]."""
    out = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float64)
    for kb in range(a.shape[1] // block):
        ks = slice(kb * block, (kb + 1) * block)
        row_scales = sa[:, kb].double()[:, None]
        col_scales = sw[:, kb].double().repeat_interleave(block)[None, : w.shape[0]]
        out += (a[:, ks].double() @ w[:, ks].double().T) * row_scales * col_scales
    return out


def _block_scaled(function: str, a_type: str, m: int, n: int, k: int) -> Case:
    def inputs() -> list[Any]:
        return [random((m, k), FP8[a_type]), torch.rand(m, k // 128) + 0.5,
                random((n, k), FP8["e4m3"]), torch.rand(n // 128, k // 128) + 0.5,
                poison(torch.empty((m, n), dtype=torch.float16))]

    return Case(f"{function}-{a_type}-{m}x{n}x{k}", FP8_SCALED, inputs,
                lambda x: block_scaled_reference(x[0], x[1], x[2], x[3]), torch.float16,
                output=4, function=function)


def _row_vector_scales(case: Case) -> Case:
    """The same GEMM with the activation scales stored [KB, M] and viewed as [1, M]."""
    source = case.source.replace(
        "global f32 [M, KB] sa,\n                      global f8_e4m3", "global f32 [KB, M] sa,"
        "\n                      global f8_e4m3").replace(
        "sa.subspan(16, 1).at(bm # g, k)", "sa.subspan(1, 16).at(k, bm # g)", 1)
    assert source.count("sa.subspan(1, 16).at(k, bm # g)") == 1 and "[KB, M] sa" in source

    def inputs() -> list[Any]:
        x = case.inputs()
        return [x[0], x[1].T.contiguous(), *x[2:]]

    return Case(case.id + "-row-vector-scales", source, inputs,
                lambda x: block_scaled_reference(x[0], x[1].T, x[2], x[3]), case.dtype,
                output=case.output, function=case.function)


FP8_PLAIN_CASE = Case("fp8_plain", FP8_SCALED,
                      lambda: [random((64, 96), FP8["e4m3"]), random((96, 64), FP8["e4m3"])],
                      lambda x: x[0].double() @ x[1].double(), torch.float32, tolerance=1e-5,
                      function="fp8_plain")

def _two_products_reference(x: list[Any]) -> torch.Tensor:
    a = x[0].double()
    return torch.cat([a @ x[1].double() + 0.5, (a @ x[2].double() + 0.5) * 2], dim=1)


TWO_PRODUCTS_CASE = Case("two_products", FRAG_ARRAYS,
                         lambda: [random((64, 32), torch.float16),
                                  random((32, 64), torch.float16),
                                  random((32, 64), torch.float16),
                                  poison(torch.empty((64, 128)))],
                         _two_products_reference, torch.float32, output=3, tolerance=1e-5,
                         function="two_products")


SINGLE_FRAG_CASE = Case("single_frag", FRAG_ARRAYS,
                        lambda: [random((32, 32), torch.float16),
                                 random((32, 32), torch.float16)],
                        lambda x: x[0].double() @ x[1].double() + 1, torch.float16,
                        function="single_frag")


def _pick(i: int) -> Case:
    return Case(f"pick-{i}", FRAG_ARRAYS,
                lambda: [random((32, 64), torch.int8), random((64, 32), torch.int8), i],
                lambda x: x[0].double() @ x[1].double() + 7, torch.int32, function="pick")


def _bytes(low: int, high: int, shape: tuple[int, int]) -> torch.Tensor:
    dtype = torch.uint8 if low >= 0 else torch.int8
    return torch.randint(low, high, shape, dtype=torch.int32).to(dtype)


def _qk_v_reference(x: list[Any]) -> torch.Tensor:
    scores = (x[0].double() @ x[1].double().T).half()  # the f16 accumulator rounds S
    return scores.double() @ x[2].double()


WARPGROUP_CASE = Case("per_warpgroup", WARPGROUP_COPIES,
                      lambda: [random((256, 64), torch.float16),
                               random((128, 64), torch.float16),
                               poison(torch.empty((256, 128), dtype=torch.float16))],
                      lambda x: x[0].double() @ x[1].double().T, torch.float16, output=2)

def _nt_gemm(function: str, m: int, n: int, k: int) -> Case:
    return Case(f"{function}-{m}x{n}x{k}", BUFFER_ARRAYS,
                lambda: [random((m, k), torch.float16), random((n, k), torch.float16),
                         poison(torch.empty((m, n)))],
                lambda x: x[0].double() @ x[1].double().T, torch.float32, output=2,
                tolerance=1e-5, function=function)


BUFFER_ARRAY_CASES = [_nt_gemm("ring", 64, 64, 96), _nt_gemm("halves", 64, 32, 64),
                      _nt_gemm("per_wg", 256, 64, 32)]

def _element_case(function: str, transposed: bool) -> Case:
    m, n, k = 128, 32, 48

    def reference(x: list[Any]) -> torch.Tensor:
        product = x[0].double() @ x[1].double()
        return product.T if transposed else product

    return Case(function, ELEMENT_STORES,
                lambda: [random((m, k), torch.float16), random((k, n), torch.float16),
                         poison(torch.empty((n, m) if transposed else (m, n)))],
                reference, torch.float32, output=2, tolerance=1e-5, function=function)


ELEMENT_CASES = [_element_case("per_warp_elements", False),
                 _element_case("per_warp_transposed", True)]

ASYNC_CASES = [
    Case("async_transp", ASYNC_AND_RELOAD,
         lambda: [random((32, 48), torch.float16), random((48, 32), torch.float16)],
         lambda x: (x[0].double() @ x[1].double()).T, torch.float32, tolerance=1e-5,
         function="async_transp"),
    Case("reload", ASYNC_AND_RELOAD,
         lambda: [random((32, 32), torch.float16), random((32, 32), torch.float16),
                  random((32, 32), torch.float32)],
         lambda x: x[2].double() + x[1].double() @ x[0].double(), torch.float32,
         tolerance=1e-5, function="reload"),
]

REGISTER_CASES = [
    Case("ones_times", REGISTER_OPERANDS, lambda: [random((64, 32), torch.float16)],
         lambda x: (0.5 * x[0].double().sum(dim=1))[None, :].expand(64, 64), torch.float32,
         tolerance=1e-5, function="ones_times"),
    Case("staged_a", REGISTER_OPERANDS,
         lambda: [random((64, 32), torch.float16), random((48, 32), torch.float16)],
         lambda x: x[0].double() @ x[1].double().T, torch.float32, tolerance=1e-5,
         function="staged_a"),
    Case("qk_v", REGISTER_OPERANDS,
         lambda: [random((64, 32), torch.float16), random((48, 32), torch.float16) * 0.25,
                  random((48, 16), torch.float16)],
         _qk_v_reference, torch.float16, function="qk_v"),
]

UNSIGNED_CASES = [
    Case("gemm_u8-64x32x80", UNSIGNED_BYTES,
         lambda: [_bytes(0, 256, (64, 80)), _bytes(0, 256, (80, 32))],
         lambda x: x[0].double() @ x[1].double(), torch.int32, function="gemm_u8"),
    Case("gemm_u8_s8-32x64x48", UNSIGNED_BYTES,
         lambda: [_bytes(0, 256, (32, 48)), _bytes(-128, 128, (64, 48))],
         lambda x: x[0].double() @ x[1].double().T, torch.int32, function="gemm_u8_s8"),
]

CASES = [
    _gemm_acc_global(64, 32, 48),
    _gemm_acc_shared(64, 96, 48),
    REFILL_CASE,
    _block_scaled("fp8_fused", "e4m3", 64, 256, 256),
    _row_vector_scales(_block_scaled("fp8_fused", "e4m3", 64, 256, 256)),
    _block_scaled("fp8_scale_points", "e5m2", 64, 256, 256),
    FP8_PLAIN_CASE,
    TWO_PRODUCTS_CASE,
    SINGLE_FRAG_CASE,
    _pick(0),
    _pick(2),
    *UNSIGNED_CASES,
    *REGISTER_CASES,
    *ASYNC_CASES,
    WARPGROUP_CASE,
    *BUFFER_ARRAY_CASES,
    *ELEMENT_CASES,
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_against_torch_and_the_reference_interpreter(case: Case) -> None:
    check(case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_the_gpu(case: Case) -> None:
    from .checks import close

    inputs = case.inputs()  # (the reference reads them as they were before the call)
    args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in inputs]
    module = croqtile.compile(case.source)
    function = getattr(module, case.function) if case.function else module
    result = function(*args)
    out = args[case.output] if case.output is not None else result
    close(out, case.reference(inputs), case.dtype, case.tolerance)


def test_accumulator_load_inside_a_loop_waits_for_the_previous_store() -> None:
    """The reload of a tile stored by the previous K block reads it after a barrier (its
    elements may have been stored by other threads of the program), and both move through
    plain loads and stores (a barrier does not order TMA stores)."""
    source = croqtile.compile(ACC_FROM_MEMORY).gemm_acc_global.triton_source
    loop = source[source.index("for kb in"):]
    assert loop.index("tl.debug_barrier()") < loop.index("tl.load(c_ptr")
    assert "c_desc" not in source and "tl.store(c_ptr" in loop


def test_scale_points_keep_the_raw_products_apart() -> None:
    """mma.scale: MMAs accumulate into a raw f32 partial sum; each scale point folds it
    into the f16 result and restarts it (spec 5.8, two accumulators)."""
    source = croqtile.compile(FP8_SCALED).fp8_scale_points.triton_source
    assert "acc_part = tl.dot(" in source and "out_dtype=tl.float32" in source
    assert source.count("acc_part = tl.full([32, 32], 0.0, tl.float32)") == 2


def test_warpgroup_parts_are_stored_as_one_tile() -> None:
    """The two warpgroups' TMA stores of their halves become one store of the whole tile."""
    source = croqtile.compile(WARPGROUP_COPIES).per_warpgroup.triton_source
    assert source.count("tl.store(out_ptr") == 1 and source.count("tl.dot(") == 1


def test_warpgroup_parts_placed_differently_are_rejected() -> None:
    """A destination that puts the warpgroups' rows side by side along columns does not
    match how the parts sit in the shared tile: a diagnostic, not a wrong store."""
    moved = WARPGROUP_COPIES.replace("=> out.subspan(64, 64).at(bm # wg, bn)",
                                     "=> out.subspan(64, 64).at(bm, bn # wg)")
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(moved)
    [diag] = info.value.diagnostics
    assert diag.code == "CQ0701"
    assert "does not place the instances' parts as their source does" in diag.message


def test_buffer_array_elements_that_may_alias_are_rejected() -> None:
    """A prefetch ring that writes ``as[(k + 1) % 2]`` while reading ``as[k % 2]`` names
    elements that differ by run-time values: a diagnostic, not a guess."""
    prefetch = BUFFER_ARRAYS.replace(
        "      wait fa, fb;\n      mma.row.row mc, as[stage], bs[stage];",
        "      wait fa, fb;\n      mma.row.row mc, as[(k + 1) % 2], bs[stage];")
    assert prefetch != BUFFER_ARRAYS
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(prefetch)
    [diag] = info.value.diagnostics
    assert diag.code == "CQ0701" and "cannot be matched with the copy" in diag.message
    assert diag.line == BUFFER_ARRAYS.splitlines().index(
        "      mma.row.row mc, as[stage], bs[stage];") + 1


def test_mma_store_into_one_shared_element_for_all_warps_is_rejected() -> None:
    """Every warp storing its tile into the same element would overwrite the others."""
    shared = ELEMENT_STORES.replace("mma.store mc, out_s[3 - g0];", "mma.store mc, out_s[1];")
    assert shared != ELEMENT_STORES
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(shared)
    [diag] = info.value.diagnostics
    assert diag.code == "CQ0703" and "its own element" in diag.message


REPEATED = """
__co__ void repeated(global f16 [32, 32] a, global f16 [32, 32] b, global f32 [32, 32] c) {
  parallel one by 1 : block {
    parallel g by 1 : group {
      acc = mma.fill.f32 0.0f;
      foreach {r} in [3] {
        ma = mma.load a;
        mb = mma.load b;
        mma.row.row acc, ma, mb;
      }
      mma.store acc, c;
    }
  }
}
"""


def test_a_loop_whose_index_the_mma_ignores_adds_the_product_each_trip() -> None:
    """A loop around an MMA collapses into one wider dot only when its index walks the
    operands along K; here every trip adds the same product (it once came out 1x)."""
    a, b = random((32, 32), torch.float16), random((32, 32), torch.float16)
    ours = poison(torch.empty((32, 32)))
    croqtile.compile(REPEATED)(a, b, ours)
    theirs = poison(torch.empty((32, 32)))
    interpret_source(REPEATED, [a, b, theirs], {})
    expected = 3 * a.double() @ b.double().T
    assert_close(ours, expected, torch.float32, 1e-3)
    assert_close(theirs, expected, torch.float32, 1e-3)
