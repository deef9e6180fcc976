"""Calls of functions compiled with ``backend="cuda"``: the hand-written Hopper GEMM
(backends/cuda) where the GPU and the arguments suit it, the function's Triton kernel
everywhere else, with a warning saying why (once per function and reason)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from . import settings
from .backends.cuda.driver import CudaError
from .backends.cuda.gemm import HopperGemm, unsupported
from .backends.cuda.match import GemmPlan

Host = Callable[..., Any]

# the kernel loaded per device index, or why it could not be
_loaded: dict[int, HopperGemm | str] = {}
_warned: set[tuple[str, str]] = set()


def _kernel(device: torch.device) -> HopperGemm | str:
    index = device.index if device.index is not None else torch.cuda.current_device()
    found = _loaded.get(index)
    if found is None:
        try:
            with torch.cuda.device(index):
                found = HopperGemm(settings.cache_dir(), nvcc=settings.nvcc())
        except CudaError as err:
            found = str(err)
        _loaded[index] = found
    return found


def gemm_host(name: str, plan: GemmPlan, triton_host: Host, args: tuple[Any, ...]) -> Host:
    """The host function for calls with the signature of ``args`` (same dtypes, shapes,
    devices and layouts): the CUDA kernel when it can compute them, else
    ``triton_host``. The pointers' alignment is checked per call (a misaligned view runs
    the Triton kernel). The kernel reads and writes contiguous matrices: strided ones
    (a transposed weight, a slice of a bigger output) are copied for it (arch 4.1)."""
    a, b, out = args[plan.lhs], args[plan.rhs], args[plan.out]
    reason = unsupported(a, b, out, aligned=False, dense=False)
    gemm = _kernel(a.device) if reason is None else None
    if isinstance(gemm, str):
        reason, gemm = f"the CUDA kernel could not be loaded: {gemm}", None
    if gemm is None:
        assert reason is not None
        if (name, reason) not in _warned:
            _warned.add((name, reason))
            warnings.warn(f"croqtile: {name}(): backend='cuda' runs the Triton kernel for "
                          f"these arguments: {reason}", RuntimeWarning, stacklevel=4)
        return triton_host
    lhs, rhs, dst = plan.lhs, plan.rhs, plan.out
    if not all(t.is_contiguous() for t in (a, b, out)):
        return _copying(gemm, plan, triton_host)

    def host(launcher: Any, device: Any, *values: Any) -> None:
        x, y, z = values[lhs], values[rhs], values[dst]
        if (x.data_ptr() | y.data_ptr() | z.data_ptr()) % 16:
            return triton_host(launcher, device, *values)
        gemm(x, y, z)
        return None

    return host


def _copying(gemm: HopperGemm, plan: GemmPlan, triton_host: Host) -> Host:
    """The CUDA kernel's host function for strided operands: contiguous copies of the
    inputs, the product into a new contiguous matrix, copied into the caller's output
    (the kernel overwrites every element of its output, so nothing is copied in). A
    misaligned contiguous operand (copies are aligned) runs ``triton_host``."""
    lhs, rhs, dst = plan.lhs, plan.rhs, plan.out

    def host(launcher: Any, device: Any, *values: Any) -> None:
        x, y, z = values[lhs].contiguous(), values[rhs].contiguous(), values[dst]
        result = z if z.is_contiguous() else torch.empty(z.shape, dtype=z.dtype,
                                                         device=z.device)
        if (x.data_ptr() | y.data_ptr() | result.data_ptr()) % 16:
            return triton_host(launcher, device, *values)
        gemm(x, y, result)
        if result is not z:
            z.copy_(result)
        return None

    return host
