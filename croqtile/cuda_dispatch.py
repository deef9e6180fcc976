"""Calls of functions compiled with ``backend="cuda"``: the hand-written GEMM
(backends/cuda: the Hopper kernel, the 2:4 sparse Hopper kernel, or the tcgen05 kernel
for ``target="sm_100a"``) where
the GPU and the arguments suit it, the function's Triton kernel everywhere else, with a
warning saying why (once per function and reason)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from . import settings
from .backends.cuda import gemm_sm100
from .backends.cuda.driver import CudaError
from .backends.cuda.gemm import HopperGemm, unsupported
from .backends.cuda.gemm_sm100 import BlackwellGemm, Sm100Config
from .backends.cuda.gemm_sp import SparseHopperGemm, unsupported_sparse
from .backends.cuda.match import GemmPlan, SparseGemmPlan

Host = Callable[..., Any]
Gemm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]

# the kernel loaded per device index (and tcgen05 configuration), or why it could not be
_loaded: dict[tuple[int, Sm100Config | None], Gemm | str] = {}
_warned: set[tuple[str, str]] = set()


def _kernel(device: torch.device, config: Sm100Config | None = None) -> Gemm | str:
    index = device.index if device.index is not None else torch.cuda.current_device()
    found = _loaded.get((index, config))
    if found is None:
        try:
            with torch.cuda.device(index):
                found = (HopperGemm(settings.cache_dir(), nvcc=settings.nvcc()) if config is None
                         else BlackwellGemm(config, settings.cache_dir(), nvcc=settings.nvcc()))
        except CudaError as err:
            found = str(err)
        _loaded[index, config] = found
    return found


def device_capability(t: torch.Tensor) -> tuple[int, int] | None:
    """The compute capability of the GPU holding ``t`` (None: not on a CUDA device)."""
    if not t.is_cuda:
        return None
    major, minor = torch.cuda.get_device_capability(t.device)
    return major, minor


def blackwell_unsupported(config: Sm100Config, a: torch.Tensor, b: torch.Tensor,
                          out: torch.Tensor) -> str | None:
    """Why the tcgen05 kernel cannot compute out = a @ b.T here, or None when it can."""
    capability = device_capability(a)
    if capability is None:
        return "the tensors are not on a CUDA device"
    if any(t.device != a.device for t in (b, out)):
        return "the tensors are not on one device"
    if capability != gemm_sm100.CAPABILITY:
        return (f"the GPU has compute capability {capability[0]}.{capability[1]}, and the "
                "tcgen05 kernel of target='sm_100a' runs only on sm_100 (compute capability "
                "10.0, Blackwell B200/GB200)")
    return gemm_sm100.unsupported(a, b, out, config)


def gemm_host(name: str, plan: GemmPlan, triton_host: Host, args: tuple[Any, ...],
              blackwell: Sm100Config | None = None) -> Host:
    """The host function for calls with the signature of ``args`` (same dtypes, shapes,
    devices and layouts): the CUDA kernel when it can compute them, else
    ``triton_host``. The pointers' alignment is checked per call (a misaligned view runs
    the Triton kernel). The kernel reads and writes contiguous matrices: strided ones
    (a transposed weight, a slice of a bigger output) are copied for it (arch 4.1)."""
    a, b, out = args[plan.lhs], args[plan.rhs], args[plan.out]
    if blackwell is not None:
        reason = blackwell_unsupported(blackwell, a, b, out)
    else:
        reason = unsupported(a, b, out, aligned=False, dense=False)
    gemm = None if reason is not None else (
        _kernel(a.device) if blackwell is None else _kernel(a.device, blackwell))
    if isinstance(gemm, str):
        reason, gemm = f"the CUDA kernel could not be loaded: {gemm}", None
    if gemm is None:
        assert reason is not None
        return _on_triton(name, reason, triton_host)
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


def _on_triton(name: str, reason: str, triton_host: Host) -> Host:
    """``triton_host``, with a warning saying why (once per function and reason)."""
    if (name, reason) not in _warned:
        _warned.add((name, reason))
        warnings.warn(f"croqtile: {name}(): backend='cuda' runs the Triton kernel for "
                      f"these arguments: {reason}", RuntimeWarning, stacklevel=5)
    return triton_host


def _copying(gemm: Gemm, plan: GemmPlan, triton_host: Host) -> Host:
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


# ---- the 2:4 sparse GEMM ---------------------------------------------------------------

_sparse_loaded: dict[int, SparseHopperGemm | str] = {}


def _sparse_kernel(device: torch.device) -> SparseHopperGemm | str:
    index = device.index if device.index is not None else torch.cuda.current_device()
    found = _sparse_loaded.get(index)
    if found is None:
        try:
            with torch.cuda.device(index):
                found = SparseHopperGemm(settings.cache_dir(), nvcc=settings.nvcc())
        except CudaError as err:
            found = str(err)
        _sparse_loaded[index] = found
    return found


def sparse_gemm_host(name: str, plan: SparseGemmPlan, triton_host: Host,
                     args: tuple[Any, ...]) -> Host:
    """The host function for calls with the signature of ``args``: the sparse Hopper
    kernel when it can compute them (contiguous copies of strided operands), else
    ``triton_host`` with a warning saying why (once per function and reason)."""
    tensors = [args[i] for i in (plan.packed, plan.meta, plan.rhs, plan.out)]
    reason = unsupported_sparse(*tensors, aligned=False)
    gemm = _sparse_kernel(tensors[0].device) if reason is None else None
    if isinstance(gemm, str):
        reason, gemm = f"the CUDA kernel could not be loaded: {gemm}", None
    if gemm is None:
        assert reason is not None
        return _on_triton(name, reason, triton_host)
    kernel = gemm
    places = (plan.packed, plan.meta, plan.rhs, plan.out)

    def host(launcher: Any, device: Any, *values: Any) -> None:
        packed, meta, b, out = (values[i] for i in places)
        packed, meta, b = packed.contiguous(), meta.contiguous(), b.contiguous()
        result = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype,
                                                             device=out.device)
        if (packed.data_ptr() | b.data_ptr() | result.data_ptr()) % 16:
            return triton_host(launcher, device, *values)
        kernel(packed, meta, b, result)
        if result is not out:
            out.copy_(result)
        return None

    return host
