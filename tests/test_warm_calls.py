"""A warm call (a known argument signature) touches no file, imports and compiles
nothing, and allocates nothing but its outputs -- what capturing it in a CUDA graph and
calling it at launch-bound sizes rely on. Checked on the CPU path (Triton's interpreter)
and on the launcher's GPU path with a stand-in compiled kernel (the file and compiler
watch runs in a process of its own: ``tests/watched_calls.py``);
``tests/gpu/test_graphs.py`` checks the real GPU path."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.backends.triton.launcher import Launcher

from .dispatched import Dispatched
from .e2e.checks import DATA, assert_close, poison, random
from .e2e.test_symbolic_extents import WHOLE_TILE
from .library.test_registration import CONCAT, SCALE_ADD

ROOT = Path(__file__).resolve().parent.parent


def watched(mode: str) -> dict[str, list[str]]:
    """``tests.watched_calls``'s report, run in a process of its own (see there why)."""
    run = subprocess.run([sys.executable, "-m", "tests.watched_calls", mode], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.splitlines()[-1])


def quiet_compile(source: str, **kw: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(source, **kw)


def calls() -> list[tuple[str, Any, Callable[[], tuple[Any, ...]], Callable[..., None]]]:
    """(name, function, fresh arguments, check of the call's effect) for a function
    writing in place through its operator, one returning a tensor, one compiled per
    shape, and a GEMM taking host tensor descriptors."""
    scale_add = quiet_compile(SCALE_ADD, library="warm_calls_a").scale_add
    stack = quiet_compile(CONCAT, library="warm_calls_b").stack
    staged = quiet_compile(WHOLE_TILE).stage3
    gemm = croqtile.load(DATA / "seed000_sm90_gemm.co")
    matmul = next(iter(gemm.functions.values()))
    x, y = random((100,), torch.float32), random((100,), torch.float32)
    a, b = random((3, 4), torch.float32), random((5, 4), torch.float32)
    t = random((3, 5, 7), torch.float32)
    lhs, rhs = random((64, 32), torch.float16), random((48, 32), torch.float16)

    def scaled(result: Any, args: tuple[Any, ...]) -> None:
        assert result is None
        assert_close(args[2], 3.0 * x.double() + y.double(), torch.float32)

    def stacked(result: Any, args: tuple[Any, ...]) -> None:
        assert_close(result, torch.cat([a, 2 * b]).double(), torch.float32)

    def copied(result: Any, args: tuple[Any, ...]) -> None:
        assert torch.equal(args[1], t)

    def multiplied(result: Any, args: tuple[Any, ...]) -> None:
        assert_close(args[2], lhs.double() @ rhs.double().T, torch.float16)

    return [("scale_add", scale_add, lambda: (x, y, poison(torch.empty(100)), 3.0), scaled),
            ("stack", stack, lambda: (a, b), stacked),
            ("stage3", staged, lambda: (t, poison(torch.empty(3, 5, 7))), copied),
            ("matmul", matmul, lambda: (lhs, rhs, poison(torch.empty(64, 48).half())),
             multiplied)]


def test_warm_calls_touch_no_file_and_compile_nothing() -> None:
    report = watched("cpu")
    cold = report.pop("cold")
    assert report == {name: [] for name in ("scale_add", "stack", "stage3", "matmul")}
    # a cold call is seen: the watch can fail
    assert any(line.startswith("load_module") for line in cold), cold
    assert any(line.startswith(("open", "exec", "import")) for line in cold), cold


@pytest.fixture()
def no_launches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Launches counted, not run: what is left of a call is croqtile's own path."""
    launched = [0]

    def count(self: Launcher, kernel: Any, grid: Any, args: Any, **options: Any) -> None:
        launched[0] += 1

    monkeypatch.setattr(Launcher, "__call__", count)
    return launched


def test_warm_calls_allocate_only_their_outputs(no_launches: list[int]) -> None:
    made = {"scale_add": [], "stack": ["aten.zeros.default"], "stage3": [], "matmul": []}
    for name, function, args, _ in calls():
        values = args()
        for _ in range(2):
            function(*values)
        with Dispatched() as seen:  # (the call itself: an operator's body is not seen)
            function.call(*values)
        assert seen.ops == made[name], name
        launches = no_launches[0]
        gc.collect()
        tracemalloc.start()
        try:
            for _ in range(20):  # (caches that fill on the first calls fill here)
                function(*values)
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(1000):
                function(*values)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 4096, f"{name}: 1000 warm calls kept {grown} bytes"
        assert no_launches[0] - launches == 1020  # (every call launched its kernel)


def test_memory_kept_by_calls_is_seen(no_launches: list[int]) -> None:
    """The measurement above can fail: a call that keeps its arguments is caught."""
    _, function, args, _ = calls()[0]
    kept: list[Any] = []
    values = args()
    function(*values)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            function(*values)
            kept.append((values, None))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown >= 4096


def test_warm_gpu_launches_touch_no_file() -> None:
    """The launcher's GPU path with a stand-in compiled kernel (tests.watched_calls)."""
    report = watched("launcher")
    assert report["launcher"] == []
    assert any(line.startswith("import") for line in report["cold"])
