"""Targeted checks on generated Triton (not whole-file snapshots)."""

from __future__ import annotations

import pytest
import torch

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
    assert "TMA_lhs = lhs.data_ptr() % 16 == 0 and d_K * 2 % 16 == 0" in source
    assert "launch.descriptor(lhs, (d_M, d_K,), (d_K, 1,), (128, 64)) if TMA_lhs else None" \
        in source
    in_kernel = croqtile.compile(src, descriptors="kernel").matmul.triton_source
    assert "tl.make_tensor_descriptor(lhs_ptr, shape=[d_M, d_K], strides=[d_K, 1]" in in_kernel
    assert "lhs.data_ptr() % 16 == 0 and d_K * 2 % 16 == 0," in in_kernel


FP8_CONVERT = """
__co__ void convert(global f32 [N] x, global TYPE [N] y) {
  parallel p by N
    y.at(p) = __to<TYPE>(x.at(p));
}
"""


@pytest.mark.parametrize("name, dtype", [("f8_e4m3", torch.float8_e4m3fn),
                                         ("f8_e5m2", torch.float8_e5m2)])
def test_fp8_conversion_rounds_to_nearest_even_on_the_cpu(name: str, dtype: torch.dtype) -> None:
    """Conversions to fp8 give torch's values bit for bit on the CPU interpreter too:
    halfway cases round to even and rounding may carry into the exponent (1.9375 -> 2)."""
    fn = croqtile.compile(FP8_CONVERT.replace("TYPE", name)).convert
    special = torch.tensor([1.9375, -1.9375, 1.0625, 1.1875, 0.0, -0.0, 3.875, 0.01,
                            1e-6, 240.0, 57000.0 if name == "f8_e5m2" else 440.0])
    x = torch.cat([special, torch.randn(501) * 8, torch.rand(512) * 1e-2])
    y = torch.full(x.shape, float("nan")).to(dtype)
    fn(x, y)
    assert torch.equal(y.view(torch.uint8), x.to(dtype).view(torch.uint8))
    assert "_rounded_on_cpu(" in fn.triton_source


def test_bf16_conversion_rounds_to_nearest_even_on_the_cpu() -> None:
    """Triton's interpreter truncates f32 -> bf16; the generated kernel gives torch's values
    bit for bit (halfway cases to even, carries into the exponent), as the GPU does."""
    fn = croqtile.compile(FP8_CONVERT.replace("TYPE", "bf16")).convert
    halfway = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8 + 2 ** -12), 2 - 2 ** -9, 0.0, -0.0]
    x = torch.cat([torch.tensor(halfway), torch.randn(500) * 100, torch.rand(500) * 1e-20])
    y = torch.full(x.shape, float("nan")).to(torch.bfloat16)
    fn(x, y)
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    assert "_rounded_on_cpu(" in fn.triton_source


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


def test_a_loop_that_reads_back_what_it_stored_is_not_pipelined() -> None:
    """Triton's pipeliner would load the next K block's accumulator from memory before this
    block's store (wrong on the GPU); such kernels run with one stage. GEMMs that only
    read their inputs keep theirs."""
    from ..e2e.test_mma_more import ACC_FROM_MEMORY
    from ..e2e.test_seed_kernels import gemm_source

    reloads = croqtile.compile(ACC_FROM_MEMORY).gemm_acc_global._compiled.artifact
    assert reloads.num_stages == (1,)
    seed = croqtile.compile(gemm_source("seed000_sm90_gemm.co", "f16")).matmul
    assert seed._compiled.artifact.num_stages[0] > 1


def test_tma_eviction_hints_reach_the_loads() -> None:
    source = croqtile.compile("""
__co__ void twice(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.load.evict_first x.subspan(16, 64).at(p, 0) => shared;
    parallel r by 16 : thread
      foreach c in [64]
        y.at(p # r, c) = t.data.at(r, c) * 2.0f;
  }
}
""").twice.triton_source
    assert "eviction_policy='evict_first'" in source


# A per-lane branch reads at an index that is negative on the lanes that skip it.
SPLIT_LANES = """
__co__ void split(global s32 [S] order, global s32 [S] pos, global s32 [T] rest) {
  parallel b by cdiv(T + S, 64) : block {
    parallel i by 64 : thread {
      s32 at = b * 64 + i;
      if (at < T) {
        rest.at(at) = 7;
      } else if (at < T + S) {
        pos.at(order.at(at - T)) = at - T;
      }
    }
  }
}
"""


def test_reads_in_a_per_lane_branch_are_masked_by_it() -> None:
    """The lanes outside a per-lane branch read nothing: no address before the tensor
    (at - T < 0 there) is loaded, on the GPU a fault if the page is not mapped."""
    fn = croqtile.compile(SPLIT_LANES).split
    source = fn.triton_source
    load = next(line for line in source.splitlines() if "tl.load(order_ptr" in line)
    assert "cond" in load.split("tl.load(order_ptr", 1)[1].split("other=")[0], load
    order = torch.randperm(10, dtype=torch.int32)
    pos = torch.full((10,), -1, dtype=torch.int32)
    rest = torch.zeros(5, dtype=torch.int32)
    fn(order, pos, rest)
    assert torch.equal(pos[order.long()], torch.arange(10, dtype=torch.int32))
    assert (rest == 7).all()
