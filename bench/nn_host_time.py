"""Host time of a warm croqtile.nn call against torch's own op for the same work, at decode
sizes: what a model in eager mode waits for when its GPU is fast.

Each form is called ``--calls`` times in a row while the GPU is kept busy (a
``torch.cuda._sleep`` queued first, long enough to outlast the calls), so that every call
only queues its kernels: the CPU time per call is then the host path alone (binding,
checks, dispatch, the launch), not the GPU's. The calls must fit the launch queue (about
a thousand kernels): past it a launch waits for the GPU, and a form whose library call
launches two kernels (cuBLAS at some shapes) would be timed at the GPU's pace (1,000
calls gave F.linear 108-120 us at two shapes on an H100; 200 calls, 12-15 us). Forms are timed in turns, ``--reps`` rounds;
a figure is the median over the rounds, and ``extra_us`` the median over the rounds of
croqtile's time minus torch's in the same round. Outputs are checked against torch's
first (relative error 1e-2 in bf16).

Pairs: ``croqtile.nn.functional.linear`` against ``F.linear`` at M = 16 rows (Llama-3-8B's
q/o, k/v, gate/up and down widths); ``rms_norm`` against ``F.rms_norm``. Needs CUDA.

    python bench/nn_host_time.py [--calls 200] [--reps 7] [--out OUT.csv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rows import write_csv  # noqa: E402

from croqtile.bench.harness import host_us_per_call  # noqa: E402

ROWS = 16
SHAPES = {"q/o": (4096, 4096), "k/v": (1024, 4096), "gate/up": (14336, 4096),
          "down": (4096, 14336)}
SLEEP_CYCLES_PER_CALL = 200_000  # GPU cycles queued per timed call (~0.1 ms at 2 GHz)


def host_us(fn: Callable[[], Any], calls: int) -> float:
    """CPU microseconds per call of ``fn`` while the GPU is busy with a queued sleep."""
    return host_us_per_call(fn, calls, busy_cycles=SLEEP_CYCLES_PER_CALL * calls)


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


def pairs(dtype: torch.dtype) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """label -> (croqtile's call, torch's call) on the same tensors."""
    import croqtile.nn.functional as cf

    found: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    for name, (n, k) in SHAPES.items():
        x = torch.randn(ROWS, k, device="cuda", dtype=dtype)
        w = torch.randn(n, k, device="cuda", dtype=dtype) * k ** -0.5
        found[f"linear {name} M={ROWS}"] = ((lambda x=x, w=w: cf.linear(x, w)),
                                           (lambda x=x, w=w: F.linear(x, w)))
    x = torch.randn(ROWS, 4096, device="cuda", dtype=dtype)
    g = torch.randn(4096, device="cuda", dtype=dtype)
    found[f"rms_norm 4096 M={ROWS}"] = ((lambda: cf.rms_norm(x, (4096,), g, 1e-5)),
                                       (lambda: F.rms_norm(x, (4096,), g, 1e-5)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    rows, failed = [], 0
    with torch.inference_mode():
        for label, (ours, theirs) in pairs(torch.bfloat16).items():
            error = relative_error(ours(), theirs())
            if not error <= 1e-2:
                print(f"{label}: WRONG (relative error {error:.2e})", file=sys.stderr)
                failed += 1
                continue
            for _ in range(3):  # (warm: compiled, plans made)
                ours(), theirs()
            mine, base = [], []
            for _ in range(args.reps):
                mine.append(host_us(ours, args.calls))
                base.append(host_us(theirs, args.calls))
            row = {"case": label, "croqtile_host_us": round(statistics.median(mine), 2),
                   "torch_host_us": round(statistics.median(base), 2),
                   "extra_us": round(statistics.median(m - b for m, b in zip(mine, base)), 2),
                   "rel_error": f"{error:.2e}"}
            rows.append(row)
            print(f"{label:<24} croqtile {row['croqtile_host_us']:7.2f} us  torch "
                  f"{row['torch_host_us']:7.2f} us  extra {row['extra_us']:+6.2f} us",
                  flush=True)
    if args.out is not None and rows:
        write_csv(rows, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
