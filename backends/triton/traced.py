"""The generated host function run under torch's tracing (``torch.compile``,
``make_fx``): the same host code as a call, handed a ``launch`` that records each kernel
launch as ``torch.library.wrap_triton(kernel)[grid](...)``, so that the graph holds the
Triton kernels themselves (Inductor compiles and launches them, CUDA graphs capture them).

What the host code reads of a tensor besides passing it on is its address, to test
16-byte alignment (tensor-descriptor loads where aligned). A traced tensor has no
address: ``TracedTensor`` answers with its offset in its storage, in bytes, which is the
address's remainder modulo 16 for storage from torch's allocators (aligned to at least
256 bytes). Inductor assumes the same of its inputs and copies an input that breaks it
at run time (``torch._inductor.compile_fx``, misaligned inputs)."""

from __future__ import annotations

import types
from typing import Any, Callable

from .launcher import sm_count


class TracedTensor:
    """A traced tensor as the host function sees it: ``data_ptr()`` is its byte offset in
    its storage (see the module docstring); anything else is the tensor's own."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def data_ptr(self) -> Any:
        return self.tensor.storage_offset() * self.tensor.element_size()

    def clone(self) -> TracedTensor:
        return TracedTensor(self.tensor.clone())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tensor, name)


class _HostTorch:
    """``torch`` as the traced host function sees it: the tensors it makes (outputs,
    scratch) are ``TracedTensor``s, whose alignment the host code may test."""

    def __getattr__(self, name: str) -> Any:
        import torch

        return getattr(torch, name)

    @staticmethod
    def zeros(*args: Any, **kwargs: Any) -> TracedTensor:
        import torch

        return TracedTensor(torch.zeros(*args, **kwargs))

    @staticmethod
    def empty(*args: Any, **kwargs: Any) -> TracedTensor:
        import torch

        return TracedTensor(torch.empty(*args, **kwargs))

    @staticmethod
    def full(*args: Any, **kwargs: Any) -> TracedTensor:
        import torch

        return TracedTensor(torch.full(*args, **kwargs))


def traced_host(host: Callable[..., Any]) -> Callable[..., Any]:
    """The generated host function ``host`` for tracing: the same code, reading
    ``torch`` as ``_HostTorch``. It returns what ``host`` returns, a tensor it made as a
    ``TracedTensor``."""
    scope = dict(host.__globals__)
    scope["torch"] = _HostTorch()
    return types.FunctionType(host.__code__, scope, host.__name__, host.__defaults__,
                              host.__closure__)


class HostDescriptorNotTraceable(RuntimeError):
    """A host function asked for a tensor descriptor made on the host while traced."""


class TracingLaunch:
    """``launch`` for a host function run under tracing. Each launch becomes a
    ``wrap_triton`` call with the kernel, its grid (symbolic sizes allowed), its
    arguments and constexprs, and the launch options, which torch turns into the kernel's
    single configuration. ``stages`` maps a kernel and the codegen's stage count to the
    count to compile with (what a launch on the GPU settled on when its pipeline did not
    fit in shared memory)."""

    def __init__(self, stages: Any = None) -> None:
        self.stages = stages
        self.launches = 0

    def __call__(self, kernel: Any, grid: tuple[Any, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        from torch.library import wrap_triton

        del device  # (the tensors carry it)
        self.launches += 1
        if grid and min(grid) <= 0:
            return  # an empty grid launches nothing (zero-sized dimension), as on a call
        if self.stages is not None:
            num_stages = self.stages(kernel, num_stages)
        values = tuple(a.tensor if isinstance(a, TracedTensor) else a for a in args)
        wrap_triton(kernel)[tuple(grid)](*values, num_warps=num_warps, num_stages=num_stages)

    def sm_count(self, device: Any) -> int:
        return sm_count(device)

    def stream_k_buffers(self, device: Any, floats: int, counters: int) -> tuple[Any, Any]:
        """Stream-K scratch made in the graph on each call (a call keeps one set per
        stream instead): the workspace uninitialised, the counters zeroed."""
        import torch

        return (torch.empty(floats, dtype=torch.float32, device=device),
                torch.zeros(counters, dtype=torch.int32, device=device))

    def descriptor(self, tensor: Any, shape: tuple[Any, ...], strides: tuple[Any, ...],
                   block: tuple[int, ...]) -> Any:
        # functions taking host descriptors are not traced (croqtile.ops.traced says why)
        raise HostDescriptorNotTraceable(
            "croqtile: a tensor descriptor made on the host cannot be traced into a graph")
