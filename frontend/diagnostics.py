"""Diagnostics: located messages with a code, rendered rustc-style with a caret.

    error[CQ0201]: symbol 'y' is used before declaration
      --> kernel.co:3:7
       |
     3 |   x = y + 1;
       |       ^
       = hint: ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .codes import CODES, Severity
from .source import Location, SourceMap, Span


@dataclass(frozen=True, slots=True)
class Note:
    message: str
    location: Location | None = None
    source_line: str = ""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity_kind: Severity
    message: str
    location: Location
    source_line: str = ""
    hint: str | None = None
    notes: tuple[Note, ...] = ()

    @property
    def severity(self) -> str:
        return self.severity_kind.value

    @property
    def line(self) -> int:
        return self.location.line

    @property
    def column(self) -> int:
        return self.location.column

    @property
    def filename(self) -> str:
        return self.location.filename

    def render(self) -> str:
        loc = self.location
        lines = [f"{self.severity}[{self.code}]: {self.message}"]
        lines.append(f"  --> {loc.filename}:{loc.line}:{loc.column}")
        lines.extend(_excerpt(loc, self.source_line))
        for note in self.notes:
            if note.location is None:
                lines.append(f"   = note: {note.message}")
            else:
                nl = note.location
                lines.append(f"note: {note.message}")
                lines.append(f"  --> {nl.filename}:{nl.line}:{nl.column}")
                lines.extend(_excerpt(nl, note.source_line))
        if self.hint:
            lines.append(f"   = hint: {self.hint}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": loc.filename,
            "line": loc.line,
            "column": loc.column,
            "end_line": loc.end_line,
            "end_column": loc.end_column,
            "hint": self.hint,
            "notes": [
                {"message": n.message,
                 "line": n.location.line if n.location else None,
                 "column": n.location.column if n.location else None}
                for n in self.notes
            ],
        }

    def __str__(self) -> str:
        return self.render()


def _excerpt(loc: Location, source_line: str) -> list[str]:
    if not source_line:
        return []
    gutter = " " * len(str(loc.line))
    width = loc.end_column - loc.column if loc.end_line == loc.line else len(source_line) - loc.column + 1
    width = max(1, width)
    column = loc.column
    if len(source_line) > _EXCERPT_WIDTH:  # a long line shows around the caret, not a megabyte
        start = max(0, min(column - 1 - _EXCERPT_WIDTH // 2, len(source_line) - _EXCERPT_WIDTH))
        shown = source_line[start:start + _EXCERPT_WIDTH]
        head, tail = ("..." if start else ""), ("..." if start + _EXCERPT_WIDTH < len(source_line)
                                                else "")
        source_line = head + shown + tail
        column = column - start + len(head)
        width = min(width, len(shown) + len(head) - column + 1)
    caret = " " * (column - 1) + "^" * max(1, width)
    return [f" {gutter} |", f" {loc.line} | {source_line}", f" {gutter} | {caret}"]


_EXCERPT_WIDTH = 160  # characters of a source line shown under a diagnostic, at most


class CompileError(Exception):
    """Raised when a program has errors. ``.diagnostics`` lists all of them."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        return "\n\n".join(d.render() for d in self.diagnostics)

    def __str__(self) -> str:
        return self.render()

    def to_dict(self) -> dict[str, Any]:
        return {"diagnostics": [d.to_dict() for d in self.diagnostics]}


@dataclass
class Reporter:
    """Collects the diagnostics of one compile; stages report, the driver raises.

    At most ``max_errors`` errors and as many warnings are kept (separately, so that
    warnings never crowd out an error); the rest are counted in ``dropped``."""

    source_map: SourceMap
    diagnostics: list[Diagnostic] = field(default_factory=list)
    max_errors: int = 100
    dropped: int = 0
    _kept: dict[Severity, int] = field(default_factory=dict, repr=False)
    _lines: dict[tuple[int, int], str] = field(default_factory=dict, repr=False)

    def report(self, code: str, span: Span, *, notes: tuple[tuple[str, Span | None], ...] = (),
               hint: str | None = None, **fields: Any) -> Diagnostic | None:
        """The diagnostic, or None when it is past the limit of its severity: it is then not
        even located, so that 5,000,000 bad characters on one line cost little each."""
        entry = CODES[code]
        kept = self._kept.get(entry.severity, 0)
        if kept >= self.max_errors:
            self.dropped += 1
            return None
        self._kept[entry.severity] = kept + 1
        message = entry.template.format(**fields)
        if hint is None and entry.hint is not None:
            try:
                hint = entry.hint.format(**fields) or None
            except (KeyError, IndexError):
                hint = None
        loc = self.source_map.locate(span)
        diag = Diagnostic(
            code=code,
            severity_kind=entry.severity,
            message=message,
            location=loc,
            source_line=self._line_text(loc.physical_line or loc.line),
            hint=hint,
            notes=tuple(self._note(text, note_span) for text, note_span in notes),
        )
        self.diagnostics.append(diag)
        return diag

    def _note(self, text: str, span: Span | None) -> Note:
        if span is None:
            return Note(text)
        loc = self.source_map.locate(span)
        return Note(text, loc, self._line_text(loc.physical_line or loc.line))

    def _line_text(self, line: int) -> str:
        """One copy of each line for all its diagnostics (a minified line may be 10 MB)."""
        source = self.source_map.source
        key = (id(source), line)
        text = self._lines.get(key)
        if text is None:
            text = self._lines[key] = source.line_text(line)
        return text

    def checkpoint(self) -> tuple[int, dict[Severity, int], int]:
        """What has been reported so far, to go back to with ``rollback`` (a stage that
        walks a function a second time reports its findings once)."""
        return len(self.diagnostics), dict(self._kept), self.dropped

    def rollback(self, mark: tuple[int, dict[Severity, int], int]) -> None:
        count, kept, dropped = mark
        del self.diagnostics[count:]
        self._kept = dict(kept)
        self.dropped = dropped

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity_kind is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        """The diagnostics that do not stop the compile: warnings and notes."""
        return [d for d in self.diagnostics if d.severity_kind is not Severity.ERROR]

    def has_errors(self) -> bool:
        return any(d.severity_kind is Severity.ERROR for d in self.diagnostics)

    def raise_if_errors(self) -> None:
        if self.has_errors():
            raise CompileError(self.errors + self.warnings)
