"""The shared harness of ``croqtile bench``: cases, checks and timing, and the sweeps of the
project's own bench kernels (square, llm, fp8, memory).

Each ``Case`` is one kernel at one shape. ``run_cases`` builds its inputs, poisons the
output, runs the croqtile kernel and compares every element with a float64 reference; only
a correct case is timed, croqtile and baseline interleaved in the same run so that clock and
thermal drift hit both alike.

The kernels are package data (``croqtile/bench/kernels/*.co``, read through
``kernel_program``): the command works from an installed wheel. ``attention``, ``linear``
and ``sparse`` add the sweeps of user-style kernels, ``report`` writes the files (CSV,
JSON, PNG) and the summary, and ``suite`` puts them together for ``croqtile bench``.

On CPU tensors the kernels run through Triton's interpreter: correctness only, no timing,
unless a ``timer`` is passed (tests pass a fake one to check the arithmetic).

On CUDA each timed row also records the host time of one call of each side (a loop of
calls without synchronisation): when a kernel is shorter than the host path of its call,
``do_bench`` can measure the host rather than the kernel, and these columns show it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

import torch

from .spaces import SPACES

# The bench kernels ship inside the package; results and diagnostics name them by
# KERNEL_ORIGIN, never by the path of an installation.
KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
KERNEL_ORIGIN = "croqtile/bench/kernels"
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

Timer = Callable[[Callable[[], object]], float]  # milliseconds for one call of fn
# The weight-streaming sweeps (decode, epilogue) time their calls over copies of the inputs
# that together span this many times the GPU's L2 cache (see `input_sets`).
L2_SPAN = 4


@dataclass(frozen=True)
class Case:
    """One kernel at one shape. GEMMs (and linear layers): ``M, N, K``; memory kernels: an
    [M, N] tensor and ``K == 0``; attention: ``B`` batches of ``H`` heads of ``S`` positions
    of ``D`` features, ``causal`` or not, the tensors laid out as ``layout`` says ("BHSD" or
    "BSHD"). ``label`` names the shape in plots and tables (an LLM projection)."""

    sweep: str
    kernel: str  # gemm, gemm_fp8, copy, add; the user-style sweeps' kernels
    dtype: str
    M: int = 0
    N: int = 0
    K: int = 0
    label: str = ""
    B: int = 0
    H: int = 0
    S: int = 0
    D: int = 0
    causal: bool = False
    layout: str = ""

    @property
    def is_gemm(self) -> bool:
        return self.K > 0

    @property
    def is_attention(self) -> bool:
        return self.S > 0

    @property
    def flops(self) -> float:
        if self.is_attention:
            # q k^T and p v, 2 S^2 D each per head; a causal mask leaves half of them
            full = 4.0 * self.B * self.H * self.S * self.S * self.D
            return full / 2 if self.causal else full
        return 2.0 * self.M * self.N * self.K if self.is_gemm else 0.0

    @property
    def bytes(self) -> float:
        """Bytes that must cross DRAM at least once: what GB/s is computed from."""
        size = DTYPES[self.dtype].itemsize
        if self.is_attention:
            return 4.0 * self.B * self.H * self.S * self.D * size  # q, k, v and o
        if self.kernel == "gemm_fp8":
            return (self.M + self.N) * self.K * size + self.M * self.N * 2
        if self.is_gemm:
            return (self.M * self.K + self.N * self.K + self.M * self.N) * size
        tensors = 2 if self.kernel == "copy" else 3
        return float(tensors * self.M * self.N * size)

    @property
    def shape(self) -> str:
        if self.is_attention:
            mask = " causal" if self.causal else ""
            dims = f"B{self.B} H{self.H} S{self.S} D{self.D}{mask}"
        else:
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
    compiled_ms: float | None = None  # torch.compile of the baseline, where a case has one
    input_sets: int = 1  # copies of the inputs the timing went through in turn

    @property
    def ratio(self) -> float | None:
        """Baseline time over croqtile time: above 1 means croqtile is faster."""
        if self.croqtile_ms and self.baseline_ms:
            return self.baseline_ms / self.croqtile_ms
        return None

    @property
    def compiled_ratio(self) -> float | None:
        """The compiled baseline's time over croqtile's."""
        if self.croqtile_ms and self.compiled_ms:
            return self.compiled_ms / self.croqtile_ms
        return None

    def tflops(self, ms: float | None) -> float | None:
        return self.case.flops / ms * 1e-9 if ms and self.case.flops else None

    def gbps(self, ms: float | None) -> float | None:
        return self.case.bytes / ms * 1e-6 if ms else None


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
    """A case ready to run: ``ours`` writes ``output`` (or, when ``output`` is None,
    returns the result); ``reference`` is float64. ``compiled`` is a second baseline timed
    beside the first (``torch.compile`` of it); ``tolerance`` replaces the kernel's entry
    of ``TOLERANCES``."""

    ours: Callable[[], object]
    baseline: Callable[[], object]
    output: torch.Tensor | None
    reference: Callable[[], torch.Tensor]
    compiled: Callable[[], object] | None = None
    tolerance: float | None = None
    rotation: Rotation | None = None  # what is timed, when not these calls themselves


@dataclass(frozen=True)
class Rotation:
    """The calls a case is timed with when its inputs would stay in the L2 cache between
    calls: the same calls as its `Prepared`'s, each over ``sets`` copies of the inputs in
    turn (`in_turn`)."""

    sets: int
    ours: Callable[[], object]
    baseline: Callable[[], object]
    compiled: Callable[[], object] | None = None


@dataclass(frozen=True)
class Program:
    """A kernel's source text and where it came from: ``name``, relative to its checkout,
    names it in diagnostics; ``revision`` is the file's last commit ("" if unknown). Never
    a machine path: both are written into the results."""

    text: str
    name: str
    revision: str = ""

    @property
    def origin(self) -> str:
        return f"{self.name} at {self.revision}" if self.revision else self.name


class KernelFileError(Exception):
    """A bench kernel is missing from the installed package: a message for the command
    line, not a traceback."""


def kernel_program(name: str, kernel_dir: Path | None = None) -> Program:
    """The bench kernel ``name`` (``"gemm.co"``) from ``kernel_dir`` (by default the
    package's own ``kernels`` folder), named ``croqtile/bench/kernels/<name>``."""
    path = (kernel_dir or KERNEL_DIR) / name
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise KernelFileError(f"cannot read the bench kernel {name} ({path}: {reason}); "
                              "the croqtile installation is incomplete: reinstall it") from None
    return Program(text, f"{KERNEL_ORIGIN}/{name}")


KernelLoader = Callable[[Case], Any]  # returns the croqtile Function for a case
Preparer = Callable[[Case, Any, str], Prepared]  # (case, the Function, device)


# Launch options used when not autotuning: the compiler's own defaults (two warpgroups
# for a 128 x 256 f32 accumulator, a persistent launch for MMA kernels).
DEFAULT_OPTIONS: Mapping[str, Mapping[str, Any]] = {}
KERNEL_FILES = {"gemm": "gemm.co", "gemm_fp8": "gemm_fp8.co", "copy": "copy.co",
                "add": "add.co"}
KERNEL_NAMES = {"gemm": "gemm", "gemm_fp8": "gemm_fp8", "copy": "copy2d", "add": "add2d"}


def kernel_loader(autotune: str = "none", defines: Mapping[str, Any] | None = None,
                  kernel_dir: Path | None = None) -> KernelLoader:
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
            program = kernel_program(KERNEL_FILES[case.kernel], kernel_dir)
            mod = croqtile.compile(program.text, defines=extra, filename=program.name,
                                   **options)
            cache[key] = getattr(mod, KERNEL_NAMES[case.kernel])
        return cache[key]

    return load


def random_tensors(case: Case, device: str, seed: int = 0
                   ) -> Callable[..., torch.Tensor]:
    """``randn(*shape)``: standard normal values of the case's element type, the same for
    every run of the case."""
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = DTYPES[case.dtype]

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device=device).to(dtype)

    return randn


def input_sets(case: Case, device: str) -> int:
    """How many copies of a case's inputs its timing goes through in turn: enough to span
    `L2_SPAN` times the GPU's L2 cache, so that every call reads its operands from device
    memory, as a model's decode step reads each layer's weights once. Replaying one set
    partly times the cache instead (H200, the o projection at M = 64: a 33.5 MB weight and
    a 60 MB L2; one set replayed, three input tensors of that shape timed up to 7 % apart
    in one process, and croqtile's ratio to cuBLAS came out 0.90-0.93; over copies that
    span 4x the L2, 1.00-1.01). 1 off CUDA."""
    if not str(device).startswith("cuda"):
        return 1
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    return max(1, math.ceil(L2_SPAN * l2 / case.bytes))


def in_turn(calls: Sequence[Callable[[], object]]) -> Callable[[], object]:
    """A call that makes the next of ``calls`` each time (round and round)."""
    turn = itertools.cycle(calls)
    return lambda: next(turn)()


def prepare_gemm(case: Case, fn: Any, device: str, sets: int = 1) -> Prepared:
    """y[M, N] = x[M, K] @ w[N, K]^T written by ``fn(x, w, y)``, beside ``torch.matmul``;
    with ``sets`` > 1, timed over that many copies of x and w in turn (the first set is
    the one checked)."""
    randn = random_tensors(case, device)
    inputs = [(randn(case.M, case.K), randn(case.N, case.K)) for _ in range(sets)]
    a, b = inputs[0]
    out = torch.empty((case.M, case.N), dtype=DTYPES[case.dtype], device=device)
    rotation = None if sets == 1 else Rotation(
        sets, in_turn([functools.partial(fn, x, w, out) for x, w in inputs]),
        in_turn([functools.partial(torch.matmul, x, w.T) for x, w in inputs]))
    return Prepared(lambda: fn(a, b, out), lambda: torch.matmul(a, b.T), out,
                    lambda: a.double() @ b.double().T, tolerance=TOLERANCES["gemm"],
                    rotation=rotation)


def prepare(case: Case, fn: Any, device: str) -> Prepared:
    """Inputs, the croqtile call, the torch baseline and the float64 reference of a case
    of the bench kernels."""
    randn = random_tensors(case, device)
    dtype = DTYPES[case.dtype]
    if case.kernel == "gemm":
        return prepare_gemm(case, fn, device)
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
    diff = float((out.double() - ref).norm().item())
    scale = float(ref.norm().item())
    return diff / scale if scale else diff


def poison(out: torch.Tensor) -> None:
    """NaN everywhere, so that an element the kernel never writes fails the check."""
    out.fill_(float("nan"))


def check(case: Case, prepared: Prepared) -> tuple[bool, float | None, str]:
    """Run croqtile once on a poisoned output; (ok, relative error, note). A kernel that
    returns its result allocates it itself (zero-filled), so only that cannot be poisoned:
    an element it never writes reads 0 and counts through the error only."""
    if prepared.output is not None:
        poison(prepared.output)
    try:
        result = prepared.ours()
    except Exception as exc:  # a kernel that fails to run is a failed row, not a crash
        return False, None, describe_error(exc)
    out = prepared.output if prepared.output is not None else result
    if not isinstance(out, torch.Tensor):
        return False, None, f"the kernel returned {type(out).__name__}, not a tensor"
    err = relative_error(out, prepared.reference())
    tolerance = (prepared.tolerance if prepared.tolerance is not None
                 else TOLERANCES[case.kernel])
    ok = err <= tolerance  # False for NaN
    return ok, err, "" if ok else "wrong result"


def default_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn`` over Triton's own warm-up and repetitions."""
    from triton.testing import do_bench

    return float(do_bench(fn, return_mode="median"))


def graph_timer(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn`` replayed from a CUDA graph (``do_bench_cudagraph``):
    the device time alone, as in a captured decode step, where no host path is left to
    hide. Kernels shorter than their host path (decode shapes) measure their own time
    here, not the host's."""
    from triton.testing import do_bench_cudagraph

    return float(do_bench_cudagraph(fn, return_mode="median"))


TIMERS: dict[str, Timer] = {"events": default_timer, "graph": graph_timer}


def host_us_per_call(fn: Callable[[], object], calls: int = 50, busy_cycles: int = 0
                     ) -> float:
    """Wall time per call of a loop of ``calls`` calls that waits for none of them (the
    host's share of a call while the GPU keeps up), in microseconds. ``busy_cycles``:
    GPU cycles of a sleep queued first, so that every call only queues its kernels."""
    torch.cuda.synchronize()
    if busy_cycles:
        torch.cuda._sleep(busy_cycles)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def time_interleaved(fns: Sequence[Callable[[], object]], timer: Timer, reps: int
                     ) -> list[float]:
    """Median of ``reps`` medians each, interleaved a, b, c, a, b, c...: every function
    sees the same clocks and temperature."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, mine in zip(fns, times):
            mine.append(timer(fn))
    return [statistics.median(mine) for mine in times]


def time_pair(ours: Callable[[], object], baseline: Callable[[], object],
              timer: Timer, reps: int) -> tuple[float, float]:
    """``time_interleaved`` of croqtile and its baseline."""
    mine, theirs = time_interleaved((ours, baseline), timer, reps)
    return mine, theirs


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
    # tuned, and the source's own values won: say so rather than leave the cell empty
    return ";".join(parts) or "defaults"


def run_case(case: Case, load: KernelLoader, device: str, timer: Timer | None,
             reps: int, host_timer: Timer | None = None,
             prepare: Preparer = prepare) -> Row:
    """Check one case and, when it is correct and a timer is given, time it. A failure
    (compile error, out of memory, an unsupported baseline) becomes a row with a note, so
    that one bad case does not lose the rest of a long sweep."""
    try:
        fn = load(case)
    except Exception as exc:
        return Row(case, False, None, note="compile: " + describe_error(exc))
    try:
        prepared = prepare(case, fn, device)
        ok, err, note = check(case, prepared)
    except Exception as exc:
        return Row(case, False, None, note="check: " + describe_error(exc))
    if not ok or timer is None:
        return Row(case, ok, err, config=config_string(fn), note=note)
    timed = prepared.rotation or prepared
    sides = [timed.ours, timed.baseline]
    if timed.compiled is not None:
        try:  # compiled (and warmed up) here, outside the timing
            timed.compiled()
            sides.append(timed.compiled)
        except Exception as exc:  # the other baseline is still timed
            note = "torch.compile: " + describe_error(exc)
    try:
        ours_ms, base_ms, *compiled = time_interleaved(sides, timer, reps)
    except Exception as exc:  # correct, but not timed: still ok
        return Row(case, ok, err, config=config_string(fn), note="timing: " + describe_error(exc))
    row = Row(case, ok, err, ours_ms, base_ms, config_string(fn), note,
              compiled_ms=compiled[0] if compiled else None,
              input_sets=prepared.rotation.sets if prepared.rotation else 1)
    if host_timer is None:
        return row
    return dataclasses.replace(row, croqtile_host_us=host_timer(prepared.ours),
                               baseline_host_us=host_timer(prepared.baseline))


def describe_error(exc: BaseException) -> str:
    """The first line of an exception, short enough for a CSV cell."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:200]


def run_cases(cases: Sequence[Case], *, device: str = "cuda", reps: int = 3,
              timer: Timer | None = None, load: KernelLoader | None = None,
              autotune: str = "none", defines: Mapping[str, Any] | None = None,
              progress: TextIO | None = None, host_timer: Timer | None = None,
              prepare: Preparer = prepare,
              after_case: Callable[[list[Row]], object] | None = None) -> list[Row]:
    """Run every case. Without a ``timer``, CUDA uses ``do_bench`` and CPU only checks;
    ``host_timer`` (by default ``host_us_per_call`` on CUDA) fills the host-time columns.
    ``load`` and ``prepare`` default to those of the bench kernels. ``after_case`` gets
    the rows so far after each case (to save them: a run cut short keeps its rows)."""
    if timer is None and device != "cpu":
        timer = default_timer
    if host_timer is None and device == "cuda" and timer in TIMERS.values():
        host_timer = host_us_per_call
    load = load or kernel_loader(autotune, defines)
    rows: list[Row] = []
    for i, case in enumerate(cases):
        if progress is not None:
            show_progress(progress, i, len(cases), case)
        rows.append(run_case(case, load, device, timer, reps, host_timer, prepare))
        if after_case is not None:
            after_case(rows)
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


__all__ = [
    "Case", "Row", "Prepared", "square_cases", "llm_cases", "fp8_cases", "memory_cases",
    "tiny_cases", "quick_cases", "full_cases", "run_cases", "run_case", "kernel_loader",
    "prepare", "prepare_gemm", "input_sets", "in_turn", "Rotation", "check", "time_pair",
    "time_interleaved", "progress_line", "kernel_program", "KernelFileError", "Program",
]
