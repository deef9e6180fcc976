"""Finding the ``#define``s a program uses as tile extents (croqtile.tuning.tile_defines): by what
the checker computes with another value, whatever the names."""

from __future__ import annotations

from pathlib import Path

import pytest

from croqtile.tuning import tile_defines
from croqtile.tuning.tile_defines import TileDefine, TileProbe, check_shapes, integer_value
from croqtile.tuning.tuner import source_defines

ROOT = Path(__file__).resolve().parent.parent

# A GEMM whose tile sizes have names no heuristic would call tiles, a scale constant and
# a loop count that only counts
ODD_NAMES = """
#define FOO 128
#define BAR 64
#define QUUX 32
#define SCALE 3
#define REPEAT 2
#define LABEL 7

__co__ void odd(global f16 [M, K] lhs, global f16 [N, K] rhs, global f32 [M, N] out) {
  parallel {bm, bn} by [cdiv(M, FOO), cdiv(N, BAR)] : block {
    shared f16 [FOO, QUUX] a_s;
    shared f16 [BAR, QUUX] b_s;
    acc = mma.fill.f32 0.0f;
    foreach {k} in [cdiv(K, QUUX)] {
      dma.copy lhs.subspan(FOO, QUUX).at(bm, k) => a_s;
      dma.copy rhs.subspan(BAR, QUUX).at(bn, k) => b_s;
      foreach {r} in [REPEAT] {
        parallel p by 1 : group-4 {
          ma = mma.load a_s;
          mb = mma.load b_s;
          mma.row.row acc, ma, mb;
        }
      }
    }
    shared f32 [FOO, BAR] o_s;
    mma.store acc, o_s;
    dma.copy o_s => out.subspan(FOO, BAR).at(bm, bn);
  }
}
"""

SCALED = """
#define WIDTH 128
#define FACTOR 16
__co__ void scaled(global f32 [N] x, global f32 [N] y) {
  parallel p by cdiv(N, WIDTH) : block {
    foreach i in [WIDTH]
      if (p * WIDTH + i < N) { y.at(p * WIDTH + i) = x.at(p * WIDTH + i) * FACTOR; }
  }
}
"""

# HEAD is a problem size (a parameter's dimension) even though views use it as an extent
PROBLEM_SIZE = """
#define HEAD 64
#define ROWS 32
__co__ void rows(global f32 [N, HEAD] x, global f32 [N, HEAD] y) {
  parallel p by cdiv(N, ROWS) : block {
    shared f32 [ROWS, HEAD] s;
    dma.copy x.subspan(ROWS, HEAD).at(p, 0) => s;
    dma.copy s => y.subspan(ROWS, HEAD).at(p, 0);
  }
}
"""


def _tiles(text: str, function: str, fixed: dict | None = None) -> dict[str, TileDefine]:
    probe = TileProbe(text, source_defines(text), fixed or {})
    return {t.name: t for t in probe.tile_defines(function)}


def test_defines_used_as_tile_extents_are_found_whatever_their_names() -> None:
    tiles = _tiles(ODD_NAMES, "odd")
    assert set(tiles) == {"FOO", "BAR", "QUUX"}  # not SCALE, REPEAT or LABEL
    assert tiles["FOO"] == TileDefine("FOO", 128, ("M",), parallel=True)
    assert tiles["BAR"] == TileDefine("BAR", 64, ("N",), parallel=True)
    # QUUX steps a loop over K: it tiles K, but spreads nothing over blocks
    assert tiles["QUUX"] == TileDefine("QUUX", 32, ("K",), parallel=False)


def test_a_scale_constant_is_not_a_tile_but_a_block_width_is() -> None:
    tiles = _tiles(SCALED, "scaled")
    assert list(tiles) == ["WIDTH"] and tiles["WIDTH"].dims == ("N",)
    assert tiles["WIDTH"].parallel


def test_a_problem_size_is_never_a_tile_define() -> None:
    tiles = _tiles(PROBLEM_SIZE, "rows")
    assert list(tiles) == ["ROWS"]


def test_a_loop_count_is_no_tile_unless_it_shapes_a_buffer() -> None:
    # STAGES shapes the shared rings (array dimensions): it is found; REPEAT only counts
    ring = """
#define STAGES 2
#define REPEAT 3
#define BM 64
__co__ void ring(global f32 [M] x, global f32 [M] y) {
  parallel p by cdiv(M, BM) : block {
    shared f32 [BM] buf[STAGES];
    foreach {r} in [REPEAT] {
      dma.copy x.subspan(BM).at(p) => buf[r % STAGES];
    }
    dma.copy buf[0] => y.subspan(BM).at(p);
  }
}
"""
    tiles = _tiles(ring, "ring")
    assert set(tiles) == {"STAGES", "BM"}
    assert tiles["STAGES"].dims == () and not tiles["STAGES"].parallel


def test_fixed_defines_are_not_probed_and_their_values_hold_in_the_probes() -> None:
    tiles = _tiles(ODD_NAMES, "odd", {"FOO": 64})
    assert set(tiles) == {"BAR", "QUUX"}
    probe = TileProbe(ODD_NAMES, source_defines(ODD_NAMES), {"FOO": 64})
    # M = 512 rows in tiles of 64 (the fixed value), N = 256 in tiles of 64: 8 x 4
    assert probe.output_tiles("odd", {}, {"M": 512, "N": 256, "K": 64}) == 32
    assert probe.output_tiles("odd", {"BAR": 128}, {"M": 512, "N": 256, "K": 64}) == 16
    assert probe.output_tiles("odd", {}, {"M": 512}) is None  # N unknown


def test_the_bench_and_seed_kernels() -> None:
    for path, function, names in [
            ("croqtile/bench/kernels/gemm.co", "gemm", ("TILE_M", "TILE_N", "TILE_K", "WARP_K")),
            ("tests/data/seed000_sm90_gemm.co", "matmul",
             ("MATMUL_WARP_M", "MATMUL_WARP_N", "MATMUL_TILE_K", "MATMUL_WARP_K"))]:
        text = (ROOT / path).read_text()
        probe = TileProbe(text, source_defines(text), {})
        tiles = probe.tile_defines(function)
        assert tuple(t.name for t in tiles) == names  # (DT, the element type, is not)
        assert [t.dims for t in tiles] == [("M",), ("N",), ("K",), ()]
        assert [t.parallel for t in tiles] == [True, True, False, False]
        assert probe.has_mma(function)
    copy = (ROOT / "croqtile/bench/kernels/copy.co").read_text()
    probe = TileProbe(copy, source_defines(copy), {})
    assert not probe.has_mma("copy2d")
    assert [t.name for t in probe.tile_defines("copy2d")] == ["TILE_R", "TILE_C"]


def test_a_failing_probe_finds_no_tile_defines(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:  # a compiler bug in the checker: tuning goes on without tile defines
        def __init__(self, *args: object) -> None:
            raise RuntimeError("bug")

    monkeypatch.setattr(tile_defines, "Checker", Broken)
    assert check_shapes(ODD_NAMES, {}) == {}
    assert TileProbe(ODD_NAMES, source_defines(ODD_NAMES), {}).tile_defines("odd") == ()


def test_integer_values() -> None:
    assert [integer_value(v) for v in ("128", " 64 ", "0", "-4", "2.0", "f16", "(64)")] == [
        128, 64, None, None, None, None, None]
