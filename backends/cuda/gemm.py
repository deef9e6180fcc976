"""The Hopper GEMM of gemm_sm90.cu as a callable on torch tensors.

`HopperGemm()(a, b, out)` computes out = a @ b.T for f16 or bf16 CUDA tensors
a [M, K], b [N, K], out [M, N], all row-major. `unsupported(a, b, out)` says why a
call cannot use the kernel (None when it can); callers fall back to Triton then.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import torch

from .driver import TENSOR_MAP_BF16, TENSOR_MAP_F16, Module, TensorMap, build

SOURCE = "gemm_sm90.cu"
ARCH = "90a"
THREADS = 384          # one loading and two multiplying warpgroups
CLUSTER = 2            # blocks per cluster, compiled into the kernel
TILE_M, TILE_N, TILE_K = 128, 256, 64
_KERNELS = {torch.float16: ("croq_gemm_sm90_f16", TENSOR_MAP_F16),
            torch.bfloat16: ("croq_gemm_sm90_bf16", TENSOR_MAP_BF16)}


def unsupported(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, device: bool = True,
                aligned: bool = True) -> str | None:
    """Why the kernel cannot compute out = a @ b.T, or None when it can. ``device=False``
    leaves out the device checks, ``aligned=False`` the alignment of the pointers (a
    caller that checks it per call)."""
    tensors = (a, b, out)
    if device and any(not t.is_cuda for t in tensors):
        return "the tensors are not on a CUDA device"
    if device and torch.cuda.get_device_capability(a.device) != (9, 0):
        return "the GPU is not a Hopper (compute capability 9.0)"
    if a.dtype not in _KERNELS or any(t.dtype != a.dtype for t in tensors):
        return "the element type is not f16 or bf16 throughout"
    if any(t.dim() != 2 or not t.is_contiguous() for t in tensors):
        return "a tensor is not a contiguous matrix"
    (m, k), (n, k_b) = a.shape, b.shape
    if k_b != k or tuple(out.shape) != (m, n) or min(m, n, k) == 0:
        return "the shapes do not form a GEMM"
    if k % 8 or n % 8:
        return "K and N must be multiples of 8"
    if aligned and any(t.data_ptr() % 16 for t in tensors):
        return "a tensor does not start on a 16-byte boundary"
    return None


class HopperGemm:
    """The kernel loaded on the current device, with its persistent grid size."""

    def __init__(self, cache_dir: Path, defines: Sequence[str] = (), nvcc: str | None = None):
        torch.empty(1, device="cuda")  # makes the device's primary context current
        module = Module(build(SOURCE, ARCH, cache_dir, defines, nvcc))
        shared = module.int_global("croq_gemm_sm90_smem_bytes")
        self.kernels = {dtype: module.kernel(name, THREADS, shared)
                        for dtype, (name, _) in _KERNELS.items()}
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        blocks = sms - sms % CLUSTER
        self.clusters = self.kernels[torch.float16].max_active_clusters(blocks)
        self._maps: dict[tuple, TensorMap] = {}

    def _map(self, t: torch.Tensor, box_rows: int) -> TensorMap:
        key = (t.data_ptr(), tuple(t.shape), t.dtype, box_rows)
        found = self._maps.get(key)
        if found is None:
            if len(self._maps) > 64:
                self._maps.clear()
            rows, cols = t.shape
            found = TensorMap(t.data_ptr(), _KERNELS[t.dtype][1], rows, cols,
                              cols * t.element_size(), box_rows, TILE_K)
            self._maps[key] = found
        return found

    def grid(self, m: int, n: int) -> int:
        """Blocks launched: one cluster per cluster-tile, at most as many as fit at once."""
        tiles = -(-m // (CLUSTER * TILE_M)) * -(-n // TILE_N)
        return CLUSTER * min(self.clusters, tiles)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        (m, k), n = a.shape, b.shape[0]
        map_a = self._map(a, TILE_M)
        map_b = self._map(b, TILE_N // CLUSTER)
        map_c = self._map(out, TILE_M // 2)
        params = [map_a.address, map_b.address, map_c.address,
                  ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
        stream = torch.cuda.current_stream(a.device).cuda_stream
        self.kernels[a.dtype].launch(self.grid(m, n), stream, params)
