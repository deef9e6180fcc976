// Guards of architecture-specific code, spliced into each kernel's source where it
// includes this file (before the kernel's own declarations).
//
// wgmma and setmaxnreg (sm_90a) and tcgen05 (sm_100a) exist only in the PTX of the
// architecture-specific targets. `nvcc -arch=sm_90a` (or sm_100a) also embeds PTX for
// compute_90 (compute_100), where they are not allowed and ptxas stops. As CUTLASS does,
// a kernel's body is compiled only where the target's feature macro is defined and traps
// in any other device pass (whose PTX an sm_90a or sm_100a GPU never runs: it runs the
// cubin). The host pass (no __CUDA_ARCH__) keeps the body: there it only declares the
// kernel. The helpers such a pass leaves unused are not worth a warning each.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CROQ_IF_SM90A(...) __VA_ARGS__
#else
#define CROQ_IF_SM90A(...) __trap()
#endif

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM100_ALL) ||  \
    (defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ == 1000) || \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ == 1000)
#define CROQ_IF_SM100A(...) __VA_ARGS__
#else
#define CROQ_IF_SM100A(...) __trap()
#endif

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL) && \
    !defined(__CUDA_ARCH_SPECIFIC__) && !defined(__CUDA_ARCH_FAMILY_SPECIFIC__)
#pragma nv_diag_suppress 177  // "declared but never referenced"
#endif
