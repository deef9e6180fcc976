"""bench/op_overhead.py: on a GPU it checks every form, times them and writes its report;
without one it says that it needs one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def test_op_overhead_bench(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "op_overhead.py"), "--out",
                          str(tmp_path), "--calls", "200", "--reps", "3"],
                         capture_output=True, text=True, timeout=600)
    if not torch.cuda.is_available():
        assert run.returncode == 2 and "needs a CUDA device" in run.stderr
        assert not (tmp_path / "op_overhead.json").exists()
        return
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "op_overhead.json").read_text())
    assert report["decomposed"] is True
    assert set(report["us_per_call"]) == {"croqtile_compiled", "hand_compiled",
                                          "croqtile_eager_op", "croqtile_eager_call",
                                          "hand_eager", "triton_direct"}
    assert all(us > 0 for us in report["us_per_call"].values())
    assert "croqtile_compiled / hand_compiled" in run.stdout
    rows = (tmp_path / "op_overhead.csv").read_text().splitlines()
    assert rows[0] == "form,us_per_call,ratio_to_hand_compiled" and len(rows) == 7
