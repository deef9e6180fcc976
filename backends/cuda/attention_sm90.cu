// Flash-attention forward for Hopper (sm_90a), in the form of FlashAttention-3:
//   O[b, i, h, :] = softmax_j(scale * Q[b, h, i, :] . K[b, g, j, :]) @ V[b, g, :, :]
// with g = h / (H / HKV) (grouped-query attention), f16 or bf16 inputs and output, f32
// accumulation, head dim D = 128 or 64. Causal attention is aligned top-left as torch's
// is_causal: query i sees keys 0..i (all keys when i >= S). Optionally the log-sum-exp of
// each row's scaled scores, lse[b, h, i] = log(sum_j exp(scale * q_i . k_j)) (natural log),
// is written in f32: a backward pass recomputes the probabilities from it.
//
// Shape of the work:
//   * a block computes 128 query rows of one (batch, head): one block per row tile, the
//     grid ordered so that the longest causal rows (the last row tiles) start first, and
//     by row tile or by kv head as the host asks (work_of_block);
//   * warpgroup 0 is the loader: one thread issues bulk tensor copies (4-D tensor maps
//     over [B, heads, rows, D], so that any strides of B, heads and rows are read as
//     they are, and rows past the end come in as zeros) of the Q tile once, then of the
//     K and V tiles (128 keys each) into two rings of STAGES shared-memory stages, each
//     stage with a "full" barrier (the copy engine's bytes) and an "empty" barrier (one
//     arrival per consumer warpgroup);
//   * warpgroups 1 and 2 each own 64 rows of the tile. Per key tile, a warpgroup
//     computes S = Q K^T with wgmma m64n128k16 from shared memory, the online softmax
//     in registers (exp2 with the scale folded into one FFMA), converts P to 16 bits in
//     the register layout of wgmma's A operand (wgmma.cuh) and accumulates O += P V with
//     A from registers and V read MN-major ("transposed") from shared memory;
//   * the product with V of one tile is issued together with S of the next tile, so the
//     softmax of tile i runs while P(i-1) V(i-1) is on the tensor cores; with PINGPONG the
//     two warpgroups also take turns issuing (two named barriers), so that one's softmax
//     runs under the other's products;
//   * causal: key tiles past the diagonal are never loaded nor multiplied; only the key
//     tiles that cross a warpgroup's diagonal (or the end of the keys) are masked;
//   * the epilogue divides O by the row sums and writes it straight from registers into
//     the [B, L, H, D] output (rows past L skipped), with the row's log-sum-exp.
// The host guarantees 16-byte aligned base pointers, strides of B, heads and rows that are
// multiples of 16 bytes, a dense last dimension and H % HKV == 0.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "arch.cuh"

namespace {

// CROQ_ATTN_PINGPONG=0: the two consumer warpgroups issue their products whenever they
// are ready instead of taking turns (bench/cuda_attention.py --variant).
#ifndef CROQ_ATTN_PINGPONG
#define CROQ_ATTN_PINGPONG 1
#endif
#ifndef CROQ_ATTN_STAGES
#define CROQ_ATTN_STAGES 2  // K and V stages each; 3 fits at D = 128 (224 KB)
#endif
constexpr bool PINGPONG = CROQ_ATTN_PINGPONG;
constexpr int STAGES = CROQ_ATTN_STAGES;
constexpr int THREADS = 384;    // one loading and two computing warpgroups
constexpr int WG_ROWS = 64;     // query rows per computing warpgroup
constexpr int BLOCK_M = 2 * WG_ROWS;
constexpr int BLOCK_N = 128;    // keys per tile
constexpr int BOX_COLS = 64;    // head dims per bulk copy: one 128-byte swizzled row
constexpr int S_ACC = BLOCK_N / 2;  // floats of S a thread holds
constexpr uint32_t LOADER_REGISTERS = 24;   // setmaxnreg: 24 + 2 * 240 <= 512 a thread row
constexpr uint32_t COMPUTE_REGISTERS = 240;

// The sizes that follow from the head dim D.
template <int D>
struct Layout {
  static_assert(D == 128 || D == 64, "head dims with a kernel here");
  static constexpr int BOXES = D / BOX_COLS;             // 64-column blocks of a tile
  static constexpr uint32_t Q_BLOCK = BLOCK_M * 128;     // one 64-column block of Q
  static constexpr uint32_t KV_BLOCK = BLOCK_N * 128;    // one of a K or V tile
  static constexpr uint32_t Q_BYTES = BOXES * Q_BLOCK;
  static constexpr uint32_t KV_BYTES = BOXES * KV_BLOCK;
  static constexpr uint32_t BARRIERS = 8 * (1 + 4 * STAGES);
  // dynamic shared memory: Q, the K and V rings, the barriers, 1024-byte alignment
  static constexpr int SMEM_BYTES = Q_BYTES + 2 * STAGES * KV_BYTES + BARRIERS + 1024;
  static constexpr int O_ACC = D / 2;  // floats of O a thread holds
};

// (the cluster helpers and bulk stores of sync.cuh are not used here)
#pragma nv_diag_suppress 177  // "declared but never referenced"
#include "sync.cuh"
#include "wgmma.cuh"

__device__ __forceinline__ float minus_infinity() { return __int_as_float(0xff800000); }

// 2^x (ex2.approx: 2^-inf = +0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The addresses of the block's shared memory: tiles 1024-byte aligned (the swizzle
// atom), each barrier array STAGES barriers of 8 bytes.
template <int D>
struct Shared {
  using L = Layout<D>;
  uint32_t q;        // the Q tile: BOXES blocks of 128 rows x 128 bytes
  uint32_t k, v;     // the K and V rings: STAGES tiles of BOXES blocks of 128 rows each
  uint32_t q_full;   // Q is loaded
  uint32_t k_full, k_empty, v_full, v_empty;

  __device__ __forceinline__ explicit Shared(const uint8_t* smem)
      : q((shared_address(smem) + 1023) & ~1023u),
        k(q + L::Q_BYTES),
        v(k + STAGES * L::KV_BYTES),
        q_full(v + STAGES * L::KV_BYTES),
        k_full(q_full + 8),
        k_empty(k_full + 8 * STAGES),
        v_full(k_empty + 8 * STAGES),
        v_empty(v_full + 8 * STAGES) {}

  __device__ __forceinline__ uint32_t k_stage(int i) const { return k + (i % STAGES) * L::KV_BYTES; }
  __device__ __forceinline__ uint32_t v_stage(int i) const { return v + (i % STAGES) * L::KV_BYTES; }
};

// Key tile i of a block's walk sits in stage i % STAGES in round i / STAGES; a wait for
// it is a wait for the barrier's phase of that round.
__device__ __forceinline__ uint32_t slot(uint32_t barriers, int i) { return barriers + 8 * (i % STAGES); }
__device__ __forceinline__ uint32_t parity(int i) { return (i / STAGES) & 1; }

// What one block computes: 128 rows from m0 of query head h of batch b, against the
// first `tiles` key tiles of kv head g.
struct Work {
  int b, h, g, m0, tiles;
};

// The order of the blocks: with kv_major, the blocks of one (batch, kv head) are
// consecutive (its row tiles, each for the query heads of the group), so that the kv
// head's keys and values stay in L2 while its blocks run; otherwise the blocks of one row
// tile are consecutive, all heads at once (best while every kv head's keys and values fit
// in L2 together: the host chooses).
__device__ __forceinline__ Work work_of_block(int batch, int heads, int kv_heads, int q_len,
                                              int kv_len, bool causal, bool kv_major) {
  const int row_tiles = (q_len + BLOCK_M - 1) / BLOCK_M;
  const int group = heads / kv_heads;
  Work w;
  int tile;
  if (kv_major) {
    const int per_kv = row_tiles * group;  // blocks of one (batch, kv head)
    const int bg = blockIdx.x / per_kv, rest = blockIdx.x % per_kv;
    tile = rest / group;
    w.b = bg / kv_heads;
    w.g = bg % kv_heads;
    w.h = w.g * group + rest % group;
  } else {
    const int per_tile = batch * heads;  // blocks of one row tile, one per (batch, head)
    tile = blockIdx.x / per_tile;
    const int bh = blockIdx.x % per_tile;
    w.b = bh / heads;
    w.h = bh % heads;
    w.g = w.h / group;
  }
  if (causal) tile = row_tiles - 1 - tile;  // the longest rows first: a shorter tail wave
  w.m0 = tile * BLOCK_M;
  // causal: the last row of the tile sees keys up to itself, none past
  const int keys = causal ? min(kv_len, w.m0 + BLOCK_M) : kv_len;
  w.tiles = (keys + BLOCK_N - 1) / BLOCK_N;
  return w;
}

// ---- the loader -----------------------------------------------------------------

// One thread: Q, then K and V of each key tile as soon as the consumers free its stage.
template <int D>
__device__ __forceinline__ void load(const Shared<D>& sm, const Work& w, const CUtensorMap* map_q,
                                     const CUtensorMap* map_k, const CUtensorMap* map_v) {
  using L = Layout<D>;
  barrier_expect_bytes(sm.q_full, L::Q_BYTES);
#pragma unroll
  for (int c = 0; c < L::BOXES; ++c)
    load_box_4d(sm.q + c * L::Q_BLOCK, map_q, sm.q_full, c * BOX_COLS, w.m0, w.h, w.b);
  for (int i = 0; i < w.tiles; ++i) {
    const int n0 = i * BLOCK_N;
    if (i >= STAGES) barrier_wait(slot(sm.k_empty, i), parity(i - STAGES));
    barrier_expect_bytes(slot(sm.k_full, i), L::KV_BYTES);
#pragma unroll
    for (int c = 0; c < L::BOXES; ++c)
      load_box_4d(sm.k_stage(i) + c * L::KV_BLOCK, map_k, slot(sm.k_full, i), c * BOX_COLS, n0,
                  w.g, w.b);
    if (i >= STAGES) barrier_wait(slot(sm.v_empty, i), parity(i - STAGES));
    barrier_expect_bytes(slot(sm.v_full, i), L::KV_BYTES);
#pragma unroll
    for (int c = 0; c < L::BOXES; ++c)
      load_box_4d(sm.v_stage(i) + c * L::KV_BLOCK, map_v, slot(sm.v_full, i), c * BOX_COLS, n0,
                  w.g, w.b);
  }
}

// ---- a computing warpgroup ------------------------------------------------------

// The state of one warpgroup's 64 rows. Thread t holds rows row0 and row0 + 8 of the
// tile (the accumulator layout of wgmma.cuh) and, of each, the running maximum of the
// raw scores, its part of the running sum of exp (the four threads of a row each sum
// their own columns until the epilogue) and its columns of O.
template <bool BF16, int D>
struct Rows {
  using L = Layout<D>;
  float o[L::O_ACC];
  float s[S_ACC];          // S of the current key tile, then its exp
  uint32_t p[S_ACC / 2];   // P of the previous key tile: wgmma A fragments
  float row_max[2], row_sum[2];
  int first_row;           // the warpgroup's first query row
  int row0;                // this thread's first row
  int quad;                // lane % 4: the thread's columns within each 8-column group
  float scale_log2;        // scale * log2(e)

  // S = Q K^T for key tile i: D/16 steps of k16; each step advances 32 bytes within the
  // swizzled 128-byte rows, then to the next 64-column block.
  __device__ __forceinline__ void issue_scores(uint32_t q, uint32_t k) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t step = (kk % 4) * 32;
      wgmma_ss_n128<BF16>(s, tile_descriptor(q + (kk / 4) * L::Q_BLOCK + step),
                          tile_descriptor(k + (kk / 4) * L::KV_BLOCK + step), kk > 0 ? 1u : 0u);
    }
    wgmma_commit();
  }

  // O += P V for the key tile whose V stage is at v: 8 steps of 16 keys, each 16 rows
  // (2048 bytes) further into the MN-major V tile.
  __device__ __forceinline__ void issue_values(uint32_t v) {
#pragma unroll
    for (int t = 0; t < BLOCK_N / 16; ++t) {
      const uint32_t a[4] = {p[4 * t], p[4 * t + 1], p[4 * t + 2], p[4 * t + 3]};
      wgmma_rs<BF16>(o, a, transposed_descriptor(v + t * 2048, L::KV_BLOCK), 1u);
    }
    wgmma_commit();
  }

  // Masks the scores of key tile i that this thread's rows may not see (keys past the
  // end; causal: keys past the row), only on tiles where some may be.
  __device__ __forceinline__ void mask(int i, int kv_len, bool causal) {
    const int n0 = i * BLOCK_N;
    if (n0 + BLOCK_N <= kv_len && !(causal && n0 + BLOCK_N - 1 > first_row)) return;
#pragma unroll
    for (int j = 0; j < BLOCK_N / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + 8 * j + 2 * quad + (e & 1);
        const int row = row0 + 8 * (e >> 1);
        if (key >= kv_len || (causal && key > row)) s[4 * j + e] = minus_infinity();
      }
    }
  }

  // The online softmax of the (masked) scores: new row maxima, s replaced by
  // exp2(s * scale_log2 - max * scale_log2) (one FFMA and one MUFU.EX2 each), the row sums
  // updated; correction[r] is what O's row r must be multiplied by (exp of the old
  // maximum less the new one), applied once O is not being written by a product.
  __device__ __forceinline__ void softmax(float (&correction)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float top = row_max[r];
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) top = fmaxf(top, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
      // a row with no visible key yet keeps maximum -inf: subtract 0, not -inf (NaN)
      const float base = top == minus_infinity() ? 0.0f : top * scale_log2;
      correction[r] = exp2_approx(row_max[r] * scale_log2 - base);
      row_max[r] = top;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[4 * j + e] = exp2_approx(fmaf(s[4 * j + e], scale_log2, -base));
          sum += s[4 * j + e];
        }
      }
      row_sum[r] = row_sum[r] * correction[r] + sum;
    }
  }

  __device__ __forceinline__ void rescale(const float (&correction)[2]) {
#pragma unroll
    for (int i = 0; i < L::O_ACC; ++i) o[i] *= correction[(i / 2) % 2];
  }

  // P of this tile as A fragments: values 8t..8t+7 of s are those of key step t.
  __device__ __forceinline__ void convert() {
#pragma unroll
    for (int i = 0; i < S_ACC / 2; ++i) p[i] = pack_pair<BF16>(s[2 * i], s[2 * i + 1]);
  }

  // O / row sum into out[b, row, h, :] (rows past the end skipped), with the row's
  // log-sum-exp (natural log) into lse[b, h, row] when lse is given.
  __device__ __forceinline__ void store(const Work& w, void* out, float* lse, int heads,
                                        int q_len, float scale) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int row = row0 + 8 * r;
      if (row >= q_len) continue;
      uint32_t* line = static_cast<uint32_t*>(out) +
                       ((static_cast<size_t>(w.b) * q_len + row) * heads + w.h) * (D / 2);
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        line[4 * j + quad] = pack_pair<BF16>(o[4 * j + 2 * r] * inverse, o[4 * j + 2 * r + 1] * inverse);
      if (lse != nullptr && quad == 0)
        lse[(static_cast<size_t>(w.b) * heads + w.h) * q_len + row] =
            sum > 0.0f ? row_max[r] * scale + logf(sum) : minus_infinity();
    }
  }
};

// Ping-pong: warpgroup c issues its products only after bar.sync on named barrier 1 + c,
// which completes with the other warpgroup's bar.arrive once that one has issued its
// own. Both walk the same key tiles in the same number of rounds R; consumer 1 arrives
// once before its first round (consumer 0 goes first) and after each round but its last,
// consumer 0 after each round, so each barrier sees R arrivals and R syncs.
struct Turns {
  int consumer;
  __device__ __forceinline__ void start() const {
    if (PINGPONG && consumer == 1) named_barrier_arrive(1, 256);
  }
  __device__ __forceinline__ void mine() const {
    if (PINGPONG) named_barrier(1 + consumer, 256);
  }
  __device__ __forceinline__ void yours(bool last_round) const {
    if (PINGPONG && !(last_round && consumer == 1)) named_barrier_arrive(2 - consumer, 256);
  }
};

template <bool BF16, int D>
__device__ __forceinline__ void compute(const Shared<D>& sm, const Work& w, int consumer,
                                        void* out, float* lse, int heads, int q_len,
                                        int kv_len, float scale, bool causal) {
  const int tid = threadIdx.x % 128;
  Rows<BF16, D> x;
#pragma unroll
  for (int i = 0; i < Layout<D>::O_ACC; ++i) x.o[i] = 0.0f;
  x.row_max[0] = x.row_max[1] = minus_infinity();
  x.row_sum[0] = x.row_sum[1] = 0.0f;
  x.first_row = w.m0 + consumer * WG_ROWS;
  x.row0 = x.first_row + (tid / 32) * 16 + (tid % 32) / 4;
  x.quad = tid % 4;
  x.scale_log2 = scale * 1.4426950408889634f;
  const uint32_t q = sm.q + consumer * WG_ROWS * 128;  // the warpgroup's rows of each block
  const Turns turns{consumer};
  float correction[2];
  turns.start();
  barrier_wait(sm.q_full, 0);

  // Round 0: S of tile 0.
  barrier_wait(slot(sm.k_full, 0), 0);
  turns.mine();
  wgmma_fence();
  x.issue_scores(q, sm.k_stage(0));
  turns.yours(false);
  wgmma_wait<0>();
  pin(x.s);
  if (tid == 0) barrier_arrive(slot(sm.k_empty, 0));
  x.mask(0, kv_len, causal);
  x.softmax(correction);
  x.convert();  // (O is zero: no correction)

  // Round i: S of tile i with P V of tile i - 1.
  for (int i = 1; i < w.tiles; ++i) {
    barrier_wait(slot(sm.k_full, i), parity(i));
    barrier_wait(slot(sm.v_full, i - 1), parity(i - 1));
    turns.mine();
    wgmma_fence();
    x.issue_scores(q, sm.k_stage(i));
    x.issue_values(sm.v_stage(i - 1));
    turns.yours(false);
    wgmma_wait<1>();  // S is done (groups complete in order); P V may still run
    pin(x.s);
    if (tid == 0) barrier_arrive(slot(sm.k_empty, i));
    x.mask(i, kv_len, causal);
    x.softmax(correction);
    wgmma_wait<0>();  // P V is done: O may be rescaled and P rewritten
    pin(x.o);
    if (tid == 0) barrier_arrive(slot(sm.v_empty, i - 1));
    x.rescale(correction);
    x.convert();
  }

  // Round w.tiles: P V of the last tile.
  const int last = w.tiles - 1;
  barrier_wait(slot(sm.v_full, last), parity(last));
  turns.mine();
  wgmma_fence();
  x.issue_values(sm.v_stage(last));
  turns.yours(true);
  wgmma_wait<0>();
  pin(x.o);
  if (tid == 0) barrier_arrive(slot(sm.v_empty, last));
  x.store(w, out, lse, heads, q_len, scale);
}

// ---- the kernel -----------------------------------------------------------------

template <bool BF16, int D>
__device__ __forceinline__ void attention(const CUtensorMap* map_q, const CUtensorMap* map_k,
                                          const CUtensorMap* map_v, void* out, float* lse,
                                          int batch, int heads, int kv_heads, int q_len,
                                          int kv_len, float scale, bool causal,
                                          bool kv_major) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Shared<D> sm(smem);
  const Work w = work_of_block(batch, heads, kv_heads, q_len, kv_len, causal, kv_major);
  if (threadIdx.x == 0) {
    barrier_init(sm.q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(slot(sm.k_full, s), 1);
      barrier_init(slot(sm.v_full, s), 1);
      barrier_init(slot(sm.k_empty, s), 2);  // one arrival per computing warpgroup
      barrier_init(slot(sm.v_empty, s), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(LOADER_REGISTERS));
    if (threadIdx.x == 0) load<D>(sm, w, map_q, map_k, map_v);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(COMPUTE_REGISTERS));
    compute<BF16, D>(sm, w, warpgroup - 1, out, lse, heads, q_len, kv_len, scale, causal);
  }
}

}  // namespace

// Dynamic shared memory the kernels need, per head dim.
extern "C" __constant__ int croq_attention_sm90_smem_bytes_128 = Layout<128>::SMEM_BYTES;
extern "C" __constant__ int croq_attention_sm90_smem_bytes_64 = Layout<64>::SMEM_BYTES;

#define CROQ_ATTN_KERNEL(NAME, BF16, D)                                                  \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                               \
      NAME(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k, \
           const __grid_constant__ CUtensorMap map_v, void* __restrict__ out,            \
           float* __restrict__ lse, int batch, int heads, int kv_heads, int q_len,       \
           int kv_len, float scale, int causal, int kv_major) {                          \
    CROQ_IF_SM90A(attention<BF16, D>(&map_q, &map_k, &map_v, out, lse, batch, heads,     \
                                     kv_heads, q_len, kv_len, scale, causal != 0,        \
                                     kv_major != 0));                                    \
  }
CROQ_ATTN_KERNEL(croq_attention_sm90_f16_128, false, 128)
CROQ_ATTN_KERNEL(croq_attention_sm90_bf16_128, true, 128)
CROQ_ATTN_KERNEL(croq_attention_sm90_f16_64, false, 64)
CROQ_ATTN_KERNEL(croq_attention_sm90_bf16_64, true, 64)
