"""Device helpers (``call`` of the file's own ``__device__`` functions) and run-time trip
counts, in the style of a mixture-of-experts pipeline: routing with warp shuffles, expert
counts with atomics, and a grouped GEMM over per-expert runs of rows read at run time.

Each program runs through the Triton path (Triton's CPU interpreter) on fresh random
inputs and is compared, every element of a poisoned output, with a float64 (or exact
integer) torch reference."""

from __future__ import annotations

import logging

import pytest
import torch

from .checks import assert_close, compile_clean, poison

# ----------------------------------------------------------------------- warp shuffles

# One row per block, one lane per column: the row maximum by an xor butterfly, the sum
# by a shift-down tree (lane 0 holds it), lane 0's sum handed to every lane by an indexed
# shuffle, and each lane's left neighbour by a shift-up (lane 0 keeps its own).
SHUFFLES = """
template <typename T>
__device__ __forceinline__ T XOR(T v, int m, int w) { return __shfl_xor_sync(uint32_t(-1), v, m, w); }
template <typename T>
__device__ __forceinline__ T DOWN(T v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
template <typename T>
__device__ __forceinline__ T UP(T v, int d) { return __shfl_up_sync(0xffffffffu, v, d, 32); }
template <typename T>
__device__ __forceinline__ T BCAST(T v, int src) { return __shfl_sync(0xffffffffu, v, src); }

__co__ void lanes(global f32 [R, 32] x, global f32 [R, 32] rowmax, global f32 [R, 32] rowsum,
                  global f32 [R, 32] left) {
  parallel r by R : block
  parallel l by 32 : thread {
    f32 v = x.at(r, l);
    mutable f32 best = v;
    mutable step = 16;
    foreach i in 8 {
      f32 other = call XOR(best, step, 32);
      if (other > best) best = other;
      step = step >> 1;
      if (step == 0) break;
    }
    rowmax.at(r, l) = best;
    mutable f32 total = v;
    foreach i in [5] {
      total = total + call DOWN(total, 16 >> i);
    }
    rowsum.at(r, l) = call BCAST(total, 0);
    left.at(r, l) = call UP(v, 1);
  }
}
"""


def test_warp_shuffles_are_lane_gathers() -> None:
    rows = 5
    x = torch.randn(rows, 32)
    outs = [poison(torch.empty(rows, 32)) for _ in range(3)]
    compile_clean(SHUFFLES).lanes(x, *outs)
    rowmax, rowsum, left = outs
    x64 = x.double()
    assert_close(rowmax, x64.amax(1, keepdim=True).expand(rows, 32), torch.float32)
    assert_close(rowsum, x64.sum(1, keepdim=True).expand(rows, 32), torch.float32)
    expected = torch.cat([x64[:, :1], x64[:, :-1]], 1)
    assert_close(left, expected, torch.float32)


# Top-1 routing: per token, the expert of the largest logit (the smaller index on ties)
# and its softmax weight; each lane looks at 2 experts, an xor butterfly of value and
# index pairs finds the winner, the shuffled sum of exponentials normalises it.
ROUTE = """
template <typename T>
__device__ __forceinline__ T SHFL_XOR(T var, int lane_mask, int width) {
  return __shfl_xor_sync(uint32_t(-1), var, lane_mask, width);
}

__co__ void route(global f32 [T, 64] logits, global s32 [T] expert, global f32 [T] weight) {
  parallel tok by T : block
  parallel lane by 32 : thread {
    f32 a = logits.at(tok, lane * 2);
    f32 b = logits.at(tok, lane * 2 + 1);
    mutable f32 best = a;
    mutable s32 idx = lane * 2;
    if (b > a) {
      best = b;
      idx = lane * 2 + 1;
    }
    foreach i in [5] {
      f32 ob = call SHFL_XOR(best, 16 >> i, 32);
      s32 oi = call SHFL_XOR(idx, 16 >> i, 32);
      if (ob > best || (ob == best && oi < idx)) {
        best = ob;
        idx = oi;
      }
    }
    mutable f32 sum = __exp(a - best) + __exp(b - best);
    foreach i in [5] {
      sum += call SHFL_XOR(sum, 16 >> i, 32);
    }
    inthreads (lane == 0) {
      expert.at(tok) = idx;
      weight.at(tok) = 1.0f / sum;
    }
  }
}
"""


def test_routing_with_shuffles_matches_torch() -> None:
    tokens = 6
    logits = torch.randn(tokens, 64)
    logits[2, 7] = logits[2, 40] = logits[2].max() + 1.0  # a tie: the smaller index wins
    expert = poison(torch.empty(tokens, dtype=torch.int32))
    weight = poison(torch.empty(tokens))
    compile_clean(ROUTE).route(logits, expert, weight)
    probs = torch.softmax(logits.double(), 1)
    assert_close(expert, probs.argmax(1).int(), torch.int32)
    assert int(expert[2]) == 7
    assert_close(weight, probs.amax(1), torch.float32)


# ----------------------------------------------------------------------- atomics

# Count routes per expert, and give each route a slot in its expert's run of rows: the
# atomic's return value (the old count) is the slot.
ATOMICS = """
template <typename T, typename C>
__device__ __forceinline__ T ATOMIC_ADD(T* a, C b) { return atomicAdd(a, b); }
__device__ int ATOMIC_MAX(int* a, int b) { return atomicMax(a, b); }

__co__ void count(global s32 [T, 4] ids, global s32 [8] counts, global s32 [8] cursor,
                  global s32 [T, 4] slot, global s32 [1] top) {
  parallel tok by T : block
  parallel k by 4 : thread {
    e = ids.at(tok, k);
    call ATOMIC_ADD(&counts.at(e), 1);
    slot.at(tok, k) = call ATOMIC_ADD(&cursor.at(e), 1);
    call ATOMIC_MAX(&top.at(0), e);
  }
}
"""


def test_atomics_count_and_return_slots() -> None:
    tokens = 9
    ids = torch.randint(0, 8, (tokens, 4), dtype=torch.int32)
    counts = torch.zeros(8, dtype=torch.int32)
    start = torch.randint(0, 50, (8,), dtype=torch.int32)
    cursor = start.clone()
    slot = poison(torch.empty(tokens, 4, dtype=torch.int32))
    top = torch.full((1,), -1, dtype=torch.int32)
    compile_clean(ATOMICS).count(ids, counts, cursor, slot, top)
    expected = torch.bincount(ids.flatten().long(), minlength=8).int()
    assert_close(counts, expected, torch.int32)
    assert_close(cursor, start + expected, torch.int32)
    assert int(top[0]) == int(ids.max())
    for e in range(8):  # each expert's routes took the slots start..start+count, once each
        taken = sorted(slot[ids == e].tolist())
        assert taken == list(range(int(start[e]), int(start[e] + expected[e])))


# ----------------------------------------------------------------------- math and bits

MATH = """
__device__ float ABS_F32(float value) { return value < 0.0f ? -value : value; }
__device__ float SCALED(float v, float w) { return fabsf(v) * __expf(w) * rsqrtf(fmaxf(w, 1.0f)); }
__device__ int BITS(int v) { return __popc(v) * 64 + __clz(v); }
__device__ int CLAMP(int v) { return min(max(v, -3), 3); }

__co__ void math(global f32 [64] x, global f32 [64] w, global s32 [64] n, global f32 [64] a,
                 global f32 [64] s, global s32 [64] bits, global s32 [64] c) {
  parallel p by 64 {
    a.at(p) = call ABS_F32(x.at(p));
    s.at(p) = call SCALED(x.at(p), w.at(p));
    bits.at(p) = call BITS(n.at(p));
    c.at(p) = call CLAMP(n.at(p));
  }
}
"""


def _popc(v: int) -> int:
    return bin(v & 0xFFFFFFFF).count("1")


def _clz(v: int) -> int:
    return 32 - (v & 0xFFFFFFFF).bit_length()


def test_math_and_bit_intrinsics() -> None:
    x, w = torch.randn(64), torch.randn(64)
    n = torch.randint(-2**31, 2**31 - 1, (64,), dtype=torch.int64).int()
    n[:4] = torch.tensor([0, 1, -1, 5], dtype=torch.int32)
    outs = [poison(torch.empty(64)), poison(torch.empty(64)),
            poison(torch.empty(64, dtype=torch.int32)), poison(torch.empty(64, dtype=torch.int32))]
    compile_clean(MATH).math(x, w, n, *outs)
    a, s, bits, c = outs
    x64, w64 = x.double(), w.double()
    assert_close(a, x64.abs(), torch.float32)
    assert_close(s, x64.abs() * w64.exp() / w64.clamp_min(1.0).sqrt(), torch.float32)
    expected = torch.tensor([_popc(v) * 64 + _clz(v) for v in n.tolist()], dtype=torch.int32)
    assert_close(bits, expected, torch.int32)
    assert_close(c, n.clamp(-3, 3), torch.int32)


# ----------------------------------------------------------------------- ragged tiles

# A grouped GEMM over per-expert runs of rows: expert e owns rows offsets[e] ..
# offsets[e + 1] of lhs, read at run time. Each block walks its run in 16-row tiles
# (`foreach m in [cdiv(rows, 16)]`); the last tile is ragged (`tile_rows`), copied with
# `.zfill` into the leading rows of the shared tile and stored back as `tile_rows` rows.
# An expert with no rows leaves at once (`yield`).
GROUPED = """
__co__ void grouped(global f16 [R, 64] lhs, global f16 [128, 64] rhs,
                    global s32 [5] offsets, global f32 [R, 32] out) {
  parallel.async e by 4 : block
  parallel by 1 : group-4
  parallel t by 128 : thread {
    shared f16 [16, 32] sa;
    shared f16 [32, 32] sb;
    s32 first = offsets.at(e);
    s32 rows = offsets.at(e + 1) - first;
    if (rows <= 0) yield;
    foreach m in [cdiv(rows, 16)] {
      tile_rows = (16 < rows - m * 16) ? 16 : rows - m * 16;
      acc = mma.fill.f32 0.0f;
      foreach k in [2] {
        dma.copy.zfill lhs.view(16, 32).from(first + m * 16, k * 32)
            => sa.subspan(tile_rows, 32);
        dma.copy rhs.subspan(32, 32).at(e, k) => sb;
        a = mma.load sa;
        b = mma.load sb;
        mma.row.row acc, a, b;
      }
      mma.store acc, out.view(tile_rows, 32).from(first + m * 16, 0);
    }
  }
}
"""


@pytest.mark.parametrize("counts", [[7, 0, 21, 12], [16, 1, 0, 33], [0, 0, 5, 0]])
def test_ragged_grouped_gemm(counts: list[int]) -> None:
    total = sum(counts)
    offsets = torch.zeros(5, dtype=torch.int32)
    offsets[1:] = torch.cumsum(torch.tensor(counts), 0)
    lhs, rhs = torch.randn(total, 64).half(), torch.randn(128, 64).half()
    out = poison(torch.empty(total, 32))
    compile_clean(GROUPED).grouped(lhs, rhs, offsets, out)
    ref = torch.empty(total, 32, dtype=torch.float64)
    for e in range(4):
        a, b = int(offsets[e]), int(offsets[e + 1])
        ref[a:b] = lhs[a:b].double() @ rhs[32 * e:32 * (e + 1)].double().T
    assert_close(out, ref, torch.float16)


# `.zfill` into a part of run-time extent: block p copies a 16-row window of `src` into
# the leading `n` rows of its shared tile, then copies the whole tile out. Rows `n`..15 are
# zeros (not the window's next rows). In the second form the tile's elements are also
# written (it lives in scratch memory), and the copy runs on every trip of a loop.
PARTIAL_ROWS = """
__co__ void rows_in(global f32 [R, 32] src, global s32 [4] counts, global f32 [64, 32] out) {
  parallel p by 4 : block
  parallel t by 32 : thread {
    shared f32 [16, 32] s;
    s32 c = counts.at(p);
    n = (16 < c) ? 16 : c;
    dma.copy.zfill src.view(16, 32).from(p * 16, 0) => s.subspan(n, 32);
    dma.copy s => out.subspan(16, 32).at(p, 0);
  }
}

__co__ void rows_in_scratch(global f32 [R, 32] src, global s32 [4] counts,
                            global f32 [128, 32] out) {
  parallel p by 4 : block
  parallel t by 32 : thread {
    shared f32 [16, 32] s;
    s32 c = counts.at(p);
    n = (16 < c) ? 16 : c;
    foreach k in 2 {
      dma.copy.zfill src.view(16, 32).from(p * 16 + k, 0) => s.subspan(n, 32);
      s.at(0, t) = s.at(0, t) + 100.0f;
      dma.copy s => out.subspan(16, 32).at(p * 2 + k, 0);
    }
  }
}
"""


def test_zfill_into_part_of_runtime_extent_zeroes_the_rest() -> None:
    mod = compile_clean(PARTIAL_ROWS)
    counts = torch.tensor([3, 16, 0, 11], dtype=torch.int32)
    src = torch.randn(80, 32)
    out = poison(torch.empty(64, 32))
    mod.rows_in(src, counts, out)
    ref = torch.zeros(64, 32, dtype=torch.float64)
    for p, n in enumerate(counts.tolist()):
        ref[16 * p:16 * p + n] = src[16 * p:16 * p + n].double()
    assert_close(out, ref, torch.float32)
    out = poison(torch.empty(128, 32))
    mod.rows_in_scratch(src, counts, out)
    ref = torch.zeros(128, 32, dtype=torch.float64)
    for p, n in enumerate(counts.tolist()):
        for k in range(2):
            first = 16 * (2 * p + k)
            ref[first:first + n] = src[16 * p + k:16 * p + k + n].double()
            ref[first] += 100.0
    assert_close(out, ref, torch.float32)


# The grouped GEMM with its scatter fused: each ragged tile's result goes through a shared
# tile (`mma.store` inside the loop over tiles), whose first `tile_rows` rows are then read
# one element a lane at a time and added, weighted, into the output rows their routes name
# (several routes share an output row: atomics). The shared tile lives in per-program
# scratch memory, moved there on every trip of the loop where the MMA result is made.
SCATTERED = """
template <typename T>
__device__ __forceinline__ T ADD(T* p, T v) { return atomicAdd(p, v); }

__co__ void grouped_scatter(global f16 [R, 64] lhs, global f16 [128, 64] rhs,
                            global s32 [5] offsets, global s32 [R] routes,
                            global f32 [R] weights, global f32 [T, 32] out) {
  parallel e by 4 : block
  parallel by 1 : group-4
  parallel t by 128 : thread {
    shared f16 [16, 32] sa;
    shared f16 [32, 32] sb;
    shared f32 [16, 32] tile_s;
    s32 first = offsets.at(e);
    s32 rows = offsets.at(e + 1) - first;
    if (rows <= 0) yield;
    foreach m in [cdiv(rows, 16)] {
      tile_rows = (16 < rows - m * 16) ? 16 : rows - m * 16;
      acc = mma.fill.f32 0.0f;
      foreach k in [2] {
        dma.copy.zfill lhs.view(16, 32).from(first + m * 16, k * 32)
            => sa.subspan(tile_rows, 32);
        dma.copy rhs.subspan(32, 32).at(e, k) => sb;
        a = mma.load sa;
        b = mma.load sb;
        mma.row.row acc, a, b;
      }
      mma.store acc, tile_s;
      sync.shared;
      foreach row in [tile_rows] {
        r = first + m * 16 + row;
        if (t < 32) {
          f32 v = tile_s.at(row, t) * weights.at(r);
          call ADD(&out.at(routes.at(r), t), v);
        }
      }
      sync.shared;
%s    }
  }
}
"""
# ... and a second result stored into the same (now scratch) tile and scattered again
AGAIN = SCATTERED[SCATTERED.index("      mma.store"):SCATTERED.index("%s")]


@pytest.mark.parametrize("stores", [1, 2])
@pytest.mark.parametrize("counts", [[7, 0, 21, 12], [16, 1, 0, 33]])
def test_grouped_gemm_scattering_rows_of_a_shared_tile(counts: list[int], stores: int,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    total, tokens = sum(counts), 9
    offsets = torch.zeros(5, dtype=torch.int32)
    offsets[1:] = torch.cumsum(torch.tensor(counts), 0)
    lhs, rhs = torch.randn(total, 64).half(), torch.randn(128, 64).half()
    routes = torch.randint(0, tokens, (total,), dtype=torch.int32)
    weights = torch.rand(total) + 0.5
    out = torch.zeros(tokens, 32)
    src = SCATTERED % ("" if stores == 1 else "      acc += 1.0f;\n" + AGAIN)
    with caplog.at_level(logging.DEBUG, logger="croqtile"):
        mod = compile_clean(src)
    assert any("'tile_s' lives in per-program scratch memory" in r.getMessage()
               for r in caplog.records)  # (the slower form says so)
    mod.grouped_scatter(lhs, rhs, offsets, routes, weights, out)
    ref = torch.zeros(tokens, 32, dtype=torch.float64)
    for e in range(4):
        a, b = int(offsets[e]), int(offsets[e + 1])
        rows = lhs[a:b].double() @ rhs[32 * e:32 * (e + 1)].double().T
        if stores == 2:
            rows = 2 * rows + 1
        ref.index_add_(0, routes[a:b].long(), rows * weights[a:b, None].double())
    assert_close(out, ref, torch.float16)


# A run-time trip count with no bound the compiler can see, and `#` of its variable.
TRIPS = """
__co__ void fill(global s32 [4] lengths, global s32 [4, 16] out) {
  parallel p by 4 : block {
    s32 n = lengths.at(p);
    foreach i in [cdiv(n, 2)]
      out.at(p, i) = #i * 100 + i;
  }
}
"""


def test_runtime_trip_count_without_a_bound() -> None:
    lengths = torch.tensor([5, 0, 32, 9], dtype=torch.int32)
    out = torch.full((4, 16), -1, dtype=torch.int32)
    compile_clean(TRIPS).fill(lengths, out)
    expected = torch.full((4, 16), -1, dtype=torch.int32)
    for p, n in enumerate(lengths.tolist()):
        trips = -(-n // 2)
        expected[p, :trips] = trips * 100 + torch.arange(trips, dtype=torch.int32)
    assert_close(out, expected, torch.int32)
