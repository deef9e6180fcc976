"""Block launch order and persistent launches (compile options ``group_m``, ``persistent``,
``flatten``, ``heavy_first``): any one-to-one order of the blocks computes the same result, so every
variant is checked against a float64 reference on shapes with ragged last tiles."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

import pytest
import torch

import croqtile

DATA = Path(__file__).resolve().parent.parent / "data"
SMALL_TILES = {"MATMUL_WARP_M": 32, "MATMUL_WARP_N": 32, "MATMUL_TILE_K": 32}
VARIANTS = [
    {},
    {"group_m": 1},
    {"group_m": 3},
    {"persistent": True},
    {"persistent": True, "group_m": 1},
    {"persistent": True, "group_m": 2, "flatten": True},
    {"heavy_first": True},
    {"heavy_first": True, "group_m": 1, "persistent": True},
]


def _check_gemm(fn: Callable[..., object], shapes: list[tuple[int, int, int]],
                device: str) -> None:
    """``fn(a, b, c)`` computes c = a @ b^T: poisoned output, every element checked."""
    gen = torch.Generator().manual_seed(7)
    for m, n, k in shapes:
        a = torch.randn(m, k, generator=gen).half().to(device)
        b = torch.randn(n, k, generator=gen).half().to(device)
        c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        fn(a, b, c)
        ref = a.double() @ b.double().T
        assert not torch.isnan(c).any()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, ((m, n, k), err)


def _gemm(options: dict, device: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile) is expected here
        mod = croqtile.load(DATA / "seed000_sm90_gemm.co", defines=SMALL_TILES, **options)
    _check_gemm(mod.matmul, [(100, 72, 90), (230, 65, 64)], device)  # ragged edges


@pytest.mark.parametrize("options", VARIANTS, ids=lambda o: repr(o) if o else "default")
def test_gemm_in_every_launch_order(options: dict) -> None:
    _gemm(options, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("options", VARIANTS, ids=lambda o: repr(o) if o else "default")
def test_gemm_in_every_launch_order_gpu(options: dict) -> None:
    _gemm(options, "cuda")


def _source(**options) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = croqtile.load(DATA / "seed000_sm90_gemm.co", **options)
    return mod.matmul.triton_source


def test_mma_kernels_on_2d_grids_walk_groups_of_rows() -> None:
    text = _source(persistent=False)
    assert "tile = tl.program_id(0)" in text
    assert "group_width = (8 * ((d_N + 256 - 1) // 256))" in text
    assert "block_n = tl.program_id(1)" not in text
    assert "launch(matmul_k0, ((((d_M + 128 - 1) // 128) * ((d_N + 256 - 1) // 256)),)" in text


def test_mma_kernels_launch_persistently_by_default() -> None:
    text = _source()
    assert "for tile in range(tl.program_id(0), " in text
    assert "launch(matmul_k0, (programs,)" in text


def test_group_m_1_keeps_one_program_id_per_axis() -> None:
    text = _source(group_m=1, persistent=False)
    assert "block_m = tl.program_id(0)" in text and "block_n = tl.program_id(1)" in text
    assert "group_width" not in text


def test_kernels_without_mma_keep_their_grid() -> None:
    mod = croqtile.load(DATA / "dma_copy_2d.co")
    text = next(iter(mod.functions.values())).triton_source
    assert "group_width" not in text and "tl.program_id(1)" in text
    assert "for tile in" not in text


def test_persistent_launch_loops_over_tiles_with_one_program_per_sm() -> None:
    text = _source(persistent=True, flatten=True)
    loop = next(line for line in text.splitlines() if "for tile in" in line)
    assert loop.strip().startswith("for tile in tl.range(tl.program_id(0), ")
    assert loop.endswith(", n_programs, flatten=True):")
    assert "programs = min((((d_M + 128 - 1) // 128) * ((d_N + 256 - 1) // 256)), " \
           "launch.sm_count(device))" in text
    # tensor descriptors come from the host, or are made once per program before the loop
    assert "def matmul_k0(lhs_ptr, rhs_ptr, output_ptr, lhs_desc, " in text
    text = _source(persistent=True, descriptors="kernel")
    assert text.index("lhs_desc = tl.make_tensor_descriptor") < text.index("for tile in")


def test_persistent_user_kernels_stay_correct() -> None:
    """A kernel that is persistent in its source (a fixed number of workers walking the
    tiles) under a persistent launch: a loop over workers around the loop over rounds."""
    mod = croqtile.load(DATA / "persistent_gemm.co", persistent=True)
    a, b = torch.randn(40, 48).half(), torch.randn(56, 48).half()
    c = torch.full((40, 56), float("nan"), dtype=torch.float16)
    mod.persistent(a, b, c)
    ref = a.double() @ b.double().T
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("bad", [{"group_m": 0}, {"persistent": 1}, {"num_warps": 6},
                                 {"flatten": "yes"}, {"epilogue_split": 3}])
def test_malformed_options_are_refused_with_their_name(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        croqtile.load(DATA / "seed000_sm90_gemm.co", **bad)


def test_sm_count_on_the_cpu_is_small_so_the_interpreter_loops() -> None:
    from croqtile.backends.triton.launcher import Launcher

    assert Launcher().sm_count(torch.device("cpu")) == 4


GEMM = Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co"


def _split_epilogue(device: str) -> None:
    mod = croqtile.load(GEMM, defines={"TILE_M": 32, "TILE_N": 128, "TILE_K": 32},
                        epilogue_split=2)
    _check_gemm(mod.gemm, [(100, 192, 64), (64, 256, 32)], device)  # descriptor stores
    text = mod.gemm.triton_source
    assert "block_shape=[32, 64])" in text and text.count("output_desc_part.store(") == 2


def test_epilogue_split_stores_the_tile_in_two_column_slices() -> None:
    _split_epilogue("cpu")


@pytest.mark.gpu
def test_epilogue_split_stores_the_tile_in_two_column_slices_gpu() -> None:
    _split_epilogue("cuda")
