// The pipeline of the warp-specialised Hopper kernels (gemm_sm90.cu, gemm_sp_sm90.cu),
// spliced into each kernel's source where it includes this file, after sync.cuh,
// hopper.cuh and the kernel's constants STAGES and CLUSTER.
//
// Shared memory holds a ring of STAGES stages of STAGE_BYTES each (1024-byte aligned for
// the swizzled layouts), the epilogue's staging area of STAGING_BYTES, then a "full"
// barrier per stage (the stage is loaded: one arrival with the bytes of the stage) and an
// "empty" barrier per stage (the stage is free: one arrival per consumer warpgroup of
// every block of the cluster, because the peer's multicast copies write into it too).
// Iteration `it` of a warpgroup's walk (a K tile of a tile; K tiles of the cluster's
// tiles one after the other) uses stage it % STAGES in round it / STAGES, and waits for
// the barriers' phase of that round.
template <uint32_t STAGE_BYTES, uint32_t STAGING_BYTES>
struct Pipeline {
  uint32_t base;     // stage 0
  uint32_t staging;  // the epilogue's staging area
  uint32_t full;     // STAGES barriers: the stage is loaded
  uint32_t empty;    // STAGES barriers: the stage is free

  __device__ __forceinline__ explicit Pipeline(const uint8_t* smem)
      : base((shared_address(smem) + 1023) & ~1023u),
        staging(base + STAGES * STAGE_BYTES),
        full(staging + STAGING_BYTES),
        empty(full + STAGES * 8) {}

  __device__ __forceinline__ uint32_t stage(int s) const { return base + s * STAGE_BYTES; }

  // Thread 0 initialises the barriers; every block of the cluster waits for them, so a
  // peer's copies and arrivals find them ready.
  __device__ __forceinline__ void init(uint32_t consumers_per_stage) const {
    if (threadIdx.x == 0) {
      for (int s = 0; s < STAGES; ++s) {
        barrier_init(full + 8 * s, 1);
        barrier_init(empty + 8 * s, consumers_per_stage * CLUSTER);
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync();
  }

  // The loading warpgroup: gives its registers to the consumers, then one thread walks
  // the cluster's tiles in `order` and their K tiles, waits for each stage to be free and
  // calls load(stage, bar, kt, m0, n0), which issues the copies completing on the
  // stage's "full" barrier `bar` (STAGE_BYTES in all) of K tile kt of the tile whose
  // part for this block starts at (m0, n0).
  template <class Load>
  __device__ __forceinline__ void produce(const TileOrder& order, uint32_t rank, int k_tiles,
                                          Load&& load) const {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = cluster_id(); t < order.count(); t += cluster_count()) {
        int m0, n0;
        order.origin(t, rank, m0, n0);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          const int round = it / STAGES;
          if (round > 0) barrier_wait(empty + 8 * s, (round - 1) & 1);
          barrier_expect_bytes(full + 8 * s, STAGE_BYTES);
          load(stage(s), full + 8 * s, kt, m0, n0);
        }
      }
    }
  }

  // A consumer warpgroup's K tiles of its `walked`-th tile: waits for each stage to be
  // loaded and calls multiply(stage, kt), which issues its wgmmas (after wgmma_fence);
  // commits them, and releases each stage once the next one's wgmmas are issued (one
  // group may stay in flight). Returns the stage still held: `finish` releases it.
  template <class Multiply>
  __device__ __forceinline__ int consume(int walked, int k_tiles, int tid,
                                         Multiply&& multiply) const {
    int previous = -1;
    int it = walked * k_tiles;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      barrier_wait(full + 8 * s, (it / STAGES) & 1);
      multiply(stage(s), kt);
      wgmma_commit();
      wgmma_wait<1>();
      if (previous >= 0) release(previous, tid);
      previous = s;
    }
    return previous;
  }

  // After `consume`: waits for the last wgmmas into the accumulator d and frees the stage
  // they read.
  template <int N>
  __device__ __forceinline__ void finish(float (&d)[N], int held, int tid) const {
    wgmma_wait<0>();
    pin(d);
    release(held, tid);
  }

  // Thread 0 of a consumer warpgroup frees stage s in every block of the cluster.
  __device__ __forceinline__ void release(int s, int tid) const {
    if (tid == 0) {
      for (uint32_t cta = 0; cta < CLUSTER; ++cta) barrier_arrive_in(empty + 8 * s, cta);
    }
  }
};

// The consumer warpgroups take the registers the loader gave up.
__device__ __forceinline__ void consumer_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
}

// The end of a consumer warpgroup: its last tile's bulk stores must be complete before
// the block ends.
__device__ __forceinline__ void drain_stores() {
  if (threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
