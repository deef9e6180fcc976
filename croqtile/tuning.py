"""Autotuning: pick compile options and ``#define`` values per shape, under a time budget.

``croqtile.compile(src, autotune="quick" | "full", tunables=..., tune_budget_s=...)`` returns
functions that, on the first call with a new *shape bucket* (each dimension rounded up to
a power of two or 1.5 times one), compile every candidate configuration, run it on copies
of the arguments, check that it computes what the default configuration computes, time
it, and keep the fastest. Candidates within 3 % of the fastest are timed twice more, in
turn, and the median of each one's timings decides (one timing drifts with the GPU's
clocks). The choice is stored as JSON in the cache directory (``CROQTILE_CACHE_DIR``),
keyed by the source, the function, the GPU, the shape bucket and the versions of
croqtile, Triton and torch, so later processes skip the search. Then the call runs with
that choice.

Candidates the checker rejects (a shared-memory budget, an MMA shape) are pruned before
anything is compiled by Triton; candidates that Triton cannot compile or that compute a
different result are pruned with the reason. Knobs given as fixed values (``num_warps=8``,
``defines={"TILE_M": 64}``) are never searched; with every knob fixed nothing is tuned.

Timing needs a GPU: on CPU tensors (Triton's interpreter) the default configuration runs
and a warning says that nothing was tuned.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch

from . import settings
from .errors import ArgumentError, CompileError

MODES = ("none", "quick", "full")

# The compile options a search may vary, with their candidate values per mode.
_OPTION_SPACE: dict[str, dict[str, tuple[Any, ...]]] = {
    "quick": {"num_warps": (4, 8), "num_stages": (3, 4), "persistent": (False, True)},
    "full": {"num_warps": (4, 8), "num_stages": (2, 3, 4, 5), "persistent": (False, True),
             "group_m": (1, 8)},
}
_TUNABLE_OPTIONS = ("num_warps", "num_stages", "persistent", "group_m", "flatten",
                    "warp_specialize", "descriptors", "epilogue_split", "stream_k",
                    "split_tiles", "backend")
# Time budget of one search (seconds), per mode.
_BUDGET = {"quick": 30.0, "full": 300.0}
# Candidates timed within this share of the fastest are timed again, in turn, this many
# rounds (at most _FINALISTS of them), and the median decides: one timing each drifts with
# the GPU's clocks and temperature between candidates, and the fastest single timing of
# many favours a lucky one.
_FINAL_MARGIN = 0.03
_FINALISTS = 3
_FINAL_ROUNDS = 2
# In "full" mode, #define constants named like tile sizes are searched at half and twice
# their value too (powers of two between 16 and 256).
_TILE_NAME = re.compile(r"(TILE|BLOCK|WARP)_?[MNK]?\b|_(M|N|K)$")
_DEFINE_LINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+(\S.*?)\s*$", re.MULTILINE)

Timer = Callable[[Callable[[], Any]], float]


@dataclass(frozen=True)
class Config:
    """One point of the search: ``#define`` values and compile options."""

    defines: tuple[tuple[str, Any], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"defines": dict(self.defines), **dict(self.options)}

    def describe(self) -> str:
        """The config as the arguments a user pastes into ``croqtile.compile``."""
        parts = [f"defines={dict(self.defines)!r}"] if self.defines else []
        parts += [f"{name}={value!r}" for name, value in self.options]
        return ", ".join(parts) or "(the defaults)"


@dataclass(frozen=True)
class Space:
    """The candidates of a search: the product of ``knobs`` (name -> values, the first value
    the default), or an ``explicit`` list of configurations."""

    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    explicit: tuple[Config, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.knobs and not self.explicit

    def configs(self) -> list[Config]:
        """Every candidate: an explicit list in its order; a product with the all-defaults
        combination first, then by how many knobs differ from the defaults (so a search cut
        short by its budget has tried the nearest)."""
        if self.explicit:
            return list(self.explicit)
        names = [name for name, _ in self.knobs]
        combos = list(itertools.product(*(values for _, values in self.knobs)))
        combos.sort(key=lambda combo: sum(i != 0 for i in _indices(self.knobs, combo)))
        return [_config(names, combo) for combo in combos]

    def key(self) -> list[Any]:
        """A JSON-able description (part of the cache key)."""
        return [[[n, list(v)] for n, v in self.knobs], [c.as_dict() for c in self.explicit]]


def _indices(knobs: Sequence[tuple[str, tuple[Any, ...]]], combo: Sequence[Any]) -> list[int]:
    return [values.index(v) for (_, values), v in zip(knobs, combo)]


def _config(names: Sequence[str], combo: Sequence[Any]) -> Config:
    defines = tuple((n, v) for n, v in zip(names, combo) if n not in _TUNABLE_OPTIONS)
    options = tuple((n, v) for n, v in zip(names, combo) if n in _TUNABLE_OPTIONS)
    return Config(defines, options)


def source_defines(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines of a source (the value as written)."""
    return {m.group(1): m.group(2) for m in _DEFINE_LINE.finditer(text)}


Tunables = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]


def search_space(mode: str, text: str, tunables: Tunables | None,
                 fixed_defines: Mapping[str, Any], fixed_options: Mapping[str, Any]) -> Space:
    """The candidates of a ``mode`` search. ``tunables`` replaces the default knobs when
    given: a mapping name -> candidate values (every combination), or a list of mappings
    name -> value (exactly these configurations); names are tunable compile options or
    ``#define``s of the source. Values the caller fixed are not searched."""
    defined = source_defines(text)
    fixed = set(fixed_options) | set(fixed_defines)

    def check(name: str) -> None:
        if name not in _TUNABLE_OPTIONS and name not in defined:
            raise ValueError(f"tunable {name!r} is neither a tunable compile option "
                             f"({', '.join(_TUNABLE_OPTIONS)}) nor a #define of the source")

    if tunables is not None and not isinstance(tunables, Mapping):
        configs: list[Config] = []
        for entry in tunables:
            if not isinstance(entry, Mapping):
                raise ValueError("tunables: expected a mapping name -> values, or a list of "
                                 f"mappings name -> value; got an item {entry!r}")
            for name in entry:
                check(name)
            names = [n for n in entry if n not in fixed]
            config = _config(names, [entry[n] for n in names])
            if config not in configs:
                configs.append(config)
        if not configs:
            raise ValueError("tunables: the list of configurations is empty")
        return Space(explicit=tuple(configs)) if configs != [Config()] else Space()
    knobs: dict[str, tuple[Any, ...]] = {}
    if tunables:
        for name, values in tunables.items():
            values = tuple(values)
            if not values:
                raise ValueError(f"tunable {name!r} has no candidate values")
            check(name)
            knobs[name] = values
    else:
        knobs.update(_OPTION_SPACE[mode])
        if mode == "full":
            for name, value in defined.items():
                candidates = _tile_candidates(name, value)
                if candidates:
                    knobs[name] = candidates
    return Space(tuple((n, v) for n, v in knobs.items() if n not in fixed))


def _tile_candidates(name: str, value: str) -> tuple[int, ...]:
    if not _TILE_NAME.search(name) or not value.isdigit():
        return ()
    size = int(value)
    if size < 16 or size & (size - 1):
        return ()
    return tuple(v for v in (size, size // 2, size * 2) if 16 <= v <= 256)


def shape_bucket(dims: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Each dimension rounded up to the next power of two or 1.5 times one (..., 2048,
    3072, 4096, 6144, ...): shapes in one bucket share a choice. Half-octave steps keep a
    3072^3 GEMM from choosing for a 4096^3 one (their best tiles differ)."""
    return tuple((name, _round_up(int(value))) for name, value in sorted(dims.items()))


def _round_up(value: int) -> int:
    power = 1 << max(0, value - 1).bit_length()  # the next power of two
    half_step = power // 2 + power // 4  # 1.5 times the power below
    return half_step if power >= 4 and value <= half_step else power


# ------------------------------------------------------------------------------ the cache


def _versions() -> dict[str, str]:
    import triton

    from . import __version__

    return {"croqtile": __version__, "triton": triton.__version__, "torch": torch.__version__}


def cache_key(text: str, function: str, fixed: Mapping[str, Any], space: Space,
              device: str, bucket: Sequence[tuple[str, int]]) -> str:
    payload = json.dumps({"source": text, "function": function, "fixed": fixed,
                          "space": space.key(), "device": device,
                          "bucket": list(bucket), "versions": _versions()},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def _cache_path(key: str) -> Path:
    path = settings.cache_dir() / "tuning"
    path.mkdir(parents=True, exist_ok=True)
    return path / f"{key}.json"


def load_choice(key: str) -> Config | None:
    try:
        data = json.loads(_cache_path(key).read_text())
        return Config(tuple(sorted(data["config"]["defines"].items())),
                      tuple((k, v) for k, v in data["config"].items() if k != "defines"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or unreadable: search again


def save_choice(key: str, record: dict[str, Any]) -> None:
    path = _cache_path(key)
    tmp = path.with_suffix(f".{id(record)}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


# ------------------------------------------------------------------------------ timing


def gpu_timer(fn: Callable[[], Any]) -> float:
    """Median milliseconds of ``fn`` on the GPU (short: a search times many candidates).
    The 100 ms warm-up of each candidate brings a large GEMM to the GPU's sustained power
    limit, where it runs from then on (an H200 lowers its clocks within 100 ms of full
    load; candidates timed before that rank differently)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=100, rep=40, return_mode="median"))


def graph_timer(fn: Callable[[], Any]) -> float:
    """Median milliseconds of ``fn`` per call, replayed from a CUDA graph of many calls:
    no host time between the kernels, which a short kernel's `gpu_timer` measures too.
    Ten replays of 10 ms: a search costs about what `gpu_timer` costs (on the H200 the
    finalists' repeated graph timings agreed within 1-4 %)."""
    from triton.testing import do_bench_cudagraph

    return float(do_bench_cudagraph(fn, rep=10, return_mode="median"))


class SearchTimer:
    """The GPU timer of one search. Its first timing (of the first candidate) uses
    `gpu_timer`; when that is under ``short_ms``, every candidate of the search is timed
    with `graph_timer` instead. A call of a few tens of microseconds spends about as long
    on the host as on the GPU, so `gpu_timer` then measures the host's speed of the moment
    as much as the kernel: on the H200 such searches chose configurations 1.3-2.5x slower
    than the best in runs where all timings of a stretch came out slower (bf16 512^3 to
    2048^3). Graph replay keeps the inputs in L2 between calls, alike for every candidate."""

    def __init__(self, long: Timer | None = None, short: Timer | None = None,
                 short_ms: float = 0.1) -> None:
        self.long, self.short, self.short_ms = long or gpu_timer, short or graph_timer, short_ms
        self.graphs: bool | None = None  # decided by the first timing
        self.uncaptured = 0  # candidates timed without a graph: their capture failed

    def __call__(self, fn: Callable[[], Any]) -> float:
        if self.graphs is None:
            ms = self.long(fn)
            self.graphs = ms < self.short_ms
            if not self.graphs:
                return ms
        elif not self.graphs:
            return self.long(fn)
        try:
            return self.short(fn)
        except Exception:  # a candidate that cannot be captured in a graph (a host sync)
            self.uncaptured += 1
            return self.long(fn)

    @property
    def method(self) -> str:
        if not self.graphs:
            return "do_bench"
        return "cuda graph" + (f" ({self.uncaptured} with do_bench)" if self.uncaptured else "")


def same_result(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether a candidate's output matches the default's: exact for integers, a relative
    error of 1e-2 for floating point (accumulation order differs between tile shapes)."""
    if not got.dtype.is_floating_point:
        return bool(torch.equal(got, want))
    a, b = got.double(), want.double()
    if not torch.equal(torch.isnan(a), torch.isnan(b)):
        return False
    a, b = torch.nan_to_num(a), torch.nan_to_num(b)
    scale = b.norm().item()
    return (a - b).norm().item() <= 1e-2 * max(scale, 1e-30)


# ------------------------------------------------------------------------------ the function


Compiler = Callable[[Config], Any]  # a config -> a croqtile Function (raises CompileError)


@dataclass
class TuneReport:
    """What one search did (also written to the cache file)."""

    function: str
    bucket: tuple[tuple[str, int], ...]
    device: str
    best: Config
    best_ms: float
    default_ms: float | None
    tried: int = 0
    pruned: list[tuple[str, str]] = field(default_factory=list)  # (config, reason)
    timings: list[tuple[dict[str, Any], float]] = field(default_factory=list)  # (config, ms)
    # the final round: (config, every timing of it), when candidates came close
    finals: list[tuple[dict[str, Any], list[float]]] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = True  # False when the budget ran out first
    timing: str = ""  # how candidates were timed, when the GPU timed them

    def record(self) -> dict[str, Any]:
        return {"function": self.function, "bucket": dict(self.bucket), "device": self.device,
                "config": self.best.as_dict(), "time_ms": self.best_ms,
                "default_ms": self.default_ms, "tried": self.tried,
                "pruned": [list(p) for p in self.pruned], "seconds": self.seconds,
                "timings": [[config, ms] for config, ms in self.timings],
                "finals": [[config, times] for config, times in self.finals],
                "complete": self.complete, "timing": self.timing, "versions": _versions()}


class TunedFunction:
    """A ``__co__`` function whose configuration is chosen per shape bucket (see module
    docstring). Callable like ``croqtile.Function``."""

    def __init__(self, name: str, text: str, mode: str, space: Callable[[dict[str, int]], Space],
                 compiler: Compiler, fixed: Mapping[str, Any], budget_s: float | None) -> None:
        self.name = name
        self.mode = mode
        self.space_for = space  # the shape bucket -> the candidates
        self.budget_s = budget_s if budget_s is not None else _BUDGET[mode]
        self.timer: Timer | None = None  # None: the GPU timer on CUDA, no tuning on the CPU
        self.verbose = True
        self.cache = True  # False: search every bucket afresh, store nothing (calibration)
        self.reports: list[TuneReport] = []
        self._text = text
        self._compiler = compiler
        self._fixed = dict(fixed)
        self._functions: dict[Config, Any] = {}
        self._choices: dict[tuple[Any, ...], Config] = {}
        # warm calls: the function chosen for arguments of these shapes/dtypes/devices
        self._by_signature: dict[tuple[Any, ...], tuple[Config, Any]] = {}
        self._default = Config()
        self._last: Config | None = None
        self._warned_cpu = False
        default = self._function(self._default)  # (compile errors surface at compile())
        self._sign: Callable[[Sequence[Any]], Any] = getattr(default, "_sign", _signature)

    # ----------------------------------------------------------- Function's interface
    @property
    def params(self) -> list[str]:
        return self._function(self._default).params

    @property
    def triton_source(self) -> str:
        """The generated module of the configuration the last call used."""
        return self._function(self._last or self._default).triton_source

    @property
    def tuned_config(self) -> dict[str, Any] | None:
        """The configuration the last call ran (``{"defines": {...}, "num_warps": ...}``),
        None before the first call."""
        return None if self._last is None else self._last.as_dict()

    @property
    def specialize_on(self) -> tuple[str, ...]:
        return self._function(self._default).specialize_on

    def __call__(self, *args: Any) -> Any:
        # the compiled functions' own signature (one computation serves both lookups)
        signature = self._sign(args)
        known = self._by_signature.get(signature) if signature is not None else None
        if known is None:
            default = self._function(self._default)
            _, bound = default._bind(args)  # argument errors are reported before any tuning
            config = self._choose(bound, args)
            known = (config, self._function(config))
            if signature is not None and len(self._by_signature) < 4096:  # (one per shape)
                self._by_signature[signature] = known
        self._last = known[0]
        # the chosen function checks the arguments itself
        call = getattr(known[1], "call_signed", None)
        return known[1](*args) if call is None else call(signature, args)

    def __repr__(self) -> str:
        return f"<croqtile.TunedFunction {self.name} autotune={self.mode!r}>"

    # ----------------------------------------------------------- the search
    def _function(self, config: Config) -> Any:
        fn = self._functions.get(config)
        if fn is None:
            fn = self._compiler(config)
            self._functions[config] = fn
        return fn

    def _choose(self, bound: Any, args: Sequence[Any]) -> Config:
        bucket = shape_bucket(bound.dims)
        device = _device_name(bound.device)
        memo = (bucket, device)
        if memo in self._choices:
            return self._choices[memo]
        space = self.space_for(dict(bucket))
        if space.empty:
            self._choices[memo] = self._default
            return self._default
        timer = self.timer
        if timer is None and bound.device.type == "cuda":
            timer = SearchTimer()
        if timer is None:
            if not self._warned_cpu:
                warnings.warn(f"croqtile: {self.name}: autotune={self.mode!r} needs a CUDA "
                              "device to time candidates; running the default configuration",
                              RuntimeWarning, stacklevel=3)
                self._warned_cpu = True
            return self._default
        key = cache_key(self._text, self.name, self._fixed, space, device, bucket)
        choice = load_choice(key) if self.cache else None
        if choice is None:
            report = self._search(space, args, timer, bucket, device)
            if self.cache:
                save_choice(key, report.record())
            self.reports.append(report)
            choice = report.best
        self._choices[memo] = choice
        return choice

    def _search(self, space: Space, args: Sequence[Any], timer: Timer, bucket: Any,
                device: str) -> TuneReport:
        start = time.perf_counter()
        configs = space.configs()
        report = TuneReport(self.name, bucket, device, self._default, math.inf, None)
        shape = " ".join(f"{n}={v}" for n, v in bucket)
        if self.verbose and not sys.stderr.isatty():  # a log: one line now, one at the end
            print(f"croqtile: tuning {self.name} for {shape}: {len(configs)} candidates, "
                  f"budget {self.budget_s:g} s", file=sys.stderr)
        reference: list[torch.Tensor] | None = None
        timed: list[tuple[Config, float]] = []
        for i, config in enumerate(configs):
            if time.perf_counter() - start > self.budget_s and report.best_ms < math.inf:
                report.complete = False
                break
            self._progress(f"tuning {self.name} [{shape}] {i + 1}/{len(configs)} "
                           f"best {report.best_ms:.4g} ms")
            outcome = self._try(config, args, timer, reference)
            if isinstance(outcome, str):
                report.pruned.append((config.describe(), outcome))
                continue
            ms, outputs = outcome
            timed.append((config, ms))
            if reference is None:
                reference = outputs
                report.default_ms = ms if config == self._default else None
            if ms < report.best_ms:
                report.best, report.best_ms = config, ms
        if report.best_ms == math.inf:
            raise RuntimeError(f"croqtile: {self.name}: no configuration of the autotune search "
                               f"ran; reasons: {report.pruned[:3]}")
        report.tried = len(timed)
        report.timings = [(config.as_dict(), ms) for config, ms in timed]
        self._final_round(report, timed, args, timer)
        report.timing = getattr(timer, "method", "")
        report.seconds = time.perf_counter() - start
        self._progress(None)
        self._announce(report)
        return report

    def _final_round(self, report: TuneReport, timed: Sequence[tuple[Config, float]],
                     args: Sequence[Any], timer: Timer) -> None:
        """Time the candidates that came within ``_FINAL_MARGIN`` of the fastest again, in
        turn, and choose by the median of each one's timings."""
        limit = report.best_ms * (1 + _FINAL_MARGIN)
        close = sorted((t for t in timed if t[1] <= limit), key=lambda t: t[1])[:_FINALISTS]
        if len(close) < 2:
            return
        copies = _copies(args)  # (shared: a candidate's writes do not change its time)
        runs = [functools.partial(self._function(config), *copies) for config, _ in close]
        times = [[ms] for _, ms in close]
        for _ in range(_FINAL_ROUNDS):
            for run, mine in zip(runs, times):
                mine.append(timer(run))
        report.finals = [(config.as_dict(), mine) for (config, _), mine in zip(close, times)]
        medians = [statistics.median(mine) for mine in times]
        best = medians.index(min(medians))
        report.best, report.best_ms = close[best][0], medians[best]

    def _try(self, config: Config, args: Sequence[Any], timer: Timer,
             reference: list[torch.Tensor] | None) -> tuple[float, list[torch.Tensor]] | str:
        """Time ``config`` on copies of ``args``; a string says why it was pruned."""
        try:
            fn = self._function(config)
        except CompileError as err:
            return "rejected by the checker: " + "; ".join(
                f"{d.code} {d.message}" for d in err.diagnostics[:2])
        copies = _copies(args)
        try:
            result = fn(*copies)
        except ArgumentError as err:
            return f"not valid for this shape: {err}"
        except Exception as err:  # Triton could not compile or run this candidate
            return f"failed: {type(err).__name__}: {str(err)[:200]}"
        # what the call wrote (its tensor arguments) and what it returned
        outputs = [c for c in copies if isinstance(c, torch.Tensor)]
        if isinstance(result, torch.Tensor):
            outputs.append(result)
        elif result is not None:
            outputs.append(torch.tensor(result))
        if reference is not None and not all(
                same_result(got, want) for got, want in zip(outputs, reference)):
            return "computes a different result than the first configuration"

        def run() -> None:
            fn(*copies)

        return timer(run), outputs

    def _progress(self, text: str | None) -> None:
        if not self.verbose or not sys.stderr.isatty():
            return
        sys.stderr.write("\r\033[K" + (f"croqtile: {text}" if text else ""))
        sys.stderr.flush()

    def _announce(self, report: TuneReport) -> None:
        if not self.verbose:
            return
        shape = " ".join(f"{n}<={v}" for n, v in report.bucket)
        gain = (f", {report.default_ms / report.best_ms:.2f}x the default"
                if report.default_ms else "")
        budget = "" if report.complete else " (time budget reached)"
        again = f", {len(report.finals)} timed again" if report.finals else ""
        if report.timing.startswith("cuda graph"):
            again += ", timed in CUDA graphs" + report.timing.removeprefix("cuda graph")
        print(f"croqtile: tuned {self.name} for {shape} on {report.device}: "
              f"{report.best_ms:.4g} ms{gain} with {report.best.describe()} "
              f"[{report.tried} run, {len(report.pruned)} pruned{again}, {report.seconds:.1f} s"
              f"{budget}]", file=sys.stderr)


def _copies(args: Sequence[Any]) -> list[Any]:
    """The arguments with each tensor cloned (candidates run on copies, not the user's)."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _signature(args: Sequence[Any]) -> tuple[Any, ...]:
    """What selects a configuration: tensor shapes, dtypes and devices, scalar types."""
    return tuple((a.shape, a.dtype, a.device) if isinstance(a, torch.Tensor) else type(a)
                 for a in args)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def make_tuned(names: Iterable[str], text: str, mode: str,
               tunables: Tunables | Callable[[dict[str, int]], Tunables] | None,
               defines: Mapping[str, Any],
               options: Mapping[str, Any], budget_s: float | None,
               compile_config: Callable[[Config], Mapping[str, Any]]) -> list[TunedFunction]:
    """One ``TunedFunction`` per function name; ``compile_config(config)`` compiles the
    whole source for a config and returns its functions by name."""
    if mode not in MODES or mode == "none":
        raise ValueError(f"autotune={mode!r}: expected one of {', '.join(map(repr, MODES))}")
    if callable(tunables):
        chooser = tunables

        def space(bucket: dict[str, int]) -> Space:
            return search_space(mode, text, chooser(bucket), defines, options)
    else:
        static = search_space(mode, text, tunables, defines, options)

        def space(bucket: dict[str, int]) -> Space:
            return static
    modules: dict[Config, Mapping[str, Any]] = {}

    def compiler_for(name: str) -> Compiler:
        def compile_one(config: Config) -> Any:
            if config not in modules:
                with warnings.catch_warnings():
                    if config != Config():  # the default compile has shown the warnings
                        warnings.simplefilter("ignore")
                    modules[config] = compile_config(config)
            return modules[config][name]
        return compile_one

    fixed = {"defines": dict(defines), **dict(options)}
    return [TunedFunction(name, text, mode, space, compiler_for(name), fixed, budget_s)
            for name in names]
