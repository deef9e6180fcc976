"""Host time of a short GEMM call against the GPU time ``do_bench`` leaves for it.

``do_bench`` clears a 256 MB buffer before every timed call; the host then records an
event and makes the call. When that host path takes longer than the clearing kernel runs,
the GPU waits between the event and the kernel, and the wait counts as kernel time. At
1024^3 (kernels of 5-10 us) this decides whether a run measures the kernel or the host.

For each configuration at 1024^3 f16 (and torch.matmul) it reports:
  host_us      wall time per call of a loop of calls (no synchronisation in the loop)
  bench_us     median of ``do_bench`` (what the sweeps report)
  slack_us     the same loop as ``do_bench``, with the GPU held busy for ``--slack-us``
               after clearing the cache, so the host is ahead when the timed call starts
  graph_us     median of ``do_bench_cudagraph`` (kernel time without any host path)
and the clearing kernel's own GPU time.

    python bench/host_time.py [--json out.json] [--size 1024] [--slack-us 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

import croqtile

KERNEL = Path(__file__).resolve().parent / "kernels" / "gemm.co"
CONFIGS = {
    "64x128_s5": {"defines": {"TILE_M": 64, "TILE_N": 128}, "num_warps": 4, "num_stages": 5,
                  "persistent": False},
    "128x64_s8": {"defines": {"TILE_M": 128, "TILE_N": 64}, "num_warps": 4, "num_stages": 8,
                  "persistent": False},
    "64x128_s5_pointers": {"defines": {"TILE_M": 64, "TILE_N": 128}, "num_warps": 4,
                           "num_stages": 5, "persistent": False, "descriptors": False},
}


def host_us(fn: Callable[[], Any], calls: int = 2000, reps: int = 5) -> float:
    """Median over ``reps`` loops of the wall time per call (the GPU keeps up or queues)."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def slack_us(fn: Callable[[], Any], slack: float, reps: int = 200) -> float:
    """``do_bench``'s loop (clear the cache, event, call, event), with the GPU spinning
    ``slack`` us after the clearing so that the host has issued the call before the
    first event is reached. Median GPU time between the events, in us."""
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    cycles = int(slack * 1980)  # (an H200's SM clock is at most 1980 MHz)
    for _ in range(20):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        cache.zero_()
        torch.cuda._sleep(cycles)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def gpu_time_us(fn: Callable[[], Any], reps: int = 50) -> float:
    """Median GPU time of ``fn`` between two events (for the clearing kernel)."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def measure(fn: Callable[[], Any], slack: float) -> dict[str, float]:
    from triton.testing import do_bench, do_bench_cudagraph

    fn()
    torch.cuda.synchronize()
    return {
        "host_us": host_us(fn),
        "bench_us": statistics.median(do_bench(fn, return_mode="median") * 1e3
                                      for _ in range(5)),
        "slack_us": slack_us(fn, slack),
        "graph_us": statistics.median(do_bench_cudagraph(fn, return_mode="median") * 1e3
                                      for _ in range(3)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--slack-us", type=float, default=200.0)
    args = parser.parse_args()
    n = args.size
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen).half()
    b = torch.randn(n, n, device="cuda", generator=gen).half()
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "size": n}
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    results["clear_cache_gpu_us"] = gpu_time_us(cache.zero_)
    results["clear_cache_host_us"] = host_us(cache.zero_, calls=200)
    results["torch.matmul"] = measure(lambda: torch.matmul(a, b.T), args.slack_us)
    source = KERNEL.read_text()
    for name, config in CONFIGS.items():
        options = {k: v for k, v in config.items() if k != "defines"}
        fn = croqtile.compile(source, defines={"DT": "f16", **config["defines"]},
                              **options).gemm
        c.fill_(float("nan"))
        fn(a, b, c)
        ref = a.double() @ b.double().T
        error = ((c.double() - ref).norm() / ref.norm()).item()
        assert error < 1e-2, f"{name}: relative error {error}"
        results[name] = measure(lambda fn=fn: fn(a, b, c), args.slack_us)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
