"""Targeted checks on generated Triton (not whole-file snapshots)."""

from __future__ import annotations

import croqtile

ADD = """
__co__ void add(global f32 [N] x, global f32 [N] y) {
  parallel p by cdiv(N, 128) : block {
    parallel t by 128 : thread
      y.at(p # t) = x.at(p # t) + 1.0f;
  }
}
"""

STATIC_ADD = """
__co__ s32 [64, 128] add(s32 [64, 128] a) {
  s32 [a.span] out;
  parallel {bm, bn} by [4, 8] : block {
    parallel {i, j} by [16, 16] : thread
      out.at(bm # i, bn # j) = a.at(bm # i, bn # j);
  }
  return out;
}
"""


def test_block_level_becomes_the_grid_and_threads_an_axis() -> None:
    source = croqtile.compile(ADD).add.triton_source
    assert "p = tl.program_id(0)" in source
    assert "ax_t = tl.arange(0, 128)" in source
    assert "launch(add_k0, (((d_N + 128 - 1) // 128),)" in source


def test_tail_masks_only_where_needed() -> None:
    symbolic = croqtile.compile(ADD).add.triton_source
    assert "< d_N)" in symbolic  # the last block may run past N
    static = croqtile.compile(STATIC_ADD).add.triton_source
    assert "mask=" not in static  # every index is provably inside the tensors


def test_origin_comments_point_at_source_lines() -> None:
    source = croqtile.compile(ADD, filename="k.co").add.triton_source
    assert "# k.co:5" in source  # the element assignment


def test_descriptor_flags_are_decided_on_the_host() -> None:
    src = (__import__("pathlib").Path(__file__).resolve().parent.parent / "data" /
           "seed000_sm90_gemm.co").read_text()
    source = croqtile.compile(src).matmul.triton_source
    assert "TMA_lhs: tl.constexpr" in source
    assert "lhs.data_ptr() % 16 == 0 and d_K * 2 % 16 == 0" in source
    assert "tl.make_tensor_descriptor(lhs_ptr, shape=[d_M, d_K], strides=[d_K, 1]" in source


def test_fp8_arithmetic_is_computed_in_f32() -> None:
    """Rounded once to the fp8 type, as the reference interpreter computes it (Triton's
    interpreter would add the raw bytes)."""
    source = croqtile.compile("""
__co__ f16 [8] add(f8_e5m2 [8] a, f8_e5m2 [8] b) {
  f16 [a.span] out;
  parallel i by 8
    out.at(i) = a.at(i) + b.at(i);
  return out;
}
""").add.triton_source
    assert ".to(tl.float32) + (" in source and ".to(tl.float8e5)).to(tl.float16)" in source
