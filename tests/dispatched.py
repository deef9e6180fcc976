"""Which torch operators a piece of code dispatches: ``with Dispatched() as seen: ...``,
then ``seen.ops`` (their names, in order). Tests use it to see that a call goes through
a registered operator, which Croqtile operators ran, or which tensors a warm call makes."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class Dispatched(TorchDispatchMode):
    """Records the operators dispatched while active (an operator's own body is not seen:
    the mode is off while it runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))
