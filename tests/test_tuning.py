"""Autotuning (croqtile.tuning): the search, pruning, the JSON cache and the messages.
Timing needs a GPU; here a fake timer stands in, so what is tested is the logic."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile import tuning
from croqtile.tuning import Space, search_space, shape_bucket

DATA = Path(__file__).resolve().parent / "data"
GEMM = (DATA / "seed000_sm90_gemm.co").read_text()
SMALL = {"MATMUL_TILE_K": 32}

SCALED = """
#define SCALE 1
#define T 16
__co__ void scaled(global f32 [N] x, global f32 [N] y) {
  parallel p by cdiv(N, T) : block {
    foreach i in [T]
      if (p * T + i < N) { y.at(p * T + i) = x.at(p * T + i) * SCALE; }
  }
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CROQTILE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _timer(times: dict[str, float], calls: list[str]) -> Callable[[Callable[[], Any]], float]:
    """A fake timer: runs the candidate once and returns the time listed for the number
    of candidates timed so far (in order); unlisted ones take 10 ms, 20 ms, ... (none
    within the final round's margin of another)."""
    def timer(fn: Callable[[], Any]) -> float:
        fn()
        calls.append("t")
        return times.get(str(len(calls)), 10.0 * len(calls))
    return timer


def _compile(**kwargs: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile)
        return croqtile.compile(GEMM, defines=SMALL, **kwargs)


def _gemm_args(m: int = 100, n: int = 72, k: int = 64) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(m, k, generator=gen).half()
    b = torch.randn(n, k, generator=gen).half()
    return a, b, torch.full((m, n), float("nan"), dtype=torch.float16)


def _check(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    ref = a.double() @ b.double().T
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-2


def test_the_fastest_candidate_runs_and_is_printed_as_pasteable_arguments(
        capsys: pytest.CaptureFixture[str], _cache: Path) -> None:
    tunables = {"MATMUL_WARP_M": [32, 64], "num_stages": [2, 3]}
    fn = _compile(autotune="full", tunables=tunables).matmul
    calls: list[str] = []
    fn.timer = _timer({"1": 5.0, "2": 4.0, "3": 1.5, "4": 3.0}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 4  # every combination timed once
    # order: defaults first, then one knob changed (num_stages=3; WARP_M=64), then both
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}, "num_stages": 2}
    err = capsys.readouterr().err
    assert "tuning matmul for K=64 M=128 N=96: 4 candidates, budget 300 s" in err
    assert "tuned matmul for K<=64 M<=128 N<=96 on cpu: 1.5 ms" in err
    assert "defines={'MATMUL_WARP_M': 64}, num_stages=2" in err
    assert "[4 run, 0 pruned" in err
    (record,) = [json.loads(p.read_text()) for p in (_cache / "tuning").glob("*.json")]
    assert record["config"] == {"defines": {"MATMUL_WARP_M": 64}, "num_stages": 2}
    assert record["time_ms"] == 1.5 and record["bucket"] == {"K": 64, "M": 128, "N": 96}
    assert set(record["versions"]) == {"croqtile", "triton", "torch"}


def test_close_candidates_are_timed_again_in_turn_and_the_median_decides(
        capsys: pytest.CaptureFixture[str], _cache: Path) -> None:
    tunables = {"MATMUL_WARP_M": [32, 64]}
    fn = _compile(autotune="quick", tunables=tunables).matmul
    calls: list[str] = []
    # first pass: the default 1.00 ms, WARP_M=64 1.02 ms (within 3 %); then in turn
    # default, 64, default, 64: the default's 1.00 was a lucky timing
    fn.timer = _timer({"1": 1.0, "2": 1.02, "3": 1.1, "4": 1.0, "5": 1.1, "6": 1.0}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 6
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}}
    assert "[2 run, 0 pruned, 2 timed again" in capsys.readouterr().err
    (report,) = fn.reports
    assert report.best_ms == 1.0
    assert report.finals == [({"defines": {"MATMUL_WARP_M": 32}}, [1.0, 1.1, 1.1]),
                             ({"defines": {"MATMUL_WARP_M": 64}}, [1.02, 1.0, 1.0])]
    (record,) = [json.loads(p.read_text()) for p in (_cache / "tuning").glob("*.json")]
    assert record["finals"] == [[{"defines": {"MATMUL_WARP_M": 32}}, [1.0, 1.1, 1.1]],
                                [{"defines": {"MATMUL_WARP_M": 64}}, [1.02, 1.0, 1.0]]]
    assert record["config"] == {"defines": {"MATMUL_WARP_M": 64}}


def test_the_final_round_takes_at_most_three_candidates() -> None:
    tunables = {"MATMUL_WARP_M": [32, 64], "num_stages": [2, 3]}
    fn = _compile(autotune="full", tunables=tunables).matmul
    calls: list[str] = []
    # four candidates within 3 %: the three fastest (1st, 4th, 2nd) are timed again
    fn.timer = _timer({"1": 1.0, "2": 1.01, "3": 1.02, "4": 1.0,
                       "5": 1.2, "6": 1.2, "7": 0.9, "8": 1.2, "9": 1.2, "10": 0.9}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 10
    (report,) = fn.reports
    firsts = [config for config, _ in report.timings]
    assert [config for config, _ in report.finals] == [firsts[0], firsts[3], firsts[1]]
    assert [times for _, times in report.finals] == [[1.0, 1.2, 1.2], [1.0, 1.2, 1.2],
                                                     [1.01, 0.9, 0.9]]
    assert fn.tuned_config == firsts[1] and report.best_ms == 0.9


def test_a_later_process_reads_the_choice_from_the_cache() -> None:
    tunables = {"MATMUL_WARP_M": [32, 64]}
    first = _compile(autotune="quick", tunables=tunables).matmul
    first.timer = _timer({"1": 9.0, "2": 1.0}, [])
    first(*_gemm_args())
    again = _compile(autotune="quick", tunables=tunables).matmul
    calls: list[str] = []
    again.timer = _timer({}, calls)
    a, b, c = _gemm_args()
    again(a, b, c)
    _check(a, b, c)
    assert calls == [] and again.reports == []
    assert again.tuned_config == {"defines": {"MATMUL_WARP_M": 64}}


def test_one_search_per_shape_bucket() -> None:
    fn = _compile(autotune="quick", tunables={"num_stages": [2, 3]}).matmul
    calls: list[str] = []
    fn.timer = _timer({}, calls)
    fn(*_gemm_args(100, 72, 64))
    fn(*_gemm_args(120, 70, 60))  # same bucket (M 128, N 96, K 64)
    assert len(calls) == 2 and len(fn.reports) == 1
    fn(*_gemm_args(300, 72, 64))  # M bucket 512: a new search
    assert len(calls) == 4 and len(fn.reports) == 2


def test_candidates_the_checker_rejects_are_pruned_with_the_reason(
        capsys: pytest.CaptureFixture[str]) -> None:
    # a 1024 x 1024 block tile breaks the shared-memory budget: rejected before Triton
    fn = _compile(autotune="full", tunables={"MATMUL_WARP_N": [32, 1024]}).matmul
    fn.timer = _timer({}, [])
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    (report,) = fn.reports
    assert report.tried == 1 and len(report.pruned) == 1
    config, reason = report.pruned[0]
    assert "'MATMUL_WARP_N': 1024" in config and reason.startswith("rejected by the checker")
    assert "1 pruned" in capsys.readouterr().err


def test_a_candidate_computing_something_else_is_pruned() -> None:
    fn = croqtile.compile(SCALED, autotune="full", tunables={"SCALE": [1, 2]}).scaled
    calls: list[str] = []
    fn.timer = _timer({"1": 5.0, "2": 1.0}, calls)  # the wrong one would be "faster"
    x = torch.randn(50)
    y = torch.full((50,), float("nan"))
    fn(x, y)
    assert torch.equal(y, x)
    (report,) = fn.reports
    assert report.pruned == [("defines={'SCALE': 2}",
                              "computes a different result than the first configuration")]


def test_fixed_values_are_not_searched_and_a_fixed_config_never_tunes() -> None:
    space = search_space("quick", GEMM, None, {}, {"num_warps": 8})
    assert [name for name, _ in space.knobs] == ["num_stages", "persistent"]
    fn = _compile(autotune="quick", num_warps=4, num_stages=3, persistent=False).matmul
    calls: list[str] = []
    fn.timer = _timer({}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert calls == [] and fn.reports == []


def test_full_mode_searches_tile_defines_at_half_and_twice_their_value() -> None:
    space = search_space("full", GEMM, None, SMALL, {})
    knobs = dict(space.knobs)
    assert knobs["MATMUL_WARP_M"] == (128, 64, 256)
    assert knobs["MATMUL_WARP_K"] == (16, 32)
    assert "MATMUL_TILE_K" not in knobs  # fixed by defines=
    assert knobs["num_stages"] == (2, 3, 4, 5)


def test_search_order_tries_the_defaults_first_then_nearest() -> None:
    configs = Space((("A", (1, 2)), ("B", (3, 4)))).configs()
    assert [c.as_dict()["defines"] for c in configs] == [
        {"A": 1, "B": 3}, {"A": 1, "B": 4}, {"A": 2, "B": 3}, {"A": 2, "B": 4}]


def test_shape_buckets_round_up_by_half_octaves() -> None:
    assert shape_bucket({"M": 16, "N": 14336, "K": 1}) == (("K", 1), ("M", 16), ("N", 16384))
    assert shape_bucket({"M": 3072, "N": 3073, "K": 2500}) == (
        ("K", 3072), ("M", 3072), ("N", 4096))
    assert [shape_bucket({"M": m})[0][1] for m in (5, 6, 7, 17, 100, 6144, 10240)] == [
        6, 6, 8, 24, 128, 6144, 12288]


def test_on_the_cpu_without_a_timer_the_default_runs_with_a_warning() -> None:
    fn = _compile(autotune="quick").matmul
    a, b, c = _gemm_args()
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {}} and fn.reports == []


def test_argument_errors_come_before_any_tuning() -> None:
    fn = _compile(autotune="quick").matmul
    calls: list[str] = []
    fn.timer = _timer({}, calls)
    a, b, c = _gemm_args()
    with pytest.raises(croqtile.ArgumentError, match="'rhs'"):
        fn(a, b.float(), c)
    assert calls == []


@pytest.mark.parametrize("kwargs, match", [
    ({"autotune": "fast"}, "autotune='fast'"),
    ({"autotune": "quick", "tunables": {"NOPE": [1]}}, "'NOPE' is neither"),
    ({"autotune": "quick", "tunables": {"num_warps": []}}, "no candidate values"),
    ({"tunables": {"num_warps": [4]}}, "apply with autotune"),
])
def test_bad_tuning_arguments_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _compile(**kwargs)


def test_an_explicit_list_of_configurations_is_searched_in_its_order() -> None:
    configs = [{"MATMUL_WARP_M": 64, "num_warps": 4}, {"MATMUL_WARP_M": 32, "num_stages": 2},
               {"MATMUL_WARP_M": 64, "num_warps": 4}]  # (a repeat is tried once)
    fn = _compile(autotune="quick", tunables=configs).matmul
    calls: list[str] = []
    fn.timer = _timer({"1": 3.0, "2": 2.0}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 2
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 32}, "num_stages": 2}
    assert [t[0] for t in fn.reports[0].timings] == [
        {"defines": {"MATMUL_WARP_M": 64}, "num_warps": 4},
        {"defines": {"MATMUL_WARP_M": 32}, "num_stages": 2}]


def test_a_space_per_shape_bucket_from_a_function() -> None:
    seen: list[dict] = []

    def space(bucket: dict) -> dict:
        seen.append(bucket)
        return {"MATMUL_WARP_M": [16]} if bucket["M"] <= 16 else {"MATMUL_WARP_M": [64, 32]}

    fn = _compile(autotune="quick", tunables=space).matmul
    calls: list[str] = []
    fn.timer = _timer({}, calls)
    a, b, c = _gemm_args(16, 72, 64)
    fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 16}} and len(calls) == 1
    a, b, c = _gemm_args(100, 72, 64)
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 3 and seen == [{"K": 64, "M": 16, "N": 96},
                                        {"K": 64, "M": 128, "N": 96}]


def test_warm_calls_skip_the_search_bookkeeping() -> None:
    fn = _compile(autotune="quick", tunables={"num_stages": [2, 3]}).matmul
    fn.timer = _timer({}, [])
    args = _gemm_args()
    fn(*args)
    chosen = fn._by_signature[next(iter(fn._by_signature))]
    assert chosen[0] == fn.reports[0].best
    with pytest.raises(croqtile.ArgumentError):  # the chosen function still checks
        fn(args[0], args[1], args[2].t())


def test_a_returned_tensor_is_compared_too() -> None:
    source = """
#define SCALE 1
__co__ f32 [N] twice(f32 [N] x) {
  f32 [x.span] y;
  parallel p by N
    y.at(p) = x.at(p) * 2.0f * SCALE;
  return y;
}
"""
    fn = croqtile.compile(source, autotune="full", tunables={"SCALE": [1, 3]}).twice
    fn.timer = _timer({"1": 5.0, "2": 1.0}, [])
    x = torch.randn(16)
    assert torch.equal(fn(x), x * 2)
    assert fn.reports[0].pruned == [("defines={'SCALE': 3}",
                                     "computes a different result than the first configuration")]


def test_without_the_cache_every_function_searches_and_nothing_is_stored(
        _cache: Path) -> None:
    for _ in range(2):
        fn = _compile(autotune="quick", tunables={"num_stages": [2, 3]}).matmul
        fn.cache = False
        fn.timer = _timer({}, [])
        fn(*_gemm_args())
        assert len(fn.reports) == 1
    assert not any((_cache / "tuning").glob("*.json"))


def _fixed_timer(ms: float, calls: list[str], name: str) -> Callable[[Callable[[], Any]], float]:
    def timer(fn: Callable[[], Any]) -> float:
        fn()
        calls.append(name)
        return ms
    return timer


def test_a_short_first_timing_switches_the_search_to_cuda_graphs() -> None:
    calls: list[str] = []
    timer = tuning.SearchTimer(_fixed_timer(0.05, calls, "long"), _fixed_timer(0.03, calls, "graph"))
    runs: list[int] = []
    assert timer(lambda: runs.append(1)) == 0.03  # the first candidate is timed again
    assert timer(lambda: runs.append(1)) == 0.03
    assert calls == ["long", "graph", "graph"] and len(runs) == 3
    assert timer.method == "cuda graph"


def test_a_long_first_timing_keeps_do_bench_for_the_search() -> None:
    calls: list[str] = []
    timer = tuning.SearchTimer(_fixed_timer(0.25, calls, "long"), _fixed_timer(0.2, calls, "graph"))
    assert timer(lambda: None) == 0.25 and timer(lambda: None) == 0.25
    assert calls == ["long", "long"] and timer.method == "do_bench"


def test_a_candidate_that_cannot_be_captured_is_timed_without_a_graph() -> None:
    calls: list[str] = []

    def capture_fails(fn: Callable[[], Any]) -> float:
        raise RuntimeError("operation not permitted when stream is capturing")

    timer = tuning.SearchTimer(_fixed_timer(0.05, calls, "long"), capture_fails)
    assert timer(lambda: None) == 0.05 and calls == ["long", "long"]
    assert timer.method == "cuda graph (1 with do_bench)"


def test_the_timing_method_is_recorded_and_printed(capsys: pytest.CaptureFixture[str],
                                                   _cache: Path) -> None:
    fn = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [32, 64]}).matmul
    calls: list[str] = []
    fn.timer = tuning.SearchTimer(_timer({"1": 0.05}, calls), _timer({"2": 0.04, "3": 0.02}, calls))
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}}
    assert "timed in CUDA graphs" in capsys.readouterr().err
    (record,) = [json.loads(p.read_text()) for p in (_cache / "tuning").glob("*.json")]
    assert record["timing"] == "cuda graph" and record["time_ms"] == 0.02
