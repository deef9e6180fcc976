"""A ``.sqz()`` view of a higher-rank tensor moves through one tensor descriptor of the
whole tensor, its dropped dimensions ordered outermost: a head of ``[B, S, H, D]`` is
described as ``[B, H, S, D]`` (strides permuted) with block ``[1, 1, rows, D]``. Triton
3.6 gave wrong attention results on the H200 from the ``[1, rows, 1, D]`` block of the
tensor's own order in a pipelined loop (a unit dimension between the kept ones); the
permuted one is right."""

from __future__ import annotations

import re

import pytest
import torch

from .checks import compile_clean, poison, random

HEADS = """
__co__ void heads(global f32 [B, S, H, 32] x, global f32 [B, S, H, 32] out) {
  parallel.async {r, h, b} by [cdiv(S, 16), H, B] : block {
    x_head = x.subspan(1, S, 1, 32).at(b, 0, h, 0).sqz();
    o_head = out.subspan(1, S, 1, 32).at(b, 0, h, 0).sqz();
    foreach {k} in [1] {
      t = dma.copy x_head.subspan(16, 32).at(r, 0) => shared;
      dma.copy t => o_head.subspan(16, 32).at(r, 0);
    }
  }
}
"""


def test_a_head_of_sequence_major_tensors_is_described_heads_first() -> None:
    mod = compile_clean(HEADS)
    source = mod.heads.triton_source
    # the descriptors: shape (B, H, S, 32), strides (32*H*S, 32, 32*H, 1), block (1, 1, 16, 32)
    # (a stride may be a parenthesized product: one level of nesting)
    group = r"(\((?:[^()]|\([^()]*\))*\))"
    descriptors = re.findall(rf"launch\.descriptor\((\w+), {group}, {group}, {group}\)",
                             source)
    # (the store is masked at the sequence's tail: pointer stores)
    assert [name for name, *_ in descriptors] == ["x"]
    for _, shape, strides, block in descriptors:
        assert [s.strip() for s in shape.strip("(,)").split(",")] == ["d_B", "d_H", "d_S", "32"]
        assert block.replace(" ", "") == "(1,1,16,32)"
        assert [t.strip() for t in strides[1:-1].rstrip(",").split(",")] == [
            "(32 * d_H * d_S)", "32", "(32 * d_H)", "1"]  # H's stride comes second
    assert re.search(r"x_desc\w*\.load\(\[b, h, \(?r \* 16\)?, 0\]\)", source)


@pytest.mark.parametrize("shape", [(2, 40, 3, 32), (1, 16, 1, 32)])
def test_heads_move_through_permuted_descriptors(shape: tuple[int, ...]) -> None:
    mod = compile_clean(HEADS)
    x = random(shape, torch.float32)
    out = poison(torch.empty(shape))
    mod.heads(x, out)
    assert torch.equal(out, x)
