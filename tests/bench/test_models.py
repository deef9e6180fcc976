"""``croqtile bench models`` on the CPU: the tiny Llama and Qwen2 models through the command
line (every form checked against eager, timed, the files written), a wrong form detected
and failing the command, the compiled forms' code paths (with ``torch.compile`` left out:
on the CPU it needs a C compiler and minutes), and the pieces: the interleaved timing,
the checks of decode and training, the settings."""

from __future__ import annotations

import contextlib
import copy
import csv
import importlib.util
import inspect
import io
import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from croqtile import cli
from croqtile.bench import model_report, models, report
from croqtile.cli import main
from croqtile.nn import transformers as integration

pytest.importorskip("transformers")

TINY_RUN = ["bench", "models", "--tiny", "--device", "cpu"]


def _main(args: list[str]) -> tuple[int, str, str]:
    """``croqtile ARGS``: the exit status, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


def _rows(out_dir: Path) -> list[dict[str, str]]:
    with (out_dir / "models.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str, Path]:
    """The command as CI runs it: both tiny dense models, every workload, default forms
    (the mixture of experts has its own test)."""
    out_dir = tmp_path_factory.mktemp("models")
    return (*_main([*TINY_RUN, "--models", "llama3-8b", "qwen2.5-7b", "--out", str(out_dir)]),
            out_dir)


# ----------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------


def test_the_mixture_of_experts_model(tmp_path: Path) -> None:
    """The tiny Qwen3-MoE model: its eager form runs transformers' grouped GEMM experts,
    its croqtile form croqtile's (``optimize``), with the same logits."""
    pytest.importorskip("transformers.integrations.moe")
    spec = models.MODELS["qwen3-30b-a3b"]
    model = models.build(spec, 1, "cpu", torch.float32, tiny=True)
    assert spec.experts == "grouped_mm" and model.config._experts_implementation == "grouped_mm"
    forms = models.forms_of(model, ("eager", "croqtile"))
    assert forms["croqtile"].module.config._experts_implementation == "croqtile"
    status, _, err = _main([*TINY_RUN, "--models", "qwen3-30b-a3b", "--workloads", "prefill",
                            "--out", str(tmp_path)])
    assert status == 0, err
    rows = {r["form"]: r for r in _rows(tmp_path)}
    assert rows["eager"]["ok"] == rows["croqtile"]["ok"] == "True"
    assert float(rows["croqtile"]["rel_error"]) <= models.TOLERANCES[torch.float32]


def test_the_tiny_sweep_checks_and_times_every_form(tiny_run: tuple[int, str, str, Path]
                                                    ) -> None:
    status, out, err, out_dir = tiny_run
    assert status == 0, err
    rows = _rows(out_dir)
    # per model: prefill at one length, decode at batch 1 and 2, a training step; 4 forms
    assert len(rows) == 2 * 4 * 4
    assert {r["model"] for r in rows} == {"llama3-8b", "qwen2.5-7b"}
    assert [r["workload"] for r in rows[:16:4]] == ["prefill", "decode", "decode", "train"]
    ran = [r for r in rows if r["form"] in ("eager", "croqtile")]
    assert len(ran) == 16 and all(r["ok"] == "True" and r["dtype"] == "float32" for r in ran)
    for r in ran:
        assert float(r["ms"]) > 0 and float(r["tokens_per_s"]) > 0
        assert float(r["ratio_eager"]) > 0 and r["ratio_compile"] == ""
        if r["workload"] == "prefill":
            assert float(r["rel_error"]) <= models.TOLERANCES[torch.float32]
        elif r["workload"] == "decode":
            assert r["new_tokens"] == "4" and 1 <= int(r["tokens_equal"]) <= 4 * int(r["batch"])
        else:
            assert float(r["grad_min_cos"]) >= models.GRAD_MIN_COS
            assert float(r["rel_error"]) <= models.TOLERANCES[torch.float32]
    assert all(float(r["ratio_eager"]) == 1.0 for r in ran if r["form"] == "eager")
    skipped = [r for r in rows if r["form"] not in ("eager", "croqtile")]
    assert all(r["ok"] == "" and r["ms"] == "" and r["note"] == models.CPU_SKIP
               for r in skipped)


def test_the_tiny_sweep_writes_its_files_and_says_what_it_does(
        tiny_run: tuple[int, str, str, Path]) -> None:
    _, out, err, out_dir = tiny_run
    doc = json.loads((out_dir / "models.json").read_text())
    meta = doc["metadata"]
    assert meta["device"] == "cpu" and meta["reps"] == models.CPU_REPS
    assert meta["settings"]["tiny"] is True and meta["settings"]["seqs"] == [32]
    assert meta["tolerance"] == 1e-3 and set(meta["skipped"]) == {"compile", "croqtile+compile"}
    assert meta["geomean_ratio"]["prefill/eager"]["eager"] == pytest.approx(1.0)
    assert meta["geomean_ratio"]["train/croqtile"]["eager"] > 0
    assert len(doc["rows"]) == len(_rows(out_dir))
    assert model_report.is_models_csv(out_dir / "models.csv")
    # progress as it goes (stderr), then the summary table and the files (stdout)
    assert "models: the CPU runs" not in err  # (--tiny was given)
    assert "models: forms compile, croqtile+compile skipped" in err
    assert "models: llama3-8b prefill B=1 S=32: croqtile: checking" in err
    assert "models: llama3-8b decode B=2 S=8 +4: timing eager, croqtile in 1 rounds" in err
    assert "models: qwen2.5-7b train B=1 S=16 croqtile" in err
    assert "decode" in out and "vs compile" in out
    assert f"wrote {len(list(out_dir.iterdir()))} files to {out_dir}" in out


def test_a_wrong_croqtile_form_fails_the_command(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize() that also changes one layer's weights: the croqtile row fails its check,
    is not timed, and the command exits 1 saying which row."""
    optimize = integration.optimize

    def broken(model: Any) -> dict[str, int]:
        counts = optimize(model)
        with torch.no_grad():
            model.model.layers[0].mlp.down_proj.weight.mul_(3.0)
        return counts

    monkeypatch.setattr(integration, "optimize", broken)
    status, _, err = _main([*TINY_RUN, "--models", "llama3-8b", "--workloads", "prefill",
                            "--out", str(tmp_path)])
    assert status == 1
    eager, ours = (r for r in _rows(tmp_path) if r["ok"])
    assert eager["form"] == "eager" and eager["ok"] == "True" and float(eager["ms"]) > 0
    assert ours["form"] == "croqtile" and ours["ok"] == "False" and ours["ms"] == ""
    assert float(ours["rel_error"]) > 1e-2 and ours["note"] == "logits differ from eager's"
    assert "FAILED llama3-8b prefill B=1 S=32 croqtile: logits differ from eager's" in err


def test_the_compiled_forms_paths_without_compiling(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile as the identity (the compiled forms' paths run, eager): prefill and
    training call torch.compile of the model, decode has transformers compile the decode
    step (mode reduce-overhead) over a static cache; the ratios to compile are filled and
    a compile that made no graph is noted."""
    compiled: list[tuple[Any, dict[str, Any]]] = []

    def identity(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
        compiled.append((fn, options))
        return fn

    monkeypatch.setattr(torch, "compile", identity)
    status, _, err = _main([*TINY_RUN, "--models", "qwen2.5-7b", "--forms", "compile",
                            "--decode-batch", "2", "--out", str(tmp_path)])
    assert status == 0, err
    rows = _rows(tmp_path)
    assert [(r["workload"], r["form"]) for r in rows] == [
        (w, f) for w in ("prefill", "decode", "train") for f in ("eager", "compile")]
    assert all(r["ok"] == "True" and float(r["ratio_compile"]) > 0 for r in rows)
    assert all(r["graphs"] == "0" and r["graph_breaks"] == "0" and "no graph" in r["note"]
               for r in rows if r["form"] == "compile")
    # (transformers compiles the model's bound __call__ for its decode steps)
    decode_steps = [o for fn, o in compiled if inspect.ismethod(fn)]
    assert decode_steps and all(o["mode"] == "reduce-overhead" for o in decode_steps)
    assert sum(isinstance(fn, torch.nn.Module) for fn, _ in compiled) == 2  # eval, train


def test_usage_errors(tmp_path: Path) -> None:
    for bad in (["--decode-tokens", "1"], ["--layers", "0"], ["--reps", "0"],
                ["--models", "gpt2"], ["--forms", "fast"]):
        status, _, err = _main([*TINY_RUN, *bad, "--out", str(tmp_path)])
        assert status == 2, (bad, err)
    assert not list(tmp_path.iterdir())


def test_models_runs_only_when_named() -> None:
    assert "models" not in cli._bench_sweeps(["all"])
    assert cli._bench_sweeps(["all", "models"])[-1] == "models"
    assert cli._bench_sweeps(["models"]) == ["models"]


def test_the_models_csv_plots_as_its_own(tiny_run: tuple[int, str, str, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out_dir = tiny_run[3]
    kernel_csv = tmp_path / "square.csv"
    report.write_csv([], kernel_csv, report.CSV_COLUMNS)
    assert not model_report.is_models_csv(kernel_csv)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert model_report.plot_csv(out_dir / "models.csv") == (None, report.NO_MATPLOTLIB)
    status, _, err = _main(["bench", "--plot", str(out_dir / "models.csv")])
    assert status == 1 and report.NO_MATPLOTLIB in err


def test_without_transformers_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    find_spec = importlib.util.find_spec

    def missing(name: str, *rest: Any) -> Any:
        return None if name == "transformers" else find_spec(name, *rest)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    status, _, err = _main([*TINY_RUN, "--out", str(tmp_path)])
    assert status == 2 and "needs the optional dependency 'transformers'" in err


# ----------------------------------------------------------------------------------------
# the pieces
# ----------------------------------------------------------------------------------------


def test_the_forms_take_turns_and_each_call_is_timed_alone() -> None:
    now = [0.0]
    calls: list[str] = []
    syncs: list[int] = []
    # every call takes its own duration on the fake clock; the device slows down by half
    # after the first round (a drift every form sees in the same round)
    durations = {"eager": 10.0, "ours": 11.0}

    def runner(name: str) -> Callable[[], float]:
        def run() -> None:
            calls.append(name)
            now[0] += durations[name] * (1.0 if len(calls) <= 2 else 1.5)

        return models.timed(run, lambda: syncs.append(len(calls)), lambda: now[0])

    times = models.interleaved_rounds({"eager": runner("eager"), "ours": runner("ours")}, 3)
    assert calls == ["eager", "ours"] * 3
    assert len(syncs) == 2 * len(calls)  # before and after every call
    assert times == {"eager": [10.0, 15.0, 15.0], "ours": [11.0, 16.5, 16.5]}
    assert models.paired_ratio(times["eager"], times["ours"]) == pytest.approx(10 / 11)
    assert models.paired_ratio(times["eager"], times["eager"]) == 1.0


def test_a_paired_ratio_is_the_median_of_the_rounds() -> None:
    assert models.paired_ratio([1.0, 2.0, 9.0], [2.0, 1.0, 3.0]) == 2.0  # 0.5, 2, 3
    with pytest.raises(ValueError):
        models.paired_ratio([1.0, 2.0], [1.0])


def test_a_decode_step_is_timed_from_the_first_new_token_to_the_last() -> None:
    clock = models.TokenClock("cpu")
    scores = torch.zeros(1, 4)
    assert clock(torch.zeros(1, 1), scores) is scores
    with pytest.raises(RuntimeError):
        clock.seconds_per_token()
    clock.marks = [10.0, 10.5, 11.0, 13.0]  # (the prefill before the first is left out)
    assert clock.seconds_per_token() == pytest.approx(1.0)


def test_the_logits_error_is_taken_over_every_element_in_pieces() -> None:
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(2, 37, 11, generator=gen)
    out = ref + 1e-3 * torch.randn(2, 37, 11, generator=gen)
    whole = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert models.relative_error(out, ref, rows=5) == pytest.approx(whole, rel=1e-5)
    assert models.relative_error(ref, ref) == 0.0
    assert not models.relative_error(torch.full_like(ref, float("nan")), ref) <= 1.0


def test_the_lowest_gradient_cosine_names_its_parameter() -> None:
    ref = {"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([1.0, 1.0]), "z": torch.zeros(2)}
    assert models.min_cosine(ref, dict(ref)) == (1.0, "")
    got = {**ref, "b": torch.tensor([1.0, 0.0])}
    cosine, name = models.min_cosine(ref, got)
    assert name == "b" and cosine == pytest.approx(2 ** -0.5)
    assert models.min_cosine(ref, {**ref, "a": None}) == (0.0, "a")


class _Generates:
    """A stand-in model whose generate returns the prompt and fixed new tokens."""

    def __init__(self, new: list[list[int]]) -> None:
        self.new = torch.tensor(new)

    def generate(self, ids: torch.Tensor, **options: Any) -> torch.Tensor:
        assert options["generation_config"].max_new_tokens == self.new.shape[1]
        return torch.cat([ids, self.new], dim=1)


def test_decode_fails_only_when_a_first_new_token_differs() -> None:
    ids = torch.zeros(2, 3, dtype=torch.long)
    decode = models.Decode(ids, 3, 1e-3, "cpu")

    def form(name: str, new: list[list[int]]) -> models.Form:
        module = _Generates(new)
        return models.Form(name, module, module.generate)

    assert decode.check(form("eager", [[1, 2, 3], [4, 5, 6]])).ok
    parted = decode.check(form("croqtile", [[1, 2, 9], [4, 5, 6]]))
    assert parted.ok and parted.tokens_equal == 5 and "near tie" in parted.note
    wrong = decode.check(form("croqtile", [[1, 2, 3], [7, 5, 6]]))
    assert not wrong.ok and wrong.tokens_equal == 5 and "first new token" in wrong.note


def test_a_training_step_with_a_wrong_gradient_fails() -> None:
    model = models.build(models.MODELS["llama3-8b"], 1, "cpu", torch.float32, tiny=True)
    wrong = copy.deepcopy(model).train()
    with torch.no_grad():
        wrong.model.layers[0].mlp.up_proj.weight.mul_(-1.0)
    train = models.Train(models.random_ids((1, 8), 256, "cpu", 0), 1e-3, "cpu")
    assert train.check(models.Form("eager", model.train(), model)).ok
    check = train.check(models.Form("croqtile", wrong, wrong))
    assert not check.ok and check.grad_min_cos is not None and check.grad_min_cos < 0.999
    assert check.note.startswith(("the gradient of model.layers.0", "loss differs"))


def test_settings_defaults_and_limits() -> None:
    cpu = models.settings("cpu", tiny=True)
    assert cpu.reps == models.CPU_REPS and cpu.forms == ("eager", "croqtile")
    assert cpu.skipped == {"compile": models.CPU_SKIP, "croqtile+compile": models.CPU_SKIP}
    assert cpu.seqs == models.TINY["seqs"] and cpu.dtype == torch.float32
    gpu = models.settings("cuda", seqs=[128, 256], forms=["croqtile"], reps=None)
    assert gpu.forms == ("eager", "croqtile") and not gpu.skipped  # eager always runs
    assert gpu.seqs == (128, 256) and gpu.reps == 3 and gpu.dtype == torch.bfloat16
    assert gpu.decode_batches == (1, 8) and gpu.prompt == 512 and gpu.decode_tokens == 32
    with pytest.raises(ValueError, match="decode-tokens"):
        models.settings("cpu", decode_tokens=1)
    with pytest.raises(ValueError, match="unknown"):
        models.settings("cpu", models=["gpt2"])
