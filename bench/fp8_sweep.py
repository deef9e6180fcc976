"""Scaled e4m3 GEMMs against torch._scaled_mm: `croqtile bench fp8` with the same options.

    python bench/fp8_sweep.py [--quick] [--sizes S...] [--reps N] [--out DIR] ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import run  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(run(["fp8"], sys.argv[1:]))
