"""The kernels of the seed chapters (002 data movement, 004 parallelism, 000 MMA), run on
the CPU through Triton's interpreter and on the GPU, against float64 torch references."""

from __future__ import annotations

import re

import pytest
import torch

import croqtile

from .checks import DATA, DEVICES, assert_close, poison, random


@pytest.mark.parametrize("device", DEVICES)
def test_seed002_tiled_add(device: str) -> None:
    mod = croqtile.load(DATA / "seed002_tiled_add.co")
    lhs = random((64, 128), torch.int32, device)
    rhs = random((64, 128), torch.int32, device)
    out = mod.tiled_add_2d(lhs, rhs)
    assert_close(out, lhs.double() + rhs.double(), torch.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["seed004_scalar_matmul.co", "seed004_dma_matmul.co"])
def test_seed004_matmul(device: str, name: str) -> None:
    mod = croqtile.load(DATA / name)
    lhs = random((128, 256), torch.int32, device)
    rhs = random((256, 256), torch.int32, device)
    out = mod.matmul(lhs, rhs)
    assert_close(out, lhs.double() @ rhs.double(), torch.int32)


GEMMS = [
    "seed000_sm86_gemm.co",
    "seed000_sm90_gemm.co",
    "seed000_sm90_gemm_direct.co",
    "seed000_sm90_gemm_2wg.co",
]

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def gemm_source(name: str, elem: str) -> str:
    """The seed GEMM with its element type changed; accumulators that the new type
    cannot use (bf16 and f32 accumulate in f32) become f32."""
    text = (DATA / name).read_text()
    if elem == "f16":
        return text
    text = re.sub(r"\b(global|shared) f16\b", rf"\1 {elem}", text)
    return text.replace("mma.fill.f16", "mma.fill.f32").replace("mma.fill 0.0;", "mma.fill.f32 0.0;")


def gemm_reference(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    return lhs.double() @ rhs.double().T


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", [(128, 256, 128), (100, 72, 90)], ids=["tiles", "tails"])
@pytest.mark.parametrize("name", GEMMS)
def test_seed000_gemm(device: str, name: str, elem: str, shape: tuple[int, int, int]) -> None:
    mod = croqtile.compile(gemm_source(name, elem), filename=name)
    m, n, k = shape
    dtype = DTYPES[elem]
    lhs = random((m, k), dtype, device)
    rhs = random((n, k), dtype, device)
    out = poison(torch.empty((m, n), dtype=dtype, device=device))
    assert mod.matmul(lhs, rhs, out) is None
    tolerance = {"f16": 1e-2, "bf16": 2e-2, "f32": 2e-3}[elem]  # f32 operands run as tf32
    assert_close(out, gemm_reference(lhs, rhs), dtype, tolerance)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GEMMS)
def test_seed000_gemm_pointer_path(device: str, name: str) -> None:
    """The same kernels with tensor descriptors turned off (plain masked loads)."""
    mod = croqtile.compile(gemm_source(name, "f16"), filename=name, descriptors=False)
    lhs = random((72, 64), torch.float16, device)
    rhs = random((40, 64), torch.float16, device)
    out = poison(torch.empty((72, 40), dtype=torch.float16, device=device))
    mod.matmul(lhs, rhs, out)
    assert_close(out, gemm_reference(lhs, rhs), torch.float16)
    assert "make_tensor_descriptor" not in mod.matmul.triton_source


@pytest.mark.parametrize("name", GEMMS)
def test_one_dot_per_k_step_over_the_block_tile(name: str) -> None:
    """Warp tiles are fused and K slices collapsed: one tl.dot inside the K loop, with
    M, N and K extents of the whole block tile."""
    text = (DATA / name).read_text()
    defines = dict(re.findall(r"#define (\w+) (\d+)", text))
    source = croqtile.compile(text, filename=name).matmul.triton_source
    assert source.count("tl.dot(") == 1
    loop = re.search(r"\n( +)for (\w+) in (?:tl\.)?range\(.*\):\n((?:\1 .*\n)+)", source)
    assert loop is not None and "tl.dot(" in loop.group(3), "the dot is not inside the K loop"
    block_m = int(defines.get("MATMUL_TILE_M", defines.get("MATMUL_WARP_M")))
    block_n = int(defines.get("MATMUL_WARP_N", defines.get("MATMUL_TILE_N")))
    block_k = int(defines["MATMUL_TILE_K"])
    if name == "seed000_sm86_gemm.co":
        block_m, block_n = int(defines["MATMUL_TILE_M"]), int(defines["MATMUL_TILE_N"])
    sizes = {name: int(size) for name, size in re.findall(r"(ax_\w+) = tl\.arange\(0, (\d+)\)", source)}
    assert sizes.get("ax_m") == block_m and sizes.get("ax_n") == block_n
    assert sizes.get("ax_k") == block_k
