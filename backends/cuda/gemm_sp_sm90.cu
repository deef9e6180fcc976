// 2:4 sparse GEMM for Hopper (sm_90a): C[M, N] = A[M, K] @ B[N, K]^T where A keeps at most
// two non-zeros in every group of four columns of a row and is given packed:
// a_packed[M, K/2] (the kept values) and its metadata, reordered on the host
// (backends/cuda/gemm_sp.py, wgmma_metadata) into the registers wgmma .sp reads.
// f16 or bf16 inputs, f32 accumulation, output in the input type.
//
// The structure is the dense Hopper kernel's (gemm_sm90.cu): a cluster of two blocks
// sharing the B tile through a multicast bulk tensor copy, a loading warpgroup and two
// multiplying warpgroups with rebalanced registers, a persistent grid in grouped tile
// order, STAGES shared-memory stages on mbarriers, the epilogue through stmatrix and bulk
// stores. What differs is one stage: BK = 64 dense columns of K are
//   * the packed A tile, BM x 32 elements (64-byte rows, 64-byte swizzle);
//   * the B tile, BN x 64 elements (128-byte rows, 128-byte swizzle), half from each block;
//   * the metadata of the tile, 1 KB: for each consumer warpgroup and thread the 32-bit
//     register it hands to wgmma, laid out so that thread t reads the word at 4t;
// and the multiply, two wgmma.mma_async.sp m64nBNk32 per stage and warpgroup. One
// metadata register serves both: lanes 0, 1 of each quad hold the first k32 step's
// metadata (sparsity selector 0), lanes 2, 3 the second's (selector 1).
// Tails in M, N and K are zero-filled by the copy engine on loads (the host pads the
// metadata with valid entries), and clipped on stores. The host guarantees K % 16 == 0,
// N % 8 == 0 and 16-byte aligned base pointers.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "arch.cuh"

namespace {

constexpr int WG_ROWS = 64;        // rows of C per consumer warpgroup and tile
constexpr int BM = 2 * WG_ROWS;    // rows of a block's tile
constexpr int BN = 256;            // columns of a block's tile
constexpr int BK = 64;             // dense K per stage: 32 packed elements of A per row
#ifndef CROQ_SP_STAGES
#define CROQ_SP_STAGES 4           // (bench/cuda_gemm_sp.py --variant "CROQ_SP_STAGES=3")
#endif
constexpr int STAGES = CROQ_SP_STAGES;
constexpr int CLUSTER = 2;
#ifndef CROQ_SP_GROUP_M
#define CROQ_SP_GROUP_M 8          // (bench/cuda_gemm_sp.py --variant "CROQ_SP_GROUP_M=16")
#endif
constexpr int GROUP_M = CROQ_SP_GROUP_M;

constexpr uint32_t A_BYTES = BM * (BK / 2) * 2;      // 8 KB
constexpr uint32_t B_BYTES = BN * BK * 2;            // 32 KB
constexpr uint32_t B_PART = B_BYTES / CLUSTER;       // 16 KB, a multiple of 1024
constexpr uint32_t META_BYTES = 2 * 128 * 4;         // 1 KB: two warpgroups x 128 words
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES + META_BYTES;  // 41 KB, 1024-aligned
constexpr int STAGED_COLS = 128;  // the epilogue stages half the tile's columns at a time
constexpr uint32_t STAGING_BYTES = 2 * WG_ROWS * STAGED_COLS * 2;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGING_BYTES + 2 * STAGES * 8 + 1024;
constexpr int ACC = BN / 2;  // accumulator floats per consumer thread
static_assert(STAGE_BYTES % 1024 == 0, "stages keep the 1024-byte alignment of swizzling");

#include "sync.cuh"
#include "hopper.cuh"
#include "pipeline.cuh"

// A non-tensor bulk copy of `bytes` contiguous bytes (the metadata of one stage).
__device__ __forceinline__ void copy_bytes(uint32_t dst, const void* src, uint32_t bytes,
                                           uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
      : "memory");
}

// Descriptor of the packed A tile: K-major, 64-byte rows with the 64-byte swizzle, 8-row
// groups 512 bytes apart.
__device__ __forceinline__ uint64_t packed_descriptor(uint32_t address) {
  return smem_descriptor(address, 512, 2);
}

__device__ __forceinline__ uint32_t load_shared_u32(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(address) : "memory");
  return v;
}

// One sparse wgmma m64n256k32: d (+)= A(64 x 32, packed 64 x 16) @ B(256 x 32)^T with
// the metadata register e and the sparsity selector SEL (which lane pair supplies it).
#define CROQ_WGMMA_SP(TYPE, SEL)                                                         \
  asm volatile(                                                                          \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %131, 0;\n"                                      \
      "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32." TYPE "." TYPE " " CROQ_REGS128   \
      ", %128, %129, %130, " SEL ", p, 1, 1, 0, 0;\n}\n"                                 \
      : CROQ_D64(0), CROQ_D64(64)                                                        \
      : "l"(a), "l"(b), "r"(e), "r"(accumulate))

template <bool BF16, int SEL>
__device__ __forceinline__ void wgmma_sp(float (&d)[ACC], uint64_t a, uint64_t b, uint32_t e,
                                         uint32_t accumulate) {
  if constexpr (BF16 && SEL == 0) {
    CROQ_WGMMA_SP("bf16", "0");
  } else if constexpr (BF16) {
    CROQ_WGMMA_SP("bf16", "1");
  } else if constexpr (SEL == 0) {
    CROQ_WGMMA_SP("f16", "0");
  } else {
    CROQ_WGMMA_SP("f16", "1");
  }
}

template <bool BF16>
__device__ __forceinline__ void gemm_sp(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                        const CUtensorMap* map_c, const uint8_t* meta, int M,
                                        int N, int K) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipeline<STAGE_BYTES, STAGING_BYTES> pipe(smem);
  const uint32_t rank = cluster_rank();
  const TileOrder order{(M + CLUSTER * BM - 1) / (CLUSTER * BM), (N + BN - 1) / BN, BN,
                        nullptr};
  const int k_tiles = (K + BK - 1) / BK;
  const int warpgroup = threadIdx.x / 128;
  pipe.init(2);

  if (warpgroup == 0) {
    pipe.produce(order, rank, k_tiles, [&](uint32_t stage, uint32_t bar, int kt, int m0, int n0) {
      // the metadata of this block's rows: META_BYTES per K tile, the K tiles of a
      // block row one after the other (the host pads rows to whole cluster tiles)
      const uint8_t* meta_rows = meta + static_cast<size_t>(m0 / BM) * k_tiles * META_BYTES;
      copy_tile(stage, map_a, bar, kt * (BK / 2), m0);
      copy_tile_to_cluster(stage + A_BYTES + rank * B_PART, map_b, bar, kt * BK,
                           n0 + rank * (BN / CLUSTER), (1u << CLUSTER) - 1);
      copy_bytes(stage + A_BYTES + B_BYTES, meta_rows + static_cast<size_t>(kt) * META_BYTES,
                 META_BYTES, bar);
    });
  } else {
    consumer_registers();
    const int consumer = warpgroup - 1;
    const int tid = threadIdx.x % 128;
    float d[ACC];
    int walked = 0;
    for (int t = cluster_id(); t < order.count(); t += cluster_count(), ++walked) {
      int m0, n0;
      order.origin(t, rank, m0, n0);
      m0 += consumer * WG_ROWS;
      const int held = pipe.consume(walked, k_tiles, tid, [&](uint32_t stage, int kt) {
        const uint32_t a = stage + consumer * (WG_ROWS * BK);  // 64 rows of 64 bytes
        const uint32_t b = stage + A_BYTES;
        const uint32_t e = load_shared_u32(stage + A_BYTES + B_BYTES + consumer * 512 + 4 * tid);
        wgmma_fence();
        // k32 step 0: packed columns 0..15 (bytes 0..31 of A's rows), dense 0..31 of B
        wgmma_sp<BF16, 0>(d, packed_descriptor(a), tile_descriptor(b), e, kt > 0 ? 1u : 0u);
        // k32 step 1: packed columns 16..31, dense 32..63
        wgmma_sp<BF16, 1>(d, packed_descriptor(a + 32), tile_descriptor(b + 64), e, 1u);
      });
      pipe.finish(d, held, tid);
      store_accumulator<BF16, BN, STAGED_COLS>(d, pipe.staging, map_c, m0, n0, consumer, tid);
    }
    drain_stores();
  }
  cluster_sync();
}

}  // namespace

// Dynamic shared memory the kernels need.
extern "C" __constant__ int croq_gemm_sp_sm90_smem_bytes = SMEM_BYTES;

#define CROQ_SP_KERNEL(NAME, BF16)                                                       \
  extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(CLUSTER, 1, 1)   \
      NAME(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, \
           const __grid_constant__ CUtensorMap map_c, const uint8_t* __restrict__ meta, int M, \
           int N, int K) {                                                               \
    CROQ_IF_SM90A(gemm_sp<BF16>(&map_a, &map_b, &map_c, meta, M, N, K));                 \
  }
CROQ_SP_KERNEL(croq_gemm_sp_sm90_f16, false)
CROQ_SP_KERNEL(croq_gemm_sp_sm90_bf16, true)
