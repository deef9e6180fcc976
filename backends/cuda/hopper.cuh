// Helpers of the warp-specialised Hopper kernels (gemm_sm90.cu, gemm_sp_sm90.cu), spliced
// into each kernel's source where it includes this file, after sync.cuh and after the
// kernel's constants: CLUSTER, BM, GROUP_M (the tile order) and WG_ROWS (the epilogue).

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

__device__ __forceinline__ void named_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- wgmma ----------------------------------------------------------------------

// Descriptor of a K-major, swizzled tile in shared memory: 8-row groups `group_bytes`
// apart, `swizzle` the descriptor's layout code (1: 128-byte swizzle, 2: 64-byte).
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address, uint32_t group_bytes,
                                                    uint64_t swizzle) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((address & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>(16 >> 4) << 16;  // leading byte offset (unused: swizzled)
  d |= static_cast<uint64_t>(group_bytes >> 4) << 32;  // stride byte offset
  d |= swizzle << 62;
  return d;
}

// A tile of 128-byte rows with the 128-byte swizzle: 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t tile_descriptor(uint32_t address) {
  return smem_descriptor(address, 1024, 1);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across a wgmma wait.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define CROQ_D8(i)                                                                       \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),        \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define CROQ_D64(i)                                                                      \
  CROQ_D8(i + 0), CROQ_D8(i + 8), CROQ_D8(i + 16), CROQ_D8(i + 24), CROQ_D8(i + 32),     \
      CROQ_D8(i + 40), CROQ_D8(i + 48), CROQ_D8(i + 56)
#define CROQ_D32(i) CROQ_D8(i + 0), CROQ_D8(i + 8), CROQ_D8(i + 16), CROQ_D8(i + 24)
#define CROQ_REGS128                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "     \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "     \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "     \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "     \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
  "%124, %125, %126, %127}"

template <bool BF16>
struct Out;
template <>
struct Out<false> {
  using pair = __half2;
  static __device__ __forceinline__ pair make(float x, float y) { return __floats2half2_rn(x, y); }
};
template <>
struct Out<true> {
  using pair = __nv_bfloat162;
  static __device__ __forceinline__ pair make(float x, float y) {
    return __floats2bfloat162_rn(x, y);
  }
};

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
