"""Rejection conformance against the upstream Croqtile negative tests.

    python -m tests.conformance.reject_upstream /path/to/croqtile-checkout \\
        [--json out.json] [--verbose] [--only check --only parse ...] \\
        [--reference-compiler /path/to/upstream/choreo]

Reads the must-reject programs of an upstream checkout at run time (``tests/check``,
``tests/parse``, ``tests/infer``, ``tests/gpu/check``, ``tests/pp``, the failing
``tests/*/codegen`` programs and ``tests/amdgpu/check``; see ``corpus.py``), expands
``-D`` variants, works out where each expected error is (``locate.py``), runs
``croqtile.runtime.driver.check_source`` on each program and scores it:

* ``SAME-LINE``: an error of ours sits on a line where upstream expects one;
* ``OTHER-LINE``: we reject, but on no expected line;
* ``ACCEPTED``: no error at all (a miss);
* ``CRASH``: an internal compiler error (CQ0901).

The percentage is SAME-LINE over the applicable programs. Every non-SAME-LINE program is
listed with its expected lines and messages and what we reported; so is every expected
error that a SAME-LINE program still misses. Nothing is copied into this repository.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from croqtile.runtime.driver import check_source

from .corpus import SOURCES, Program, Skipped, discover
from .locate import Expectation
from .reference import refine, run_reference

SAME_LINE = "SAME-LINE"
OTHER_LINE = "OTHER-LINE"
ACCEPTED = "ACCEPTED"
CRASH = "CRASH"
STATUSES = (SAME_LINE, OTHER_LINE, ACCEPTED, CRASH)
CRASH_CODE = "CQ0901"
CASCADE_CODE = "CQ0201"
WEAK_BACKEND_PREFIX = "CQ07"


@dataclass(frozen=True)
class Reported:
    """One diagnostic of ours, reduced to what the report needs."""

    code: str
    severity: str
    line: int
    column: int
    file: str
    message: str

    def render(self) -> str:
        return f"{self.line}:{self.column} {self.code} {self.message}"


@dataclass
class Outcome:
    program: Program
    status: str
    reported: list[Reported]
    matched: list[bool] = field(default_factory=list)
    inferred: list[Expectation] = field(default_factory=list)  # before --reference-compiler
    weak: bool = False  # SAME-LINE only through a backend limitation or a cascade error

    @property
    def errors(self) -> list[Reported]:
        return [r for r in self.reported if r.severity == "error"]


# ----------------------------------------------------------------------------- scoring


def run_program(program: Program) -> list[Reported]:
    diagnostics = check_source(program.text, filename=program.rel, defines=program.defines)
    return [Reported(d.code, d.severity, d.line, d.column, d.filename, d.message)
            for d in diagnostics]


def matches(expectation: Expectation, error: Reported) -> bool:
    """Whether ``error`` is on a line ``expectation`` allows (a ``#line``-remapped
    expectation must be reported with the remapped file and line)."""
    if expectation.reported is not None:
        name, line = expectation.reported
        same_file = name is None or Path(error.file).name == Path(name).name
        return same_file and error.line == line
    return error.line in expectation.lines


def is_weak(expectation: Expectation, error: Reported) -> bool:
    """Our error sits on the expected line but says nothing about the rule: a construct
    the Triton backend does not support (CQ07xx), or a name left undeclared by an earlier
    failure (CQ0201) where upstream complains about something else."""
    if error.code.startswith(WEAK_BACKEND_PREFIX):
        return True
    return error.code == CASCADE_CODE and not re.search(
        r"before declaration|not defined|undefined|undeclared", expectation.message)


def score(program: Program, reported: list[Reported]) -> Outcome:
    errors = [r for r in reported if r.severity == "error"]
    hits = [[err for err in errors if matches(e, err)] for e in program.expectations]
    matched = [bool(h) for h in hits]
    if any(err.code == CRASH_CODE for err in errors):
        status = CRASH
    elif any(matched):
        status = SAME_LINE
    elif errors:
        status = OTHER_LINE
    else:
        status = ACCEPTED
    weak = status == SAME_LINE and all(
        is_weak(e, err) for e, h in zip(program.expectations, hits) for err in h)
    return Outcome(program, status, reported, matched, weak=weak)


def evaluate(programs: list[Program], reference: Path | None = None) -> list[Outcome]:
    outcomes = []
    for program in programs:
        inferred = list(program.expectations)
        if reference is not None and program.applicable:
            program.expectations = refine(program, run_reference(reference, program))
        outcome = (score(program, run_program(program)) if program.applicable
                   else Outcome(program, "N/A", []))
        outcome.inferred = inferred
        outcomes.append(outcome)
    return outcomes


def agreement(outcomes: list[Outcome]) -> tuple[int, int, int]:
    """(reference-located expectations, of which the inferred lines include the reference
    line, expectations the reference output did not match)."""
    located = agreed = unmatched = 0
    for o in outcomes:
        for guess, final in zip(o.inferred, o.program.expectations):
            if final.how != "reference":
                unmatched += o.program.applicable
                continue
            located += 1
            agreed += bool(set(final.lines) & set(guess.lines))
    return located, agreed, unmatched


# ----------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Totals:
    programs: int
    files: int
    applicable: int
    by_status: dict[str, int]
    expected: int
    expected_matched: int
    weak: int

    @property
    def percent(self) -> float:
        return 100.0 * self.by_status.get(SAME_LINE, 0) / self.applicable if self.applicable else 0.0


def totals(outcomes: list[Outcome]) -> Totals:
    scored = [o for o in outcomes if o.program.applicable]
    by_status = {s: sum(1 for o in scored if o.status == s) for s in STATUSES}
    expected = sum(e.count for o in scored for e in o.program.expectations)
    expected_matched = sum(e.count for o in scored
                           for e, hit in zip(o.program.expectations, o.matched) if hit)
    weak = sum(1 for o in scored if o.weak)
    return Totals(len(outcomes), len({o.program.rel for o in outcomes}), len(scored), by_status,
                  expected, expected_matched, weak)


def render(outcomes: list[Outcome], skipped: list[Skipped], root: Path, verbose: bool) -> str:
    t = totals(outcomes)
    out = [f"Upstream rejection conformance: {root} {_revision(root)}".rstrip(),
           f"negative programs: {t.programs} from {t.files} files; applicable {t.applicable}; "
           f"not applicable {t.programs - t.applicable}; skipped files {len(skipped)}",
           ""]
    for status in STATUSES:
        count = t.by_status[status]
        share = 100.0 * count / t.applicable if t.applicable else 0.0
        out.append(f"  {status:<11} {count:4d}  ({share:5.1f}%)")
    out.append(f"rejected with an error on an expected line: {t.by_status[SAME_LINE]}/"
               f"{t.applicable} = {t.percent:.1f}%")
    strict = t.by_status[SAME_LINE] - t.weak
    share = 100.0 * strict / t.applicable if t.applicable else 0.0
    out.append(f"  of which only through a backend-limitation (CQ07xx) or cascade (CQ0201) "
               f"error: {t.weak}; by a language check: {strict}/{t.applicable} = {share:.1f}%")
    out.append(f"expected errors matched on their line (all programs): "
               f"{t.expected_matched}/{t.expected}")
    located, agreed, unmatched = agreement(outcomes)
    if located:
        out.append(f"reference compiler: {located} expected errors located by it; the inferred "
                   f"lines held its line for {agreed}; {unmatched} not found in its output "
                   f"(inferred lines kept)")
    out += ["", "== Misses (not SAME-LINE) =="]
    out += _miss_table([o for o in outcomes if o.program.applicable and o.status != SAME_LINE])
    out += ["", "== SAME-LINE only through a backend limitation or a cascade =="]
    out += _miss_table([o for o in outcomes if o.weak])
    out += ["", "== Expected errors still missed inside SAME-LINE programs =="]
    out += _partial_table([o for o in outcomes if o.status == SAME_LINE and not all(o.matched)])
    out += ["", "== Not applicable (target or code-generator policy) =="]
    out += [f"  {o.program.name}: {o.program.reason}" for o in outcomes if not o.program.applicable]
    out += ["", "== Skipped files (not rejection tests) =="]
    out += [f"  {s.rel}: {s.reason}" for s in skipped]
    if verbose:
        out += ["", "== All programs =="]
        out += [line for o in outcomes if o.program.applicable for line in _program_block(o)]
    return "\n".join(out)


def _miss_table(misses: list[Outcome]) -> list[str]:
    rows: list[str] = []
    for o in misses:
        rows += _program_block(o)
    return rows or ["  (none)"]


def _program_block(o: Outcome) -> list[str]:
    rows = [f"- {o.program.name}  [{o.status}]"]
    for expectation, hit in zip(o.program.expectations, _matched(o)):
        mark = "ok " if hit else "-- "
        where = _where(expectation)
        count = f" x{expectation.count}" if expectation.count > 1 else ""
        rows.append(f"    {mark}expect {where} ({expectation.how}){count}: {expectation.message}")
    errors = o.errors
    rows += [f"    ours: {r.render()}" for r in errors[:12]] or ["    ours: (no error)"]
    if len(errors) > 12:
        rows.append(f"    ours: ... {len(errors) - 12} more")
    return rows


def _matched(o: Outcome) -> list[bool]:
    return o.matched or [False] * len(o.program.expectations)


def _partial_table(partials: list[Outcome]) -> list[str]:
    rows: list[str] = []
    for o in partials:
        rows.append(f"- {o.program.name}")
        for expectation, hit in zip(o.program.expectations, o.matched):
            if not hit:
                rows.append(f"    -- expect {_where(expectation)} ({expectation.how}): "
                            f"{expectation.message}")
    return rows or ["  (none)"]


def _where(expectation: Expectation) -> str:
    if expectation.reported is not None:
        name, line = expectation.reported
        return f"{name or ''}:{line} (physical line {expectation.lines[0]})"
    lines = expectation.lines
    shown = ",".join(str(n) for n in lines[:8]) + (",..." if len(lines) > 8 else "")
    return f"line {shown}"


def _revision(root: Path) -> str:
    """``@ <commit>`` of the checkout at ``root``; empty when ``root`` is not the top of a
    git work tree (a copy of the files inside some other repository has no revision)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel",
                               "--short", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root.resolve():
        return ""
    return f"@ {lines[1]}"


def to_json(outcomes: list[Outcome], skipped: list[Skipped], root: Path) -> dict[str, Any]:
    t = totals(outcomes)
    return {
        "root": str(root),
        "totals": {"programs": t.programs, "files": t.files, "applicable": t.applicable,
                   **t.by_status, "percent_same_line": round(t.percent, 2),
                   "same_line_weak": t.weak,
                   "expected_errors": t.expected, "expected_errors_matched": t.expected_matched},
        "programs": [_program_json(o) for o in outcomes],
        "skipped": [{"file": s.rel, "reason": s.reason} for s in skipped],
    }


def _program_json(o: Outcome) -> dict[str, Any]:
    p = o.program
    return {
        "file": p.rel, "category": p.category, "variant": p.variant, "defines": p.defines,
        "applicable": p.applicable, "reason": p.reason, "status": o.status, "weak": o.weak,
        "expected": [{"lines": list(e.lines), "how": e.how, "count": e.count,
                      "message": e.message, "directive_line": e.directive_line,
                      "reported_as": list(e.reported) if e.reported else None,
                      "matched": hit}
                     for e, hit in zip(p.expectations, _matched(o))],
        "excluded": [{"message": e.message, "reason": r} for e, r in p.excluded],
        "ours": [asdict(r) for r in o.reported],
    }


# ----------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.reject_upstream",
        description="Score croqtile's rejections against the upstream negative tests.")
    parser.add_argument("root", type=Path, help="an upstream Croqtile checkout (work tree)")
    parser.add_argument("--json", type=Path, help="also write the full result as JSON")
    parser.add_argument("--verbose", action="store_true", help="list every program")
    parser.add_argument("--only", action="append", choices=SOURCES, metavar="CATEGORY",
                        help=f"only these tests/ folders (repeatable): {', '.join(SOURCES)}")
    parser.add_argument("--reference-compiler", type=Path,
                        help="a built upstream compiler: take expected lines from its output")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.root / "tests").is_dir():
        print(f"error: {args.root} has no tests/ folder", file=sys.stderr)
        return 2
    programs, skipped = discover(args.root, args.only)
    outcomes = evaluate(programs, args.reference_compiler)
    print(render(outcomes, skipped, args.root, args.verbose))
    if args.json:
        args.json.write_text(json.dumps(to_json(outcomes, skipped, args.root), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
