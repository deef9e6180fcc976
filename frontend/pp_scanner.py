"""The preprocessor's scanner: preprocessing tokens, shared with the region finder, and
the fast scans over "quiet" text that needs no token-by-token look.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet

# One alternative per token kind, tried in this order. Strings, character literals and
# comments are single tokens, so nothing inside them is ever expanded or brace-matched.
# Unterminated quotes end at the end of the line, as in C lexers, which keeps one stray
# quote from swallowing the rest of the file. A raw string only has its opening here; its
# end is found with str.find (see Scanner._raw_string).
_TOKEN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("nl", r"\n"),
    ("ws", r"[ \t\r\f\v]+"),
    ("cont", r"\\\r?\n"),
    ("lcom", r"//(?:[^\\\n]+|\\\r?\n|\\)*"),
    ("bcom", r"/\*(?s:.*?)(?:\*/|\Z)"),
    ("raw", r'(?:u8|[uUL])?R"[^()\\\s"]{0,16}\('),
    ("str", r'(?:u8|[uUL])?"(?:[^"\\\n]+|\\\r?\n|\\.)*"?'),
    ("chr", r"(?:u8|[uUL])?'(?:[^'\\\n]+|\\\r?\n|\\.)*'?"),
    ("num", r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*"),
    ("id", r"[^\W\d]\w*"),
    ("punct", r"\.\.\.|->|<<=|>>=|\+\+|--|<<|>>|::|##|&&|\|\||[-+*/%&|^=!<>]=|."),
)
_TOKEN_RE = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in _TOKEN_PATTERNS))

#: Token kinds that only separate other tokens: newline, blanks, continuations, comments.
BLANK_KINDS = frozenset({"nl", "ws", "cont", "lcom", "bcom"})

# "Quiet" text: a run of tokens that neither the preprocessor nor the region finder needs to
# look at one by one (blanks, newlines not followed by a directive, numbers, names not
# followed by a quote, punctuation other than `#`, comment and quote openers, backslashes).
# Scanning such runs with one regex call keeps a 10 MB source from costing 10 M Python-level
# token steps. Names in a run still matter (macros, `__co__`): see ``first_name_in``.
_PP_NUMBER = r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*"
_QUIET_ATOMS = (r"[ \t\r\f\v]+|\n(?![ \t\r\f\v]*\#)|" + _PP_NUMBER
                + r"|[^\W\d]\w*(?![\w\"'])|/(?![/*])")
_QUIET_PATTERNS: dict[str, re.Pattern[str]] = {}
_NEVER_QUIET = frozenset("\"'\\#")  # characters that never start quiet text


def _quiet_pattern(stops: str) -> re.Pattern[str]:
    """The quiet-run regex that also stops at the punctuation characters of ``stops``."""
    pattern = _QUIET_PATTERNS.get(stops)
    if pattern is None:
        punct = r"""[^\w\s"'\\\#/""" + re.escape(stops) + "]"
        pattern = _QUIET_PATTERNS[stops] = re.compile(f"(?:{_QUIET_ATOMS}|{punct})*")
    return pattern


# Numbers and names of quiet text, whole: group 1 is the name ("" for a number).
_NAMES_RE = re.compile(_PP_NUMBER + r"|([^\W\d]\w*)")
# A quiet run is scanned in windows: small after a run was cut short by a name that
# matters (so that dense macro uses are not rescanned far ahead each time), doubling up to
# the largest while runs go on. A window that ends inside the run is cut back to its last
# "boundary": a character that no quiet token continues with and that no lookahead above
# tests for, so that cutting the text there changes nothing.
_MIN_WINDOW = 16
_MAX_WINDOW = 4096
_LAST_BOUNDARY_RE = re.compile(r"[\s\S]*(?:[^\w\"'/*.+\-]|(?<![eEpP])[+\-])")
_NOT_BLANK_RE = re.compile(r"[^ \t\r\f\v]")


class Scanner:
    """Splits text into preprocessing tokens, one at a time from any offset.

    Kinds: ``nl ws cont lcom bcom`` (see ``BLANK_KINDS``), ``raw str chr`` (literals),
    ``num`` (C pp-numbers), ``id`` and ``punct``.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._match = _TOKEN_RE.match
        # closing delimiter -> offset from which it is known not to occur; keeps repeated
        # unterminated raw strings from rescanning the rest of the text each time.
        self._raw_misses: dict[str, int] = {}
        self._windows: dict[str, int] = {}  # see quiet_end

    def token(self, pos: int) -> tuple[str, int]:
        """Kind and end offset of the token starting at ``pos`` (``pos < len(text)``)."""
        match = self._match(self.text, pos)
        if match is None:  # unreachable: "." and "\n" together match every character
            return "punct", pos + 1
        kind = match.lastgroup or "punct"
        if kind == "raw":
            return self._raw_string(pos, match.end())
        return kind, match.end()

    def quiet_end(self, pos: int, stops: str = "") -> int:
        """End of the run of quiet text from ``pos`` (``pos`` itself when there is none);
        the run also stops at the punctuation characters of ``stops`` (`{}` for braces)."""
        text = self.text
        if text[pos] in _NEVER_QUIET or text[pos] in stops:
            return pos  # the common stops, without a regex call
        window = self._windows.get(stops, _MIN_WINDOW)
        limit = min(len(text), pos + window)
        match = _quiet_pattern(stops).match(text, pos, limit)
        end = match.end() if match is not None else pos
        if end == limit < len(text):
            self._windows[stops] = min(2 * window, _MAX_WINDOW)
            last = _LAST_BOUNDARY_RE.match(text, pos, end)
            end = last.end() - 1 if last is not None else pos
        return end

    def quiet_cut(self, stops: str = "") -> None:
        """The caller stopped a quiet run early (at a name that matters): scan less ahead
        (each ``stops`` has its own window: a function body is not scanned like host code)."""
        self._windows[stops] = _MIN_WINDOW

    def _raw_string(self, start: int, open_end: int) -> tuple[str, int]:
        # R"tag( ... )tag" ends at the first `)tag"`. Without one, only the prefix name
        # is a token and the quote then lexes as an ordinary (line-bounded) string.
        opening = self.text[start:open_end]
        quote = opening.index('"')
        closer = ")" + opening[quote + 1:-1] + '"'
        missing_from = self._raw_misses.get(closer)
        if missing_from is None or open_end < missing_from:
            close = self.text.find(closer, open_end)
            if close >= 0:
                return "raw", close + len(closer)
            self._raw_misses[closer] = open_end
        return "id", start + quote


def first_name_in(text: str, start: int, end: int, names: AbstractSet[str]) -> int | None:
    """Offset of the first name token of the quiet text ``[start, end)`` that is in
    ``names``; None when there is none (C-level scans for the common case)."""
    if names.isdisjoint(_NAMES_RE.findall(text, start, end)):
        return None
    for match in _NAMES_RE.finditer(text, start, end):
        if match.group(1) and match.group(1) in names:
            return match.start()
    return None


def last_name_in(text: str, start: int, end: int) -> str | None:
    """The last name token of the quiet text ``[start, end)``, None when it has none."""
    names = [name for name in _NAMES_RE.findall(text, start, end) if name]
    return names[-1] if names else None


def line_state(text: str, start: int, end: int, at_bol: bool, line_start: int) -> tuple[bool, int]:
    """(at the beginning of a line, offset of the line start) after the quiet text
    ``[start, end)``: a `#` that follows only blanks of a new line may start a directive."""
    last_nl = text.rfind("\n", start, end)
    if last_nl >= 0:
        at_bol, line_start, start = True, last_nl + 1, last_nl + 1
    if at_bol and _NOT_BLANK_RE.search(text, start, end) is not None:
        at_bol = False
    return at_bol, line_start
