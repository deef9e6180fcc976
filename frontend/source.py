"""Source text, spans and the map from preprocessed offsets back to the user's text.

Every stage after the preprocessor works on the *preprocessed* text of a file. A
``Span`` is a half-open range of offsets into that text. A ``SourceMap`` turns such
offsets back into offsets of the original text, and ``Source`` turns those into
1-based lines and columns, so diagnostics always point at what the user wrote.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """Half-open range ``[start, end)`` of offsets into the preprocessed text."""

    start: int
    end: int

    def join(self, other: Span) -> Span:
        return Span(min(self.start, other.start), max(self.end, other.end))


NO_SPAN = Span(0, 0)


@dataclass(frozen=True, slots=True)
class Location:
    """A resolved position in the user's original text (1-based line and column).

    ``line``/``filename`` follow ``#line`` directives; ``physical_line`` is the line of the
    text itself (for quoting it)."""

    filename: str
    line: int
    column: int
    end_line: int
    end_column: int
    physical_line: int = 0


@dataclass(frozen=True, slots=True)
class LineDirective:
    """``#line N "file"``: physical line ``next_line`` is line ``line`` of ``filename``
    (None keeps the current file name)."""

    next_line: int
    line: int
    filename: str | None


@dataclass(frozen=True)
class Source:
    """The user's original text, with a line index built once."""

    text: str
    filename: str = "<string>"
    line_offset: int = 0  # added to every line: for sources embedded in a bigger file
    column_offset: int = 0  # added to columns of the first line only (embedded sources)
    _line_starts: list[int] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        starts = [0]
        text = self.text
        pos = text.find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        self._line_starts.extend(starts)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of an offset of the original text."""
        offset = max(0, min(offset, len(self.text)))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        column = offset - self._line_starts[index] + 1
        if index == 0:
            column += self.column_offset
        return index + 1 + self.line_offset, column

    def line_text(self, line: int) -> str:
        """Text of a 1-based line (as reported by ``line_col``), without newline."""
        index = line - 1 - self.line_offset
        if not 0 <= index < len(self._line_starts):
            return ""
        start = self._line_starts[index]
        end = self.text.find("\n", start)
        text = self.text[start:] if end == -1 else self.text[start:end]
        if index == 0 and self.column_offset:
            text = " " * self.column_offset + text
        return text.rstrip("\r")


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of preprocessed text and where it came from.

    ``verbatim`` runs were copied character by character from ``orig_start``;
    expansion runs (macro bodies) map every offset to the invocation range
    ``[orig_start, orig_end)``.
    """

    pp_start: int
    orig_start: int
    orig_end: int
    verbatim: bool


class SourceMap:
    """Maps offsets of the preprocessed text to locations in the original source."""

    def __init__(self, source: Source, segments: list[Segment] | None = None,
                 line_directives: list[LineDirective] | None = None) -> None:
        self.source = source
        self.segments = segments if segments is not None else [
            Segment(0, 0, len(source.text), True)
        ]
        self._starts = [s.pp_start for s in self.segments]
        self.line_directives = sorted(line_directives or [], key=lambda d: d.next_line)
        self._directive_lines = [d.next_line for d in self.line_directives]

    @classmethod
    def identity(cls, source: Source) -> SourceMap:
        return cls(source)

    def original_offset(self, pp_offset: int, *, is_end: bool = False) -> int:
        index = bisect.bisect_right(self._starts, pp_offset) - 1
        if index < 0:
            return 0
        seg = self.segments[index]
        if seg.verbatim:
            return seg.orig_start + (pp_offset - seg.pp_start)
        return seg.orig_end if is_end else seg.orig_start

    def locate(self, span: Span) -> Location:
        start = self.original_offset(span.start)
        end = self.original_offset(max(span.end, span.start), is_end=True)
        end = max(end, start + 1)
        line, column = self.source.line_col(start)
        end_line, end_column = self.source.line_col(end)
        filename, shown = self._remap(line)
        return Location(filename, shown, column, shown + end_line - line, end_column, line)

    def _remap(self, line: int) -> tuple[str, int]:
        """File name and line number after the ``#line`` directives before ``line``."""
        index = bisect.bisect_right(self._directive_lines, line) - 1
        if index < 0:
            return self.source.filename, line
        filename = self.source.filename
        for directive in self.line_directives[:index + 1]:
            filename = directive.filename or filename
        directive = self.line_directives[index]
        return filename, directive.line + (line - directive.next_line)
