"""A ``.sqz()`` view of a higher-rank tensor moves through one tensor descriptor of the
whole tensor, its dropped dimensions ordered outermost: a head of ``[B, S, H, D]`` is
described as ``[B, H, S, D]`` (strides permuted) with block ``[1, 1, rows, D]``. Triton
3.6 gave wrong attention results on the H200 from the ``[1, rows, 1, D]`` block of the
tensor's own order in a pipelined loop (a unit dimension between the kept ones); the
permuted one is right."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import croqtile

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


# ------------------------------------------------------------------ warp specialisation

# A head of [B, S, H, 32] per block along a grid of G heads: a grid over the output's heads
# reads input heads past H as zeros (the view masked), one over the input's heads writes
# output heads past H2 nowhere.
HEADS_GRID = """
__co__ void heads(global f32 [B, S, H, 32] x, global f32 [B, S, H2, 32] out) {
  parallel.async {r, h, b} by [cdiv(S, 16), G, B] : block {
    x_head = x.subspan(1, S, 1, 32).at(b, 0, h, 0).sqz();
    o_head = out.subspan(1, S, 1, 32).at(b, 0, h, 0).sqz();
    t = dma.copy.zfill x_head.subspan(16, 32).at(r, 0) => shared;
    dma.copy t => o_head.subspan(16, 32).at(r, 0);
  }
}
"""
HEADS_OVER = HEADS_GRID.replace("G, B]", "H2, B]")
HEADS_UNDER = HEADS_GRID.replace("G, B]", "H, B]")

WS = {"warp_specialize": True, "descriptors": "kernel"}


def _compile(text: str, **options: object) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(text, **options)  # type: ignore[arg-type]


def test_with_warp_specialisation_a_head_has_a_descriptor_of_its_own() -> None:
    """Triton 3.6's warp specialisation on Hopper partitions the loads of a block's own
    tile, not of a ``[1, 1, rows, D]`` block reshaped: with ``warp_specialize`` and
    descriptors made in the kernel, a head's view is described by itself, a 2-D
    descriptor starting at the head (made once the block's coordinates are known), and
    the tile is loaded without a reshape."""
    source = _compile(HEADS_OVER, **WS).heads.triton_source
    made = re.findall(r"(\w+) = tl\.make_tensor_descriptor\((.*)\)", source)
    assert [name for name, _ in made] == ["x_view_desc", "out_view_desc"]
    x_args = made[0][1]
    assert x_args.startswith("x_ptr + ((b * (32 * d_H * d_S)) + (h * 32))")
    assert "shape=[d_S, 32], strides=[(32 * d_H), 1], block_shape=[16, 32]" in x_args
    # a head past the tensor's shifts the rows past the view's end: zeros, no writes
    assert "x_view_past = tl.where(((b < d_B) & (h < d_H)), 0, d_S)" in source
    assert "x_view_desc.load([((r * 16) + x_view_past), 0])" in source
    assert "out_view_desc.store([((r * 16) + out_view_past), 0]" in source
    assert "tl.reshape" not in source
    # the descriptors come after the block's coordinates
    assert source.index("x_view_desc = ") > source.index("h = ")
    # without warp specialisation, one descriptor of the whole tensor, heads first
    plain = _compile(HEADS_OVER, descriptors="kernel").heads.triton_source
    assert "view_desc" not in plain and "block_shape=[1, 1, 16, 32]" in plain


@pytest.mark.parametrize("heads,heads_out", [(3, 3), (2, 3), (3, 2)],
                         ids=["same", "input-short", "output-short"])
def test_head_descriptors_read_zeros_and_write_nothing_past_the_tensor(
        heads: int, heads_out: int) -> None:
    """The grid walks the larger of the two head counts: the input's heads past its own
    read as zeros, and the output's heads past its own are not written (the memory after
    them intact) -- as with the whole tensor's descriptor and with pointer loads."""
    b, s = 2, 40
    x = random((b, s, heads, 32), torch.float32)
    text = HEADS_OVER if heads_out >= heads else HEADS_UNDER
    expected = torch.zeros(b, s, heads_out, 32)
    common = min(heads, heads_out)
    expected[:, :, :common] = x[:, :, :common]
    for options in (WS, {"descriptors": "kernel"}, {"descriptors": False}):
        mod = _compile(text, **options)
        # the output inside a larger buffer: a write past its heads would land in the rest
        whole = poison(torch.empty(b, s, heads_out + 1, 32))
        out = whole[:, :, :heads_out]
        mod.heads(x, out)
        assert torch.isnan(whole[:, :, heads_out:]).all(), options
        assert torch.equal(out, expected), options
