"""Soak: many calls over many distinct shapes keep the process's memory flat.

A function compiled per call shape makes a kernel variant, a generated module and a warm
signature per shape; croqtile keeps each in a least-recently-used table of ``cache_size``
entries (``croqtile.runtime.lru``). This script calls such a function ``--calls`` times on
``--shapes`` distinct shapes drawn at random (shapes come back after they were evicted, so
they compile again), checks every result exactly, and prints the resident memory (RSS)
growth from the end of a warm-up to the end against ``--bound-mib``; the exit status is 1
when the growth passes the bound, a result is wrong or a table outgrew its size.

    python bench/soak.py                       # 5000 calls, 500 shapes, CPU (interpreter)
    python bench/soak.py --device cuda         # the same on the GPU
    python bench/soak.py --calls 1000 --shapes 300 --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import linecache
import os
import random
import resource
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# a copy through a shared buffer of the call's extent: compiled once per (M, N)
SOURCE = """
__co__ void soak_copy(global f32 [M, N] x, global f32 [M, N] y) {
  parallel p by 1 : block
    parallel q by 32 : thread {
      t = dma.copy x.subspan(M, N) => shared;
      dma.copy t => y;
    }
}
"""

# RSS growth allowed after the warm-up (documented in bench/README.md): the tables hold
# at most cache_size variants whatever the number of shapes; this leaves room for the
# allocator's and Python's own pools. (Without the eviction of the interpreter's
# rewritten functions the 5,000-call run grows by about 44 MiB, 10 KiB per module load.)
DEFAULT_BOUND_MIB = 16.0


@dataclass(frozen=True)
class Report:
    device: str
    calls: int
    shapes: int
    cache_size: int
    warmup_calls: int
    rss_start_mib: float  # after the warm-up
    rss_end_mib: float
    growth_mib: float
    bound_mib: float
    compiles: int  # module loads (a shape evicted and called again loads again)
    largest_table: int
    interpreter_functions: int  # Triton's interpreter's table of rewritten functions
    source_lines_cached: int  # linecache entries
    seconds: float

    @property
    def ok(self) -> bool:
        return self.growth_mib <= self.bound_mib and self.largest_table <= self.cache_size


def rss_mib() -> float:
    """The resident set size now (Linux: /proc), else the peak (``getrusage``)."""
    statm = Path("/proc/self/statm")
    if statm.exists():
        pages = int(statm.read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def shape_pool(count: int, seed: int = 0) -> list[tuple[int, int]]:
    """``count`` distinct small (M, N) shapes."""
    rng = random.Random(seed)
    shapes: set[tuple[int, int]] = set()
    while len(shapes) < count:
        shapes.add((rng.randint(1, 24), rng.randint(1, 96)))
    return sorted(shapes)


def soak(calls: int, shapes: int, cache_size: int, device: str = "cpu",
         bound_mib: float = DEFAULT_BOUND_MIB, seed: int = 0) -> Report:
    import torch

    import croqtile

    fn = croqtile.compile(SOURCE, filename="soak.co", cache_size=cache_size).soak_copy
    pool = shape_pool(shapes, seed)
    rng = random.Random(seed + 1)
    # every shape once first (the tables fill and start evicting), then random revisits
    order = pool + [rng.choice(pool) for _ in range(max(0, calls - len(pool)))]
    warmup = min(len(order) // 4, max(2 * cache_size, 1))
    start = time.perf_counter()
    rss_start = 0.0
    largest = 0
    for index, (m, n) in enumerate(order[:calls]):
        if index == warmup:
            gc.collect()
            rss_start = rss_mib()
        x = torch.randn(m, n, device=device)
        y = torch.full_like(x, float("nan"))
        fn(x, y)
        if not torch.equal(y, x):
            raise AssertionError(f"wrong result for shape {(m, n)} at call {index}")
        if index % 64 == 0:
            largest = max(largest, _largest_table(fn))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    gc.collect()
    rss_end = rss_mib()
    largest = max(largest, _largest_table(fn))
    return Report(device, min(calls, len(order)), len(pool), cache_size, warmup,
                  round(rss_start, 1), round(rss_end, 1), round(rss_end - rss_start, 1),
                  bound_mib, fn.loads, largest, _interpreter_functions(),
                  len(linecache.cache), round(time.perf_counter() - start, 1))


def _largest_table(fn: Any) -> int:
    return max(table.size for table in fn.cache_info().tables.values())


def _interpreter_functions() -> int:
    from triton.runtime.interpreter import InterpretedFunction

    return len(InterpretedFunction.rewritten_fn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--shapes", type=int, default=500)
    parser.add_argument("--cache-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bound-mib", type=float, default=DEFAULT_BOUND_MIB)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = soak(args.calls, args.shapes, args.cache_size, args.device, args.bound_mib)
    print(f"soak on {report.device}: {report.calls} calls, {report.shapes} shapes, "
          f"cache_size {report.cache_size}, {report.compiles} module loads, "
          f"{report.seconds} s")
    print(f"RSS after {report.warmup_calls} warm-up calls {report.rss_start_mib} MiB, at the "
          f"end {report.rss_end_mib} MiB: growth {report.growth_mib} MiB "
          f"(bound {report.bound_mib} MiB); largest table {report.largest_table}; "
          f"interpreter functions {report.interpreter_functions}; "
          f"linecache {report.source_lines_cached}")
    print("OK" if report.ok else "FAILED")
    if args.json:
        args.json.write_text(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
