"""The compile pipeline: named stages from source text to one artifact per function.

    preprocess -> find functions -> parse -> check -> lower -> codegen

Every user mistake becomes a diagnostic; all diagnostics of one compile are collected
and raised together as ``CompileError``. A bug inside a stage is reported as CQ0901
(internal compiler error) at the function it happened in, never as a bare traceback.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Mapping, ParamSpec, TypeVar

from ..backends import dispatch
from ..backends.ir.errors import LoweringError, NeedsContiguous, NeedsSpecialization
from ..backends.ir.lower import FunctionLowering
from ..backends.ir.nodes import Function as IRFunction
from ..backends.ir.nodes import HostParam, Layout
from ..backends.options import Options
from ..backends.protocol import Plan, Unsuitable
from ..backends.triton.codegen import Artifact, generate
from ..errors import CompileError, CompileWarning
from ..frontend import syntax as ast
from ..frontend.diagnostics import Diagnostic, Reporter
from ..frontend.lexer import gc_paused
from ..frontend.intrinsics import check_scopes
from ..frontend.parser import parse_program, recursion_headroom
from ..frontend.preprocessor import preprocess
from ..frontend.regions import find_co_functions
from ..frontend.sema.checker import Checker
from ..frontend.sema.model import CheckedFunction
from ..frontend.source import NO_SPAN, Source, SourceMap, Span


# the artifact for the dimensions of a call (a function compiled per call shape), for
# arguments whose tensors named in the set are strided (not contiguous)
Specializer = Callable[[Mapping[str, int], frozenset[str]], Artifact]
# the artifact of a function compiled once, for arguments whose named tensors are strided
Restrider = Callable[[frozenset[str]], Artifact]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class CompiledFunction:
    """One function's artifact -- or, when it needs dimensions as constants (``M`` as a
    shared buffer's extent), ``artifact`` is None and ``specialize`` compiles it for the
    dimensions of one call (raising ``CompileError`` when those values break a rule).
    ``artifact`` takes contiguous tensors; ``restride`` compiles the variant for calls
    with strided ones (``specialize`` takes their names too)."""

    name: str
    artifact: Artifact | None
    checked: CheckedFunction
    params: tuple[HostParam, ...] = ()
    specialize: Specializer | None = None
    # the plan of the backend asked before Triton that runs the function where a call
    # suits its kernel (``backends.dispatch``); None: the Triton kernels run every call
    plan: Plan | None = None
    restride: Restrider | None = None

    @property
    def specialize_on(self) -> tuple[str, ...]:
        """The dimensions a specialised compile fixes: all of them (one key per shape)."""
        return tuple(sorted(self.checked.dims)) if self.artifact is None else ()


@dataclass
class CompileResult:
    functions: list[CompiledFunction]
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[Diagnostic] = field(default_factory=list)  # and notes


def compile_source(text: str, *, filename: str = "<string>",
                   defines: Mapping[str, int | float | str | None] | None = None,
                   options: Options | None = None) -> CompileResult:
    """Compile ``text``; raises ``CompileError``, warns ``CompileWarning``s."""
    result = run_pipeline(Source(text, filename), defines, options)
    for diag in result.warnings:
        if diag.severity == "warning":  # notes: for `croqtile check` (error-code page)
            warnings.warn(diag.render(), CompileWarning, stacklevel=3)
    return result


def check_source(text: str, *, filename: str = "<string>",
                 defines: Mapping[str, int | float | str | None] | None = None,
                 line_offset: int = 0, column_offset: int = 0,
                 target: str | None = None) -> list[Diagnostic]:
    """Every diagnostic (errors and warnings) that compiling ``text`` would give,
    without raising. ``line_offset``/``column_offset`` place a source embedded in a bigger
    file (a string literal in a Python file) so positions are the file's own."""
    source = Source(text, filename, line_offset, column_offset)
    options = Options(target=target) if target else None
    try:
        return list(run_pipeline(source, defines, options).warnings)
    except CompileError as err:
        return list(err.diagnostics)


def run_pipeline(source: Source, defines: Mapping[str, int | float | str | None] | None,
                 options: Options | None) -> CompileResult:
    options = options or Options()
    filename = source.filename
    reporter = Reporter(SourceMap.identity(source))
    timings: dict[str, float] = {}

    def stage(name: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        start = time.perf_counter()
        try:
            with gc_paused():  # a big source makes millions of objects: no rescans of them all
                return fn(*args, **kwargs)
        except (CompileError, LoweringError, NeedsSpecialization):
            raise
        except RecursionError:
            reporter.report("CQ0115", NO_SPAN, depth="too many")
            raise CompileError(reporter.errors) from None
        except Exception as exc:  # a compiler bug: report it, keep the user's view clean
            reporter.report("CQ0901", NO_SPAN, detail=f"{name}: {type(exc).__name__}: {exc}")
            raise CompileError(reporter.errors) from exc
        finally:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - start

    pp = stage("preprocess", preprocess, source, reporter, dict(defines or {}))
    reporter.raise_if_errors()
    reporter.source_map = pp.source_map
    regions = stage("regions", find_co_functions, pp.text, reporter)
    if not regions and not reporter.has_errors():
        reporter.report("CQ0112", Span(0, 0))
    program: ast.Program = stage("parse", parse_program, pp.text,
                                 [(r.start, r.end) for r in regions], reporter)
    stage("intrinsics", check_scopes, program, pp.text, pp.intrinsics, reporter)
    reporter.raise_if_errors()
    target = options.target_rules
    checked = stage("check", Checker(reporter, target).check_program, program)
    reporter.raise_if_errors()

    def locate(span: Span) -> str:
        loc = reporter.source_map.locate(span)
        return f"{loc.filename}:{loc.line}"

    functions = []
    for fn in checked.functions:
        try:
            if fn.specialize_on:
                raise NeedsSpecialization(fn.specialize_on)
            lowered = stage("lower", FunctionLowering(fn, options).lower)
            artifact = stage("codegen", generate, lowered, locate, filename)
            plan = _plan(lowered, fn, options)
        except NeedsSpecialization:
            if dispatch.asked(options):
                reporter.report("CQ0705", fn.node.span, option=f"backend={options.backend!r}",
                                reason="the function is compiled per call shape")
                continue
            functions.append(_deferred(fn, reporter, options, locate, filename))
            continue
        except LoweringError as err:  # (codegen reports what Python cannot write: CQ0702)
            reporter.report(err.code, err.span, **err.fields)
            continue
        functions.append(CompiledFunction(fn.node.name, artifact, fn, plan=plan,
                                          restride=_restrider(fn, options, locate, filename)))
    reporter.raise_if_errors()
    return CompileResult(functions, timings, reporter.warnings)


def _plan(lowered: IRFunction, fn: CheckedFunction, options: Options) -> Plan | None:
    """The plan of the backend asked before Triton that takes the function (None: Triton
    runs it); CQ0705 with the reason when the options ask for a backend that cannot."""
    try:
        return dispatch.recognise(lowered, options)
    except Unsuitable as err:
        raise LoweringError("CQ0705", fn.node.span, option=f"backend={options.backend!r}",
                            reason=str(err)) from None


def _deferred(fn: CheckedFunction, reporter: Reporter, options: Options,
              locate: Callable[[Span], str], filename: str) -> CompiledFunction:
    """A function compiled per call: the checker runs again with every parameter
    dimension fixed to the call's value, so tile shapes, shared buffers and group bounds
    are constants (Triton pads them to powers of two and masks). Thread counts and shared
    memory are checked then, for those values."""
    target = options.target_rules

    def specialize(dims: Mapping[str, int], strided: frozenset[str] = frozenset()) -> Artifact:
        local = Reporter(reporter.source_map)
        with recursion_headroom(), gc_paused():
            checked = Checker(local, target, specialize=dims).check_function(fn.node)
            local.raise_if_errors()
            try:
                lowered = lower_layout(checked, options, strided)
                return generate(lowered, locate, filename)
            except LoweringError as err:
                local.report(err.code, err.span, **err.fields)
            except NeedsSpecialization as err:  # pragma: no cover - every dimension is fixed
                local.report("CQ0901", NO_SPAN, detail=f"lower: unspecialised extent {err}")
        raise CompileError(local.errors)

    params = tuple(FunctionLowering(fn, options).host_params())
    return CompiledFunction(fn.node.name, None, fn, params, specialize)


def lower_layout(fn: CheckedFunction, options: Options, strided: frozenset[str]) -> IRFunction:
    """``fn`` lowered for arguments whose tensors named in ``strided`` are strided: each
    taken with its strides, or copied contiguous by the host where a construct reads its
    memory as row-major (the lowering says which, one at a time). A strided lowering
    that fails where the contiguous one succeeded copies every strided tensor (it is then
    the contiguous lowering), so a layout is never an error."""
    copied: set[str] = set()
    while True:
        layout = Layout(strided - frozenset(copied), frozenset(copied))
        try:
            return FunctionLowering(fn, options, layout).lower()
        except NeedsContiguous as err:
            copied.add(err.param)
        except LoweringError:
            if not layout.strided:
                raise
            copied |= strided


def _restrider(fn: CheckedFunction, options: Options, locate: Callable[[Span], str],
               filename: str) -> Restrider:
    """The strided variants of a function compiled once (see ``lower_layout``)."""

    def restride(strided: frozenset[str]) -> Artifact:
        with recursion_headroom(), gc_paused():
            return generate(lower_layout(fn, options, strided), locate, filename)

    return restride
