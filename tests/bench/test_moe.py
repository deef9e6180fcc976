"""``croqtile bench moe`` on the CPU: the tiny layers through the command line (every form
checked against float64 and timed; a wrong form fails the command) and the sweep's sums."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest
import torch

from croqtile import cli
from croqtile.bench import moe
from croqtile.cli import main
from croqtile.nn import functional

TINY_RUN = ["bench", "moe", "--tiny", "--device", "cpu", "--tokens", "3", "17"]


def _main(args: list[str]) -> tuple[int, str, str]:
    """``croqtile ARGS``: the exit status, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


def _rows(out_dir: Path) -> list[dict[str, str]]:
    with (out_dir / "moe.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_tiny_sweep_checks_and_times_every_form(tmp_path: Path) -> None:
    status, out, err = _main([*TINY_RUN, "--out", str(tmp_path)])
    assert status == 0, err
    rows = _rows(tmp_path)
    assert [(r["widths"], r["tokens"], r["form"]) for r in rows] == [
        (w, t, f) for w in moe.WIDTHS for t in ("3", "17") for f in moe.FORMS]
    for r in rows:
        if r["form"] == "grouped_mm" and r["ok"] == "":  # a torch without it here
            assert r["note"].startswith("skipped: ")
            continue
        assert r["ok"] == "True" and float(r["rel_error"]) <= 1e-4, r
        assert float(r["ms"]) > 0 and float(r["tflops"]) > 0 and float(r["ratio_dense"]) > 0
        assert (r["weight_gbps"] != "") == (r["form"] in moe.ROUTED)
    qwen = next(r for r in rows if r["widths"] == "qwen3-30b-a3b" and r["form"] == "croqtile")
    assert (qwen["hidden"], qwen["inter"], qwen["experts"], qwen["top_k"]) == ("64", "32", "16",
                                                                              "4")
    assert "moe: mixtral-8x7b T=17: timing croqtile" in err
    assert "moe: qwen3-30b-a3b T=3 croqtile" in err
    assert "vs grouped_mm" in out and f"wrote 2 files to {tmp_path}" in out
    meta = json.loads((tmp_path / "moe.json").read_text())["metadata"]
    assert meta["sweep"] == "moe" and meta["dtype"] == "float32" and meta["tolerance"] == 1e-4
    assert not list(tmp_path.glob("*.png"))


def test_a_wrong_croqtile_form_fails_the_command(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """fused_moe returning zeros: its rows fail, are not timed, and the command exits 1
    naming the form; the other forms are still checked and timed."""
    monkeypatch.setattr(functional, "fused_moe",
                        lambda hidden, *args, **kwargs: torch.zeros_like(hidden))
    status, _, err = _main([*TINY_RUN[:-1], "--widths", "mixtral-8x7b", "--out",
                            str(tmp_path)])
    assert status == 1
    ours = [r for r in _rows(tmp_path) if r["form"] == "croqtile"]
    assert len(ours) == 1 and ours[0]["ok"] == "False" and ours[0]["ms"] == ""
    assert float(ours[0]["rel_error"]) == pytest.approx(1.0)
    assert "FAILED mixtral-8x7b T=3 croqtile: wrong result" in err
    loop = next(r for r in _rows(tmp_path) if r["form"] == "eager_loop")
    assert loop["ok"] == "True" and float(loop["ms"]) > 0


def test_grouped_mm_is_skipped_with_its_reason(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch, "_grouped_mm")
    status, _, err = _main([*TINY_RUN[:-1], "--widths", "mixtral-8x7b", "--out",
                            str(tmp_path)])
    assert status == 0, err
    grouped = next(r for r in _rows(tmp_path) if r["form"] == "grouped_mm")
    assert grouped["ok"] == "" and grouped["ms"] == ""
    assert grouped["note"].startswith("skipped: torch ") and "_grouped_mm" in grouped["note"]
    assert all(r["ratio_grouped_mm"] == "" for r in _rows(tmp_path))


def test_usage_errors_and_moe_runs_only_when_named(tmp_path: Path) -> None:
    for bad in (["--tokens", "0"], ["--reps", "0"], ["--widths", "gpt2"]):
        status, _, err = _main([*TINY_RUN, *bad, "--out", str(tmp_path)])
        assert status == 2, (bad, err)
    assert not list(tmp_path.iterdir())
    assert "moe" not in cli._bench_sweeps(["all"])
    assert cli._bench_sweeps(["moe"]) == ["moe"]


def test_flops_and_weight_bytes() -> None:
    w = moe.WIDTHS["mixtral-8x7b"].widths
    assert moe.flops(w, 16) == 2 * 32 * 4096 * 2 * 14336 + 2 * 32 * 14336 * 4096
    assert moe.weight_bytes(w, 3, torch.bfloat16) == 3 * 3 * 14336 * 4096 * 2
