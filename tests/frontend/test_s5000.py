"""``target="s5000"``: the Moore Threads S5000 tensor-engine tables (seed 003) and the
checker rules that apply them; the verdicts on the seed and bench kernels.

Every code has its own wrong and fixed program in ``tests/test_error_codes.py`` (from
``frontend/code_examples_s5000.py``); this file checks the tables' transcription, the
cases around each rule's edge, that the rules belong to the s5000 target only, and what
compiling for s5000 produces."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import croqtile
from croqtile.runtime.driver import check_source
from croqtile.frontend.sema import targets_s5000 as t5
from croqtile.frontend.sema.targets import lookup

ROOT = Path(__file__).resolve().parents[2]
S5000_CODES = {"CQ0438", "CQ0439", "CQ0516", "CQ0517", "CQ0518", "CQ0519", "CQ0520", "CQ0521"}


def diags(text: str, target: str = "s5000") -> list[tuple[str, str]]:
    """(code, the statement's source line) of every diagnostic."""
    return [(d.code, d.source_line.strip()) for d in check_source(text, target=target)]


def codes(text: str, target: str = "s5000") -> list[str]:
    return [code for code, _ in diags(text, target)]


# --- the tables, against the guide --------------------------------------------------------


def test_wmma_rows_are_the_guides() -> None:
    rows = {(row.operands[0], row.acc, row.shapes): row.layouts for row in t5.WMMA_ROWS}
    assert len(t5.WMMA_ROWS) == 9
    for t in ("f16", "bf16", "f8_e4m3", "f8_e5m2"):
        assert rows[((t, t), "f32", ((16, 16, 16), (16, 16, 32)))] == {"row", "col"}
    for t in ("s8", "u8"):
        assert rows[((t, t), "s32", ((16, 16, 16), (16, 16, 32), (16, 16, 64)))] == {"row", "col"}
    assert rows[(("tf32", "tf32"), "f32", ((16, 16, 16),))] == {"row", "col"}
    assert rows[(("tf32", "tf32"), "f32", ((16, 8, 4),))] == {"row"}  # row-major only
    mixed = next(row for row in t5.WMMA_ROWS if len(row.operands) > 1)
    assert set(mixed.operands) >= {("f16", "s8"), ("bf16", "s8")} and mixed.acc == "f32"


def test_sqmma_shape_lists_are_the_guides() -> None:
    half, int8, tf32 = t5.SQMMA_ROWS
    assert (half.operands, half.acc) == ((("f16", "f16"), ("bf16", "bf16")), "f32")
    assert (int8.operands, int8.acc) == ((("s8", "s8"), ("u8", "u8")), "s32")
    assert (tf32.operands, tf32.acc) == ((("tf32", "tf32"),), "f32")
    # the guide's lists have 33, 33 and 24 shapes, each once
    assert [len(set(row.shapes)) for row in t5.SQMMA_ROWS] == [33, 33, 24]
    assert {s[2] for s in half.shapes} == {16, 32, 64}
    assert {s[2] for s in int8.shapes} == {32, 64, 128}
    assert {s[2] for s in tf32.shapes} == {8, 16, 32}
    # pairs the tf32 list leaves out although the 16-bit list has them
    assert (32, 128, 8) not in tf32.shapes and (128, 32, 8) not in tf32.shapes
    assert (32, 128, 16) in half.shapes and (16, 16, 16) not in half.shapes


def test_tme_tables_are_the_guides() -> None:
    assert list(t5.TME_TILE_RANKS) == [1, 2, 3, 4, 5]
    assert len(t5.TME_SWIZZLES) == 15
    assert (0, 256, 256) in t5.TME_SWIZZLES and (0, 128, 128) not in t5.TME_SWIZZLES
    assert {sl for _, _, sl in t5.TME_SWIZZLES} == {128, 256}
    assert all(ss <= sl and sg < ss for sg, ss, sl in t5.TME_SWIZZLES)


def test_the_target_names() -> None:
    target = lookup("s5000")
    assert target is not None and target.engine is t5.S5000
    assert lookup("S5000") is target and lookup("mp_31") is target
    assert lookup("sm_90") is not None and lookup("sm_90").engine is None
    assert lookup("s500") is None


# --- the rules ------------------------------------------------------------------------------

WARP = """\
__co__ void f(global {T} [{M}, {K}] a, global {T} [{N}, {K}] b, global {C} [{CM}, {CN}] c) {{
  parallel p by 1 : block {{
    parallel w by 1 : group {{
      mc = mma.fill.{C} 0;
      mma.row.row mc, a, b;
      mma.store{STORE} mc, c;
    }}
  }}
}}
"""

WARPGROUP = """\
__co__ void f(global {T} [{M}, {K}] a, global {T} [{N}, {K}] b, global {C} [{M}, {N}] c) {{
  parallel p by 1 : block {{
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {{
      mc = mma.fill.{C} 0;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }}
  }}
}}
"""


def warp(t: str, m: int, n: int, k: int, c: str = "f32", transp: bool = False) -> str:
    """A warp-scope MMA; ``transp`` stores the accumulator column-major into c [N, M]."""
    cm, cn = (n, m) if transp else (m, n)
    return WARP.format(T=t, M=m, N=n, K=k, C=c, CM=cm, CN=cn,
                       STORE=".transp" if transp else "")


def warpgroup(t: str, m: int, n: int, k: int, c: str = "f32") -> str:
    return WARPGROUP.format(T=t, M=m, N=n, K=k, C=c)


@pytest.mark.parametrize("t, m, n, k, c", [
    ("f16", 16, 16, 16, "f32"), ("bf16", 32, 64, 32, "f32"),  # several 16x16 pieces
    ("f8_e4m3", 16, 16, 32, "f32"), ("f8_e5m2", 32, 16, 64, "f32"),
    ("s8", 16, 16, 64, "s32"), ("u8", 16, 32, 32, "s32"),
    ("f32", 16, 16, 16, "f32"), ("f32", 16, 8, 4, "f32"), ("f32", 32, 24, 8, "f32"),
])
def test_warp_tiles_that_wmma_shapes_divide_pass(t: str, m: int, n: int, k: int, c: str) -> None:
    assert codes(warp(t, m, n, k, c)) == []


@pytest.mark.parametrize("t, m, n, k, c, code", [
    ("f16", 16, 16, 16, "f16", "CQ0516"),  # f16 accumulates in f32 only
    ("f8_e4m3", 16, 16, 32, "f16", "CQ0516"),  # fp8 -> f16 is Hopper's, not WMMA's
    ("f64", 16, 16, 16, "f64", "CQ0516"),  # no WMMA row takes f64
    ("f16", 16, 16, 8, "f32", "CQ0517"),  # K = 8: no f16 shape
    ("s8", 16, 16, 8, "s32", "CQ0517"),
    ("f16", 24, 16, 16, "f32", "CQ0517"),  # M = 24: 16 does not divide it
    ("f32", 16, 8, 2, "f32", "CQ0517"),  # K = 2: not even the 16x8x4 shape
])
def test_warp_tiles_outside_the_wmma_table_fail(t: str, m: int, n: int, k: int, c: str,
                                                code: str) -> None:
    found = codes(warp(t, m, n, k, c))
    assert found == [code], found


def test_mixed_int8_operands_have_no_wmma_row() -> None:
    text = warp("s8", 16, 16, 32, "s32").replace("global s8 [16, 32] b", "global u8 [16, 32] b")
    assert codes(text, "sm_90") == []  # the NVIDIA tables take s8 x u8
    assert diags(text) == [("CQ0516", "mma.row.row mc, a, b;")]


def test_the_row_major_only_shape_refuses_a_transposed_store() -> None:
    assert codes(warp("f32", 16, 8, 4, transp=True)) == ["CQ0518"]
    # a tile that the 16x16x16 tf32 shape divides stores column-major too
    assert codes(warp("f32", 16, 16, 16, transp=True)) == []
    assert codes(warp("f16", 16, 16, 16, transp=True)) == []


@pytest.mark.parametrize("t, m, n, k, c", [
    ("f16", 64, 64, 16, "f32"), ("bf16", 128, 256, 64, "f32"),  # 128x256: two 128x128 pieces
    ("f16", 16, 64, 32, "f32"), ("f16", 192, 128, 48, "f32"),  # 192 = 3 x 64, 48 = 3 x 16
    ("s8", 64, 64, 32, "s32"), ("u8", 128, 128, 128, "s32"),
    ("f32", 64, 64, 8, "f32"), ("f32", 128, 128, 32, "f32"),
])
def test_warpgroup_tiles_that_sqmma_shapes_divide_pass(t: str, m: int, n: int, k: int,
                                                       c: str) -> None:
    assert codes(warpgroup(t, m, n, k, c)) == []


@pytest.mark.parametrize("t, m, n, k, c, code", [
    ("f16", 64, 64, 16, "f16", "CQ0519"),  # SQMMA accumulates f16 in f32 only
    ("f8_e4m3", 64, 64, 32, "f32", "CQ0519"),  # no fp8 SQMMA row
    ("f16", 16, 16, 16, "f32", "CQ0520"),  # 16x16 is no SQMMA pair (WMMA has it)
    ("f16", 64, 64, 8, "f32", "CQ0520"),  # K = 8: tf32 only
    ("s8", 64, 64, 16, "s32", "CQ0520"),  # int8 K starts at 32
    ("f32", 16, 16, 8, "f32", "CQ0520"),
])
def test_warpgroup_tiles_outside_the_sqmma_table_fail(t: str, m: int, n: int, k: int, c: str,
                                                      code: str) -> None:
    found = diags(warpgroup(t, m, n, k, c))
    assert found == [(code, "mma.row.row mc, sa.data, sb.data;")], found


def test_warpgroup_operands_must_be_in_shared_memory() -> None:
    staged = warpgroup("f16", 64, 64, 16)
    assert codes(staged) == []
    from_global = staged.replace("mma.row.row mc, sa.data, sb.data;", "mma.row.row mc, a, sb.data;")
    assert codes(from_global) == ["CQ0521"]
    loaded = staged.replace("mma.row.row mc, sa.data, sb.data;",
                            "ma = mma.load a;\n      mma.row.row mc, ma, sb.data;")
    assert codes(loaded) == ["CQ0521"]  # mma.load from global memory: still not shared
    assert codes(from_global, "sm_90") == []  # WGMMA has no such rule here


def test_the_s5000_rules_belong_to_the_s5000_target() -> None:
    programs = [warp("f16", 16, 16, 16, "f16"), warp("f16", 16, 16, 8),
                warpgroup("f16", 16, 16, 16), warpgroup("f16", 64, 64, 16, "f16")]
    for text in programs:
        assert codes(text) and set(codes(text)) <= S5000_CODES
        assert not set(codes(text, "sm_90")) & S5000_CODES


def test_the_s5000_does_not_report_the_generic_operand_type_rule() -> None:
    # f64 has no S5000 row: one diagnostic that names the table, not CQ0509 besides it
    assert codes(warp("f64", 16, 16, 16, "f64")) == ["CQ0516"]
    assert codes(warp("f8_e4m3", 16, 16, 32), "sm_86") == ["CQ0509"]


TMA = """\
__co__ void f(global f16 [{N}] x, global f16 [{N}] y) {{
  parallel p by 2 : block {{
    t = tma.load{SWIZ} x.chunkat(p) => shared;
    tma.copy t => y.chunkat(p);
  }}
}}
"""


@pytest.mark.parametrize("n, swiz, found", [
    (512, "", []),  # no swizzle: nothing to look up
    (256, ".swiz<128>", []),  # 128 f16 = 256 bytes: (16B, 128B, 256B)
    (128, ".swiz<32>", []),  # 64 f16 = 128 bytes: (16B, 32B, 128B)
    (128, ".swiz", []),  # `.swiz` alone is 128 bytes: (16B, 128B, 128B)
    (1024, ".swiz<64>", ["CQ0439"]),  # 1024 bytes: no SL that long
    (64, ".swiz<32>", ["CQ0439"]),  # 64 bytes: no SL that short
])
def test_tme_swizzle_of_rank1_tiles(n: int, swiz: str, found: list[str]) -> None:
    text = TMA.format(N=n, SWIZ=swiz)
    assert codes(text) == found
    assert codes(text, "sm_90") == []


def test_tme_swizzle_of_a_rank2_tile_is_a_warning_and_compiles() -> None:
    text = """\
__co__ void f(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 1 : block {
    t = tma.load.swiz<128> x => shared;
    tma.copy t => y;
  }
}
"""
    [d] = check_source(text, target="s5000")
    assert (d.code, d.severity, d.line) == ("CQ0438", "warning", 3)
    with pytest.warns(croqtile.CompileWarning, match="CQ0438"):
        croqtile.compile(text, target="s5000")


def test_tme_rank_and_direction_rules_hold_for_s5000() -> None:
    # seed 003: TME tiles have rank 1 to 5, and move between global and shared memory
    rank6 = """\
__co__ void f(global f16 [2, 2, 2, 2, 2, 2] x, global f16 [2, 2, 2, 2, 2, 2] y) {
  parallel p by 1 : block {
    t = tma.load x => shared;
    dma.copy t => y;
  }
}
"""
    assert codes(rank6) == ["CQ0437"]
    # swizzled as well: still the one rank diagnostic, no swizzle-table warning besides it
    assert codes(rank6.replace("tma.load x", "tma.load.swiz<128> x")) == ["CQ0437"]
    to_global = """\
__co__ void f(global f16 [64] x, global f16 [64] y) {
  parallel p by 1 : block {
    tma.load x => y;
  }
}
"""
    assert codes(to_global) == ["CQ0414"]


def test_no_shared_memory_budget_is_assumed() -> None:
    # the guide gives no shared-memory size: 300 KiB is too much on sm_90 only
    text = """\
__co__ void f(global f16 [8] x, global f16 [8] y) {
  parallel p by 1 : block {
    shared f16 [150, 1024] big;
    y.at(0) = x.at(0);
  }
}
"""
    assert codes(text, "sm_90") == ["CQ0612"]
    assert codes(text) == []


# --- what compiling for s5000 gives --------------------------------------------------------


def test_compiling_for_s5000_runs_the_triton_kernel() -> None:
    """s5000 is a checking target: a program that passes its rules compiles to the same
    Triton kernel as for the default target, and runs (here on the CPU)."""
    text = warpgroup("f16", 64, 64, 16)
    mod = croqtile.compile(text, target="s5000")
    assert mod.f.triton_source == croqtile.compile(text).f.triton_source
    a = torch.randn(64, 16, dtype=torch.float16)
    b = torch.randn(64, 16, dtype=torch.float16)
    c = torch.full((64, 64), float("nan"))
    mod.f(a, b, c)
    ref = a.double() @ b.double().T
    assert torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref) < 1e-2


def test_compiling_for_s5000_raises_on_a_rule() -> None:
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.load(ROOT / "tests/data/seed000_sm86_gemm.co", target="s5000")
    assert [d.code for d in err.value.diagnostics] == ["CQ0516"]
    croqtile.load(ROOT / "tests/data/seed000_sm86_gemm.co")  # fine for sm_90


# --- the seed and bench kernels ------------------------------------------------------------

# Each kernel's S5000 diagnostics: (code, the statement's source line). Kernels not listed
# map onto the S5000 as written.
VERDICTS: dict[str, list[tuple[str, str]]] = {
    # warp-scope f16 MMA with `mma.fill 0.0`: the default accumulator is f16, and WMMA
    # accumulates f16 operands in f32 only
    "tests/data/seed000_sm86_gemm.co": [("CQ0516", "mma.row.row mc, ma, mb;")],
    # warpgroup f16 MMA into an `mma.fill.f16` accumulator: SQMMA has f16 -> f32 only (its
    # 128x256x16 tile is fine: two 128x128x16 pieces)
    "tests/data/seed000_sm90_gemm.co": [("CQ0519", "mma.row.row mc, ma, mb;")],
    # per warpgroup 64x128x16 from shared memory into f32: an SQMMA shape itself
    "tests/data/seed000_sm90_gemm_2wg.co": [],
    # 128x128x16 from shared views directly, f32: an SQMMA shape
    "tests/data/seed000_sm90_gemm_direct.co": [],
    # no MMA, no TMA: plain copies and element-wise code
    "tests/data/seed002_tiled_add.co": [],
    "tests/data/seed004_dma_matmul.co": [],
    "tests/data/seed004_scalar_matmul.co": [],
    "croqtile/bench/kernels/add.co": [],
    "croqtile/bench/kernels/copy.co": [],
    # the scores MMA (64x128x128 from shared q and k tiles) is fine; the second MMA takes
    # the probabilities from a register tile, and SQMMA reads operands from shared memory
    "croqtile/bench/kernels/attention.co": [("CQ0521", "mma.row.col acc, probs, v_tile;")],
    # f16 128x256x16 from shared into f32: 128x128x16 pieces
    "croqtile/bench/kernels/gemm.co": [],
    # the sparse GEMM: no S5000 table has a sparse row
    "croqtile/bench/kernels/gemm_sp.co": [("CQ0524", "mma.row.row.sp acc, lhs_s.data, rhs_s.data, me;")],
    # fp8 at warpgroup scope: SQMMA has no fp8 row (WMMA has, at warp scope)
    "croqtile/bench/kernels/gemm_fp8.co": [("CQ0519", "mma.row.row acc, ma, mb;")],
    # f16 / bf16 128x256x64 from shared into f32: 128x128x64 pieces
    "croqtile/bench/kernels/linear.co": [],
    "croqtile/bench/kernels/matmul.co": [],
}


def kernel_files() -> list[str]:
    found = [*ROOT.glob("tests/data/seed*.co"), *ROOT.glob("croqtile/bench/kernels/*.co")]
    return sorted(str(p.relative_to(ROOT)) for p in found)


def test_every_seed_and_bench_kernel_has_a_verdict() -> None:
    assert kernel_files() == sorted(VERDICTS)


@pytest.mark.parametrize("path", sorted(VERDICTS))
def test_seed_and_bench_kernel_verdicts(path: str) -> None:
    text = (ROOT / path).read_text()
    found = check_source(text, filename=path, target="s5000")
    errors = [(d.code, d.source_line.strip()) for d in found if d.severity == "error"]
    assert errors == VERDICTS[path]
    assert not [d for d in found if d.code in S5000_CODES and d.severity == "warning"]
    # the same kernel has no error for the default target: the verdict is the S5000's
    assert not [d for d in check_source(text, filename=path) if d.severity == "error"]
