// Dense GEMM for Hopper (sm_90a): C[M, N] = A[M, K] @ B[N, K]^T.
// f16 or bf16 inputs, f32 accumulation, output in the input type.
//
// croqtile selects this kernel for plain dense GEMM programs because it uses two
// things Triton cannot emit on Hopper: a cluster of two thread blocks that share one
// B tile through a multicast bulk tensor copy, and warpgroups with split roles and
// rebalanced registers (setmaxnreg).
//
// Shape of the work:
//   * a block computes a BM x BN tile of C, 128 x 256 or 128 x 192 (the host picks the
//     width whose last wave of tiles wastes less); the two blocks of a cluster take
//     vertically adjacent tiles (rows m and m + 128) and the same columns, so each
//     block loads its own A tile and half of the shared B tile, and the copy engine
//     writes that half into both blocks' shared memory;
//   * warpgroup 0 is the loader: one thread issues the bulk copies into a ring of
//     STAGES shared-memory stages; warpgroups 1 and 2 each multiply 64 rows of the
//     tile with wgmma m64nBNk16 and keep their 64 x BN accumulator in registers;
//   * a stage is refilled only after the consumers of BOTH blocks have released it
//     (each consumer arrives on the "empty" barrier of its own block and of its
//     peer), because the peer's multicast writes into this block's stage too;
//   * the grid is persistent: one cluster per two multiprocessors walks the tiles
//     in grouped order (GROUP_M cluster rows at a time), or in the order of a table
//     the host passes, for L2 reuse; the loader runs ahead into the next tile while
//     the consumers store the last one;
//   * the consumers write their accumulators into shared memory (stmatrix), all of
//     the tile or half its columns at a time, and one thread per warpgroup hands each
//     part to the copy engine, which stores it while the warpgroup goes on.
// Tails in M, N and K are zero-filled by the copy engine on loads and clipped by it on
// stores. The host guarantees K % 8 == 0, N % 8 == 0 and 16-byte aligned base pointers.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "arch.cuh"

namespace {

// CROQ_PINGPONG=1: the two consumer warpgroups take turns instead of sharing a tile.
// Each owns every other 64-row tile of its block, so one multiplies while the other
// stores its last tile (no pause of the tensor cores for the epilogue), at the price of
// loading A for 64 rows at a time instead of 128. Measured on the H200 it is the slower
// build (0.70-0.93 of cuBLAS against 0.95-1.01, 512 x 6144 x 4096 up to 8192^3), so it
// is not the default; the probe checks and times it.
#ifndef CROQ_PINGPONG
#define CROQ_PINGPONG 0           // (bench/cuda_gemm.py --variant "CROQ_PINGPONG=1")
#endif
constexpr bool PINGPONG = CROQ_PINGPONG;
constexpr int WG_ROWS = 64;       // rows of C per consumer warpgroup and tile
constexpr int BM = PINGPONG ? WG_ROWS : 2 * WG_ROWS;  // rows of a block's tile
constexpr int BK = 64;            // 64 elements of 2 bytes: one 128-byte swizzled row
constexpr int STAGES = 4;
constexpr int CLUSTER = 2;
#ifndef CROQ_GROUP_M
#define CROQ_GROUP_M (PINGPONG ? 16 : 8)  // (bench/cuda_gemm.py --variant "CROQ_GROUP_M=16")
#endif
constexpr int GROUP_M = CROQ_GROUP_M;  // cluster rows per group of the tile order
constexpr int CONSUMERS_PER_STAGE = PINGPONG ? 1 : 2;  // warpgroups that read one stage

constexpr uint32_t A_BYTES = BM * BK * 2;

// The sizes that follow from the tile width BN (256 or 192 columns).
template <int BN>
struct Layout {
  static_assert(BN == 256 || BN == 192, "tile widths with a wgmma instruction here");
  static constexpr uint32_t B_BYTES = BN * BK * 2;
  static constexpr uint32_t B_PART = B_BYTES / CLUSTER;  // multiple of 1024 (swizzle atoms)
  static constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
  // The epilogue stages C in shared memory STAGED_COLS columns at a time: half the
  // 256-wide tile (four 48 KB load stages and 32 KB of C fit in 227 KB; measured at 4096^3
  // on the H200: 209 us, against 213 us with three stages and the whole tile), the whole
  // 192-wide tile (four 40 KB stages and 48 KB).
  static constexpr int STAGED_COLS = BN == 256 ? 128 : BN;
  static constexpr uint32_t STAGING_BYTES = 2 * WG_ROWS * STAGED_COLS * 2;  // per consumer
  // dynamic shared memory: the stages, the C staging, the barriers, 1024-byte alignment
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGING_BYTES + 2 * STAGES * 8 + 1024;
  static constexpr int ACC = BN / 2;  // accumulator floats per consumer thread
};

#include "sync.cuh"
#include "hopper.cuh"
#include "pipeline.cuh"

#define CROQ_REGS96                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "     \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "     \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"

// d (+)= A_tile(64 x 16) @ B_tile(BN x 16)^T; accumulate = 0 overwrites d.
template <bool BF16, int N>
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[N], uint64_t a, uint64_t b,
                                             uint32_t accumulate) {
  if constexpr (N == 128 && BF16) {
    CROQ_WGMMA("m64n256k16", "bf16", CROQ_REGS128, "%128", "%129", "%130", CROQ_D64(0), CROQ_D64(64));
  } else if constexpr (N == 128) {
    CROQ_WGMMA("m64n256k16", "f16", CROQ_REGS128, "%128", "%129", "%130", CROQ_D64(0), CROQ_D64(64));
  } else if constexpr (BF16) {
    CROQ_WGMMA("m64n192k16", "bf16", CROQ_REGS96, "%96", "%97", "%98", CROQ_D64(0), CROQ_D32(64));
  } else {
    CROQ_WGMMA("m64n192k16", "f16", CROQ_REGS96, "%96", "%97", "%98", CROQ_D64(0), CROQ_D32(64));
  }
}

// ---- the kernel -----------------------------------------------------------------

template <bool BF16, int BN>
__device__ __forceinline__ void gemm(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                     const CUtensorMap* map_c, int M, int N, int K,
                                     const int* order_table) {
  using L = Layout<BN>;
  constexpr uint32_t B_PART = L::B_PART;
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipeline<L::STAGE_BYTES, L::STAGING_BYTES> pipe(smem);
  const uint32_t rank = cluster_rank();
  const TileOrder order{(M + CLUSTER * BM - 1) / (CLUSTER * BM), (N + BN - 1) / BN, BN,
                        order_table};
  const int k_tiles = (K + BK - 1) / BK;
  const int warpgroup = threadIdx.x / 128;
  pipe.init(CONSUMERS_PER_STAGE);

  if (warpgroup == 0) {
    pipe.produce(order, rank, k_tiles, [&](uint32_t stage, uint32_t bar, int kt, int m0, int n0) {
      copy_tile(stage, map_a, bar, kt * BK, m0);
      copy_tile_to_cluster(stage + A_BYTES + rank * B_PART, map_b, bar, kt * BK,
                           n0 + rank * (BN / CLUSTER), (1u << CLUSTER) - 1);
    });
  } else {
    consumer_registers();
    const int consumer = warpgroup - 1;
    const int tid = threadIdx.x % 128;
    float d[L::ACC];
    // The rows of the block's tile this warpgroup multiplies: its half, or (ping-pong)
    // all of every other tile.
    const int first_row = PINGPONG ? 0 : consumer * WG_ROWS;
    int walked = 0;  // tiles of this cluster so far; the loader spends k_tiles stages on each
    for (int t = cluster_id(); t < order.count(); t += cluster_count(), ++walked) {
      if (PINGPONG && walked % 2 != consumer) continue;
      // Ping-pong: wait until the other warpgroup has waited for the last stage of its
      // tile (the stages of this tile come after those; an mbarrier wait by parity must
      // not run more than one phase ahead of the barrier).
      if (PINGPONG && walked > 0) named_barrier(3 + consumer, 256);
      int m0, n0;
      order.origin(t, rank, m0, n0);
      m0 += first_row;
      const int held = pipe.consume(walked, k_tiles, tid, [&](uint32_t stage, int kt) {
        const uint32_t a = stage + first_row * BK * 2;
        const uint32_t b = stage + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k) {
          wgmma_64xNx16<BF16>(d, tile_descriptor(a + 32 * k), tile_descriptor(b + 32 * k),
                              (kt > 0 || k > 0) ? 1u : 0u);
        }
      });
      // Ping-pong: let the other warpgroup start on the next tile, if there is one.
      if (PINGPONG && t + static_cast<int>(cluster_count()) < order.count())
        named_barrier_arrive(3 + (1 - consumer), 256);
      pipe.finish(d, held, tid);
      store_accumulator<BF16, BN, L::STAGED_COLS>(d, pipe.staging, map_c, m0, n0, consumer, tid);
    }
    drain_stores();
  }
  // No block may leave while its peer can still arrive on its barriers.
  cluster_sync();
}

}  // namespace

// Dynamic shared memory the kernels need, per tile width.
extern "C" __constant__ int croq_gemm_sm90_smem_bytes_256 = Layout<256>::SMEM_BYTES;
extern "C" __constant__ int croq_gemm_sm90_smem_bytes_192 = Layout<192>::SMEM_BYTES;
// Rows of C per block and tile (the box height of the A tensor map).
extern "C" __constant__ int croq_gemm_sm90_block_rows = BM;

#define CROQ_KERNEL(NAME, BF16, BN)                                                      \
  extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(CLUSTER, 1, 1)   \
      NAME(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, \
           const __grid_constant__ CUtensorMap map_c, int M, int N, int K,               \
           const int* __restrict__ order_table) {                                        \
    CROQ_IF_SM90A(gemm<BF16, BN>(&map_a, &map_b, &map_c, M, N, K, order_table));         \
  }
CROQ_KERNEL(croq_gemm_sm90_f16_256, false, 256)
CROQ_KERNEL(croq_gemm_sm90_bf16_256, true, 256)
CROQ_KERNEL(croq_gemm_sm90_f16_192, false, 192)
CROQ_KERNEL(croq_gemm_sm90_bf16_192, true, 192)
