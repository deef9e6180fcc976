"""Compile latency of the seed GEMMs: ``croqtile.compile`` from source text to the generated
module (preprocess, regions, parse, check, lower, codegen; Triton's own JIT excluded).

Reports, per seed, the median over ``--runs`` compiles of the wall time and of the
process CPU time (steadier on a loaded machine), and the median time of each pipeline
stage (the driver's ``CompileResult.timings``). The issue's goal: <= 50 ms per seed GEMM.

    python bench/compile_latency.py [--runs 11] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import croqtile
from croqtile.runtime.driver import compile_source

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SEEDS = ("seed000_sm86_gemm.co", "seed000_sm90_gemm.co", "seed000_sm90_gemm_2wg.co",
         "seed000_sm90_gemm_direct.co", "seed004_dma_matmul.co")
GOAL_MS = 50.0


def measure(name: str, runs: int) -> dict[str, Any]:
    """Median wall and CPU milliseconds of ``croqtile.compile`` on seed ``name``, and of
    each stage (from as many ``compile_source`` runs, which report them)."""
    text = (DATA / name).read_text()
    wall, cpu = [], []
    stages: dict[str, list[float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        croqtile.compile(text, filename=name)  # imports and first-use caches
        for _ in range(runs):
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            croqtile.compile(text, filename=name)
            cpu.append(time.process_time() - cpu_start)
            wall.append(time.perf_counter() - wall_start)
        for _ in range(runs):
            for stage, seconds in compile_source(text, filename=name).timings.items():
                stages.setdefault(stage, []).append(seconds)
    wall_ms = statistics.median(wall) * 1e3
    return {"wall_ms": wall_ms, "cpu_ms": statistics.median(cpu) * 1e3,
            "min_wall_ms": min(wall) * 1e3, "runs": runs, "within_goal": wall_ms <= GOAL_MS,
            "stages_ms": {s: statistics.median(t) * 1e3 for s, t in stages.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args()
    seeds = {name: measure(name, args.runs) for name in SEEDS}
    report = {"python": platform.python_version(), "goal_ms": GOAL_MS, "seeds": seeds}
    print(f"compile latency (median of {args.runs}; Triton JIT excluded; goal {GOAL_MS:.0f} ms)")
    for name, row in seeds.items():
        parts = ", ".join(f"{s} {ms:.1f}" for s, ms in row["stages_ms"].items())
        print(f"  {name:28s} {row['wall_ms']:6.1f} ms wall, {row['cpu_ms']:6.1f} ms CPU  "
              f"({parts})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
