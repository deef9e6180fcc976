"""The Blackwell (sm_100a) tcgen05 GEMM: its descriptors field by field against the PTX
ISA tables, the tensor-memory accumulator layouts of seed 001, the epilogue's addressing
checked against them, the nvcc build of the generated source, and the dispatch of calls
(the Triton kernel, with a warning, on any GPU that is not sm_100)."""

from __future__ import annotations

import re
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile import settings
from croqtile.backends import dispatch
from croqtile.backends.cuda import backend as cuda_backend
from croqtile.backends.cuda.backend import CudaPlan
from croqtile.backends.protocol import Toolchain
from croqtile.backends.cuda import gemm_sm100, tcgen05
from croqtile.backends.cuda.driver import nvcc_flags
from croqtile.backends.cuda.gemm_sm100 import Sm100Config, epilogue_writes, source
from croqtile.backends.cuda.match import GemmPlan
from croqtile.backends.cuda.tcgen05 import Kind, Swizzle, TmemCell, tmem_cell
from croqtile.errors import CompileError

from ..e2e.checks import assert_close, poison, random
from ..e2e.test_mma_more import FP8_SCALED
from .gemm_calls import assert_runs_triton_with_warning

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()

# The same GEMM with e4m3 operands and a bf16 output (.kind::f8f6f4 on sm_100a).
GEMM_E4M3 = """
__co__ void gemm(global f8_e4m3 [M, K] lhs, global f8_e4m3 [N, K] rhs, global bf16 [M, N] output) {
  parallel {block_m, block_n} by [cdiv(M, 128), cdiv(N, 128)] : block {
    shared f8_e4m3 [128, 128] lhs_s;
    shared f8_e4m3 [128, 128] rhs_s;
    acc = mma.fill.f32 0.0f;
    foreach {iv_k} in [cdiv(K, 128)] {
      dma.copy lhs.subspan(128, 128).at(block_m, iv_k) => lhs_s;
      dma.copy rhs.subspan(128, 128).at(block_n, iv_k) => rhs_s;
      foreach {iv_warp} in [4] {
        parallel p by 1 : group-4 {
          ma = mma.load lhs_s.chunkat(_, iv_warp);
          mb = mma.load rhs_s.chunkat(_, iv_warp);
          mma.row.row acc, ma, mb;
        }
      }
    }
    shared bf16 [128, 128] output_s;
    mma.store acc, output_s;
    dma.copy output_s => output.subspan(128, 128).at(block_m, block_n);
  }
}
"""


def _fields(value: int, table: dict[str, tuple[int, int]]) -> dict[str, int]:
    return {name: (value >> first) & ((1 << width) - 1) for name, (first, width) in table.items()}


def _covers(table: dict[str, tuple[int, int]], bits: int) -> bool:
    owned = sorted(b for first, width in table.values() for b in range(first, first + width))
    return owned == list(range(bits))


# ---- the instruction descriptor ------------------------------------------------------
# PTX ISA, "Instruction descriptor format for .kind::f16, .kind::tf32, .kind::f8f6f4 and
# .kind::i8": field -> (first bit, width).
IDESC_FIELDS = {
    "sparsity selector": (0, 2), "sparsity": (2, 1), "saturate": (3, 1), "D type": (4, 2),
    "reserved 6": (6, 1), "A type": (7, 3), "B type": (10, 3), "negate A": (13, 1),
    "negate B": (14, 1), "transpose A": (15, 1), "transpose B": (16, 1), "N >> 3": (17, 6),
    "reserved 23": (23, 1), "M >> 4": (24, 5), "reserved 29": (29, 1), "max shift": (30, 2),
}
D_TYPE = {"f16": 0, "f32": 1}
A_TYPE = {(Kind.F16, "f16"): 0, (Kind.F16, "bf16"): 1, (Kind.F8F6F4, "f8_e4m3"): 0,
          (Kind.F8F6F4, "f8_e5m2"): 1, (Kind.F8F6F4, "f6_e2m3"): 3,
          (Kind.F8F6F4, "f6_e3m2"): 4, (Kind.F8F6F4, "f4_e2m1"): 5}


def test_the_descriptor_table_covers_32_bits() -> None:
    assert _covers(IDESC_FIELDS, 32)


@pytest.mark.parametrize("kind, ab, d, m, n, cta_group", [
    (Kind.F16, "f16", "f32", 128, 256, 1),
    (Kind.F16, "bf16", "f32", 64, 8, 1),
    (Kind.F16, "f16", "f16", 128, 136, 1),
    (Kind.F16, "bf16", "f32", 256, 256, 2),
    (Kind.F16, "f16", "f32", 128, 16, 2),
    (Kind.F8F6F4, "f8_e4m3", "f32", 128, 256, 1),
    (Kind.F8F6F4, "f8_e5m2", "f32", 256, 128, 2),
    (Kind.F8F6F4, "f6_e2m3", "f32", 64, 248, 1),
    (Kind.F8F6F4, "f4_e2m1", "f32", 128, 64, 1),
])
def test_the_instruction_descriptor_field_by_field(kind: Kind, ab: str, d: str, m: int, n: int,
                                                   cta_group: int) -> None:
    value = tcgen05.instruction_descriptor(kind, ab, ab, d, m, n, cta_group=cta_group)
    assert 0 <= value < 1 << 32
    expected = dict.fromkeys(IDESC_FIELDS, 0)
    expected.update({"D type": D_TYPE[d], "A type": A_TYPE[kind, ab], "B type": A_TYPE[kind, ab],
                     "N >> 3": n // 8, "M >> 4": m // 16})
    assert _fields(value, IDESC_FIELDS) == expected


def test_majors_and_negation_have_their_own_bits() -> None:
    plain = tcgen05.instruction_descriptor(Kind.F16, "f16", "f16", "f32", 128, 64)
    for option, field in (("a_mn_major", "transpose A"), ("b_mn_major", "transpose B"),
                          ("negate_a", "negate A"), ("negate_b", "negate B")):
        value = tcgen05.instruction_descriptor(Kind.F16, "f16", "f16", "f32", 128, 64,
                                               **{option: True})
        assert value ^ plain == 1 << IDESC_FIELDS[field][0]


def test_mixed_8_bit_operands_have_their_own_types() -> None:
    value = tcgen05.instruction_descriptor(Kind.F8F6F4, "f8_e4m3", "f8_e5m2", "f32", 128, 128)
    fields = _fields(value, IDESC_FIELDS)
    assert (fields["A type"], fields["B type"]) == (0, 1)


@pytest.mark.parametrize("kind, ab, d, m, n, cta_group, message", [
    (Kind.F16, "f16", "f32", 256, 128, 1, "M = 256 with cta_group::1"),
    (Kind.F16, "f16", "f32", 64, 128, 2, "M = 64 with cta_group::2"),
    (Kind.F16, "f16", "f32", 128, 8, 2, "N = 8 with cta_group::2"),
    (Kind.F16, "f16", "f32", 128, 264, 1, "N = 264"),
    (Kind.F16, "f16", "f32", 128, 12, 1, "N = 12"),
    (Kind.F16, "f8_e4m3", "f32", 128, 64, 1, "f8_e4m3 with .kind::f16"),
    (Kind.F8F6F4, "f8_e4m3", "f16", 128, 64, 1, "accumulator of type f16 with .kind::f8f6f4"),
    (Kind.F16, "f16", "f32", 128, 64, 3, "cta_group::3"),
])
def test_shapes_and_types_no_instruction_takes_are_refused(kind: Kind, ab: str, d: str, m: int,
                                                           n: int, cta_group: int,
                                                           message: str) -> None:
    with pytest.raises(tcgen05.DescriptorError, match=re.escape(message)):
        tcgen05.instruction_descriptor(kind, ab, ab, d, m, n, cta_group=cta_group)


# ---- the shared-memory matrix descriptor -----------------------------------------------
# PTX ISA, "Shared memory descriptor" (tcgen05): field -> (first bit, width).
SMEM_FIELDS = {
    "start address >> 4": (0, 14), "reserved 14": (14, 2),
    "leading byte offset >> 4": (16, 14), "reserved 30": (30, 2),
    "stride byte offset >> 4": (32, 14), "fixed 0b001": (46, 3), "base offset": (49, 3),
    "leading offset mode": (52, 1), "reserved 53": (53, 8), "swizzle": (61, 3),
}
SWIZZLE_CODES = {Swizzle.NONE: 0, Swizzle.B128_BASE32: 1, Swizzle.B128: 2, Swizzle.B64: 4,
                 Swizzle.B32: 6}


def test_the_smem_descriptor_table_covers_64_bits() -> None:
    assert _covers(SMEM_FIELDS, 64)


@pytest.mark.parametrize("swizzle", list(Swizzle))
@pytest.mark.parametrize("address, leading, stride", [
    (0, 16, 1024), (0x1_2340, 128, 2048), (0x3_FFF0, 0x3_FFF0, 16)])
def test_the_smem_descriptor_field_by_field(address: int, leading: int, stride: int,
                                            swizzle: Swizzle) -> None:
    value = tcgen05.smem_descriptor(address, leading_bytes=leading, stride_bytes=stride,
                                    swizzle=swizzle, base_offset=3)
    assert 0 <= value < 1 << 64
    expected = dict.fromkeys(SMEM_FIELDS, 0)
    expected.update({"start address >> 4": address >> 4, "leading byte offset >> 4": leading >> 4,
                     "stride byte offset >> 4": stride >> 4, "fixed 0b001": 1, "base offset": 3,
                     "swizzle": SWIZZLE_CODES[swizzle]})
    assert _fields(value, SMEM_FIELDS) == expected


def test_the_kernel_adds_the_address_to_the_descriptor_it_was_given() -> None:
    """gemm_sm100.cu computes SMEM_DESC + (address >> 4) for each tile and K step."""
    base = tcgen05.k_major_sw128_descriptor(0)
    for address in (0, 1024, 0x8000 + 32, 0x3_7000 + 96):
        assert base + (address >> 4) == tcgen05.k_major_sw128_descriptor(address)
    fields = _fields(base, SMEM_FIELDS)
    assert (fields["stride byte offset >> 4"], fields["swizzle"]) == (1024 >> 4, 2)


@pytest.mark.parametrize("kwargs, message", [
    ({"address": 8}, "address 8"), ({"address": 1 << 18}, "address"),
    ({"leading_bytes": 24}, "leading byte offset 24"), ({"base_offset": 8}, "base offset 8")])
def test_descriptors_of_unaligned_tiles_are_refused(kwargs: dict, message: str) -> None:
    args = {"address": 0, "leading_bytes": 16, "stride_bytes": 1024, "swizzle": Swizzle.B128,
            **kwargs}
    with pytest.raises(tcgen05.DescriptorError, match=message):
        tcgen05.smem_descriptor(**args)


# ---- tensor memory ---------------------------------------------------------------------

@pytest.mark.parametrize("n, m, cta_group, columns", [
    (256, 128, 1, 256), (64, 128, 1, 64), (8, 64, 1, 32), (96, 128, 1, 128),
    (200, 256, 2, 256), (256, 128, 2, 128), (16, 128, 2, 32), (512, 128, 1, 512)])
def test_the_tmem_allocation_is_a_power_of_two_of_at_least_32_columns(
        n: int, m: int, cta_group: int, columns: int) -> None:
    assert tcgen05.tmem_columns(n, m=m, cta_group=cta_group) == columns
    with pytest.raises(tcgen05.DescriptorError, match="tensor memory has 512"):
        tcgen05.tmem_columns(520)


LAYOUTS = [(128, 1), (64, 1), (256, 2), (128, 2)]


@pytest.mark.parametrize("rows, cta_group", LAYOUTS)
@pytest.mark.parametrize("cols", [16, 64, 256])
def test_every_accumulator_element_has_its_own_cell(rows: int, cta_group: int, cols: int) -> None:
    columns = tcgen05.tmem_columns(cols, m=rows, cta_group=cta_group)
    cells = {tmem_cell(m, n, rows=rows, cols=cols, cta_group=cta_group)
             for m in range(rows) for n in range(cols)}
    assert len(cells) == rows * cols
    assert all(c.cta < cta_group and 0 <= c.lane < 128 and 0 <= c.column < columns
               for c in cells)


def test_one_cta_m128_puts_row_m_in_lane_m() -> None:
    assert tmem_cell(37, 200, rows=128, cols=256) == TmemCell(0, 37, 200)


def test_one_cta_m64_is_layout_f() -> None:
    """Seed 001: rows 0-15, 16-31, 32-47, 48-63 in lanes 0-15, 32-47, 64-79, 96-111; with
    lane alignment 16 in the lanes that leaves free."""
    lanes = [tmem_cell(m, 0, rows=64, cols=8).lane for m in range(64)]
    assert lanes == [*range(0, 16), *range(32, 48), *range(64, 80), *range(96, 112)]
    shifted = [tmem_cell(m, 0, rows=64, cols=8, lane_offset=16).lane for m in range(64)]
    assert shifted == [*range(16, 32), *range(48, 64), *range(80, 96), *range(112, 128)]
    assert not set(lanes) & set(shifted)
    with pytest.raises(tcgen05.DescriptorError, match="lane offset 8"):
        tmem_cell(0, 0, rows=64, cols=8, lane_offset=8)


def test_a_cta_pair_m256_splits_the_rows() -> None:
    assert tmem_cell(127, 5, rows=256, cols=16, cta_group=2) == TmemCell(0, 127, 5)
    assert tmem_cell(128, 5, rows=256, cols=16, cta_group=2) == TmemCell(1, 0, 5)


def test_a_cta_pair_m128_is_layout_b() -> None:
    """Seed 001's examples with N = 16: C[10, 3] in lane 10 and C[10, 11] in lane 74 of
    the even CTA; rows 64-127 in the odd one."""
    assert tmem_cell(10, 3, rows=128, cols=16, cta_group=2) == TmemCell(0, 10, 3)
    assert tmem_cell(10, 11, rows=128, cols=16, cta_group=2) == TmemCell(0, 74, 3)
    assert tmem_cell(100, 11, rows=128, cols=16, cta_group=2) == TmemCell(1, 100, 3)


def test_cells_outside_the_accumulator_are_errors() -> None:
    with pytest.raises(IndexError, match=r"C\[128, 0\]"):
        tmem_cell(128, 0, rows=128, cols=64)
    with pytest.raises(tcgen05.DescriptorError, match="M = 256 with cta_group::1"):
        tmem_cell(0, 0, rows=256, cols=64)
    with pytest.raises(tcgen05.DescriptorError, match="N = 8 with cta_group::2"):
        tmem_cell(0, 0, rows=128, cols=8, cta_group=2, kind=Kind.F8F6F4)
    with pytest.raises(tcgen05.DescriptorError, match="32-bit accumulators only"):
        tmem_cell(0, 0, rows=128, cols=64, accumulator="f16")


@pytest.mark.parametrize("kind", list(Kind))
@pytest.mark.parametrize("rows, cta_group", LAYOUTS)
def test_the_operand_types_decide_the_shapes_not_the_places(kind: Kind, rows: int,
                                                            cta_group: int) -> None:
    """Seed 001: N from 8 (one CTA) or 16 (a pair) to 256; f16/bf16 and 8-bit operands
    put C[m, n] in the same cell."""
    step = 8 * cta_group
    for cols in (step, 256):
        for m, n in ((0, 0), (rows - 1, cols - 1), (rows // 2, cols // 2)):
            assert tmem_cell(m, n, rows=rows, cols=cols, cta_group=cta_group, kind=kind) == \
                tmem_cell(m, n, rows=rows, cols=cols, cta_group=cta_group)


# ---- the epilogue ----------------------------------------------------------------------

CONFIGS = [Sm100Config(), Sm100Config("bf16", "bf16", tile_n=64),
           Sm100Config(cta_group=2), Sm100Config("f8_e4m3", "bf16", 2, 128)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_the_epilogue_stores_each_element_from_its_cell_once(config: Sm100Config) -> None:
    """The epilogue's address functions (the kernel's own, evaluated in Python) read each
    element of C from the cell the accumulator layout puts it in, and write it once."""
    written: set[tuple[int, int]] = set()
    for rank in range(config.cta_group):
        for cell, (row, col) in epilogue_writes(config, rank):
            assert (row, col) not in written, f"C[{row}, {col}] stored twice"
            written.add((row, col))
            assert tmem_cell(row, col, rows=config.mma_m, cols=config.tile_n,
                             cta_group=config.cta_group, kind=config.kind) == cell, \
                f"C[{row}, {col}]"
            assert cell.column < config.tmem_columns
    assert len(written) == config.mma_m * config.tile_n


def test_a_wrong_epilogue_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check fails for an epilogue that forgets the swizzle of its staged boxes."""
    edited = tuple((name, params, "t * 128 + unit * 16" if name == "epi_unit_offset" else expr)
                   for name, params, expr in gemm_sm100.EPILOGUE)
    monkeypatch.setattr(gemm_sm100, "EPILOGUE", edited)
    config = Sm100Config(tile_n=64)
    wrong = [(cell, at) for cell, at in epilogue_writes(config)
             if tmem_cell(*at, rows=128, cols=64) != cell]
    assert wrong and "t * 128 + unit * 16" in source(config)


# ---- the generated source --------------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_the_source_carries_the_builders_constants(config: Sm100Config) -> None:
    text = source(config)
    idesc = int(re.search(r"IDESC = (0x[0-9a-f]+)u;", text).group(1), 16)
    fields = _fields(idesc, IDESC_FIELDS)
    assert (fields["M >> 4"] * 16, fields["N >> 3"] * 8) == (config.mma_m, config.tile_n)
    assert fields["A type"] == A_TYPE[config.kind, config.operand] and fields["D type"] == 1
    smem = int(re.search(r"SMEM_DESC = (0x[0-9a-f]+)ull;", text).group(1), 16)
    assert smem == tcgen05.k_major_sw128_descriptor(0)
    assert f"TMEM_COLS = {config.tmem_columns};" in text
    assert f'#define KIND "{config.kind.value}"' in text
    assert f"#define CTA_GROUP {config.cta_group}" in text
    assert config.stages * config.stage_bytes + 4 * 32 * 128 + 1024 + 256 <= 227 * 1024
    # the MMAs of a stage step 32 bytes along its 128-byte rows: K covered once
    steps = config.box_k // config.kind.k
    assert [k * config.kind.k * config.operand_bytes for k in range(steps)] == [0, 32, 64, 96]


@pytest.fixture(scope="session")
def ptxas_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[Sm100Config, str]:
    """nvcc's resource report of two generated kernels (one compile each, per session):
    cta_group::1 .kind::f16 and cta_group::2 .kind::f8f6f4."""
    nvcc = settings.nvcc()
    if nvcc is None:
        pytest.skip("no nvcc on this machine: the sm_100a build is not checked")
    folder = tmp_path_factory.mktemp("sm100")
    reports = {}
    for config in (Sm100Config("bf16", "bf16"), Sm100Config("f8_e4m3", "f16", cta_group=2)):
        path = folder / f"gemm_{len(reports)}.cu"
        path.write_text(source(config))
        done = subprocess.run([nvcc, *nvcc_flags(gemm_sm100.ARCH), "-Xptxas", "-v", "-o",
                               str(path.with_suffix(".cubin")), str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{config}:\n{done.stderr}"
        assert path.with_suffix(".cubin").read_bytes()[:4] == b"\x7fELF"
        reports[config] = done.stderr
    return reports


def test_the_generated_kernels_build_for_sm_100a_without_spills(
        ptxas_reports: dict[Sm100Config, str]) -> None:
    assert len(ptxas_reports) == 2
    for config, report in ptxas_reports.items():
        assert "Compiling entry function 'croq_gemm_sm100' for 'sm_100a'" in report, config
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, config
        used = int(re.search(r"Used (\d+) registers", report).group(1))
        assert used <= 168, f"{config}: {used} registers"  # 192 threads, one CTA per SM


# ---- compiling and calling -------------------------------------------------------------

def test_target_sm_100a_gives_the_tcgen05_kernel() -> None:
    fn = croqtile.compile(GEMM, backend="cuda", target="sm_100a", defines={"DT": "bf16"}).gemm
    assert fn.compiled.plan == CudaPlan(GemmPlan(0, 1, 2, "bf16"), Sm100Config("bf16", "bf16"))
    assert "tcgen05.mma." in fn.cuda_source and "cta_group::1" in fn.cuda_source
    pair = croqtile.compile(GEMM, backend="cuda", target="sm_100a", cta_group=2).gemm
    assert pair.compiled.plan.blackwell == Sm100Config(cta_group=2)
    assert "#define CTA_GROUP 2" in pair.cuda_source


def test_other_targets_keep_the_hopper_kernel_and_its_source() -> None:
    fn = croqtile.compile(GEMM, backend="cuda").gemm
    assert fn.compiled.plan == CudaPlan(GemmPlan(0, 1, 2, "f16"))
    assert "wgmma.mma_async" in fn.cuda_source
    assert croqtile.compile(GEMM).gemm.cuda_source is None


@pytest.mark.parametrize("options", [{}, {"target": "sm_100a"}])
def test_the_cuda_source_is_one_translation_unit(options: dict) -> None:
    """The helpers both kernels include are spliced in: the source builds on its own."""
    text = croqtile.compile(GEMM, backend="cuda", **options).gemm.cuda_source
    assert '#include "' not in text
    assert text.count("void barrier_wait(") == 1 and text.count("void store_tile(") == 1


def test_8_bit_operands_take_kind_f8f6f4() -> None:
    fn = croqtile.compile(GEMM_E4M3, backend="cuda", target="sm_100a").gemm
    assert fn.compiled.plan == CudaPlan(GemmPlan(0, 1, 2, "f8_e4m3", "bf16"),
                                        Sm100Config("f8_e4m3", "bf16"))
    assert '#define KIND "f8f6f4"' in fn.cuda_source
    with pytest.raises(CompileError, match="f8_e4m3 operands need the tcgen05 kernel"):
        croqtile.compile(GEMM_E4M3, backend="cuda")


def test_8_bit_operands_on_the_cpu_run_the_triton_kernel() -> None:
    fn = croqtile.compile(GEMM_E4M3, backend="cuda", target="sm_100a").gemm
    a = random((130, 256), torch.float16).to(torch.float8_e4m3fn)
    b = random((70, 256), torch.float16).to(torch.float8_e4m3fn)
    out = poison(torch.empty(130, 70, dtype=torch.bfloat16))
    fn(a, b, out)
    assert_close(out, a.double() @ b.double().T, torch.bfloat16)


def test_block_scaled_gemms_are_refused_with_the_reason() -> None:
    """`.scale` (f32 scales per row and 128-wide K block) is not taken by the tcgen05
    kernel: CQ0705 at the function, and the Triton backend compiles it."""
    with pytest.raises(CompileError) as err:
        croqtile.compile(FP8_SCALED, backend="cuda", target="sm_100a")
    fused = [d for d in err.value.diagnostics if d.line == 4]
    assert [d.code for d in fused] == ["CQ0705"]
    assert "not for block-scaled .scale GEMMs" in fused[0].message
    croqtile.compile(FP8_SCALED, target="sm_100a")


@pytest.mark.parametrize("options, message", [
    ({"backend": "cuda", "cta_group": 3}, "cta_group=3"),
    ({"cta_group": 2}, "applies to backend='cuda'"),
])
def test_bad_cta_group_options_are_value_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        croqtile.compile(GEMM, **options)


def test_cta_pairs_without_sm_100_are_refused() -> None:
    with pytest.raises(CompileError, match="cta_group=2 need the tcgen05 kernel"):
        croqtile.compile(GEMM, backend="cuda", cta_group=2)


def test_on_the_cpu_the_triton_kernel_runs() -> None:
    mod = croqtile.compile(GEMM, backend="cuda", target="sm_100a",
                           defines={"TILE_M": 64, "TILE_N": 64})
    a, b = random((70, 40), torch.float16), random((36, 40), torch.float16)
    out = poison(torch.empty(70, 36, dtype=torch.float16))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod.gemm(a, b, out)
    assert not [w for w in caught if "backend='cuda'" in str(w.message)]  # (CPU: no fallback)
    assert_close(out, a.double() @ b.double().T, torch.float16)


def _triton_host(calls: list[str]):
    def host(launcher: object, device: object, *values: object) -> str:
        calls.append("triton")
        return "triton"
    return host


def _host(plan: CudaPlan, triton_host: object, args: tuple) -> object:
    """The host function ``backends.dispatch`` gives calls like ``args`` on a CUDA device."""
    return dispatch.host(plan, "gemm", args, torch.device("cuda"), triton_host,
                         lambda: Toolchain(Path("unused")))


def _no_kernel(device: object, kind: object, toolchain: object) -> None:
    raise AssertionError("no kernel may be loaded for a GPU that is not sm_100")


@pytest.mark.parametrize("capability", [(9, 0), (12, 0), (10, 3)])
def test_a_gpu_that_is_not_sm_100_runs_triton_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> None:
    monkeypatch.setattr(cuda_backend, "device_capability", lambda t: capability)
    monkeypatch.setattr(cuda_backend, "load", _no_kernel)
    monkeypatch.setattr(dispatch, "warned", set())
    operands = (torch.zeros(64, 32, dtype=torch.float16), torch.zeros(48, 32, dtype=torch.float16),
                torch.zeros(64, 48, dtype=torch.float16))
    calls: list[str] = []
    triton_host = _triton_host(calls)
    major, minor = capability
    with pytest.warns(RuntimeWarning, match=rf"capability {major}\.{minor}, and the tcgen05 kernel "
                      r"of target='sm_100a' runs only on sm_100"):
        host = _host(CudaPlan(GemmPlan(0, 1, 2, "f16"), Sm100Config()), triton_host, operands)
    assert host is triton_host
    assert host(None, None, *operands) == "triton" and calls == ["triton"]


def test_on_sm_100_suitable_calls_load_the_tcgen05_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[object] = []

    def kernel(device: object, kind: object, toolchain: object) -> object:
        loaded.append(kind)
        return lambda a, b, out: out.copy_((a.float() @ b.float().T).to(out.dtype))

    monkeypatch.setattr(cuda_backend, "device_capability", lambda t: (10, 0))
    monkeypatch.setattr(cuda_backend, "load", kernel)
    a, b = random((64, 32), torch.float16), random((48, 32), torch.float16)
    out = poison(torch.empty(64, 48, dtype=torch.float16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        host = _host(CudaPlan(GemmPlan(0, 1, 2, "f16"), Sm100Config(cta_group=2)),
                     _triton_host([]), (a, b, out))
    assert host(None, None, a, b, out) is None
    assert loaded == [Sm100Config(cta_group=2)]
    assert_close(out, a.double() @ b.double().T, torch.float16)


def test_arguments_the_tcgen05_kernel_cannot_take() -> None:
    config = Sm100Config()
    a, b, out = (torch.zeros(8, 8, dtype=torch.float16), torch.zeros(8, 8, dtype=torch.float16),
                 torch.zeros(8, 8, dtype=torch.float16))
    assert gemm_sm100.unsupported(a, b, out, config) is None
    assert "not f16 operands" in gemm_sm100.unsupported(a, b, out.float(), config)
    assert "do not form a GEMM" in gemm_sm100.unsupported(a, b, out[:, :4], config)
    assert "16 bytes" in gemm_sm100.unsupported(a[:, :4], b[:, :4], out, config)
    assert cuda_backend.blackwell_unsupported(config, a, b, out) == \
        "the tensors are not on a CUDA device"


# ---- on a GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_a_gpu_that_is_not_sm_100_the_triton_kernel_runs_with_a_warning() -> None:
    if torch.cuda.get_device_capability() == (10, 0):
        pytest.skip("this GPU is an sm_100: the tcgen05 kernel runs")
    fn = croqtile.compile(GEMM, backend="cuda", target="sm_100a").gemm
    assert_runs_triton_with_warning(fn, 300, 200, 256, "runs only on sm_100")


@pytest.mark.gpu
@pytest.mark.parametrize("cta_group", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("m, n, k", [(256, 256, 64), (1000, 1032, 520), (333, 264, 8),
                                     (4096, 4096, 4096)])
def test_the_tcgen05_kernel_computes_the_gemm(m: int, n: int, k: int, dtype: torch.dtype,
                                              cta_group: int) -> None:
    if torch.cuda.get_device_capability() != (10, 0) or settings.nvcc() is None:
        pytest.skip("the tcgen05 kernel needs an sm_100 GPU (B200/GB200) and nvcc")
    fp8 = dtype == torch.float8_e4m3fn
    if fp8 and k % 16:
        pytest.skip("8-bit rows of K elements must be multiples of 16 bytes")
    source_text = GEMM_E4M3 if fp8 else GEMM
    defines = {} if fp8 else {"DT": "bf16" if dtype == torch.bfloat16 else "f16"}
    fn = croqtile.compile(source_text, backend="cuda", target="sm_100a", cta_group=cta_group,
                          defines=defines).gemm
    out_type = torch.bfloat16 if fp8 else dtype
    a = random((m, k), torch.float16, "cuda").to(dtype)
    b = random((n, k), torch.float16, "cuda").to(dtype)
    out = poison(torch.empty(m, n, dtype=out_type, device="cuda"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the tcgen05 kernel runs: no fallback warning
        fn(a, b, out)
    assert fn.launches == 0
    assert_close(out, a.double() @ b.double().T, out_type)
