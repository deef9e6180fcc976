"""Stream-K (compile option ``stream_k``): the K iterations of the last, partial wave of a
persistent MMA launch are shared by all programs; their partial tiles meet in an f32
workspace, and the program that completes a tile adds them up in a fixed order and
writes it. Checked element by element against a float64 reference on poisoned outputs,
for tile counts below, at and above the program count (4 on the CPU unless a test sets
it, the SM count on the GPU); kernels that cannot be split are refused with CQ0705."""

from __future__ import annotations

import importlib.util
import random
import warnings
from pathlib import Path
from typing import Callable

import pytest
import torch

import croqtile
from croqtile.backends.triton import launcher
from croqtile.errors import CompileError

# the interpreter warns where the GPU would compute garbage (a division by zero)
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "croqtile/bench/kernels/gemm.co"
DATA = ROOT / "tests" / "data"
SMALL = {"TILE_M": 32, "TILE_N": 64, "TILE_K": 32}


@pytest.fixture(autouse=True)
def poisoned_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launch finds NaN in the workspace: a part read before it was written (or a
    slot no program writes) shows in the result instead of reading a lucky zero."""
    made = launcher.stream_k_buffers

    def poisoned(device, floats: int, counters: int):  # type: ignore[no-untyped-def]
        workspace, counts = made(device, floats, counters)
        workspace.fill_(float("nan"))
        return workspace, counts

    monkeypatch.setattr(launcher, "stream_k_buffers", poisoned)


def _check(fn: Callable[..., object], shapes: list[tuple[int, int, int]], device: str,
           dtype: torch.dtype = torch.float16, calls: int = 1) -> None:
    """``fn(a, b, c)`` computes c = a @ b^T; every element within f16 rounding of the
    float64 product; ``calls`` runs reuse the workspace (it must be left zeroed)."""
    gen = torch.Generator().manual_seed(5)
    for m, n, k in shapes:
        a = torch.randn(m, k, generator=gen).to(dtype).to(device)
        b = torch.randn(n, k, generator=gen).to(dtype).to(device)
        ref = a.double() @ b.double().T
        first = None
        for _ in range(calls):
            c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
            fn(a, b, c)
            err = (c.double() - ref).abs()
            bound = 2e-2 + 1e-2 * ref.abs()
            assert not torch.isnan(c).any(), (m, n, k)
            assert bool((err <= bound).all()), ((m, n, k), err.max().item())
            # the parts of a tile are added in a fixed order: the same bits every run
            assert first is None or torch.equal(c, first), (m, n, k)
            first = c


def _counters_are_clean(device: str) -> bool:
    return all(bool((counters == 0).all())
               for key, (_, counters) in launcher._STREAM_K_BUFFERS.items()
               if key[0].type == device)


# tiles of 32 x 64 on the CPU's 4 programs: 1 tile (split over all), 4 tiles (no tail),
# 6 and 9 tiles (tails of 2 and 1: split), 15 tiles (a tail of 3, more than half a wave:
# not split), ragged edges and K counts that do not divide evenly
CPU_SHAPES = [(20, 50, 96), (64, 128, 64), (64, 150, 160), (96, 150, 200), (100, 300, 72),
              (33, 70, 167)]


def test_stream_k_gemm_matches_the_reference_on_every_tile_count() -> None:
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=True)
    _check(mod.gemm, CPU_SHAPES, "cpu", calls=2)
    assert _counters_are_clean("cpu")


@pytest.mark.parametrize("programs, parts", [(7, True), (10, True), (10, 2), (10, 3)])
def test_programs_with_parts_of_two_tiles(programs: int, parts: bool | int,
                                          monkeypatch) -> None:
    """More programs than the CPU's usual 4, so that one program's share of iterations
    ends in one tile and starts in the next (two parts, two workspace slots); with a
    limit on the parts per tile, fewer programs share the iterations."""
    monkeypatch.setattr(launcher, "_CPU_SM_COUNT", programs)
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=parts)
    # 13 tiles (tails of 6 and 3), 2 tiles, 3 tiles, 10 tiles (no tail); 7, 5 and 3 K steps
    _check(mod.gemm, [(30, 800, 224), (40, 100, 160), (90, 64, 224), (64, 320, 96)], "cpu",
           calls=2)
    assert _counters_are_clean("cpu")


def test_stream_k_in_bf16() -> None:
    mod = croqtile.load(GEMM, defines={**SMALL, "DT": "bf16"}, stream_k=True)
    _check(mod.gemm, [(64, 150, 160)], "cpu", dtype=torch.bfloat16)


def test_stream_k_with_an_f16_accumulator_sums_partials_in_f32() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile) is expected here
        mod = croqtile.load(DATA / "seed000_sm90_gemm.co", stream_k=True,
                            defines={"MATMUL_WARP_M": 32, "MATMUL_WARP_N": 32,
                                     "MATMUL_TILE_K": 32})
    _check(mod.matmul, [(100, 72, 90), (40, 64, 256)], "cpu")


@pytest.mark.parametrize("programs", [4, 10])
def test_more_programs_than_iterations(programs: int, monkeypatch) -> None:
    """One tile of 3 K steps (and three of 2) on more programs than iterations: only as
    many programs share them as there are iterations (a program without a share would
    have no part in its slot)."""
    monkeypatch.setattr(launcher, "_CPU_SM_COUNT", programs)
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=True)
    _check(mod.gemm, [(20, 50, 96), (20, 150, 64)], "cpu", calls=2)


def test_one_k_step_per_tile_is_not_split() -> None:
    """K within one step: every tile of the tail goes whole to one program."""
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=True)
    _check(mod.gemm, [(100, 300, 20), (20, 50, 32)], "cpu")


def test_stream_k_launch_uses_every_program_and_a_workspace() -> None:
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=True)
    text = mod.gemm.triton_source
    assert "programs = launch.sm_count(device)" in text
    assert "launch.stream_k_buffers(device, programs * 4096, programs)" in text
    assert "sem='acq_rel'" in text
    assert "while (it > it_start):" in text and "STREAM_K: tl.constexpr" in text
    # the data-parallel loop keeps the K loop's software pipeline
    assert "num_stages=3" in text


KEPT = "kept = ((k_hi == k_steps) & ((peek + steps) == k_steps))"
# parts of 64 x 256 floats: large enough to be kept in registers (stream_k._KEPT_FLOATS)
LARGE = {"TILE_M": 64, "TILE_N": 256, "TILE_K": 32}
# 2 x 2 tiles in two lanes, 1 x 4 tiles in one, a ragged edge; 7, 5 and 4 K steps
LARGE_SHAPES = [(128, 512, 224), (64, 1024, 160), (100, 300, 128)]


def _record_workspaces(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """The workspace of every launch from here on, in order (poisoned with NaN before
    the launch)."""
    poisoned, used = launcher.stream_k_buffers, []

    def recording(device, floats: int, counters: int):  # type: ignore[no-untyped-def]
        buffers = poisoned(device, floats, counters)
        used.append(buffers[0])
        return buffers

    monkeypatch.setattr(launcher, "stream_k_buffers", recording)
    return used


def _written_slots(workspace: torch.Tensor, floats: int) -> int:
    """How many slots of ``floats`` a launch wrote in its (poisoned) workspace."""
    slots = workspace[: workspace.numel() // floats * floats].view(-1, floats)
    return int(torch.isfinite(slots).all(dim=1).sum())


def test_the_part_that_completes_a_tile_stays_in_registers(tmp_path: Path,
                                                          monkeypatch) -> None:
    """The interpreter runs programs in order, so the program of a tile's last
    iterations (the highest) always finds the other parts counted and keeps its own
    part: fewer slots are written than by a copy of the generated source that never
    keeps one. That copy takes the path the GPU takes when such a program finds a part
    missing: it writes its own, and the program that completes the count (itself or
    another) sums every part from the workspace. Both match the reference."""
    monkeypatch.setattr(launcher, "_CPU_SM_COUNT", 10)
    fn = croqtile.load(GEMM, defines=LARGE, stream_k=True).gemm
    text = fn.triton_source
    assert text.count(KEPT) == 1
    path = tmp_path / "never_kept.py"
    path.write_text(text.replace(KEPT, "kept = (k_hi < 0)"))
    spec = importlib.util.spec_from_file_location("never_kept", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def never_kept(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        (m, k), n = a.shape, b.shape[0]
        module.host_gemm(fn.launcher, a.device, a, b, c, k, m, n)

    for gemm in (fn, never_kept):
        _check(gemm, LARGE_SHAPES, "cpu", calls=2)
        assert _counters_are_clean("cpu")
    a, b = torch.randn(128, 224).half(), torch.randn(512, 224).half()
    c = torch.empty(128, 512, dtype=torch.float16)
    used = _record_workspaces(monkeypatch)  # (one buffer, reused: counted after each)
    fn(a, b, c)
    kept = _written_slots(used[-1], 64 * 256)
    never_kept(a, b, c)
    written = _written_slots(used[-1], 64 * 256)
    assert 0 < kept < written, (kept, written)
    # smaller parts are always written: no count read before
    small = croqtile.load(GEMM, defines=SMALL, stream_k=True).gemm.triton_source
    assert "kept" not in small and "sem='acquire'" not in small


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_splits_match_the_reference(seed: int, monkeypatch) -> None:
    """Random shapes, tiles (parts kept or not), program counts and stream_k values:
    lanes, parts over tile edges, ragged edges and idle programs together."""
    rng = random.Random(seed)
    modules: dict[tuple[object, ...], Callable[..., object]] = {}
    for _ in range(8):
        tm, tn = rng.choice([(32, 64), (64, 256), (16, 64)])
        mode = rng.choice([True, "always", 2, 3])
        monkeypatch.setattr(launcher, "_CPU_SM_COUNT", rng.randint(2, 14))
        key = (tm, tn, mode)
        if key not in modules:
            modules[key] = croqtile.load(
                GEMM, defines={"TILE_M": tm, "TILE_N": tn, "TILE_K": 32}, stream_k=mode).gemm
        shape = (rng.randint(1, 4 * tm), rng.randint(1, 5 * tn), rng.randint(1, 256))
        _check(modules[key], [shape], "cpu", calls=2)
        assert _counters_are_clean("cpu"), (key, shape)


def test_stream_k_epilogue_runs_once_per_tile() -> None:
    """A fused bias/scale/ReLU epilogue (relabelled register tile) after the split."""
    from tests.e2e.test_epilogue import LINEAR

    mod = croqtile.compile(LINEAR, stream_k=True, defines={"TM": 32, "TN": 32})
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(70, 200, generator=gen).half(), torch.randn(90, 200, generator=gen).half()
    bias = torch.randn(90, generator=gen)
    y = torch.full((70, 90), float("nan"), dtype=torch.float16)
    mod.linear(x, w, bias, y, 0.5)
    ref = torch.relu((x.double() @ w.double().T) * 0.5 + bias.double())
    assert bool(((y.double() - ref).abs() <= 2e-2 + 1e-2 * ref.abs()).all())


@pytest.mark.parametrize("source, options, reason", [
    (GEMM, {"persistent": False}, "it needs a persistent launch"),
    (DATA / "persistent_gemm.co", {}, "statements before the epilogue write memory"),
])
def test_kernels_that_cannot_be_split_are_refused_at_the_block(source: Path, options: dict,
                                                               reason: str) -> None:
    with pytest.raises(CompileError) as info:
        croqtile.load(source, stream_k=True, **options)
    text = str(info.value)
    assert "CQ0705" in text and "stream_k" in text and reason in text
    assert ": block" in text  # the caret is under the block level of the source


@pytest.mark.parametrize("bad", [1, 0, "yes", 2.5, "Always"])
def test_stream_k_option_is_a_bool_or_a_part_count(bad: object) -> None:
    with pytest.raises(ValueError, match="stream_k"):
        croqtile.load(GEMM, stream_k=bad)


@pytest.mark.parametrize("mode, splits", [(True, False), ("always", True)])
def test_always_splits_a_last_wave_more_than_half_full(mode: bool | str, splits: bool,
                                                        monkeypatch) -> None:
    """3 tiles on the CPU's 4 programs (a single wave, three quarters full) and 15 tiles
    (a tail of 3): stream_k=True leaves such a wave whole, "always" deals its K iterations
    out; then parts are written to the workspace (poisoned with NaN before each launch)."""
    used = _record_workspaces(monkeypatch)
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=mode)
    for shape in [(96, 64, 96), (96, 320, 96)]:
        used.clear()
        _check(mod.gemm, [shape], "cpu", calls=2)
        assert len(used) == 2
        assert all(bool(torch.isfinite(w).any()) == splits for w in used), shape
    assert _counters_are_clean("cpu")


def test_a_part_limit_deals_the_iterations_to_fewer_programs() -> None:
    text = croqtile.load(GEMM, defines=SMALL, stream_k=2).gemm.triton_source
    assert "sharing = tl.maximum(1, tl.minimum(tl.minimum(sk_iters, members), " \
        "(lane_tiles * 2)))" in text


@pytest.mark.parametrize("programs, parts", [(8, True), (10, True), (8, 2), (9, "always")])
def test_lanes_keep_the_tiles_of_one_column_in_step(programs: int, parts: bool | int | str,
                                                    monkeypatch) -> None:
    """Over at most ``group_m`` rows the split tiles of one column go to as many lanes,
    each with its own programs, where the split starts at a multiple of the rows and each
    lane gets at least two programs; otherwise one lane takes them all. 4 rows x 1 column
    (4 lanes: of 2 programs each, two or one programs left over), 2 x 3 (2 lanes, parts
    across tiles), 4 x 3 and 2 x 5 (tails of 4 and 2 after 8 whole tiles), 3 x 3 (a tail
    of one, not aligned: one lane), ragged rows."""
    monkeypatch.setattr(launcher, "_CPU_SM_COUNT", programs)
    mod = croqtile.load(GEMM, defines=SMALL, stream_k=parts)
    text = mod.gemm.triton_source
    assert "lanes = tl.where((((runs * 2) <= n_programs) & ((dp_tiles % runs) == 0)), " \
        "runs, 1)" in text
    assert "tile = (dp_tiles + ((sk_tile * lanes) + lane))" in text
    _check(mod.gemm, [(128, 64, 224), (64, 150, 160), (128, 150, 96), (64, 300, 128),
                      (96, 150, 200), (100, 64, 160)], "cpu", calls=2)
    assert _counters_are_clean("cpu")


# The H200 has 132 SMs: 3072^3 in 128 x 256 tiles is 288 tiles (a tail of 24), M = 128 is
# 16 tiles (all split), 4096^2 x 512 is 512 tiles (a tail of 116).
# 300 x 1000 x 2000 is 12 tiles (all split); 200 x 300 x 128 is 4 tiles of 2 K steps, 8
# iterations for 132 SMs.
GPU_SHAPES = [(3072, 3072, 3072), (128, 4096, 4096), (4096, 4096, 512), (300, 1000, 2000),
              (200, 300, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_stream_k_gemm_on_the_gpu(dtype: torch.dtype) -> None:
    name = "f16" if dtype is torch.float16 else "bf16"
    mod = croqtile.load(GEMM, defines={"DT": name}, stream_k=True)
    _check(mod.gemm, GPU_SHAPES, "cuda", dtype=dtype, calls=3)
    torch.cuda.synchronize()
    assert _counters_are_clean("cuda")


@pytest.mark.gpu
def test_always_on_the_gpu() -> None:
    """stream_k="always" on the H200's 132 SMs: 512 x 6144 is 96 tiles of 128 x 256 (one
    wave, 73 % full), 1000 x 4096 is 128 tiles, 3072^3 288 (a tail of 24)."""
    mod = croqtile.load(GEMM, defines={"DT": "bf16"}, stream_k="always")
    _check(mod.gemm, [(512, 6144, 4096), (1000, 4096, 1024), (3072, 3072, 3072)], "cuda",
           dtype=torch.bfloat16, calls=3)
    torch.cuda.synchronize()
    assert _counters_are_clean("cuda")
