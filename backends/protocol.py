"""The backend protocol: what the driver and a call ask of a target that runs a function on
kernels of its own.

Every function compiles to Triton (``backends/triton``): its artifact is what a call runs
unless another backend takes it, and what that backend falls back to for a call it cannot
take. Triton is that fallback rather than one of the backends asked, because its artifact
also carries the function's calling convention (host parameters, dimensions, run-time
checks, per-shape and per-layout variants), which the runtime (``croqtile.runtime.module``) binds
and launches itself. A backend asked before Triton (``dispatch.asked``: the ``backend`` option names
them) implements three steps:

    recognise(lowered function, options) -> Plan | None     at compile time
    build(plan, device, toolchain)       -> Kernel          at the first call on a device
    kernel.launcher(args)                -> Launch          per call signature

``recognise`` proves the lowered program is one its kernels compute and returns a
``Plan`` (frozen: what building needs), None when it does not take the function, or
raises ``Unsuitable`` when the options demand it and it cannot (the driver reports
CQ0705 with the reason). ``unsupported`` says why a call's arguments cannot run the
kernel (the call runs Triton then, with a warning). Nothing outside ``backends/`` reads
a plan's fields: callers see ``Plan`` through this protocol only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .ir import nodes as ir
from .options import Options

__all__ = ["Backend", "Host", "Kernel", "Launch", "Plan", "Toolchain", "Unavailable",
           "Unsuitable"]

# a generated host function: host(launcher, device, *arguments, *dimensions)
Host = Callable[..., Any]
# runs one call on a kernel; False: these arguments (a misaligned view) it cannot take,
# and the caller runs the fallback instead
Launch = Callable[[Sequence[Any]], bool]


class Unsuitable(Exception):
    """The options ask for a backend that cannot take the function; the message says why."""


class Unavailable(Exception):
    """A kernel could not be built or loaded on a device; the message says why."""


@dataclass(frozen=True)
class Toolchain:
    """What building a kernel may need from the environment (read by the caller, from
    ``croqtile.settings``): the cache directory, the ``nvcc`` to build CUDA with."""

    cache_dir: Path
    nvcc: str | None = None


@runtime_checkable
class Plan(Protocol):
    """What a backend recognised in one lowered function: what building its kernel needs."""

    @property
    def backend(self) -> str:
        """The name of the backend that made the plan (its ``Backend.name``)."""
        ...

    @property
    def traced_reason(self) -> str | None:
        """Why a call traced by ``torch.compile`` cannot decompose into the function's
        Triton kernels (its operator stays opaque); None when it can."""
        ...

    def source(self) -> str:
        """The source text of the kernel the plan builds."""
        ...


@runtime_checkable
class Kernel(Protocol):
    """A backend's kernel for one plan, loaded on one device."""

    def launcher(self, args: Sequence[Any]) -> Launch:
        """The launch for calls with the signature of ``args`` (the same types, shapes,
        devices and layouts), which ``Backend.unsupported`` accepted."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A target asked before Triton for the functions it can run (see the module
    docstring)."""

    @property
    def name(self) -> str:
        """The value of the ``backend`` option that asks for it."""
        ...

    @property
    def devices(self) -> frozenset[str]:
        """The torch device types its kernels run on (calls on others run Triton, silently)."""
        ...

    def recognise(self, lowered: ir.Function, options: Options) -> Plan | None:
        ...

    def unsupported(self, plan: Plan, args: Sequence[Any]) -> str | None:
        """Why the kernel cannot run a call with ``args``, or None when it can."""
        ...

    def build(self, plan: Plan, device: Any, toolchain: Toolchain) -> Kernel:
        """The kernel of ``plan`` on ``device`` (a backend keeps what it loaded); raises
        ``Unavailable`` when it cannot be built or loaded there."""
        ...
