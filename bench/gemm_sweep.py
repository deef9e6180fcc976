"""Square f16/bf16 GEMMs, 512 to 8192: `croqtile bench square` with the same options.

    python bench/gemm_sweep.py [--quick] [--dtype f16 bf16] [--reps N] [--out DIR] ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import run  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(run(["square"], sys.argv[1:]))
