"""Which operators a call runs: the tests of croqtile.nn check that a covered call runs
the Croqtile kernels (and does not quietly take torch's path) and an uncovered one runs
none of them."""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

from croqtile.nn.kernels import NAMESPACE


class Ran(TorchDispatchMode):
    """Records the operators dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def croqtile(self) -> list[str]:
        """The Croqtile operators among them, in order."""
        return [op for op in self.ops if op.startswith(NAMESPACE + ".")]


def croqtile_ops(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """``fn(*args, **kwargs)`` and the Croqtile operators it ran."""
    with Ran() as ran:
        result = fn(*args, **kwargs)
    return result, ran.croqtile()
