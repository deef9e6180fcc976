"""Block tiles whose extent is not a power of two (compile option ``split_tiles``): a
192-wide tile is computed as a 128-wide and a 64-wide piece instead of 256 columns with
64 masked off. Checked against a float64 reference on poisoned outputs, with ragged
edges, in every descriptor mode, with stream-K, and with both tile axes split."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import croqtile

from ..backends.sm90 import HAVE_CUDA_BACKEND, compile_for_sm90
from .test_stream_k import poisoned_workspace  # noqa: F401 (an autouse fixture)

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()
VARIANTS = [
    {"persistent": False},
    {"persistent": True},
    {"persistent": True, "descriptors": "kernel"},
    {"persistent": True, "descriptors": False},
    {"persistent": True, "stream_k": True},
]
SHAPES = [(100, 200, 96), (64, 96, 32), (130, 300, 70), (200, 100, 128)]


def _compile(defines: dict, **options: object) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile) is expected here
        return croqtile.compile(GEMM, defines={"TILE_K": 32, **defines}, split_tiles=True,
                                **options)


def _check(mod: croqtile.Module, device: str, aligned: bool = True) -> None:
    gen = torch.Generator().manual_seed(13)
    for m, n, k in SHAPES:
        a = torch.randn(m * k + 1, generator=gen).half()
        a = (a[:-1] if aligned else a[1:]).view(m, k).to(device)
        b = torch.randn(n, k, generator=gen).half().to(device)
        out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        mod.gemm(a, b, out)
        ref = a.double() @ b.double().T
        assert not torch.isnan(out).any(), (m, n, k)
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < 2e-3, ((m, n, k), err)


@pytest.mark.parametrize("options", VARIANTS, ids=repr)
def test_a_96_wide_tile_in_pieces_of_64_and_32(options: dict) -> None:
    mod = _compile({"TILE_M": 64, "TILE_N": 96}, **options)
    _check(mod, "cpu")
    text = mod.gemm.triton_source
    assert "tl.arange(0, 128)" not in text  # no padded axis left
    assert "acc_p0 = tl.full([64, 64]" in text and "acc_p1 = tl.full([64, 32]" in text


def test_both_tile_axes_split_and_misaligned_inputs() -> None:
    mod = _compile({"TILE_M": 96, "TILE_N": 48}, persistent=True)
    _check(mod, "cpu")
    _check(mod, "cpu", aligned=False)
    text = mod.gemm.triton_source
    for shape in ("[64, 32]", "[64, 16]", "[32, 32]", "[32, 16]"):
        assert f"tl.full({shape}, 0.0, tl.float32)" in text


def test_descriptors_are_made_per_piece() -> None:
    text = _compile({"TILE_M": 64, "TILE_N": 96}, persistent=True).gemm.triton_source
    assert "launch.descriptor(rhs, (d_N, d_K,), (d_K, 1,), (64, 32))" in text
    assert "launch.descriptor(rhs, (d_N, d_K,), (d_K, 1,), (32, 32))" in text
    assert "(128, 32)" not in text  # the whole padded tile's descriptor is gone
    assert ".load([((block_n * 96) + 64), (iv_k * 32)])" in text


def test_an_extent_that_does_not_split_stays_padded() -> None:
    """112 = 64 + 48 (not two powers of two): padded to 128 and loaded through pointers."""
    mod = _compile({"TILE_M": 64, "TILE_N": 112}, persistent=True)
    _check(mod, "cpu")
    text = mod.gemm.triton_source
    assert "tl.arange(0, 128)" in text and "acc_p0" not in text
    assert "rhs_desc" not in text  # no descriptor for a padded tile


def test_without_the_option_tiles_are_padded() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = croqtile.compile(GEMM, defines={"TILE_N": 192}).gemm.triton_source
    assert "tl.arange(0, 256)" in text and "acc_p0" not in text


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("defines", [{"TILE_M": 128, "TILE_N": 192},
                                     {"TILE_M": 192, "TILE_N": 128}], ids=repr)
def test_split_kernels_compile_for_sm90(defines: dict) -> None:
    mod = _compile({**defines, "TILE_K": 64}, persistent=True, num_warps=8)
    compile_for_sm90(mod.gemm._compiled.artifact, 0, f"gemm {defines}")


@pytest.mark.gpu
@pytest.mark.parametrize("options", VARIANTS, ids=repr)
def test_split_tiles_on_the_gpu(options: dict) -> None:
    _check(_compile({"TILE_M": 64, "TILE_N": 96}, **options), "cuda")
    _check(_compile({"TILE_M": 128, "TILE_N": 192, "TILE_K": 64}, **options), "cuda")
    _check(_compile({"TILE_M": 128, "TILE_N": 192, "TILE_K": 64}, **options), "cuda",
           aligned=False)


@pytest.mark.parametrize("extent, pieces", [(192, (128, 64)), (96, (64, 32)), (80, (64, 16)),
                                            (48, (32, 16)), (320, (256, 64)), (112, None),
                                            (24, None), (128, None), (200, None)])
def test_piece_sizes(extent: int, pieces: tuple[int, int] | None) -> None:
    from croqtile.backends.ir.split_tiles import piece_sizes

    assert piece_sizes(extent) == pieces


def test_a_reduced_axis_is_not_split_and_keeps_its_pointer_loads() -> None:
    """The pass refuses an axis that a reduction removes (the pieces would need their
    partial results combined); the lowering then keeps the pointer branch of each padded
    tile's descriptor branch and drops the descriptors."""
    from croqtile.backends.ir import nodes as ir
    from croqtile.backends.ir import split_tiles

    rows, cols = ir.Axis("ax_m", 64, 64, 0), ir.Axis("ax_n", 128, 96, 1)
    zero = ir.Const((), ir.DType.I32, 0)
    described = ir.DescLoad((rows, cols), ir.DType.F16, "x_desc", (zero, zero), (rows, cols))
    pointer = ir.Full((rows, cols), ir.DType.F16, 0.0)  # (stands in for a masked load)
    tile = ir.Var((rows, cols), ir.DType.F16, "t")
    body: list[ir.Stmt] = [
        ir.Branch(None, "TMA_x", [ir.Let(None, "t", described)], [ir.Let(None, "t", pointer)]),
        ir.Let(None, "s", ir.Reduce((rows,), ir.DType.F16, "sum", tile, cols)),
    ]
    made: list[tuple[str, tuple[int, ...]]] = []

    def piece_desc(name: str, dims: tuple[ir.Axis, ...]) -> str:
        made.append((name, tuple(d.size for d in dims)))
        return f"{name}_{len(made)}"

    def piece_axis(whole: ir.Axis, size: int) -> ir.Axis:
        return ir.Axis(f"{whole.name}_{size}", size, size, whole.order)

    with pytest.raises(split_tiles.NotSplit, match="a reduction runs along the axis"):
        split_tiles.split_axis(body, cols, piece_axis, piece_desc)
    assert made == [("x_desc", (64, 64)), ("x_desc", (64, 32))]  # (dropped by the lowering)
    kept = split_tiles.pointer_paths(body, lambda axis: axis.padded)
    assert [type(s).__name__ for s in kept] == ["Let", "Let"] and kept[0].value is pointer
