"""The sweeps of linear layers written as a user would, y = x @ w^T with x [M, K] and
w [N, K]:

* ``epilogue``: ``kernels/linear.co``, the bias and an activation (relu, gelu with
  the tanh approximation, silu) fused after the product, beside torch's unfused pair
  ``act(F.linear(x, w, bias))`` (the ``ratio``) and ``torch.compile`` of that same
  function (``compiled_ratio``), compiled and warmed up before the timing;
* ``decode``: ``kernels/matmul.co``, a plain 128 x 256-tile GEMM compiled with
  ``autotune="quick"`` and no search space of its own (what a user gets), beside
  ``torch.matmul(x, w.T)`` (cuBLAS) at token counts M = 1 ... 512 on the Llama-3-8B
  projections. M below 16 is under the MMA's smallest row count: the compiler pads.

Both are timed over copies of their inputs in turn that span several times the L2 cache
(``harness.input_sets``, the ``input_sets`` column): a model reads each layer's weights from
device memory once per step, and a 4096 x 4096 weight replayed alone would partly stay in
the H200's 60 MB L2.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from .harness import (DTYPES, LLM_SHAPES, Case, Prepared, Rotation, in_turn, input_sets,
                    random_tensors)

EPILOGUE_MS = (16, 64, 512, 4096)
EPILOGUE_N = EPILOGUE_K = 4096
DECODE_MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The decode targets of the issue are M = 16, 64 and 512: the quick run.
QUICK_DECODE_MS = (16, 64, 512)
DECODE_SHAPES = tuple(s for s in LLM_SHAPES if s[0] == "llama3-8b")
# f32 accumulation: only the output's rounding (and the activation's) is left.
TOLERANCE = 1e-2

Activation = Callable[[torch.Tensor], torch.Tensor]
# name -> (the kernel's ACT value, torch's function)
ACTIVATIONS: Mapping[str, tuple[str, Activation]] = {
    "relu": ("RELU", F.relu),
    "gelu_tanh": ("GELU_TANH", functools.partial(F.gelu, approximate="tanh")),
    "silu": ("SILU", F.silu),
}
EPILOGUE_PREFIX = "linear_"
EPILOGUE_FILE = "linear.co"
DECODE_KERNEL = "matmul"
DECODE_FILE = "matmul.co"


def activation(case: Case) -> str:
    """The activation of an epilogue case: ``linear_silu`` -> ``silu``."""
    return case.kernel[len(EPILOGUE_PREFIX):]


def epilogue_cases(dtypes: Sequence[str] = ("f16", "bf16"), ms: Sequence[int] = EPILOGUE_MS,
                   activations: Sequence[str] = tuple(ACTIVATIONS), n: int = EPILOGUE_N,
                   k: int = EPILOGUE_K) -> list[Case]:
    """act(x @ w^T + bias) for each type, activation and token count (M = 4096 is the
    issue's 4096^3)."""
    return [Case("epilogue", EPILOGUE_PREFIX + act, dt, m, n, k)
            for dt in dtypes for act in activations for m in ms]


def decode_cases(dtypes: Sequence[str] = ("f16", "bf16"), ms: Sequence[int] = DECODE_MS,
                 shapes: Sequence[tuple[str, str, int, int]] = DECODE_SHAPES) -> list[Case]:
    return [Case("decode", DECODE_KERNEL, dt, m, n, k, f"{model} {proj}")
            for dt in dtypes for model, proj, n, k in shapes for m in ms]


def tiny_cases(sweep: str, dtypes: Sequence[str]) -> list[Case]:
    """CPU shapes with ragged edges; decode at 1 and 5 rows (padded to the MMA's 16)."""
    if sweep == "epilogue":
        return epilogue_cases(dtypes, (40,), n=200, k=72)
    return decode_cases(dtypes, (1, 5), (("tiny", "proj", 300, 136),))


def kernel_file(case: Case) -> str:
    return EPILOGUE_FILE if case.sweep == "epilogue" else DECODE_FILE


def defines(case: Case) -> dict[str, Any]:
    """The ``#define``s a case sets: the element type, and the epilogue's activation."""
    if case.sweep == "epilogue":
        return {"DT": case.dtype, "ACT": ACTIVATIONS[activation(case)][0]}
    return {"DT": case.dtype}


def compile_baseline(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``torch.compile`` of the unfused baseline for one shape. Dynamo keeps a few
    specialisations per function and then falls back to running it uncompiled: forgetting
    the last case's compile keeps every case compiled for its own shape."""
    torch.compiler.reset()
    return torch.compile(fn, dynamic=False)


def prepare_epilogue(case: Case, fn: Any, device: str, sets: int | None = None) -> Prepared:
    """x, w and bias of the case's type; torch's unfused ``act(F.linear(x, w, bias))``,
    and the same compiled (on its first call, which the harness makes before timing).
    Timed over ``sets`` copies of the inputs in turn (by default `harness.input_sets`: the
    weights come from device memory, as in a model); the first set is the one checked."""
    torch_act = ACTIVATIONS[activation(case)][1]
    randn = random_tensors(case, device)
    sets = input_sets(case, device) if sets is None else sets
    inputs = [(randn(case.M, case.K), randn(case.N, case.K), randn(case.N))
              for _ in range(sets)]
    x, w, bias = inputs[0]
    out = torch.empty((case.M, case.N), dtype=DTYPES[case.dtype], device=device)

    def unfused(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch_act(F.linear(x, w, bias))

    compiled: list[Callable[..., torch.Tensor]] = []

    def run_compiled(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if not compiled:
            compiled.append(compile_baseline(unfused))
        return compiled[0](x, w, bias)

    def calls(f: Callable[..., object]) -> list[Callable[[], object]]:
        return [functools.partial(f, *operands) for operands in inputs]

    ours = calls(lambda x, w, bias: fn(x, w, bias, out))
    rotation = None if sets == 1 else Rotation(
        sets, in_turn(ours), in_turn(calls(unfused)), in_turn(calls(run_compiled)))
    return Prepared(ours[0], lambda: unfused(x, w, bias), out,
                    lambda: torch_act(x.double() @ w.double().T + bias.double()),
                    compiled=lambda: run_compiled(x, w, bias), tolerance=TOLERANCE,
                    rotation=rotation)
