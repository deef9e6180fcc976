"""``croqtile.bench`` and ``croqtile bench`` on the CPU: the bench kernels are correct, a
wrong kernel is caught before it is timed, and the files, means and table are right (timing
arithmetic checked with a fake timer that returns known times)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import croqtile
from croqtile.bench import harness, report, spaces, suite
from croqtile.bench.harness import Case
from croqtile.cli import main

REQUIRED_COLUMNS = {"kernel", "dtype", "M", "N", "K", "croqtile_tflops", "baseline_tflops",
                    "ratio", "croqtile_ms", "baseline_ms", "ok", "rel_error", "config",
                    "croqtile_gbps", "baseline_gbps"}

# Writes every element but adds one: wrong, yet complete.
OFF_BY_ONE_COPY = """\
__co__ void copy2d(global f16 [R, C] src, global f16 [R, C] dst) {
  parallel {br, bc} by [cdiv(R, 16), cdiv(C, 64)] : block {
    t = dma.copy src.subspan(16, 64).at(br, bc) => shared;
    foreach {i, j} in t.span
      dst.at(br # i, bc # j) = __to<f16>(t.data.at(i, j) + 1.0f);
  }
}
"""

# Right values, but only the first 16 rows: the poisoned rest must fail the check.
FIRST_ROWS_COPY = """\
__co__ void copy2d(global f16 [R, C] src, global f16 [R, C] dst) {
  parallel bc by cdiv(C, 64) : block {
    t = dma.copy src.subspan(16, 64).at(0, bc) => shared;
    dma.copy t.data => dst.subspan(16, 64).at(0, bc);
  }
}
"""


class SequenceTimer:
    """Returns the given milliseconds in order and records what it was asked to time."""

    def __init__(self, times: list[float]) -> None:
        self.times = list(times)
        self.timed: list[Callable[[], object]] = []

    def __call__(self, fn: Callable[[], object]) -> float:
        self.timed.append(fn)
        return self.times.pop(0)


def constant_timer(ours: float, baseline: float) -> Callable[[Callable[[], object]], float]:
    """Odd calls are croqtile's, even calls the baseline's (the harness interleaves)."""
    calls = []

    def timer(fn: Callable[[], object]) -> float:
        calls.append(fn)
        return ours if len(calls) % 2 else baseline

    return timer


@pytest.fixture(scope="module")
def loader() -> harness.KernelLoader:
    return harness.kernel_loader()


@pytest.fixture(scope="module")
def tiny_rows(loader: harness.KernelLoader) -> list[harness.Row]:
    return harness.run_cases(harness.tiny_cases(harness.SWEEPS), device="cpu", load=loader)


# ----------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------


def test_case_builders() -> None:
    square = harness.square_cases(["f16"])
    assert [c.M for c in square] == [512, 1024, 2048, 3072, 4096, 6144, 8192]
    assert all(c.M == c.N == c.K and c.kernel == "gemm" for c in square)
    llm = harness.llm_cases(["f16", "bf16"])
    assert len(llm) == 2 * 8 * 5
    assert {c.M for c in llm} == {16, 64, 128, 512, 4096}
    down70 = [c for c in llm if c.label == "llama3-70b down"]
    assert {(c.N, c.K) for c in down70} == {(8192, 28672)}
    assert {(c.N, c.K) for c in llm if c.label == "llama3-8b gate_up"} == {(28672, 4096)}
    fp8 = harness.fp8_cases([1024])
    assert fp8 == [Case("fp8", "gemm_fp8", "e4m3", 1024, 1024, 1024)]
    memory = harness.memory_cases([2048])
    assert [(c.kernel, c.M, c.N, c.K) for c in memory] == [("copy", 2048, 2048, 0),
                                                         ("add", 2048, 2048, 0)]


def test_flops_and_bytes() -> None:
    gemm = Case("square", "gemm", "bf16", 64, 32, 16)
    assert gemm.flops == 2 * 64 * 32 * 16
    assert gemm.bytes == (64 * 16 + 32 * 16 + 64 * 32) * 2
    fp8 = Case("fp8", "gemm_fp8", "e4m3", 64, 32, 16)
    assert fp8.bytes == (64 + 32) * 16 + 64 * 32 * 2  # bf16 output
    assert Case("memory", "copy", "f16", 10, 20).bytes == 2 * 200 * 2
    assert Case("memory", "add", "f16", 10, 20).bytes == 3 * 200 * 2
    assert Case("memory", "add", "f16", 10, 20).flops == 0


# ----------------------------------------------------------------------------------------
# correctness
# ----------------------------------------------------------------------------------------


def test_every_bench_kernel_is_correct_on_the_cpu(tiny_rows: list[harness.Row]) -> None:
    kinds = {(r.case.kernel, r.case.dtype) for r in tiny_rows}
    assert kinds == {("gemm", "f16"), ("gemm", "bf16"), ("gemm_fp8", "e4m3"),
                     ("copy", "f16"), ("add", "f16")}
    for row in tiny_rows:
        assert row.ok, (row.case, row.note, row.rel_error)
        assert row.rel_error is not None
        assert row.rel_error <= harness.TOLERANCES[row.case.kernel]
        # Correctness only on the CPU: nothing timed, no ratio.
        assert row.croqtile_ms is None and row.baseline_ms is None and row.ratio is None
    gemm_errors = [r.rel_error for r in tiny_rows if r.case.kernel == "gemm"]
    assert all(0 < e < 5e-3 for e in gemm_errors)  # f32 accumulation: output rounding only


def test_gemm_source_serves_f16_and_bf16_through_a_define() -> None:
    text = (harness.KERNEL_DIR / "gemm.co").read_text()
    assert "#define DT f16" in text and "mma.fill.f32 0.0f" in text


@pytest.mark.parametrize("source, note", [(OFF_BY_ONE_COPY, "wrong result"),
                                          (FIRST_ROWS_COPY, "wrong result")])
def test_a_wrong_kernel_is_reported_and_not_timed(source: str, note: str,
                                                  loader: harness.KernelLoader) -> None:
    wrong = croqtile.compile(source).copy2d
    cases = [Case("memory", "copy", "f16", 40, 128), Case("memory", "add", "f16", 40, 128)]

    def load(case: Case) -> Any:
        return wrong if case.kernel == "copy" else loader(case)

    timer = SequenceTimer([1.0, 2.0] * 3)
    rows = harness.run_cases(cases, device="cpu", timer=timer, load=load, reps=3)
    assert not rows[0].ok and rows[0].note == note
    assert rows[0].croqtile_ms is None and rows[0].ratio is None
    assert rows[1].ok and rows[1].ratio == 2.0
    assert len(timer.timed) == 6  # only the add case was timed


def test_a_kernel_that_fails_to_compile_is_a_failed_row() -> None:
    def load(case: Case) -> Any:
        return croqtile.compile("__co__ void f(global f16 [4] x) { x.at(0) = zz; }")

    rows = harness.run_cases([Case("memory", "copy", "f16", 8, 64)], device="cpu", load=load)
    assert not rows[0].ok and rows[0].note.startswith("compile: CompileError")


# ----------------------------------------------------------------------------------------
# timing arithmetic, files, table
# ----------------------------------------------------------------------------------------


def test_median_of_interleaved_medians(loader: harness.KernelLoader) -> None:
    case = Case("square", "gemm", "f16", 64, 64, 64)
    # ours, baseline, ours, baseline, ours, baseline
    timer = SequenceTimer([1.0, 9.0, 5.0, 3.0, 2.0, 4.0])
    rows = harness.run_cases([case], device="cpu", timer=timer, load=loader, reps=3)
    assert rows[0].croqtile_ms == 2.0 and rows[0].baseline_ms == 4.0
    assert rows[0].ratio == 2.0
    assert rows[0].tflops(2.0) == pytest.approx(2 * 64 ** 3 / 2.0e-3 / 1e12)
    ours, base = timer.timed[0], timer.timed[1]
    assert ours is not base and timer.timed[2] is ours and timer.timed[3] is base


def test_host_time_of_each_side_is_recorded_when_a_host_timer_is_given(
        tmp_path: Path, loader: harness.KernelLoader) -> None:
    case = Case("square", "gemm", "f16", 64, 64, 64)
    host = SequenceTimer([21.5, 13.25])  # ours, then the baseline
    result = suite.run_bench([case], tmp_path, device="cpu", reps=1,
                             timer=SequenceTimer([1.0, 2.0]), load=loader, plot=False,
                             host_timer=host)
    (row,) = result.rows
    assert (row.croqtile_host_us, row.baseline_host_us) == (21.5, 13.25)
    ours, base = host.timed
    assert ours is not base
    (record,) = report.read_csv(tmp_path / "square.csv")
    assert (record["croqtile_host_us"], record["baseline_host_us"]) == ("21.5", "13.25")
    (entry,) = json.loads((tmp_path / "square.json").read_text())["rows"]
    assert (entry["croqtile_host_us"], entry["baseline_host_us"]) == (21.5, 13.25)
    # without one (CPU runs) the columns stay empty
    suite.run_bench([case], tmp_path, device="cpu", reps=1, timer=SequenceTimer([1.0, 2.0]),
                    load=loader, plot=False)
    (record,) = report.read_csv(tmp_path / "square.csv")
    assert record["croqtile_host_us"] == "" and record["baseline_host_us"] == ""


def _timed_run(tmp_path: Path, loader: harness.KernelLoader) -> suite.BenchResult:
    cases = [Case("square", "gemm", "f16", 64, 64, 64), Case("square", "gemm", "f16", 96, 96, 96),
             Case("memory", "copy", "f16", 16, 256), Case("memory", "add", "f16", 16, 256)]
    # ratios 4, 1 (square: geomean 2) and 2, 0.5 (memory: geomean 1); reps=1
    timer = SequenceTimer([1.0, 4.0, 3.0, 3.0, 1.0, 2.0, 4.0, 2.0])
    return suite.run_bench(cases, tmp_path, device="cpu", reps=1, timer=timer, load=loader,
                           progress=None, plot=False)


def test_csv_has_the_columns_and_a_row_per_case(tmp_path: Path,
                                                 loader: harness.KernelLoader) -> None:
    result = _timed_run(tmp_path, loader)
    with (tmp_path / "square.csv").open() as f:
        reader = csv.DictReader(f)
        assert REQUIRED_COLUMNS <= set(reader.fieldnames or [])
        square = list(reader)
    assert [(r["M"], r["N"], r["K"]) for r in square] == [("64", "64", "64"),
                                                         ("96", "96", "96")]
    assert [float(r["ratio"]) for r in square] == [4.0, 1.0]
    assert float(square[0]["croqtile_tflops"]) == pytest.approx(2 * 64 ** 3 / 1e-3 / 1e12,
                                                               rel=1e-3)
    assert all(r["ok"] == "True" and r["croqtile_gbps"] == "" for r in square)
    memory = report.read_csv(tmp_path / "memory.csv")
    assert [r["kernel"] for r in memory] == ["copy", "add"] and memory[0]["K"] == ""
    copy_gbps = 2 * 16 * 256 * 2 / 1e-3 / 1e9  # 2 tensors in 1 ms
    assert float(memory[0]["croqtile_gbps"]) == pytest.approx(copy_gbps, rel=1e-3)
    # the add moves 3 tensors in 4 ms; torch's copy moved 2 in 2 ms
    assert float(memory[1]["copy_fraction"]) == pytest.approx((3 / 4) / (2 / 2), rel=1e-3)
    assert len(result.rows) == 4


def test_json_has_metadata_and_geometric_means(tmp_path: Path,
                                               loader: harness.KernelLoader) -> None:
    _timed_run(tmp_path, loader)
    square = json.loads((tmp_path / "square.json").read_text())
    meta = square["metadata"]
    assert {"gpu", "torch", "triton", "croqtile", "date"} <= set(meta)
    assert meta["croqtile"] == croqtile.__version__
    assert meta["geomean_ratio"]["square"] == pytest.approx(2.0)
    assert [r["ratio"] for r in square["rows"]] == [4.0, 1.0]
    memory = json.loads((tmp_path / "memory.json").read_text())
    assert memory["metadata"]["geomean_ratio"]["memory"] == pytest.approx(1.0)
    assert memory["metadata"]["geomean_ratio"]["memory/add/f16"] == pytest.approx(0.5)


def test_geomean_ignores_untimed_rows() -> None:
    assert report.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert report.geomean([]) is None
    case = Case("square", "gemm", "f16", 8, 8, 8)
    rows = [harness.Row(case, True, 0.0, 1.0, 3.0), harness.Row(case, False, None)]
    assert report.geomeans(rows)["square"] == pytest.approx(3.0)


def test_summary_table(tmp_path: Path, loader: harness.KernelLoader) -> None:
    table = _timed_run(tmp_path, loader).table
    lines = table.splitlines()
    assert len({len(line) for line in lines}) == 1  # fixed width
    assert lines[0].split() == ["sweep", "kernel", "dtype", "cases", "failed", "geomean",
                                "ratio", "worst"]
    assert lines[-2].split() == ["square", "all", "2", "0", "2.000", "1.000"]
    assert lines[-1].split() == ["memory", "all", "2", "0", "1.000", "0.500"]
    assert ["memory", "add", "f16", "1", "0", "0.500", "0.500"] in [line.split() for line in lines]


def test_progress_line_and_stream() -> None:
    case = Case("square", "gemm", "f16", 4096, 4096, 4096)
    assert harness.progress_line(12, 40, case) == "[###.......] 12/40 gemm f16 4096x4096x4096"
    assert harness.progress_line(40, 40, None) == "[##########] 40/40 done"
    stream = io.StringIO()
    harness.run_cases([Case("memory", "copy", "f16", 8, 64)], device="cpu", progress=stream)
    assert stream.getvalue().splitlines() == ["[..........] 0/1 copy f16 8x64",
                                              "[##########] 1/1 done"]


def test_autotune_is_passed_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    class Tuned:
        tuned_config = {"defines": {"TILE_M": 64, "DT": "bf16"}, "num_warps": 4}

    class Module:
        gemm = Tuned()

    def fake_compile(text: str, **kwargs: Any) -> Module:
        assert "__co__ void gemm(" in text
        seen.append(kwargs)
        return Module()

    monkeypatch.setattr(croqtile, "compile", fake_compile)
    case = Case("square", "gemm", "bf16", 8, 8, 8)
    harness.kernel_loader("quick")(case)
    harness.kernel_loader("none")(case)
    # named by its place in the package, never by the path of an installation
    assert seen[0] == {"defines": {"DT": "bf16"}, "filename": "croqtile/bench/kernels/gemm.co",
                       "autotune": "quick", "tunables": spaces.gemm_space}
    assert seen[1] == {"defines": {"DT": "bf16"}, "filename": "croqtile/bench/kernels/gemm.co"}
    assert harness.config_string(Tuned()) == "DT=bf16;TILE_M=64;num_warps=4"


# ----------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------


def test_cli_bench_cpu_quick_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    out = tmp_path / "results"
    # (the decode sweep autotunes; on the CPU nothing can be timed, and it says so)
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        assert main(["bench", "--device", "cpu", "--quick", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert re.search(r"^\[##########\] 21/21 done$", captured.err, re.M)
    for sweep in suite.SWEEPS:
        rows = report.read_csv(out / f"{sweep}.csv")
        assert rows and all(r["ok"] == "True" and r["ratio"] == "" for r in rows)
        doc = json.loads((out / f"{sweep}.json").read_text())
        assert doc["metadata"]["device"] == "cpu" and len(doc["rows"]) == len(rows)
    assert re.search(r"^fp8 +all ", captured.out, re.M)
    assert re.search(r"^attention +all +4 +0 ", captured.out, re.M)
    assert "wrote 14 files" in captured.out


def test_cli_bench_one_sweep_and_usage_errors(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "memory", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.csv", "memory.json"]
    assert main(["bench", "gemm", "--device", "cpu"]) == 2
    assert "unknown sweep 'gemm'" in capsys.readouterr().err
    assert main(["bench", "--plot", str(tmp_path / "missing.csv")]) == 2
    assert main(["bench", "--reps", "0", "--device", "cpu"]) == 2


def test_the_default_out_is_bench_results_of_the_device_in_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "memory", "--device", "cpu"]) == 0
    assert "wrote 2 files to bench-results/cpu" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "bench-results" / "cpu").iterdir()) == [
        "memory.csv", "memory.json"]


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA GeForce RTX 4090", "nvidia-geforce-rtx-4090"), ("", "gpu")])
def test_gpu_folder_names(name: str, slug: str) -> None:
    assert report.gpu_slug(name) == slug


@pytest.mark.parametrize("sweep, missing", [("square", "gemm.co"), ("attention", "attention.co"),
                                            ("decode", "matmul.co")])
def test_a_kernel_missing_from_the_package_is_a_message_not_a_traceback(
        sweep: str, missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for path in harness.KERNEL_DIR.glob("*.co"):
        if path.name != missing:
            (kernels / path.name).write_text(path.read_text())
    monkeypatch.setattr(harness, "KERNEL_DIR", kernels)
    assert main(["bench", sweep, "--device", "cpu", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"croqtile bench: error: cannot read the bench kernel {missing} (")
    assert "reinstall" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # stopped before anything ran


def test_the_bench_reads_no_file_outside_its_package() -> None:
    """Every kernel a sweep compiles is package data (what makes an installed wheel
    work), and the results name it by its place in the package."""
    cases = suite.tiny_cases(suite.SWEEPS + suite.NAMED_SWEEPS)
    files = {suite.kernel_file(c) for c in cases}
    assert None not in files
    assert {p.name for p in harness.KERNEL_DIR.glob("*.co")} >= files
    assert harness.KERNEL_DIR.parent == Path(harness.__file__).resolve().parent
    assert harness.kernel_program("copy.co").name == "croqtile/bench/kernels/copy.co"


def test_cli_plot_from_csv(tmp_path: Path, loader: harness.KernelLoader,
                           capsys: pytest.CaptureFixture[str]) -> None:
    _timed_run(tmp_path, loader)
    code = main(["bench", "--plot", str(tmp_path / "square.csv")])
    captured = capsys.readouterr()
    if importlib.util.find_spec("matplotlib") is not None:
        assert code == 0
        png = tmp_path / "square.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"wrote {png}" in captured.out
    else:
        assert code == 1
        assert "croqtile bench --plot CSV" in captured.err
        assert not (tmp_path / "square.png").exists()


def test_plot_without_matplotlib_says_how_to_plot_later(
        tmp_path: Path, loader: harness.KernelLoader, monkeypatch: pytest.MonkeyPatch) -> None:
    _timed_run(tmp_path, loader)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    png, message = report.plot_csv(tmp_path / "square.csv")
    assert png is None and "croqtile bench --plot CSV" in message
    assert (tmp_path / "square.csv").is_file()  # still there, to plot elsewhere


def test_cli_defines_reach_the_kernels(tmp_path: Path) -> None:
    args = ["bench", "memory", "--device", "cpu", "--out", str(tmp_path)]
    assert main([*args, "-D", "TILE_R=16", "-D", "TILE_C=64"]) == 0
    doc = json.loads((tmp_path / "memory.json").read_text())
    assert doc["metadata"]["defines"] == {"TILE_R": "16", "TILE_C": "64"}
    assert all(r["ok"] for r in doc["rows"])
    # A tile the checker refuses (shared memory over the budget) is a failed row, exit 1.
    assert main([*args, "-D", "TILE_R=4096", "-D", "TILE_C=4096"]) == 1
    doc = json.loads((tmp_path / "memory.json").read_text())
    assert not any(r["ok"] for r in doc["rows"])
    assert main([*args, "-D", "=3"]) == 2


def test_a_baseline_that_cannot_be_timed_keeps_the_checked_row(
        loader: harness.KernelLoader) -> None:
    def broken_timer(fn: Callable[[], object]) -> float:
        raise RuntimeError("no _scaled_mm here\nsecond line")

    rows = harness.run_cases([Case("fp8", "gemm_fp8", "e4m3", 64, 64, 64)], device="cpu",
                           timer=broken_timer, load=loader)
    assert rows[0].ok and rows[0].ratio is None
    assert rows[0].note == "timing: RuntimeError: no _scaled_mm here"


def test_a_run_without_matplotlib_writes_the_data_and_says_so(
        tmp_path: Path, loader: harness.KernelLoader, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    timer = SequenceTimer([1.0, 2.0])
    result = suite.run_bench([Case("square", "gemm", "f16", 64, 64, 64)], tmp_path,
                             device="cpu", reps=1, timer=timer, load=loader)
    assert result.messages == [report.NO_MATPLOTLIB]
    assert sorted(p.name for p in result.files) == ["square.csv", "square.json"]
    assert not list(tmp_path.glob("*.png"))


def test_autotune_through_croqtile_load_on_the_cpu(tmp_path: Path) -> None:
    """On the CPU the search has no timer: the default configuration runs (with a warning)
    and the row is still checked; the harness reads whatever ``tuned_config`` says."""
    load = harness.kernel_loader("quick")
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        rows = harness.run_cases([Case("memory", "copy", "f16", 8, 64)], device="cpu",
                               load=load)
    assert rows[0].ok
    fn = load(Case("memory", "copy", "f16", 8, 64))
    assert rows[0].config == harness.config_string(fn)


@pytest.mark.parametrize("kernel", sorted(spaces.SPACES))
def test_every_tuning_candidate_of_the_bench_kernels_compiles(kernel: str) -> None:
    """The candidates are chosen for the GPU; each must at least pass the checker (a typo
    in a define name, or a tile the checker rejects, would only be pruned silently)."""
    import warnings

    source = (harness.KERNEL_DIR / harness.KERNEL_FILES[kernel]).read_text()
    configs = [c for m in (16, 64, 4096)
               for c in spaces.SPACES[kernel]({"M": m, "N": 4096, "K": 4096})]
    assert configs
    for config in configs:
        defines = {k: v for k, v in config.items() if k.isupper()}
        assert set(defines) <= set(croqtile.tuning.tuner.source_defines(source)), config
        options = {k: v for k, v in config.items() if not k.isupper()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            croqtile.compile(source, defines=defines, **options)


# modules of bench/ the scripts import, not scripts
BENCH_HELPERS = {"rows.py", "attention_probe_kernels.py"}


@pytest.mark.parametrize("script", sorted((Path(__file__).resolve().parent.parent / "bench")
                                          .glob("*.py")), ids=lambda p: p.name)
def test_every_bench_script_imports_without_running(script: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU-only scripts cannot run here; importing them still catches a broken import
    or name, and a script that did its work on import (not behind ``__main__``) fails
    here (no GPU, no arguments)."""
    name = f"bench_script_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # (dataclasses look their module up)
    monkeypatch.setattr(sys, "argv", [str(script)])
    monkeypatch.syspath_prepend(str(script.parent))  # (scripts import rows.py)
    spec.loader.exec_module(module)
    if script.name not in BENCH_HELPERS:
        assert 'if __name__ == "__main__":' in script.read_text()
