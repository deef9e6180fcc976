"""Hand-written CUDA kernels for what Triton cannot express, built with nvcc and launched
through the CUDA driver (see driver.py); gemm.py: the Hopper GEMM with cluster multicast;
gemm_sm100.py: the Blackwell GEMM on tcgen05 (its descriptors and tensor-memory layouts in
tcgen05.py); match.py: the proof that a function is the GEMM these kernels compute."""
