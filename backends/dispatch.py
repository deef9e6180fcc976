"""Which backend runs a function, and a call: the one seam between the driver and the
targets (``protocol.py``).

At compile time ``recognise`` asks the backends the ``backend`` option names, in order;
the first that takes the function gives its plan, and a function none takes runs its
Triton kernels only (Triton is the fallback every function has). At a call, ``host``
turns a plan into the host function for the call's signature: the backend's kernel where
the device and the arguments suit it, else the Triton host, with a warning saying why
(once per function and reason).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from .cuda import attention as cuda_attention
from .cuda.backend import CUDA
from .cuda.driver import CudaError
from .ir import nodes as ir
from .options import Options
from .protocol import Backend, Host, Plan, Toolchain, Unavailable

__all__ = ["BACKENDS", "asked", "backend_of", "flash_attention",
           "flash_attention_unsupported", "host", "recognise"]

# per value of the ``backend`` option, the backends asked before Triton, in order
BACKENDS: dict[str, tuple[Backend, ...]] = {"triton": (), "cuda": (CUDA,)}

# the (function, reason) pairs warned about
warned: set[tuple[str, str]] = set()


def asked(options: Options) -> tuple[Backend, ...]:
    """The backends asked before Triton for a function compiled with ``options``."""
    return BACKENDS[options.backend]


def recognise(lowered: ir.Function, options: Options) -> Plan | None:
    """The plan of the first backend asked that takes ``lowered``; None: Triton runs it.
    A backend the options demand raises ``Unsuitable`` for a function it cannot take."""
    for backend in asked(options):
        plan = backend.recognise(lowered, options)
        if plan is not None:
            return plan
    return None


def backend_of(plan: Plan) -> Backend:
    """The backend that made ``plan``."""
    return next(b for backends in BACKENDS.values() for b in backends if b.name == plan.backend)


def host(plan: Plan, name: str, args: Sequence[Any], device: Any, fallback: Host,
         toolchain: Callable[[], Toolchain]) -> Host:
    """The host function of calls to function ``name`` with the signature of ``args`` on
    ``device``: the kernel of ``plan`` where it can run them, else ``fallback`` (the
    Triton host; with a warning saying why, unless the device is one the backend does
    not target). ``toolchain`` is read when a kernel is built."""
    backend = backend_of(plan)
    if getattr(device, "type", device) not in backend.devices:
        return fallback
    reason = backend.unsupported(plan, args)
    if reason is None:
        try:
            launch = backend.build(plan, device, toolchain()).launcher(args)
        except Unavailable as err:
            reason = str(err)
    if reason is not None:
        _warn(name, backend.name, reason)
        return fallback

    def run(launcher: Any, device: Any, *values: Any) -> Any:
        if launch(values):
            return None  # (the kernels write their outputs in place)
        return fallback(launcher, device, *values)

    return run


def _warn(name: str, backend: str, reason: str) -> None:
    """The warning of calls that run the Triton kernel instead (once per function and
    reason)."""
    if (name, reason) not in warned:
        warned.add((name, reason))
        warnings.warn(f"croqtile: {name}(): backend={backend!r} runs the Triton kernel for "
                      f"these arguments: {reason}", RuntimeWarning, stacklevel=7)


def flash_attention_unsupported(q: Any, k: Any, v: Any, scale: float,
                                addresses: bool = True) -> str | None:
    """Why the hand-written Hopper attention forward (``cuda/attention.py``) cannot take
    q ``[B, H, L, D]``, k and v ``[B, HKV, S, D]`` (None: it can; its output, allocated by
    the caller, contiguous ``[B, L, H, D]``). ``addresses=False`` leaves out
    the tensors' addresses (a traced call has none: the call itself checks them)."""
    return cuda_attention.unsupported(q, k, v, None, scale=scale, addresses=addresses)


def flash_attention(toolchain: Toolchain) -> Callable[..., None]:
    """The hand-written Hopper attention forward loaded on the current device:
    ``(q, k, v, out, lse=None, *, causal, scale)``. ``Unavailable`` when it cannot be
    built or loaded (no nvcc, a failed build)."""
    try:
        return cuda_attention.HopperAttention(toolchain.cache_dir, nvcc=toolchain.nvcc)
    except CudaError as error:
        raise Unavailable(str(error)) from error
