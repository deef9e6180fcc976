"""How a tensor argument lies in memory, as every execution path sees it. Both paths
take any strides (the Triton kernels read them, the reference interpreter works on a
contiguous copy); what none can do is write a tensor whose elements share memory."""

from __future__ import annotations

import torch


def shared_elements(tensor: torch.Tensor) -> str | None:
    """Why writing ``tensor`` in place is ill-defined -- a dimension of more than one
    element with stride 0 (an expanded or broadcast tensor: its elements share memory, so
    which write lands is up to the schedule) -- or None. This is the test torch's own
    in-place operations make; strides that overlap otherwise are, as there, not looked for."""
    for dim, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
        if size > 1 and stride == 0:
            return (f"its elements share memory (stride 0 along dimension {dim} of size "
                    f"{size}: an expanded tensor); pass a tensor with memory of its own, "
                    "e.g. a new tensor or .clone(), and read the result from it")
    return None
