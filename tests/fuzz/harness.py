"""Runs one input through the compiler and decides whether the compiler crashed.

A crash is anything but a result or a ``CompileError`` of honest diagnostics:

- any exception other than ``CompileError`` (``RecursionError`` included);
- a CQ0901 "internal compiler error" diagnostic (the driver's net for compiler bugs);
- a CQ0115 "nesting is too deep (too many levels)" diagnostic, which is how the driver
  reports a ``RecursionError`` that escaped a stage;
- generated Triton source that is not valid Python;
- running past the per-input time limit (a hang).

``shrink`` reduces a crashing input to a small reproducer by delta debugging.
"""

from __future__ import annotations

import builtins
import contextlib
import re
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import croqtile
from croqtile.backends.ir.errors import LoweringError
from croqtile.backends.ir.lower import FunctionLowering
from croqtile.backends.options import Options
from croqtile.backends.triton.codegen import generate
from croqtile.runtime.driver import check_source
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.parser import parse_program, recursion_headroom
from croqtile.frontend.preprocessor import _Preprocessor
from croqtile.frontend.regions import find_co_functions
from croqtile.frontend.sema.checker import Checker
from croqtile.frontend.source import Source, SourceMap

# Frames of these directories name a crash site; the harness and test frames do not.
_PACKAGE_DIRS = ("frontend", "backends", "croqtile")
_RECURSION_MESSAGE = "(too many levels)"


class FuzzTimeout(BaseException):
    """Raised by the per-input alarm. A BaseException, so that the compiler's own
    ``except Exception`` nets (which turn bugs into CQ0901) cannot swallow it."""


@dataclass(frozen=True)
class Finding:
    """One crash: where it happened and why, with enough to reproduce it."""

    entry: str  # "check_source" or "compile"
    kind: str  # exception type name, "CQ0901", "RecursionError", "bad-codegen" or "hang"
    signature: str  # groups findings of the same bug
    detail: str  # message or traceback

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@contextlib.contextmanager
def deadline(seconds: float | None,
             error: Callable[[], BaseException] = FuzzTimeout) -> Iterator[None]:
    """Raise ``error()`` in the main thread after ``seconds`` (SIGALRM, POSIX only).
    Without an alarm (other threads, other systems) the work simply runs to its end."""
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def _alarm(signum: int, frame: object) -> None:
        raise error()

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


Defines = Mapping[str, object]


def probe(text: str, time_limit: float | None = 10.0,
          defines: Defines | None = None) -> Finding | None:
    """Compile ``text`` (with ``defines``) through ``check_source`` and ``croqtile.compile``;
    the first crash or None. The generated kernels are never run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for entry, run in (("compile", _via_compile), ("check_source", _via_check_source)):
            start = time.perf_counter()
            try:
                with deadline(time_limit):
                    finding = run(text, defines)
            except FuzzTimeout:
                elapsed = time.perf_counter() - start
                return Finding(entry, "hang", f"hang in {entry}",
                               f"no result after {elapsed:.1f} s")
            if finding is not None:
                return finding
    return None


def _via_check_source(text: str, defines: Defines | None) -> Finding | None:
    try:
        diagnostics = check_source(text, defines=defines)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - every escaping exception is the finding
        return _exception_finding("check_source", exc)
    return _diagnostic_finding("check_source", text, defines, diagnostics, None)


def _via_compile(text: str, defines: Defines | None) -> Finding | None:
    try:
        module = croqtile.compile(text, defines=defines)  # type: ignore[arg-type]
    except croqtile.CompileError as err:
        return _diagnostic_finding("compile", text, defines, err.diagnostics, err.__cause__)
    except Exception as exc:  # noqa: BLE001
        return _exception_finding("compile", exc)
    for name, function in module.functions.items():
        try:
            builtins.compile(function.triton_source, f"<generated {name}>", "exec")
        except (SyntaxError, ValueError) as exc:
            return Finding("compile", "bad-codegen", f"bad-codegen: {type(exc).__name__}: "
                           f"{_normalise(str(exc))}", function.triton_source[-4000:])
    return None


def _diagnostic_finding(entry: str, text: str, defines: Defines | None,
                        diagnostics: list[croqtile.Diagnostic],
                        cause: BaseException | None) -> Finding | None:
    for diag in diagnostics:
        recursion = diag.code == "CQ0115" and _RECURSION_MESSAGE in diag.message
        if diag.code != "CQ0901" and not recursion:
            continue
        # the driver's net keeps no traceback for these: run the stages without it
        cause = cause if cause is not None else stage_exception(text, defines)
        where = _crash_site(cause) if cause is not None else ""
        detail = _format(cause) if cause is not None else diag.render()
        if recursion:
            return Finding(entry, "RecursionError", f"RecursionError{where}", detail)
        return Finding(entry, "CQ0901", f"CQ0901: {_normalise(diag.message)}{where}", detail)
    return None


def stage_exception(text: str, defines: Defines | None = None) -> BaseException | None:
    """The exception a compiler stage raises on ``text``, without the driver's net that
    turns it into a diagnostic (so that the crash report has a traceback)."""
    source = Source(text)
    reporter = Reporter(SourceMap.identity(source))
    try:
        with recursion_headroom(1000):  # no-op: the default limit, as in the driver
            pp = _Preprocessor(source, reporter).run(dict(defines or {}))  # type: ignore[arg-type]
            reporter.source_map = pp.source_map
            regions = find_co_functions(pp.text, reporter)
            program = parse_program(pp.text, [(r.start, r.end) for r in regions], reporter)
            for fn in Checker(reporter).check_program(program).functions:
                lowered = FunctionLowering(fn, Options()).lower()
                generate(lowered, lambda span: None, "<fuzz>")
    except LoweringError as err:
        return err.__cause__
    except Exception as exc:  # noqa: BLE001 - this is what we are looking for
        return exc
    return None


def describe_defines(defines: Defines | None) -> str:
    """``defines`` as text, also with values Python will not print (ints of > 4300 digits)."""
    if not defines:
        return "none"

    def show(value: object) -> str:
        if isinstance(value, int) and value.bit_length() > 1000:
            return f"<int of {value.bit_length()} bits>"
        text = repr(value)
        return text if len(text) <= 60 else f"{text[:40]}...<{len(text)} characters>"

    return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in defines.items()) + "}"


def _exception_finding(entry: str, exc: BaseException) -> Finding:
    name = type(exc).__name__
    return Finding(entry, name, f"{name}: {_normalise(str(exc))}{_crash_site(exc)}",
                   _format(exc))


def _crash_site(exc: BaseException) -> str:
    """`` at file:function`` of the innermost compiler frame (no line numbers, so that a
    signature survives edits elsewhere in the file)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        parts = Path(frame.filename).parts
        if any(d in parts for d in _PACKAGE_DIRS) and "fuzz" not in parts:
            return f" at {Path(frame.filename).name}:{frame.name}"
    return ""


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, chain=False))[-6000:]


_NUMBER_RE = re.compile(r"\d+")
_QUOTED_RE = re.compile(r"'[^']*'")


def _normalise(message: str) -> str:
    """A message without its numbers and quoted names: one bug, one signature."""
    return _QUOTED_RE.sub("'_'", _NUMBER_RE.sub("N", message))[:160]


# ----------------------------------------------------------------------------------------
# Shrinking
# ----------------------------------------------------------------------------------------

_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+")
_TOKEN_RE = re.compile(r"\s+|[A-Za-z_0-9]+|\.[A-Za-z_]\w*|[\s\S]")


def shrink(text: str, finding: Finding, time_limit: float = 10.0, budget: float = 60.0,
           defines: Defines | None = None) -> str:
    """A smaller input that crashes with the same signature (ddmin over lines, then
    tokens, then characters; stops when ``budget`` seconds are spent; ``defines`` stay)."""
    stop = time.monotonic() + budget

    def same(candidate: str) -> bool:
        if time.monotonic() > stop:
            return False
        found = probe(candidate, time_limit, defines)
        return found is not None and found.signature == finding.signature

    for pattern in (_LINE_RE, _TOKEN_RE, None):
        units = pattern.findall(text) if pattern is not None else list(text)
        if len(units) > 20_000:
            continue
        text = "".join(_ddmin(units, same, stop))
    return text


def _ddmin(units: list[str], same: Callable[[str], bool], stop: float) -> list[str]:
    """Remove ever smaller chunks of ``units`` while the crash stays."""
    chunks = 2
    while len(units) >= 2 and time.monotonic() < stop:
        size = max(1, len(units) // chunks)
        for begin in range(0, len(units), size):
            candidate = units[:begin] + units[begin + size:]
            if same("".join(candidate)):
                units = candidate
                chunks = max(chunks - 1, 2)
                break
        else:
            if size == 1:
                break
            chunks = min(len(units), chunks * 2)
    return units
