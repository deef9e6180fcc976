"""What the end-to-end conformance harness needs to know about one upstream kernel.

Upstream's host code (the C++ ``main`` around each ``__co__`` function) builds the inputs,
calls the kernel and checks the result with a loop. We do not run that C++; instead each
kernel gets a *recipe* written here by hand from reading the host code: how to build the
arguments, and the expected result as a torch formula computed in float64 (or exactly, for
integer kernels). Nothing of the upstream files is copied; the harness reads them from a
checkout given on the command line.

A recipe is keyed by ``(relative path under tests/ or the tutorial root, function name)``.
The function name ``"*"`` stands for every function of that file that has no recipe of its
own (used for whole files that are out of scope).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import torch

# Element-type names of the language -> torch dtypes (byte-sized and wider only).
TORCH_DTYPES: dict[str, torch.dtype] = {
    "f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "f8_e4m3": torch.float8_e4m3fn, "f8_e5m2": torch.float8_e5m2,
    "s64": torch.int64, "s32": torch.int32, "s16": torch.int16, "s8": torch.int8,
    "u64": torch.uint64, "u32": torch.uint32, "u16": torch.uint16, "u8": torch.uint8,
    "bool": torch.bool,
}

Verdict = Literal["IN", "ESC", "OUT"]


@dataclass
class Recipe:
    """How to run one upstream ``__co__`` function and what it must produce.

    ``args(gen)`` returns the positional arguments (CPU tensors and Python scalars) built the
    way the host code builds them, drawing random values from ``gen``. ``reference(*args)``
    receives clones of those arguments as they were *before* the call and returns the
    expected result: for a kernel that returns data, the returned tensor (or a tuple of
    them); for a ``void`` kernel that writes parameters in place, a dict
    ``{argument index: expected tensor}``. Comparison is elementwise with ``rtol``/``atol``
    (both 0 means exact). A NaN in a floating-point reference marks an element the kernel
    may leave anything in (unspecified upstream: never written, or raced on); it is not
    compared.
    """

    args: Callable[[torch.Generator], list[Any]]
    reference: Callable[..., Any]
    defines: dict[str, str] = field(default_factory=dict)
    rtol: float = 0.0
    atol: float = 0.0
    verdict: Verdict = "IN"
    reason: str = ""          # for ESC/OUT: why it is out of this backend's scope
    note: str = ""            # anything a reader of the report should know
    compile_only: bool = False  # upstream never runs it; we still run it when we can
    # Arguments the kernel must overwrite completely: the harness fills them with a poison
    # value (NaN, or a fixed integer pattern) before the call, so stale contents cannot pass.
    # Leave empty where the host code relies on an output's initial contents (zeros).
    poison: tuple[int, ...] = ()
    # Further argument sets the host code also runs (e.g. a flag set both ways): each is
    # a recipe of its own (args, reference, tolerance) checked against the same compiled
    # function; the kernel passes only if all of them do.
    also: tuple["Recipe", ...] = ()
