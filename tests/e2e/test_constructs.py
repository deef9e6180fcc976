"""Small programs, one construct at a time, on the CPU (interpreter) and the GPU: tails with
symbolic sizes, with/if/int, tma.copy, .zfill, auto returns, scalar parameters, several
launches, mixed-type arithmetic, bounded ituples, multi-warp MMA fusion."""

from __future__ import annotations

import pytest
import torch

import croqtile

from .checks import DATA, DEVICES, assert_close, poison, random

SCALE_ADD = """
__co__ void scale_add(global f32 [N] x, global f32 [N] y, global f32 [N] out) {
  parallel p by cdiv(N, 64) : block {
    xs = dma.copy x.subspan(64).at(p) => shared;
    ys = dma.copy y.subspan(64).at(p) => shared;
    parallel t by 64 : thread
      out.at(p # t) = xs.data.at(t) * 2.0f + ys.data.at(t);
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [64, 200, 1])
def test_symbolic_size_with_tail(device: str, n: int) -> None:
    mod = croqtile.compile(SCALE_ADD)
    x, y = random((n,), torch.float32, device), random((n,), torch.float32, device)
    out = poison(torch.empty(n, device=device))
    mod(x, y, out)
    assert_close(out, x.double() * 2 + y.double(), torch.float32)


WITH_IF = """
__co__ s32 [16] f(s32 [16] a, int k) {
  s32 [a.span] out;
  int two = 2;
  parallel i by 16 {
    with j in 4 {
      if (k > 0) out.at(i) = a.at(i) * two + j + k;
      else out.at(i) = 0 - a.at(i);
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [3, -1])
def test_with_if_int(device: str, k: int) -> None:
    mod = croqtile.compile(WITH_IF)
    a = random((16,), torch.int32, device)
    expected = a.double() * 2 + k if k > 0 else -a.double()
    assert_close(mod.f(a, k), expected, torch.int32)


TMA_COPY = """
__co__ void copy2d(global f16 [M, N] src, global f16 [M, N] dst) {
  parallel {bm, bn} by [cdiv(M, 32), cdiv(N, 64)] : block {
    t = tma.copy src.subspan(32, 64).at(bm, bn) => shared;
    tma.copy t.data => dst.subspan(32, 64).at(bm, bn);
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(64, 128), (50, 100)])
def test_tma_copy_round_trip(device: str, shape: tuple[int, int]) -> None:
    mod = croqtile.compile(TMA_COPY)
    src = random(shape, torch.float16, device)
    dst = poison(torch.empty(shape, dtype=torch.float16, device=device))
    mod(src, dst)
    assert_close(dst, src.double(), torch.float16, 0.0)


ZFILL = """
__co__ void pad_rows(global s32 [M, 64] src, global s32 [4, 64] dst) {
  parallel p by 1 : block {
    shared s32 [4, 64] buf;
    dma.copy.zfill src.subspan(3, 64).at(0, 0) => buf;
    dma.copy buf => dst;
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_zfill_smaller_source(device: str) -> None:
    mod = croqtile.compile(ZFILL)
    src = random((3, 64), torch.int32, device)
    dst = poison(torch.empty((4, 64), dtype=torch.int32, device=device))
    mod(src, dst)
    expected = torch.cat([src, torch.zeros((1, 64), dtype=torch.int32, device=device)])
    assert_close(dst, expected.double(), torch.int32)


AUTO_BIAS = """
__co__ auto add_bias(f16 [R, 32] x, f16 bias) {
  f16 [x.span] y;
  parallel r by R : block {
    parallel c by 32 : thread
      y.at(r, c) = x.at(r, c) + bias;
  }
  return y;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_auto_return_and_scalar_parameter(device: str) -> None:
    mod = croqtile.compile(AUTO_BIAS)
    x = random((5, 32), torch.float16, device)
    y = mod(x, 0.5)
    assert y.dtype == torch.float16 and y.device.type == torch.device(device).type
    assert_close(y, x.double() + 0.5, torch.float16)


TUPLE_COPY = """
__co__ s32 [6, 17] copy_all(s32 [6, 17] a) {
  s32 [a.span] out;
  parallel p by 1 {
    f = dma.copy a => shared;
    foreach idx in [f.span]
      out.at(idx) = f.data.at(idx);
  }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_bounded_ituple_over_a_span(device: str) -> None:
    mod = croqtile.compile(TUPLE_COPY)
    a = random((6, 17), torch.int32, device)
    assert_close(mod(a), a.double(), torch.int32)


TWO_LAUNCHES = """
__co__ s32 [64] two_steps(s32 [64] a) {
  s32 [a.span] t;
  s32 [a.span] out;
  parallel p by 4 : block { parallel q by 16 : thread { t.at(p # q) = a.at(p # q) + 1; } }
  parallel p by 4 : block { parallel q by 16 : thread { out.at(p # q) = t.at(p # q) * 3; } }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_two_kernels_in_one_function(device: str) -> None:
    mod = croqtile.compile(TWO_LAUNCHES)
    a = random((64,), torch.int32, device)
    assert_close(mod(a), (a.double() + 1) * 3, torch.int32)
    assert mod.two_steps.launches == 2


MIXED = """
__co__ f16 [8, 8] mixed(f16 [8, 8] a) {
  f16 [a.span] out;
  parallel {i, j} by [8, 8]
    out.at(i, j) = a.at(i, j) * 0.5f + 1.0f;
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_precision_arithmetic(device: str) -> None:
    """f16 * f32 literal computes in f32 (spec 3.6) and converts back on the store."""
    with pytest.warns(croqtile.CompileWarning, match="CQ0206"):
        mod = croqtile.compile(MIXED)
    a = random((8, 8), torch.float16, device)
    assert_close(mod(a), a.double() * 0.5 + 1.0, torch.float16)
    assert ".to(tl.float32)" in mod.mixed.triton_source


UNQUALIFIED_WRITE = """
__co__ void clobber(s32 [4] a) {
  parallel i by 4
    a.at(i) = 0;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_unqualified_parameter_writes_stay_private(device: str) -> None:
    mod = croqtile.compile(UNQUALIFIED_WRITE)
    a = random((4,), torch.int32, device)
    before = a.clone()
    mod(a)
    assert torch.equal(a, before)


@pytest.mark.parametrize("device", DEVICES)
def test_multi_warp_mma_fusion(device: str) -> None:
    """2x4 warps of 16x16 MMA tiles per block fuse into one 32x64 dot."""
    text = (DATA / "seed000_sm86_gemm.co").read_text()
    mod = croqtile.compile(text, defines={"MATMUL_TILE_M": 32, "MATMUL_TILE_N": 64,
                                          "MATMUL_TILE_K": 32})
    source = mod.matmul.triton_source
    assert source.count("tl.dot(") == 1 and "ax_m = tl.arange(0, 32)" in source
    lhs, rhs = random((70, 48), torch.float16, device), random((90, 48), torch.float16, device)
    out = poison(torch.empty((70, 90), dtype=torch.float16, device=device))
    mod(lhs, rhs, out)
    assert_close(out, lhs.double() @ rhs.double().T, torch.float16)


TRANSP_PAD = """
__co__ auto tp(f32 [6, 10] x) {
  f32 [10, 6] out;
  parallel p by 1 : block {
    t = dma.transp<1, 0> x => shared;
    dma.copy t.data => out;
  }
  return out;
}
__co__ auto tp3(f32 [4, 3, 5] x) {
  f32 [4, 5, 3] out;
  parallel p by 1 : block {
    t = dma.transp<0, 2, 1> x => local;
    dma.copy t.data => out;
  }
  return out;
}
__co__ auto pad(s32 [5, 7] x) {
  s32 [8, 12] out;
  parallel p by 1 : block {
    t = dma.pad<{1, 2}, {2, 3}, {0, 0}, 9> x => shared;
    dma.copy t.data => out;
  }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_and_pad_copies(device: str) -> None:
    mod = croqtile.compile(TRANSP_PAD)
    x = random((6, 10), torch.float32, device)
    assert_close(mod.tp(x), x.double().T, torch.float32, 0.0)
    x3 = random((4, 3, 5), torch.float32, device)
    assert_close(mod.tp3(x3), x3.double().permute(0, 2, 1), torch.float32, 0.0)
    xi = random((5, 7), torch.int32, device)
    expected = torch.nn.functional.pad(xi.double(), (2, 3, 1, 2), value=9)
    assert_close(mod.pad(xi), expected, torch.int32)


MMA_FORMS = """
__co__ f16 [128, 256] matmul_group_rc(f16 [128, 256] lhs, f16 [256, 256] rhs) {
  f16 [lhs.span(0), rhs.span(1)] out;
  parallel {bm, bn} by [4, 8] : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill 0.0;
      foreach k in [16] {
        ma = mma.load lhs.chunkat(bm # g0, k);
        mb = mma.load rhs.chunkat(k, bn # g1);
        mma.row.col mc, ma, mb;
      }
      mma.store mc, out.chunkat(bm # g0, bn # g1);
    }
  }
  return out;
}
__co__ s32 [32, 32] mma_s8(s8 [32, 16] lhs, s8 [16, 32] rhs) {
  s32 [32, 32] out;
  parallel p by 1 : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill.s32 0;
      ma = mma.load lhs.chunkat(g0, _);
      mb = mma.load rhs.chunkat(_, g1);
      mma.row.col mc, ma, mb;
      mma.store mc, out.chunkat(g0, g1);
    }
  }
  return out;
}
__co__ f32 [16, 16] m8n8k4(f16 [16, 8] lhs, f16 [8, 16] rhs) {
  f32 [16, 16] out;
  parallel p by 1 : block {
    parallel {g0, g1} by [2, 2] : group {
      mc = mma.fill.f32 0.0f;
      foreach k in [2] {
        ma = mma.load lhs.chunkat(g0, k);
        mb = mma.load rhs.chunkat(k, g1);
        mma.row.col mc, ma, mb;
      }
      mma.store mc, out.chunkat(g0, g1);
    }
  }
  return out;
}
__co__ void masked(global f16 [M, 16] a, global f16 [16, 16] b, global f32 [M, 16] c) {
  parallel bm by cdiv(M, 16) : block {
    mc = mma.fill.f32 0.0f;
    ma = mma.load a.subspan(16, 16).at(bm, 0);
    mb = mma.load b;
    mma.row.col mc, ma, mb;
    mma.store.mask mc, c.subspan(16, 16).at(bm, 0), 5, 8;
  }
}
"""


@pytest.fixture(scope="module")
def mma_forms() -> croqtile.Module:
    return croqtile.compile(MMA_FORMS)


@pytest.mark.parametrize("device", DEVICES)
def test_mma_loads_from_global_with_row_col(device: str, mma_forms: croqtile.Module) -> None:
    a = random((128, 256), torch.float16, device)
    b = random((256, 256), torch.float16, device)
    assert_close(mma_forms.matmul_group_rc(a, b), a.double() @ b.double(), torch.float16)


@pytest.mark.parametrize("device", DEVICES)
def test_mma_int8_accumulates_in_int32(device: str, mma_forms: croqtile.Module) -> None:
    a, b = random((32, 16), torch.int8, device), random((16, 32), torch.int8, device)
    assert_close(mma_forms.mma_s8(a, b), a.double() @ b.double(), torch.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_mma_tiles_smaller_than_16_are_padded(device: str, mma_forms: croqtile.Module) -> None:
    a, b = random((16, 8), torch.float16, device), random((8, 16), torch.float16, device)
    assert_close(mma_forms.m8n8k4(a, b), a.double() @ b.double(), torch.float32, 1e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_mma_store_mask_writes_only_the_guarded_rows(device: str,
                                                     mma_forms: croqtile.Module) -> None:
    a, b = random((20, 16), torch.float16, device), random((16, 16), torch.float16, device)
    c = poison(torch.empty((20, 16), device=device))
    mma_forms.masked(a, b, c)
    ref = a.double() @ b.double()
    written = torch.zeros(20, 16, dtype=torch.bool)
    written[0:5, 0:8] = True
    written[16:20, 0:8] = True
    c_cpu = c.cpu()
    assert torch.isnan(c_cpu[~written]).all()
    assert_close(c_cpu[written], ref[written], torch.float32, 1e-2)


ATOMICS = """
__co__ void hist(global s32 [64] x, global s32 [16] h) {
  parallel p by 4 : block {
    parallel t by 16 : thread
      __atomic_add(h.at(x.at(p # t) % 16), 1);
  }
}
__co__ void largest(global s32 [64] x, global s32 [1] m) {
  parallel p by 4 : block {
    parallel t by 16 : thread
      old = __atomic_max(m.at(0), x.at(p # t));
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_atomics(device: str) -> None:
    mod = croqtile.compile(ATOMICS)
    x = torch.randint(0, 100, (64,), dtype=torch.int32).to(device)
    h = torch.zeros(16, dtype=torch.int32, device=device)
    mod.hist(x, h)
    assert_close(h, torch.bincount(x.cpu() % 16, minlength=16).double(), torch.int32)
    m = torch.full((1,), -1, dtype=torch.int32, device=device)
    mod.largest(x, m)
    assert m.item() == x.max().item()


PREDICATES = """
__co__ s32 [64] clamp(s32 [64] a) {
  s32 [64] out;
  parallel p by 4 : block {
    parallel t by 16 : thread {
      if (a.at(p # t) > 0) out.at(p # t) = a.at(p # t);
      else out.at(p # t) = 0;
    }
  }
  return out;
}
__co__ s32 [4] firsts(s32 [64] a) {
  s32 [4] out;
  parallel p by 4 : block {
    parallel t by 16 : thread {
      inthreads (t == 0)
        out.at(p) = a.at(p # t);
    }
  }
  return out;
}
__co__ s32 [16] rowsum(s32 [16, 8] a) {
  s32 [16] out;
  parallel p by 1 : block {
    parallel t by 16 : thread {
      mutable s32 acc = 0;
      foreach k in [8]
        acc += a.at(t, k);
      if (acc < 0) acc = 0;
      out.at(t) = acc;
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_per_thread_conditions_and_mutable_scalars(device: str) -> None:
    mod = croqtile.compile(PREDICATES)
    a = random((64,), torch.int32, device)
    assert_close(mod.clamp(a), a.double().clamp(min=0), torch.int32)
    assert_close(mod.firsts(a), a[::16].double(), torch.int32)
    m = random((16, 8), torch.int32, device)
    assert_close(mod.rowsum(m), m.double().sum(1).clamp(min=0), torch.int32)


PERSISTENT = """
#define T 16
#define WORKERS 6
// a fixed number of blocks walks over all output tiles, row-major
__co__ void persistent(global f16 [M, K] a, global f16 [N, K] b, global f16 [M, N] c) {
  int tiles = cdiv(M, T) * cdiv(N, T);
  int across = cdiv(N, T);
  parallel worker by WORKERS : block {
    foreach {round} in [cdiv(tiles, WORKERS)] {
      tile = round # worker;
      if (tile < tiles) {
        tm = tile / across;
        tn = tile % across;
        acc = mma.fill.f32 0.0f;
        foreach {k} in [cdiv(K, T)] {
          sa = dma.copy a.subspan(T, T).at(tm, k) => shared;
          sb = dma.copy b.subspan(T, T).at(tn, k) => shared;
          mma.row.row acc, sa.data, sb.data;
        }
        mma.store acc, c.subspan(T, T).at(tm, tn);
      }
    }
  }
}
// the tile order comes from tables the host fills
__co__ void scheduled(global f16 [M, K] a, global f16 [N, K] b, global f16 [M, N] c,
                      global s32 [S] order_m, global s32 [S] order_n) {
  parallel worker by WORKERS : block {
    foreach {round} in [cdiv(S, WORKERS)] {
      tile = round # worker;
      if (tile < S) {
        int tm = order_m.at(tile);
        int tn = order_n.at(tile);
        acc = mma.fill.f32 0.0f;
        foreach {k} in [cdiv(K, T)] {
          sa = dma.copy a.subspan(T, T).at(tm, k) => shared;
          sb = dma.copy b.subspan(T, T).at(tn, k) => shared;
          mma.row.row acc, sa.data, sb.data;
        }
        mma.store acc, c.subspan(T, T).at(tm, tn);
      }
    }
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_persistent_kernels(device: str) -> None:
    mod = croqtile.compile(PERSISTENT)
    a, b = random((40, 48), torch.float16, device), random((56, 48), torch.float16, device)
    ref = a.double() @ b.double().T
    c = poison(torch.empty((40, 56), dtype=torch.float16, device=device))
    mod.persistent(a, b, c)
    assert_close(c, ref, torch.float16)
    tiles_m, tiles_n = 3, 4
    order = torch.randperm(tiles_m * tiles_n)  # any order covers every tile once
    order_m = (order // tiles_n).to(torch.int32).to(device)
    order_n = (order % tiles_n).to(torch.int32).to(device)
    c = poison(torch.empty((40, 56), dtype=torch.float16, device=device))
    mod.scheduled(a, b, c, order_m, order_n)
    assert_close(c, ref, torch.float16)


PIPELINES = """
#define T 16
__co__ void pipelined(global f16 [M, K] a, global f16 [N, K] b, global f16 [M, N] c) {
  parallel {bm, bn} by [cdiv(M, T), cdiv(N, T)] : block {
    acc = mma.fill.f32 0.0f;
    with k in [cdiv(K, T)] {
      ca = dma.copy.async a.subspan(T, T).at(bm, 0) => shared;
      cb = dma.copy.async b.subspan(T, T).at(bn, 0) => shared;
      na = dma.any;
      nb = dma.any;
      foreach k(1:) {
        na = dma.copy.async a.subspan(T, T).at(bm, k) => shared;
        nb = dma.copy.async b.subspan(T, T).at(bn, k) => shared;
        wait ca, cb;
        mma.row.row acc, ca.data, cb.data;
        swap(ca, na);
        swap(cb, nb);
      }
      wait ca, cb;
      mma.row.row acc, ca.data, cb.data;
    }
    mma.store acc, c.subspan(T, T).at(bm, bn);
  }
}
__co__ auto whole(f16 [64, 32] a, f16 [32, 32] b) {
  f16 [64, 32] out;
  parallel {m, n} by [1, 2] : block {
    parallel {g0, g1} by [4, 1] : group {
      acc = mma.fill 0.0;
      with k in 2 {
        fa = dma.copy.async a => shared;
        fb = dma.copy.async b => shared;
        na = dma.any;
        nb = dma.any;
        foreach k(1:) {
          na = dma.copy.async a => shared;
          nb = dma.copy.async b => shared;
          wait fa, fb;
          ma = mma.load fa.chunkat(m # g0, k - 1);
          mb = mma.load fb.chunkat(k - 1, n # g1);
          mma.row.col acc, ma, mb;
          swap(fa, na);
          swap(fb, nb);
        }
        wait fa, fb;
        ma = mma.load fa.chunkat(m # g0, k(-1));
        mb = mma.load fb.chunkat(k(-1), n # g1);
        mma.row.col acc, ma, mb;
      }
      mma.store acc, out.chunkat(m # g0, n # g1);
    }
  }
  return out;
}
__co__ auto twobufs(s32 [4, 8, 16] x) {
  s32 [4, 8, 16] out;
  parallel p by 4 : block {
    local s32 [1, 1, 16] bufA, bufB;
    with r in [8] {
      cur = dma.copy.async x.chunkat(p, r, _) => bufA;
      nxt = dma.any;
      foreach r(1:) {
        nxt = dma.copy.async x.chunkat(p, r, _) => select(r % 2, bufA, bufB);
        wait cur;
        parallel t by 16 : thread
          out.at(p, r - 1, t) = cur.data.at(0, 0, t) * 2;
        swap(cur, nxt);
      }
      wait cur;
      parallel t by 16 : thread
        out.at(p, 7, t) = cur.data.at(0, 0, t) * 2;
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_double_buffering_with_placeholders_swap_and_select(device: str) -> None:
    mod = croqtile.compile(PIPELINES)
    a, b = random((40, 64), torch.float16, device), random((24, 64), torch.float16, device)
    c = poison(torch.empty((40, 24), dtype=torch.float16, device=device))
    mod.pipelined(a, b, c)
    assert_close(c, a.double() @ b.double().T, torch.float16)
    a, b = random((64, 32), torch.float16, device), random((32, 32), torch.float16, device)
    assert_close(mod.whole(a, b), a.double() @ b.double(), torch.float16)
    x = random((4, 8, 16), torch.int32, device)
    assert_close(mod.twobufs(x), x.double() * 2, torch.int32)
