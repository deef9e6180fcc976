// wgmma and its operands, shared by the warp-specialised Hopper kernels (gemm_sm90.cu
// through hopper.cuh, attention_sm90.cu): spliced into each kernel's source where it
// includes this file, after sync.cuh. Needs no constant of the kernel.
//
// Register layouts, for a warpgroup of 128 threads (warp w = tid / 32, lane = tid % 32):
//   * the f32 accumulator of wgmma m64nNk16 (N/2 floats a thread): value 4j + {0, 1}
//     sits in row 16w + lane/4, columns 8j + 2 * (lane % 4) + {0, 1}; value 4j + {2, 3}
//     in row 16w + lane/4 + 8, the same columns;
//   * the 16-bit A operand of m64nNk16 from registers (4 registers of two values a
//     thread): register 0 holds row 16w + lane/4, columns 2 * (lane % 4) + {0, 1};
//     register 1 the row 8 below; registers 2 and 3 the same rows, 8 columns right.
//     So the accumulator of one m64nNk16 product, its values 8t..8t+7 converted and
//     packed in pairs (the lower column in the low half), is the A operand of the
//     product over its columns 16t..16t+15, with no shuffle (attention's P @ V).

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

// Descriptor of an MN-major tile with the 128-byte swizzle (B of a "transposed" wgmma):
// rows of 64 16-bit values along N (128 bytes), 8-row groups along K 1024 bytes apart (the
// stride byte offset), and the next 64 values of N `atom_bytes` further (the leading byte
// offset: the distance between two 64-wide column blocks of the tile, each written by its
// own bulk copy). An m64nNk16 reads 16 rows (two groups) of N / 64 column blocks.
__device__ __forceinline__ uint64_t transposed_descriptor(uint32_t address, uint32_t atom_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((address & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>(atom_bytes >> 4) << 16;  // leading byte offset: along N
  d |= static_cast<uint64_t>(1024 >> 4) << 32;         // stride byte offset: along K
  d |= static_cast<uint64_t>(1) << 62;                 // 128-byte swizzle
  return d;
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

#define CROQ_REGS64                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define CROQ_REGS32                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

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

// Two floats rounded to the 16-bit type and packed in one register (x in the low half).
template <bool BF16>
__device__ __forceinline__ uint32_t pack_pair(float x, float y) {
  typename Out<BF16>::pair p = Out<BF16>::make(x, y);
  return *reinterpret_cast<uint32_t*>(&p);
}

// One wgmma: SHAPE and TYPE name the instruction, REGS lists the accumulator operands
// (the outputs, given last), A, B and P are the operand numbers of the two descriptors
// and of the accumulate flag.
#define CROQ_WGMMA(SHAPE, TYPE, REGS, A, B, P, ...)                                      \
  asm volatile(                                                                          \
      "{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                     \
      "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", " A ", " B   \
      ", p, 1, 1, 0, 0;\n}\n"                                                            \
      : __VA_ARGS__                                                                      \
      : "l"(a), "l"(b), "r"(accumulate))

// The same with A from registers (four 32-bit registers of two 16-bit values, after the
// accumulator operands) and B MN-major in shared memory ("transposed": the N index is the
// contiguous one, as in a V tile of keys x head dims): A names the operand list of the
// four registers, B and P the operand numbers of the descriptor and of the flag.
#define CROQ_WGMMA_RS(SHAPE, TYPE, REGS, A, B, P, ...)                                   \
  asm volatile(                                                                          \
      "{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                     \
      "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", " A ", " B   \
      ", p, 1, 1, 1;\n}\n"                                                               \
      : __VA_ARGS__                                                                      \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))

// d (+)= A(64 x 16, K-major in shared memory) @ B(128 x 16, K-major)^T, f32 accumulator of
// 64 floats a thread; accumulate = 0 overwrites d.
template <bool BF16>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t a, uint64_t b,
                                             uint32_t accumulate) {
  if constexpr (BF16) {
    CROQ_WGMMA("m64n128k16", "bf16", CROQ_REGS64, "%64", "%65", "%66", CROQ_D64(0));
  } else {
    CROQ_WGMMA("m64n128k16", "f16", CROQ_REGS64, "%64", "%65", "%66", CROQ_D64(0));
  }
}

// d (+)= A(64 x 16, registers) @ B(16 x N, MN-major in shared memory) for N = 128 or 64
// (ACC = N / 2: 64 or 32 accumulator floats a thread).
template <bool BF16, int ACC>
__device__ __forceinline__ void wgmma_rs(float (&d)[ACC], const uint32_t (&a)[4], uint64_t b,
                                         uint32_t accumulate) {
  static_assert(ACC == 64 || ACC == 32, "m64n128k16 or m64n64k16");
  if constexpr (ACC == 64 && BF16) {
    CROQ_WGMMA_RS("m64n128k16", "bf16", CROQ_REGS64, "{%64, %65, %66, %67}", "%68", "%69",
                  CROQ_D64(0));
  } else if constexpr (ACC == 64) {
    CROQ_WGMMA_RS("m64n128k16", "f16", CROQ_REGS64, "{%64, %65, %66, %67}", "%68", "%69",
                  CROQ_D64(0));
  } else if constexpr (BF16) {
    CROQ_WGMMA_RS("m64n64k16", "bf16", CROQ_REGS32, "{%32, %33, %34, %35}", "%36", "%37",
                  CROQ_D32(0));
  } else {
    CROQ_WGMMA_RS("m64n64k16", "f16", CROQ_REGS32, "{%32, %33, %34, %35}", "%36", "%37",
                  CROQ_D32(0));
  }
}
