"""Autotuning (croqtile.tuning.tuner): the search, pruning, the JSON cache and the messages.
Timing needs a GPU; here a fake timer stands in, so what is tested is the logic."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.tuning import tuner as tuning
from croqtile.tuning.tuner import Config, Space, shape_bucket

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


class Stopwatch:
    """A fake timer that knows what it times: runs the candidate once and returns the
    next time listed for its configuration (by ``Config.describe()``, the last one
    repeating), ``other`` ms for a configuration not listed. ``order`` records what was
    timed."""

    def __init__(self, fn: Any, times: dict[str, list[float]], other: float = 10.0) -> None:
        self.fn, self.times, self.other = fn, times, other
        self.order: list[str] = []

    def __call__(self, run: Callable[[], Any]) -> float:
        run()
        # the search times functools.partial(function, *arguments) of its configurations
        function = run.func  # type: ignore[attr-defined]
        config = next(c for c, f in self.fn._functions.items() if f is function)
        name = config.describe()
        listed = self.times.get(name, [self.other])
        self.order.append(name)
        return listed[min(self.order.count(name), len(listed)) - 1]


DEFAULT = "(the defaults)"


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


def _record(cache: Path) -> dict[str, Any]:
    (record,) = [json.loads(p.read_text()) for p in (cache / "tuning").glob("*.json")]
    return record


def test_the_fastest_candidate_runs_and_is_printed_as_pasteable_arguments(
        capsys: pytest.CaptureFixture[str], _cache: Path) -> None:
    tunables = {"MATMUL_WARP_M": [32, 64], "num_stages": [2, 3]}
    fn = _compile(autotune="full", tunables=tunables).matmul
    best = "defines={'MATMUL_WARP_M': 64}, num_stages=2"
    fn.timer = watch = Stopwatch(fn, {DEFAULT: [5.0], best: [1.5]}, other=3.0)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    # the default first, then the combinations, nearest first; then the fastest and the
    # default twice more each, in turn
    assert watch.order == [DEFAULT, "defines={'MATMUL_WARP_M': 32}, num_stages=2",
                           "defines={'MATMUL_WARP_M': 32}, num_stages=3", best,
                           "defines={'MATMUL_WARP_M': 64}, num_stages=3",
                           best, DEFAULT, best, DEFAULT]
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}, "num_stages": 2}
    err = capsys.readouterr().err
    assert "tuning matmul for K=64 M=128 N=96: budget 300 s" in err
    assert ("tuned matmul for K<=64 M<=128 N<=96 on cpu: 1.5 ms, 3.33x the default's speed "
            f"with {best} [5 run, 0 pruned, 2 timed again") in err
    record = _record(_cache)
    assert record["config"] == {"defines": {"MATMUL_WARP_M": 64}, "num_stages": 2}
    assert record["time_ms"] == 1.5 and record["bucket"] == {"K": 64, "M": 128, "N": 96}
    assert record["default_ms"] == 5.0
    assert record["decision"] == "3.333x the default's speed by median in the final round"
    assert set(record["versions"]) == {"croqtile", "triton", "torch"}


def test_close_candidates_are_timed_again_in_turn_and_the_median_decides(
        capsys: pytest.CaptureFixture[str], _cache: Path) -> None:
    fn = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [32, 64]}).matmul
    wide = "defines={'MATMUL_WARP_M': 64}"
    # the default's first 1.00 ms was a lucky timing; WARP_M=64 (1.02 ms, within 3 %)
    # takes 1.00 ms twice in the final round, the default 1.10
    fn.timer = Stopwatch(fn, {DEFAULT: [1.0, 1.1], wide: [1.02, 1.0],
                              "defines={'MATMUL_WARP_M': 32}": [2.0]})
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}}
    assert "[3 run, 0 pruned, 2 timed again" in capsys.readouterr().err
    (report,) = fn.reports
    assert report.best_ms == 1.0 and report.default_ms == 1.1
    assert report.finals == [({"defines": {}}, [1.0, 1.1, 1.1]),
                             ({"defines": {"MATMUL_WARP_M": 64}}, [1.02, 1.0, 1.0])]
    record = _record(_cache)
    assert record["finals"] == [[{"defines": {}}, [1.0, 1.1, 1.1]],
                                [{"defines": {"MATMUL_WARP_M": 64}}, [1.02, 1.0, 1.0]]]
    assert record["config"] == {"defines": {"MATMUL_WARP_M": 64}}


def test_the_final_round_takes_three_candidates_and_the_default() -> None:
    tunables = {"MATMUL_WARP_M": [32, 64], "num_stages": [2, 3]}
    fn = _compile(autotune="full", tunables=tunables).matmul
    names = ["defines={'MATMUL_WARP_M': 32}, num_stages=2",
             "defines={'MATMUL_WARP_M': 32}, num_stages=3",
             "defines={'MATMUL_WARP_M': 64}, num_stages=2",
             "defines={'MATMUL_WARP_M': 64}, num_stages=3"]
    # four candidates within 3 %, the default 2 ms: the three fastest and the default
    # are timed again, and the third of them turns out fastest
    fn.timer = watch = Stopwatch(fn, {DEFAULT: [2.0], names[0]: [1.0, 1.2],
                                      names[1]: [1.01, 0.9], names[2]: [1.02, 1.2],
                                      names[3]: [1.0, 1.2]})
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    (report,) = fn.reports
    assert len(watch.order) == 5 + 4 * 2
    assert report.finals == [
        ({"defines": {"MATMUL_WARP_M": 32}, "num_stages": 2}, [1.0, 1.2, 1.2]),
        ({"defines": {"MATMUL_WARP_M": 64}, "num_stages": 3}, [1.0, 1.2, 1.2]),
        ({"defines": {"MATMUL_WARP_M": 32}, "num_stages": 3}, [1.01, 0.9, 0.9]),
        ({"defines": {}}, [2.0, 2.0, 2.0])]
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 32}, "num_stages": 3}
    assert report.best_ms == 0.9 and report.default_ms == 2.0


def test_the_default_is_kept_when_a_lucky_candidate_is_slower_in_the_final_round(
        capsys: pytest.CaptureFixture[str], _cache: Path) -> None:
    fn = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [64]}).matmul
    lucky = "defines={'MATMUL_WARP_M': 64}"
    fn.timer = watch = Stopwatch(fn, {DEFAULT: [1.0], lucky: [0.8, 1.05]})
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert watch.order == [DEFAULT, lucky, lucky, DEFAULT, lucky, DEFAULT]
    assert fn.tuned_config == {"defines": {}}
    (report,) = fn.reports
    assert report.best == Config() and report.best_ms == 1.0 and report.default_ms == 1.0
    assert "the default kept with (the defaults)" in capsys.readouterr().err
    record = _record(_cache)
    assert record["config"] == {"defines": {}} and record["default_ms"] == 1.0
    assert record["decision"] == "the default: the fastest by median in the final round"
    # a later process reads the default from the cache, without a search
    again = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [64]}).matmul
    calls: list[str] = []
    again.timer = _timer({}, calls)
    again(*_gemm_args())
    assert calls == [] and again.tuned_config == {"defines": {}}


def test_a_finalist_less_than_one_percent_faster_does_not_replace_the_default(
        _cache: Path) -> None:
    fn = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [64]}).matmul
    close = "defines={'MATMUL_WARP_M': 64}"
    fn.timer = Stopwatch(fn, {DEFAULT: [1.0], close: [0.995]})
    fn(*_gemm_args())
    (report,) = fn.reports
    assert report.best == Config() and report.best_ms == 1.0
    assert report.decision == (f"the default: the fastest finalist ({close}, 0.995 ms) was "
                               "not 1% faster by median in the final round")
    assert _record(_cache)["config"] == {"defines": {}}


def test_the_default_joins_the_final_round_however_slow_its_first_timing() -> None:
    fn = _compile(autotune="quick", tunables={"MATMUL_WARP_M": [64]}).matmul
    fast = "defines={'MATMUL_WARP_M': 64}"
    # a default timed 3 ms once (a clock dip) but 1.0 ms in the final round beats a
    # candidate at 1.2 ms
    fn.timer = Stopwatch(fn, {DEFAULT: [3.0, 1.0], fast: [1.2]})
    fn(*_gemm_args())
    (report,) = fn.reports
    assert [config for config, _ in report.finals] == [{"defines": {"MATMUL_WARP_M": 64}},
                                                       {"defines": {}}]
    assert report.best == Config() and report.default_ms == 1.0


def test_a_later_process_reads_the_choice_from_the_cache() -> None:
    tunables = {"MATMUL_WARP_M": [32, 64]}
    first = _compile(autotune="quick", tunables=tunables).matmul
    first.timer = Stopwatch(first, {DEFAULT: [9.0], "defines={'MATMUL_WARP_M': 64}": [1.0]})
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
    assert len(calls) == 3 and len(fn.reports) == 1  # the default and two candidates
    # (the default timed 10 ms, the others 20 and 30: no final round)
    assert fn.reports[0].decision == "the default: no candidate came within 3% of it"
    fn(*_gemm_args(300, 72, 64))  # M bucket 512: a new search
    assert len(calls) == 6 and len(fn.reports) == 2


def test_candidates_the_checker_rejects_are_pruned_with_the_reason(
        capsys: pytest.CaptureFixture[str]) -> None:
    # a 1024 x 1024 block tile breaks the shared-memory budget: rejected before Triton
    fn = _compile(autotune="full", tunables={"MATMUL_WARP_N": [32, 1024]}).matmul
    fn.timer = _timer({}, [])
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    (report,) = fn.reports
    assert report.tried == 2 and len(report.pruned) == 1  # the default and WARP_N = 32 ran
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
                              "computes a different result than the default configuration")]


@pytest.mark.parametrize("given", ["keywords", "options", "both"])
def test_fixed_values_are_not_searched_and_a_fixed_config_never_tunes(given: str) -> None:
    """Options fix values by keyword or as the fields of ``options=`` that differ from
    the defaults."""
    tiles = {"MATMUL_WARP_M": 64, "MATMUL_WARP_N": 64, "MATMUL_TILE_K": 32,
             "MATMUL_WARP_K": 16}
    launch: dict[str, Any] = {"num_warps": 4, "num_stages": 3, "persistent": False}
    fixed: dict[str, Any] = {
        "keywords": launch,
        "options": {"options": croqtile.Options(**launch)},
        "both": {"options": croqtile.Options(num_warps=8, num_stages=3), "num_warps": 4,
                 "persistent": False},
    }[given]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = croqtile.compile(GEMM, defines=tiles, autotune="quick", **fixed).matmul
    calls: list[str] = []
    fn.timer = _timer({}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert calls == [] and fn.reports == []


def test_the_quick_search_varies_the_tile_defines_of_a_user_kernel(_cache: Path) -> None:
    # 16 rows (a decode GEMM): one 128 x 256 tile on a device of 132 SMs. The search
    # tries the row tile at sizes covering 16 rows first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CQ0310 (masked last tile)
        fn = croqtile.compile(GEMM, autotune="quick").matmul
    fn.sm_count = 132
    small = "defines={'MATMUL_WARP_M': 16}"
    fn.timer = watch = Stopwatch(fn, {DEFAULT: [1.0], small: [0.5]}, other=2.0)
    a, b, c = _gemm_args(16, 72, 64)
    fn(a, b, c)
    _check(a, b, c)
    assert watch.order[:4] == [DEFAULT, small, "defines={'MATMUL_WARP_M': 32}",
                               "defines={'MATMUL_WARP_M': 64}"]
    # the next rounds start from WARP_M = 16: WARP_N over 96 columns (128, which covers
    # them), the K step, the K slice, then the launch options
    assert watch.order[4:7] == ["defines={'MATMUL_WARP_M': 16, 'MATMUL_WARP_N': 128}",
                                "defines={'MATMUL_TILE_K': 128, 'MATMUL_WARP_M': 16}",
                                "defines={'MATMUL_TILE_K': 32, 'MATMUL_WARP_M': 16}"]
    assert watch.order[8] == (f"{small}, num_warps=4, num_stages=4, persistent=False, "
                              "descriptors=True")
    # finally stream-K on the best (1 tile of 16 x 256 still leaves SMs idle), and only
    # there
    assert f"{small}, persistent=True, stream_k=True" in watch.order
    assert sum("stream_k" in name for name in watch.order) == 1
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 16}}
    (report,) = fn.reports
    assert report.complete and not report.pruned and report.default_ms == 1.0
    assert _record(_cache)["config"] == {"defines": {"MATMUL_WARP_M": 16}}


def test_stream_k_is_tried_only_where_the_grid_leaves_sms_idle() -> None:
    orders = []
    for sms in (132, 1):  # one tile on 132 SMs; one tile on one SM (a full wave)
        fn = _compile(autotune="quick").matmul
        fn.sm_count = sms
        fn.cache = False
        fn.timer = watch = Stopwatch(fn, {DEFAULT: [1.0]}, other=2.0)
        a, b, c = _gemm_args(16, 72, 64)
        fn(a, b, c)
        _check(a, b, c)
        orders.append(watch.order)
    assert sum("stream_k=True" in name for name in orders[0]) == 1  # (the best stayed)
    assert not any("stream_k" in name for name in orders[1])


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
    fn.timer = _timer({"1": 5.0, "2": 3.0, "3": 2.0}, calls)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert len(calls) == 3 + 2 * 2  # the default first
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 32}, "num_stages": 2}
    assert [t[0] for t in fn.reports[0].timings] == [
        {"defines": {}},
        {"defines": {"MATMUL_WARP_M": 64}, "num_warps": 4},
        {"defines": {"MATMUL_WARP_M": 32}, "num_stages": 2}]


def test_a_space_per_shape_bucket_from_a_function() -> None:
    seen: list[dict] = []

    def space(bucket: dict) -> dict:
        seen.append(bucket)
        return {"MATMUL_WARP_M": [16]} if bucket["M"] <= 16 else {"MATMUL_WARP_M": [64, 32]}

    fn = _compile(autotune="quick", tunables=space).matmul
    fn.timer = watch = Stopwatch(fn, {DEFAULT: [1.0], "defines={'MATMUL_WARP_M': 16}": [0.5]})
    a, b, c = _gemm_args(16, 72, 64)
    fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 16}}
    assert watch.order == [DEFAULT, "defines={'MATMUL_WARP_M': 16}"] + [
        "defines={'MATMUL_WARP_M': 16}", DEFAULT] * 2
    a, b, c = _gemm_args(100, 72, 64)
    fn(a, b, c)
    _check(a, b, c)
    assert watch.order[6:] == [DEFAULT, "defines={'MATMUL_WARP_M': 64}",
                               "defines={'MATMUL_WARP_M': 32}"]
    assert seen == [{"K": 64, "M": 16, "N": 96},
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
                                     "computes a different result than the default configuration")]


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
    long = Stopwatch(fn, {DEFAULT: [0.05]})
    graphs = Stopwatch(fn, {DEFAULT: [0.04], "defines={'MATMUL_WARP_M': 32}": [0.03],
                            "defines={'MATMUL_WARP_M': 64}": [0.02]})
    fn.timer = tuning.SearchTimer(long, graphs)
    a, b, c = _gemm_args()
    fn(a, b, c)
    _check(a, b, c)
    assert fn.tuned_config == {"defines": {"MATMUL_WARP_M": 64}}
    assert "timed in CUDA graphs" in capsys.readouterr().err
    assert long.order == [DEFAULT] and len(graphs.order) == 3 + 2 * 2
    record = _record(_cache)
    assert record["timing"] == "cuda graph" and record["time_ms"] == 0.02
