"""Every benchmark sweep (square, llm, fp8, memory, attention, epilogue, decode) into
bench/results/h200/: the same as `croqtile bench all`, for a checkout where the console
script is not on PATH.

    python bench/run_all.py [SWEEP...] [--quick] [--autotune quick] [--device cpu] ...
"""

from __future__ import annotations

import sys

from croqtile.cli import main


def run(sweeps: list[str], argv: list[str]) -> int:
    """``croqtile bench SWEEPS ARGV``; returns its exit status."""
    return main(["bench", *sweeps, *argv])


if __name__ == "__main__":
    raise SystemExit(run([], sys.argv[1:]))
