"""Reading lit test files: RUN lines, FileCheck directives and FileCheck patterns.

Only the subset that the upstream Croqtile suite uses is understood:

* ``RUN:`` lines (with ``\\`` continuation), split into the compiler invocation and the
  ``FileCheck`` invocation of a pipe; ``not`` in front of the compiler marks a run that
  must fail.
* Directives ``PREFIX:``, ``PREFIX-NEXT/SAME/DAG/NOT/EMPTY/LABEL:`` and
  ``PREFIX-COUNT-n:`` for the prefixes the run selects (``--check-prefix(es)``).
* Patterns with ``{{regex}}`` blocks, ``[[VAR:regex]]`` captures, ``[[VAR]]`` uses and
  ``[[@LINE+n]]`` line expressions.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

RUN_RE = re.compile(r"(?<![\w-])RUN:(.*)$")
DIRECTIVE_KINDS = ("NEXT", "SAME", "DAG", "NOT", "EMPTY", "LABEL")
COMPILER_TOOLS = frozenset({"choreo", "croqtile", "croq"})


@dataclass(frozen=True)
class RunLine:
    """One RUN command (after joining continuation lines)."""

    line: int
    command: str
    tool: str
    negated: bool
    defines: tuple[tuple[str, str], ...]
    targets: tuple[str, ...]
    arch: str | None
    flags: tuple[str, ...]
    prefixes: tuple[str, ...]
    filecheck: bool

    @property
    def is_compiler_run(self) -> bool:
        return self.tool in COMPILER_TOOLS


@dataclass(frozen=True)
class Directive:
    """One FileCheck directive: ``// PREFIX[-KIND]: pattern`` on physical line ``line``."""

    line: int
    prefix: str
    kind: str
    count: int
    pattern: str

    @property
    def positive(self) -> bool:
        return self.kind not in ("NOT", "EMPTY")


# ----------------------------------------------------------------------------- RUN lines


def run_lines(lines: list[str]) -> list[RunLine]:
    """All RUN lines of a file (1-based ``lines`` index = physical line - 1)."""
    runs: list[RunLine] = []
    pending: list[str] = []
    start = 0
    for number, text in enumerate(lines, 1):
        match = RUN_RE.search(text)
        if not match:
            continue
        body = match.group(1).rstrip()
        if not pending:
            start = number
        if body.endswith("\\"):
            pending.append(body[:-1])
            continue
        pending.append(body)
        runs.append(parse_run(start, " ".join(part.strip() for part in pending)))
        pending = []
    return runs


def parse_run(line: int, command: str) -> RunLine:
    segments = [seg.strip() for seg in command.split("|")]
    tokens = _tokens(segments[0])
    negated = bool(tokens) and tokens[0] == "not"
    if negated:
        tokens = tokens[1:]
    tool = tokens[0] if tokens else ""
    defines, targets, arch, flags = _compiler_options(tokens[1:])
    filecheck = [seg for seg in segments[1:] if _tokens(seg)[:1] == ["FileCheck"]]
    prefixes = _check_prefixes(_tokens(filecheck[0])) if filecheck else ("CHECK",)
    return RunLine(line, command, tool, negated, defines, targets, arch, flags, prefixes,
                   bool(filecheck))


def _tokens(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def _compiler_options(
        tokens: list[str]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], str | None, tuple[str, ...]]:
    defines: list[tuple[str, str]] = []
    targets: list[str] = []
    arch: str | None = None
    flags: list[str] = []
    it = iter(tokens)
    for tok in it:
        if tok == "-D":
            defines.append(_define(next(it, "")))
        elif tok.startswith("-D"):
            defines.append(_define(tok[2:]))
        elif tok == "-t":
            targets.append(next(it, ""))
        elif tok.startswith("-t="):
            targets.append(tok[3:])
        elif tok == "%target":
            targets.append("%target")
        elif tok.startswith(("-arch=", "--arch=")):
            arch = tok.split("=", 1)[1]
        elif tok == "-o":
            next(it, "")
        elif tok.startswith("-") and not tok.startswith("-o"):
            flags.append(tok)
    return tuple(defines), tuple(targets), arch, tuple(flags)


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    return name, value if value else "1"


def _check_prefixes(tokens: list[str]) -> tuple[str, ...]:
    prefixes: list[str] = []
    it = iter(tokens[1:])
    for tok in it:
        name, eq, value = tok.partition("=")
        if name.lstrip("-") not in ("check-prefix", "check-prefixes"):
            continue
        value = value if eq else next(it, "")
        prefixes.extend(p for p in value.split(",") if p)
    return tuple(prefixes) or ("CHECK",)


# ----------------------------------------------------------------------------- directives


def directives(lines: list[str], prefixes: tuple[str, ...]) -> list[Directive]:
    """The directives of ``prefixes`` in file order."""
    if not prefixes:
        return []
    alternatives = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
    regex = re.compile(
        rf"(?<![\w-])({alternatives})(?:-(COUNT-(\d+)|{'|'.join(DIRECTIVE_KINDS)}))?:(.*)$")
    found: list[Directive] = []
    for number, text in enumerate(lines, 1):
        match = regex.search(text)
        if not match:
            continue
        prefix, kind, count, pattern = match.group(1, 2, 3, 4)
        if kind and kind.startswith("COUNT-"):
            kind = "COUNT"
        found.append(Directive(number, prefix, kind or "", int(count) if count else 1,
                               pattern.strip()))
    return found


# ----------------------------------------------------------------------------- patterns

_BLOCK_RE = re.compile(r"\{\{(.*?)\}\}|\[\[(.*?)\]\]")


def pattern_regex(pattern: str, directive_line: int = 0) -> re.Pattern[str]:
    """A Python regex that matches the same text as the FileCheck ``pattern`` (substring
    search; runs of horizontal whitespace match any run, as FileCheck does by default)."""
    parts: list[str] = []
    pos = 0
    for match in _BLOCK_RE.finditer(pattern):
        parts.append(_literal(pattern[pos:match.start()]))
        regex, subst = match.group(1), match.group(2)
        parts.append(f"(?:{regex})" if regex is not None else _substitution(subst, directive_line))
        pos = match.end()
    parts.append(_literal(pattern[pos:]))
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return r"\s+".join(re.escape(chunk) for chunk in re.split(r"[ \t]+", text))


def _substitution(body: str, directive_line: int) -> str:
    line = line_expression(body, directive_line)
    if line is not None:
        return str(line)
    name, colon, regex = body.partition(":")
    return f"(?:{regex})" if colon else ".*?"


def line_expression(body: str, directive_line: int) -> int | None:
    """``@LINE``, ``@LINE+n`` or ``@LINE-n`` (also with ``#`` in front) as a number."""
    match = re.fullmatch(r"#?\s*@LINE\s*(?:([+-])\s*(\d+))?\s*", body)
    if not match:
        return None
    sign, amount = match.groups()
    offset = int(amount) if amount else 0
    return directive_line + (offset if sign == "+" else -offset)


def literal_text(pattern: str, gap: str = " ") -> str:
    """``pattern`` with every regex or substitution block replaced by ``gap``, whitespace
    collapsed."""
    return " ".join(_BLOCK_RE.sub(gap, pattern).split())


def line_expressions(pattern: str, directive_line: int) -> list[int]:
    """Lines named by ``[[@LINE...]]`` blocks in ``pattern``."""
    lines = []
    for match in _BLOCK_RE.finditer(pattern):
        if match.group(2) is not None:
            line = line_expression(match.group(2), directive_line)
            if line is not None:
                lines.append(line)
    return lines
