// Helpers of the warp-specialised Hopper GEMMs (gemm_sm90.cu, gemm_sp_sm90.cu), spliced
// into each kernel's source where it includes this file, after sync.cuh and after the
// kernel's constants: CLUSTER, BM, GROUP_M (the tile order) and WG_ROWS (the epilogue).
// The wgmma helpers every Hopper kernel shares are in wgmma.cuh.

#include "wgmma.cuh"

// ---- mbarriers -----------------------------------------------------------------

// Arrive on the barrier at the same shared-memory offset in block `cta` of the cluster.
__device__ __forceinline__ void barrier_arrive_in(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ uint32_t cluster_id() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_count() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}

// ---- bulk tensor copies ---------------------------------------------------------

__device__ __forceinline__ void copy_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int k, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(k), "r"(row)
      : "memory");
}

// The same copy, written into every block of the cluster named in `mask`.
__device__ __forceinline__ void copy_tile_to_cluster(uint32_t dst, const CUtensorMap* map,
                                                     uint32_t bar, int k, int row,
                                                     uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(k), "r"(row), "h"(mask)
      : "memory");
}

struct TileOrder {
  int cluster_rows;  // cdiv(M, CLUSTER * BM)
  int cols;          // cdiv(N, BN)
  int width;         // BN
  const int* table;  // null: grouped order; else tile t is (table[t] >> 16, table[t] & 0xffff)

  __device__ __forceinline__ int count() const { return cluster_rows * cols; }

  // The first row and column of block `rank`'s part of cluster tile t: from the host's
  // table (a Hilbert curve, bench/cuda_gemm.py --order hilbert), or in the grouped order,
  // where GROUP_M cluster rows are walked column by column.
  __device__ __forceinline__ void origin(int t, uint32_t rank, int& m0, int& n0) const {
    int row, col;
    if (table != nullptr) {
      const int packed = __ldg(table + t);
      row = packed >> 16;
      col = packed & 0xffff;
    } else {
      const int per_group = GROUP_M * cols;
      const int first = (t / per_group) * GROUP_M;
      const int rows = min(cluster_rows - first, GROUP_M);
      const int in_group = t % per_group;
      row = first + in_group % rows;
      col = in_group / rows;
    }
    m0 = (row * CLUSTER + static_cast<int>(rank)) * BM;
    n0 = col * width;
  }
};


// The epilogue of a consumer warpgroup: its 64 x BN accumulator d (the layout of wgmma
// m64nNk16, which the sparse m64nNk32 shares) converted to the output type and stored at
// (m0, n0) through the shared-memory staging area, STAGED_COLS columns at a time.
template <bool BF16, int BN, int STAGED_COLS, int N>
__device__ __forceinline__ void store_accumulator(const float (&d)[N], uint32_t staging,
                                                  const CUtensorMap* map_c, int m0, int n0,
                                                  int consumer, int tid) {
  // Accumulator layout of wgmma m64nNk16: warp w holds rows 16w + lane/4 and
  // 16w + lane/4 + 8; value 4j + {0, 1} (+ {2, 3} for the lower row) sits in
  // columns 8j + 2 * (lane % 4) + {0, 1}.
  const int warp = tid / 32, lane = tid % 32;
  // Staged: the warpgroup's 64 x 256 rows go out in two parts of 64 x 128, each
  // written into shared memory as two 64 x 64 boxes in the 128-byte swizzled layout
  // and handed by one thread to the copy engine; the second part waits only until
  // the engine has read the first out of shared memory.
  const uint32_t half = staging + consumer * (WG_ROWS * STAGED_COLS * 2);
  // stmatrix x4: lanes 8i..8i+7 give the row addresses of matrix i; matrices 0, 1 are
  // the upper and lower 8 rows of columns 8j..8j+7, matrices 2, 3 those of 8j+8..
  const int quad = lane / 8;
  const int row = warp * 16 + (quad % 2) * 8 + lane % 8;
#pragma unroll
  for (int part = 0; part < BN / STAGED_COLS; ++part) {
    if (tid == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    named_barrier(1 + consumer, 128);
#pragma unroll
    for (int u = 0; u < STAGED_COLS / 8; u += 2) {
      const int j = part * (STAGED_COLS / 8) + u;  // 8-column group of the accumulator
      const int unit = u + quad / 2;                // 16-byte unit of the staged row
      const uint32_t at = half + (unit / 8) * (WG_ROWS * 128) + row * 128 +
                          (((unit % 8) ^ (row % 8)) * 16);
      typename Out<BF16>::pair p0 = Out<BF16>::make(d[4 * j], d[4 * j + 1]);
      typename Out<BF16>::pair p1 = Out<BF16>::make(d[4 * j + 2], d[4 * j + 3]);
      typename Out<BF16>::pair p2 = Out<BF16>::make(d[4 * j + 4], d[4 * j + 5]);
      typename Out<BF16>::pair p3 = Out<BF16>::make(d[4 * j + 6], d[4 * j + 7]);
      asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(at),
                   "r"(*reinterpret_cast<uint32_t*>(&p0)), "r"(*reinterpret_cast<uint32_t*>(&p1)),
                   "r"(*reinterpret_cast<uint32_t*>(&p2)), "r"(*reinterpret_cast<uint32_t*>(&p3)));
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    named_barrier(1 + consumer, 128);
    if (tid == 0) {
      for (int box = 0; box < STAGED_COLS / 64; ++box)
        store_tile(map_c, half + box * (WG_ROWS * 128), n0 + part * STAGED_COLS + 64 * box,
                   m0);
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
}
