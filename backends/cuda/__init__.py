"""Hand-written CUDA kernels for what Triton cannot express, built with nvcc and launched
through the CUDA driver (see driver.py); gemm.py: the Hopper GEMM with cluster multicast."""
