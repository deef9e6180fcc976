"""Finds the ``__co__`` functions of a preprocessed file; everything else is host code to skip."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .diagnostics import Reporter
from .preprocessor import Scanner, first_name_in, last_name_in
from .source import Span

__all__ = ["Region", "find_co_functions"]

_KEYWORD = "__co__"
_KEYWORDS = frozenset({_KEYWORD})
_SIGNATURE_PUNCT = "()[]{};"  # what the signature scan looks at (see _read_function)

# The common signature in one regex call: `ret [dims] name(params [dims]) {` with no
# comment, string, nested bracket or `;` in it; anything else takes the token loop. The
# name must start a token (not follow a word character, `.`, `'` or an exponent sign).
_PLAIN = r"""[^(){}\[\];"'/\\\#]"""
_PLAIN_OR_DIMS = rf"(?:{_PLAIN}|\[{_PLAIN}*\])"
_SIMPLE_SIGNATURE_RE = re.compile(
    rf"{_PLAIN_OR_DIMS}*?(?<![\w.'])(?<![eEpP][+\-])([^\W\d]\w*)\s*\({_PLAIN_OR_DIMS}*\)"
    rf"{_PLAIN}*\{{")
_SIGNATURE_WINDOW = 4096  # longer signatures take the token loop


@dataclass(frozen=True)
class Region:
    """One ``__co__`` function: ``[start, end)`` in the preprocessed text."""

    start: int  # offset of the `__co__` keyword
    end: int  # offset just past the function's closing `}` (or the end of the text)
    name: str  # the identifier before the first `(`; "" when there is none


def find_co_functions(text: str, reporter: Reporter) -> list[Region]:
    """Every ``__co__`` function of ``text``, in order (spec 2.1).

    The scan is token based, so ``__co__`` inside comments, strings, character literals
    and raw strings does not count, and neither do braces there. ``__co_device__``,
    ``__device__`` and ``__cok__`` are other names and are skipped like any host code.
    An unclosed function is reported (CQ0113) and extends to the end of the text.
    """
    scanner = Scanner(text)
    regions: list[Region] = []
    pos = 0
    keyword_next = False  # a quiet run stopped at `__co__`: read it as a token
    while pos < len(text):
        quiet = pos if keyword_next else scanner.quiet_end(pos)  # host code: a run at a time
        keyword_next = False
        if quiet > pos:
            hit = first_name_in(text, pos, quiet, _KEYWORDS)
            if hit is not None:
                scanner.quiet_cut()
                quiet, keyword_next = hit, True
            if quiet > pos:
                pos = quiet
                continue
        kind, end = scanner.token(pos)
        if kind == "id" and end - pos == len(_KEYWORD) and text.startswith(_KEYWORD, pos):
            region = _read_function(text, scanner, pos, end, reporter)
            regions.append(region)
            end = max(region.end, end)
        pos = end
    return regions


def _read_function(text: str, scanner: Scanner, start: int, pos: int,
                   reporter: Reporter) -> Region:
    """The function whose ``__co__`` keyword is at ``start``; its signature starts at ``pos``."""
    simple = _SIMPLE_SIGNATURE_RE.match(text, pos, min(len(text), pos + _SIGNATURE_WINDOW))
    if simple is not None:
        return _read_body(text, scanner, start, simple.end() - 1, simple.group(1), reporter)
    name = last_name = ""
    seen_paren = False
    level = 0  # ( and [ nesting in the signature
    while pos < len(text):
        quiet = scanner.quiet_end(pos, _SIGNATURE_PUNCT)
        if quiet > pos:
            last_name = last_name_in(text, pos, quiet) or last_name
            pos = quiet
            continue
        kind, end = scanner.token(pos)
        if kind == "id":
            last_name = text[pos:end]
        elif kind == "punct":
            char = text[pos:end]
            if char == "(" and level == 0 and not seen_paren:
                name, seen_paren = last_name, True
            if char in "([":
                level += 1
            elif char in ")]":
                level = max(0, level - 1)
            elif char == "{":
                return _read_body(text, scanner, start, pos, name, reporter)
            elif char == ";" and level == 0:
                return Region(start, end, name)  # no body: let the parser say what is missing
            elif char == "}" and level == 0:
                return Region(start, pos, name)  # the end of an enclosing block
        pos = end
    return _unclosed(text, start, name, reporter)


def _read_body(text: str, scanner: Scanner, start: int, pos: int, name: str,
               reporter: Reporter) -> Region:
    """Match the body's braces from the ``{`` at ``pos``."""
    depth = 0
    while pos < len(text):
        quiet = scanner.quiet_end(pos, "{}")
        if quiet > pos:
            pos = quiet
            continue
        kind, end = scanner.token(pos)
        if kind == "punct":
            char = text[pos:end]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return Region(start, end, name)
        pos = end
    return _unclosed(text, start, name, reporter)


def _unclosed(text: str, start: int, name: str, reporter: Reporter) -> Region:
    reporter.report("CQ0113", Span(start, start + len(_KEYWORD)), name=name or "<unnamed>")
    return Region(start, len(text), name)
