"""bench/model_sweep.py's timing: the forms take turns, and a ratio to eager pairs the
times of one round (the model itself needs ``transformers`` and a GPU: not run here)."""

from __future__ import annotations


import pytest

from .bench_scripts import load


def _module():
    return load("model_sweep")


def test_the_forms_take_turns_and_each_call_is_timed_alone() -> None:
    module = _module()
    now = [0.0]
    calls: list[str] = []
    syncs: list[int] = []
    # every call takes its own duration on the fake clock; the GPU slows down by half
    # after the first round (a drift every form sees in the same round)
    durations = {"eager": 10.0, "ours": 11.0}

    def runner(name: str):
        def run() -> None:
            calls.append(name)
            now[0] += durations[name] * (1.0 if len(calls) <= 2 else 1.5)
        return run

    times = module.interleaved_times({"eager": runner("eager"), "ours": runner("ours")}, 3,
                                     lambda: syncs.append(len(calls)), lambda: now[0])
    assert calls == ["eager", "ours"] * 3
    assert len(syncs) == 2 * len(calls)  # before and after every call
    assert times == {"eager": [10.0, 15.0, 15.0], "ours": [11.0, 16.5, 16.5]}
    assert module.paired_ratio(times["eager"], times["ours"]) == pytest.approx(10 / 11)
    assert module.paired_ratio(times["eager"], times["eager"]) == 1.0


def test_a_paired_ratio_is_the_median_of_the_rounds() -> None:
    module = _module()
    assert module.paired_ratio([1.0, 2.0, 9.0], [2.0, 1.0, 3.0]) == 2.0  # 0.5, 2, 3
    with pytest.raises(ValueError):
        module.paired_ratio([1.0, 2.0], [1.0])
