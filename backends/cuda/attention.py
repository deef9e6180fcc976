"""The flash-attention forward of attention_sm90.cu as a callable on torch tensors.

`HopperAttention(cache_dir)(q, k, v, out, lse=None, causal=False, scale=None)` computes

    out[b, i, h, :] = softmax_j(scale * q[b, h, i, :] . k[b, g, j, :]) @ v[b, g, :, :]

for f16 or bf16 CUDA tensors q [B, H, L, D], k and v [B, HKV, S, D] (g = h // (H // HKV):
grouped-query attention; any strides of the first three dimensions that are multiples of
16 bytes, the last dimension dense: projections of shape [B, L, H, D] passed transposed
are read in place), into out [B, L, H, D] contiguous (the layout of torch's flash
kernels; ``out.transpose(1, 2)`` is the [B, H, L, D] result). D is 128 or 64; ``scale``
defaults to 1 / sqrt(D). ``causal`` aligns the mask top-left as torch's ``is_causal``:
query i sees keys 0..i. When ``lse`` (f32 [B, H, L], contiguous) is given it receives each
row's log-sum-exp of the scaled scores, natural log: log(sum_j exp(scale * q_i . k_j)).
`unsupported(...)` says why a call cannot use the kernel (None when it can).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from ..bounded import LRU
from .driver import (TENSOR_MAP_BF16, TENSOR_MAP_F16, KernelArg, Module, TensorMap, build,
                     kernel_text)

SOURCE = "attention_sm90.cu"
ARCH = "90a"
THREADS = 384          # one loading and two computing warpgroups
BLOCK_M = 128          # query rows per block (compiled into the kernel)
BOX_ROWS, BOX_COLS = 128, 64  # rows and head dims of one bulk copy (compiled in too)
HEAD_DIMS = (128, 64)  # the head dims there are kernels for
# Above this many bytes of keys and values over all (batch, kv head) pairs, the blocks
# run kv head by kv head (the kernel's kv_major order) rather than row tile by row tile:
# an H100's L2 is 50 MB. Timed on an H100 (bf16, D = 128, causal): 8 kv heads of 2,048
# and 4,096 keys (8 and 16 MB) ran 8 % and 0 % faster by row tile, 8,192 keys (32 MB)
# 3 % faster by kv head, and 4 x 32 kv heads of 2,048 / 4,096 keys 32 % / 37 % faster by
# kv head.
ROW_TILE_ORDER_MAX_BYTES = 16 << 20
_TYPES = {torch.float16: ("f16", TENSOR_MAP_F16), torch.bfloat16: ("bf16", TENSOR_MAP_BF16)}


def attention_source() -> str:
    """The CUDA source of the attention kernel."""
    return kernel_text(SOURCE)


def _strided_rows_ok(t: torch.Tensor) -> bool:
    """The last dimension dense and the others' strides multiples of 16 bytes (a
    dimension of size 1 has no stride that matters)."""
    return t.stride(-1) == 1 and all(
        size == 1 or (stride * t.element_size()) % 16 == 0
        for size, stride in zip(t.shape[:-1], t.stride()[:-1]))


def unsupported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor | None,
                lse: torch.Tensor | None = None, *, scale: float | None = None,
                device: bool = True, addresses: bool = True) -> str | None:
    """Why the kernel cannot compute this attention, or None when it can (``out`` None:
    an output the caller will allocate, contiguous on q's device). ``device=False``
    leaves out the checks of the device (for tests on the CPU); ``addresses=False``
    leaves out the tensors' addresses (a traced call has none: the call itself must
    check them)."""
    given = (out,) if out is not None else ()
    tensors = (q, k, v) + given + ((lse,) if lse is not None else ())
    if device and any(not t.is_cuda for t in tensors):
        return "the tensors are not on a CUDA device"
    if device and _capability(q.device) != (9, 0):
        return "the GPU is not a Hopper (compute capability 9.0)"
    if any(t.device != q.device for t in tensors):
        return "the tensors are on different devices"
    if q.dtype not in _TYPES or any(t.dtype != q.dtype for t in (k, v) + given):
        return "q, k, v and out are not all f16 or all bf16"
    if any(t.dim() != 4 for t in (q, k, v) + given):
        return "q, k, v or out is not 4-dimensional"
    (b, h, l, d), (b_k, hkv, s, d_k) = q.shape, k.shape
    if (b_k, d_k) != (b, d) or tuple(v.shape) != tuple(k.shape):
        return "k and v are not [B, HKV, S, D] for q [B, H, L, D]"
    if out is not None and tuple(out.shape) != (b, l, h, d):
        return "out is not [B, L, H, D]"
    if min(b, h, l, s, hkv) == 0:
        return "a dimension is empty"
    if h % hkv:
        return "the query heads are not a multiple of the kv heads"
    if d not in HEAD_DIMS:
        return f"the head dim is {d}, not one of {HEAD_DIMS}"
    if max(l, s, b * h * -(-l // BLOCK_M)) >= 2**31:
        return "the sequences or the grid are too long for 32-bit indices"
    if not all(_strided_rows_ok(t) for t in (q, k, v)):
        return "q, k or v has a strided last dimension or strides not multiples of 16 bytes"
    if out is not None and not out.is_contiguous():
        return "out is not contiguous"
    if lse is not None and (lse.dtype != torch.float32 or tuple(lse.shape) != (b, h, l)
                            or not lse.is_contiguous()):
        return "lse is not a contiguous f32 [B, H, L] tensor"
    if addresses and any(t.data_ptr() % 16 for t in tensors):
        return "a tensor does not start on a 16-byte boundary"
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        return "the scale is not a positive finite number"
    return None


_CAPABILITIES: dict[torch.device, tuple[int, int]] = {}


def _capability(device: torch.device) -> tuple[int, int]:
    """The compute capability of ``device`` (asked once per device)."""
    found = _CAPABILITIES.get(device)
    if found is None:
        found = _CAPABILITIES[device] = torch.cuda.get_device_capability(device)
    return found


def map_layout(shape: Sequence[int], strides: Sequence[int],
               elem: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The dimensions (innermost first: D, rows, heads, B) and the byte strides of the
    outer three of the 4-D tensor map of a [B, heads, rows, D] tensor with these element
    strides. The strides stay as they are, in any order; a dimension of size 1 gets the
    packed stride (it is never stepped, but it must be a multiple of 16 bytes)."""
    steps, packed = [], shape[-1] * elem
    for size, stride in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        step = stride * elem if size > 1 else -(-packed // 16) * 16
        steps.append(step)
        packed = step * size
    return tuple(reversed(shape)), tuple(steps)


def tensor_map(t: torch.Tensor) -> TensorMap:
    """The map of q, k or v for copies of BOX_ROWS rows x BOX_COLS head dims."""
    dims, strides = map_layout(t.shape, t.stride(), t.element_size())
    return TensorMap.tiled(t.data_ptr(), _TYPES[t.dtype][1], dims, strides,
                           (BOX_COLS, BOX_ROWS, 1, 1))


class HopperAttention:
    """The kernels loaded on the current device."""

    def __init__(self, cache_dir: Path, defines: Sequence[str] = (), nvcc: str | None = None):
        torch.empty(1, device="cuda")  # makes the device's primary context current
        self.device = torch.cuda.current_device()  # (the functions belong to its context)
        module = Module(build(SOURCE, ARCH, cache_dir, defines, nvcc))
        self.kernels = {
            (dtype, d): module.kernel(f"croq_attention_sm90_{name}_{d}", THREADS,
                                      module.int_global(f"croq_attention_sm90_smem_bytes_{d}"))
            for dtype, (name, _) in _TYPES.items() for d in HEAD_DIMS}
        # by (address, shape, strides, dtype): none holds its tensor
        self._maps: LRU[tuple, TensorMap] = LRU(64)

    def _map(self, t: torch.Tensor) -> TensorMap:
        key = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)
        found = self._maps.get(key)
        if found is None:
            found = tensor_map(t)
            self._maps[key] = found
        return found

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 lse: torch.Tensor | None = None, *, causal: bool = False,
                 scale: float | None = None) -> None:
        """out (and lse) = attention of q, k, v; see the module's docstring."""
        if torch.cuda.current_device() != self.device:
            with torch.cuda.device(self.device):
                return self(q, k, v, out, lse, causal=causal, scale=scale)
        b, h, l, d = q.shape
        hkv, s = k.shape[1], k.shape[2]
        scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
        why = unsupported(q, k, v, out, lse, scale=scale)
        if why is not None:
            raise ValueError(f"the CUDA attention kernel cannot take this call: {why}")
        params: list[KernelArg] = [
            self._map(q).address, self._map(k).address, self._map(v).address,
            ctypes.c_uint64(out.data_ptr()), ctypes.c_uint64(0 if lse is None else lse.data_ptr()),
            ctypes.c_int(b), ctypes.c_int(h), ctypes.c_int(hkv), ctypes.c_int(l), ctypes.c_int(s),
            ctypes.c_float(scale), ctypes.c_int(int(causal)),
            ctypes.c_int(int(b * hkv * s * d * 2 * k.element_size() > ROW_TILE_ORDER_MAX_BYTES))]
        stream = torch.cuda.current_stream(q.device).cuda_stream
        self.kernels[q.dtype, d].launch(-(-l // BLOCK_M) * b * h, stream, params)
