"""The CUDA backend (``backend="cuda"``): the backend protocol (``backends/protocol.py``)
for the hand-written GEMM kernels -- the Hopper kernel (gemm.py), the 2:4 sparse Hopper
kernel (gemm_sp.py) and, for ``target="sm_100a"``, the tcgen05 kernel (gemm_sm100.py).

``recognise`` proves the lowered function is a GEMM one of them computes (match.py) and
picks the kernel from the target; ``unsupported`` says why a call's arguments cannot run
it (another GPU, odd sizes); ``build`` loads the kernel on a device (once per device and
kernel); its launcher copies strided operands into contiguous ones for it and hands a
misaligned view back to the Triton kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import torch

from ..ir import nodes as ir
from ..options import Options
from ..protocol import Launch, Plan, Toolchain, Unavailable, Unsuitable
from . import gemm_sm100
from .driver import CudaError
from .gemm import HopperGemm, hopper_source, unsupported
from .gemm_sm100 import BlackwellGemm, Sm100Config
from .gemm_sp import SparseHopperGemm, sparse_source, unsupported_sparse
from .match import GemmPlan, NotAGemm, NotSparse, SparseGemmPlan, match_gemm, match_sparse_gemm

__all__ = ["CUDA", "CudaBackend", "CudaPlan", "blackwell_unsupported", "device_capability"]

Gemm = Callable[..., None]  # a loaded kernel: (a, b, out) or (packed, meta, b, out)


@dataclass(frozen=True)
class CudaPlan:
    """The GEMM a function computes (where its operands are among the parameters, dense
    or 2:4 sparse) and, for ``target="sm_100a"``, the tcgen05 kernel's configuration
    (None: the Hopper kernel)."""

    gemm: GemmPlan | SparseGemmPlan
    blackwell: Sm100Config | None = None

    backend: ClassVar[str] = "cuda"
    traced_reason: ClassVar[str | None] = (
        "backend='cuda' runs a hand-written CUDA kernel where the GPU and the arguments suit "
        "it, and wrap_triton traces Triton kernels only")

    def source(self) -> str:
        """The CUDA source of the kernel (one translation unit)."""
        if self.blackwell is not None:
            return gemm_sm100.source(self.blackwell)
        if isinstance(self.gemm, SparseGemmPlan):
            return sparse_source()
        return hopper_source()


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


# the kernels loaded, by device index and kind (None: the dense Hopper kernel, "sparse",
# or a tcgen05 configuration), or why one could not be
_loaded: dict[tuple[int, Any], Gemm | str] = {}


def load(device: torch.device, kind: Sm100Config | str | None,
         toolchain: Toolchain) -> Gemm:
    """The kernel of ``kind`` loaded on ``device`` (once; a failure is remembered too);
    raises ``Unavailable`` saying why it could not be."""
    given: int | None = device.index  # (None: the current device)
    index = given if given is not None else torch.cuda.current_device()
    found = _loaded.get((index, kind))
    if found is None:
        try:
            with torch.cuda.device(index):
                if kind is None:
                    found = HopperGemm(toolchain.cache_dir, nvcc=toolchain.nvcc)
                elif kind == "sparse":
                    found = SparseHopperGemm(toolchain.cache_dir, nvcc=toolchain.nvcc)
                else:
                    assert isinstance(kind, Sm100Config)
                    found = BlackwellGemm(kind, toolchain.cache_dir, nvcc=toolchain.nvcc)
        except CudaError as err:
            found = str(err)
        _loaded[index, kind] = found
    if isinstance(found, str):
        raise Unavailable(f"the CUDA kernel could not be loaded: {found}")
    return found


@dataclass(frozen=True)
class GemmKernel:
    """A loaded dense GEMM kernel (Hopper or tcgen05) for the operands of ``plan``."""

    plan: GemmPlan
    gemm: Gemm

    def launcher(self, args: Sequence[Any]) -> Launch:
        """The kernel reads and writes contiguous matrices: strided operands (a transposed
        weight, a slice of a bigger output) are copied for it, the product written into a
        new contiguous matrix and copied into the caller's output (the kernel overwrites
        every element of its output, so nothing is copied in). A pointer not on a 16-byte
        boundary (checked per call) runs the fallback."""
        lhs, rhs, dst = self.plan.lhs, self.plan.rhs, self.plan.out
        gemm = self.gemm
        if all(args[i].is_contiguous() for i in (lhs, rhs, dst)):
            def launch(values: Sequence[Any]) -> bool:
                x, y, z = values[lhs], values[rhs], values[dst]
                if (x.data_ptr() | y.data_ptr() | z.data_ptr()) % 16:
                    return False
                gemm(x, y, z)
                return True
            return launch

        def copying(values: Sequence[Any]) -> bool:
            x, y, z = values[lhs].contiguous(), values[rhs].contiguous(), values[dst]
            result = z if z.is_contiguous() else torch.empty(z.shape, dtype=z.dtype,
                                                             device=z.device)
            if (x.data_ptr() | y.data_ptr() | result.data_ptr()) % 16:
                return False
            gemm(x, y, result)
            if result is not z:
                z.copy_(result)
            return True
        return copying


@dataclass(frozen=True)
class SparseGemmKernel:
    """The loaded 2:4 sparse Hopper kernel for the operands of ``plan``: contiguous
    copies of strided operands, a misaligned one runs the fallback."""

    plan: SparseGemmPlan
    gemm: Gemm

    def launcher(self, args: Sequence[Any]) -> Launch:
        places = (self.plan.packed, self.plan.meta, self.plan.rhs, self.plan.out)
        gemm = self.gemm

        def launch(values: Sequence[Any]) -> bool:
            packed, meta, b, out = (values[i] for i in places)
            packed, meta, b = packed.contiguous(), meta.contiguous(), b.contiguous()
            result = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype,
                                                                 device=out.device)
            if (packed.data_ptr() | b.data_ptr() | result.data_ptr()) % 16:
                return False
            gemm(packed, meta, b, result)
            if result is not out:
                out.copy_(result)
            return True
        return launch


class CudaBackend:
    """The hand-written GEMM kernels as a backend (see the module docstring)."""

    name = "cuda"
    devices = frozenset({"cuda"})

    def recognise(self, lowered: ir.Function, options: Options) -> CudaPlan:
        """The plan of a function that is a GEMM one of the kernels computes; raises
        ``Unsuitable`` with the reason for any other (``backend="cuda"`` asks for it)."""
        gemm = _match(lowered)
        return CudaPlan(gemm, _blackwell(gemm, options))

    def unsupported(self, plan: Plan, args: Sequence[Any]) -> str | None:
        plan = _own(plan)
        gemm = plan.gemm
        if isinstance(gemm, SparseGemmPlan):
            tensors = [args[i] for i in (gemm.packed, gemm.meta, gemm.rhs, gemm.out)]
            return unsupported_sparse(*tensors, aligned=False)
        a, b, out = args[gemm.lhs], args[gemm.rhs], args[gemm.out]
        if plan.blackwell is not None:
            return blackwell_unsupported(plan.blackwell, a, b, out)
        return unsupported(a, b, out, aligned=False, dense=False)

    def build(self, plan: Plan, device: Any,
              toolchain: Toolchain) -> GemmKernel | SparseGemmKernel:
        plan = _own(plan)
        if isinstance(plan.gemm, SparseGemmPlan):
            return SparseGemmKernel(plan.gemm, load(device, "sparse", toolchain))
        return GemmKernel(plan.gemm, load(device, plan.blackwell, toolchain))


CUDA = CudaBackend()


def _own(plan: Plan) -> CudaPlan:
    """``plan``, which the dispatcher gives the backend that made it."""
    if not isinstance(plan, CudaPlan):
        raise TypeError(f"the CUDA backend was given a plan of backend {plan.backend!r}")
    return plan


def _match(lowered: ir.Function) -> GemmPlan | SparseGemmPlan:
    """The operands of the hand-written GEMM (dense, or 2:4 sparse), or ``Unsuitable``
    saying why the function is neither GEMM those kernels compute (the sparse matcher's
    reason when the function multiplies a sparse tile, else the dense one's)."""
    try:
        return match_gemm(lowered)
    except NotAGemm as err:
        reason = err
    try:
        return match_sparse_gemm(lowered)
    except NotSparse:
        pass
    except NotAGemm as err:
        reason = err
    raise Unsuitable(f"{reason} (the CUDA backend has a kernel for plain f16/bf16 GEMMs out = "
                     "lhs @ rhs^T only, also with a 2:4 sparse lhs on sm_90a, and with "
                     "target='sm_100a' for 8-bit float operands too; not for block-scaled "
                     ".scale GEMMs)")


def _blackwell(plan: GemmPlan | SparseGemmPlan, options: Options) -> Sm100Config | None:
    """The tcgen05 kernel of a GEMM compiled for sm_100 (None for other targets, which
    keep the Hopper kernel: ``Unsuitable`` when that kernel cannot take the operand
    types). The sparse GEMM has a Hopper kernel only."""
    target = options.target_rules
    if isinstance(plan, SparseGemmPlan):
        if target.sm == 100 or options.cta_group != 1:
            raise Unsuitable("the 2:4 sparse GEMM has a CUDA kernel for sm_90a only (wgmma "
                             ".sp; no tcgen05 sparse kernel yet)")
        return None
    if target.sm == 100:
        return Sm100Config(plan.dtype, plan.output, options.cta_group)
    if plan.output != plan.dtype or options.cta_group != 1:
        what = (f"{plan.dtype} operands" if plan.output != plan.dtype else
                f"cta_group={options.cta_group}")
        raise Unsuitable(f"{what} need the tcgen05 kernel of target='sm_100a' (the Hopper "
                         "kernel multiplies f16 or bf16 into the same type)")
    return None
