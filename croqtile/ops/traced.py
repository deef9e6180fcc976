"""Operator calls that ``torch.compile`` sees through (issue 17). While torch traces a
model (AOTAutograd, under ``FunctionalTensorMode``), the operator of a ``__co__``
function (``croqtile.ops.library``) on CUDA tensors decomposes into the function's own host
code, each kernel launch recorded as ``torch.library.wrap_triton(kernel)[grid](...)``
(``backends.triton.traced``): the graph then holds the generated Triton kernels, which
Inductor compiles and launches as it does kernels written in the model, and which CUDA
graphs capture. Sizes stay symbolic under dynamic shapes; conditions on them become
``torch._check``s (guards or run-time asserts).

The operator stays one opaque call (the function's own call path, which picks and
launches its kernels, or runs them in Triton's interpreter) for:

- tensors on other devices: the CPU runs kernels in Triton's interpreter, and the
  higher-order operator ``wrap_triton`` records launches only compiled kernels (torch
  passes an interpreted kernel through untraced);
- the kinds of function ``opaque_reason`` names, each with its reason.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from ..backends.ir.nodes import HostParam
from ..backends.triton.codegen import Artifact
from ..backends.triton.traced import TracedTensor, TracingLaunch, traced_host
from ..errors import ArgumentError
from ..frontend.sema import dtypes
from ..frontend.sema.model import RuntimeCheck
from ..runtime.binding import mixed_devices, tensor_argument
from ..runtime.module import Function, ModuleFunction

# device types whose traced calls decompose into kernel launches (tests add "cpu", with
# Triton's interpreter standing in for the compiled kernels)
DECOMPOSED_DEVICES = frozenset({"cuda"})


def opaque_reason(function: ModuleFunction) -> str | None:
    """Why the operator of ``function`` cannot decompose into its kernels under tracing,
    or None when it can (known before its kernels are loaded; see also
    ``TracedCall.reason``)."""
    if not isinstance(function, Function):
        return ("its configuration is chosen per shape by timing candidates on the first "
                "call, which a trace cannot do")
    compiled = function.compiled
    if compiled.artifact is None:
        return (f"its kernels are compiled per call for the values of its dimensions "
                f"({', '.join(compiled.specialize_on)}), which a trace with symbolic sizes "
                "does not know")
    if compiled.plan is not None and compiled.plan.traced_reason is not None:
        return compiled.plan.traced_reason
    if takes_host_descriptors(function):
        # torch 2.13, torch/_higher_order_ops/triton_kernel_wrap.py, TracingTritonHOPifier:
        # "TMA descriptor capturing not yet supported in non-dynamo tracing"
        return ("its kernels take tensor descriptors made on the host, which torch's "
                "tracing of wrap_triton outside Dynamo does not capture; compiled with "
                "descriptors='kernel' (made in each program) it decomposes")
    return None


def takes_host_descriptors(function: Function) -> bool:
    """Whether ``function``'s kernels take tensor descriptors made on the host (what keeps
    its operator opaque under tracing; the same source compiled with
    ``descriptors="kernel"`` can stand in for it there, ``croqtile.ops.library.retrace``)."""
    artifact = function.compiled.artifact
    return artifact is not None and any(kind.startswith("tensordesc")
                                        for signature in artifact.signatures
                                        for kind in signature.values())


class TracedCall:
    """The decomposition of one function's operator: ``TracedCall(f)(*args)``, called
    under torch's tracing with the operator's arguments, runs ``f``'s host code with
    launches recorded as ``wrap_triton`` calls and returns what the host code returns."""

    def __init__(self, function: Function,
                 stages: Callable[[Any, int], int] | None = None) -> None:
        self.function = function
        # (kernel, the codegen's stage count) -> the count to compile with; by default what
        # the function's own launches settled on
        self.stages = stages or function.launcher.stages
        self._reason = opaque_reason(function)
        self._host: tuple[Artifact, Callable[..., Any]] | None = None
        self._kernels_read = False  # (whether ``reason`` has looked at the kernels)

    @property
    def reason(self) -> str | None:
        """Why this function stays opaque, or None (loads the kernels to find out)."""
        if self._reason is None and not self._kernels_read:
            self._kernels_read = True
            if any(getattr(k, "debug", False) for k in self.kernels()):
                # a kernel checking device assertions runs in Triton's debug mode, which
                # would also trap on integer overflow (wrapping in Croqtile, as in C)
                # unless launched with sanitize_overflow=False, a launch option
                # wrap_triton does not pass on
                self._reason = ("its kernels check device assertions (Triton's debug "
                                "mode, launched with sanitize_overflow=False, which "
                                "wrap_triton does not pass on)")
        return self._reason

    def kernels(self) -> list[Any]:
        """The function's Triton kernels (its generated module is loaded now if needed);
        none for a function that stays opaque for a reason known before loading."""
        if self._reason is not None:
            return []
        artifact, host = self._loaded()
        scope = host.__globals__
        return [scope[name] for name in artifact.kernels]

    def decomposes(self, args: tuple[Any, ...]) -> bool:
        """Whether a traced call with ``args`` decomposes: a traceable function, its
        tensors contiguous and on a device in ``DECOMPOSED_DEVICES``. Strided tensors
        take the opaque call, whose host code picks the variant compiled for their
        layout (or copies what a kernel cannot take)."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or tensors[0].device.type not in DECOMPOSED_DEVICES:
            return False
        return all(t.is_contiguous() for t in tensors) and self.reason is None

    def __call__(self, *args: Any) -> Any:
        artifact, host = self._loaded()
        device, dims = _bind_traced(self.function.name, artifact, args)
        values = [TracedTensor(a) if p.kind == "tensor" else _scalar(p, a)
                  for p, a in zip(artifact.params, args)]
        launch = TracingLaunch(self.stages)
        result = host(launch, device, *values, *(dims[d] for d in artifact.dims))
        return result.tensor if isinstance(result, TracedTensor) else result

    def _loaded(self) -> tuple[Artifact, Callable[..., Any]]:
        """The artifact and the host function for tracing (loaded once)."""
        if self._host is None:
            artifact, host = self.function.host()
            self._host = (artifact, traced_host(host))
        return self._host


def traced_call(function: ModuleFunction,
                stages: Callable[[Any, int], int] | None = None) -> TracedCall | None:
    """The decomposition of ``function``'s operator, None when it stays opaque for a
    reason known now (``opaque_reason``); ``stages`` as ``TracedCall`` takes it."""
    if not isinstance(function, Function) or opaque_reason(function) is not None:
        return None
    return TracedCall(function, stages)


def _scalar(param: HostParam, value: Any) -> Any:
    """A scalar argument as the host code takes it (bool as int, int as float where the
    parameter is a float); symbolic values as they are."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and dtypes.lookup(param.elem).is_float:
        return float(value)
    return value


def _bind_traced(name: str, artifact: Artifact, args: tuple[Any, ...]) \
        -> tuple[torch.device, dict[str, Any]]:
    """``bind`` for traced arguments (contiguous ones: ``TracedCall.decomposes``): dtypes,
    ranks and the device are known while tracing and raise ``ArgumentError`` as a call
    would; sizes may be symbolic, so the conditions on them (a dimension bound twice, a
    static extent, positive sizes, the function's run-time checks) become
    ``torch._check``s, which torch proves, turns into guards, or tests when the graph
    runs. Returns the device and the dimensions."""
    dims: dict[str, Any] = {}
    origin: dict[str, str] = {}
    device: torch.device | None = None
    device_from = ""
    for param, arg in zip(artifact.params, args):
        if param.kind != "tensor":
            continue
        tensor_argument(name, param, arg)  # its dtype and rank
        if device is None:
            device, device_from = arg.device, param.name
        elif arg.device != device:
            raise mixed_devices(name, param.name, arg.device, device_from, device)
        for d, (want, size) in enumerate(zip(param.dims, arg.shape)):
            where = f"{name}(): parameter '{param.name}', dimension {d}"
            if want.value is not None:
                _check(size == want.value, functools.partial("{}: expected {}".format, where,
                                                             want.value))
                continue
            names = sorted(want.free_vars())
            if len(names) != 1:
                continue
            dim = names[0]
            if dim in dims:
                _check(size == dims[dim], functools.partial(
                    "{} ({}): must equal the size bound by {}".format, where, dim, origin[dim]))
            else:
                _check(size > 0, functools.partial("{} ({}) must be positive".format, where, dim))
                dims[dim], origin[dim] = size, f"'{param.name}'"
    for check in artifact.checks:
        holds = check.holds(dims)
        if holds is not None:
            _check(holds, functools.partial(_check_message, name, check, dims))
    assert device is not None, f"{name}: a traced call without tensors does not decompose"
    return device, dims


def _check_message(name: str, check: RuntimeCheck, dims: dict[str, Any]) -> str:
    return f"{name}(): {check.message(dims)}"


def _check(condition: Any, message: Callable[[], str]) -> None:
    """A condition on sizes: ``ArgumentError`` when it is plainly false, else
    ``torch._check`` (a symbolic condition: proved, guarded or tested at run time)."""
    if condition is False:
        raise ArgumentError(message())
    if condition is not True:
        torch._check(condition, message)
