"""Optional: exact expected lines from a built upstream compiler.

Upstream FileCheck lines seldom say where an error is; the upstream compiler does
(``file:LINE.COL: error: message``). Given ``--reference-compiler PATH``, each program is
compiled with its RUN options, the output is matched against its FileCheck directives in
order (as FileCheck would), and every matched directive takes the reported line.
Directives the output does not match keep the inferred lines.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from .corpus import Program
from .lit import RunLine, pattern_regex
from .locate import Expectation, Role
from .source import physical_line

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_DIAG_RE = re.compile(
    r"^(?:(?P<file>[^\s:][^:]*?):)?(?P<line>\d+)\.(?P<col>\d+)(?:-(?:\d+\.)?\d+)?:\s*"
    r"(?P<severity>error|warning|info):\s*(?P<message>.*)$")
_PP_DIAG_RE = re.compile(  # the preprocessor's own format
    r"^\w+: in line (?P<line>\d+): (?P<severity>error|warning|info):\s*(?P<message>.*)$")


@dataclass(frozen=True)
class ReferenceDiagnostic:
    file: str | None
    line: int
    column: int
    severity: str
    message: str
    text: str


def run_reference(compiler: Path, program: Program, default_target: str = "cute",
                  timeout: float = 60.0) -> list[str]:
    """Output lines of the upstream compiler on ``program`` (stderr and stdout). Runs that
    name no target get ``default_target`` (upstream's lit default)."""
    run = _primary_run(program.runs)
    command = [str(compiler), *_options(run, default_target), program.path.name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              cwd=program.path.parent)
    except (OSError, subprocess.TimeoutExpired) as err:
        return [f"<reference compiler failed: {err}>"]
    text = _ANSI_RE.sub("", done.stderr + "\n" + done.stdout)
    return text.splitlines()


def _primary_run(runs: list[RunLine]) -> RunLine:
    return next((run for run in runs if run.negated), runs[0])


def _options(run: RunLine, default_target: str) -> list[str]:
    options = [f"-D{name}={value}" for name, value in run.defines]
    targets = [t for t in run.targets if t != "%target"]
    options += ["-t", targets[0] if targets else default_target]
    if run.arch:
        options.append(f"-arch={run.arch}")
    return options + [flag for flag in run.flags if flag not in ("-o",)]


def parse_output(lines: list[str]) -> list[ReferenceDiagnostic]:
    found = []
    for text in lines:
        match = _DIAG_RE.match(text.strip()) or _PP_DIAG_RE.match(text.strip())
        if match:
            groups = match.groupdict()
            found.append(ReferenceDiagnostic(groups.get("file"), int(groups["line"]),
                                             int(groups.get("col") or 0), groups["severity"],
                                             groups["message"], text.strip()))
    return found


def refine(program: Program, output: list[str]) -> list[Expectation]:
    """``program.expectations`` with lines taken from the reference output where a
    directive matches one of its diagnostics (matched in order, like FileCheck). A summary
    line (``Parsing failed ...``) stands for every error of the output."""
    lines = program.path.read_text(errors="replace").splitlines()
    diagnostics = [d for d in parse_output(output) if 1 <= d.line <= len(lines) or d.file]
    errors = [d for d in diagnostics if d.severity == "error"]
    cursor = 0
    refined: list[Expectation] = []
    for expectation in program.expectations:
        if expectation.role is Role.SUMMARY:
            hits = errors
        else:
            regex = pattern_regex(expectation.message, expectation.directive_line)
            pool = errors if expectation.role is Role.ERROR else diagnostics
            hits = _matches(pool, regex, cursor, expectation.count)
            if hits and pool is errors:
                cursor = errors.index(hits[-1]) + 1
        if not hits:
            refined.append(expectation)
            continue
        located = tuple(dict.fromkeys(_physical(lines, program, d) for d in hits))
        refined.append(replace(expectation, lines=located, how="reference"))
    return refined


def _physical(lines: list[str], program: Program, diagnostic: ReferenceDiagnostic) -> int:
    name = None if diagnostic.file in (None, program.path.name) else diagnostic.file
    return physical_line(lines, name, diagnostic.line) or diagnostic.line


def _matches(diagnostics: list[ReferenceDiagnostic], regex: re.Pattern[str], cursor: int,
             count: int) -> list[ReferenceDiagnostic]:
    ordered = diagnostics[cursor:] + diagnostics[:cursor]
    hits = [d for d in ordered if regex.search(d.text)]
    return hits[:count]
