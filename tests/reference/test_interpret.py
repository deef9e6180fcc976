"""The reference interpreter as the oracle: every seed kernel (``tests/data/seed*.co``)
runs through the interpreter and through the Triton path (Triton's CPU interpreter) on the
same fresh random inputs. Both must match a float64 torch reference, and each other --
integers exactly, floats within the tolerances of ``tests/e2e/checks.py``. The rest of the
corpus is checked the same way by ``tests/e2e/test_corpus.py``."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from croqtile.backends.reference import InterpretError, interpret_source

from ..conftest import read_data
from ..e2e.checks import DATA, Case, Inputs, assert_close, check, poison, random
from ..e2e.test_seed_kernels import gemm_source

# --------------------------------------------------------------------------- seed kernels


def shrink(text: str, replacements: list[tuple[str, str]]) -> str:
    """The seed with smaller fixed sizes (each pattern must occur: the seed changed
    otherwise and the reduced variant needs a look)."""
    for old, new in replacements:
        assert old in text, f"{old!r} not in the seed any more"
        text = text.replace(old, new)
    return text


SCALAR_MATMUL = (DATA / "seed004_scalar_matmul.co").read_text()
DMA_MATMUL = (DATA / "seed004_dma_matmul.co").read_text()
# the seed004 kernels have fixed shapes (128x256 @ 256x256); instance by instance they
# take seconds, so the cross-check with Triton runs them at a quarter of each size
SMALL_SCALAR_MATMUL = shrink(SCALAR_MATMUL, [
    ("[128, 256]", "[32, 64]"), ("[256, 256]", "[64, 64]"), ("by 16, q by 64", "by 4, q by 16"),
    ("[128 / #p, 256 / #q, 256]", "[32 / #p, 64 / #q, 64]")])
SMALL_DMA_MATMUL = shrink(DMA_MATMUL, [
    ("[128, 256]", "[32, 64]"), ("[256, 256]", "[64, 64]"), ("by [8, 16] : block", "by [4, 4] : block"),
    ("foreach {tile_k} in [16]", "foreach {tile_k} in [8]"),
    ("by [16, 16] : thread", "by [8, 16] : thread"), ("[256 / #tile_k]", "[64 / #tile_k]")])


def _matmul_inputs(m: int, k: int, n: int) -> Inputs:
    return lambda: [random((m, k), torch.int32), random((k, n), torch.int32)]


def _matmul(args: list[Any]) -> torch.Tensor:
    return args[0].double() @ args[1].double()


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
GEMM_TOLERANCE = {"f16": 1e-2, "bf16": 2e-2, "f32": 2e-3}  # f32 operands run as tf32


def _gemm_inputs(shape: tuple[int, int, int], dtype: torch.dtype) -> Inputs:
    m, n, k = shape
    return lambda: [random((m, k), dtype), random((n, k), dtype),
                    poison(torch.empty((m, n), dtype=dtype))]


def _gemm(args: list[Any]) -> torch.Tensor:
    return args[0].double() @ args[1].double().T


def _gemm_case(name: str, elem: str, shape: tuple[int, int, int]) -> Case:
    dtype = DTYPES[elem]
    return Case(f"{name[:-3]}-{elem}-{'x'.join(map(str, shape))}", gemm_source(name, elem),
                _gemm_inputs(shape, dtype), _gemm, dtype, output=2,
                tolerance=GEMM_TOLERANCE[elem])


GEMMS = ["seed000_sm86_gemm.co", "seed000_sm90_gemm.co", "seed000_sm90_gemm_direct.co",
         "seed000_sm90_gemm_2wg.co"]

SEED_CASES = [
    Case("seed002_tiled_add", (DATA / "seed002_tiled_add.co").read_text(),
         lambda: [random((64, 128), torch.int32), random((64, 128), torch.int32)],
         lambda a: a[0].double() + a[1].double(), torch.int32),
    Case("seed004_scalar_matmul-small", SMALL_SCALAR_MATMUL, _matmul_inputs(32, 64, 64), _matmul,
         torch.int32),
    Case("seed004_dma_matmul-small", SMALL_DMA_MATMUL, _matmul_inputs(32, 64, 64), _matmul,
         torch.int32),
    *[_gemm_case(name, elem, shape) for name in GEMMS
      for elem, shape in (("f16", (100, 72, 90)), ("bf16", (128, 256, 128)), ("f32", (100, 72, 90)))],
    Case("seed000_sm86_gemm-multi-warp", (DATA / "seed000_sm86_gemm.co").read_text(),
         _gemm_inputs((70, 90, 48), torch.float16), _gemm, torch.float16, output=2,
         defines={"MATMUL_TILE_M": 32, "MATMUL_TILE_N": 64, "MATMUL_TILE_K": 32}),
]


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: c.id)
def test_seed_kernel(case: Case) -> None:
    check(case)


@pytest.mark.slow
@pytest.mark.parametrize("text", [SCALAR_MATMUL, DMA_MATMUL], ids=["scalar", "dma"])
def test_seed004_matmul_full_size(text: str) -> None:
    """The seed004 kernels as written (128x256 @ 256x256), interpreter only."""
    lhs, rhs = random((128, 256), torch.int32), random((256, 256), torch.int32)
    assert_close(interpret_source(text, [lhs, rhs]), lhs.double() @ rhs.double(), torch.int32)


def test_every_seed_kernel_has_a_case() -> None:
    covered = {c.source for c in SEED_CASES} | {SCALAR_MATMUL, DMA_MATMUL}
    for path in sorted(DATA.glob("seed*.co")):
        names = {c.id.split("-")[0] for c in SEED_CASES}
        assert path.stem in names or path.read_text() in covered, f"no case for {path.name}"


# --------------------------------------------------------------------------- corpus programs


def test_element_writes_past_the_data_are_errors_by_default() -> None:
    """SCALE_ADD's tail block writes ``out.at(p # t)`` past N: the spec masks copies, not
    element accesses, so the interpreter reports it unless told to mask like Triton."""
    n = 200
    args = [random((n,), torch.float32), random((n,), torch.float32), torch.zeros(n)]
    with pytest.raises(InterpretError, match=r"index 200 is out of bounds .* 'out'"):
        interpret_source(read_data("scale_add.co"), args)


def test_unqualified_parameter_stays_private_and_seed_sources_are_unchanged() -> None:
    a = random((4,), torch.int32)
    before = a.clone()
    assert interpret_source(read_data("unqualified_write.co"), [a]) is None
    assert torch.equal(a, before)
    assert re.search(r"parallel \{qx, qy\} by \[16, 16\] : thread", DMA_MATMUL)
