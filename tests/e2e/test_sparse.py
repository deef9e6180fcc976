"""2:4 sparse MMA (spec 5.8): ``mma.LA.LB.sp acc, a_packed, b, meta`` through the reference
interpreter and the Triton path (which decompresses A in registers and runs a dense dot),
on f16, bf16 and e4m3 operands, at shapes that are not multiples of the tiles (K too: the
last metadata byte of a row may hold a single group); and the host helpers of
``croqtile.sparse``: pruning, packing, unpacking, and how the format meets torch's
semi-structured tensors.

Inputs are drawn fresh (``prune_2_4`` of random values, so groups with fewer than two
non-zeros occur too), outputs are poisoned, and every element is compared with a float64
product of the dense A, which the reference decodes from the packed data and metadata on
its own (the spec's formula, written out here)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

import croqtile
from croqtile.sparse import compress_2_4, decompress_2_4, is_2_4, prune_2_4

from .checks import DEVICES, Case, check, poison, run_both

TYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f8_e4m3": torch.float8_e4m3fn}

# Block tiles of 64 x 32 over K slices of 32 dense columns (16 packed values, 4 metadata
# bytes); the metadata reaches the warpgroup MMA through mma.load, as on WGMMA.
_warpgroup_template = """
__co__ void gemm_sp(global {t} [M, KP] a, global u8 [M, KM] meta, global {t} [N, K] b,
                    global f32 [M, N] c) {{
  parallel {{bm, bn}} by [cdiv(M, 64), cdiv(N, 32)] : block {{
    mc = mma.fill.f32 0.0f;
    foreach {{kk}} in [cdiv(K, 32)] {{
      sa = dma.copy a.subspan(64, 16).at(bm, kk) => shared;
      sm = dma.copy meta.subspan(64, 4).at(bm, kk) => shared;
      sb = dma.copy b.subspan(32, 32).at(bn, kk) => shared;
      parallel p by 1 : group-4 {{
        me = mma.load sm.data;
        mma.row.row.sp mc, sa.data, sb.data, me;
      }}
    }}
    mma.store mc, c.subspan(64, 32).at(bm, bn);
  }}
}}
"""

WARPGROUP_F16, WARPGROUP_BF16, WARPGROUP_F8_E4M3 = (_warpgroup_template.format(t=t)
                                                     for t in TYPES)

# Warps side by side along M (each its own rows of A and of the metadata, read straight
# from the views), B stored [K, N] (row.col), and a K tile of 64 split into two slices of
# 32 that collapse into one dot per tile.
WARPS = """
__co__ auto gemm_sp_warps(f16 [M, KP] a, u8 [M, KM] meta, f16 [K, N] b) {
  f32 [M, N] c;
  parallel {bm, bn} by [cdiv(M, 32), cdiv(N, 16)] : block {
    mc = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, 64)] {
      sa = dma.copy a.subspan(32, 32).at(bm, kk) => shared;
      sm = dma.copy meta.subspan(32, 8).at(bm, kk) => shared;
      sb = dma.copy b.subspan(64, 16).at(kk, bn) => shared;
      parallel w by 2 : group {
        foreach {ks} in [2] {
          mma.row.col.sp mc, sa.data.chunkat(w, ks), sb.data.chunkat(ks, _),
                         sm.data.chunkat(w, ks);
        }
      }
    }
    parallel w by 2 : group {
      mma.store mc, c.subspan(32, 16).at(bm, bn).chunkat(w, _);
    }
  }
  return c;
}
"""


def dense_of(packed: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
    """The spec's decoding, in float64: A[m, 4g + i_t] = packed[m, 2g + t], with
    ``i0 | i1 << 2`` the nibble ``g % 2`` of byte ``g // 2`` of row m's metadata."""
    rows, half = packed.shape
    values = packed.to(torch.float32).double()
    dense = torch.zeros(rows, 2 * half, dtype=torch.float64)
    every = torch.arange(rows)
    for g in range(half // 2):
        nibble = (meta[:, g // 2].long() >> (4 * (g % 2))) & 15
        for t, position in enumerate((nibble & 3, (nibble >> 2) & 3)):
            dense[every, 4 * g + position] = values[:, 2 * g + t]
    return dense


def sparse_operands(m: int, k: int, dtype: torch.dtype, gen: torch.Generator
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    dense = prune_2_4(torch.randn(m, k, generator=gen)).to(dtype)
    packed, meta = compress_2_4(dense)
    assert torch.equal(dense_of(packed, meta), dense.to(torch.float32).double())
    return packed, meta


def warpgroup_case(dtype: str, m: int, n: int, k: int) -> Case:
    gen = torch.Generator().manual_seed(m * 1000 + n * 10 + k)

    def inputs() -> list[Any]:
        packed, meta = sparse_operands(m, k, TYPES[dtype], gen)
        b = torch.randn(n, k, generator=gen).to(TYPES[dtype])
        return [packed, meta, b, poison(torch.empty(m, n))]

    def reference(x: list[Any]) -> torch.Tensor:
        return dense_of(x[0], x[1]) @ x[2].to(torch.float32).double().T

    return Case(f"gemm_sp-{dtype}-{m}x{n}x{k}", _warpgroup_template.format(t=dtype), inputs,
                reference, torch.float32, output=3, tolerance=1e-5)


# K = 76: the last K tile is partial and its last metadata byte holds one group
SHAPES = [(100, 40, 76), (64, 32, 32)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m, n, k", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
@pytest.mark.parametrize("dtype", list(TYPES))
def test_sparse_gemm(dtype: str, m: int, n: int, k: int, device: str) -> None:
    case = warpgroup_case(dtype, m, n, k)
    if dtype == "f8_e4m3" and device == "cuda":
        # Hopper's FP8 tensor cores add products in an accumulator narrower than f32: on
        # the H200, cuBLAS's own e4m3 GEMM (torch._scaled_mm) of the decompressed A is off
        # from the float64 product by the same 2.2e-5 as ours at 64x32x32. The CPU paths
        # stay exact (1e-5 above).
        case = replace(case, tolerance=1e-4)
    check(case, device)


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_warps_collapsed_k_slices(device: str) -> None:
    m, n, k = 70, 24, 136
    gen = torch.Generator().manual_seed(5)

    def inputs() -> list[Any]:
        packed, meta = sparse_operands(m, k, torch.float16, gen)
        return [packed, meta, torch.randn(k, n, generator=gen).half()]

    case = Case("gemm_sp_warps", WARPS, inputs,
                lambda x: dense_of(x[0], x[1]) @ x[2].double(), torch.float32, tolerance=1e-5)
    check(case, device)
    source = croqtile.compile(WARPS).gemm_sp_warps.triton_source
    assert source.count("tl.dot(") == 1 and "for ks" not in source  # one dot per K tile


# A and its metadata staged once per block and multiplied with every column tile of B
REUSED = """
__co__ void reuse(global bf16 [M, 16] a, global u8 [M, 4] meta, global bf16 [N, 32] b,
                  global f32 [M, N] c) {
  parallel bm by cdiv(M, 64) : block {
    sa = dma.copy a.subspan(64, 16).at(bm, 0) => shared;
    sm = dma.copy meta.subspan(64, 4).at(bm, 0) => shared;
    foreach {j} in [cdiv(N, 32)] {
      mc = mma.fill.f32 0.0f;
      parallel p by 1 : group-4 {
        me = mma.load sm.data;
        mma.row.row.sp mc, sa.data, b.subspan(32, 32).at(j, 0), me;
      }
      mma.store mc, c.subspan(64, 32).at(bm, j);
    }
  }
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_staged_a_is_decompressed_once(device: str) -> None:
    m, n = 100, 70
    gen = torch.Generator().manual_seed(6)

    def inputs() -> list[Any]:
        packed, meta = sparse_operands(m, 32, torch.bfloat16, gen)
        return [packed, meta, torch.randn(n, 32, generator=gen).bfloat16(),
                poison(torch.empty(m, n))]

    check(Case("reuse", REUSED, inputs,
               lambda x: dense_of(x[0], x[1]) @ x[2].double().T, torch.float32, output=3,
               tolerance=1e-5), device)
    source = croqtile.compile(REUSED).reuse.triton_source
    assert source.index("a_dense = tl.where") < source.index("for j in range")


# A stored K-major ([K/2, M], mma.col.row.sp); the metadata stays [M, K/8]
COLUMN_A = """
__co__ auto gemm_sp_col(f16 [KP, M] a, u8 [M, KM] meta, f16 [N, K] b) {
  f32 [M, N] c;
  parallel {bm, bn} by [cdiv(M, 64), cdiv(N, 32)] : block {
    mc = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, 32)] {
      parallel p by 1 : group-4 {
        me = mma.load meta.subspan(64, 4).at(bm, kk);
        mma.col.row.sp mc, a.subspan(16, 64).at(kk, bm), b.subspan(32, 32).at(bn, kk), me;
      }
    }
    mma.store mc, c.subspan(64, 32).at(bm, bn);
  }
  return c;
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_column_major_a(device: str) -> None:
    m, n, k = 80, 48, 44
    gen = torch.Generator().manual_seed(8)

    def inputs() -> list[Any]:
        packed, meta = sparse_operands(m, k, torch.float16, gen)
        return [packed.T.contiguous(), meta, torch.randn(n, k, generator=gen).half()]

    check(Case("gemm_sp_col", COLUMN_A, inputs,
               lambda x: dense_of(x[0].T, x[1]) @ x[2].double().T, torch.float32,
               tolerance=1e-5), device)


def test_metadata_decides_the_product() -> None:
    """Mirroring the kept positions of every group (i -> 3 - i) changes the product as
    the metadata says: the kernel reads the metadata, not a fixed pattern."""
    gen = torch.Generator().manual_seed(3)
    m, n, k = 64, 32, 32
    packed, meta = sparse_operands(m, k, torch.float16, gen)
    nibbles = torch.stack([meta & 15, meta >> 4], dim=-1)
    flipped = 15 - nibbles  # each 2-bit position i becomes 3 - i, so i0 > i1 now...
    swapped = ((flipped & 3) << 2) | (flipped >> 2)  # ...swapped back to i0 < i1
    other = (swapped[..., 0] | swapped[..., 1] << 4).to(torch.uint8)
    b = torch.randn(n, k, generator=gen).half()
    mod = croqtile.compile(WARPGROUP_F16)
    for metadata in (meta, other):
        c = poison(torch.empty(m, n))
        mod(packed, metadata, b, c)
        expected = dense_of(packed, metadata) @ b.double().T
        torch.testing.assert_close(c.double(), expected, rtol=1e-5, atol=1e-5)
    assert not torch.equal(dense_of(packed, meta), dense_of(packed, other))


def test_interpreter_and_triton_agree_on_e4m3_exactly() -> None:
    """e4m3 products of K = 32 are exact in f32: both paths give the float64 value."""
    got, triton, args = run_both(warpgroup_case("f8_e4m3", 64, 32, 32))
    expected = dense_of(args[0], args[1]) @ args[2].to(torch.float32).double().T
    assert expected.abs().max() > 0
    assert torch.equal(got.double(), expected) and torch.equal(triton.double(), expected)


# ------------------------------------------------------------------ croqtile.sparse


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16,
                                   torch.float8_e4m3fn])
@pytest.mark.parametrize("shape", [(5, 12), (3, 4, 40)], ids=["K=12", "batched"])
def test_compress_round_trip(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(1)
    dense = prune_2_4(torch.randn(shape, generator=gen)).to(dtype)
    packed, meta = compress_2_4(dense)
    assert packed.shape == (*shape[:-1], shape[-1] // 2) and packed.dtype == dtype
    assert meta.shape == (*shape[:-1], -(-shape[-1] // 8)) and meta.dtype == torch.uint8
    back = decompress_2_4(packed, meta)
    assert back.dtype == dtype and torch.equal(back.view(torch.uint8), dense.view(torch.uint8))
    flat = dense.reshape(-1, shape[-1])
    assert torch.equal(dense_of(packed.reshape(-1, shape[-1] // 2), meta.reshape(flat.shape[0], -1)),
                       flat.to(torch.float32).double())


def test_layout_of_the_drawing() -> None:
    """The worked row of the module's documentation."""
    dense = torch.zeros(1, 16)
    for column, value in ((0, 1), (2, 2), (5, 3), (7, 4), (8, 5), (9, 6), (15, 7)):
        dense[0, column] = value
    packed, meta = compress_2_4(dense)
    assert packed.tolist() == [[1, 2, 3, 4, 5, 6, 0, 7]]
    nibbles = [0 | 2 << 2, 1 | 3 << 2, 0 | 1 << 2, 0 | 3 << 2]
    assert meta.tolist() == [[nibbles[0] | nibbles[1] << 4, nibbles[2] | nibbles[3] << 4]]


def test_prune_keeps_the_two_largest_magnitudes() -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 32, generator=gen)
    pruned = prune_2_4(x)
    assert is_2_4(pruned) and not is_2_4(x)
    groups, kept = x.reshape(6, 8, 4), pruned.reshape(6, 8, 4)
    top = groups.abs().topk(2, dim=-1).indices
    expected = torch.zeros_like(groups).scatter(-1, top, groups.gather(-1, top))
    assert torch.equal(kept, expected)


def test_compress_refuses_dense_groups_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="more than two non-zeros"):
        compress_2_4(torch.ones(2, 8))
    with pytest.raises(ValueError, match="multiple of 4"):
        compress_2_4(torch.zeros(2, 6))
    with pytest.raises(ValueError, match="do not fit"):
        decompress_2_4(torch.zeros(2, 8), torch.zeros(2, 1, dtype=torch.uint8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_torch_cutlass_format(dtype: torch.dtype) -> None:
    """torch's CUTLASS semi-structured format (the conversion it runs on the host): the
    same packed values; its int16 metadata words are our bytes read two at a time,
    reordered. Its metadata therefore holds the same words as ours."""
    from torch.sparse import _semi_structured_conversions as conversions

    gen = torch.Generator().manual_seed(4)
    dense = prune_2_4(torch.randn(64, 128, generator=gen)).to(dtype)
    # two non-zeros in every group: the kept positions are then the same for both encoders
    assert bool(((dense.reshape(64, 32, 4) != 0).sum(-1) == 2).all())
    values, words = conversions.sparse_semi_structured_from_dense_cutlass(dense)
    packed, meta = compress_2_4(dense)
    assert torch.equal(values, packed)
    mine = meta.view(torch.int16)
    assert torch.equal(words.reshape(-1).sort().values, mine.reshape(-1).sort().values)
    assert torch.equal(conversions.sparse_semi_structured_to_dense_cutlass(values, words), dense)


@pytest.mark.gpu
def test_torch_semi_structured_round_trip() -> None:
    """Through the dense matrix both ways (torch's tensors need CUDA)."""
    from torch.sparse import to_sparse_semi_structured

    dense = prune_2_4(torch.randn(64, 128)).half().cuda()
    semi = to_sparse_semi_structured(dense)
    packed, meta = compress_2_4(semi.to_dense())
    assert torch.equal(decompress_2_4(packed, meta), dense)
    again = to_sparse_semi_structured(decompress_2_4(packed, meta))
    assert torch.equal(again.to_dense(), dense)
