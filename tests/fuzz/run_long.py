"""The long fuzzing run: many inputs from every generator, on several processes.

    python -m tests.fuzz.run_long --inputs 100000 --jobs 2 --out /tmp/fuzz-report.json

Input ``i`` of a run with ``--seed s`` is made from ``random.Random(f"{s}:{i}")`` alone,
so ``--replay i`` rebuilds (and shrinks) any crash of a report. Each worker runs inputs
under a per-input alarm; a worker that stops answering (a hang in C code) is killed by
the parent, its input recorded as a hang and the worker replaced. The JSON report holds
the counts by generator, every crash signature with a shrunk reproducer, the slowest
inputs and the throughput; a summary is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .generators import GENERATORS, load_corpus, make_input
from .harness import Finding, describe_defines, probe, shrink

_HARD_LIMIT_SLACK = 30.0  # seconds past the alarm before the parent kills a worker


@dataclass
class Stats:
    """What one generator produced in a run."""

    inputs: int = 0
    seconds: float = 0.0
    chars: int = 0
    crashes: int = 0
    slowest: float = 0.0


@dataclass
class Report:
    seed: int
    jobs: int
    time_limit: float
    generators: dict[str, Stats] = field(default_factory=lambda: defaultdict(Stats))
    crashes: dict[str, dict[str, Any]] = field(default_factory=dict)
    slow: list[tuple[float, str, int, int]] = field(default_factory=list)
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, index: int, name: str, seconds: float, chars: int,
            finding: dict[str, str] | None) -> None:
        self.done += 1
        stats = self.generators[name]
        stats.inputs += 1
        stats.seconds += seconds
        stats.chars += chars
        stats.slowest = max(stats.slowest, seconds)
        self.slow.append((seconds, name, index, chars))
        if len(self.slow) > 200:
            self.slow = sorted(self.slow, reverse=True)[:20]
        if finding is not None:
            stats.crashes += 1
            entry = self.crashes.setdefault(finding["signature"], {
                "count": 0, "kind": finding["kind"], "entry": finding["entry"], "generator": name,
                "index": index, "detail": finding["detail"], "reproducer": None,
            })
            entry["count"] += 1

    def to_dict(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        return {
            "seed": self.seed,
            "jobs": self.jobs,
            "time_limit_s": self.time_limit,
            "inputs": self.done,
            "crashes": sum(c["count"] for c in self.crashes.values()),
            "seconds": round(elapsed, 1),
            "inputs_per_second": round(self.done / elapsed, 1) if elapsed else None,
            "by_generator": {
                name: {"inputs": s.inputs, "crashes": s.crashes, "seconds": round(s.seconds, 1),
                       "mean_ms": round(1000 * s.seconds / s.inputs, 2) if s.inputs else None,
                       "slowest_s": round(s.slowest, 2), "mean_chars": s.chars // max(s.inputs, 1)}
                for name, s in sorted(self.generators.items())
            },
            "crash_signatures": self.crashes,
            "slowest_inputs": [
                {"seconds": round(t, 2), "generator": g, "index": i, "chars": c}
                for t, g, i, c in sorted(self.slow, reverse=True)[:20]
            ],
        }


# ----------------------------------------------------------------------------------------
# Workers
# ----------------------------------------------------------------------------------------

def _worker(seed: int, names: list[str] | None, time_limit: float, tasks: Any,
            results: Any) -> None:
    """Run the inputs whose indices come from ``tasks``; None ends the worker."""
    corpus = load_corpus()
    while True:
        index = tasks.get()
        if index is None:
            return
        results.put(("start", mp.current_process().name, index, time.monotonic()))
        name, text, defines = make_input(seed, index, corpus, names)
        start = time.perf_counter()
        finding = probe(text, time_limit, defines)
        seconds = time.perf_counter() - start
        results.put(("done", mp.current_process().name, index, name, seconds, len(text),
                     finding.to_dict() if finding is not None else None))


class _Pool:
    """Worker processes fed from one queue, watched for hangs."""

    def __init__(self, args: argparse.Namespace, names: list[str] | None) -> None:
        self.args = args
        self.names = names
        self.ctx = mp.get_context("fork" if sys.platform != "win32" else "spawn")
        self.tasks = self.ctx.Queue()
        self.results = self.ctx.Queue()
        self.workers: dict[str, Any] = {}
        self.current: dict[str, tuple[int, float]] = {}

    def start(self, count: int) -> None:
        for _ in range(count):
            self._spawn()

    def _spawn(self) -> None:
        proc = self.ctx.Process(target=_worker, args=(
            self.args.seed, self.names, self.args.time_limit, self.tasks, self.results),
            daemon=True)
        proc.start()
        self.workers[proc.name] = proc

    def reap_hangs(self, report: Report) -> None:
        """Kill workers stuck past the alarm (a hang the alarm could not interrupt)."""
        now = time.monotonic()
        for wname, (index, since) in list(self.current.items()):
            if now - since < self.args.time_limit + _HARD_LIMIT_SLACK:
                continue
            proc = self.workers.pop(wname)
            proc.kill()
            proc.join()
            del self.current[wname]
            name, text, _ = make_input(self.args.seed, index, load_corpus(), self.names)
            finding = Finding("worker", "hang", "hang (worker killed)",
                              f"no answer after {now - since:.0f} s")
            report.add(index, name, now - since, len(text), finding.to_dict())
            self._spawn()

    def stop(self) -> None:
        for _ in self.workers:
            self.tasks.put(None)
        for proc in self.workers.values():
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()


def run(args: argparse.Namespace) -> Report:
    names = args.generators.split(",") if args.generators else None
    report = Report(args.seed, args.jobs, args.time_limit)
    pool = _Pool(args, names)
    for index in range(args.start, args.start + args.inputs):
        pool.tasks.put(index)
    pool.start(args.jobs)
    last_print = time.monotonic()
    try:
        while report.done < args.inputs:
            try:
                message = pool.results.get(timeout=1.0)
            except queue.Empty:
                pool.reap_hangs(report)
                continue
            if message[0] == "start":
                pool.current[message[1]] = (message[2], message[3])
            else:
                _, wname, index, name, seconds, chars, finding = message
                pool.current.pop(wname, None)
                report.add(index, name, seconds, chars, finding)
            if time.monotonic() - last_print > args.progress:
                last_print = time.monotonic()
                _progress(report, args.inputs)
            pool.reap_hangs(report)
    finally:
        pool.stop()
    _progress(report, args.inputs)
    if report.crashes and args.shrink_budget > 0:
        _shrink_all(report, args, names)
    return report


def _progress(report: Report, total: int) -> None:
    elapsed = time.monotonic() - report.started
    crashes = sum(c["count"] for c in report.crashes.values())
    print(f"[{report.done:>7}/{total}] {elapsed:7.0f} s  {report.done / max(elapsed, 1e-9):6.1f} "
          f"inputs/s  crashes: {crashes} ({len(report.crashes)} signatures)", flush=True)


def _shrink_all(report: Report, args: argparse.Namespace, names: list[str] | None) -> None:
    """A small reproducer for each crash signature (one example each)."""
    corpus = load_corpus()
    for signature, entry in report.crashes.items():
        _, text, defines = make_input(args.seed, entry["index"], corpus, names)
        entry["defines"] = describe_defines(defines)
        finding = probe(text, args.time_limit, defines)
        if finding is None or finding.signature != signature:
            entry["reproducer"] = None  # did not reproduce in this process (a resource hang?)
            continue
        small = shrink(text, finding, args.time_limit, args.shrink_budget, defines)
        entry["reproducer"] = small[:20_000]


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------

def summary(data: dict[str, Any]) -> str:
    """The report as a few lines of text."""
    lines = [f"inputs: {data['inputs']}  crashes: {data['crashes']}  time: {data['seconds']} s  "
             f"({data['inputs_per_second']} inputs/s, {data['jobs']} jobs, seed {data['seed']})"]
    lines.append(f"{'generator':<16}{'inputs':>9}{'crashes':>9}{'mean ms':>10}{'slowest s':>11}")
    for name, s in data["by_generator"].items():
        lines.append(f"{name:<16}{s['inputs']:>9}{s['crashes']:>9}{s['mean_ms']:>10}"
                     f"{s['slowest_s']:>11}")
    for signature, entry in sorted(data["crash_signatures"].items(),
                                   key=lambda item: -item[1]["count"]):
        lines.append(f"  {entry['count']:>6} x {signature}  (first: {entry['generator']} "
                     f"#{entry['index']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="first input index")
    parser.add_argument("--generators", default="",
                        help=f"comma-separated subset of: {', '.join(GENERATORS)}")
    parser.add_argument("--time-limit", type=float, default=20.0,
                        help="seconds per input before it counts as a hang")
    parser.add_argument("--shrink-budget", type=float, default=60.0,
                        help="seconds of shrinking per crash signature (0: none)")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between lines")
    parser.add_argument("--out", type=Path, help="where to write the JSON report")
    parser.add_argument("--replay", type=int, help="rebuild input INDEX, probe and shrink it")
    args = parser.parse_args(argv)
    if args.replay is not None:
        return _replay(args)
    report = run(args)
    data = report.to_dict()
    if args.out:
        args.out.write_text(json.dumps(data, indent=2))
    print(summary(data))
    return 1 if data["crashes"] else 0


def _replay(args: argparse.Namespace) -> int:
    names = args.generators.split(",") if args.generators else None
    name, text, defines = make_input(args.seed, args.replay, load_corpus(), names)
    finding = probe(text, args.time_limit, defines)
    print(f"input {args.replay}: generator {name}, {len(text)} characters, "
          f"defines {describe_defines(defines)}")
    if finding is None:
        print("no crash")
        return 0
    print(f"{finding.kind} in {finding.entry}: {finding.signature}\n{finding.detail}")
    small = shrink(text, finding, args.time_limit, args.shrink_budget, defines)
    print(f"reproducer ({len(small)} characters):\n{small}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

