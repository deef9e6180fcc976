"""What the preprocessor produces: ``Preprocessed`` (the text and its map to the
original), ``IntrinsicPragma``, and ``Output``, the text under construction.
"""

from __future__ import annotations

from dataclasses import dataclass

from .source import LineDirective, Segment, Source, SourceMap


@dataclass(frozen=True)
class Preprocessed:
    """The preprocessed text of a whole file and the map of its offsets to the original."""

    text: str
    source_map: SourceMap
    # ``#pragma croq intrinsic prefix|namespace NAME`` lines, in order (intrinsics.py)
    intrinsics: tuple[IntrinsicPragma, ...] = ()


@dataclass(frozen=True)
class IntrinsicPragma:
    """``#pragma croq intrinsic <kind> <name>``: calls to names with this prefix (or in
    this namespace) are intrinsics from here to the end of the enclosing braces."""

    kind: str  # "prefix" | "namespace"
    name: str
    offset: int  # start of the (blanked) pragma line in the preprocessed text


class Output:
    """Preprocessed text under construction and its segments."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.segments: list[Segment] = []
        self.line_directives: list[LineDirective] = []
        self.intrinsics: list[IntrinsicPragma] = []

    def verbatim(self, text: str, start: int, end: int) -> None:
        if end > start:
            self.mapped(text[start:end], start)

    def mapped(self, chars: str, start: int) -> None:
        """Characters that stand one for one for the original characters from ``start``."""
        last = self.segments[-1] if self.segments else None
        if last is not None and last.verbatim and last.orig_end == start:
            # Contiguous in both texts: extend the previous run.
            self.segments[-1] = Segment(last.pp_start, last.orig_start, start + len(chars), True)
        else:
            self.segments.append(Segment(self.length, start, start + len(chars), True))
        self.parts.append(chars)
        self.length += len(chars)

    def expansion(self, chars: str, start: int, end: int) -> None:
        """Macro output: every offset of it maps to the invocation ``[start, end)``."""
        if chars:
            self.segments.append(Segment(self.length, start, end, False))
            self.parts.append(chars)
            self.length += len(chars)

    def last_char(self) -> str:
        """The last character written so far, a blank at the start."""
        return self.parts[-1][-1] if self.parts else " "

    def result(self, source: Source) -> Preprocessed:
        end = len(source.text)
        segments = list(self.segments)
        if not segments or segments[-1].orig_end != end:
            # The end of the text (where "unexpected end of file" points) maps to the end
            # of the source.
            segments.append(Segment(self.length, end, end, True))
        return Preprocessed("".join(self.parts),
                            SourceMap(source, segments, self.line_directives),
                            tuple(self.intrinsics))
