"""backend="cuda" for 2:4 sparse GEMMs: the matcher that proves a lowered function is the
sparse GEMM of croqtile/bench/kernels/gemm_sp.co (and refuses the others with a reason), the
reordering of the spec's metadata into the registers of wgmma .sp (checked against a
model of which thread, register bit and sparsity selector carry each entry), the nvcc
build of gemm_sp_sm90.cu, the Triton fallback on the CPU, and (on a Hopper GPU) the
kernel's results against float64."""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile import settings
from croqtile.backends.cuda import driver
from croqtile.backends.cuda.gemm_sp import (PAD_ENTRY, SOURCE, SparseHopperGemm,
                                            metadata_owner, unsupported_sparse,
                                            wgmma_metadata)
from croqtile.backends.cuda.match import SparseGemmPlan
from croqtile.errors import CompileError
from croqtile.sparse import compress_2_4, prune_2_4

from ..e2e import test_sparse as corpus
from ..e2e.checks import assert_close, poison

GEMM_SP = (Path(__file__).resolve().parents[2] / "croqtile" / "bench" / "kernels" /
           "gemm_sp.co").read_text()


def _plan(source: str, defines: dict | None = None, **options: object) -> object:
    mod = croqtile.compile(source, defines=defines, backend="cuda", **options)
    return next(iter(mod.functions.values())).compiled.plan.gemm


def _sparse(m: int, k: int, dtype: torch.dtype, device: str = "cpu",
            seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    dense = prune_2_4(torch.randn(m, k, generator=gen)).to(dtype)
    packed, meta = compress_2_4(dense)
    return dense.to(device), packed.to(device), meta.to(device)


# ---- the matcher ----------------------------------------------------------------------

@pytest.mark.parametrize("defines, options", [
    ({}, {}),
    ({}, {"persistent": False}),
    ({"DT": "bf16", "TILE_M": 64, "TILE_N": 128}, {}),
    ({"TILE_K": 32}, {"num_stages": 4, "group_m": 4}),
])
def test_the_bench_sparse_gemm_matches_at_any_tile_size(defines: dict, options: dict) -> None:
    dtype = "bf16" if defines.get("DT") == "bf16" else "f16"
    assert _plan(GEMM_SP, defines, **options) == SparseGemmPlan(0, 1, 2, 3, dtype)


def test_the_dense_gemm_still_matches_as_dense() -> None:
    dense = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()
    plan = _plan(dense)
    assert plan is not None and not isinstance(plan, SparseGemmPlan)


NOT_SPARSE_GEMMS = {
    "wrong metadata rows": ("meta.subspan(TILE_M, TILE_K / 8).at(block_m, iv_k)",
                            "meta.subspan(TILE_M, TILE_K / 8).at(block_n, iv_k)",
                            "dense A tile is not rebuilt"),
    "metadata of the first K step": ("meta.subspan(TILE_M, TILE_K / 8).at(block_m, iv_k)",
                                     "meta.subspan(TILE_M, TILE_K / 8).at(block_m, 0)",
                                     "dense A tile is not rebuilt"),
    "packed values of the wrong row": ("a_packed.subspan(TILE_M, TILE_K / 2).at(block_m, iv_k)",
                                       "a_packed.subspan(TILE_M, TILE_K / 2).at(block_n, iv_k)",
                                       "dense A tile is not rebuilt"),
    "rhs of the first K step": ("rhs.subspan(TILE_N, TILE_K).at(block_n, iv_k)",
                                "rhs.subspan(TILE_N, TILE_K).at(block_n, 0)",
                                "rhs tile is not loaded"),
    "last K step skipped": ("[cdiv(K, TILE_K)]", "[cdiv(K, TILE_K) - 1]",
                            "K loop does not run over cdiv(K, TK) steps"),
    "f16 accumulator": ("mma.fill.f32 0.0f", "mma.fill.f16 0.0f",
                        "an f32 accumulator set to zero"),
}


@pytest.mark.parametrize("edit", sorted(NOT_SPARSE_GEMMS))
def test_a_program_that_is_not_the_sparse_gemm_is_refused(edit: str) -> None:
    old, new, why = NOT_SPARSE_GEMMS[edit]
    assert old in GEMM_SP
    source = GEMM_SP.replace(old, new)
    try:
        croqtile.compile(source)  # a program of its own (or refused by the checker too)
    except CompileError:
        pytest.skip("the edited program is not valid Croqtile")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CompileError) as err:
            croqtile.compile(source, backend="cuda")
    text = str(err.value)
    assert "CQ0705" in text and "backend='cuda'" in text and "2:4 sparse" in text
    assert why in text, text


def test_the_corpus_sparse_kernels_keep_triton_with_the_reason() -> None:
    # f32 outputs, stored without a conversion: the kernel stores the input type
    with pytest.raises(CompileError) as err:
        croqtile.compile(corpus.WARPGROUP_F16, backend="cuda")
    assert "CQ0705" in str(err.value) and "not the accumulator converted" in str(err.value)
    with pytest.raises(CompileError, match="CQ0705"):
        croqtile.compile(corpus.WARPS, backend="cuda")


def test_the_sparse_gemm_has_no_tcgen05_kernel() -> None:
    with pytest.raises(CompileError) as err:
        croqtile.compile(GEMM_SP, backend="cuda", target="sm_100a")
    assert "CQ0705" in str(err.value) and "sm_90a only" in str(err.value)


def test_the_cuda_source_is_the_sparse_kernel() -> None:
    source = croqtile.compile(GEMM_SP, backend="cuda").gemm_sp.cuda_source
    assert "wgmma.mma_async.sp.sync.aligned.m64n256k32" in source
    assert '#include "' not in source  # the helpers are spliced in
    assert source.count("__device__ __forceinline__ void barrier_init(") == 1


def test_on_the_cpu_the_triton_kernel_runs() -> None:
    fn = croqtile.compile(GEMM_SP, backend="cuda",
                          defines={"TILE_M": 64, "TILE_N": 64, "TILE_K": 32}).gemm_sp
    dense, packed, meta = _sparse(70, 80, torch.float16, seed=3)
    b = torch.randn(36, 80, generator=torch.Generator().manual_seed(4)).half()
    out = poison(torch.empty(70, 36, dtype=torch.float16))
    fn(packed, meta, b, out)
    assert_close(out, dense.double() @ b.double().T, torch.float16)


def test_why_arguments_do_not_suit_the_kernel() -> None:
    _, packed, meta = _sparse(64, 64, torch.float16)
    b, out = torch.zeros(32, 64, dtype=torch.float16), torch.zeros(64, 32, dtype=torch.float16)
    assert unsupported_sparse(packed, meta, b, out) == "the tensors are not on a CUDA device"
    assert unsupported_sparse(packed, meta, b, out, device=False) is None
    assert "not all f16" in unsupported_sparse(packed, meta, b.float(), out, device=False)
    assert "do not form a sparse GEMM" in unsupported_sparse(packed, meta, b[:, :32], out,
                                                             device=False)
    _, packed8, meta8 = _sparse(64, 8, torch.float16)
    assert "multiple of 16" in unsupported_sparse(packed8, meta8, torch.zeros(32, 8).half(),
                                                  out, device=False)


# ---- the metadata registers -----------------------------------------------------------

def test_the_owner_model_follows_the_ptx_fragment() -> None:
    """Each 32-bit register of a thread carries, per k32 step, 16 dense columns of rows
    16w + g (bits 0..15) and 16w + g + 8 (bits 16..31) of warp w; selector 0 names lanes
    4g + {0, 1}, selector 1 lanes 4g + {2, 3}; every (row, group) has one place."""
    seen = set()
    for row in range(128):
        for column in range(0, 64, 4):
            warpgroup, thread, bit, step, selector = metadata_owner(row, column)
            warp, lane = divmod(thread, 32)
            assert (warpgroup, warp) == (row // 64, row % 64 // 16)
            assert lane // 4 == row % 8 and bit // 16 == row % 16 // 8
            assert step == column // 32 and selector == step
            assert lane % 4 in ((0, 1) if selector == 0 else (2, 3))
            assert (lane % 2) * 16 <= column % 32 < (lane % 2 + 1) * 16
            assert bit % 16 == 4 * (column % 16 // 4)
            seen.add((warpgroup, thread, bit))
    assert len(seen) == 128 * 16  # one place per (row, group): no two entries collide


@pytest.mark.parametrize("m, k", [(128, 64), (300, 208), (17, 16)])
def test_wgmma_metadata_puts_each_entry_where_the_kernel_reads_it(m: int, k: int) -> None:
    _, _, meta = _sparse(m, k, torch.float16, seed=m + k)
    reordered = wgmma_metadata(meta, k)
    blocks, k_tiles = -(-m // 256) * 2, -(-k // 64)
    assert reordered.shape == (blocks, k_tiles, 2, 128, 4) and reordered.dtype == torch.uint8
    # the word thread t of warpgroup w reads at stage (block, k tile)
    words = reordered.to(torch.int64)
    registers = (words[..., 0] | words[..., 1] << 8 | words[..., 2] << 16 | words[..., 3] << 24)
    for row in range(blocks * 128):
        for group in range(k_tiles * 16):
            block, r = divmod(row, 128)
            k_tile, column = divmod(4 * group, 64)
            warpgroup, thread, bit, _, _ = metadata_owner(r, column)
            entry = int(registers[block, k_tile, warpgroup, thread]) >> bit & 0xF
            if row < m and group < k // 4:
                expected = int(meta[row, group // 2]) >> 4 * (group % 2) & 0xF
            else:
                expected = PAD_ENTRY & 0xF  # positions 0 and 1: valid metadata
            assert entry == expected, (row, group)


def test_wgmma_metadata_refuses_metadata_of_another_k() -> None:
    _, _, meta = _sparse(8, 64, torch.float16)
    with pytest.raises(ValueError, match="u8 \\[M, ceil\\(K/8\\)\\]"):
        wgmma_metadata(meta, 128)


# ---- building -------------------------------------------------------------------------

@pytest.mark.skipif(settings.nvcc() is None, reason="no nvcc on this machine")
def test_the_kernel_builds_for_sm_90a_without_spills(tmp_path: Path) -> None:
    path = tmp_path / SOURCE
    path.write_text(driver.kernel_text(SOURCE))
    done = subprocess.run([settings.nvcc(), *driver.nvcc_flags("90a"), "-Xptxas", "-v", "-o",
                           str(path.with_suffix(".cubin")), str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = done.stderr
    for name in ("croq_gemm_sp_sm90_f16", "croq_gemm_sp_sm90_bf16"):
        assert f"Compiling entry function '{name}' for 'sm_90a'" in report
    assert report.count("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") == 2
    assert all(int(n) <= 168 for n in re.findall(r"Used (\d+) registers", report))
    cubin = driver.build(SOURCE, "90a", tmp_path, nvcc=settings.nvcc())
    assert cubin[:4] == b"\x7fELF"


# ---- on a Hopper GPU -------------------------------------------------------------------

def _hopper() -> bool:
    return (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
            and shutil.which("nvcc") is not None)


SHAPES = [(256, 256, 64), (128, 256, 128), (1000, 1032, 528), (130, 4096, 4096),
          (16, 512, 1024), (333, 264, 16), (2048, 2048, 2048), (4096, 4096, 4096)]
TYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_the_cuda_sparse_kernel_computes_the_gemm(m: int, n: int, k: int, dtype: str) -> None:
    if not _hopper():
        pytest.skip("the sparse CUDA GEMM needs a Hopper GPU and nvcc")
    fn = croqtile.compile(GEMM_SP, backend="cuda", defines={"DT": dtype}).gemm_sp
    dense, packed, meta = _sparse(m, k, TYPES[dtype], "cuda", seed=m * 7 + n + k)
    b = torch.randn(n, k, device="cuda").to(TYPES[dtype])
    out = poison(torch.empty(m, n, dtype=TYPES[dtype], device="cuda"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CUDA kernel runs: no fallback warning
        fn(packed, meta, b, out)
    assert fn.launches == 0  # no Triton launch
    assert_close(out, dense.double() @ b.double().T, TYPES[dtype])


@pytest.mark.gpu
def test_the_kernel_reuses_the_reordered_metadata_until_it_changes(tmp_path: Path) -> None:
    if not _hopper():
        pytest.skip("the sparse CUDA GEMM needs a Hopper GPU and nvcc")
    gemm = SparseHopperGemm(tmp_path, nvcc=settings.nvcc())
    dense, packed, meta = _sparse(300, 256, torch.float16, "cuda", seed=9)
    b = torch.randn(264, 256, device="cuda").half()
    for _ in range(2):
        out = poison(torch.empty(300, 264, dtype=torch.float16, device="cuda"))
        gemm(packed, meta, b, out)
        assert_close(out, dense.double() @ b.double().T, torch.float16)
    dense2, packed2, meta2 = _sparse(300, 256, torch.float16, "cuda", seed=10)
    packed.copy_(packed2)
    meta.copy_(meta2)  # in place: a new version of the same tensor
    out = poison(torch.empty(300, 264, dtype=torch.float16, device="cuda"))
    gemm(packed, meta, b, out)
    assert_close(out, dense2.double() @ b.double().T, torch.float16)


@pytest.mark.gpu
def test_a_new_metadata_tensor_at_a_freed_ones_address_is_not_taken_for_it(
        tmp_path: Path) -> None:
    """The caching allocator hands a freed tensor's memory to the next one of its size:
    the reordered metadata of the first must not serve the second (the key is the
    tensor, not its address)."""
    if not _hopper():
        pytest.skip("the sparse CUDA GEMM needs a Hopper GPU and nvcc")
    gemm = SparseHopperGemm(tmp_path, nvcc=settings.nvcc())
    b = torch.randn(264, 256, device="cuda").half()
    addresses = set()
    for seed in (11, 12, 13):
        dense, packed, meta = _sparse(300, 256, torch.float16, "cuda", seed=seed)
        addresses.add(meta.data_ptr())
        out = poison(torch.empty(300, 264, dtype=torch.float16, device="cuda"))
        gemm(packed, meta, b, out)
        assert_close(out, dense.double() @ b.double().T, torch.float16)
        del dense, packed, meta
