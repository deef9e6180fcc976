"""Which operators a call runs: the tests of croqtile.nn check that a covered call runs
the Croqtile kernels (and does not quietly take torch's path) and an uncovered one runs
none of them."""

from __future__ import annotations

from typing import Any

from croqtile.nn.kernels import NAMESPACE

from ..dispatched import Dispatched


class Ran(Dispatched):
    """Records the operators dispatched while active."""

    def croqtile(self) -> list[str]:
        """The Croqtile operators among them, in order."""
        return [op for op in self.ops if op.startswith(NAMESPACE + ".")]


def croqtile_ops(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """``fn(*args, **kwargs)`` and the Croqtile operators it ran."""
    with Ran() as ran:
        result = fn(*args, **kwargs)
    return result, ran.croqtile()
