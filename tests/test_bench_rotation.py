"""The weight-streaming sweeps (decode, epilogue) time their calls over several copies of the
inputs in turn, so that the weights come from device memory rather than the L2 cache: how
many copies, that every copy is used in turn, that the first copy is the one checked, and
that the harness times the rotation and records it (torch stand-ins on the CPU)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from croqtile.bench import harness, linear, report, suite
from croqtile.bench.harness import Case

from .test_bench import SequenceTimer

O_64 = Case("decode", "matmul", "bf16", 64, 4096, 4096, "llama3-8b o")


def fake_l2(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    props = types.SimpleNamespace(L2_cache_size=size)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)


def test_the_copies_span_four_times_the_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_l2(monkeypatch, 60 * 2**20)  # the H200's
    # x, w and y of the o projection at M = 64: 34.6 MB; 4 x 60 MiB needs 8 copies
    assert O_64.bytes == (64 * 4096 * 2 + 4096 * 4096) * 2
    assert harness.input_sets(O_64, "cuda") == 8
    assert harness.input_sets(O_64, "cuda:1") == 8
    # gate_up's 235 MB weight: 2 copies; larger than 4 x L2 alone: 1
    gate_up = Case("decode", "matmul", "bf16", 16, 28672, 4096)
    assert harness.input_sets(gate_up, "cuda") == 2
    assert harness.input_sets(Case("decode", "matmul", "bf16", 16, 65536, 4096), "cuda") == 1
    # nothing to rotate for off the GPU
    assert harness.input_sets(O_64, "cpu") == 1


def test_in_turn_goes_round_the_calls() -> None:
    made: list[int] = []
    call = harness.in_turn([lambda i=i: made.append(i) for i in range(3)])
    for _ in range(7):
        call()
    assert made == [0, 1, 2, 0, 1, 2, 0]


def recording_gemm(seen: list[torch.Tensor]) -> Callable[..., None]:
    def fn(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
        seen.append(x)
        out.copy_((x.float() @ w.float().T).to(out.dtype))

    return fn


def test_a_rotated_gemm_uses_every_copy_and_checks_the_first() -> None:
    case = Case("decode", "matmul", "f16", 5, 24, 40)
    seen: list[torch.Tensor] = []
    prepared = harness.prepare_gemm(case, recording_gemm(seen), "cpu", sets=3)
    assert prepared.rotation is not None and prepared.rotation.sets == 3
    assert harness.check(case, prepared)[0]  # the poisoned output, written from copy 0
    checked = seen.pop()
    results = []
    for _ in range(4):
        prepared.rotation.ours()
        results.append(prepared.output.clone())
    # three different inputs, then the first again (copy 0 is the one checked)
    assert seen[0] is checked and seen[3] is checked
    assert len({id(x) for x in seen[:3]}) == 3
    assert not torch.equal(seen[0], seen[1]) and not torch.equal(results[0], results[1])
    torch.testing.assert_close(results[3], results[0])
    # the baseline goes through the same copies, in the same order
    baselines = [prepared.rotation.baseline() for _ in range(3)]
    for got, want in zip(baselines, results):
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    # one copy: nothing to rotate
    assert harness.prepare_gemm(case, recording_gemm([]), "cpu").rotation is None


def test_the_harness_times_the_rotation_and_records_it(tmp_path: Path) -> None:
    case = Case("decode", "matmul", "f16", 5, 24, 40)
    seen: list[torch.Tensor] = []
    fn = recording_gemm(seen)
    made: list[harness.Prepared] = []

    def prepare(case: Case, fn: Any, device: str) -> harness.Prepared:
        made.append(harness.prepare_gemm(case, fn, device, sets=3))
        return made[-1]

    timer = SequenceTimer([2.0, 1.0, 2.0, 1.0])
    row = harness.run_case(case, lambda c: fn, "cpu", timer, 2, prepare=prepare)
    (prepared,) = made
    assert prepared.rotation is not None
    assert timer.timed == [prepared.rotation.ours, prepared.rotation.baseline] * 2
    assert (row.ok, row.ratio, row.input_sets) == (True, 0.5, 3)
    # the CSV says so
    report.write_csv([report.csv_record(row)], tmp_path / "decode.csv",
                           report.columns("decode"))
    (record,) = report.read_csv(tmp_path / "decode.csv")
    assert (record["input_sets"], record["ratio"]) == ("3", "0.5")


def test_the_epilogue_rotates_all_three_sides(
        uncompiled_baseline: list[Callable[..., Any]]) -> None:
    built = uncompiled_baseline
    case = linear.epilogue_cases(("f16",), (5,), ("relu",), 24, 40)[0]
    seen: list[torch.Tensor] = []

    def fn(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
        seen.append(x)
        out.copy_(torch.relu(x.float() @ w.float().T + bias.float()).to(out.dtype))

    prepared = linear.prepare_epilogue(case, fn, "cpu", sets=2)
    assert harness.check(case, prepared)[0]
    rotation = prepared.rotation
    assert rotation is not None and rotation.compiled is not None and rotation.sets == 2
    for _ in range(2):
        rotation.ours()
    assert seen[1] is seen[0] and seen[2] is not seen[0]  # checked on copy 0, then 0, 1
    unfused = [rotation.baseline() for _ in range(2)]
    compiled = [rotation.compiled() for _ in range(2)]
    assert len(built) == 1  # one compiled function serves every copy
    assert not torch.equal(unfused[0], unfused[1])
    for a, b in zip(unfused, compiled):
        torch.testing.assert_close(a, b)
    # off the GPU, by default one copy
    assert linear.prepare_epilogue(case, fn, "cpu").rotation is None


def test_the_decode_sweep_rotates_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_l2(monkeypatch, 60 * 2**20)
    asked: list[int] = []

    def fake_prepare_gemm(case: Case, fn: Any, device: str, sets: int = 1) -> str:
        asked.append(sets)
        return "prepared"

    monkeypatch.setattr(harness, "prepare_gemm", fake_prepare_gemm)
    assert suite.prepare(O_64, None, "cuda") == "prepared"
    assert asked == [8]
