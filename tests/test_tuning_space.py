"""The candidates of the default autotuning search (croqtile.tuning.space): tile values per
shape bucket, the order of the rounds, stream-K only where the grid leaves SMs idle."""

from __future__ import annotations

from pathlib import Path

import pytest

from croqtile.tuning.tile_defines import TileDefine, TileProbe
from croqtile.tuning.space import (Config, Descent, Space, default_space, idle_wave,
                                   search_space, source_defines, tile_values)

ROOT = Path(__file__).resolve().parent.parent
GEMM = (ROOT / "croqtile/bench/kernels/gemm.co").read_text()
COPY = (ROOT / "croqtile/bench/kernels/copy.co").read_text()
H200_SMS = 132
DECODE = {"M": 16, "N": 4096, "K": 4096}
SQUARE = {"M": 4096, "N": 4096, "K": 4096}

ROWS = TileDefine("TILE_M", 128, ("M",), parallel=True)
COLS = TileDefine("TILE_N", 256, ("N",), parallel=True)
STEP = TileDefine("TILE_K", 64, ("K",))
SLICE = TileDefine("WARP_K", 16, ())


def _space(bucket: dict, sms: int = H200_SMS, text: str = GEMM, function: str = "gemm",
           defines: dict | None = None, options: dict | None = None,
           mode: str = "quick", dims: dict | None = None) -> Descent:
    probe = TileProbe(text, source_defines(text), defines or {})
    return default_space(mode, probe, function, bucket, sms, defines or {}, options or {},
                         dims)


def _all_rounds(space: Descent, best: Config | None = None) -> list[list[Config]]:
    """Every round's candidates, the best staying ``best`` (the defaults when None)."""
    return [step(best or Config()) for step in space.rounds()]


def test_a_tile_over_a_small_dimension_tries_the_size_that_covers_it_first() -> None:
    assert tile_values(ROWS, {"M": 16}, True, True, "quick") == (128, 16, 32, 64)
    assert tile_values(ROWS, {"M": 64}, True, True, "quick") == (128, 64)
    assert tile_values(ROWS, {"M": 24}, True, True, "quick") == (128, 32, 64)
    assert tile_values(ROWS, {"M": 1}, True, True, "quick") == (128, 16, 32, 64)  # tl.dot: >= 16


def test_with_few_output_tiles_output_tiles_shrink_and_k_steps_grow() -> None:
    assert tile_values(COLS, DECODE, True, True, "quick") == (256, 128, 64)
    assert tile_values(COLS, DECODE, True, True, "full") == (256, 128, 64, 32)
    # a grid near one wave: three quarters (192) first, then the halvings
    assert tile_values(COLS, DECODE, True, True, "quick", True) == (256, 192, 128, 64)
    assert tile_values(COLS, DECODE, True, True, "full", True) == (256, 192, 128, 64, 32)
    assert tile_values(COLS, DECODE, True, False, "quick", True) == (256, 128, 64)  # no MMA
    assert tile_values(STEP, DECODE, True, True, "quick") == (64, 128, 32)
    assert tile_values(SLICE, DECODE, True, True, "quick") == (16, 32)


def test_otherwise_half_and_twice_within_the_tile_range() -> None:
    assert tile_values(ROWS, SQUARE, False, True, "quick") == (128, 64, 256)
    assert tile_values(ROWS, SQUARE, False, True, "full") == (128, 64, 32, 256)
    assert tile_values(COLS, SQUARE, False, True, "quick") == (256, 128)  # MMA tiles <= 256
    assert tile_values(STEP, SQUARE, False, True, "quick") == (64, 32, 128)
    # not a power of two: the powers of two around it
    assert tile_values(TileDefine("T", 192, ("N",), True), SQUARE, False, True, "quick") == (
        192, 128, 256)
    # copies and element-wise kernels: 8 to 1024
    wide = TileDefine("TILE_C", 512, ("C",), True)
    assert tile_values(wide, {"C": 8192}, False, False, "quick") == (512, 256, 1024)
    assert tile_values(TileDefine("TILE_R", 8, ("R",), True), {"R": 8192}, False, False,
                       "quick") == (8, 16)
    # below the range (an MMA slice of 8): not searched
    assert tile_values(TileDefine("W", 8, ()), SQUARE, False, True, "quick") == (8,)


def test_decode_rounds_try_the_tiles_jointly_and_stream_k_last() -> None:
    space = _space(DECODE)
    # the row, output and K tiles are searched together (the joint round), not alone
    assert [name for name, _ in space.tiles] == ["WARP_K"]
    assert space.stream_k == (True,) and space.sweeps == 1
    rounds = _all_rounds(space)
    assert rounds[0] == [Config(), Config((("WARP_K", 32),))]
    # the rows' covering tile, the output tile across the weights (halved down to 32:
    # 4096 / 64 = 64 tiles fill under half the SMs) and the K step, 4 warps at 16 rows
    assert {dict(point)["TILE_M"] for point in space.joint} == {16}
    assert sorted({(dict(p)["TILE_N"], dict(p)["TILE_K"]) for p in space.joint}) == sorted(
        (n, k) for n in (256, 128, 64, 32) for k in (64, 128, 256))
    assert {dict(point)["num_warps"] for point in space.joint} == {4}
    assert len(rounds[1]) == 12
    # few tiles: the launch options of weight-streaming shapes (deep pipelines, pointer
    # loads), every combination
    assert [c.as_dict() for c in rounds[2]][:2] == [
        {"defines": {}, "num_warps": 4, "num_stages": 4, "persistent": False,
         "descriptors": True},
        {"defines": {}, "num_warps": 4, "num_stages": 4, "persistent": False,
         "descriptors": False}]
    assert len(rounds[2]) == 16
    assert {"num_stages": 6, "descriptors": False, "num_warps": 4, "persistent": False} in [
        {k: v for k, v in c.as_dict().items() if k != "defines"} for c in rounds[2]]
    # 16 tiles of 128 x 256 on 132 SMs: stream-K on the best, only at the end
    assert rounds[3] == [Config(options=(("persistent", True), ("stream_k", True)))]
    assert len(rounds) == 4


def test_a_round_starts_from_the_best_configuration_so_far() -> None:
    space = _space({"M": 512, "N": 4096, "K": 4096})  # 4 x 16 = 64 tiles of 128 x 256
    best = Config((("WARP_K", 32),), (("num_warps", 4),))
    rounds = _all_rounds(space, best)
    names = [name for name, _ in space.tiles]
    # the TILE_N round keeps WARP_K = 32 and the options chosen so far
    by_n = {dict(c.defines).get("TILE_N"): c for c in rounds[names.index("TILE_N")]}
    assert by_n[128] == Config((("TILE_N", 128), ("WARP_K", 32)), best.options)
    by_k = {dict(c.defines).get("TILE_K"): c for c in rounds[names.index("TILE_K")]}
    assert by_k[128] == Config((("TILE_K", 128), ("WARP_K", 32)), best.options)
    # the WARP_K round offers the written value too (a define at it is left out)
    assert rounds[names.index("WARP_K")][0] == Config(options=best.options)
    # launch options on the best defines
    launch = rounds[-2]
    assert Config(best.defines, (("num_warps", 4), ("num_stages", 4),
                                 ("persistent", False), ("descriptors", True))) in launch
    # stream-K only in the last round, on the best so far: no tile round compares a
    # narrower tile at the untuned launch with stream-K on the wider one
    assert all("stream_k" not in dict(c.options) for step in rounds[:-1] for c in step)
    assert rounds[-1] == [Config(best.defines, (("num_warps", 4), ("persistent", True),
                                                ("stream_k", True)))]


def test_stream_k_only_where_the_grid_leaves_sms_idle() -> None:
    # 4096^3 in 128 x 256 tiles is 512 tiles on 132 SMs: a last wave 88 % full
    square = _space(SQUARE)
    assert not square.idle(Config())
    assert _all_rounds(square)[-1] == []
    assert dict(square.tiles)["TILE_M"] == (128, 64, 256)  # enough tiles: half and twice
    # 512 rows: 4 x 16 = 64 tiles, half the SMs idle
    tokens = _space({"M": 512, "N": 4096, "K": 4096})
    assert tokens.idle(Config())
    assert not tokens.idle(Config((("TILE_M", 64), ("TILE_N", 128))))  # 8 x 32 = 256 tiles
    assert dict(tokens.tiles)["TILE_N"] == (256, 128, 64)  # 64 tiles: under half the SMs
    # 512 x 6144: 96 tiles of 128 x 256, over half the SMs: 128 x 192 is 128 tiles
    assert dict(_space({"M": 512, "N": 6144, "K": 4096}).tiles)["TILE_N"] == (256, 192, 128, 64)
    # a kernel without MMA never gets stream-K (the option would change nothing)
    assert _space({"R": 64, "C": 64}, text=COPY, function="copy2d").stream_k == ()
    # nor a caller who fixed stream_k or a non-persistent launch
    assert _space(DECODE, options={"persistent": False}).stream_k == ()
    assert _space(DECODE, options={"stream_k": 2}).stream_k == ()
    assert _space(DECODE, mode="full").stream_k == (True, 2, 4)


def test_stream_k_counts_the_tiles_of_the_shape_searched_not_its_bucket() -> None:
    # gate_up of Llama-3 8B at 512 tokens: 28672 columns, in the bucket of 32768
    bucket, dims = {"M": 512, "N": 32768, "K": 4096}, {"M": 512, "N": 28672, "K": 4096}
    rounded = _space(bucket)  # 4 x 128 = 512 tiles: a last wave 88 % full
    assert not rounded.idle(Config()) and _all_rounds(rounded)[-1] == []
    exact = _space(bucket, dims=dims)  # 4 x 112 = 448 tiles: 52 on the last wave
    assert exact.idle(Config())
    assert _all_rounds(exact)[-1][0] == Config(options=(("persistent", True),
                                                        ("stream_k", True)))
    # the other rounds are the bucket's; the cache key tells the two apart
    assert exact.tiles == rounded.tiles and exact.options == rounded.options
    assert exact.key() != rounded.key()
    assert _space(bucket, dims=bucket).key() != exact.key()
    # a kernel that never tries stream-K keeps one key per bucket
    copy = {"R": 64, "C": 64}
    assert (_space(copy, text=COPY, function="copy2d", dims={"R": 50, "C": 64}).key()
            == _space(copy, text=COPY, function="copy2d").key())


def test_idle_waves() -> None:
    assert idle_wave(16, 132) and idle_wave(288, 132) and idle_wave(1, 4)
    assert not idle_wave(132, 132)  # full waves
    assert not idle_wave(100, 132)  # a last wave more than half full: stream-K does nothing
    assert not idle_wave(10 * 132 + 10, 132)  # 11 waves, 8 % of the launch idle
    assert idle_wave(448, 132)  # 4 waves, 15 % idle (512 x 28672 in 128 x 256 tiles)
    assert not idle_wave(0, 132)


def test_fixed_defines_and_options_are_not_searched() -> None:
    space = _space(DECODE, defines={"TILE_M": 64}, options={"num_warps": 8})
    assert [name for name, _ in space.tiles] == ["TILE_N", "TILE_K", "WARP_K"]
    assert [name for name, _ in space.options] == ["num_stages", "persistent", "descriptors"]
    # with TILE_M fixed at 64, M = 16 still overhangs but is not searched; N = 4096 in
    # 256-wide tiles: 16 tiles, few
    assert dict(space.tiles)["TILE_N"] == (256, 128, 64)


def test_full_mode_sweeps_the_tiles_twice_with_wider_options() -> None:
    space = _space(SQUARE, mode="full")
    assert space.sweeps == 2
    assert dict(space.options)["num_stages"] == (2, 3, 4, 5)
    assert len(_all_rounds(space)) == 2 * (4 + 1) + 1  # stream-K once, last


def test_configs_are_canonical() -> None:
    a = Config.of({"B": 2, "A": 1}, {"persistent": True, "num_warps": 4})
    b = Config.of({"A": 1, "B": 2}, {"num_warps": 4, "persistent": True})
    assert a == b and a.describe() == "defines={'A': 1, 'B': 2}, num_warps=4, persistent=True"
    # a define at its written value is the default
    assert Config.of({"A": 128}, {}, {"A": "128"}) == Config()


def test_a_callers_space_at_written_values_is_the_default() -> None:
    space = search_space("quick", GEMM, {"TILE_M": [128, 64]}, {}, {})
    assert space.configs() == [Config(), Config((("TILE_M", 64),))]
    listed = search_space("quick", GEMM, [{"TILE_M": 128}, {"TILE_M": 64}], {}, {})
    assert listed.configs() == [Config(), Config((("TILE_M", 64),))]
    assert isinstance(listed, Space)


@pytest.mark.parametrize("bucket, first", [({"M": 16, "N": 65536, "K": 4096}, "TILE_M"),
                                           ({"M": 65536, "N": 64, "K": 4096}, "TILE_N")])
def test_the_overhanging_tile_is_searched_first(bucket: dict, first: str) -> None:
    assert _space(bucket).tiles[0][0] == first


def test_a_three_quarter_tile_is_computed_in_two_pieces() -> None:
    """A 192-wide candidate carries ``split_tiles`` (else it would be padded to 256);
    the power-of-two candidates do not."""
    space = Descent(tiles=(("BN", (256, 192, 128)),))
    [candidates] = _all_rounds(space)
    options = {dict(c.defines).get("BN", 256): dict(c.options) for c in candidates}
    assert options == {256: {}, 192: {"split_tiles": True}, 128: {}}


def test_a_three_quarter_tile_is_also_timed_with_a_deeper_pipeline() -> None:
    """Where the search varies the stages, the 192-wide candidate of the tile round comes
    at the untuned launch, at 4 stages and at 4 stages with 4 warps; not where the caller
    fixed the stages or the best configuration so far already has them (and with the
    warps fixed or chosen, not with 4 warps)."""
    qkv = _space({"M": 512, "N": 6144, "K": 4096})  # 96 tiles of 128 x 256
    by_n = [c for c in qkv._tile("TILE_N", dict(qkv.tiles)["TILE_N"], Config())
            if dict(c.defines).get("TILE_N") == 192]
    assert [c.as_dict() for c in by_n] == [
        {"defines": {"TILE_N": 192}, "split_tiles": True},
        {"defines": {"TILE_N": 192}, "num_stages": 4, "split_tiles": True},
        {"defines": {"TILE_N": 192}, "num_warps": 4, "num_stages": 4, "split_tiles": True}]
    staged = Config(options=(("num_stages", 6),))
    assert len(qkv._tile("TILE_N", (256, 192), staged)) == 2
    warped = Config(options=(("num_warps", 8),))
    assert len(qkv._tile("TILE_N", (256, 192), warped)) == 3
    fixed = _space({"M": 512, "N": 6144, "K": 4096}, options={"num_stages": 3})
    assert len(fixed._tile("TILE_N", (256, 192), Config())) == 2
    warps = _space({"M": 512, "N": 6144, "K": 4096}, options={"num_warps": 8})
    assert len(warps._tile("TILE_N", (256, 192), Config())) == 3


def test_the_joint_round_pairs_narrow_tiles_with_long_steps() -> None:
    """A weight-streaming GEMM (few output tiles, rows fewer than the row tile) tries the
    output tile across the widest dimension and the K step together, on the best
    configuration so far; a GEMM whose rows fill its row tile has no joint round."""
    best = Config((), (("num_stages", 4),))
    qkv = _space({"M": 16, "N": 6144, "K": 4096})
    joint = qkv._joint(best)
    # what the H200's decode shapes took: 16 x 64 tiles, K steps of 128, 4 warps (on
    # the options chosen so far)
    assert Config.of({"TILE_K": 128, "TILE_M": 16, "TILE_N": 64},
                     {"num_stages": 4, "num_warps": 4}) in joint
    assert Config.of({"TILE_M": 16}, {"num_stages": 4, "num_warps": 4}) in joint
    assert all(dict(c.defines)["TILE_M"] == 16 for c in joint)
    # 6144 / 64 = 96 tiles fill over half the SMs: no 32-wide tile
    assert len(set(joint)) == len(joint) == 3 * 3
    # the rows' covering tile also when the best so far has a wider one
    wider = Config((("TILE_M", 64),), best.options)
    assert all(dict(c.defines)["TILE_M"] == 16 for c in qkv._joint(wider))
    # 64 rows: 8 warps for tiles of 64 x 128 and more; three quarters of a tile near one
    # wave computed as two pieces (split_tiles)
    gate_up = _space({"M": 64, "N": 28672, "K": 4096})
    warps = {(dict(p)["TILE_N"], dict(p)["num_warps"]) for p in gate_up.joint}
    assert warps == {(256, 4), (256, 8), (192, 4), (192, 8), (128, 4), (128, 8), (64, 4)}
    assert all(bool(dict(c.options).get("split_tiles")) == (dict(c.defines).get("TILE_N") == 192)
               for c in gate_up._joint(Config()))
    # the K step at its written value is left out of a candidate (the default's)
    assert Config((("TILE_M", 64),), (("num_warps", 4),)) in gate_up._joint(Config())
    # 512 rows fill the 128-row tile: the tiles have their own rounds
    assert _space({"M": 512, "N": 4096, "K": 4096}).joint == ()
    assert _space({"M": 256, "N": 4096, "K": 4096}).joint == ()
    # up to 128 rows the weights stream, whether or not the row tile overhangs: a kernel
    # written with 16-row tiles gets the round too, its row tile as written
    assert _space({"M": 128, "N": 4096, "K": 4096}).joint != ()
    narrow = GEMM.replace("#define TILE_M 128", "#define TILE_M 16")
    points = _space({"M": 16, "N": 4096, "K": 4096}, text=narrow).joint
    assert points and all("TILE_M" not in dict(p) for p in points)
    assert {dict(p)["num_warps"] for p in points} == {4}  # 16 x 256 tiles at most
    assert _space(SQUARE).joint == ()
    assert all("num_warps" not in dict(p) for p in _space(DECODE, options={"num_warps": 8}).joint)


def test_a_fuller_last_wave_is_not_split() -> None:
    """96 tiles on 132 SMs (one wave, 73 % full): stream_k=True leaves it whole, and
    splitting it (stream_k="always") measured 0.56-0.67x the unsplit kernel on the H200,
    so the search tries neither; 16 tiles (at most half a wave) take stream_k=True."""
    qkv = _space({"M": 512, "N": 6144, "K": 4096})  # 4 x 24 = 96 tiles of 128 x 256
    assert not qkv.idle(Config())
    rounds = _all_rounds(qkv)
    assert rounds[-1] == []
    assert all(c.as_dict().get("stream_k") != "always" for step in rounds for c in step)
    assert _all_rounds(_space(DECODE))[-1] == [
        Config(options=(("persistent", True), ("stream_k", True)))]
    # not where the caller fixed a launch that is not persistent
    fixed = _all_rounds(_space(DECODE, options={"persistent": False}))
    assert all("stream_k" not in dict(c.options) for step in fixed for c in step)


def test_a_last_wave_after_full_ones_is_also_tried_in_halves() -> None:
    """gate_up at 512 tokens: 448 tiles on 132 SMs, three full waves and 52 tiles. The last
    round tries stream-K and the halved last wave; a grid under one wave (the decode rows)
    only stream-K: narrower tiles are searched for it already."""
    dims = {"M": 512, "N": 28672, "K": 4096}
    space = _space({"M": 512, "N": 32768, "K": 4096}, dims=dims)
    assert _all_rounds(space)[-1] == [
        Config(options=(("persistent", True), ("stream_k", True))),
        Config(options=(("persistent", True), ("halve_last_wave", True)))]
    assert "halved last wave" in space.key()
    assert _all_rounds(_space(DECODE))[-1] == [
        Config(options=(("persistent", True), ("stream_k", True)))]
    # a caller who fixed either option: neither is tried against it
    fixed = _space({"M": 512, "N": 32768, "K": 4096}, dims=dims,
                   options={"halve_last_wave": True})
    assert fixed.stream_k == ()
    assert not any("stream_k" in dict(c.options) or "halve_last_wave" in dict(c.options)
                   for step in _all_rounds(fixed) for c in step)
