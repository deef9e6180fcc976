"""bench/model_queue_ahead.py: without a GPU it says that it needs one (and writes
nothing); a form it does not know is refused by its arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .bench_scripts import BENCH

SCRIPT = BENCH / "model_queue_ahead.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_without_a_gpu_it_says_so(tmp_path: Path) -> None:
    out = tmp_path / "q.csv"
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and "needs a CUDA device" in run.stderr
    assert not out.exists()


def test_an_unknown_form_is_refused() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--forms", "croqtile_fast"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "invalid choice: 'croqtile_fast'" in run.stderr
