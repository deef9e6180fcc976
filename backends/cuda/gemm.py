"""The Hopper GEMM of gemm_sm90.cu as a callable on torch tensors.

`HopperGemm()(a, b, out)` computes out = a @ b.T for f16 or bf16 CUDA tensors
a [M, K], b [N, K], out [M, N], all row-major. `unsupported(a, b, out)` says why a
call cannot use the kernel (None when it can); callers fall back to Triton then.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..bounded import LRU
from .driver import (TENSOR_MAP_BF16, TENSOR_MAP_F16, KernelArg, Module, TensorMap, build,
                     kernel_text)

SOURCE = "gemm_sm90.cu"
ARCH = "90a"
THREADS = 384          # one loading and two multiplying warpgroups
CLUSTER = 2            # blocks per cluster, compiled into the kernel
WARPGROUP_ROWS = 64    # rows of C each multiplying warpgroup stores (the C box height)
TILE_M, TILE_K = 128, 64  # rows of C per block (the ping-pong build: 64), K per stage
WIDTHS = (256, 192)    # the tile widths (columns of C per block) there are kernels for
# a narrower tile is taken only when it saves this share of the time the wave model
# predicts (its smaller tiles load more per multiply-add)
_NARROW_GAIN = 0.10
_TYPES = {torch.float16: ("f16", TENSOR_MAP_F16), torch.bfloat16: ("bf16", TENSOR_MAP_BF16)}


def hopper_source() -> str:
    """The CUDA source of the Hopper kernel."""
    return kernel_text(SOURCE)


def unsupported(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, device: bool = True,
                aligned: bool = True, dense: bool = True) -> str | None:
    """Why the kernel cannot compute out = a @ b.T, or None when it can. ``device=False``
    leaves out the device checks, ``aligned=False`` the alignment of the pointers (a
    caller that checks it per call), ``dense=False`` the contiguity of the matrices (a
    caller that copies strided ones)."""
    tensors = (a, b, out)
    if device and any(not t.is_cuda for t in tensors):
        return "the tensors are not on a CUDA device"
    if device and torch.cuda.get_device_capability(a.device) != (9, 0):
        return "the GPU is not a Hopper (compute capability 9.0)"
    if a.dtype not in _TYPES or any(t.dtype != a.dtype for t in tensors):
        return "the element type is not f16 or bf16 throughout"
    if any(t.dim() != 2 for t in tensors):
        return "a tensor is not a matrix"
    if dense and any(not t.is_contiguous() for t in tensors):
        return "a tensor is not a contiguous matrix"
    (m, k), (n, k_b) = a.shape, b.shape
    if k_b != k or tuple(out.shape) != (m, n) or min(m, n, k) == 0:
        return "the shapes do not form a GEMM"
    if k % 8 or n % 8:
        return "K and N must be multiples of 8"
    if aligned and any(t.data_ptr() % 16 for t in tensors):
        return "a tensor does not start on a 16-byte boundary"
    return None


def cluster_tiles(m: int, n: int, width: int, block_rows: int = TILE_M) -> int:
    """Tiles of two blocks (2 x ``block_rows`` rows x ``width`` columns) covering an
    m x n output."""
    return -(-m // (CLUSTER * block_rows)) * -(-n // width)


def pick_width(m: int, n: int, clusters: int, block_rows: int = TILE_M) -> int:
    """The tile width for an m x n output on ``clusters`` concurrent clusters: the time
    of a persistent launch goes as (waves of tiles) x (tile width), so 3072^2 (144 tiles
    of 256 columns: 3 waves of 66, the last 18 % full) takes 192-column tiles (192 tiles:
    3 waves, the last 91 % full)."""
    def cost(width: int) -> int:
        return -(-cluster_tiles(m, n, width, block_rows) // clusters) * width
    wide, narrow = cost(WIDTHS[0]), cost(WIDTHS[1])
    return WIDTHS[1] if narrow <= (1 - _NARROW_GAIN) * wide else WIDTHS[0]


def hilbert_order(rows: int, cols: int) -> np.ndarray:
    """The tiles of a rows x cols grid in the order of a Hilbert curve over the smallest
    power-of-two square that holds the grid (points outside it skipped), each packed as
    row << 16 | col. The clusters take consecutive tiles of the curve at once, which keep
    to a compact patch of rows and columns (L2 reuse of both operands)."""
    if not 0 < cols < 1 << 16 or rows <= 0:
        raise ValueError(f"a {rows} x {cols} grid of tiles")
    side = 1 << max(rows - 1, cols - 1, 1).bit_length()
    t = np.arange(side * side, dtype=np.int64)  # distance along the curve
    x, y = np.zeros_like(t), np.zeros_like(t)
    s = 1
    while s < side:  # from the distance to the point, one level of quadrants a step
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        flip = (ry == 0) & (rx == 1)
        x, y = np.where(flip, s - 1 - x, x), np.where(flip, s - 1 - y, y)
        x, y = np.where(ry == 0, y, x), np.where(ry == 0, x, y)
        x, y = x + s * rx, y + s * ry
        t //= 4
        s *= 2
    inside = (x < rows) & (y < cols)
    return ((x[inside] << 16) | y[inside]).astype(np.int32)


class HopperGemm:
    """The kernels loaded on the current device, with the persistent grid size."""

    def __init__(self, cache_dir: Path, defines: Sequence[str] = (), nvcc: str | None = None):
        torch.empty(1, device="cuda")  # makes the device's primary context current
        self.device = torch.cuda.current_device()  # (the functions belong to its context)
        module = Module(build(SOURCE, ARCH, cache_dir, defines, nvcc))
        self.kernels = {
            (dtype, width): module.kernel(f"croq_gemm_sm90_{name}_{width}", THREADS,
                                          module.int_global(f"croq_gemm_sm90_smem_bytes_{width}"))
            for dtype, (name, _) in _TYPES.items() for width in WIDTHS}
        self.block_rows = module.int_global("croq_gemm_sm90_block_rows")
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        blocks = sms - sms % CLUSTER
        self.clusters = min(self.kernels[torch.float16, w].max_active_clusters(blocks)
                            for w in WIDTHS)
        # by (address, shape, dtype, box rows): none holds its tensor
        self._maps: LRU[tuple, TensorMap] = LRU(64)
        # "grouped" (computed in the kernel) or "hilbert" (a table per grid of tiles)
        self.order = "grouped"
        self._tables: LRU[tuple[int, int], torch.Tensor] = LRU(64)

    def _map(self, t: torch.Tensor, box_rows: int) -> TensorMap:
        key = (t.data_ptr(), tuple(t.shape), t.dtype, box_rows)
        found = self._maps.get(key)
        if found is None:
            rows, cols = t.shape
            found = TensorMap(t.data_ptr(), _TYPES[t.dtype][1], rows, cols,
                              cols * t.element_size(), box_rows, TILE_K)
            self._maps[key] = found
        return found

    def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                 width: int | None = None) -> None:
        """out = a @ b.T with tiles ``width`` columns wide (default: `pick_width`)."""
        if torch.cuda.current_device() != self.device:
            with torch.cuda.device(self.device):
                return self(a, b, out, width)
        (m, k), n = a.shape, b.shape[0]
        width = width or pick_width(m, n, self.clusters, self.block_rows)
        map_a = self._map(a, self.block_rows)
        map_b = self._map(b, width // CLUSTER)
        map_c = self._map(out, WARPGROUP_ROWS)
        params: list[KernelArg] = [map_a.address, map_b.address, map_c.address,
                                   ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k),
                                   ctypes.c_uint64(self._table(m, n, width))]
        stream = torch.cuda.current_stream(a.device).cuda_stream
        blocks = CLUSTER * min(self.clusters, cluster_tiles(m, n, width, self.block_rows))
        self.kernels[a.dtype, width].launch(blocks, stream, params)

    def _table(self, m: int, n: int, width: int) -> int:
        """The device address of the tile order for an m x n output (0: grouped order)."""
        if self.order == "grouped":
            return 0
        grid = (-(-m // (CLUSTER * self.block_rows)), -(-n // width))
        table = self._tables.get(grid)
        if table is None:
            table = torch.from_numpy(hilbert_order(*grid)).to(f"cuda:{self.device}")
            self._tables[grid] = table
        return table.data_ptr()
