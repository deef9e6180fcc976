"""End-to-end conformance against the upstream Croqtile kernels (and the tutorial's).

    python -m tests.conformance.e2e_upstream /path/to/croqtile-checkout \\
        [--tutorial /path/to/tutorial-checkout] [--device cpu|cuda] [--only SUBSTR ...] \\
        [--timeout SECONDS] [--json out.json] [--verbose]

Reads the kernels of an upstream checkout at run time: every ``__co__`` function of
``tests/gpu/end2end``, ``tests/cpu/end2end`` and ``tests/amdgpu/end2end`` (and, with
``--tutorial``, the tutorial's complete programs; see ``tutorial_sources``). Each function
is compiled on its own: the other functions' lines are blanked (line numbers stay those of
the upstream file) so one unsupported function does not sink its file-mates. The file's
RUN-line ``-D`` defines apply, then the recipe's. The recipe (``e2e_recipe.Recipe``, in the
``e2e_recipes_*`` modules) builds the arguments as the host code does and gives the
expected result; every element is compared (except those a floating-point reference marks
unspecified with NaN).

Statuses: PASS, COMPILE-ERROR, RUN-ERROR, WRONG, TIMEOUT, NO-RECIPE (a failure among the
in-scope kernels), and ESC/OUT for recipes that declare the kernel outside this backend's
scope (listed with their reason, not counted). Nothing is copied into this repository.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import sys
import tarfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ContextManager, Sequence

import torch

from ..fuzz.harness import deadline
from .e2e_recipe import Recipe
from .lit import run_lines
from .reject_upstream import _revision
from .source import SourceFile, function_spans, strip_comment

PASS = "PASS"
COMPILE_ERROR = "COMPILE-ERROR"
RUN_ERROR = "RUN-ERROR"
WRONG = "WRONG"
TIMEOUT = "TIMEOUT"
NO_RECIPE = "NO-RECIPE"
FAILURES = (COMPILE_ERROR, RUN_ERROR, WRONG, TIMEOUT, NO_RECIPE)
EXCLUDED = ("ESC", "OUT")

# tests/<dir> folders whose __co__ functions are in scope.
UPSTREAM_DIRS: tuple[str, ...] = ("gpu/end2end", "cpu/end2end", "amdgpu/end2end")
RECIPE_MODULES: tuple[str, ...] = ("e2e_recipes_gpu_a", "e2e_recipes_gpu_b", "e2e_recipes_other",
                                   "e2e_recipes_tutorial", "e2e_recipes_moe")
TUTORIAL_PREFIX = "tutorial/"
WILDCARD = "*"
SEED = 20260

Key = tuple[str, str]


# ----------------------------------------------------------------------------- discovery


@dataclass
class Kernel:
    """One ``__co__`` function of one source file."""

    rel: str                    # the recipe key's path: "gpu/end2end/add.co", "tutorial/..."
    function: str
    text: str                   # the whole source file
    span: tuple[int, int]       # its first and last physical line
    others: list[tuple[int, int]] = field(default_factory=list)  # its file-mates' spans
    run_defines: dict[str, str] = field(default_factory=dict)     # -D of the first RUN line

    @property
    def key(self) -> Key:
        return (self.rel, self.function)

    @property
    def name(self) -> str:
        return f"{self.rel}::{self.function}"


def discover(root: Path | None, tutorial: Path | None = None,
             recipes: dict[Key, Recipe] | None = None) -> list[Kernel]:
    """Every in-scope ``__co__`` function of the upstream checkout and the tutorial
    (``recipes`` may name extra tutorial markdown blocks)."""
    kernels: list[Kernel] = []
    for folder in UPSTREAM_DIRS if root is not None else ():
        base = root / "tests" / folder
        for path in sorted(base.glob("*.co")) if base.is_dir() else []:
            rel = path.relative_to(root / "tests").as_posix()
            kernels += file_kernels(rel, path.read_text(errors="replace"))
    if tutorial is not None:
        named = {rel[len(TUTORIAL_PREFIX):] for rel, _ in recipes or {}
                 if rel.startswith(TUTORIAL_PREFIX)}
        for rel, text in tutorial_sources(tutorial, named):
            kernels += file_kernels(TUTORIAL_PREFIX + rel, text)
    return kernels


def file_kernels(rel: str, text: str) -> list[Kernel]:
    """The functions of one file that its preprocessor conditionals keep (with the first
    compiler RUN line's defines)."""
    lines = text.splitlines()
    runs = [run for run in run_lines(lines) if run.is_compiler_run]
    defines = dict(runs[0].defines) if runs else {}
    active = SourceFile(lines, defines).active
    spans = [s for s in function_spans(lines) if s[0] in active]
    kernels = []
    for span in spans:
        name = function_name(lines[span[0] - 1:span[1]])
        if name:
            others = [s for s in spans if s != span]
            kernels.append(Kernel(rel, name, text, span, others, defines))
    return kernels


def function_name(lines: list[str]) -> str:
    """The function's name: the identifier in front of its parameter list (bracketed
    dimensions and attributes in the return type are skipped)."""
    text = " ".join(strip_comment(line) for line in lines)
    text = text[text.find("__co__") + len("__co__"):]
    previous = None
    while previous != text:  # drop [..] groups innermost first
        previous, text = text, re.sub(r"\[[^\[\]]*\]", " ", text)
    match = re.search(r"([A-Za-z_]\w*)\s*\(", text)
    return match.group(1) if match else ""


_FENCE_RE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_MAIN_RE = re.compile(r"\bint\s+main\s*\(")
TUTORIAL_DIRS: tuple[str, ...] = ("tutorial", "optimization")


def tutorial_sources(root: Path, named: set[str] | frozenset[str] = frozenset()
                     ) -> list[tuple[str, str]]:
    """The tutorial's complete programs as (relative name, text):

    * ``.co`` files under ``tutorial/`` and ``optimization/`` (``optimization/assets/...``);
    * ``.co`` members of ``.tar.gz`` archives there, named ``archive.tar.gz:member``;
    * markdown code blocks holding a ``__co__`` function, named ``page.md#N`` (N counts
      the page's blocks that hold one, from 0). Only blocks with a host ``main`` are
      complete programs; the others are included when a recipe names them.
    """
    sources: list[tuple[str, str]] = []
    for folder in TUTORIAL_DIRS:
        base = root / folder
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            rel = path.relative_to(root).as_posix()
            if path.suffix == ".co":
                sources.append((rel, path.read_text(errors="replace")))
            elif path.name.endswith(".tar.gz"):
                sources += _archive_sources(path, rel)
            elif path.suffix == ".md":
                sources += [(name, block) for name, block in markdown_blocks(path, rel)
                            if _MAIN_RE.search(block) or name in named]
    return sources


def _archive_sources(path: Path, rel: str) -> list[tuple[str, str]]:
    try:
        with tarfile.open(path) as archive:
            members = sorted((m for m in archive.getmembers()
                              if m.isfile() and m.name.endswith(".co")), key=lambda m: m.name)
            return [(f"{rel}:{m.name}", _read_member(archive, m)) for m in members]
    except (tarfile.TarError, OSError):
        return []


def _read_member(archive: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    handle = archive.extractfile(member)
    return io.TextIOWrapper(handle, errors="replace").read() if handle else ""


def markdown_blocks(path: Path, rel: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a page that hold a ``__co__`` function."""
    blocks = [b for b in _FENCE_RE.findall(path.read_text(errors="replace")) if "__co__" in b]
    return [(f"{rel}#{i}", block) for i, block in enumerate(blocks)]


# ----------------------------------------------------------------------------- recipes


def load_recipes(modules: Sequence[str] = RECIPE_MODULES) -> dict[Key, Recipe]:
    """The recipes of every recipe module that exists (later modules do not override)."""
    recipes: dict[Key, Recipe] = {}
    for name in modules:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as err:
            if err.name and err.name.endswith(name):
                continue
            raise
        for key, recipe in getattr(module, "RECIPES", {}).items():
            recipes.setdefault(key, recipe)
    return recipes


def recipe_for(kernel: Kernel, recipes: dict[Key, Recipe]) -> Recipe | None:
    return recipes.get(kernel.key) or recipes.get((kernel.rel, WILDCARD))


# ----------------------------------------------------------------------------- extraction


def isolate(kernel: Kernel) -> str:
    """The file's text with every other ``__co__`` function blanked line by line
    (preprocessor lines kept, so macros and conditionals stay as they were)."""
    lines = kernel.text.splitlines()
    for start, end in kernel.others:
        for number in range(start, end + 1):
            if not lines[number - 1].lstrip().startswith("#"):
                lines[number - 1] = ""
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- running


@dataclass
class Result:
    """What happened to one kernel."""

    kernel: Kernel
    status: str
    detail: str = ""
    code: str = ""          # first diagnostic code (compile errors) or exception type
    line: int = 0           # where that diagnostic points
    seconds: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    bad: int = 0            # elements outside the tolerance
    total: int = 0          # elements compared
    verdict: str = "IN"
    note: str = ""

    @property
    def group(self) -> str:
        """What failures are grouped by: the diagnostic code or the exception type."""
        if self.status in (COMPILE_ERROR, RUN_ERROR):
            return self.code or self.status
        return self.status


class KernelTimeout(Exception):
    pass


def time_limit(seconds: float) -> ContextManager[None]:
    """Raise ``KernelTimeout`` after ``seconds`` (main thread, POSIX; else no limit)."""
    return deadline(seconds if seconds > 0 else None,
                    lambda: KernelTimeout(f"more than {seconds:g} s"))


def run_kernel(kernel: Kernel, recipe: Recipe | None, device: str = "cpu",
               timeout: float = 0.0, engine: str = "triton") -> Result:
    if recipe is None:
        return Result(kernel, NO_RECIPE, "no recipe for this kernel")
    if recipe.verdict in EXCLUDED:
        return Result(kernel, recipe.verdict, recipe.reason, verdict=recipe.verdict,
                      note=recipe.note)
    start = time.perf_counter()
    try:
        with time_limit(timeout):
            result = _compile_and_check(kernel, recipe, device, engine)
    except KernelTimeout as err:
        result = Result(kernel, TIMEOUT, str(err))
    result.seconds = time.perf_counter() - start
    result.note = recipe.note
    return result


ENGINES = ("triton", "reference")


def build(kernel: Kernel, defines: dict[str, str], engine: str = "triton") -> Any:
    """A callable for the kernel: compiled to Triton, or (``reference``) run by the
    reference interpreter, which checks the recipes independently of the Triton backend."""
    import croqtile

    text = isolate(kernel)
    with warnings.catch_warnings():  # warnings of a program that compiles are not results
        warnings.simplefilter("ignore")
        if engine == "reference":
            from croqtile.backends.reference import check_text, interpret_source
            check_text(text, defines, kernel.rel)
            return lambda *args: interpret_source(text, list(args), defines,
                                                  function=kernel.function, filename=kernel.rel)
        module = croqtile.compile(text, defines=defines, filename=kernel.rel)
    return getattr(module, kernel.function)


def _compile_and_check(kernel: Kernel, recipe: Recipe, device: str, engine: str) -> Result:
    from croqtile.errors import CompileError

    defines: dict[str, str] = {**kernel.run_defines, **recipe.defines}
    try:
        function = build(kernel, defines, engine)
    except CompileError as err:
        errors = [d for d in err.diagnostics if d.severity == "error"] or err.diagnostics
        first = errors[0]
        return Result(kernel, COMPILE_ERROR, first.message.splitlines()[0], first.code,
                      first.line)
    except KernelTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - any failure is this kernel's result
        return _exception(kernel, COMPILE_ERROR, err)
    merged = Result(kernel, PASS)
    for index, case in enumerate((recipe, *recipe.also)):
        result = _check_case(kernel, function, case, device, seed=SEED + index)
        if result.status != PASS:
            if index:
                result.detail = f"argument set {index + 1}: {result.detail}"
            return result
        merged.total += result.total
        merged.max_abs = max(merged.max_abs, result.max_abs)
        merged.max_rel = max(merged.max_rel, result.max_rel)
    return merged


def _check_case(kernel: Kernel, function: Any, recipe: Recipe, device: str, seed: int) -> Result:
    """Build one argument set, run the compiled function on it and compare."""
    gen = torch.Generator().manual_seed(seed)
    try:
        args = recipe.args(gen)
        _poison(args, recipe.poison)
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        expected = recipe.reference(*before)
    except KernelTimeout:
        raise
    except Exception as err:  # noqa: BLE001
        return _exception(kernel, RUN_ERROR, err, "recipe: ")
    call_args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    try:
        returned = function(*call_args)
        if device != "cpu":
            torch.cuda.synchronize()
    except KernelTimeout:
        raise
    except Exception as err:  # noqa: BLE001
        return _exception(kernel, RUN_ERROR, err)
    return compare(kernel, expected, returned, call_args, recipe)


def _exception(kernel: Kernel, status: str, err: BaseException, prefix: str = "") -> Result:
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    code = type(err).__name__
    match = re.search(r"\b(CQ\d{4})\b", first)
    return Result(kernel, status, f"{prefix}{code}: {first}"[:300], match.group(1) if match
                  else code)


POISON_INT = 0x5B


def _poison(args: list[Any], indices: Sequence[int]) -> None:
    """Fill the listed output arguments with values no correct kernel leaves behind."""
    for index in indices:
        tensor = args[index]
        if tensor.dtype.is_floating_point:
            tensor.fill_(float("nan"))
        else:
            tensor.fill_(POISON_INT)


# ----------------------------------------------------------------------------- comparison


def compare(kernel: Kernel, expected: Any, returned: Any, call_args: list[Any],
            recipe: Recipe) -> Result:
    """Compare the kernel's result with the reference, every element."""
    pairs: list[tuple[str, Any, Any]] = []
    if isinstance(expected, dict):
        pairs = [(f"argument {i}", want, call_args[i]) for i, want in sorted(expected.items())]
    elif isinstance(expected, (tuple, list)):
        got = returned if isinstance(returned, (tuple, list)) else [returned]
        if len(got) != len(expected):
            return Result(kernel, WRONG, f"returned {len(got)} values, expected {len(expected)}")
        pairs = [(f"result {i}", want, g) for i, (want, g) in enumerate(zip(expected, got))]
    else:
        pairs = [("result", expected, returned)]
    result = Result(kernel, PASS)
    problems: list[str] = []
    for what, want, got in pairs:
        problem = _compare_one(what, want, got, recipe, result)
        if problem:
            problems.append(problem)
    if problems:
        result.status, result.detail = WRONG, "; ".join(problems)
    return result


def _compare_one(what: str, want: Any, got: Any, recipe: Recipe, result: Result) -> str:
    if not isinstance(got, torch.Tensor):
        if isinstance(want, torch.Tensor):
            return f"{what}: expected a tensor, got {type(got).__name__}"
        return "" if want == got else f"{what}: expected {want!r}, got {got!r}"
    want_t = want if isinstance(want, torch.Tensor) else torch.tensor(want)
    got_t = got.detach().cpu()
    if tuple(got_t.shape) != tuple(want_t.shape):
        return f"{what}: shape {list(got_t.shape)}, expected {list(want_t.shape)}"
    if not (want_t.dtype.is_floating_point or got_t.dtype.is_floating_point):
        result.total += want_t.numel()
        diff = (got_t.to(torch.int64) - want_t.to(torch.int64)).abs()
        bad = diff != 0
        rel = diff.to(torch.float64) / want_t.to(torch.int64).abs().clamp(min=1)
    else:
        g, w = _f64(got_t), _f64(want_t)
        checked = ~torch.isnan(w)  # a NaN in the reference: unspecified, not compared
        result.total += int(checked.sum())
        diff = (g - w).abs()
        diff = torch.where(torch.isinf(g) & (g == w), torch.zeros_like(diff), diff)
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        diff = torch.where(checked, diff, torch.zeros_like(diff))
        bad = diff > recipe.atol + recipe.rtol * w.abs().nan_to_num(0.0, 0.0, 0.0)
        rel = diff / w.abs().nan_to_num(1.0).clamp(min=1e-30)
    count = int(bad.sum())
    if diff.numel():
        result.max_abs = max(result.max_abs, float(diff.max()))
        result.max_rel = max(result.max_rel, float(rel.nan_to_num(float("inf")).max()))
    result.bad += count
    if not count:
        return ""
    index = tuple(int(i) for i in bad.nonzero()[0])
    worst_rel = float(rel.nan_to_num(float("inf")).max())
    return (f"{what}: {count}/{want_t.numel()} elements off (max abs {float(diff.max()):.3g}, "
            f"max rel {worst_rel:.3g}); "
            f"first at {list(index)}: got {got_t[index].item()!r}, "
            f"expected {want_t[index].item()!r}")


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).to(torch.float64) if t.dtype.itemsize == 1 and \
        t.dtype.is_floating_point else t.to(torch.float64)


# ----------------------------------------------------------------------------- report


def evaluate(kernels: list[Kernel], recipes: dict[Key, Recipe], device: str = "cpu",
             timeout: float = 0.0, verbose: bool = False, stream: Any = None,
             engine: str = "triton") -> list[Result]:
    """Run every kernel. Progress goes to ``stream``: a line per kernel with ``verbose``,
    else a counter (rewritten in place on a terminal, every tenth kernel otherwise)."""
    stream = stream if stream is not None else sys.stderr
    live = getattr(stream, "isatty", lambda: False)()
    results: list[Result] = []
    for index, kernel in enumerate(kernels, 1):
        if not verbose and live:
            print(f"\r[{index}/{len(kernels)}] {kernel.name[:70]:<70}", end="", file=stream,
                  flush=True)
        result = run_kernel(kernel, recipe_for(kernel, recipes), device, timeout, engine)
        results.append(result)
        if verbose:
            print(f"[{index}/{len(kernels)}] {result.status:<13} {result.seconds:6.1f}s "
                  f"{kernel.name}  {result.detail[:120]}", file=stream, flush=True)
        elif not live and (index % 10 == 0 or index == len(kernels)):
            print(f"[{index}/{len(kernels)}]", file=stream, flush=True)
    if not verbose and live and kernels:
        print(file=stream)
    return results


@dataclass(frozen=True)
class Totals:
    in_scope: int
    passed: int
    by_status: dict[str, int]

    @property
    def percent(self) -> float:
        return 100.0 * self.passed / self.in_scope if self.in_scope else 0.0


def totals(results: list[Result]) -> Totals:
    counted = [r for r in results if r.status not in EXCLUDED]
    by_status = {s: sum(1 for r in results if r.status == s) for s in (PASS, *FAILURES, *EXCLUDED)}
    return Totals(len(counted), by_status[PASS], by_status)


def kernel_set(rel: str) -> str:
    """The set a kernel belongs to: ``gpu/end2end``, ``cpu/end2end``, ..., ``tutorial``."""
    return "tutorial" if rel.startswith(TUTORIAL_PREFIX) else rel.rsplit("/", 1)[0]


def per_set(results: list[Result]) -> dict[str, Totals]:
    sets: dict[str, list[Result]] = {}
    for r in results:
        sets.setdefault(kernel_set(r.kernel.rel), []).append(r)
    return {name: totals(members) for name, members in sets.items()}


def stale_recipes(kernels: list[Kernel], recipes: dict[Key, Recipe]) -> list[Key]:
    """Recipes whose kernel was not found (a renamed function, a file out of the run)."""
    found = {k.key for k in kernels}
    files = {k.rel for k in kernels}
    return sorted(key for key in recipes
                  if key[0] in files and key[1] != WILDCARD and key not in found)


def render(results: list[Result], device: str, stale: list[Key], verbose: bool = False,
           engine: str = "triton", sources: Sequence[str] = ()) -> str:
    t = totals(results)
    how = "" if engine == "triton" else f" (engine: {engine})"
    out = [f"Upstream end-to-end conformance on {device}{how}", *sources,
           f"in scope: {t.in_scope}, pass: {t.passed} ({t.percent:.1f}%)"]
    out += [f"  {s:<13} {t.by_status[s]:4d}" for s in (PASS, *FAILURES, *EXCLUDED)]
    out += ["by set:"] + [f"  {name:<16} in scope {s.in_scope:3d}, pass {s.passed:3d} ({s.percent:5.1f}%)"
                          for name, s in per_set(results).items()]
    total_time = sum(r.seconds for r in results)
    out.append(f"time: {total_time:.0f} s")
    out += ["", "== Failures by reason (biggest group first) =="]
    out += _failure_groups([r for r in results if r.status in FAILURES])
    for status in FAILURES:
        rows = [r for r in results if r.status == status]
        if rows:
            out += ["", f"== {status} ({len(rows)}) =="]
            out += [_row(r) for r in rows]
    excluded = [r for r in results if r.status in EXCLUDED]
    if excluded:
        out += ["", f"== Out of this backend's scope, not counted ({len(excluded)}) =="]
        out += _excluded_rows(excluded)
    passed = [r for r in results if r.status == PASS]
    out += ["", f"== {PASS} ({len(passed)}) =="]
    out += [f"  {r.kernel.name}  {r.seconds:.1f}s  max abs {r.max_abs:.3g}"
            + (f"  ({r.note})" if verbose and r.note else "") for r in passed]
    if stale:
        out += ["", "== Recipes whose function was not found =="]
        out += [f"  {rel}::{name}" for rel, name in stale]
    return "\n".join(out)


def _excluded_rows(excluded: list[Result]) -> list[str]:
    """One line per file and reason (a whole excluded file is one line)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in excluded:
        groups.setdefault((r.status, r.kernel.rel, r.detail), []).append(r.kernel.function)
    rows = []
    for (status, rel, reason), names in groups.items():
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} functions)" if len(names) > 4 else "")
        rows.append(f"  {status} {rel}::{shown}: {reason}")
    return rows


def _failure_groups(failures: list[Result]) -> list[str]:
    """Failures by code (biggest first), and inside a code by message shape, so that one
    missing feature shows as one line with its count and its kernels under it."""
    groups: dict[str, list[Result]] = {}
    for r in failures:
        groups.setdefault(r.group, []).append(r)
    rows = []
    for group, members in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        rows.append(f"  {group}: {len(members)}")
        shapes: dict[str, list[Result]] = {}
        for r in members:
            shapes.setdefault(message_shape(r), []).append(r)
        for shape, same in sorted(shapes.items(), key=lambda s: (-len(s[1]), s[0])):
            rows.append(f"    [{len(same)}] {shape}")
            rows += [f"        {r.kernel.name}" + (f":{r.line}" if r.line else "")
                     + f"  {r.detail[:120]}" for r in same]
    return rows or ["  (none)"]


def message_shape(result: Result) -> str:
    """A failure's message with the program's own names, numbers and positions taken out."""
    if result.status == WRONG:
        return "wrong values" if "elements off" in result.detail else result.detail[:80]
    text = re.sub(r"^(recipe: )?\w+(Error|Exception): ", r"\1", result.detail)
    text = re.sub(r"'([^']*)'", lambda m: "'_'" if _is_user_name(m.group(1)) else m.group(0),
                  text)
    text = re.sub(r"\b\d+(\.\d+)?\b", "N", text)
    return text[:110]


_KEYWORDS = frozenset({"yield", "break", "continue", "while", "return", "inthreads", "swap"})


def _is_user_name(text: str) -> bool:
    """A quoted name from the program ('buffer', 'M', 'mc[0][1]'), as opposed to a
    construct the message names ('.sqz', '__sinh', 'AssignStmt', 'yield')."""
    if text in _KEYWORDS or text.startswith("__") or "." in text or re.fullmatch(r"[A-Z][a-z]\w*", text):
        return False
    return bool(re.match(r"[A-Za-z_]", text))


def _row(r: Result) -> str:
    where = f":{r.line}" if r.line else ""
    code = f"[{r.code}] " if r.code else ""
    return f"  {r.kernel.name}{where}  {code}{r.detail}  ({r.seconds:.1f}s)"


def to_json(results: list[Result], device: str, stale: list[Key], engine: str = "triton"
            ) -> dict[str, Any]:
    t = totals(results)
    return {
        "device": device,
        "engine": engine,
        "totals": {"in_scope": t.in_scope, "pass": t.passed, "percent": round(t.percent, 2),
                   **t.by_status},
        "sets": {name: {"in_scope": s.in_scope, "pass": s.passed}
                 for name, s in per_set(results).items()},
        "kernels": [{"file": r.kernel.rel, "function": r.kernel.function, "status": r.status,
                     "verdict": r.verdict, "detail": r.detail, "code": r.code, "line": r.line,
                     "seconds": round(r.seconds, 3), "max_abs": r.max_abs, "max_rel": r.max_rel,
                     "bad": r.bad, "total": r.total, "note": r.note} for r in results],
        "stale_recipes": [list(k) for k in stale],
    }


# ----------------------------------------------------------------------------- main


def results_from_json(data: dict[str, Any]) -> list[Result]:
    """The results a ``--json`` file holds (kernels without their source text)."""
    results = []
    for k in data["kernels"]:
        kernel = Kernel(k["file"], k["function"], "", (0, 0))
        results.append(Result(kernel, k["status"], k["detail"], k["code"], k["line"], k["seconds"],
                              k["max_abs"], k["max_rel"], k["bad"], k["total"], k["verdict"],
                              k["note"]))
    return results


def merge(paths: Sequence[Path]) -> tuple[list[Result], str, str, list[Key]]:
    """Results, device, engine and stale recipes of several ``--json`` files (shards)."""
    results: list[Result] = []
    stale: set[Key] = set()
    device = engine = ""
    for path in paths:
        data = json.loads(path.read_text())
        results += results_from_json(data)
        stale |= {(rel, name) for rel, name in data.get("stale_recipes", [])}
        kind = (data["device"], data.get("engine", "triton"))
        if device and kind != (device, engine):
            raise ValueError(f"{path} is a {kind[0]}/{kind[1]} run, the others {device}/{engine}: "
                             "merge the shards of one run only")
        device, engine = kind
    return results, device, engine, sorted(stale)


def changes(results: list[Result], baseline: list[Result]) -> list[str]:
    """Kernels whose status differs from an earlier run's: fixed ones first, then the
    ones that broke, then other changes (one failure turned into another)."""
    before = {r.kernel.key: r for r in baseline}
    fixed, broke, other = [], [], []
    for r in results:
        old = before.get(r.kernel.key)
        if old is None or (old.status, old.code) == (r.status, r.code):
            continue
        line = f"  {old.status}{'/' + old.code if old.code else ''} -> {r.status}" \
               f"{'/' + r.code if r.code else ''}  {r.kernel.name}"
        (fixed if r.status == PASS else broke if old.status == PASS else other).append(line)
    out = [f"== Changes since the baseline: {len(fixed)} fixed, {len(broke)} broken, "
           f"{len(other)} other =="]
    return out + fixed + broke + other


def shard_of(kernels: list[Kernel], shard: str) -> list[Kernel]:
    """Every n-th kernel from the i-th (``shard`` is ``"i/n"``, i from 0), so that several
    processes can share a run."""
    index, count = (int(x) for x in shard.split("/"))
    return kernels[index::count]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.e2e_upstream",
        description="Run the upstream end-to-end kernels through croqtile and check results.")
    parser.add_argument("root", type=Path, nargs="?",
                        help="an upstream Croqtile checkout (work tree)")
    parser.add_argument("--tutorial", type=Path, help="a croqtile-tutorial checkout")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--engine", default="triton", choices=ENGINES,
                        help="'reference': run the reference interpreter instead (checks the "
                             "recipes without the Triton backend)")
    parser.add_argument("--only", action="append", metavar="SUBSTR",
                        help="only kernels whose 'path::function' contains SUBSTR (repeatable)")
    parser.add_argument("--shard", metavar="I/N", help="run every N-th kernel from the I-th")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="report the results of earlier --json runs (shards) together")
    parser.add_argument("--baseline", type=Path, metavar="JSON",
                        help="an earlier --json run: list the kernels whose status changed")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per kernel, compile and run (0: no limit)")
    parser.add_argument("--json", type=Path, help="also write the full result as JSON")
    parser.add_argument("--verbose", action="store_true", help="a line per kernel as it runs")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        results, device, engine, stale = merge(args.merge)
        print(render(results, device, stale, args.verbose, engine))
        _print_changes(results, args.baseline)
        return 0
    if args.root is None or not (args.root / "tests").is_dir():
        print(f"error: {args.root} has no tests/ folder", file=sys.stderr)
        return 2
    recipes = load_recipes()
    kernels = discover(args.root, args.tutorial, recipes)
    if args.only:
        kernels = [k for k in kernels if any(s in k.name for s in args.only)]
    partial = bool(args.only) or bool(args.shard)
    if args.shard:
        kernels = shard_of(kernels, args.shard)
    results = evaluate(kernels, recipes, args.device, args.timeout, args.verbose,
                       engine=args.engine)
    stale = [] if partial else stale_recipes(kernels, recipes)
    sources = [f"upstream: {args.root} {_revision(args.root)}".rstrip()]
    if args.tutorial:
        sources.append(f"tutorial: {args.tutorial} {_revision(args.tutorial)}".rstrip())
    print(render(results, args.device, stale, args.verbose, args.engine, sources))
    _print_changes(results, args.baseline)
    if args.json:
        data = to_json(results, args.device, stale, args.engine)
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


def _print_changes(results: list[Result], baseline: Path | None) -> None:
    if baseline is not None:
        print("\n" + "\n".join(changes(results, merge([baseline])[0])))


if __name__ == "__main__":
    raise SystemExit(main())
