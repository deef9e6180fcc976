"""Compiling a seed kernel (frontend, checker, lowering, codegen; Triton's own JIT
excluded) takes well under 100 ms."""

from __future__ import annotations

import statistics
import time

import pytest

from croqtile.driver import compile_source

from .e2e.checks import DATA

SEEDS = sorted(p.name for p in DATA.glob("seed*.co"))


@pytest.mark.parametrize("name", SEEDS)
def test_compile_is_fast(name: str) -> None:
    text = (DATA / name).read_text()
    compile_source(text, filename=name)  # warm imports
    times = []
    for _ in range(5):
        start = time.perf_counter()
        compile_source(text, filename=name)
        times.append(time.perf_counter() - start)
    assert statistics.median(times) < 0.1, f"{name}: {statistics.median(times) * 1e3:.1f} ms"
