// Dense GEMM for Blackwell (sm_100a) on the fifth-generation tensor cores (tcgen05):
// C[M, N] = A[M, K] @ B[N, K]^T, f32 accumulation in tensor memory, output f16 or bf16.
//
// This file is the body of a kernel; gemm_sm100.py writes the configuration in front of
// it (CTA_GROUP, BN, STAGES, the operand type, the instruction and shared-memory
// descriptors and the tensor-memory columns, all computed by tcgen05.py, and the address
// functions of the epilogue, which the tests mirror in Python), and nvcc compiles the
// whole for sm_100a.
//
// Shape of the work: one tile of C per CTA (CTA_GROUP 1: 128 x BN) or per CTA pair
// (CTA_GROUP 2: 256 x BN, the two CTAs of a cluster; each loads 128 rows of A and BN / 2
// rows of B, and the even CTA issues MMAs of M = 256 that read both CTAs' shared memory
// and write both CTAs' tensor memory). 192 threads:
//   * warp 0: one thread issues the bulk tensor copies of A and B into a ring of STAGES
//     shared-memory stages (128-byte swizzle, rows of 128 bytes of K);
//   * warp 1: allocates the accumulator's tensor memory; one thread (of the even CTA)
//     waits for each stage, issues its tcgen05.mma instructions and commits them to the
//     stage's "empty" barrier (the stage may be refilled once the MMAs have read it),
//     and after the last stage to the "done" barrier;
//   * warps 2-5: the epilogue; warp w reads lanes 32 * (w % 4) .. + 31 of the
//     accumulator (a warp reaches only its quarter of tensor memory) with tcgen05.ld,
//     converts them, writes 32 x 64 boxes into shared memory in the 128-byte swizzle and
//     hands each to the copy engine.
// Tails in M, N and K are zero-filled by the copy engine on loads and clipped by it on
// stores. The host guarantees 16-byte aligned rows and base pointers.

#include "arch.cuh"

namespace {

constexpr int THREADS = 192;
constexpr int ROWS = 128;                      // rows of C per CTA (the accumulator's lanes)
constexpr int ROW_BYTES = 128;                 // bytes of K per operand row and stage
constexpr int BK = ROW_BYTES / IN_BYTES;       // elements of K per stage
constexpr int B_ROWS = BN / CTA_GROUP;         // rows of B each CTA loads
constexpr uint32_t A_BYTES = ROWS * ROW_BYTES;
constexpr uint32_t B_BYTES = B_ROWS * ROW_BYTES;
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int BOX_ROWS = 32, BOX_COLS = 64;    // the epilogue's staged box (128-byte rows)
constexpr uint32_t BOX_BYTES = BOX_ROWS * BOX_COLS * 2;
constexpr uint32_t STAGING_BYTES = 4 * BOX_BYTES;  // one box per epilogue warp
constexpr uint32_t BARRIER_BYTES = (2 * STAGES + 1) * 8 + 8;  // + the tensor-memory address
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGING_BYTES + BARRIER_BYTES + 1024;
static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "stages of whole swizzle atoms");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory of one CTA");
static_assert(BN % BOX_COLS == 0, "whole boxes of the epilogue");

#include "sync.cuh"

// ---- mbarriers -----------------------------------------------------------------

// The shared::cluster address of the barrier at the same offset in CTA `cta`.
__device__ __forceinline__ uint32_t in_cta(uint32_t bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
  return remote;
}

// ---- bulk tensor copies ---------------------------------------------------------

// A tile into this CTA's shared memory, completing on `bar`: with CTA pairs, the barrier
// may be the even CTA's (a shared::cluster address), which waits for both CTAs' tiles.
__device__ __forceinline__ void copy_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int k, int row) {
  if constexpr (CTA_GROUP == 1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(k), "r"(row)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(k), "r"(row)
        : "memory");
  }
}

// ---- tcgen05 ----------------------------------------------------------------------

#define CROQ_STR2(x) #x
#define CROQ_STR(x) CROQ_STR2(x)
#define CROQ_GROUP "cta_group::" CROQ_STR(CTA_GROUP)

__device__ __forceinline__ void tmem_alloc(uint32_t slot) {
  asm volatile("tcgen05.alloc." CROQ_GROUP ".sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(slot),
               "r"(TMEM_COLS)
               : "memory");
  asm volatile("tcgen05.relinquish_alloc_permit." CROQ_GROUP ".sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void tmem_dealloc(uint32_t tmem) {
  asm volatile("tcgen05.dealloc." CROQ_GROUP ".sync.aligned.b32 %0, %1;" ::"r"(tmem),
               "r"(TMEM_COLS)
               : "memory");
}

__device__ __forceinline__ void fence_before_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void fence_after_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// d (+)= A @ B^T for one instruction's K; accumulate = 0 overwrites d.
__device__ __forceinline__ void mma(uint32_t d, uint64_t a, uint64_t b, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
      "tcgen05.mma." CROQ_GROUP ".kind::" KIND " [%0], %1, %2, %3, p;\n}\n" ::"r"(d),
      "l"(a), "l"(b), "r"(IDESC), "r"(accumulate)
      : "memory");
}

// Arrive on `bar` (in both CTAs of a pair) when the MMAs issued so far have completed.
__device__ __forceinline__ void commit(uint32_t bar) {
  if constexpr (CTA_GROUP == 1) {
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
                     bar)
                 : "memory");
  } else {
    asm volatile(
        "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64"
        " [%0], %1;" ::"r"(bar),
        "h"(static_cast<uint16_t>(3))
        : "memory");
  }
}

#define CROQ_R8(i)                                                                        \
  "=r"(r[i + 0]), "=r"(r[i + 1]), "=r"(r[i + 2]), "=r"(r[i + 3]), "=r"(r[i + 4]),         \
      "=r"(r[i + 5]), "=r"(r[i + 6]), "=r"(r[i + 7])

// Thread t of the warp gets lane (lane of `address`) + t, columns (column of `address`)
// .. + 31, one per register (the 32x32b shape).
__device__ __forceinline__ void tmem_load_32(uint32_t address, uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : CROQ_R8(0), CROQ_R8(8), CROQ_R8(16), CROQ_R8(24)
      : "r"(address)
      : "memory");
}

__device__ __forceinline__ void tmem_wait_load() {
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ uint32_t pack(uint32_t x, uint32_t y) {
  const float lo = __uint_as_float(x), hi = __uint_as_float(y);
  if constexpr (OUT_BF16) {
    __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&p);
  } else {
    __half2 p = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&p);
  }
}

// ---- the kernel -------------------------------------------------------------------

__device__ __forceinline__ void gemm(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                     const CUtensorMap* map_c, int M, int N, int K) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = (shared_address(smem) + 1023) & ~1023u;
  const uint32_t staging = base + STAGES * STAGE_BYTES;
  const uint32_t full = staging + STAGING_BYTES;  // STAGES barriers: the stage is loaded
  const uint32_t empty = full + STAGES * 8;       // STAGES barriers: the stage is free
  const uint32_t done = empty + STAGES * 8;       // the accumulator is complete
  const uint32_t slot = done + 8;                 // where tcgen05.alloc writes the address

  const uint32_t rank = CTA_GROUP == 1 ? 0 : cluster_rank();
  const int tiles_m = (M + CTA_GROUP * ROWS - 1) / (CTA_GROUP * ROWS);
  const int tile = blockIdx.x / CTA_GROUP;
  const int m0 = (tile % tiles_m) * (CTA_GROUP * ROWS) + static_cast<int>(rank) * ROWS;
  const int n0 = (tile / tiles_m) * BN;
  const int k_tiles = (K + BK - 1) / BK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(full + 8 * s, 1);
      barrier_init(empty + 8 * s, 1);
    }
    barrier_init(done, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (warp == 1) tmem_alloc(slot);
  fence_before_sync();
  if constexpr (CTA_GROUP == 1) {
    __syncthreads();
  } else {
    cluster_sync();  // the peer's copies complete on this CTA's barriers
  }
  fence_after_sync();
  const uint32_t tmem = *reinterpret_cast<volatile uint32_t*>(smem + (slot - shared_address(smem)));

  if (warp == 0 && lane == 0) {
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      if (kt >= STAGES) barrier_wait(empty + 8 * s, ((kt / STAGES) - 1) & 1);
      uint32_t bar = full + 8 * s;
      if constexpr (CTA_GROUP == 1) {
        barrier_expect_bytes(bar, STAGE_BYTES);
      } else {
        if (rank == 0) barrier_expect_bytes(bar, 2 * STAGE_BYTES);
        bar = in_cta(bar, 0);
      }
      const uint32_t stage = base + s * STAGE_BYTES;
      copy_tile(stage, map_a, bar, kt * BK, m0);
      copy_tile(stage + A_BYTES, map_b, bar, kt * BK, n0 + static_cast<int>(rank) * B_ROWS);
    }
  } else if (warp == 1 && lane == 0 && rank == 0) {
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % STAGES;
      barrier_wait(full + 8 * s, (kt / STAGES) & 1);
      fence_after_sync();
      const uint32_t a = base + s * STAGE_BYTES, b = a + A_BYTES;
#pragma unroll
      for (int k = 0; k < BK / MMA_K; ++k) {
        // one instruction's K is 32 bytes further along the swizzled 128-byte rows
        const uint32_t step = k * MMA_K * IN_BYTES;
        mma(tmem, SMEM_DESC + ((a + step) >> 4), SMEM_DESC + ((b + step) >> 4),
            (kt > 0 || k > 0) ? 1u : 0u);
      }
      commit(empty + 8 * s);
    }
    commit(done);
  } else if (warp >= 2) {
    barrier_wait(done, 0);
    fence_after_sync();
    const uint32_t q = epi_quarter(warp);
    const uint32_t box = staging + q * BOX_BYTES;
    const uint32_t t = lane;
    for (uint32_t c = 0; c < BN / BOX_COLS; ++c) {
      uint32_t r[2][32];
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h)
        tmem_load_32(tmem + (epi_load_lane(q) << 16) + epi_load_column(c, h), r[h]);
      tmem_wait_load();
      if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      __syncwarp();
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
#pragma unroll
        for (uint32_t j = 0; j < 32; j += 8) {
          const uint32_t at = box + epi_unit_offset(t, epi_unit(h, j));
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(at),
                       "r"(pack(r[h][j], r[h][j + 1])), "r"(pack(r[h][j + 2], r[h][j + 3])),
                       "r"(pack(r[h][j + 4], r[h][j + 5])), "r"(pack(r[h][j + 6], r[h][j + 7]))
                       : "memory");
        }
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (t == 0) {
        store_tile(map_c, box, n0 + epi_box_column(c), m0 + epi_box_row(q));
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
    }
    if (t == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  fence_before_sync();
  if constexpr (CTA_GROUP == 1) {
    __syncthreads();
  } else {
    cluster_sync();  // neither CTA of the pair frees its tensor memory while the pair works
  }
  fence_after_sync();
  if (warp == 1) tmem_dealloc(tmem);
}

}  // namespace

extern "C" __constant__ int croq_gemm_sm100_smem_bytes = SMEM_BYTES;
extern "C" __constant__ int croq_gemm_sm100_threads = THREADS;

extern "C" __global__ void __launch_bounds__(THREADS, 1) __cluster_dims__(CTA_GROUP, 1, 1)
    croq_gemm_sm100(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_c, int M, int N, int K) {
  CROQ_IF_SM100A(gemm(&map_a, &map_b, &map_c, M, N, K));
}
