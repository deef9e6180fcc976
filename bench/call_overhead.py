"""Per-call overhead of a warm croqtile call.

On CUDA it times, on a problem small enough that the GPU time does not matter,
  (a) a warm croqtile call (argument signature known, kernel compiled),
  (b) a direct launch of the very same Triton JIT kernel with the same grid, arguments,
      num_warps and num_stages (what the host function would hand to Triton),
and reports ratio = (a) / (b); the issue's goal is a ratio <= 1.5.

Everywhere (also without a GPU) it times the Python side alone, with a launcher that
launches nothing: a warm croqtile call (signature lookup, host function) against calling
the generated host function directly, and ``bind`` (the full argument checks a cold call
runs). These figures say nothing about GPU launches; those need CUDA.

    python bench/call_overhead.py [--calls 2000] [--reps 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import croqtile
from croqtile.backends.triton.launcher import Launcher
from croqtile.runtime.binding import bind

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "tests" / "data" / "seed000_sm90_gemm.co"
SCALE = """
__co__ void scale(global f32 [N] x, global f32 [N] y, f32 s) {
  parallel p by cdiv(N, 128) : block
    parallel i by 128 : thread
      y.at(p # i) = x.at(p # i) * s;
}
"""


@dataclass(frozen=True)
class Case:
    """One function and the arguments of its warm call."""

    name: str
    function: croqtile.Function
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Launch:
    """What a host function handed to its launcher: enough to launch the kernel directly."""

    kernel: Any
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    num_warps: int
    num_stages: int


class NoLaunch(Launcher):
    """A launcher that records what it is asked to launch and launches nothing, so a
    loop over calls times only croqtile's Python path."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: list[Launch] = []

    def __call__(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        self.launches += 1
        if not self.recorded:
            self.recorded.append(Launch(kernel, grid, args, num_warps, num_stages))


def cases(device: str) -> list[Case]:
    """The seed GEMM at 64x64x64 (three tensors) and a scale kernel (two tensors and a
    float scalar, which a warm call converts) on 256 elements."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        gemm = croqtile.load(GEMM).matmul
        scale = croqtile.compile(SCALE, filename="scale.co").scale
    gen = torch.Generator().manual_seed(0)
    lhs, rhs = (torch.randn((64, 64), generator=gen).half().to(device) for _ in range(2))
    out = torch.empty((64, 64), dtype=torch.float16, device=device)
    x = torch.randn(256, generator=gen).to(device)
    y = torch.empty(256, device=device)
    return [Case("seed_gemm_64", gemm, (lhs, rhs, out)), Case("scale_256", scale, (x, y, 2.0))]


def per_call_us(fn: Callable[[], Any], calls: int, reps: int, sync: Callable[[], None]) -> float:
    """Median over ``reps`` loops of ``calls`` calls of the wall time per call, in us."""
    times = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def host_of(case: Case) -> tuple[Callable[..., Any], list[Any]]:
    """The generated host function the warm call runs and its trailing arguments."""
    fn = case.function
    key, bound, artifact = fn._bind_variant(case.args)
    host = getattr(fn._load(key, artifact), artifact.function)
    return host, [bound.device, *bound.args, *(bound.dims[d] for d in artifact.dims)]


def python_path(case: Case, calls: int, reps: int) -> dict[str, float]:
    """The Python side alone (no launch): warm call vs. host function vs. full bind."""
    fn = case.function
    saved, fn._launcher = fn._launcher, NoLaunch()
    try:
        fn(*case.args)  # warm: the signature is remembered, the module loaded
        host, rest = host_of(case)
        launcher = fn._launcher
        artifact = fn.artifact_for(*case.args)
        params = fn._host_params()
        none = _no_sync
        warm = per_call_us(lambda: fn(*case.args), calls, reps, none)
        direct = per_call_us(lambda: host(launcher, *rest), calls, reps, none)
        checks = per_call_us(lambda: bind(fn.name, params, case.args, artifact.checks),
                             calls, reps, none)
    finally:
        fn._launcher = saved
    return {"croqtile_warm_us": warm, "host_function_us": direct, "bind_us": checks,
            "added_us": warm - direct}


def gpu_path(case: Case, calls: int, reps: int) -> dict[str, float]:
    """A warm croqtile call against a direct launch of the same Triton kernel (same grid,
    arguments, num_warps and the stage count croqtile's launcher settled on), and the
    generated host function called with croqtile's launcher (no signature lookup)."""
    fn = case.function
    fn(*case.args)  # compile the kernel, remember the signature
    recorder = NoLaunch()
    host, rest = host_of(case)
    host(recorder, *rest)
    launch = recorder.recorded[0]
    kernel, grid, args, warps = launch.kernel, launch.grid, launch.args, launch.num_warps
    stages = fn._launcher._gpu.get(id(kernel), (launch.num_stages, {}))[0]
    kernel[grid](*args, num_warps=warps, num_stages=stages)
    sync, launcher = torch.cuda.synchronize, fn._launcher
    out = case.args[-2] if case.name.startswith("scale") else case.args[-1]
    loops = {"direct": lambda: kernel[grid](*args, num_warps=warps, num_stages=stages),
             "warm": lambda: fn(*case.args), "hosted": lambda: host(launcher, *rest),
             "torch": lambda: out.add_(0)}
    # interleaved, one loop of each per repetition: a machine that slows down for a while
    # slows all of them; the ratio is the median of the per-repetition ratios
    times: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(reps):
        for name, loop in loops.items():
            times[name].append(per_call_us(loop, calls, 1, sync))
    ratios = [w / d for w, d in zip(times["warm"], times["direct"])]
    median = {name: statistics.median(values) for name, values in times.items()}
    return {"croqtile_us": median["warm"], "direct_triton_us": median["direct"],
            "ratio": statistics.median(ratios), "ratio_of_minima": min(times["warm"]) /
            min(times["direct"]), "host_function_us": median["hosted"],
            "torch_add__us": median["torch"]}


def _no_sync() -> None:
    """Nothing to wait for on the CPU."""


def run(calls: int, reps: int) -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "python": platform.python_version(), "torch": torch.__version__,
        "calls": calls, "reps": reps, "gpu_measured": cuda,
        "note": ("python_path: croqtile's Python path with a launcher that launches "
                 "nothing (us per call); gpu_path: real launches" if cuda else
                 "no CUDA: only the Python path (no-op launcher) was measured; GPU launch "
                 "figures (ratio to a direct Triton launch) need CUDA"),
        "python_path": {}, "gpu_path": {}}
    for case in cases("cuda" if cuda else "cpu"):
        report["python_path"][case.name] = python_path(case, calls, reps)
        if cuda:
            report["gpu_path"][case.name] = gpu_path(case, calls, reps)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args()
    report = run(args.calls, args.reps)
    print(f"call overhead on {report['device']} ({args.calls} calls x {args.reps} reps, "
          "medians)")
    for name, row in report["python_path"].items():
        print(f"  {name:14s} python path: warm call {row['croqtile_warm_us']:.2f} us, "
              f"host function {row['host_function_us']:.2f} us, bind {row['bind_us']:.2f} us")
    for name, row in report["gpu_path"].items():
        print(f"  {name:14s} GPU: croqtile {row['croqtile_us']:.2f} us, direct Triton "
              f"{row['direct_triton_us']:.2f} us, ratio {row['ratio']:.3f}, "
              f"torch add_ {row['torch_add__us']:.2f} us")
    if not report["gpu_measured"]:
        print("  (no CUDA: GPU launch figures need a CUDA device)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
