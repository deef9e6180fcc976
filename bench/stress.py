"""Concurrency stress: threads and processes making their first calls at the same moment.

Each round gets a fresh cache directory, shared by all processes, and fresh sources (the
round number is part of them, so every round writes and loads new generated modules).
In each process the main thread compiles the round's functions; then every thread waits
at a barrier and makes its first calls together:

- a function compiled once for all shapes (one module load shared by the threads),
- a function compiled per call shape (one specialisation shared by the threads),
- its own compile of the same source (same generated file, another ``Function``),
- a tuning-cache write and read of one key shared by every thread and process.

Every result is checked against torch. A failure is any exception or wrong result; the
run prints a summary line and exits non-zero when there was one.

    python bench/stress.py [--rounds 100] [--threads 16] [--processes 4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import croqtile
from croqtile.tuning import tuner as tuning
STATIC = """
__co__ s32 [4, 8] add_r{round}(s32 [4, 8] x, s32 [4, 8] y, int k) {{
  s32 [x.span] out;
  parallel {{i, j}} by [4, 8]
    out.at(i, j) = x.at(i, j) + y.at(i, j) + k + {round};
  return out;
}}
"""

SPECIALISED = """
__co__ void copy_r{round}(global f32 [A, B, C] x, global f32 [A, B, C] y) {{
  parallel p by 1 : block
    parallel q by 32 : thread {{
      t = dma.copy x.subspan(A, B, C) => shared;
      dma.copy t => y;
    }}
}}
"""


@dataclass(frozen=True)
class Plan:
    rounds: int
    threads: int
    processes: int


def _thread_calls(round_: int, static: Any, specialised: Any, seed: int) -> None:
    """One thread's calls of a round, each result checked against torch."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-100, 100, (4, 8), dtype=torch.int32, generator=gen)
    y = torch.randint(-100, 100, (4, 8), dtype=torch.int32, generator=gen)
    k = int(torch.randint(-5, 5, (1,), generator=gen))
    out = static(x, y, k)
    if not torch.equal(out, x + y + k + round_):
        raise AssertionError(f"add_r{round_}: wrong result")
    shape = (2, 3, 1 + round_ % 3)  # (the same shape in every thread of a round)
    a = torch.randn(shape, generator=gen)
    b = torch.full(shape, float("nan"))
    specialised(a, b)
    if not torch.equal(a, b):
        raise AssertionError(f"copy_r{round_}: wrong result")
    own = getattr(croqtile.compile(STATIC.format(round=round_)), f"add_r{round_}")
    if not torch.equal(own(x, y, -k), x + y - k + round_):
        raise AssertionError(f"add_r{round_} (own compile): wrong result")
    key = f"stress_r{round_}"
    config = {"config": {"defines": {"T": 16 + seed % 4}, "num_warps": 4}, "seed": seed}
    tuning.save_choice(key, config)
    if tuning.load_choice(key) is None:
        raise AssertionError("tuning cache: a written choice read back as missing")


def _process(index: int, plan: Plan, root: str, barrier: Any, failures: Any) -> None:
    """One process's rounds; each failure, then a line per round, goes to ``failures``."""
    for round_ in range(plan.rounds):
        for error in _round(index, round_, plan, Path(root) / f"round{round_}", barrier):
            failures.put(error)
        failures.put(("round", index, round_))


def _round(index: int, round_: int, plan: Plan, cache: Path, barrier: Any) -> list[str]:
    """Compile the round's functions, then all threads make their first calls at once."""
    cache.mkdir(exist_ok=True)
    os.environ["CROQTILE_CACHE_DIR"] = str(cache)
    static = getattr(croqtile.compile(STATIC.format(round=round_)), f"add_r{round_}")
    specialised = getattr(croqtile.compile(SPECIALISED.format(round=round_)),
                          f"copy_r{round_}")
    start = threading.Barrier(plan.threads)
    errors: list[str] = []

    def run(thread: int) -> None:
        try:
            start.wait()
            _thread_calls(round_, static, specialised, 1000 * index + thread)
        except BaseException as exc:  # (a thread's failure is counted, not raised)
            errors.append(f"round {round_} process {index} thread {thread}: "
                          f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    barrier.wait()  # (the processes start each round together)
    workers = [threading.Thread(target=run, args=(t,)) for t in range(plan.threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    loads = (static.loads, specialised.loads)
    if not errors and loads != (1, 1):
        errors.append(f"round {round_} process {index}: modules loaded {loads} times, "
                      "expected once each")
    return errors


def stress(plan: Plan, root: str | None = None) -> tuple[int, list[str]]:
    """Run ``plan``; the number of calls made by threads and the failures."""
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="croqtile-stress-") as fresh:
        root = root or fresh
        barrier = context.Barrier(plan.processes)
        failures = context.Queue()
        processes = [context.Process(target=_process, args=(i, plan, root, barrier, failures))
                     for i in range(plan.processes)]
        for process in processes:
            process.start()
        errors: list[str] = []
        rounds_done = 0
        while rounds_done < plan.rounds * plan.processes:
            item = failures.get(timeout=600)
            if isinstance(item, tuple):
                rounds_done += 1
            else:
                errors.append(item)
        for process in processes:
            process.join()
            if process.exitcode != 0:
                errors.append(f"process exited with code {process.exitcode}")
    return plan.rounds * plan.processes * plan.threads, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--show", type=int, default=3, help="failures printed in full")
    args = parser.parse_args(argv)
    plan = Plan(args.rounds, args.threads, args.processes)
    began = time.perf_counter()
    calls, errors = stress(plan)
    elapsed = time.perf_counter() - began
    for error in errors[:args.show]:
        print(error, file=sys.stderr)
    failed_rounds = len({e.split(" thread")[0] for e in errors})
    print(f"stress: {plan.rounds} rounds x {plan.threads} threads x {plan.processes} "
          f"processes, {calls} thread-rounds (4 checked calls each), {len(errors)} failures "
          f"in {failed_rounds} process-rounds, {elapsed:.0f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
