"""Warm calls watched for file and compiler work, in a process of their own:

    python -m tests.watched_calls cpu|cuda|launcher

prints a JSON object: per call, what its warm calls did (empty lists when nothing), and
under "cold" what a first call did (the control: the watch sees that work).

Watched: Python's audit events that touch files or load code (``open``, ``import``,
``compile``, ``exec``, ``os.*``...), ``os.stat``/``os.lstat`` (which raise none, and
which ``Path.exists`` and ``os.path.exists`` end in), the loading of a generated module,
and Triton compiles. A process of its own because an audit hook cannot be removed and
``id()`` raises an audit event: in the test process the hook would slow every later
compile (the compiler calls ``id()`` millions of times)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

# audit events that read or change files, load code or start processes
_FILE_EVENTS = ("open", "import", "compile", "exec", "glob.glob", "subprocess.Popen",
                "ctypes.dlopen", "marshal.loads")
_FILE_EVENT_PREFIXES = ("os.", "shutil.", "tempfile.", "pathlib.")


class Watch:
    """Records, while ``active``, every watched action as a line in ``seen``."""

    def __init__(self) -> None:
        import triton

        import croqtile.runtime.module

        self.seen: list[str] = []
        self.active = False
        sys.addaudithook(self._audit)
        for module, name in [(os, "stat"), (os, "lstat"), (croqtile.runtime.module, "load_module"),
                             (triton, "compile")]:
            setattr(module, name, self._counting(name, getattr(module, name)))

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active and (event in _FILE_EVENTS or event.startswith(_FILE_EVENT_PREFIXES)):
            self.seen.append(f"{event} {str(args)[:120]}")

    def _counting(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.seen.append(f"{name} {str(args)[:120]}")
            return real(*args, **kwargs)
        return counted

    def run(self, fn: Callable[[], Any]) -> list[str]:
        """What ``fn()`` did."""
        self.seen, self.active = [], True
        try:
            fn()
        finally:
            self.active = False
        return self.seen


def _warm(calls: list[tuple[str, Any, Callable[[], tuple[Any, ...]], Any]],
          cold: Callable[[], Any]) -> dict[str, list[str]]:
    for _, function, args, check in calls:
        for _ in range(2):  # (the checks too: what they import first is not the call's)
            values = args()
            check(function(*values), values)
    watch = Watch()
    report: dict[str, list[str]] = {}
    for name, function, args, check in calls:
        def three(function: Any = function, args: Any = args, check: Any = check) -> None:
            for _ in range(3):
                values = args()
                check(function(*values), values)
        report[name] = watch.run(three)
    report["cold"] = watch.run(cold)
    return report


def _launcher() -> dict[str, list[str]]:
    """The launcher's GPU path without a GPU: the device index, the allocator and the
    final launch of a compiled kernel (Triton's C launcher) are stand-ins."""
    import torch

    from croqtile.backends.triton import launcher as launcher_module
    from croqtile.backends.triton.launcher import Launcher

    from .test_call_overhead import CUDA, StandInCompiled

    direct: list[Any] = []
    launcher_module._ensure_allocator = lambda: None  # type: ignore[assignment]
    launcher_module._current_device = lambda: 0  # type: ignore[assignment]
    launcher_module._launch_compiled = (  # type: ignore[assignment]
        lambda compiled, grid, args, device: direct.append(compiled))
    kernel, launch = StandInCompiled(), Launcher()
    x = torch.zeros(64)
    launch(kernel, (2,), (x, 7, 2.0), num_warps=4, num_stages=3, device=CUDA)
    watch = Watch()

    def three() -> None:
        for _ in range(3):
            launch(kernel, (2,), (x, 7, 2.5), num_warps=4, num_stages=3, device=CUDA)

    seen = watch.run(three)
    assert len(direct) == 3 and len(kernel.launched) == 1, (direct, kernel.launched)
    return {"launcher": seen, "cold": watch.run(lambda: __import__("json.tool"))}


def main(mode: str) -> dict[str, list[str]]:
    if mode == "launcher":
        return _launcher()
    import torch

    import croqtile

    from .library.test_registration import SCALE_ADD

    if mode == "cpu":
        from .test_warm_calls import calls
    else:
        from .gpu.test_graphs import watched_calls as calls
    device = "cuda" if mode == "cuda" else "cpu"

    def cold() -> None:  # a function compiled now, called for the first time
        fresh = croqtile.compile(SCALE_ADD.replace("* a +", "* a * 2.0f +")).scale_add
        x = torch.randn(64, device=device)
        fresh(x, x, torch.empty(64, device=device), 1.0)

    return _warm(calls(), cold)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
