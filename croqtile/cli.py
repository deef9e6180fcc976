"""The ``croqtile`` command line: ``check`` programs without running them, ``explain`` codes,
``bench`` kernels against torch.

    croqtile --version
    croqtile check [--format text|json|full] [--target TARGET] [-D NAME[=VALUE]]... PATH...
    croqtile explain CODE
    croqtile bench [square|llm|fp8|memory|attention|epilogue|decode|sparse|all]... [--dtype ...]
                   [--sizes ...] [--reps N] [--out DIR] [--autotune none|quick|full]
                   [--device cuda|cpu] [--quick] [-D NAME=VALUE]...
                   [--tutorial PATH] [--upstream PATH] [--kernels KERNEL...]
    croqtile bench models [--models MODEL...] [--forms FORM...] [--workloads WORKLOAD...]
                   [--layers N] [--seq S...] [--decode-tokens N] [--decode-batch B...]
                   [--prompt N] [--train-layers N] [--train-seq S] [--tiny] [--reps N]
                   [--device cuda|cpu] [--out DIR]
    croqtile bench moe [--widths NAME...] [--tokens T...] [--tiny] [--reps N]
                   [--timer events|graph] [--device cuda|cpu] [--out DIR] [--tutorial PATH]
    croqtile bench --plot CSV

``check`` compiles every ``.co`` file and every Croqtile source embedded in a ``.py`` file
(see ``croqtile.tools.pyscan``) through the checker and the lowering, and reports what a compile
would report, at the file's own lines and columns. Directories are walked for ``*.co`` and
``*.py``; a file named explicitly is checked as Croqtile unless it ends in ``.py`` (host
code around ``__co__`` functions is skipped anyway). ``--target`` names the GPU whose
rules the checker applies (default ``sm_90``; ``s5000`` checks MMA and TMA statements
against the Moore Threads S5000's tensor-engine tables). Exit status: 1 when any error was
found, 0 otherwise, 2 for usage errors (a missing path, an unknown code).

``explain`` prints a code's severity, message and hint templates from the registry, and
what the code means and a wrong and a fixed program when the optional module
``croqtile.frontend.code_examples`` has them (``MEANINGS[code]``; ``EXAMPLES[code]``: an
``Example`` with ``.bad`` and ``.fixed``, or a ``(bad, fixed)`` pair). The documentation's
error-code page is the same reference as one document.

``bench`` runs the sweeps of ``croqtile.bench`` (its kernels ship in the package, so it runs
from an installed wheel): every case is checked against a float64 reference before it is
timed; exit status 1 when a case is wrong. The files go to ``--out``, by default
``bench-results/<gpu>`` in the current directory (``h200``, ``h100``, ... from the device
name; ``cpu`` for interpreter runs); a maintainer refreshing the repository's figures
passes ``--out bench/results/h200``. ``--tutorial`` and ``--upstream`` name checkouts of
the Croqtile tutorial and of the reference repository whose flash-attention kernels the
attention sweep adds. ``bench models`` (``croqtile.bench.models``, run only when named)
times whole ``transformers`` models in eager, compiled and croqtile forms; it needs the
optional dependency ``transformers``. ``bench moe`` (``croqtile.bench.moe``, run only when
named) times one mixture-of-experts layer: ``fused_moe`` beside torch's grouped GEMM, a
loop over the experts and a dense GEMM pair of the same FLOPs; with ``--tutorial`` also the
tutorial's fused-MoE FP8 programs as their host code runs them (``croqtile.bench.moe_tutorial``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from . import __version__
from .runtime.driver import check_source
from .frontend.codes import CODES, Code, Severity
from .frontend.diagnostics import Diagnostic
from .frontend.sema.targets import DEFAULT_TARGET, TARGETS
from .frontend.sema.targets import lookup as lookup_target
from .frontend.source import Source
from .tools.pyscan import EmbeddedSource, find_sources, relocate

Defines = Mapping[str, int | float | str | None]

_FORMATS = ("text", "json", "full")
# Walking a directory skips hidden directories (.git, .venv) and bytecode caches.
_SKIPPED_DIRS = frozenset({"__pycache__"})
_EXAMPLES_MODULE = "croqtile.frontend.code_examples"


class UsageError(Exception):
    """A mistake in the command line itself (a missing path, an unknown code): a message
    without a traceback, exit status 2."""


@dataclass(frozen=True)
class Finding:
    """A diagnostic, and the literal ``filename=`` of the compile call it came from."""

    diagnostic: Diagnostic
    source_filename: str | None = None


@dataclass
class FileReport:
    """What checking one file found."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    embedded: int = 0  # Croqtile sources found in a Python file


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting.

    A reader that stops early (``croqtile explain CQ0201 | head -3``) closes standard
    output: the rest of the output is dropped quietly, with exit status 1, as Python's
    documentation recommends for a broken pipe (see ``_drop_stdout``)."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # a broken pipe shows here rather than at interpreter exit
    except BrokenPipeError:
        _drop_stdout()
        return 1
    return status


def _drop_stdout() -> None:
    """Point standard output at the null device so that the flush at exit cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured stream): nothing to flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help (0) and on usage errors (2)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        if args.command == "check":
            return run_check(args.paths, _parse_defines(args.define), args.format,
                             sys.stdout, sys.stderr, target=_target(args.target))
        if args.command == "bench":
            return run_bench_command(args, sys.stdout, sys.stderr)
        return run_explain(args.code, sys.stdout)
    except UsageError as err:
        print(f"croqtile {args.command}: error: {err}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="croqtile",
        description="Check Croqtile programs, explain diagnostic codes, benchmark kernels.")
    parser.add_argument("--version", action="version", version=f"croqtile {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check", help="report the diagnostics of .co files and of sources embedded in .py files",
        description="Report every diagnostic of .co files and of Croqtile sources passed as "
                    "string literals to croqtile.compile in .py files. Exit status 1 when "
                    "there are errors.")
    check.add_argument("paths", nargs="+", metavar="PATH",
                       help="a file, or a directory to search for *.co and *.py files")
    check.add_argument("--format", choices=_FORMATS, default="text",
                       help="text: one flake8-style line per diagnostic (default); "
                            "json: one JSON document; full: the source line with a caret")
    check.add_argument("--target", default=None, metavar="TARGET",
                       help=f"the GPU whose rules the checker applies: {', '.join(TARGETS)} "
                            f"(default {DEFAULT_TARGET}; s5000 is a checking target: its "
                            "tensor-engine tables)")
    check.add_argument("-D", dest="define", action="append", default=[],
                       metavar="NAME[=VALUE]",
                       help="override #define NAME (repeatable); NAME alone means NAME=1; "
                            "wins over the defines of a croqtile.compile call")
    explain = commands.add_parser("explain", help="describe a diagnostic code",
                                  description="Describe a diagnostic code such as CQ0201.")
    explain.add_argument("code", metavar="CODE")
    _add_bench_parser(commands)
    return parser


_BENCH_SWEEPS = ("square", "llm", "fp8", "memory", "attention", "epilogue", "decode", "sparse",
                 "models", "moe", "all")
# run only when named: the sparse sweep needs the CUDA backend, the models sweep the
# optional dependency transformers (and takes long), the moe sweep gigabytes of weights
_NAMED_SWEEPS = ("sparse", "models", "moe")
_OWN_SWEEPS = ("models", "moe")  # the sweeps with their own module, not suite's cases
_BENCH_DTYPES = ("f16", "bf16")
_KERNEL_REPS = 3  # do_bench repetitions per kernel when --reps is not given


def _add_bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="time croqtile kernels beside torch (cuBLAS) after checking them",
        description="Check each case against a float64 reference, then time croqtile and "
                    "torch interleaved; write CSV, JSON (and PNG plots) per sweep.")
    bench.add_argument("sweeps", nargs="*", metavar="SWEEP", default=["all"],
                       help="square, llm, fp8, memory, attention, epilogue, decode, sparse, "
                            "models, moe or all (default all: every sweep but sparse, models "
                            "and moe)")
    bench.add_argument("--dtype", nargs="+", default=list(_BENCH_DTYPES),
                       choices=_BENCH_DTYPES, help="element types (default f16 bf16); the "
                       "memory sweep uses the first; the published attention kernels run "
                       "in their own type")
    bench.add_argument("--sizes", nargs="+", type=int, metavar="S",
                       help="square and fp8 GEMM sizes, memory tensor sides [S, S], "
                            "attention sequence lengths, epilogue and decode token counts M")
    bench.add_argument("--reps", type=int,
                       help=f"do_bench repetitions per kernel; the median is kept (default "
                            f"{_KERNEL_REPS}); models and moe: timing rounds of the forms "
                            f"(default {_KERNEL_REPS}, 1 on the CPU)")
    bench.add_argument("--out", metavar="DIR",
                       help="output directory (default bench-results/GPU in the current "
                            "directory: h200, h100, ... or cpu)")
    bench.add_argument("--timer", choices=("events", "graph"), default="events",
                       help="events: do_bench (CUDA events around each call, the host path "
                            "included where it is longer than the kernel); graph: "
                            "do_bench_cudagraph (the calls replayed from a CUDA graph: device "
                            "time only, as in a captured decode step); also moe's timer "
                            "on the GPU")
    bench.add_argument("--autotune", choices=("none", "quick", "full"), default="none",
                       help="passed to croqtile.compile when not none (the decode sweep "
                            "tunes with quick when this is none)")
    bench.add_argument("--device", choices=("cuda", "cpu"),
                       help="default cuda when available; cpu checks tiny shapes only")
    bench.add_argument("--quick", action="store_true", help="a few shapes per sweep")
    bench.add_argument("--kernels", nargs="+", metavar="KERNEL",
                       help="only the cases of these kernels (gemm, attention, "
                            "tutorial_flash, upstream_flash, linear_silu, matmul, ...): a "
                            "long sweep in parts")
    bench.add_argument("-D", dest="define", action="append", default=[],
                       metavar="NAME=VALUE",
                       help="override a #define of the bench kernels (TILE_M=128; repeatable)")
    bench.add_argument("--plot", metavar="CSV",
                       help="only draw the PNG of an existing CSV (next to it)")
    bench.add_argument("--tutorial", metavar="PATH", type=Path,
                       help="a checkout of the Croqtile tutorial (or its page "
                            "optimization/flash-attention-causal-prefill.md): the attention "
                            "sweep adds the page's flash_atten kernel, compiled as written")
    bench.add_argument("--upstream", metavar="PATH", type=Path,
                       help="a checkout of the reference Croqtile repository (or its "
                            "tests/gpu/end2end/flash_atten.co): the attention sweep adds "
                            "that kernel, compiled as written")
    _add_models_options(bench)
    _add_moe_options(bench)


def _add_models_options(bench: argparse.ArgumentParser) -> None:
    """The options of ``croqtile bench models`` (an argument group of ``bench``)."""
    from .bench import models as model_sweep

    full, tiny = model_sweep.Settings(), model_sweep.Settings(**model_sweep.TINY)

    def default(name: str) -> str:
        def shown(value: Any) -> str:
            return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)

        mine, small = getattr(full, name), getattr(tiny, name)
        return f"default {shown(mine)}" + (f"; --tiny {shown(small)}" if small != mine else "")

    group = bench.add_argument_group(
        "models sweep", "`croqtile bench models`: transformers models with random weights "
        "(nothing downloaded) in the forms eager, compile, croqtile (croqtile.nn.transformers."
        "optimize) and croqtile+compile; prefill, decode (generate) and a training step")
    group.add_argument("--models", nargs="+", choices=list(model_sweep.MODELS),
                       metavar="MODEL", help="the models' widths: "
                       f"{', '.join(model_sweep.MODELS)} (default all)")
    group.add_argument("--forms", nargs="+", choices=model_sweep.FORMS, metavar="FORM",
                       help=f"{', '.join(model_sweep.FORMS)} (default all; on the CPU "
                            "eager and croqtile: torch.compile there needs a C compiler and "
                            "minutes); eager always runs, the ratios are to it")
    group.add_argument("--workloads", nargs="+", choices=model_sweep.WORKLOADS,
                       metavar="WORKLOAD", help=f"{', '.join(model_sweep.WORKLOADS)} "
                                                "(default all)")
    group.add_argument("--layers", type=int, metavar="N",
                       help=f"decoder layers ({default('layers')})")
    group.add_argument("--seq", type=int, nargs="+", metavar="S", dest="seqs",
                       help=f"prefill lengths, batch 1 ({default('seqs')})")
    group.add_argument("--prompt", type=int, metavar="N",
                       help=f"prompt tokens before decoding ({default('prompt')})")
    group.add_argument("--decode-tokens", type=int, metavar="N",
                       help=f"new tokens per generate ({default('decode_tokens')})")
    group.add_argument("--decode-batch", type=int, nargs="+", metavar="B",
                       dest="decode_batches",
                       help=f"decode batch sizes ({default('decode_batches')})")
    group.add_argument("--train-layers", type=int, metavar="N",
                       help=f"layers of the training-step model ({default('train_layers')})")
    group.add_argument("--train-seq", type=int, metavar="S",
                       help=f"tokens of a training step ({default('train_seq')})")
    group.add_argument("--tiny", action="store_true",
                       help="small float32 models and MoE layers (what the CPU runs), "
                            "also on a GPU")


def _add_moe_options(bench: argparse.ArgumentParser) -> None:
    """The options of ``croqtile bench moe`` (an argument group of ``bench``; ``--tiny``,
    ``--reps``, ``--timer``, ``--device`` and ``--out`` are shared)."""
    from .bench import moe as moe_sweep

    group = bench.add_argument_group(
        "moe sweep", "`croqtile bench moe`: one MoE layer (routing included) with random "
        "weights in the forms croqtile (fused_moe), grouped_mm (torch._grouped_mm), "
        "eager_loop (a loop over the experts) and dense (a GEMM pair of the same FLOPs)")
    group.add_argument("--widths", nargs="+", choices=list(moe_sweep.WIDTHS), metavar="NAME",
                       help=f"the layers' widths: {', '.join(moe_sweep.WIDTHS)} (default all)")
    group.add_argument("--tokens", type=int, nargs="+", metavar="T",
                       help="token counts (default "
                            f"{' '.join(map(str, moe_sweep.TOKENS))}; --tiny "
                            f"{' '.join(map(str, moe_sweep.TINY_TOKENS))})")


def run_bench_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``croqtile bench``: run the sweeps, write the files, print the summary table."""
    if args.plot:
        return _plot_only(Path(args.plot), out, err)
    sweeps = _bench_sweeps(args.sweeps)
    if args.reps is not None and args.reps < 1:
        raise UsageError("--reps must be at least 1")
    device = args.device or ("cuda" if _cuda_available() else "cpu")
    if device == "cuda" and not _cuda_available():
        raise UsageError("--device cuda: no CUDA device here (use --device cpu to check "
                         "correctness through the interpreter)")
    kernel_sweeps = [s for s in sweeps if s not in _OWN_SWEEPS]
    status = _run_kernel_sweeps(args, kernel_sweeps, device, out, err) if kernel_sweeps else 0
    if "models" in sweeps:
        status = max(status, _run_models_sweep(args, device, out, err))
    if "moe" in sweeps:
        status = max(status, _run_moe_sweep(args, device, out, err))
    return status


def _run_kernel_sweeps(args: argparse.Namespace, sweeps: Sequence[str], device: str,
                       out: TextIO, err: TextIO) -> int:
    """The kernel sweeps of ``croqtile bench`` (every one but models and moe)."""
    # torch and triton load only for this command
    from .bench import attention as attention_sweep
    from .bench import harness, report, suite

    try:
        attention = attention_sweep.programs(args.tutorial, args.upstream)
    except (attention_sweep.SourceError, harness.KernelFileError) as exc:
        raise UsageError(str(exc)) from None
    kernels = list(attention)
    if args.sizes:
        cases = suite.full_cases(sweeps, args.dtype, args.sizes, kernels)
    elif device == "cpu":
        cases = suite.tiny_cases(sweeps, args.dtype, kernels)
    elif args.quick:
        cases = suite.quick_cases(sweeps, args.dtype, kernels)
    else:
        cases = suite.full_cases(sweeps, args.dtype, attention_kernels=kernels)
    if args.kernels:
        cases = _only_kernels(cases, args.kernels)
    try:
        suite.check_kernel_files(cases)
    except harness.KernelFileError as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(args.out) if args.out else report.default_out_dir(device)
    result = suite.run_bench(cases, out_dir, device=device,
                             reps=_KERNEL_REPS if args.reps is None else args.reps,
                             autotune=args.autotune, defines=_parse_defines(args.define),
                             timer=harness.TIMERS[args.timer] if device == "cuda" else None,
                             progress=err, attention=attention)
    for row in result.rows:
        if not row.ok:
            print(f"FAILED {row.case.describe()}: {row.note} (rel_error "
                  f"{row.rel_error})", file=err)
    for message in result.messages:
        print(message, file=err)
    print(result.table, file=out)
    print(f"wrote {len(result.files)} files to {out_dir}", file=out)
    return 1 if result.failed else 0


def _run_models_sweep(args: argparse.Namespace, device: str, out: TextIO, err: TextIO) -> int:
    """``croqtile bench models``: whole transformers models (the CPU runs the tiny ones)."""
    from .bench import models as model_sweep
    from .bench import report

    if importlib.util.find_spec("transformers") is None:
        raise UsageError("the models sweep needs the optional dependency 'transformers' "
                         "(pip install transformers)")
    tiny = args.tiny or device == "cpu"
    if tiny and not args.tiny:
        print("models: the CPU runs the small models of --tiny", file=err)
    sizes = {name: getattr(args, name) for name in (
        "models", "workloads", "layers", "seqs", "prompt", "decode_tokens", "decode_batches",
        "train_layers", "train_seq", "reps")}
    try:
        run = model_sweep.settings(device, tiny, forms=args.forms, **sizes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(args.out) if args.out else report.default_out_dir(device)
    result = model_sweep.run_models(run, out_dir, progress=err)
    for row in result.rows:
        if row.ok is False:
            print(f"FAILED {row.describe()}: {row.note}", file=err)
    for message in result.messages:
        print(message, file=err)
    print(result.table, file=out)
    print(f"wrote {len(result.files)} files to {out_dir}", file=out)
    return 1 if result.failed else 0


def _run_moe_sweep(args: argparse.Namespace, device: str, out: TextIO, err: TextIO) -> int:
    """``croqtile bench moe``: one MoE layer in four forms (the CPU runs the tiny ones)."""
    from .bench import harness, report
    from .bench import moe as moe_sweep

    tiny = args.tiny or device == "cpu"
    if tiny and not args.tiny:
        print("moe: the CPU runs the small layers of --tiny", file=err)
    try:
        run = moe_sweep.settings(device, tiny, widths=args.widths, tokens=args.tokens,
                                 reps=args.reps)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(args.out) if args.out else report.default_out_dir(device)
    timer = harness.TIMERS[args.timer] if device == "cuda" else None
    result = moe_sweep.run_moe(run, out_dir, timer, f"--timer {args.timer}", progress=err)
    for row in result.rows:
        if row.ok is False:
            print(f"FAILED {row.describe()}: {row.note}", file=err)
    print(result.table, file=out)
    print(f"wrote {len(result.files)} files to {out_dir}", file=out)
    failed = result.failed
    if args.tutorial is not None:
        tutorial_timer = timer or moe_sweep.cpu_timer(lambda: None)
        failed += _run_moe_tutorial(args.tutorial, device, run.reps, out_dir, tutorial_timer,
                                    out, err)
    return 1 if failed else 0


def _run_moe_tutorial(checkout: Path, device: str, reps: int, out_dir: Path, timer: Any,
                      out: TextIO, err: TextIO) -> int:
    """``croqtile bench moe --tutorial PATH``: the tutorial's fused-MoE FP8 programs run as
    their host code runs them (the files' sizes on a GPU, small ones on the CPU); the
    number of programs that failed."""
    from .bench import moe_tutorial

    sizes = moe_tutorial.TINY if device == "cpu" else moe_tutorial.FILE
    try:
        rows = moe_tutorial.run_tutorial(checkout, sizes, device, timer, reps, out_dir,
                                         lambda text: print(f"moe: {text}", file=err))
    except FileNotFoundError as exc:
        raise UsageError(f"--tutorial: {exc}") from None
    for row in rows:
        print(row.line(), file=out)
    return sum(row.ok is False for row in rows)


def _only_kernels(cases: Sequence[Any], kernels: Sequence[str]) -> list[Any]:
    """The cases of ``kernels``; a name that no case of the chosen sweeps has is a usage
    error (a typo would otherwise run nothing and look like success)."""
    present = {c.kernel for c in cases}
    unknown = [k for k in kernels if k not in present]
    if unknown:
        raise UsageError(f"--kernels {unknown[0]!r}: no such kernel in these sweeps; "
                         f"choose from {', '.join(sorted(present))}")
    return [c for c in cases if c.kernel in kernels]


def _bench_sweeps(names: Sequence[str]) -> list[str]:
    unknown = [n for n in names if n not in _BENCH_SWEEPS]
    if unknown:
        raise UsageError(f"unknown sweep {unknown[0]!r}; choose from "
                         + ", ".join(_BENCH_SWEEPS))
    if "all" in names:  # (with the named-only sweeps that are named too)
        return [n for n in _BENCH_SWEEPS if n not in (*_NAMED_SWEEPS, "all")] + [
            n for n in _NAMED_SWEEPS if n in names]
    return list(dict.fromkeys(names))


def _plot_only(csv_path: Path, out: TextIO, err: TextIO) -> int:
    from .bench import model_report, report
    from .bench import moe as moe_sweep

    if not csv_path.is_file():
        raise UsageError(f"no such CSV file: {str(csv_path)!r}")
    if moe_sweep.is_moe_csv(csv_path):
        print("moe.csv has no plot: read its rows (or its JSON)", file=err)
        return 1
    plot = model_report.plot_csv if model_report.is_models_csv(csv_path) else report.plot_csv
    png, message = plot(csv_path)
    if png is None:
        print(message, file=err)
        return 1
    print(f"wrote {png}", file=out)
    return 0


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _target(name: str | None) -> str | None:
    """The --target name, checked here so that a typo is a usage error, not a traceback."""
    if name is not None and lookup_target(name) is None:
        raise UsageError(f"unknown target {name!r}; choose from {', '.join(TARGETS)}")
    return name


def _parse_defines(items: Sequence[str]) -> dict[str, str]:
    defines: dict[str, str] = {}
    for item in items:
        name, has_value, value = item.partition("=")
        if not name.strip():
            raise UsageError(f"-D {item!r}: expected NAME or NAME=VALUE")
        # Like a C compiler's -DNAME; the value is macro body text, kept as written.
        defines[name.strip()] = value if has_value else "1"
    return defines


# ----------------------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------------------


def run_check(paths: Sequence[str], defines: Defines, fmt: str,
              out: TextIO, err: TextIO, target: str | None = None) -> int:
    """Check ``paths`` for ``target`` (None: the default), write the report, return the
    exit status."""
    reports = [check_file(path, defines, target) for path in collect_files(paths)]
    diagnostics = [f.diagnostic for report in reports for f in report.findings]
    errors = sum(d.severity_kind is Severity.ERROR for d in diagnostics)
    warnings = sum(d.severity_kind is Severity.WARNING for d in diagnostics)
    notes = len(diagnostics) - errors - warnings
    if fmt == "json":
        json.dump(_json_report(reports, errors, warnings, notes), out, indent=2)
        out.write("\n")
    else:
        for diag in diagnostics:
            print(diag.render() + "\n" if fmt == "full" else format_line(diag), file=out)
        print(_summary(reports, errors, warnings, notes), file=err)
    return 1 if errors else 0


def collect_files(paths: Sequence[str]) -> list[Path]:
    """The files to check, in a stable order, each once; a missing path is a usage error."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError("no such file or directory: " + ", ".join(map(repr, missing)))
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(_walk(p) if p.is_dir() else [p])
    seen: set[Path] = set()
    unique: list[Path] = []
    for f in files:
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        found.extend(Path(directory, n) for n in sorted(names) if n.endswith((".co", ".py")))
    return found


def check_file(path: Path, defines: Defines, target: str | None = None) -> FileReport:
    """Every diagnostic of one file, ordered by position."""
    try:
        # utf-8-sig: a byte-order mark would otherwise shift the columns of line 1.
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc}") from None
    if path.suffix == ".py":
        report = _check_python(str(path), text, defines, target)
    else:
        diagnostics = check_source(text, filename=str(path), defines=defines, target=target)
        report = FileReport(str(path), [Finding(d) for d in diagnostics])
    report.findings.sort(key=lambda f: (f.diagnostic.line, f.diagnostic.column))
    return report


def _check_python(path: str, text: str, defines: Defines, target: str | None) -> FileReport:
    report = FileReport(path)
    file = Source(text, path)
    for embedded in find_sources(text):
        report.embedded += 1
        report.findings.extend(Finding(relocate(diag, embedded, file), embedded.filename)
                               for diag in _check_embedded(embedded, path, defines, target))
    return report


def _check_embedded(embedded: EmbeddedSource, path: str, defines: Defines,
                    target: str | None) -> list[Diagnostic]:
    # The command line's -D wins: it is how one asks "does this also work with N=128?".
    merged = {**(embedded.defines or {}), **defines}
    return check_source(embedded.text, filename=path, defines=merged, target=target)


def format_line(diag: Diagnostic) -> str:
    """``path:line:col: CODE severity: message (hint: ...)``: one line per diagnostic, so
    editors and grep can use it like flake8's output."""
    line = f"{diag.filename}:{diag.line}:{diag.column}: {diag.code} {diag.severity}: {diag.message}"
    return f"{line} (hint: {diag.hint})" if diag.hint else line


def _json_report(reports: list[FileReport], errors: int, warnings: int,
                 notes: int) -> dict[str, Any]:
    diagnostics = []
    for report in reports:
        for finding in report.findings:
            entry = finding.diagnostic.to_dict()
            entry["file"] = report.path
            entry["source_filename"] = finding.source_filename
            diagnostics.append(entry)
    return {
        "files": [r.path for r in reports],
        "embedded_sources": sum(r.embedded for r in reports),
        "diagnostics": diagnostics,
        "errors": errors,
        "warnings": warnings,
        "notes": notes,
    }


def _summary(reports: list[FileReport], errors: int, warnings: int, notes: int) -> str:
    text = f"{_count(errors, 'error')}, {_count(warnings, 'warning')}"
    if notes:
        text += f", {_count(notes, 'note')}"
    text += f" in {_count(len(reports), 'file')}"
    if any(r.path.endswith(".py") for r in reports):
        # Says how many kernels were found: a .py file where none was found is not "clean".
        text += f" ({_count(sum(r.embedded for r in reports), 'embedded source')})"
    return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# ----------------------------------------------------------------------------------------
# explain
# ----------------------------------------------------------------------------------------


def run_explain(code: str, out: TextIO) -> int:
    """Describe ``code``; an unknown code is a usage error that lists nearby codes."""
    entry = CODES.get(_normalise_code(code))
    if entry is None:
        raise UsageError(_unknown_code_message(code))
    print(f"{entry.code} ({entry.severity.value})", file=out)
    print(f"  message: {_unescape(entry.template)}", file=out)
    if entry.hint == "{hint}":
        print("  hint: given with each diagnostic (it depends on the case)", file=out)
    elif entry.hint:
        print(f"  hint: {_unescape(entry.hint)}", file=out)
    meaning = _meanings().get(entry.code)
    if meaning:
        print("\n" + textwrap.fill(meaning, width=88, break_on_hyphens=False,
                                   break_long_words=False), file=out)
    example = _examples().get(entry.code)
    if example is not None:
        bad, fixed = (example.bad, example.fixed) if hasattr(example, "bad") else example
        target = getattr(example, "target", None)
        on = f" (target {target})" if target else ""
        print(f"\nA program with this problem{on}:\n\n{_indent(bad)}", file=out)
        print(f"\nFixed:\n\n{_indent(fixed)}", file=out)
    return 0


def _normalise_code(code: str) -> str:
    """``cq201``, ``201`` and ``CQ0201`` all name CQ0201."""
    match = re.fullmatch(r"(?:CQ)?(\d{1,4})", code.strip().upper())
    return f"CQ{int(match.group(1)):04d}" if match else code.strip().upper()


def _unknown_code_message(code: str) -> str:
    normal = _normalise_code(code)
    if not re.fullmatch(r"CQ\d{4}", normal):
        return f"unknown code {code!r}: codes look like CQ0201"
    return f"unknown code {code!r}; nearby codes:\n" + "\n".join(
        f"  {c.code}  {c.severity.value}: {_unescape(c.template)}" for c in _nearby_codes(normal))


def _nearby_codes(normal: str, count: int = 5) -> list[Code]:
    """The codes closest in number, those of the same range (CQ02xx) first."""
    number = int(normal[2:])

    def distance(entry: Code) -> tuple[bool, int, str]:
        other = int(entry.code[2:])
        return other // 100 != number // 100, abs(other - number), entry.code

    return sorted(CODES.values(), key=distance)[:count]


def _examples() -> Mapping[str, Any]:
    """``EXAMPLES`` of the optional code-examples module: {code: Example or (bad, fixed)}."""
    return _examples_table("EXAMPLES")


def _meanings() -> Mapping[str, str]:
    """``MEANINGS`` of the optional code-examples module: {code: what it means}."""
    return _examples_table("MEANINGS")


def _examples_table(name: str) -> Mapping[str, Any]:
    try:
        module = importlib.import_module(_EXAMPLES_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _EXAMPLES_MODULE:
            raise  # the module exists but is broken: say so rather than hide it
        return {}
    table: Mapping[str, Any] = getattr(module, name, {})
    return table


def _unescape(template: str) -> str:
    # Templates are str.format strings: show `{{` as the `{` a user will see.
    return template.replace("{{", "{").replace("}}", "}")


def _indent(program: str) -> str:
    return "\n".join("    " + line if line.strip() else "" for line in program.strip("\n").splitlines())
