"""Llama-3 8B/70B linear layers at M = 16 ... 4096: `croqtile bench llm` with the same options.

    python bench/llm_sweep.py [--quick] [--dtype f16 bf16] [--reps N] [--out DIR] ...
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import run  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(run(["llm"], sys.argv[1:]))
