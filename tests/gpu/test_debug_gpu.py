"""``debug=True`` on the GPU: an out-of-range index from data trips a device assertion
whose message names the Croqtile line. A failed device assertion leaves the CUDA context
unusable, so each failing kernel runs in a subprocess whose output is checked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import croqtile

from ..debug.test_debug_checks import GATHER
from ..e2e.checks import DATA, poison, random

ROOT = Path(__file__).resolve().parents[2]

GATHER_SCRIPT = f"""
import torch, croqtile
mod = croqtile.compile({GATHER!r}, filename="gather.co", debug=True)
x = torch.randn(32, device="cuda")
idx = torch.randint(0, 32, (48,), dtype=torch.int32, device="cuda")
idx[17] = 40
y = torch.empty(48, device="cuda")
mod.gather(x, idx, y)
torch.cuda.synchronize()
print("NO ASSERTION")
"""

SCHEDULE_SCRIPT = f"""
import torch, croqtile
src = open({str(DATA / "persistent_schedule.co")!r}).read()
mod = croqtile.compile(src, filename="schedule.co", debug=True)
a = torch.randn(48, 32, device="cuda").half()
b = torch.randn(32, 32, device="cuda").half()
c = torch.empty(48, 32, device="cuda").half()
order_m = torch.tensor([0, 0, 1, 1, 2, 2], dtype=torch.int32, device="cuda")
order_n = torch.tensor([0, 1, 0, 7, 0, 1], dtype=torch.int32, device="cuda")
mod.scheduled(a, b, c, order_m, order_n)
torch.cuda.synchronize()
print("NO ASSERTION")
"""


def _run(script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CROQTILE_DEBUG"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.gpu
@pytest.mark.parametrize("script, expected", [
    (GATHER_SCRIPT, "gather.co:5: index out of range in x.at(idx.at(p # t))"),
    (SCHEDULE_SCRIPT, "schedule.co:16: a tile read of 'b' out of range"),
], ids=["gather", "schedule"])
def test_out_of_range_trips_a_device_assertion_naming_the_line(script: str,
                                                               expected: str) -> None:
    result = _run(script)
    output = result.stdout + result.stderr
    assert "NO ASSERTION" not in output, output[-4000:]
    assert result.returncode != 0
    assert expected in output, output[-4000:]


@pytest.mark.gpu
def test_in_range_gather_runs_in_debug_mode_on_the_gpu() -> None:
    mod = croqtile.compile(GATHER, filename="gather.co", debug=True)
    x = random((29,), torch.float32, "cuda")
    idx = torch.randint(0, 29, (37,), dtype=torch.int32, device="cuda")
    y = poison(torch.empty(37, device="cuda"))
    mod.gather(x, idx, y)
    torch.cuda.synchronize()
    assert torch.equal(y.double().cpu(), x.double().cpu()[idx.long().cpu()])
