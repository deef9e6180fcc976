"""The upstream negative corpus: files -> must-reject programs -> expectations.

A *program* is one file compiled with one set of ``-D`` defines and checked against one
set of FileCheck prefixes. RUN lines that differ only in target or architecture fold into
the same program. A program is *negative* when a run is prefixed with ``not`` or when
its FileCheck lines expect an ``error``.

Applicability: a program is scored only if its errors are language rules. Rules that
belong to one code generator or chip (named in the message: SM_86, SM_90A, CuTe, HIP;
the CUDA target's async-copy directions; every program that is only ever compiled for
HIP) are recorded as not applicable with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .lit import Directive, RunLine, directives, run_lines
from .locate import Expectation, Role, expectations, roles
from .source import SourceFile
from .verified import apply as apply_verified

# tests/<dir> folders holding negative programs, in report order.
SOURCES: tuple[str, ...] = (
    "check", "parse", "infer", "gpu/check", "pp",
    "gpu/codegen", "cpu/codegen", "amdgpu/codegen", "amdgpu/check",
)

# A message that names one code generator or chip is that target's policy.
_TARGET_POLICY: tuple[tuple[str, str], ...] = (
    (r"\bSM_?\d+[A-Za-z]?\b", "chip resource/shape policy ({0})"),
    (r"\bCuTe\b|\bcute\b", "CuTe code-generator limitation ({0})"),
    (r"\bHIP\b|target: hip\b", "HIP target rule ({0})"),
    (r"current architecture", "chip MMA-shape policy ({0})"),
    (r"\bGPU does not allow the (?:async|sync) copy\b",
     "CUDA target copy-direction policy ({0})"),
)


@dataclass
class Program:
    """One must-reject program and what upstream expects of it."""

    path: Path
    rel: str
    category: str
    defines: dict[str, str]
    runs: list[RunLine]
    directives: list[Directive]
    expectations: list[Expectation] = field(default_factory=list)
    excluded: list[tuple[Expectation, str]] = field(default_factory=list)
    applicable: bool = True
    reason: str = ""

    @property
    def variant(self) -> str:
        return " ".join(f"-D{k}" if v == "1" else f"-D{k}={v}" for k, v in self.defines.items())

    @property
    def name(self) -> str:
        return f"{self.rel} [{self.variant}]" if self.variant else self.rel

    @property
    def text(self) -> str:
        return self.path.read_text(errors="replace")


@dataclass(frozen=True)
class Skipped:
    """A file that looks negative but is not a rejection test, and why."""

    rel: str
    reason: str


def discover(root: Path, only: list[str] | None = None) -> tuple[list[Program], list[Skipped]]:
    """All negative programs under ``root/tests/<SOURCES>`` (``only``: those folders)."""
    programs: list[Program] = []
    skipped: list[Skipped] = []
    for category in SOURCES:
        if only and category not in only:
            continue
        folder = root / "tests" / category
        for path in sorted(folder.rglob("*.co")) if folder.is_dir() else []:
            rel = path.relative_to(root).as_posix()
            found, why = file_programs(path, rel, category)
            programs.extend(found)
            if why:
                skipped.append(Skipped(rel, why))
    return programs, skipped


def file_programs(path: Path, rel: str, category: str) -> tuple[list[Program], str]:
    """The negative programs of one file, or a reason why a negative-looking file has none."""
    lines = path.read_text(errors="replace").splitlines()
    runs = run_lines(lines)
    compiler_runs = [run for run in runs if run.is_compiler_run]
    if not compiler_runs:
        return [], _why_not_a_test(lines, runs)
    programs: list[Program] = []
    reasons: list[str] = []
    for key, group in _group_runs(compiler_runs).items():
        defines, prefixes = key
        program = build_program(path, rel, category, lines, group, dict(defines), prefixes)
        if isinstance(program, Program):
            programs.append(program)
        elif program:
            reasons.append(program)
    return programs, "" if programs else "; ".join(dict.fromkeys(reasons))


def _why_not_a_test(lines: list[str], runs: list[RunLine]) -> str:
    looks_negative = any(run.negated for run in runs) or any(
        re.search(r"(?<![\w-])CHECK(?:-(?!NOT)[\w-]+)?:.*\berror\b|\wRUN:\s*not\b", line)
        for line in lines)
    if not looks_negative:
        return ""
    if runs:
        return f"no compiler run (only {', '.join(sorted({r.tool for r in runs}))})"
    if any(re.search(r"\wRUN:", line) for line in lines):
        return "disabled upstream (its RUN line is commented out as '1RUN:')"
    if any(re.search(r"\bCHECK\b.*error", line) for line in lines):
        return "no RUN line"
    return ""


def _group_runs(runs: list[RunLine]) -> dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]],
                                             list[RunLine]]:
    groups: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], list[RunLine]] = {}
    for run in runs:
        groups.setdefault((run.defines, run.prefixes), []).append(run)
    return groups


def build_program(path: Path, rel: str, category: str, lines: list[str], runs: list[RunLine],
                  defines: dict[str, str], prefixes: tuple[str, ...]) -> Program | str:
    """A negative program, or (a positive test) '' or (a skipped negative) the reason."""
    source = SourceFile(lines, defines)
    found = directives(lines, prefixes)
    negated = any(run.negated for run in runs)
    kinds = roles(found, source, negated)
    has_error = Role.ERROR in kinds
    if not negated and not has_error:
        return ""
    says_error = any(d.positive and re.search(r"\berror\b", d.pattern) for d in found)
    if not says_error and any(flag.startswith("-pa=") for run in runs for flag in run.flags):
        return "analysis report (exits non-zero by design; expects no error)"
    program = Program(path, rel, category, defines, runs, found)
    program.expectations = apply_verified(
        rel, program.variant, expectations(found, source, negated, use_warnings=not has_error))
    classify(program)
    return program


def classify(program: Program) -> None:
    """Split target-policy expectations off; a program left with none is not applicable."""
    keep: list[Expectation] = []
    for expectation in program.expectations:
        reason = target_policy(expectation.message)
        if reason:
            program.excluded.append((expectation, reason))
        else:
            keep.append(expectation)
    program.expectations = keep
    if keep and all(e.role is Role.WARNING for e in keep):
        program.applicable = False
        program.reason = ("expects only warnings: the non-zero exit upstream comes from a later "
                          "stage (code generator or host compiler), not from a language rule")
        return
    hip_only = all(t == "hip" for run in program.runs for t in run.targets or ("",))
    if hip_only:
        program.applicable, program.reason = False, "HIP target rule (compiled for -t hip only)"
    elif not keep and program.excluded:
        program.applicable = False
        program.reason = "; ".join(dict.fromkeys(reason for _, reason in program.excluded))


def target_policy(message: str) -> str:
    for regex, reason in _TARGET_POLICY:
        match = re.search(regex, message)
        if match:
            return reason.format(match.group(0))
    return ""
