"""The 2:4 sparse Hopper GEMM of gemm_sp_sm90.cu as a callable on torch tensors, and the
host-side reordering of the metadata into the registers ``wgmma.mma_async.sp`` reads.

`SparseHopperGemm()(packed, meta, b, out)` computes ``out = A @ b.T`` where A [M, K] is
2:4 sparse, given as ``packed`` [M, K/2] and ``meta`` u8 [M, K/8] in the format of
``croqtile.sparse`` (spec "Sparse (.sp, 2:4)"), b [N, K], out [M, N], f16 or bf16 CUDA
tensors, row-major. `unsupported_sparse(...)` says why a call cannot use the kernel.

Where the metadata goes (PTX ISA, sparse wgmma, .f16/.bf16, m64nNk32): the metadata of
a 64 x 32 (dense) A tile is 64 rows x 32 bits, one 4-bit entry ``i0 | i1 << 2`` per group
of four columns, the lowest group in the lowest bits, which is exactly the bytes of
``meta`` read little-endian. Warp w of the warpgroup supplies rows 16w..16w+15; in it,
the thread of lane ``4g + q`` (for the lanes the sparsity selector names: q in {0, 1}
for selector 0, {2, 3} for selector 1) holds in bits 0..15 the entries of row 16w + g
and in bits 16..31 those of row 16w + g + 8, for dense columns 16 (q % 2) .. + 15.

The kernel multiplies 64 dense columns per stage with two k32 instructions, selector 0
then selector 1, and one register per thread: lane 4g + q holds columns 16q .. 16q + 15
of the stage, i.e. bytes 2q and 2q + 1 of ``meta``'s rows r and r + 8 (r = 16w + g).
`wgmma_metadata` writes those four bytes, for every 128-row block, 64-column K tile,
consumer warpgroup and thread, as one contiguous kilobyte per (block, K tile), so the
loader copies one kilobyte per stage and thread t reads the word at byte 4t of its
warpgroup's half.
"""

from __future__ import annotations

import ctypes
import weakref
from pathlib import Path
from typing import Sequence

import torch

from .driver import (SWIZZLE_64B, SWIZZLE_128B, TENSOR_MAP_BF16, TENSOR_MAP_F16, KernelArg,
                     Module, TensorMap, build, kernel_text)

SOURCE = "gemm_sp_sm90.cu"
ARCH = "90a"
THREADS = 384           # one loading and two multiplying warpgroups
CLUSTER = 2             # blocks per cluster, compiled into the kernel
TILE_M, TILE_N, TILE_K = 128, 256, 64  # rows, columns of C per block; dense K per stage
WARPGROUP_ROWS = 64     # rows of C per multiplying warpgroup (the C box height)
WARPGROUP_THREADS = 128
TILE_META_BYTES = 2 * WARPGROUP_THREADS * 4  # the metadata of one (block, K tile)
# the entry of a padding group: positions 0 and 1 (valid 2:4 metadata; its values are 0)
PAD_ENTRY = 0x4 | 0x4 << 4


def sparse_source() -> str:
    """The CUDA source of the sparse Hopper kernel."""
    return kernel_text(SOURCE)


def metadata_owner(row: int, column: int) -> tuple[int, int, int, int, int]:
    """Where the entry of dense column ``column`` (0..63 of a K tile) of row ``row``
    (0..127 of a block) sits in the kernel: (warpgroup, thread, bit of the thread's
    register, k32 step, sparsity selector). The model `wgmma_metadata` is tested against."""
    warpgroup, r = divmod(row, WARPGROUP_ROWS)
    warp, in_warp = divmod(r, 16)
    upper, g = divmod(in_warp, 8)     # rows g and g + 8 of the warp's 16
    q = column // 16                  # 16 columns per thread
    step, half = divmod(q, 2)         # the k32 step; which lane of the selected pair
    lane = 4 * g + 2 * step + half
    bit = 16 * upper + 4 * ((column % 16) // 4)
    return warpgroup, 32 * warp + lane, bit, step, step


def wgmma_metadata(meta: torch.Tensor, k: int) -> torch.Tensor:
    """``meta`` (u8 [M, ceil(K/8)], the spec's format) reordered for gemm_sp_sm90.cu: a u8
    tensor [cdiv(M, 256) * 2, cdiv(K, 64), 2, 128, 4] (block of 128 rows, K tile, consumer
    warpgroup, thread, byte of the thread's register). Rows and columns past the matrix
    (to whole cluster tiles of 256 rows and whole K tiles) hold `PAD_ENTRY`."""
    if meta.dtype != torch.uint8 or meta.dim() != 2 or meta.shape[1] != -(-k // 8):
        raise ValueError(f"wgmma_metadata: metadata {list(meta.shape)} {meta.dtype} is not "
                         f"u8 [M, ceil(K/8)] for K = {k}")
    m = meta.shape[0]
    blocks = -(-m // (CLUSTER * TILE_M)) * CLUSTER
    k_tiles = -(-k // TILE_K)
    padded = torch.full((blocks * TILE_M, k_tiles * TILE_K // 8), PAD_ENTRY, dtype=torch.uint8,
                        device=meta.device)
    padded[:m, :meta.shape[1]] = meta
    # [block, warpgroup, warp, upper, g, k tile, q, byte]: row = 128 block + 64 wg + 16 warp
    # + 8 upper + g, column byte = 8 k tile + 2 q + byte
    view = padded.reshape(blocks, 2, 4, 2, 8, k_tiles, 4, 2)
    # -> [block, k tile, warpgroup, warp, g, q, upper, byte]: thread = 32 warp + 4 g + q
    ordered = view.permute(0, 5, 1, 2, 4, 6, 3, 7)
    return ordered.reshape(blocks, k_tiles, 2, WARPGROUP_THREADS, 4).contiguous()


_TYPES = {torch.float16: ("f16", TENSOR_MAP_F16), torch.bfloat16: ("bf16", TENSOR_MAP_BF16)}


def unsupported_sparse(packed: torch.Tensor, meta: torch.Tensor, b: torch.Tensor,
                       out: torch.Tensor, *, device: bool = True,
                       aligned: bool = True) -> str | None:
    """Why the kernel cannot compute out = A @ b.T for A = (packed, meta), or None."""
    tensors = (packed, meta, b, out)
    if device and any(not t.is_cuda for t in tensors):
        return "the tensors are not on a CUDA device"
    if device and any(t.device != packed.device for t in tensors):
        return "the tensors are not on one device"
    if device and torch.cuda.get_device_capability(packed.device) != (9, 0):
        return "the GPU is not a Hopper (compute capability 9.0)"
    if packed.dtype not in _TYPES or b.dtype != packed.dtype or out.dtype != packed.dtype:
        return "the operands and the output are not all f16 or all bf16"
    if meta.dtype != torch.uint8:
        return "the metadata is not u8"
    if any(t.dim() != 2 for t in tensors):
        return "a tensor is not a matrix"
    (m, half), (n, k) = packed.shape, b.shape
    if 2 * half != k or tuple(meta.shape) != (m, -(-k // 8)) or tuple(out.shape) != (m, n):
        return ("the shapes do not form a sparse GEMM (packed [M, K/2], meta [M, K/8], "
                "b [N, K], out [M, N])")
    if min(m, n, k) == 0:
        return "the product is empty"
    if k % 16 or n % 8:
        return "K must be a multiple of 16 and N of 8"
    if aligned and any(t.data_ptr() % 16 for t in (packed, b, out)):
        return "a tensor does not start on a 16-byte boundary"
    return None


class SparseHopperGemm:
    """The kernels loaded on the current device, with the persistent grid size, and the
    reordered metadata of the last few metadata tensors (a weight's is made once)."""

    def __init__(self, cache_dir: Path, defines: Sequence[str] = (), nvcc: str | None = None):
        torch.empty(1, device="cuda")  # makes the device's primary context current
        self.device = torch.cuda.current_device()
        module = Module(build(SOURCE, ARCH, cache_dir, defines, nvcc))
        shared = module.int_global("croq_gemm_sp_sm90_smem_bytes")
        self.kernels = {dtype: module.kernel(f"croq_gemm_sp_sm90_{name}", THREADS, shared)
                        for dtype, (name, _) in _TYPES.items()}
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.clusters = self.kernels[torch.float16].max_active_clusters(sms - sms % CLUSTER)
        self._maps: dict[tuple, TensorMap] = {}
        self._meta: dict[tuple[int, int], tuple[weakref.ref, int, torch.Tensor]] = {}

    def _map(self, t: torch.Tensor, box_rows: int, box_cols: int, swizzle: int) -> TensorMap:
        key = (t.data_ptr(), tuple(t.shape), t.dtype, box_rows, box_cols)
        found = self._maps.get(key)
        if found is None:
            if len(self._maps) > 64:
                self._maps.clear()
            rows, cols = t.shape
            found = TensorMap(t.data_ptr(), _TYPES[t.dtype][1], rows, cols,
                              cols * t.element_size(), box_rows, box_cols, swizzle)
            self._maps[key] = found
        return found

    def metadata(self, meta: torch.Tensor, k: int) -> torch.Tensor:
        """`wgmma_metadata` of ``meta``, remembered while that tensor lives unchanged (a
        weight's is made once). The entry holds a weak reference to the tensor: a new
        tensor at a freed one's address (the caching allocator reuses it at once) is not
        taken for the old one."""
        key = (id(meta), k)
        found = self._meta.get(key)
        if found is not None and found[0]() is meta and found[1] == meta._version:
            return found[2]
        if len(self._meta) > 16:
            self._meta.clear()
        reordered = wgmma_metadata(meta, k)
        self._meta[key] = (weakref.ref(meta), meta._version, reordered)
        return reordered

    def __call__(self, packed: torch.Tensor, meta: torch.Tensor, b: torch.Tensor,
                 out: torch.Tensor) -> None:
        if torch.cuda.current_device() != self.device:
            with torch.cuda.device(self.device):
                return self(packed, meta, b, out)
        (m, _), (n, k) = packed.shape, b.shape
        map_a = self._map(packed, TILE_M, TILE_K // 2, SWIZZLE_64B)
        map_b = self._map(b, TILE_N // CLUSTER, TILE_K, SWIZZLE_128B)
        map_c = self._map(out, WARPGROUP_ROWS, 64, SWIZZLE_128B)
        reordered = self.metadata(meta, k)
        params: list[KernelArg] = [map_a.address, map_b.address, map_c.address,
                                   ctypes.c_uint64(reordered.data_ptr()),
                                   ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
        tiles = -(-m // (CLUSTER * TILE_M)) * -(-n // TILE_N)
        stream = torch.cuda.current_stream(packed.device).cuda_stream
        self.kernels[packed.dtype].launch(CLUSTER * min(self.clusters, tiles), stream, params)
