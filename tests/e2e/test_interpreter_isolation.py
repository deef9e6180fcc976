"""Running a kernel through Triton's interpreter must leave triton.language untouched, or
later GPU compiles in the same process break."""

from __future__ import annotations

import torch
import triton.language as tl

import croqtile

from .checks import DATA, random


def test_interpreter_leaves_triton_language_unpatched() -> None:
    before = {n: getattr(tl.core, n) for n in dir(tl.core) if not n.startswith("_")}
    mod = croqtile.load(DATA / "seed004_dma_matmul.co")  # its K loop becomes tl.sum
    assert "tl.sum(" in mod.matmul.triton_source
    mod(random((128, 256), torch.int32), random((256, 256), torch.int32))
    after = {n: getattr(tl.core, n) for n in dir(tl.core) if not n.startswith("_")}
    assert [n for n in before if before[n] is not after.get(n)] == []
