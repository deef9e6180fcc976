"""croqtile.nn's attention forward on the hand-written Hopper kernel
(``backends/cuda/attention_sm90.cu``: TMA loads by a producer warpgroup, two consumer
warpgroups in ping-pong, FlashAttention-3's schedule), where Triton's code stays behind
cuDNN.

On an H100 (bf16, 32 query heads over 8, D = 128, q/k/v transposed from [B, S, H, D]
projections), against torch's SDPA (cuDNN) in the same run, the CUDA kernel ran causal
0.82x / 1.05x / 1.02x at S = 2,048 / 4,096 / 8,192 and not causal 0.87x / 0.94x / 0.95x,
where attention.co's Triton kernel ran causal 0.94x / 0.90x / 0.94x and not causal 0.74x /
0.78x / 0.85x. So ``cuda_attention`` takes the calls the kernel won: not causal, and causal
from CUDA_CAUSAL_MIN_LENGTH queries on.

The kernel is checked on a GPU element by element against float64 (its own tests); its
call through croqtile.nn (this module: an operator with a fake implementation, so that
torch.compile keeps it as one opaque call) has not run on a GPU yet, so it is taken only
when ``CROQTILE_ATTENTION_CUDA`` asks for it (``settings.attention_cuda``). Calls that
want a gradient keep the Triton training form (its backward reads that form's
log-sum-exp).
"""

from __future__ import annotations

import threading
from typing import Callable

import torch

from .. import settings
from ..backends import dispatch
from ..backends.protocol import Toolchain
from .kernels import NAMESPACE

CUDA_CAUSAL_MIN_LENGTH = 4096  # causal calls with fewer queries stay on Triton's kernel
HEAD_DIMS = (128,)  # the head dimensions timed (the kernel has 64 too)
OPERATOR = "attention_cuda"

_LOCK = threading.Lock()
_KERNELS: dict[int, Callable[..., None]] = {}  # by device index


def cuda_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: float) -> bool:
    """Whether croqtile.nn's unmasked attention forward of this call runs the CUDA
    kernel (see the module's docstring)."""
    if not settings.attention_cuda() or not q.is_cuda:
        return False
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return False
    return faster(causal, q.shape[2], q.shape[-1]) \
        and dispatch.flash_attention_unsupported(q, k, v, scale) is None


def faster(causal: bool, length: int, head_dim: int) -> bool:
    """Whether the CUDA kernel was timed faster than Triton's for such a call."""
    return head_dim in HEAD_DIMS and (not causal or length >= CUDA_CAUSAL_MIN_LENGTH)


def _kernel(device: torch.device) -> Callable[..., None]:
    """The kernels built and loaded for ``device`` (once)."""
    index = device.index  # (a tensor's CUDA device always has its index)
    with _LOCK, torch.cuda.device(index):  # (a first call builds them)
        found = _KERNELS.get(index)
        if found is None:
            found = _KERNELS[index] = dispatch.flash_attention(
                Toolchain(settings.cache_dir(), settings.nvcc()))
    return found


@torch.library.custom_op(f"{NAMESPACE}::{OPERATOR}", mutates_args=())
def attention_cuda(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: float) -> torch.Tensor:
    """``o [B, L, H, D]`` (torch's flash layout) of q ``[B, H, L, D]``, k and v
    ``[B, HKV, S, D]``, on the Hopper kernel."""
    b, h, length, d = q.shape
    out = torch.empty((b, length, h, d), dtype=q.dtype, device=q.device)
    _kernel(q.device)(q, k, v, out, causal=causal, scale=scale)
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

