"""croqtile.nn's attention forward on the hand-written Hopper kernel
(``backends/cuda/attention_sm90.cu``: TMA loads by a producer warpgroup, two consumer
warpgroups in ping-pong, FlashAttention-3's schedule), where Triton's code stays behind
cuDNN.

On an H100 (bf16, 32 query heads over 8, D = 128, q/k/v transposed from [B, S, H, D]
projections, causal), against torch's SDPA (cuDNN) in the same run, the CUDA kernel ran
1.09x / 1.05x / 1.02x at S = 2,048 / 4,096 / 8,192 where attention.co's Triton kernel ran
0.93x / 0.89x / 0.91x; batch 4 of 32 heads each with its own keys (no grouping) 0.91x /
0.94x at 2,048 / 4,096 causal and 0.94x not causal at 4,096, Triton's 0.85x / 0.86x /
0.80x (the kernel orders its blocks by kv head when the keys and values do not fit in L2
together). Not causal at 2,048 to 8,192 keys it ran 0.87x-0.95x, Triton's 0.74x-0.85x. So
``cuda_attention`` takes the calls the kernel won: not causal, and causal from
CUDA_CAUSAL_MIN_LENGTH queries on (shorter causal calls spend much of their time in the
diagonal tiles, where the kernel has not been timed against Triton's).

The kernel is checked on a GPU element by element against float64 (its own tests, and
this module's through croqtile.nn, torch.compile and CUDA graphs). It is built with nvcc
on first use (seconds; cached on disk after); with no nvcc, or a failed build (a warning
says so), croqtile.nn's Triton kernel runs instead, as it does with
``CROQTILE_ATTENTION_CUDA=0`` (``settings.attention_cuda``). Calls that want a gradient
keep the Triton training form (its backward reads that form's log-sum-exp).
"""

from __future__ import annotations

import threading
import warnings
from typing import Callable

import torch

from .. import settings
from ..backends import dispatch
from ..backends.protocol import Toolchain, Unavailable
from . import attention_ops
from .kernels import (ACC_DTYPE, ELEMENTS, NAMESPACE, constant_result, device_kind,
                      scalar_tensor)

CUDA_CAUSAL_MIN_LENGTH = 2048  # causal calls with fewer queries stay on Triton's kernel
HEAD_DIMS = (128,)  # the head dimensions timed (the kernel has 64 too)
OPERATOR = "attention_cuda"

_LOCK = threading.Lock()
_KERNELS: dict[int, Callable[..., None] | None] = {}  # by device index


def cuda_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: float) -> bool:
    """Whether croqtile.nn's unmasked attention forward of this call runs the CUDA
    kernel (see the module's docstring)."""
    if not settings.attention_cuda() or not q.is_cuda:
        return False
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return False
    return faster(causal, q.shape[2], q.shape[-1]) and _toolchain_found() \
        and dispatch.flash_attention_unsupported(
            q, k, v, scale, addresses=not torch.compiler.is_compiling()) is None


def faster(causal: bool, length: int, head_dim: int) -> bool:
    """Whether the CUDA kernel was timed faster than Triton's for such a call."""
    return head_dim in HEAD_DIMS and (not causal or length >= CUDA_CAUSAL_MIN_LENGTH)


@constant_result
def _toolchain_found() -> bool:
    """Whether there is an nvcc to build the kernel with (asked once)."""
    return settings.nvcc() is not None


def _kernel(device: torch.device) -> Callable[..., None] | None:
    """The kernels built and loaded for ``device`` (once); None when they could not be
    built (said once, in a warning: croqtile.nn's Triton kernel runs instead)."""
    index = device.index  # (a tensor's CUDA device always has its index)
    with _LOCK, torch.cuda.device(index):  # (a first call builds them)
        if index not in _KERNELS:
            try:
                _KERNELS[index] = dispatch.flash_attention(
                    Toolchain(settings.cache_dir(), settings.nvcc()))
            except Unavailable as error:
                warnings.warn(f"croqtile.nn: the CUDA attention kernel could not be built; "
                              f"the Triton kernel runs instead "
                              f"(CROQTILE_ATTENTION_CUDA=0 skips the attempt):\n{error}",
                              RuntimeWarning, stacklevel=2)
                _KERNELS[index] = None
        return _KERNELS[index]


def _triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
            scale: float) -> torch.Tensor:
    """The same attention on croqtile.nn's Triton kernel, ``[B, L, H, D]``."""
    element, acc = ELEMENTS[q.dtype]
    name = attention_ops.attention_name(element, q.shape[-1], False, device_kind(q))
    return attention_ops.run(name, q, k, v, causal, scalar_tensor(
        scale * attention_ops.LOG2E, ACC_DTYPE[acc], q.device))


@torch.library.custom_op(f"{NAMESPACE}::{OPERATOR}", mutates_args=())
def attention_cuda(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: float) -> torch.Tensor:
    """``o [B, L, H, D]`` (torch's flash layout) of q ``[B, H, L, D]``, k and v
    ``[B, HKV, S, D]``, on the Hopper kernel."""
    kernel = _kernel(q.device)
    if kernel is None or dispatch.flash_attention_unsupported(q, k, v, scale) is not None:
        return _triton(q, k, v, causal, scale)  # (no nvcc, or an unaligned address)
    b, h, length, d = q.shape
    out = torch.empty((b, length, h, d), dtype=q.dtype, device=q.device)
    kernel(q, k, v, out, causal=causal, scale=scale)
    return out


@attention_cuda.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
      scale: float) -> torch.Tensor:
    b, h, length, d = q.shape
    return q.new_empty((b, length, h, d))


def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
        scale: float) -> torch.Tensor:
    """The attention ``[B, H, L, D]`` (a view of the [B, L, H, D] result)."""
    out: torch.Tensor = attention_cuda(q, k, v, causal, scale)
    return out.transpose(1, 2)

