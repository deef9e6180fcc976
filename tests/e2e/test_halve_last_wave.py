"""Halved last waves (compile option ``halve_last_wave``): in a persistent MMA launch
whose last wave of tiles is at most half full, each of those tiles is computed in two
halves by two programs. Checked element by element against a float64 reference on
poisoned outputs, for tile counts below, at and above the program count (4 or 10 on the
CPU), ragged edges and both dtypes; misuse is refused with CQ0705."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

import pytest
import torch

import croqtile
from croqtile.backends.triton import launcher
from croqtile.errors import CompileError

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "croqtile/bench/kernels/gemm.co"
MATMUL = ROOT / "croqtile/bench/kernels/matmul.co"
SMALL = {"TILE_M": 32, "TILE_N": 64, "TILE_K": 32}


def _check(fn: Callable[..., object], shapes: list[tuple[int, int, int]],
           dtype: torch.dtype = torch.float16, device: str = "cpu") -> None:
    """``fn(a, b, c)`` computes c = a @ b^T: every element of a NaN-poisoned output within
    rounding of the float64 product."""
    gen = torch.Generator().manual_seed(11)
    for m, n, k in shapes:
        a = torch.randn(m, k, generator=gen).to(dtype).to(device)
        b = torch.randn(n, k, generator=gen).to(dtype).to(device)
        ref = a.double() @ b.double().T
        c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
        fn(a, b, c)
        assert not torch.isnan(c).any(), (m, n, k)
        err = (c.double() - ref).abs()
        assert bool((err <= 2e-2 + 1e-2 * ref.abs()).all()), ((m, n, k), err.max().item())


# tiles of 32 x 64: on 4 programs 1 tile (no tail: one program per tile), 6 and 9 tiles
# (tails of 2 and 1: halved), 4 tiles (no tail), 15 (a tail of 3: more than half a
# wave, not halved); ragged rows, columns (a half wholly past the edge) and K
SHAPES_4 = [(20, 50, 96), (64, 128, 64), (64, 150, 160), (96, 150, 200), (100, 300, 72),
            (33, 70, 167), (70, 20, 64)]
# on 10 programs: 13 tiles (a tail of 3), 2 (no tail), 21 (a tail of 1), 24 (a tail of 4)
SHAPES_10 = [(30, 800, 224), (40, 100, 160), (200, 200, 96), (60, 760, 32)]


@pytest.mark.parametrize("programs, shapes", [(4, SHAPES_4), (10, SHAPES_10)])
def test_halved_last_wave_matches_the_reference(programs: int, shapes, monkeypatch) -> None:
    monkeypatch.setattr(launcher, "_CPU_SM_COUNT", programs)
    mod = croqtile.load(GEMM, defines=SMALL, halve_last_wave=True)
    _check(mod.gemm, shapes)


def test_halved_last_wave_in_bf16_through_descriptors_and_pointers() -> None:
    for descriptors in (True, False):
        mod = croqtile.load(GEMM, defines={**SMALL, "DT": "bf16"}, halve_last_wave=True,
                            descriptors=descriptors)
        _check(mod.gemm, [(64, 150, 160), (33, 70, 167)], dtype=torch.bfloat16)


def test_the_last_wave_is_computed_by_the_halves(tmp_path: Path) -> None:
    """A copy of the generated source whose halves loop computes nothing leaves exactly
    the last wave's tiles unwritten (NaN): the halves, not the whole-tile loop, wrote
    them. 3 x 3 tiles of 32 x 64 on 4 programs: the grouped walk's last tile (the last
    rows of the last, ragged column) is the one tile of the last wave."""
    fn = croqtile.load(GEMM, defines=SMALL, halve_last_wave=True).gemm
    text = fn.triton_source
    assert "HALVES: tl.constexpr" in text
    assert "% programs * 2 <= programs" in text  # (the host halves only a short last wave)
    loop = "for half in range(tl.program_id(0), "
    assert text.count(loop) == 1
    path = tmp_path / "no_halves.py"
    path.write_text(text.replace(loop, loop + "0 * "))  # (an empty loop)
    spec = importlib.util.spec_from_file_location("no_halves", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a, b = torch.randn(96, 64).half(), torch.randn(150, 64).half()  # 3 x 3 tiles
    c = torch.full((96, 150), float("nan"), dtype=torch.float16)
    module.host_gemm(fn.launcher, a.device, a, b, c, 64, 96, 150)
    unwritten = torch.isnan(c)
    last_tile = torch.zeros_like(unwritten)
    last_tile[64:, 128:] = True  # (22 columns wide: the ragged edge)
    assert torch.equal(unwritten, last_tile)
    ref = (a.double() @ b.double().T)
    assert bool(((c.double() - ref).abs()[~unwritten] <= 2e-2 + 1e-2 * ref.abs()[~unwritten]).all())


def test_each_half_loads_half_the_widest_axis() -> None:
    """128 x 256 tiles are halved across their 256 columns: the halves load 128 rows of
    the weight per step and store 128 x 128 blocks (their own descriptors)."""
    text = croqtile.load(MATMUL, halve_last_wave=True).matmul.triton_source
    assert "acc_p0 = tl.full([128, 128], 0.0, tl.float32)" in text
    assert "(d_N, d_K,), (d_K, 1,), (128, 64))" in text
    assert "(d_M, d_N,), (d_N, 1,), (128, 128))" in text
    assert "(piece * 128)" in text


@pytest.mark.parametrize("options, said", [
    ({"persistent": False}, "persistent launch"),
    ({"stream_k": True}, "stream_k already"),
])
def test_misuse_is_refused(options: dict, said: str) -> None:
    with pytest.raises(CompileError) as err:
        croqtile.load(GEMM, defines=SMALL, halve_last_wave=True, **options)
    assert "CQ0705" in str(err.value) and said in str(err.value)


def test_a_value_other_than_a_bool_is_refused() -> None:
    with pytest.raises(ValueError, match="halve_last_wave"):
        croqtile.load(GEMM, defines=SMALL, halve_last_wave=1)


# On the H200's 132 SMs in 128 x 256 tiles: 512 x 28672 is 448 tiles (a last wave of 52,
# halved), 3000^2 is 288 (24, halved, ragged on both axes), 4096^2 is 512 (116: whole)
GPU_SHAPES = [(512, 28672, 4096), (3000, 3000, 1000), (4096, 4096, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_halved_last_wave_on_the_gpu(dtype: torch.dtype) -> None:
    name = "f16" if dtype is torch.float16 else "bf16"
    mod = croqtile.load(MATMUL, defines={"DT": name}, halve_last_wave=True)
    _check(mod.matmul, GPU_SHAPES, dtype=dtype, device="cuda")
