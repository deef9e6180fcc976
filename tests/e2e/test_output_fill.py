"""Buffers a function declares are made without a zero fill only where the first kernel
provably writes every element before anything reads them (backends/ir/coverage.py): the
host code says ``torch.empty`` for those and ``torch.zeros`` for the rest, and outputs made
without a fill are checked element by element with ``torch.empty`` poisoned."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import croqtile

from .checks import assert_close, poisoned_empty, random

KERNELS = Path(croqtile.__file__).resolve().parent / "kernels"

COPY = """
__co__ auto copy2d(s32 [M, N] src) {
  s32 [M, N] dst;
  parallel {bm, bn} by [cdiv(M, 8), cdiv(N, 16)] : block {
    t = dma.copy.zfill src.subspan(8, 16).at(bm, bn) => shared;
    WRITE
  }
  return dst;
}
"""
FULL = "dma.copy t.data => dst.subspan(8, 16).at(bm, bn);"


def _allocation(source: str) -> str:
    """The host line that makes ``dst``."""
    module = croqtile.compile(source)
    lines = [line.strip() for line in module.copy2d.triton_source.splitlines()
             if line.strip().startswith("dst = torch.")]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_tiled_copy_over_the_whole_grid_makes_its_output_without_a_fill() -> None:
    assert _allocation(COPY.replace("WRITE", FULL)).startswith("dst = torch.empty(")


@pytest.mark.parametrize("grid, write", [
    # the grid stops short of the last partial tile
    ("[M / 8, cdiv(N, 16)]", FULL),
    # every block writes the same tile row
    ("[cdiv(M, 8), cdiv(N, 16)]", "dma.copy t.data => dst.subspan(8, 16).at(0, bn);"),
    # one block variable for both dimensions
    ("[cdiv(M, 8), cdiv(N, 16)]", "dma.copy t.data => dst.subspan(8, 16).at(bm, bm);"),
    # a store not every block runs
    ("[cdiv(M, 8), cdiv(N, 16)]", f"if (bm > 0) {{ {FULL} }}"),
    # a tile read back before it is written
    ("[cdiv(M, 8), cdiv(N, 16)]",
     "u = dma.copy dst.subspan(8, 16).at(bm, bn) => shared; " + FULL),
    # tiles stepped by less than their extent (overlapping; the tail is not reached)
    ("[cdiv(M, 8), cdiv(N, 16)]",
     "dma.copy t.data => dst.subspan(8, 16).step(4, 16).at(bm, bn);"),
])
def test_anything_short_of_a_proof_keeps_the_zero_fill(grid: str, write: str) -> None:
    source = COPY.replace("[cdiv(M, 8), cdiv(N, 16)]", grid).replace("WRITE", write)
    assert _allocation(source).startswith("dst = torch.zeros(")


@pytest.mark.parametrize("shape", [(8, 16), (13, 37), (1, 5)])
def test_an_output_made_without_a_fill_is_written_everywhere(shape: tuple[int, int]) -> None:
    module = croqtile.compile(COPY.replace("WRITE", FULL))
    src = random(shape, torch.int32)
    with poisoned_empty():
        out = module.copy2d(src)
    assert torch.equal(out, src)


@pytest.mark.parametrize("M, N, K", [(16, 32, 16), (37, 45, 29)])
def test_the_nn_linear_kernel_output_is_made_without_a_fill_and_written_in_full(
        M: int, N: int, K: int) -> None:
    defines = {"DT": "f32", "BM": 16, "BN": 16, "BK": 16}
    module = croqtile.compile((KERNELS / "linear.co").read_text(), defines=defines)
    assert "y = torch.empty(" in module.linear.triton_source
    x, w, bias = (random(s, torch.float32) for s in ((M, K), (N, K), (N,)))
    with poisoned_empty():
        y = module.linear(x, w, bias)
    expected = x.double() @ w.double().T + bias.double()
    assert_close(y, expected, torch.float32)
