"""Benchmark sweeps: croqtile kernels beside their torch baselines, correctness first.

Each ``Case`` is one kernel at one shape. ``run_cases`` builds its inputs, poisons the
output, runs the croqtile kernel and compares every element with a float64 reference; only
a correct case is timed, croqtile and baseline interleaved in the same run so that clock and
thermal drift hit both alike. ``write_results`` writes a CSV and a JSON per sweep (and a PNG
when matplotlib is importable; ``plot_csv`` draws one later from the CSV on any machine).

On CPU tensors the kernels run through Triton's interpreter: correctness only, no timing,
unless a ``timer`` is passed (tests pass a fake one to check the arithmetic).

On CUDA each timed row also records the host time of one call of each side (a loop of
calls without synchronisation): when a kernel is shorter than the host path of its call,
``do_bench`` can measure the host rather than the kernel, and these columns show it.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

import torch

from .bench_spaces import SPACES

KERNEL_DIR = Path(__file__).resolve().parent.parent / "bench" / "kernels"
SWEEPS = ("square", "llm", "fp8", "memory")
DEFAULT_SIZES = (512, 1024, 2048, 3072, 4096, 6144, 8192)
# Memory sweeps use square [S, S] tensors: 2 MB to 512 MB in f16.
DEFAULT_MEMORY_SIZES = (1024, 2048, 4096, 8192, 16384)
LLM_MS = (16, 64, 128, 512, 4096)
# (model, projection, N, K) of y[M, N] = x[M, K] @ W[N, K]^T.
LLM_SHAPES = (
    ("llama3-8b", "qkv", 6144, 4096), ("llama3-8b", "o", 4096, 4096),
    ("llama3-8b", "gate_up", 28672, 4096), ("llama3-8b", "down", 4096, 14336),
    ("llama3-70b", "qkv", 10240, 8192), ("llama3-70b", "o", 8192, 8192),
    ("llama3-70b", "gate_up", 57344, 8192), ("llama3-70b", "down", 8192, 28672),
)
DTYPES: Mapping[str, torch.dtype] = {
    "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
    "e4m3": torch.float8_e4m3fn,
}
# Relative Frobenius error allowed: f32 accumulation leaves only the output rounding for
# f16/bf16; fp8 is compared with a reference from the same quantised inputs.
TOLERANCES: Mapping[str, float] = {"gemm": 1e-2, "gemm_fp8": 5e-2, "copy": 0.0, "add": 0.0}
NO_MATPLOTLIB = ("matplotlib is not importable here: no plot drawn; the CSV can be plotted "
                 "later (on any machine) with `croqtile bench --plot CSV`")

Timer = Callable[[Callable[[], object]], float]  # milliseconds for one call of fn


@dataclass(frozen=True)
class Case:
    """One kernel at one shape. GEMMs: ``M, N, K``; memory kernels: an [M, N] tensor and
    ``K == 0``. ``label`` names the shape in plots and tables (an LLM projection)."""

    sweep: str
    kernel: str  # gemm, gemm_fp8, copy, add
    dtype: str
    M: int
    N: int
    K: int = 0
    label: str = ""

    @property
    def is_gemm(self) -> bool:
        return self.kernel.startswith("gemm")

    @property
    def flops(self) -> float:
        return 2.0 * self.M * self.N * self.K if self.is_gemm else 0.0

    @property
    def bytes(self) -> float:
        """Bytes that must cross DRAM at least once: what GB/s is computed from."""
        size = DTYPES[self.dtype].itemsize
        if self.kernel == "gemm_fp8":
            return (self.M + self.N) * self.K * size + self.M * self.N * 2
        if self.is_gemm:
            return (self.M * self.K + self.N * self.K + self.M * self.N) * size
        tensors = 2 if self.kernel == "copy" else 3
        return float(tensors * self.M * self.N * size)

    @property
    def shape(self) -> str:
        dims = f"{self.M}x{self.N}x{self.K}" if self.is_gemm else f"{self.M}x{self.N}"
        return f"{self.label} {dims}" if self.label else dims

    def describe(self) -> str:
        return f"{self.kernel} {self.dtype} {self.shape}"


@dataclass(frozen=True)
class Row:
    """What running one case found; times in milliseconds, ``None`` when not timed."""

    case: Case
    ok: bool
    rel_error: float | None
    croqtile_ms: float | None = None
    baseline_ms: float | None = None
    config: str = ""
    note: str = ""
    croqtile_host_us: float | None = None  # host time of one call (CUDA rows)
    baseline_host_us: float | None = None

    @property
    def ratio(self) -> float | None:
        """Baseline time over croqtile time: above 1 means croqtile is faster."""
        if self.croqtile_ms and self.baseline_ms:
            return self.baseline_ms / self.croqtile_ms
        return None

    def tflops(self, ms: float | None) -> float | None:
        return self.case.flops / ms * 1e-9 if ms and self.case.flops else None

    def gbps(self, ms: float | None) -> float | None:
        return self.case.bytes / ms * 1e-6 if ms else None


CSV_COLUMNS = ("sweep", "kernel", "dtype", "M", "N", "K", "label", "croqtile_tflops",
               "baseline_tflops", "ratio", "croqtile_ms", "baseline_ms", "croqtile_gbps",
               "baseline_gbps", "copy_fraction", "ok", "rel_error", "config",
               "croqtile_host_us", "baseline_host_us", "note")


# ----------------------------------------------------------------------------------------
# case lists
# ----------------------------------------------------------------------------------------


def square_cases(dtypes: Sequence[str] = ("f16", "bf16"),
                 sizes: Sequence[int] = DEFAULT_SIZES) -> list[Case]:
    """Square GEMMs C[S, S] = A[S, S] @ B[S, S]^T."""
    return [Case("square", "gemm", dt, s, s, s) for dt in dtypes for s in sizes]


def llm_cases(dtypes: Sequence[str] = ("f16", "bf16"), ms: Sequence[int] = LLM_MS,
              shapes: Sequence[tuple[str, str, int, int]] = LLM_SHAPES) -> list[Case]:
    """The linear layers of Llama-3 8B and 70B at decode (small M) and prefill (large M)
    token counts: the shapes a serving stack actually runs."""
    return [Case("llm", "gemm", dt, m, n, k, f"{model} {proj}")
            for dt in dtypes for model, proj, n, k in shapes for m in ms]


def fp8_cases(sizes: Sequence[int] = DEFAULT_SIZES) -> list[Case]:
    """Square e4m3 GEMMs with per-tensor scales and a bf16 output."""
    return [Case("fp8", "gemm_fp8", "e4m3", s, s, s) for s in sizes]


def memory_cases(sizes: Sequence[int] = DEFAULT_MEMORY_SIZES,
                 dtype: str = "f16") -> list[Case]:
    """Copy and add of [S, S] tensors: how close a tiled kernel gets to DRAM bandwidth."""
    return [Case("memory", kernel, dtype, s, s) for kernel in ("copy", "add") for s in sizes]


def tiny_cases(sweeps: Iterable[str], dtypes: Sequence[str] = ("f16", "bf16")) -> list[Case]:
    """Small shapes (ragged edges included) for the CPU interpreter: correctness only."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "square":
            cases += square_cases(dtypes, (96,))
        elif sweep == "llm":
            cases += llm_cases(dtypes, (16,), (("tiny", "proj", 192, 128),))
        elif sweep == "fp8":
            cases += fp8_cases((128,))
        elif sweep == "memory":
            cases += [Case("memory", k, dtypes[0], 72, 320) for k in ("copy", "add")]
    return cases


def quick_cases(sweeps: Iterable[str], dtypes: Sequence[str] = ("f16", "bf16")) -> list[Case]:
    """A few GPU shapes per sweep: a smoke run in about a minute."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "square":
            cases += square_cases(dtypes, (1024, 4096))
        elif sweep == "llm":
            cases += llm_cases(dtypes, (16, 4096), LLM_SHAPES[:2])
        elif sweep == "fp8":
            cases += fp8_cases((1024, 4096))
        elif sweep == "memory":
            cases += memory_cases((4096, 8192), dtypes[0])
    return cases


def full_cases(sweeps: Iterable[str], dtypes: Sequence[str] = ("f16", "bf16"),
               sizes: Sequence[int] | None = None) -> list[Case]:
    """Every case of the named sweeps; ``sizes`` replaces the square, fp8 and memory sizes."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "square":
            cases += square_cases(dtypes, sizes or DEFAULT_SIZES)
        elif sweep == "llm":
            cases += llm_cases(dtypes)
        elif sweep == "fp8":
            cases += fp8_cases(sizes or DEFAULT_SIZES)
        elif sweep == "memory":
            cases += memory_cases(sizes or DEFAULT_MEMORY_SIZES, dtypes[0])
    return cases


# ----------------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """A case ready to run: ``ours`` writes ``output``; ``reference`` is float64."""

    ours: Callable[[], object]
    baseline: Callable[[], object]
    output: torch.Tensor
    reference: Callable[[], torch.Tensor]


KernelLoader = Callable[[Case], Any]  # returns the croqtile Function for a case


# Launch options used when not autotuning: the compiler's own defaults (two warpgroups
# for a 128 x 256 f32 accumulator, a persistent launch for MMA kernels).
DEFAULT_OPTIONS: Mapping[str, Mapping[str, Any]] = {}
KERNEL_FILES = {"gemm": "gemm.co", "gemm_fp8": "gemm_fp8.co", "copy": "copy.co",
                "add": "add.co"}
KERNEL_NAMES = {"gemm": "gemm", "gemm_fp8": "gemm_fp8", "copy": "copy2d", "add": "add2d"}


def kernel_loader(autotune: str = "none", defines: Mapping[str, Any] | None = None,
                  kernel_dir: Path = KERNEL_DIR) -> KernelLoader:
    """Compiles each bench kernel once per element type. ``autotune`` is passed to
    ``croqtile.load`` only when it is not ``"none"`` (builds without the option still run
    the untuned sweeps); otherwise ``DEFAULT_OPTIONS`` apply. ``defines`` override the
    sources' ``#define``s (tile sizes) in every kernel."""
    import croqtile

    cache: dict[tuple[str, str], Any] = {}

    def load(case: Case) -> Any:
        key = (case.kernel, case.dtype)
        if key not in cache:
            extra = dict(defines or {})
            if case.kernel != "gemm_fp8":
                extra["DT"] = case.dtype  # the case decides the element type
            options = (dict(DEFAULT_OPTIONS.get(case.kernel, {})) if autotune == "none"
                       else {"autotune": autotune, "tunables": SPACES[case.kernel]})
            mod = croqtile.load(kernel_dir / KERNEL_FILES[case.kernel], defines=extra,
                                **options)
            cache[key] = getattr(mod, KERNEL_NAMES[case.kernel])
        return cache[key]

    return load


def prepare(case: Case, fn: Any, device: str, seed: int = 0) -> Prepared:
    """Inputs, the croqtile call, the torch baseline and the float64 reference of a case."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = DTYPES[case.dtype]

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device=device).to(dtype)

    if case.kernel == "gemm":
        a, b = randn(case.M, case.K), randn(case.N, case.K)
        out = torch.empty((case.M, case.N), dtype=dtype, device=device)
        return Prepared(lambda: fn(a, b, out), lambda: torch.matmul(a, b.T), out,
                        lambda: a.double() @ b.double().T)
    if case.kernel == "gemm_fp8":
        a, b = randn(case.M, case.K), randn(case.N, case.K)
        sa = torch.tensor([0.5], device=device)
        sb = torch.tensor([0.25], device=device)
        out = torch.empty((case.M, case.N), dtype=torch.bfloat16, device=device)
        return Prepared(
            lambda: fn(a, b, sa, sb, out),
            lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb,
                                     out_dtype=torch.bfloat16),
            out, lambda: (a.double() @ b.double().T) * (sa.double() * sb.double()))
    src, other = randn(case.M, case.N), randn(case.M, case.N)
    out = torch.empty_like(src)
    if case.kernel == "copy":
        return Prepared(lambda: fn(src, out), lambda: out.copy_(src), out,
                        lambda: src.double())
    return Prepared(lambda: fn(src, other, out), lambda: torch.add(src, other, out=out), out,
                    lambda: (src.double() + other.double()).to(dtype).double())


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error over every element; NaN (a poisoned element left) fails
    every comparison. An all-zero reference compares absolutely."""
    diff = (out.double() - ref).norm().item()
    scale = ref.norm().item()
    return diff / scale if scale else diff


def poison(out: torch.Tensor) -> None:
    """NaN everywhere, so that an element the kernel never writes fails the check."""
    out.fill_(float("nan"))


def check(case: Case, prepared: Prepared) -> tuple[bool, float | None, str]:
    """Run croqtile once on a poisoned output; (ok, relative error, note)."""
    poison(prepared.output)
    try:
        prepared.ours()
    except Exception as exc:  # a kernel that fails to run is a failed row, not a crash
        return False, None, _describe(exc)
    err = relative_error(prepared.output, prepared.reference())
    ok = err <= TOLERANCES[case.kernel]  # False for NaN
    return ok, err, "" if ok else "wrong result"


def default_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn`` over Triton's own warm-up and repetitions."""
    from triton.testing import do_bench

    return float(do_bench(fn, return_mode="median"))


def host_us_per_call(fn: Callable[[], object], calls: int = 50) -> float:
    """Wall time per call of a loop of ``calls`` calls that waits for none of them (the
    host's share of a call while the GPU keeps up), in microseconds."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def time_pair(ours: Callable[[], object], baseline: Callable[[], object],
              timer: Timer, reps: int) -> tuple[float, float]:
    """Median of ``reps`` medians each, interleaved ours, baseline, ours, baseline...: both
    see the same clocks and temperature."""
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(reps):
        mine.append(timer(ours))
        theirs.append(timer(baseline))
    return statistics.median(mine), statistics.median(theirs)


def config_string(fn: Any) -> str:
    """The autotuned configuration of a function as one CSV cell ("" if none):
    ``{"defines": {"TILE_M": 128}, "num_warps": 8}`` becomes ``TILE_M=128;num_warps=8``."""
    config = getattr(fn, "tuned_config", None)
    if not config:
        return ""
    if not isinstance(config, Mapping):
        return str(config).replace(",", ";")
    parts: list[str] = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            parts += [f"{k}={v}" for k, v in sorted(value.items())]
        else:
            parts.append(f"{key}={value}")
    return ";".join(parts)


def run_case(case: Case, load: KernelLoader, device: str, timer: Timer | None,
             reps: int, host_timer: Timer | None = None) -> Row:
    """Check one case and, when it is correct and a timer is given, time it. A failure
    (compile error, out of memory, an unsupported baseline) becomes a row with a note, so
    that one bad case does not lose the rest of a long sweep."""
    try:
        fn = load(case)
    except Exception as exc:
        return Row(case, False, None, note="compile: " + _describe(exc))
    try:
        prepared = prepare(case, fn, device)
        ok, err, note = check(case, prepared)
    except Exception as exc:
        return Row(case, False, None, note="check: " + _describe(exc))
    if not ok or timer is None:
        return Row(case, ok, err, config=config_string(fn), note=note)
    try:
        ours_ms, base_ms = time_pair(prepared.ours, prepared.baseline, timer, reps)
    except Exception as exc:  # correct, but not timed: still ok
        return Row(case, ok, err, config=config_string(fn), note="timing: " + _describe(exc))
    if host_timer is None:
        return Row(case, ok, err, ours_ms, base_ms, config_string(fn))
    return Row(case, ok, err, ours_ms, base_ms, config_string(fn),
               croqtile_host_us=host_timer(prepared.ours),
               baseline_host_us=host_timer(prepared.baseline))


def _describe(exc: BaseException) -> str:
    """The first line of an exception, short enough for a CSV cell."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:200]


def run_cases(cases: Sequence[Case], *, device: str = "cuda", reps: int = 3,
              timer: Timer | None = None, load: KernelLoader | None = None,
              autotune: str = "none", defines: Mapping[str, Any] | None = None,
              progress: TextIO | None = None, host_timer: Timer | None = None) -> list[Row]:
    """Run every case. Without a ``timer``, CUDA uses ``do_bench`` and CPU only checks;
    ``host_timer`` (by default ``host_us_per_call`` on CUDA) fills the host-time columns."""
    if timer is None and device != "cpu":
        timer = default_timer
    if host_timer is None and device == "cuda" and timer is default_timer:
        host_timer = host_us_per_call
    load = load or kernel_loader(autotune, defines)
    rows: list[Row] = []
    for i, case in enumerate(cases):
        if progress is not None:
            show_progress(progress, i, len(cases), case)
        rows.append(run_case(case, load, device, timer, reps, host_timer))
        if device == "cuda":
            torch.cuda.empty_cache()  # the next case's inputs may be large
    if progress is not None and cases:
        show_progress(progress, len(cases), len(cases), None)
    return rows


def progress_line(done: int, total: int, case: Case | None, width: int = 10) -> str:
    """``[####......] 4/10 gemm f16 4096x4096x4096``: the case now running."""
    filled = width * done // total if total else width
    text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
    return f"{text} {case.describe()}" if case else f"{text} done"


def show_progress(stream: TextIO, done: int, total: int, case: Case | None) -> None:
    # A terminal redraws one line; a log file gets one line per case.
    end = "\n" if case is None or not stream.isatty() else ""
    prefix = "\r\033[K" if stream.isatty() else ""
    stream.write(prefix + progress_line(done, total, case) + end)
    stream.flush()


# ----------------------------------------------------------------------------------------
# summaries and files
# ----------------------------------------------------------------------------------------


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def copy_fractions(rows: Sequence[Row]) -> dict[Case, float]:
    """Each timed memory case's GB/s over torch's device-to-device copy GB/s at the same
    shape and type (the copy case's baseline): how much of the practical bandwidth it got."""
    copy_bw = {(r.case.dtype, r.case.M, r.case.N): r.gbps(r.baseline_ms)
               for r in rows if r.case.kernel == "copy" and r.baseline_ms}
    fractions: dict[Case, float] = {}
    for r in rows:
        peak = copy_bw.get((r.case.dtype, r.case.M, r.case.N))
        ours = r.gbps(r.croqtile_ms)
        if r.case.sweep == "memory" and peak and ours:
            fractions[r.case] = ours / peak
    return fractions


def geomeans(rows: Sequence[Row]) -> dict[str, float | None]:
    """Geometric-mean ratio per sweep, and per ``sweep/kernel/dtype`` group."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        keys = (r.case.sweep, f"{r.case.sweep}/{r.case.kernel}/{r.case.dtype}")
        for key in keys:
            groups.setdefault(key, [])
            if r.ratio is not None:
                groups[key].append(r.ratio)
    return {key: geomean(vals) for key, vals in groups.items()}


def _fmt(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def csv_record(row: Row, fraction: float | None = None) -> dict[str, str]:
    c = row.case
    return {
        "sweep": c.sweep, "kernel": c.kernel, "dtype": c.dtype, "M": str(c.M), "N": str(c.N),
        "K": str(c.K) if c.is_gemm else "", "label": c.label,
        "croqtile_tflops": _fmt(row.tflops(row.croqtile_ms)),
        "baseline_tflops": _fmt(row.tflops(row.baseline_ms)),
        "ratio": _fmt(row.ratio), "croqtile_ms": _fmt(row.croqtile_ms, 6),
        "baseline_ms": _fmt(row.baseline_ms, 6),
        "croqtile_gbps": "" if c.is_gemm else _fmt(row.gbps(row.croqtile_ms)),
        "baseline_gbps": "" if c.is_gemm else _fmt(row.gbps(row.baseline_ms)),
        "copy_fraction": _fmt(fraction), "ok": str(row.ok),
        "rel_error": _fmt(row.rel_error, 3), "config": row.config,
        "croqtile_host_us": _fmt(row.croqtile_host_us),
        "baseline_host_us": _fmt(row.baseline_host_us), "note": row.note,
    }


def json_record(row: Row, fraction: float | None = None) -> dict[str, Any]:
    """The CSV columns with numbers as numbers and ``null`` for what was not measured."""
    c = row.case
    return {
        "sweep": c.sweep, "kernel": c.kernel, "dtype": c.dtype, "M": c.M, "N": c.N,
        "K": c.K if c.is_gemm else None, "label": c.label,
        "croqtile_tflops": row.tflops(row.croqtile_ms),
        "baseline_tflops": row.tflops(row.baseline_ms), "ratio": row.ratio,
        "croqtile_ms": row.croqtile_ms, "baseline_ms": row.baseline_ms,
        "croqtile_gbps": None if c.is_gemm else row.gbps(row.croqtile_ms),
        "baseline_gbps": None if c.is_gemm else row.gbps(row.baseline_ms),
        "copy_fraction": fraction, "ok": row.ok, "rel_error": row.rel_error,
        "config": row.config, "croqtile_host_us": row.croqtile_host_us,
        "baseline_host_us": row.baseline_host_us, "note": row.note,
    }


def metadata(device: str, reps: int, autotune: str, timed: bool = True) -> dict[str, Any]:
    """Where and with what the figures were measured."""
    import triton

    import croqtile

    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (CPU interpreter)"
    return {
        "gpu": gpu, "device": device, "torch": torch.__version__,
        "triton": triton.__version__, "croqtile": croqtile.__version__,
        "python": platform.python_version(), "reps": reps, "autotune": autotune,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "timing": "median of reps medians, croqtile and baseline interleaved"
                  if timed else "none (correctness only)",
    }


def write_results(rows: Sequence[Row], out_dir: Path, meta: Mapping[str, Any],
                  plot: bool = True) -> tuple[list[Path], list[str]]:
    """``<sweep>.csv`` and ``<sweep>.json`` per sweep (and ``<sweep>.png``); returns the
    files written and messages for the user (a plot that could not be drawn)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fractions = copy_fractions(rows)
    written: list[Path] = []
    messages: list[str] = []
    for sweep in dict.fromkeys(r.case.sweep for r in rows):
        mine = [r for r in rows if r.case.sweep == sweep]
        records = [csv_record(r, fractions.get(r.case)) for r in mine]
        typed = [json_record(r, fractions.get(r.case)) for r in mine]
        csv_path = out_dir / f"{sweep}.csv"
        write_csv(records, csv_path)
        json_path = out_dir / f"{sweep}.json"
        doc = {"metadata": {**meta, "sweep": sweep, "geomean_ratio": geomeans(mine)},
               "rows": typed}
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
        written += [csv_path, json_path]
        if plot and any(r.ratio is not None for r in mine):
            png, message = plot_csv(csv_path)
            written += [png] if png else []
            messages += [message] if message and message not in messages else []
    return written, messages


def write_csv(records: Sequence[Mapping[str, str]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(records)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def summary_table(rows: Sequence[Row]) -> str:
    """Fixed-width: per sweep, kernel and type, the cases, failures and geomean ratio."""
    means = geomeans(rows)
    header = f"{'sweep':<8} {'kernel':<9} {'dtype':<5} {'cases':>5} {'failed':>6} " \
             f"{'geomean ratio':>13}"
    lines = [header, "-" * len(header)]
    groups = dict.fromkeys((r.case.sweep, r.case.kernel, r.case.dtype) for r in rows)
    for sweep, kernel, dtype in groups:
        mine = [r for r in rows if (r.case.sweep, r.case.kernel, r.case.dtype)
                == (sweep, kernel, dtype)]
        mean = means.get(f"{sweep}/{kernel}/{dtype}")
        lines.append(f"{sweep:<8} {kernel:<9} {dtype:<5} {len(mine):>5} "
                     f"{sum(not r.ok for r in mine):>6} "
                     f"{'-' if mean is None else f'{mean:.3f}':>13}")
    for sweep in dict.fromkeys(r.case.sweep for r in rows):
        mean = means.get(sweep)
        lines.append(f"{sweep:<8} {'all':<9} {'':<5} "
                     f"{sum(r.case.sweep == sweep for r in rows):>5} "
                     f"{sum(r.case.sweep == sweep and not r.ok for r in rows):>6} "
                     f"{'-' if mean is None else f'{mean:.3f}':>13}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# plots
# ----------------------------------------------------------------------------------------


def plot_csv(csv_path: Path, png_path: Path | None = None) -> tuple[Path | None, str]:
    """Draw throughput (TFLOP/s, or GB/s for memory kernels) of croqtile and baseline, and
    their ratio, against the case; returns (PNG path, "") or (None, why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, NO_MATPLOTLIB
    records = read_csv(csv_path)
    png_path = png_path or csv_path.with_suffix(".png")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    labels = list(dict.fromkeys(_x_label(r) for r in records))
    for series in dict.fromkeys((r["kernel"], r["dtype"]) for r in records):
        mine = [r for r in records if (r["kernel"], r["dtype"]) == series]
        xs = [labels.index(_x_label(r)) for r in mine]
        unit = "gbps" if mine[0]["K"] == "" else "tflops"
        name = " ".join(series)
        top.plot(xs, [_num(r[f"croqtile_{unit}"]) for r in mine], "o-", label=f"croqtile {name}")
        top.plot(xs, [_num(r[f"baseline_{unit}"]) for r in mine], "x--", label=f"torch {name}")
        bottom.plot(xs, [_num(r["ratio"]) for r in mine], "o-", label=name)
    top.set_ylabel("TFLOP/s (GEMM) or GB/s (memory)")
    top.legend(fontsize=7)
    bottom.axhline(1.0, color="grey", linewidth=0.8)
    bottom.legend(fontsize=7)
    bottom.set_ylabel("torch time / croqtile time")
    bottom.set_xticks(range(len(labels)))
    bottom.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    sweeps = ", ".join(dict.fromkeys(r["sweep"] for r in records))
    top.set_title(f"croqtile vs torch: {sweeps}")
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path, ""


def _x_label(record: Mapping[str, str]) -> str:
    dims = "x".join(record[d] for d in ("M", "N", "K") if record[d])
    return f"{record['label']} {dims}".strip()


def _num(text: str) -> float:
    return float(text) if text else math.nan


# ----------------------------------------------------------------------------------------
# the whole run
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchResult:
    rows: list[Row]
    files: list[Path]
    messages: list[str]
    table: str

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.rows)


def run_bench(cases: Sequence[Case], out_dir: Path, *, device: str = "cuda", reps: int = 3,
              autotune: str = "none", timer: Timer | None = None,
              load: KernelLoader | None = None, defines: Mapping[str, Any] | None = None,
              progress: TextIO | None = None, plot: bool = True,
              host_timer: Timer | None = None) -> BenchResult:
    """Run, write the files, and build the summary table; ``progress`` is the stream for
    the progress line (the command line passes stderr)."""
    rows = run_cases(cases, device=device, reps=reps, timer=timer, load=load,
                     autotune=autotune, defines=defines, progress=progress,
                     host_timer=host_timer)
    meta = metadata(device, reps, autotune, timed=timer is not None or device != "cpu")
    meta["defines"] = dict(defines or {})
    files, messages = write_results(rows, out_dir, meta, plot=plot)
    return BenchResult(rows, files, messages, summary_table(rows))


__all__ = [
    "Case", "Row", "BenchResult", "square_cases", "llm_cases", "fp8_cases", "memory_cases",
    "tiny_cases", "quick_cases", "full_cases", "run_cases", "run_bench", "write_results",
    "plot_csv", "summary_table", "geomeans", "progress_line", "kernel_loader",
]
