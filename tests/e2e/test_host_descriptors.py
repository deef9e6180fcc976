"""Tensor descriptors made by the host (compile option ``descriptors="host"``): the
kernel takes them as arguments instead of building its own in every program. Each variant
is checked against a float64 reference, aligned (descriptor path) and misaligned (the
host passes None and the kernel loads through pointers)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile.backends.triton.launcher import Launcher

from ..backends.sm90 import HAVE_CUDA_BACKEND, compile_for_sm90
from .test_stream_k import poisoned_workspace  # noqa: F401 (an autouse fixture)

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()
SMALL = {"TILE_M": 64, "TILE_N": 64, "TILE_K": 32}
VARIANTS = [
    {"persistent": False},
    {"persistent": True},
    {"persistent": True, "stream_k": True},
    {"persistent": True, "stream_k": 2, "flatten": True},
]


def _compile(options: dict, defines: dict | None = None) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile) is expected here
        return croqtile.compile(GEMM, defines=defines or SMALL, descriptors="host", **options)


def _check(mod: croqtile.Module, device: str, aligned: bool) -> None:
    gen = torch.Generator().manual_seed(11)
    for m, n, k in [(100, 72, 96), (64, 64, 32), (230, 130, 160)]:
        a = torch.randn(m * k + 1, generator=gen).half()
        # misaligned: lhs starts 2 bytes past a 16-byte boundary, so it gets no descriptor
        a = (a[:-1] if aligned else a[1:]).view(m, k)
        b = torch.randn(n, k, generator=gen).half()
        a, b = a.to(device), b.to(device)
        out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        mod.gemm(a, b, out)
        ref = a.double() @ b.double().T
        assert not torch.isnan(out).any(), (m, n, k)
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < 2e-3, ((m, n, k), aligned, err)


class CountingDescriptors:
    """Counts the descriptors the host makes (and for which tensors)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shapes: list[tuple[int, ...]] = []
        made = Launcher.descriptor

        def descriptor(launcher: Launcher, tensor, shape, strides, block):  # type: ignore[no-untyped-def]
            self.shapes.append(tuple(shape))
            return made(launcher, tensor, shape, strides, block)

        monkeypatch.setattr(Launcher, "descriptor", descriptor)


@pytest.mark.parametrize("options", VARIANTS, ids=repr)
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "misaligned"])
def test_host_descriptors_compute_the_product(options: dict, aligned: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    made = CountingDescriptors(monkeypatch)
    _check(_compile(options), "cpu", aligned)
    # a descriptor per tensor and call, except for the misaligned lhs and for the output
    # of 130 columns (260-byte rows, not a multiple of 16)
    expected = [(100, 96), (72, 96), (100, 72), (64, 32), (64, 32), (64, 64), (230, 160),
                (130, 160)]
    assert made.shapes == (expected if aligned else [(72, 96), (100, 72), (64, 32), (64, 64),
                                                     (130, 160)])


def test_the_kernel_takes_descriptors_instead_of_building_them() -> None:
    text = _compile({"persistent": True}).gemm.triton_source
    assert "tl.make_tensor_descriptor" not in text
    assert "def gemm_k0(lhs_ptr, rhs_ptr, output_ptr, lhs_desc, rhs_desc, output_desc," in text
    assert "launch.descriptor(lhs, (d_M, d_K,), (d_K, 1,), (64, 32)) if TMA_lhs else None" \
        in text
    # a tensor with an empty dimension gets no descriptor (Triton refuses one)
    assert "TMA_lhs = lhs.data_ptr() % 16 == 0 and d_K * 2 % 16 == 0 and d_M > 0 and d_K > 0" \
        in text
    # the default: descriptors where aligned, made by the host; or by each program
    assert croqtile.compile(GEMM, defines=SMALL).gemm.triton_source == text
    made_in_kernel = croqtile.compile(GEMM, defines=SMALL, descriptors="kernel")
    assert "tl.make_tensor_descriptor" in made_in_kernel.gemm.triton_source
    # a split epilogue stores through sliced descriptors that each program makes
    split = croqtile.compile(GEMM, defines=SMALL, epilogue_split=2).gemm.triton_source
    assert "output_desc_part = tl.make_tensor_descriptor(" in split


@pytest.mark.parametrize("value, message", [
    ("device", "expected True (where aligned), \"host\" (made by the host), \"kernel\""),
    (1, "expected True"),
])
def test_descriptor_option_values(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        croqtile.compile(GEMM, descriptors=value)


def test_split_epilogue_needs_descriptors_made_in_the_kernel() -> None:
    with pytest.raises(ValueError, match="epilogue_split=2 needs descriptors made in the kernel"):
        croqtile.compile(GEMM, descriptors="host", epilogue_split=2)


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("options", VARIANTS[:3], ids=repr)
def test_host_descriptor_kernels_compile_for_sm90(options: dict) -> None:
    mod = _compile(options, {"TILE_M": 128, "TILE_N": 128})
    compile_for_sm90(mod.gemm._compiled.artifact, 0, f"gemm {options}")


@pytest.mark.gpu
@pytest.mark.parametrize("options", VARIANTS, ids=repr)
@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "misaligned"])
def test_host_descriptors_compute_the_product_gpu(options: dict, aligned: bool) -> None:
    _check(_compile(options), "cuda", aligned)
    _check(_compile(options, {"TILE_M": 128, "TILE_N": 256}), "cuda", aligned)
