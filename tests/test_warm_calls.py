"""A warm call (a known argument signature) touches no file, imports and compiles
nothing, and allocates nothing but its outputs -- what capturing it in a CUDA graph and
calling it at launch-bound sizes rely on. Checked on the CPU path (Triton's interpreter)
and on the launcher's GPU path with a stand-in compiled kernel; ``tests/gpu/test_graphs.py``
checks the real GPU path."""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
import warnings
from typing import Any, Callable, Iterator

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import croqtile
import croqtile.module
from croqtile.backends.triton import launcher as launcher_module
from croqtile.backends.triton.launcher import Launcher

from .e2e.checks import DATA, assert_close, poison, random
from .e2e.test_symbolic_extents import WHOLE_TILE
from .library.test_registration import CONCAT, SCALE_ADD
from .test_call_overhead import CUDA, StandInCompiled

# audit events that read or change files, load code or start processes
_FILE_EVENTS = ("open", "import", "compile", "exec", "glob.glob", "subprocess.Popen",
                "ctypes.dlopen", "marshal.loads")
_FILE_EVENT_PREFIXES = ("os.", "shutil.", "tempfile.", "pathlib.")

_WATCHES: list[Watch] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHES and (event in _FILE_EVENTS or event.startswith(_FILE_EVENT_PREFIXES)):
        for watch in _WATCHES:
            watch.seen.append(f"{event} {str(args)[:120]}")


_HOOKED: list[bool] = []


class Watch:
    """While active: Python's audit events that touch files or load code (``open``,
    ``import``, ``compile``, ``exec``, ``os.*``...), plus ``os.stat``/``os.lstat``
    (which have none: ``Path.exists`` and ``os.path.exists`` end there), plus the loading
    of a generated module and Triton compiles, each as a line in ``seen``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self.monkeypatch = monkeypatch
        if not _HOOKED:  # (audit hooks cannot be removed: one for the process)
            sys.addaudithook(_audit)
            _HOOKED.append(True)

    def _counting(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self in _WATCHES:
                self.seen.append(f"{name} {str(args)[:120]}")
            return real(*args, **kwargs)
        return counted

    def __enter__(self) -> Watch:
        import triton

        for module, name in [(os, "stat"), (os, "lstat"), (croqtile.module, "load_module"),
                             (triton, "compile")]:
            self.monkeypatch.setattr(module, name,
                                     self._counting(name, getattr(module, name)))
        _WATCHES.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _WATCHES.remove(self)


@pytest.fixture()
def watch(monkeypatch: pytest.MonkeyPatch) -> Watch:
    return Watch(monkeypatch)


def _quiet_compile(source: str, **kw: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(source, **kw)


def _calls() -> list[tuple[str, Any, Callable[[], tuple[Any, ...]], Callable[..., None]]]:
    """(name, function, fresh arguments, check of the call's effect) for a function
    writing in place through its operator, one returning a tensor, one compiled per
    shape, and a GEMM taking host tensor descriptors."""
    scale_add = _quiet_compile(SCALE_ADD, library="warm_calls_a").scale_add
    stack = _quiet_compile(CONCAT, library="warm_calls_b").stack
    staged = _quiet_compile(WHOLE_TILE).stage3
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


def test_warm_calls_touch_no_file_and_compile_nothing(watch: Watch) -> None:
    calls = _calls()
    for _, function, args, _ in calls:
        for _ in range(2):
            function(*args())
    with watch:
        for name, function, args, check in calls:
            for _ in range(3):
                values = args()
                check(function(*values), values)
            assert watch.seen == [], f"{name}: {watch.seen[:5]}"
        # a cold call is seen: the check can fail
        fresh = _quiet_compile(SCALE_ADD.replace("* a +", "* a * 2.0f +")).scale_add
        fresh(random((64,), torch.float32), random((64,), torch.float32), torch.empty(64), 1.0)
    assert any(line.startswith("load_module") for line in watch.seen)
    assert any(line.startswith(("open", "exec", "import")) for line in watch.seen)


class _Allocations(TorchDispatchMode):
    """The torch operators called while active (those making tensors among them)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


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
    for name, function, args, _ in _calls():
        values = args()
        for _ in range(2):
            function(*values)
        with _Allocations() as seen:  # (the call itself: an operator's body is not seen)
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
    _, function, args, _ = _calls()[0]
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


@pytest.fixture()
def gpu_launch_stand_ins(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The launcher's GPU path without a GPU: the device index, the allocator and the
    final launch of a compiled kernel (Triton's C launcher) are stand-ins."""
    direct: list[Any] = []
    monkeypatch.setattr(launcher_module, "_ensure_allocator", lambda: None)
    monkeypatch.setattr(launcher_module, "_current_device", lambda: 0)
    monkeypatch.setattr(launcher_module, "_launch_compiled",
                        lambda compiled, grid, args, device: direct.append(compiled))
    yield direct


def test_warm_gpu_launches_touch_no_file(gpu_launch_stand_ins: list[Any], watch: Watch) -> None:
    kernel, launch = StandInCompiled(), Launcher()
    x = torch.zeros(64)
    launch(kernel, (2,), (x, 7, 2.0), num_warps=4, num_stages=3, device=CUDA)
    with watch:
        for _ in range(3):
            launch(kernel, (2,), (x, 7, 2.5), num_warps=4, num_stages=3, device=CUDA)
    assert watch.seen == []
    assert len(gpu_launch_stand_ins) == 3 and len(kernel.launched) == 1
