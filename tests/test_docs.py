"""Documentation that runs: the docstring examples and the job of `make run` (the code
blocks of README.md and docs/ run in tests/docs)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import croqtile.api

ROOT = Path(__file__).resolve().parent.parent


def test_docstring_examples() -> None:
    result = doctest.testmod(croqtile.api, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_make_run_job_on_the_cpu() -> None:
    """The main job of `make run`, at a small shape."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "seed_gemm.py"), "--shape",
                           "96", "80", "72"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "96x80x72" in done.stdout and "PASSED" in done.stdout
