"""Autotuning: pick compile options and ``#define`` values per shape, under a time budget.

``croqtile.compile(src, autotune="quick" | "full", tunables=..., tune_budget_s=...)`` returns
functions that, on the first call with a new *shape bucket* (each dimension rounded up to
a power of two or 1.5 times one), compile candidate configurations, run each on copies
of the arguments, check that it computes what the default configuration computes, time
it, and keep the fastest. Without ``tunables=`` the candidates come from a search that
starts at the untuned configuration and changes one thing at a time: the ``#define``s the
program uses as tile extents (found by the checker, whatever their names, see
``croqtile.tuning.tile_defines``) over values chosen for the shape, the launch options, and
stream-K where the output tiles leave SMs idle (``croqtile.tuning.space``).

The default configuration -- the written defines and the default options, what a call
without ``autotune`` runs -- is always timed first (its result is the reference) and
always takes part in the final round: the candidates within 3 % of the fastest (three
at most) and the default are timed twice more, in turn, and the median of each one's
timings decides (one timing drifts with the GPU's clocks). A candidate replaces the
default only when its median is at least 1 % below the default's, so tuning never
returns something slower than not tuning, within the noise of one run. The choice, and
what the default measured, are stored as JSON in the cache directory
(``CROQTILE_CACHE_DIR``), keyed by the source, the function, the GPU, the shape bucket
and the versions of croqtile, Triton and torch, so later processes skip the search.

Candidates the checker rejects (a shared-memory budget, an MMA shape) or the lowering
refuses (CQ0705: stream-K for a kernel that cannot be split) are pruned before anything
is compiled by Triton; candidates that Triton cannot compile or that compute a
different result are pruned with the reason. Knobs given as fixed values
(``num_warps=8``, ``defines={"TILE_M": 64}``) are never searched; with every knob fixed
nothing is tuned.

Timing needs a GPU: on CPU tensors (Triton's interpreter) the default configuration runs
and a warning says that nothing was tuned.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import torch

from .. import settings
from ..backends.triton.launcher import device_scope, publish, sm_count
from ..runtime.binding import grad_error, positional, requires_grad
from ..errors import ArgumentError, CompileError
from ..runtime.lru import DEFAULT_CACHE_SIZE, LRU, CacheInfo
from .tile_defines import TileProbe
from .space import (MODES, Config, Plan, Space, Tunables, default_space, search_space,
                           shape_bucket, source_defines)

if TYPE_CHECKING:
    from ..runtime.driver import CompiledFunction
    from ..runtime.module import Function

__all__ = ["MODES", "Config", "Space", "Tunables", "TunedFunction", "SearchTimer", "TuneReport",
           "make_tuned", "search_space", "shape_bucket", "source_defines"]

# Time budget of one search (seconds), per mode.
_BUDGET = {"quick": 30.0, "full": 300.0}
# Candidates timed within this share of the fastest are timed again, in turn, this many
# rounds (at most _FINALISTS of them, and the default besides), and the median decides:
# one timing each drifts with the GPU's clocks and temperature between candidates, and
# the fastest single timing of many favours a lucky one.
_FINAL_MARGIN = 0.03
_FINALISTS = 3
_FINAL_ROUNDS = 2
# The final round's fastest replaces the default only when its median is this much
# below the default's: repeated timings of one configuration differ by a few percent
# (see graph_timer), so a smaller lead is as likely noise as speed, and choosing on noise
# is how a search once kept 0.952x cuBLAS where the default measured 0.999x.
_DEFAULT_EDGE = 0.01

Timer = Callable[[Callable[[], Any]], float]
# (the shape bucket, the SM count, the shape searched) -> the candidates
Spaces = Callable[[dict[str, int], int, dict[str, int]], Plan]


# ------------------------------------------------------------------------------ the cache


def _versions() -> dict[str, str]:
    import triton

    from .. import __version__

    return {"croqtile": __version__, "triton": triton.__version__, "torch": torch.__version__}


def cache_key(text: str, function: str, fixed: Mapping[str, Any], space: Plan,
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
        return Config.of(data["config"]["defines"],
                         {k: v for k, v in data["config"].items() if k != "defines"})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # absent or unreadable: search again


def save_choice(key: str, record: dict[str, Any]) -> None:
    """Store a search's record, atomically: processes sharing the cache directory may
    read or write the same key at once (``load_choice`` then reads one whole record)."""
    publish(_cache_path(key), json.dumps(record, indent=2, sort_keys=True, default=str))


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
    return bool((a - b).norm().item() <= 1e-2 * max(scale, 1e-30))


# ------------------------------------------------------------------------------ the function


Compiler = Callable[[Config], "Function"]  # a config -> its function (raises CompileError)


@dataclass
class TuneReport:
    """What one search did (also written to the cache file)."""

    function: str
    bucket: tuple[tuple[str, int], ...]
    device: str
    best: Config
    best_ms: float
    default_ms: float | None  # the default's median in the final round, else its timing
    tried: int = 0
    pruned: list[tuple[str, str]] = field(default_factory=list)  # (config, reason)
    timings: list[tuple[dict[str, Any], float]] = field(default_factory=list)  # (config, ms)
    # the final round: (config, every timing of it), the default among them
    finals: list[tuple[dict[str, Any], list[float]]] = field(default_factory=list)
    decision: str = ""  # why the choice was made (a sentence)
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
                "decision": self.decision, "complete": self.complete, "timing": self.timing,
                "versions": _versions()}


class TunedFunction:
    """A ``__co__`` function whose configuration is chosen per shape bucket (see module
    docstring). Callable like ``croqtile.Function``."""

    def __init__(self, name: str, text: str, mode: str, space: Spaces,
                 compiler: Compiler, fixed: Mapping[str, Any], budget_s: float | None) -> None:
        self.name = name
        self.mode = mode
        self.space_for = space  # (the shape bucket, the SM count, the shape) -> candidates
        self.budget_s = budget_s if budget_s is not None else _BUDGET[mode]
        self.timer: Timer | None = None  # None: the GPU timer on CUDA, no tuning on the CPU
        self.sm_count: int | None = None  # None: the device's (decides stream-K candidates)
        self.verbose = True
        self.cache = True  # False: search every bucket afresh, store nothing (calibration)
        self.reports: list[TuneReport] = []
        self._text = text
        self._compiler = compiler
        self._fixed = dict(fixed)
        self._functions: dict[Config, Function] = {}
        self._choices: dict[tuple[Any, ...], Config] = {}
        self._default = Config()
        self._last: Config | None = None
        self._warned_cpu = False
        # held while a configuration is compiled or a bucket's choice made: threads whose
        # first calls coincide compile each configuration and search each bucket once
        self._making = threading.RLock()
        self.op: Any = None  # the torch.library operator, when compiled with library=
        default = self._function(self._default)  # (compile errors surface at compile())
        # warm calls: the function chosen for arguments of these shapes/dtypes/devices
        self._by_signature: LRU[tuple[Any, ...], tuple[Config, Any]] = LRU(
            getattr(default, "cache_size", DEFAULT_CACHE_SIZE))
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

    @property
    def compiled(self) -> CompiledFunction:
        """The untuned configuration's compiled function (parameters, checked form)."""
        return self._function(self._default).compiled

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = positional(self.name, self.params, args, kwargs)
        if self.op is not None:  # (its implementation calls `call`)
            return self.op(*args)
        return self.call(*args)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """The call itself, not through the registered operator."""
        if kwargs:
            args = positional(self.name, self.params, args, kwargs)
        if torch.is_grad_enabled() and requires_grad(args):  # (before a search, which runs
            error = grad_error(self.name, self.params, args, self.op)  # the call's copies)
            if error is not None:
                raise error
        # the compiled functions' own signature (one computation serves both lookups)
        signature = self._sign(args)
        known = self._by_signature.get(signature) if signature is not None else None
        if known is None:
            default = self._function(self._default)
            _, bound = default._bind(args)  # argument errors are reported before any tuning
            config = self._choose(bound, args)
            known = (config, self._function(config))
            if signature is not None:
                self._by_signature[signature] = known
        self._last = known[0]
        # the chosen function checks the arguments itself
        call = getattr(known[1], "call_signed", None)
        return known[1](*args) if call is None else call(signature, args)

    def cache_info(self) -> CacheInfo:
        """The table of warm-call signatures (each names the configuration it runs); the
        configurations' functions report their own tables."""
        table = self._by_signature.info()
        return CacheInfo(table.hits, table.misses, table.size, table.maxsize,
                         {"signatures": table})

    def __repr__(self) -> str:
        return f"<croqtile.TunedFunction {self.name} autotune={self.mode!r}>"

    # ----------------------------------------------------------- the search
    def _function(self, config: Config) -> Function:
        fn = self._functions.get(config)
        if fn is None:
            with self._making:
                fn = self._functions.get(config)
                if fn is None:
                    fn = self._functions[config] = self._compiler(config)
        return fn

    def _choose(self, bound: Any, args: Sequence[Any]) -> Config:
        with self._making:
            return self._choose_now(bound, args)

    def _choose_now(self, bound: Any, args: Sequence[Any]) -> Config:
        bucket = shape_bucket(bound.dims)
        device = _device_name(bound.device)
        memo = (bucket, device)
        if memo in self._choices:
            return self._choices[memo]
        sms = self.sm_count or sm_count(bound.device)
        space = self.space_for(dict(bucket), sms, dict(bound.dims))
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
            # candidates compiled, run and timed on the tensors' GPU (the timer's events
            # and synchronisations are the current device's), the choice kept per model
            with device_scope(bound.device):
                report = self._search(space, args, timer, bucket, device)
            if self.cache:
                save_choice(key, report.record())
            self.reports.append(report)
            choice = report.best
        self._choices[memo] = choice
        return choice

    def _search(self, space: Plan, args: Sequence[Any], timer: Timer, bucket: Any,
                device: str) -> TuneReport:
        """Time the default, then the candidates of each round of ``space`` (a round's
        candidates follow from the fastest configuration so far), until the rounds or the
        budget run out; then the final round decides."""
        start = time.perf_counter()
        report = TuneReport(self.name, bucket, device, self._default, math.inf, None)
        shape = " ".join(f"{n}={v}" for n, v in bucket)
        if self.verbose and not sys.stderr.isatty():  # a log: one line now, one at the end
            print(f"croqtile: tuning {self.name} for {shape}: budget {self.budget_s:g} s",
                  file=sys.stderr)
        reference: list[torch.Tensor] | None = None
        against = "the default configuration"  # what the reference is
        timed: list[tuple[Config, float]] = []
        seen: set[Config] = set()
        rounds = iter(space.rounds())
        # first: the reference, and the untuned speed
        candidates: list[Config] | None = [self._default]
        while candidates is not None:
            for config in candidates:
                if config in seen:
                    continue
                if time.perf_counter() - start > self.budget_s and report.best_ms < math.inf:
                    report.complete = False
                    break
                seen.add(config)
                self._progress(f"tuning {self.name} [{shape}] {len(seen)} "
                               f"best {report.best_ms:.4g} ms")
                outcome = self._try(config, args, timer, reference, against)
                if isinstance(outcome, str):
                    report.pruned.append((config.describe(), outcome))
                    continue
                ms, outputs = outcome
                timed.append((config, ms))
                if reference is None:
                    reference = outputs
                    if config != self._default:  # the default failed for this shape
                        against = f"the first configuration that ran ({config.describe()})"
                if config == self._default:
                    report.default_ms = ms
                if ms < report.best_ms:
                    report.best, report.best_ms = config, ms
            if not report.complete:
                break
            step = next(rounds, None)
            candidates = None if step is None else step(report.best)
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
        """Time the candidates that came within ``_FINAL_MARGIN`` of the fastest, and the
        default, again in turn; the fastest by median wins if it beats the default's
        median by ``_DEFAULT_EDGE``, else the default stays."""
        limit = report.best_ms * (1 + _FINAL_MARGIN)
        close = sorted((t for t in timed if t[1] <= limit), key=lambda t: t[1])[:_FINALISTS]
        default = next((t for t in timed if t[0] == self._default), None)
        if default is not None and default not in close:
            close.append(default)
        if len(close) < 2:
            report.decision = (f"the default: no candidate came within {_FINAL_MARGIN:.0%} of it"
                               if default is not None
                               else "the fastest candidate (the default did not run)")
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
        if default is None:
            report.decision = "the fastest finalist by median (the default did not run)"
            return
        default_median = medians[close.index(default)]
        report.default_ms = default_median
        if report.best == self._default:
            report.decision = "the default: the fastest by median in the final round"
        elif report.best_ms > default_median * (1 - _DEFAULT_EDGE):
            report.decision = (f"the default: the fastest finalist ({report.best.describe()}, "
                               f"{report.best_ms:.4g} ms) was not {_DEFAULT_EDGE:.0%} faster "
                               "by median in the final round")
            report.best, report.best_ms = self._default, default_median
        else:
            report.decision = (f"{default_median / report.best_ms:.3f}x the default's speed by "
                               "median in the final round")

    def _try(self, config: Config, args: Sequence[Any], timer: Timer,
             reference: list[torch.Tensor] | None,
             against: str) -> tuple[float, list[torch.Tensor]] | str:
        """Time ``config`` on copies of ``args``; a string says why it was pruned (a
        result other than ``reference``, the outputs of ``against``, among the reasons)."""
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
            return f"computes a different result than {against}"

        return timer(functools.partial(fn, *copies)), outputs

    def _progress(self, text: str | None) -> None:
        if not self.verbose or not sys.stderr.isatty():
            return
        sys.stderr.write("\r\033[K" + (f"croqtile: {text}" if text else ""))
        sys.stderr.flush()

    def _announce(self, report: TuneReport) -> None:
        if not self.verbose:
            return
        shape = " ".join(f"{n}<={v}" for n, v in report.bucket)
        if report.best == self._default:
            gain = ", the default kept" if report.tried > 1 else ""
        elif report.default_ms:
            gain = f", {report.default_ms / report.best_ms:.2f}x the default's speed"
        else:
            gain = ""
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
    # a caller's space is checked now (a mistake fails at compile(), not at a call)
    static = (search_space(mode, text, tunables, defines, options)
              if tunables is not None and not callable(tunables) else Space())
    probe = TileProbe(text, source_defines(text), defines)  # (probes at the first search)

    def spaces_for(name: str) -> Spaces:
        if callable(tunables):
            chooser = tunables
            return lambda bucket, sms, dims: search_space(mode, text, chooser(bucket),
                                                          defines, options)
        if tunables is not None:
            return lambda bucket, sms, dims: static
        return lambda bucket, sms, dims: default_space(mode, probe, name, bucket, sms,
                                                       defines, options, dims)
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
    return [TunedFunction(name, text, mode, spaces_for(name), compiler_for(name), fixed,
                          budget_s) for name in names]
