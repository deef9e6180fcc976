"""Warm-call overhead of a croqtile operator under ``torch.compile`` (issue 17, item 2).

One small vector kernel (4096 elements: launch-bound), one run, one GPU. It times the
wall time per call (median over ``--reps`` loops of ``--calls`` calls, the GPU waited for
at the end of each loop) of:

    croqtile_compiled    torch.compile (Inductor) of a call of the croqtile operator
                         (torch.ops.NS.scale), which decomposes into its Triton kernel
    hand_compiled        torch.compile of a call of a triton_op written by hand around
                         the same generated kernel (torch.library.triton_op, wrap_triton)
    croqtile_eager_op    the operator called eagerly (as mod.scale(...) does)
    croqtile_eager_call  the function's own call path, without the operator
    hand_eager           the hand-written triton_op called eagerly
    triton_direct        kernel[grid](...) with the same arguments and options

and, with ``--reduce-overhead``, both compiled forms with ``mode="reduce-overhead"``.
The goal: croqtile_compiled <= 1.2 x hand_compiled. Every form is checked (poisoned
output, every element) before anything is timed; the hand-written operator's launch is
checked to be the one croqtile's host code makes (kernel, grid, arguments, options).

    python3 bench/op_overhead.py --out bench/results/h200/overhead [--calls 2000]
                                 [--reps 7] [--reduce-overhead]

writes op_overhead.json and op_overhead.csv under --out and prints the ratio.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

import croqtile
from croqtile.traced import TracedCall

SCALE = """
__co__ void scale(global f32 [N] x, global f32 [N] y, f32 s) {
  parallel p by cdiv(N, 128) : block
    parallel i by 128 : thread
      y.at(p # i) = x.at(p # i) * s;
}
"""
GOAL = 1.2  # croqtile_compiled / hand_compiled at most
N, FACTOR, BLOCK, WARPS, STAGES = 4096, 2.0, 128, 4, 3


class Recorder:
    """``launch`` for the generated host function: records what it would launch."""

    def __init__(self) -> None:
        self.launches: list[tuple[Any, tuple[int, ...], tuple[Any, ...], int, int]] = []

    def __call__(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        self.launches.append((kernel, grid, args, num_warps, num_stages))


def hand_written(kernel: Any) -> Any:
    """The triton_op a user would write around the generated kernel ``scale_k0(y_ptr,
    x_ptr, d_N, s)``: one launch of cdiv(N, 128) programs."""
    from torch.library import triton_op, wrap_triton

    @triton_op("croqtile_bench::hand_scale", mutates_args={"y"})
    def hand_scale(x: torch.Tensor, y: torch.Tensor, s: float) -> None:
        n = x.shape[0]
        wrap_triton(kernel)[((n + BLOCK - 1) // BLOCK,)](y, x, n, s, num_warps=WARPS,
                                                          num_stages=STAGES)

    return hand_scale


def check_same_launch(function: croqtile.Function, kernel: Any, x: torch.Tensor,
                      y: torch.Tensor) -> None:
    """The hand-written operator's launch is the one croqtile's host code makes."""
    artifact, host = function.host()
    recorder = Recorder()
    host(recorder, x.device, x, y, FACTOR, x.shape[0])
    want = (kernel, ((N + BLOCK - 1) // BLOCK,), (y, x, N, FACTOR), WARPS, STAGES)
    got = recorder.launches

    def same(a: Any, b: Any) -> bool:
        return a is b if isinstance(b, torch.Tensor) else a == b

    if len(got) != 1 or got[0][0] is not want[0] or tuple(got[0][1]) != want[1] \
            or len(got[0][2]) != len(want[2]) \
            or not all(same(a, b) for a, b in zip(got[0][2], want[2])) \
            or got[0][3:] != want[3:]:
        sys.exit(f"op_overhead: the generated launch is no longer the hand-written one "
                 f"(scale_k0(y, x, N, s), {WARPS} warps, {STAGES} stages): {got}; update "
                 "hand_written()")


def per_call_us(fn: Callable[[], Any], calls: int, reps: int) -> float:
    """Median over ``reps`` loops of ``calls`` calls of the wall time per call, in us."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the results")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--reduce-overhead", action="store_true",
                        help="also time both compiled forms with mode='reduce-overhead'")
    opts = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("op_overhead: needs a CUDA device (it times GPU launches)", file=sys.stderr)
        return 2

    mod = croqtile.compile(SCALE, filename="scale.co", library="croqtile_bench")
    function = mod.scale
    traced = TracedCall(function)
    if traced.reason is not None:
        sys.exit(f"op_overhead: the operator does not decompose: {traced.reason}")
    (kernel,) = traced.kernels()
    hand = hand_written(kernel)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, device="cuda", generator=gen)
    y = torch.empty(N, device="cuda")
    check_same_launch(function, kernel, x, y)

    op = function.op
    decomposed = _kernel_in_inductor_code(op, x, y)
    forms: dict[str, Callable[[], Any]] = {
        "croqtile_compiled": _compiled(lambda a, b: op(a, b, FACTOR), x, y),
        "hand_compiled": _compiled(lambda a, b: hand(a, b, FACTOR), x, y),
        "croqtile_eager_op": lambda: op(x, y, FACTOR),
        "croqtile_eager_call": lambda: function.call(x, y, FACTOR),
        "hand_eager": lambda: hand(x, y, FACTOR),
        "triton_direct": lambda: kernel[((N + BLOCK - 1) // BLOCK,)](
            y, x, N, FACTOR, num_warps=WARPS, num_stages=STAGES),
    }
    if opts.reduce_overhead:
        forms["croqtile_reduce_overhead"] = _compiled(lambda a, b: op(a, b, FACTOR), x, y,
                                                      mode="reduce-overhead")
        forms["hand_reduce_overhead"] = _compiled(lambda a, b: hand(a, b, FACTOR), x, y,
                                                  mode="reduce-overhead")

    want = x * FACTOR
    for name, form in forms.items():  # correctness first, every element
        for _ in range(3):  # (compiled forms: compile, warm, replay)
            y.fill_(float("nan"))
            form()
            torch.cuda.synchronize()
            if not torch.equal(y, want):
                bad = int((y != want).sum())
                sys.exit(f"op_overhead: {name} computed {bad} of {N} elements wrong")

    timings = {name: per_call_us(form, opts.calls, opts.reps) for name, form in forms.items()}
    ratio = timings["croqtile_compiled"] / timings["hand_compiled"]
    report = {
        "what": "warm-call wall time per call (us), median of loops of calls; one vector "
                f"kernel of {N} f32 elements (launch-bound)",
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": _triton_version(), "python": platform.python_version(),
        "calls": opts.calls, "reps": opts.reps, "us_per_call": timings,
        "ratio_compiled": ratio, "goal": GOAL, "meets_goal": ratio <= GOAL,
        "decomposed": decomposed,
    }
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "op_overhead.json").write_text(json.dumps(report, indent=2) + "\n")
    with open(opts.out / "op_overhead.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["form", "us_per_call", "ratio_to_hand_compiled"])
        for name, us in timings.items():
            writer.writerow([name, f"{us:.3f}", f"{us / timings['hand_compiled']:.3f}"])
    for name, us in timings.items():
        print(f"{name:26s} {us:8.2f} us/call")
    print(f"croqtile_compiled / hand_compiled = {ratio:.3f} (goal <= {GOAL}: "
          f"{'met' if ratio <= GOAL else 'NOT met'}); the kernel in Inductor's code: "
          f"{decomposed}")
    return 0


def _compiled(fn: Callable[[torch.Tensor, torch.Tensor], None], x: torch.Tensor,
              y: torch.Tensor, mode: str | None = None) -> Callable[[], Any]:
    compiled = torch.compile(fn, fullgraph=True, mode=mode)
    return lambda: compiled(x, y)


def _kernel_in_inductor_code(op: Any, x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether Inductor's code for a call of the operator launches the croqtile kernel
    itself (the operator decomposed) rather than calling the operator."""
    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(lambda a, b: op(a, b, FACTOR), fullgraph=True)
    _, code = run_and_get_code(compiled, x, y)
    return "scale_k0" in "\n".join(code)


def _triton_version() -> str:
    import triton

    return triton.__version__


if __name__ == "__main__":
    sys.exit(main())
