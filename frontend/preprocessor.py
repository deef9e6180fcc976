"""The C-like preprocessor of Croqtile files (spec 2.2), with a map back to the user's text."""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from .diagnostics import Reporter
from .source import LineDirective, Segment, Source, SourceMap, Span

__all__ = [
    "BLANK_KINDS", "Preprocessed", "Scanner", "first_name_in", "last_name_in", "line_state",
    "preprocess",
]


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


def preprocess(source: Source, reporter: Reporter,
               defines: Mapping[str, int | float | str | None] | None = None) -> Preprocessed:
    """Expand macros and conditionals of ``source``; problems go to ``reporter``, never raised.

    Every original line gives exactly one output line: directive lines and skipped
    ``#if`` groups become empty lines and text removed by line continuations or by
    multi-line macro calls is made up with newlines, so line numbers stay stable.
    """
    try:
        return _Preprocessor(source, reporter).run(defines or {})
    except Exception as exc:  # noqa: BLE001 - last line of defence, the stage must not crash
        detail = f"preprocessor failed with {type(exc).__name__}: {exc}"[:300]
        reporter.report("CQ0901", Span(0, 0), detail=detail)
        return Preprocessed(source.text, SourceMap.identity(source))


# ----------------------------------------------------------------------------------------
# Scanner: preprocessing tokens, shared with the region finder
# ----------------------------------------------------------------------------------------

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
# `#line N`: ASCII digits that fit C's limit (2147483647); isdigit() would take '²' and
# int() refuses more than 4300 digits.
_LINE_NUMBER_RE = re.compile(r"[0-9]{1,10}")


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


def _tokens_of(text: str) -> list[_Tok]:
    """All non-blank tokens of a short synthetic text (pasting, ``defines`` values)."""
    scanner = Scanner(text)
    tokens: list[_Tok] = []
    pos, space = 0, False
    while pos < len(text):
        kind, end = scanner.token(pos)
        if kind in BLANK_KINDS:
            space = True
        else:
            tokens.append(_Tok(kind, text[pos:end], space))
            space = False
        pos = end
    return tokens


# ----------------------------------------------------------------------------------------
# Macro model
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Tok:
    """A token inside the macro expander.

    Kind "end" is a marker the expander stacks below each macro expansion: popping it
    ends the macro's context and makes the macro expandable again.
    """

    kind: str
    text: str
    space: bool = False  # whitespace came before it
    origin: int = -1  # offset in the original text; -1 when a macro body produced it
    painted: bool = False  # met inside its own macro's expansion: never expanded again
    seam: bool = False  # it follows text of another origin, so it must not fuse with that

    def with_seam(self) -> _Tok:
        return _Tok(self.kind, self.text, self.space, self.origin, self.painted, True)


@dataclass(frozen=True, slots=True)
class _Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like; `...` is the last name, __VA_ARGS__
    variadic: bool
    body: tuple[_Tok, ...]
    index: dict[str, int]  # parameter name -> position

    def same_as(self, other: _Macro) -> bool:
        """C's rule for a harmless redefinition: same parameters, same body spelling."""
        return (self.params == other.params and self.variadic == other.variadic
                and [(t.text, t.space) for t in self.body]
                == [(t.text, t.space) for t in other.body])


def _make_macro(name: str, params: tuple[str, ...] | None, variadic: bool,
                body: list[_Tok]) -> _Macro:
    # Bodies forget their origin: errors inside an expansion point at the invocation.
    cleaned = tuple(_Tok(t.kind, t.text, t.space and i > 0) for i, t in enumerate(body))
    index = {p: i for i, p in enumerate(params or ())}
    return _Macro(name, params, variadic, cleaned, index)


_DIRECTIVES = frozenset({
    "define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else",
    "endif", "include", "include_next", "import", "pragma", "error", "warning", "line",
    "ident", "sccs", "assert", "unassert",
})

_MAX_NESTING = 100  # nested argument pre-expansions before CQ0007
_BUDGET_BASE = 500_000  # tokens the expander may produce for a whole file ...
_BUDGET_PER_CHAR = 8  # ... plus this many per input character
_LOOKAHEAD_BASE = 100_000  # tokens that failing argument scans may read ...
_LOOKAHEAD_PER_CHAR = 1  # ... plus this many per input character


class _BudgetExceeded(Exception):
    """Macro expansion produced (or scanned) more than the file's budget."""


class _SessionFailed(Exception):
    """A top-level macro call cannot be expanded; its name stays as plain text."""


class _Session:
    """One top-level expansion: the macros being expanded and where errors point."""

    __slots__ = ("span", "disabled", "deep_reported")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.disabled: set[str] = set()  # macros whose expansion is being rescanned
        self.deep_reported = False


@dataclass(frozen=True, slots=True)
class _Cond:
    """One open ``#if`` group."""

    span: Span  # the `#if` keyword, for CQ0001
    parent_active: bool  # the text around the group is kept
    taken: bool  # some branch of the group was chosen already
    active: bool  # the current branch is kept
    seen_else: bool


# ----------------------------------------------------------------------------------------
# Output with its segment map
# ----------------------------------------------------------------------------------------


class _Output:
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


# ----------------------------------------------------------------------------------------
# Token streams for the expander
# ----------------------------------------------------------------------------------------


class _SourceReader:
    """Reads tokens of the original text after a top-level macro name.

    A macro's expansion may end in a function-like macro name whose arguments follow in
    the source, so argument collection continues here. It never crosses a directive line.
    """

    def __init__(self, pp: _Preprocessor, pos: int) -> None:
        self.pp = pp
        self.pos = pos
        self.read = 0  # tokens taken, charged to the lookahead budget if the call fails
        self._first = True

    def peek_lparen(self) -> bool:
        tok, _ = self._scan(self.pos)
        return tok is not None and tok.kind == "punct" and tok.text == "("

    def take(self) -> _Tok | None:
        tok, end = self._scan(self.pos)
        if tok is not None:
            self.pos = end
            self.read += 1
        return tok

    def _scan(self, pos: int) -> tuple[_Tok | None, int]:
        pp, text = self.pp, self.pp.text
        space = at_bol = False
        while pos < len(text):
            kind, end = pp.scanner.token(pos)
            if kind in BLANK_KINDS:
                space = True
                at_bol = at_bol or kind == "nl"
                if kind == "bcom":
                    pp.check_comment(pos, end)
                pos = end
                continue
            if at_bol and text[pos] == "#" and pp.is_directive(pos + 1):
                return None, pos
            # The first token read follows macro output: it must not fuse with it.
            tok = _Tok(kind, text[pos:end], space, pos, False, self._first)
            self._first = False
            return tok, end
        return None, pos


class _Stream:
    """Tokens waiting to be rescanned (a stack, top = next), optionally backed by the source."""

    __slots__ = ("stack", "session", "source")

    def __init__(self, tokens: list[_Tok], session: _Session,
                 source: _SourceReader | None = None) -> None:
        self.stack = tokens[::-1]
        self.session = session
        self.source = source

    def pop(self) -> _Tok | None:
        """The next token, context end markers included."""
        return self.stack.pop() if self.stack else None

    def push_expansion(self, name: str, tokens: list[_Tok]) -> None:
        """Stack a macro's expansion; the macro stays disabled until its end marker pops."""
        self.session.disabled.add(name)
        self.stack.append(_Tok("end", name))
        self.stack.extend(reversed(tokens))

    def push_back(self, tokens: list[_Tok]) -> None:
        self.stack.extend(reversed(tokens))

    def next_is_lparen(self) -> bool:
        self._end_contexts()
        if self.stack:
            top = self.stack[-1]
            return top.kind == "punct" and top.text == "("
        return self.source is not None and self.source.peek_lparen()

    def take(self) -> _Tok | None:
        """Next token for an argument list, read on into the source when needed."""
        self._end_contexts()
        if not self.stack:
            return self.source.take() if self.source is not None else None
        tok = self.stack.pop()
        if tok.kind == "id" and not tok.painted and tok.text in self.session.disabled:
            tok = _Tok(tok.kind, tok.text, tok.space, tok.origin, True, tok.seam)
        return tok

    def _end_contexts(self) -> None:
        # Looking past the end of an expansion (for a `(` or an argument) ends it.
        while self.stack and self.stack[-1].kind == "end":
            self.session.disabled.discard(self.stack.pop().text)


# ----------------------------------------------------------------------------------------
# The preprocessor
# ----------------------------------------------------------------------------------------


class _Preprocessor:
    def __init__(self, source: Source, reporter: Reporter) -> None:
        self.source = source
        self.text = source.text
        self.scanner = Scanner(self.text)
        self.reporter = reporter
        self.macros: dict[str, _Macro] = {}
        self.pinned: set[str] = set()  # names given in `defines`: the source cannot change them
        self.pushed: dict[str, list[_Macro | None]] = {}  # #pragma push_macro stacks
        self.conds: list[_Cond] = []
        self.active = True
        self.out = _Output()
        self.copied = 0  # original text before this offset has been emitted
        self.budget = _BUDGET_BASE + _BUDGET_PER_CHAR * len(self.text)
        self.lookahead = _LOOKAHEAD_BASE + _LOOKAHEAD_PER_CHAR * len(self.text)
        self.expanding = True  # cleared when a budget runs out (CQ0010)
        self._bad_comments: set[int] = set()

    # --- main loop ---------------------------------------------------------------------

    def run(self, defines: Mapping[str, int | float | str | None]) -> Preprocessed:
        self._apply_defines(defines)
        text, token = self.text, self.scanner.token
        pos, line_start, at_bol = 0, 0, True
        name_next = False  # a quiet run stopped at a macro name: read it as a token
        while pos < len(text):
            quiet = pos if name_next else self.scanner.quiet_end(pos)
            name_next = False
            if quiet > pos and self.active and self.expanding and self.macros:
                hit = first_name_in(text, pos, quiet, self.macros.keys())
                if hit is not None:
                    quiet, name_next = hit, True
                    self.scanner.quiet_cut()
            if quiet > pos:
                at_bol, line_start = line_state(text, pos, quiet, at_bol, line_start)
                pos = quiet
                continue
            kind, end = token(pos)
            if kind == "nl":
                at_bol, line_start = True, end
            elif kind in BLANK_KINDS:
                self._blank(kind, pos, end)
            elif at_bol and text[pos] == "#" and self.is_directive(pos + 1):
                end = self._directive(line_start, pos)
            else:
                at_bol = False
                if kind == "id" and self.active and self.expanding and text[pos:end] in self.macros:
                    end = self._expand_call(pos, end)
            pos = end
        self._flush(len(text))
        for cond in self.conds:
            self.reporter.report("CQ0001", cond.span)
        return self.out.result(self.source)

    def _blank(self, kind: str, pos: int, end: int) -> None:
        if kind == "bcom":
            self.check_comment(pos, end)
        elif not self.active:
            return
        elif kind == "cont":
            # Outside directives a continuation joins lines; the backslash becomes the
            # blank it amounts to and the newline stays, so lines do not move.
            self._flush(pos)
            self.out.mapped(" ", pos)
            self.copied = pos + 1
        elif kind == "lcom" and self.text.find("\n", pos, end) >= 0:
            # A `//` comment continued by backslashes covers the next lines too; blank
            # them so that later stages, which end comments at newlines, agree.
            first_nl = self.text.index("\n", pos)
            self._flush(first_nl)
            self._drop(first_nl, end)

    def check_comment(self, start: int, end: int) -> None:
        """Report an unterminated block comment once, whoever scans it first."""
        if (end - start < 4 or not self.text.startswith("*/", end - 2)) \
                and start not in self._bad_comments:
            self._bad_comments.add(start)
            self.reporter.report("CQ0009", Span(start, start + 2))

    def is_directive(self, pos: int) -> bool:
        """Whether the text after a line-initial `#` at ``pos - 1`` is a directive.

        Only known directive names count (plus the null directive and `# 12` line
        markers): a Croqtile line may well start with the upper-bound operator `#tile_k`.
        """
        text = self.text
        while pos < len(text):
            kind, end = self.scanner.token(pos)
            if kind in ("nl", "lcom"):
                return True
            if kind not in BLANK_KINDS:
                return kind == "num" or (kind == "id" and text[pos:end] in _DIRECTIVES)
            pos = end
        return True

    # --- emitting ------------------------------------------------------------------------

    def _flush(self, upto: int) -> None:
        """Emit original text up to ``upto``: as is when active, else only its newlines."""
        if upto <= self.copied:
            return
        if self.active:
            self.out.verbatim(self.text, self.copied, upto)
        else:
            self._newlines(self.copied, upto)
        self.copied = upto

    def _drop(self, start: int, end: int) -> None:
        """Replace original text by its newlines only."""
        self._newlines(max(start, self.copied), end)
        self.copied = max(self.copied, end)

    def _newlines(self, start: int, end: int) -> None:
        pos = self.text.find("\n", start, end)
        while pos >= 0:
            self.out.mapped("\n", pos)
            pos = self.text.find("\n", pos + 1, end)

    # --- directives ------------------------------------------------------------------------

    def _directive(self, line_start: int, hash_pos: int) -> int:
        tokens, end = self._logical_line(hash_pos + 1)
        self._flush(line_start)
        self._apply_directive(hash_pos, tokens)
        self._drop(line_start, end)
        return end

    def _logical_line(self, pos: int) -> tuple[list[_Tok], int]:
        """Tokens up to the end of the line, continuations and comments being blanks."""
        text, tokens, space = self.text, [], False
        while pos < len(text):
            kind, end = self.scanner.token(pos)
            if kind == "nl":
                break
            if kind in BLANK_KINDS:
                if kind == "bcom":
                    self.check_comment(pos, end)
                space = True
            else:
                tokens.append(_Tok(kind, text[pos:end], space, pos))
                space = False
            pos = end
        return tokens, pos

    def _apply_directive(self, hash_pos: int, tokens: list[_Tok]) -> None:
        if not tokens or tokens[0].kind != "id":
            return  # the null directive `#`, or a `# 12 "file"` line marker
        head, args = tokens[0], tokens[1:]
        name = head.text
        span = Span(hash_pos, head.origin + len(name))
        if name in ("if", "ifdef", "ifndef"):
            self._open_group(span, lambda: self._test(name, args, span))
        elif name in ("elif", "elifdef", "elifndef"):
            self._elif(span, name, lambda: self._test(name[2:], args, span))
        elif name == "else":
            self._else(span)
        elif name == "endif":
            self._endif(span)
        elif not self.active:
            return
        elif name == "define":
            self._define(args, span)
        elif name == "undef":
            self._undef(args, span)
        elif name == "pragma":
            self._pragma(args)
        elif name == "line":
            self._line(hash_pos, args)
        # #include, #error, #warning and the others are left to the C++ compiler.

    def _line(self, hash_pos: int, args: list[_Tok]) -> None:
        """``#line N ["file"]``: the next line is line N (of "file") in diagnostics."""
        if not args or not _LINE_NUMBER_RE.fullmatch(args[0].text):
            return  # a malformed #line is left alone, as the C++ compiler would see it
        filename = None
        if len(args) > 1 and args[1].text.startswith('"') and args[1].text.endswith('"'):
            filename = args[1].text[1:-1]
        this_line = self.source.line_col(hash_pos)[0] - self.source.line_offset  # (no rescan)
        self.out.line_directives.append(LineDirective(this_line + 1, int(args[0].text), filename))

    def _test(self, kind: str, args: list[_Tok], span: Span) -> bool:
        if kind == "if":
            return self._condition(args, span)
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail=f"#{kind} expects a macro name")
            return False
        return (args[0].text in self.macros) == (kind == "ifdef")

    # --- conditional groups ----------------------------------------------------------------

    def _open_group(self, span: Span, test: Callable[[], bool]) -> None:
        # Conditions inside a skipped group are not evaluated (and report nothing).
        value = test() if self.active else False
        self.conds.append(_Cond(span, self.active, value, self.active and value, False))
        self.active = self.active and value

    def _elif(self, span: Span, name: str, test: Callable[[], bool]) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive=name)
            return
        top = self.conds[-1]
        if top.seen_else:
            self.reporter.report("CQ0003", span, detail=f"#{name} after #else")
        # Once a branch was taken, later #elif conditions are not even evaluated.
        value = test() if top.parent_active and not top.taken and not top.seen_else else False
        self.conds[-1] = replace(top, taken=top.taken or value, active=value)
        self.active = value

    def _else(self, span: Span) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive="else")
            return
        top = self.conds[-1]
        if top.seen_else:
            self.reporter.report("CQ0003", span, detail="#else after #else")
        active = top.parent_active and not top.taken
        self.conds[-1] = replace(top, taken=True, active=active, seen_else=True)
        self.active = active

    def _endif(self, span: Span) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive="endif")
            return
        self.active = self.conds.pop().parent_active

    # --- #define, #undef, #pragma ------------------------------------------------------------

    def _apply_defines(self, defines: Mapping[str, int | float | str | None]) -> None:
        """``defines`` come first and are pinned: the source cannot redefine or undefine them."""
        for name, value in defines.items():
            name = str(name)
            if not re.fullmatch(r"[^\W\d]\w*(?:\([^()]*\))?", name):
                self.reporter.report("CQ0003", Span(0, 0),
                                     detail=f"{name!r} in defines is not a macro name")
                continue
            body = _define_text(value).replace("\r", " ").replace("\n", " ")
            self._define(_tokens_of(f"{name} {body}"), Span(0, 0), pinned=True)
            self.pinned.add(name.split("(")[0])

    def _define(self, args: list[_Tok], span: Span, pinned: bool = False) -> None:
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail="#define expects a macro name")
            return
        name = args[0]
        if name.text == "defined":
            self.reporter.report("CQ0003", span, detail="'defined' cannot be a macro name")
            return
        if name.text in self.pinned and not pinned:
            return  # a `defines` value wins over the source
        params: tuple[str, ...] | None = None
        variadic = False
        rest = args[1:]
        if rest and rest[0].text == "(" and rest[0].kind == "punct" and not rest[0].space:
            parsed = _parse_params(rest)
            if isinstance(parsed, str):
                self.reporter.report("CQ0003", _tok_span(name, span), detail=parsed)
                return
            params, variadic, rest = parsed
        if rest and (rest[0].text == "##" or rest[-1].text == "##"):
            self.reporter.report("CQ0003", _tok_span(name, span),
                                 detail="'##' cannot appear at either end of a macro body")
            return
        macro = _make_macro(name.text, params, variadic, rest)
        old = self.macros.get(name.text)
        if old is not None and not old.same_as(macro):
            self.reporter.report("CQ0008", _tok_span(name, span), name=name.text)
        self.macros[name.text] = macro

    def _undef(self, args: list[_Tok], span: Span) -> None:
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail="#undef expects a macro name")
        elif args[0].text not in self.pinned:
            self.macros.pop(args[0].text, None)

    def _pragma(self, args: list[_Tok]) -> None:
        """``push_macro("M")`` saves M's definition (or its absence); ``pop_macro`` restores it.
        ``croq intrinsic prefix|namespace NAME`` (``choreo`` is the older spelling) is
        recorded with where it is in the output."""
        words = [a.text for a in args]
        if len(words) == 4 and words[0] in ("croq", "choreo") and words[1] == "intrinsic" \
                and words[2] in ("prefix", "namespace") and args[3].kind == "id":
            self.out.intrinsics.append(IntrinsicPragma(words[2], words[3], self.out.length))
            return
        if (len(args) < 4 or args[0].text not in ("push_macro", "pop_macro")
                or args[1].text != "(" or args[2].kind != "str" or args[3].text != ")"):
            return
        name = args[2].text[args[2].text.index('"') + 1:].rstrip('"')
        stack = self.pushed.setdefault(name, [])
        if args[0].text == "push_macro":
            stack.append(self.macros.get(name))
        elif stack:
            saved = stack.pop()
            if name in self.pinned:
                return
            if saved is None:
                self.macros.pop(name, None)
            else:
                self.macros[name] = saved

    # --- #if expressions ---------------------------------------------------------------------

    def _condition(self, args: list[_Tok], span: Span) -> bool:
        if not args:
            self.reporter.report("CQ0004", span, detail="#if with no expression")
            return False
        where = Span(args[0].origin, args[-1].origin + len(args[-1].text))
        tokens = self._replace_defined(args)
        if tokens is None:
            self.reporter.report("CQ0004", where,
                                 detail="operator 'defined' requires a macro name")
            return False
        if self.expanding:
            try:
                session = _Session(where)
                tokens = self._expand(_Stream(tokens, session), 0, session)
            except _BudgetExceeded:
                self._stop_expanding("#if", where)
                return False
        value = _IfParser(tokens, self.macros).parse()
        if isinstance(value, str):
            self.reporter.report("CQ0004", where, detail=value)
            return False
        return value[0] != 0

    def _replace_defined(self, tokens: list[_Tok]) -> list[_Tok] | None:
        """``defined X`` / ``defined(X)`` become 1 or 0 before any macro is expanded."""
        out: list[_Tok] = []
        pos = 0
        while pos < len(tokens):
            tok = tokens[pos]
            if tok.kind == "id" and tok.text == "defined":
                name, pos = _defined_operand(tokens, pos + 1)
                if name is None:
                    return None
                out.append(_Tok("num", "1" if name in self.macros else "0", tok.space, tok.origin))
            else:
                out.append(tok)
                pos += 1
        return out

    # --- macro expansion -----------------------------------------------------------------------

    def _expand_call(self, start: int, end: int) -> int:
        """Expand the macro named at ``[start, end)``; return where the main loop goes on."""
        name = self.text[start:end]
        macro = self.macros[name]
        reader = _SourceReader(self, end)
        if macro.params is not None and not reader.peek_lparen():
            return end  # a function-like macro name without arguments is plain text
        session = _Session(Span(start, end))
        stream = _Stream([_Tok("id", name, False, start)], session, reader)
        try:
            tokens = self._expand(stream, 0, session)
        except _SessionFailed:
            self._charge_lookahead(reader.read, name, session.span)
            return end
        except _BudgetExceeded:
            self._stop_expanding(name, session.span)
            return end
        self._emit_expansion(tokens, start, reader.pos)
        return reader.pos

    def _emit_expansion(self, tokens: list[_Tok], start: int, stop: int) -> None:
        self._flush(start)
        chars = _render(tokens)
        if chars:
            # Keep the expansion from fusing with the text around it (`-NEG` -> `- -1`).
            before = self.out.last_char()
            after = self.text[stop] if stop < len(self.text) else " "
            if not before.isspace() and _joins(before, tokens[0].text):
                chars = " " + chars
            if not after.isspace() and _joins(tokens[-1].text, after):
                chars += " "
        # The newlines of a multi-line call come right after its expansion, so the text
        # after the call stays on its line; they belong to the expansion's segment, so
        # that the end of the expansion maps to the end of the call.
        self.out.expansion(chars + "\n" * self.text.count("\n", start, stop), start, stop)
        self.copied = stop

    def _stop_expanding(self, name: str, span: Span) -> None:
        self.expanding = False
        self.reporter.report("CQ0010", span, name=name)

    def _charge(self, count: int) -> None:
        self.budget -= count
        if self.budget < 0:
            raise _BudgetExceeded

    def _charge_lookahead(self, count: int, name: str, span: Span) -> None:
        # Failed argument scans do not advance the main loop, so many of them could read
        # the same text again and again; a budget keeps the whole run linear.
        self.lookahead -= count
        if self.lookahead < 0:
            self._stop_expanding(name, span)

    def _expand(self, stream: _Stream, depth: int, session: _Session) -> list[_Tok]:
        """Rescan ``stream`` until it is empty, expanding macros.

        C's rule that a macro is not re-expanded inside its own expansion: a macro is
        disabled while the tokens of its expansion are rescanned, and a token naming a
        disabled macro is painted, so it stays unexpanded even when rescanned later.
        """
        out: list[_Tok] = []
        macros, disabled = self.macros, session.disabled
        seam = False  # an expansion ended: the next token must not fuse with it
        while True:
            tok = stream.pop()
            if tok is None:
                break
            if tok.kind == "end":
                disabled.discard(tok.text)
                seam = True
                continue
            macro = macros.get(tok.text) if tok.kind == "id" and not tok.painted else None
            if macro is not None and tok.text in disabled:
                tok, macro = _Tok(tok.kind, tok.text, tok.space, tok.origin, True, tok.seam), None
            args: list[list[_Tok]] | None = None
            if macro is not None and macro.params is not None and stream.next_is_lparen():
                args = self._collect_args(stream, macro, tok, session)
            if macro is None or (macro.params is not None and args is None):
                out.append(tok.with_seam() if seam else tok)
                seam = False
                continue
            stream.push_expansion(macro.name, self._subst(macro, args, tok, depth, session))
        self._charge(len(out))  # every rescan pass counts: nested calls rescan arguments
        return out

    def _collect_args(self, stream: _Stream, macro: _Macro, name: _Tok,
                      session: _Session) -> list[list[_Tok]] | None:
        """Read ``( args )``; None (tokens given back) when the call is malformed."""
        params = macro.params or ()
        consumed = [stream.take()]  # the `(`
        args: list[list[_Tok]] = [[]]
        fixed = len(params) - macro.variadic
        level = 0
        while True:
            tok = stream.take()
            if tok is None:
                self.reporter.report("CQ0006", _tok_span(name, session.span), name=macro.name)
                if stream.source is not None:
                    raise _SessionFailed
                stream.push_back([t for t in consumed if t is not None])
                return None
            consumed.append(tok)
            if tok.kind == "punct":
                if tok.text == "(":
                    level += 1
                elif tok.text == ")":
                    if level == 0:
                        break
                    level -= 1
                elif tok.text == "," and level == 0 and not (macro.variadic and len(args) > fixed):
                    args.append([])
                    continue
            args[-1].append(tok)
        if not params and args == [[]]:
            args = []  # F() for a macro without parameters
        if macro.variadic and len(args) == fixed:
            args.append([])  # the variadic part may be left out entirely
        if len(args) != len(params):
            expected = f"at least {fixed}" if macro.variadic else str(len(params))
            self.reporter.report("CQ0005", _tok_span(name, session.span), name=macro.name,
                                 expected=expected, actual=len(args))
            stream.push_back([t for t in consumed if t is not None])
            return None
        return args

    def _subst(self, macro: _Macro, args: list[list[_Tok]] | None, name: _Tok, depth: int,
               session: _Session) -> list[_Tok]:
        """The body of ``macro`` with arguments substituted and ``##`` applied."""
        body, actuals = macro.body, args or []
        expanded: dict[int, list[_Tok]] = {}
        out: list[_Tok] = []
        paste = False  # a `##` waits for its right operand
        left_empty = False  # the last operand was an empty argument (a "placemarker")
        after_arg = False
        for i, tok in enumerate(body):
            if tok.kind == "punct" and tok.text == "##":
                paste = True
                continue
            slot = macro.index.get(tok.text, -1) if args is not None and tok.kind == "id" else -1
            if slot < 0:
                piece = [_Tok(tok.kind, tok.text, tok.space, -1, False, after_arg)]
                after_arg = False
            else:
                # Operands of `##` take the argument as written; others fully expanded.
                if paste or (i + 1 < len(body) and body[i + 1].text == "##"):
                    piece = actuals[slot]
                else:
                    piece = self._expanded_arg(macro, actuals, slot, expanded, depth, session)
                if paste and not piece and _elides_comma(macro, slot, out):
                    out.pop()  # GNU `, ## __VA_ARGS__` with no variadic arguments
                    paste = False
                    continue
                if piece:
                    first = piece[0]
                    piece = [_Tok(first.kind, first.text, tok.space, first.origin, first.painted,
                                  True), *piece[1:]]
                after_arg = True
            empty = not piece
            if paste:
                paste = False
                if empty:
                    continue  # pasting an empty argument leaves the left operand as it is
                if out and not left_empty:
                    out[-1:] = _glue(out[-1], piece[0])
                    piece = piece[1:]
            out.extend(piece)
            left_empty = empty
        self._charge(len(out) + 1)
        if out:
            first = out[0]
            out[0] = _Tok(first.kind, first.text, name.space, first.origin, first.painted, True)
        return out

    def _expanded_arg(self, macro: _Macro, args: list[list[_Tok]], slot: int,
                      cache: dict[int, list[_Tok]], depth: int, session: _Session) -> list[_Tok]:
        """An argument fully macro-expanded on its own, as C does before substitution."""
        if slot not in cache:
            if depth >= _MAX_NESTING:
                if not session.deep_reported:
                    session.deep_reported = True
                    self.reporter.report("CQ0007", session.span, name=macro.name)
                cache[slot] = args[slot]
            else:
                cache[slot] = self._expand(_Stream(args[slot], session), depth + 1, session)
        return cache[slot]


# ----------------------------------------------------------------------------------------
# Helpers of the macro model
# ----------------------------------------------------------------------------------------


def _define_text(value: int | float | str | None) -> str:
    """Body text of a ``defines`` value: None and "" are empty, numbers as Croqtile literals
    (the lexer reports those out of range)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        number = int(value)
        # str() refuses more than 4300 digits; hex() has no limit (and is far too big anyway)
        return str(number) if number.bit_length() < 1000 else hex(number)
    if isinstance(value, float):
        text = repr(float(value))  # also `inf`, `-inf` and `nan`, which Croqtile spells so
        if "e" in text and text.lstrip("-") not in ("inf", "nan"):
            text = format(decimal.Decimal(text), "f")  # Croqtile has no exponent notation
            text = text if "." in text else text + ".0"
        return text
    return str(value)


def _parse_params(rest: list[_Tok]) -> tuple[tuple[str, ...], bool, list[_Tok]] | str:
    """Parameters of ``#define F(a, b, ...)``: (names, variadic, body) or an error message."""
    names: list[str] = []
    pos = 1
    while True:
        if pos >= len(rest):
            return "missing ')' in macro parameter list"
        tok = rest[pos]
        if tok.text == ")" and not names:
            return tuple(names), False, rest[pos + 1:]
        if tok.text == "...":
            names.append("__VA_ARGS__")
            if pos + 1 < len(rest) and rest[pos + 1].text == ")":
                return tuple(names), True, rest[pos + 2:]
            return "'...' must be the last macro parameter"
        if tok.kind != "id" or tok.text == "__VA_ARGS__":
            return f"'{tok.text[:20]}' cannot be a macro parameter"
        if tok.text in names:
            return f"duplicate macro parameter '{tok.text}'"
        names.append(tok.text)
        if pos + 1 >= len(rest):
            return "missing ')' in macro parameter list"
        sep = rest[pos + 1].text
        if sep == ")":
            return tuple(names), False, rest[pos + 2:]
        if sep != ",":
            return f"expected ',' or ')' in macro parameter list, found '{sep[:20]}'"
        pos += 2


def _elides_comma(macro: _Macro, slot: int, out: list[_Tok]) -> bool:
    return (macro.variadic and macro.params is not None and slot == len(macro.params) - 1
            and bool(out) and out[-1].text == ",")


def _glue(left: _Tok, right: _Tok) -> list[_Tok]:
    """``left ## right``: one token if the spellings join into one, else both unchanged."""
    text = left.text + right.text
    kind, end = Scanner(text).token(0)
    if end == len(text) and kind not in BLANK_KINDS:
        return [_Tok(kind, text, left.space, left.origin, False, left.seam)]
    return [left, _Tok(right.kind, right.text, False, right.origin, right.painted, True)]


def _defined_operand(tokens: list[_Tok], pos: int) -> tuple[str | None, int]:
    if pos < len(tokens) and tokens[pos].kind == "id":
        return tokens[pos].text, pos + 1
    if (pos + 2 < len(tokens) and tokens[pos].text == "(" and tokens[pos + 1].kind == "id"
            and tokens[pos + 2].text == ")"):
        return tokens[pos + 1].text, pos + 3
    return None, pos


def _tok_span(tok: _Tok, fallback: Span) -> Span:
    return Span(tok.origin, tok.origin + len(tok.text)) if tok.origin >= 0 else fallback


# Pairs of characters that lex as one token: a space must separate them when they come
# from different texts. `[[`/`]]` are Croqtile attribute brackets, `#+` etc. its operators.
_FUSING_PAIRS = frozenset({
    "//", "/*", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "::",
    "##", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "..", "=>", "<-", "#+", "#-",
    "#*", "#/", "#%", "[[", "]]",
})


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _joins(left: str, right: str) -> bool:
    """Whether ``left`` written right before ``right`` would lex differently."""
    x, y = left[-1], right[0]
    if _is_word_char(x):
        if _is_word_char(y) or y in "'\"":
            return True  # names and numbers run together; `L"x"` would become a literal
        return left[0].isdigit() and (y == "." or (x in "eEpP" and y in "+-"))
    if x == "." and y.isdigit():
        return True
    return x + y in _FUSING_PAIRS


_CONTINUATION_RE = re.compile(r"\\\r?\n")


def _render(tokens: list[_Tok]) -> str:
    """Spell expanded tokens on one line: spaces where the source had them or lexing needs them."""
    parts: list[str] = []
    prev = ""
    for tok in tokens:
        text = tok.text
        if "\n" in text:  # a continued string or a raw string: an expansion is one line
            text = _CONTINUATION_RE.sub("", text).replace("\n", " ")
        if parts and (tok.space or (tok.seam and prev and text and _joins(prev, text))):
            parts.append(" ")
        parts.append(text)
        prev = text
    return "".join(parts)


# ----------------------------------------------------------------------------------------
# #if expressions: C integer arithmetic on 64 bits
# ----------------------------------------------------------------------------------------

# A value is (number, unsigned). An evaluation error is a str "poison" value instead, so
# that `0 && 1/0` is fine, as in C: the right operand of `&&` is never looked at.
_Value = tuple[int, bool]

_MASK = (1 << 64) - 1
_INT_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)([uUlLzZ]*)")
_INT_SUFFIXES = frozenset({"", "u", "l", "ul", "lu", "ll", "ull", "llu", "z", "uz", "zu"})
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11,
            "\\": 92, "'": 39, '"': 34, "?": 63, "e": 27}
_BINARY_PRECEDENCE = {
    "*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "==": 6, "!=": 6,
    "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1,
}
_MAX_EXPR_DEPTH = 64  # parentheses and nested `?:`; deeper expressions are refused


class _ExprError(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _wrap(value: int, unsigned: bool) -> _Value:
    value &= _MASK
    if not unsigned and value >= 1 << 63:
        value -= 1 << 64
    return value, unsigned


class _IfParser:
    """Precedence climbing over macro-expanded tokens; unknown names are 0."""

    def __init__(self, tokens: list[_Tok], macros: Mapping[str, _Macro]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0
        self.macros = macros

    def parse(self) -> _Value | str:
        try:
            value = self._comma()
            if self.pos < len(self.tokens):
                raise _ExprError(f"missing binary operator before '{self._text()}'")
            return value
        except _ExprError as err:
            return err.detail

    def _text(self) -> str:
        return self.tokens[self.pos].text[:20] if self.pos < len(self.tokens) else "end of line"

    def _accept(self, text: str) -> bool:
        if self.pos < len(self.tokens) and self.tokens[self.pos].text == text \
                and self.tokens[self.pos].kind == "punct":
            self.pos += 1
            return True
        return False

    def _comma(self) -> _Value | str:
        value = self._ternary()
        while self._accept(","):
            right = self._ternary()
            value = value if isinstance(value, str) else right
        return value

    def _ternary(self) -> _Value | str:
        self.depth += 1
        if self.depth > _MAX_EXPR_DEPTH:
            raise _ExprError("expression is nested too deeply")
        cond = self._binary()
        if self._accept("?"):
            yes = self._comma()
            if not self._accept(":"):
                raise _ExprError(f"expected ':' in '?:' expression, found '{self._text()}'")
            no = self._ternary()
            cond = cond if isinstance(cond, str) else (yes if cond[0] else no)
        self.depth -= 1
        return cond

    def _binary(self) -> _Value | str:
        # An explicit operator stack keeps Python's recursion to one level per parenthesis.
        values = [self._unary()]
        ops: list[str] = []
        while self.pos < len(self.tokens):
            tok = self.tokens[self.pos]
            prec = _BINARY_PRECEDENCE.get(tok.text) if tok.kind == "punct" else None
            if prec is None:
                break
            self.pos += 1
            while ops and _BINARY_PRECEDENCE[ops[-1]] >= prec:
                right = values.pop()
                values.append(_binary(ops.pop(), values.pop(), right))
            ops.append(tok.text)
            values.append(self._unary())
        while ops:
            right = values.pop()
            values.append(_binary(ops.pop(), values.pop(), right))
        return values[0]

    def _unary(self) -> _Value | str:
        prefix: list[str] = []
        while self.pos < len(self.tokens) and self.tokens[self.pos].kind == "punct" \
                and self.tokens[self.pos].text in ("+", "-", "!", "~"):
            prefix.append(self.tokens[self.pos].text)
            self.pos += 1
        value = self._primary()
        for op in reversed(prefix):
            value = _unary(op, value)
        return value

    def _primary(self) -> _Value | str:
        if self.pos >= len(self.tokens):
            raise _ExprError("missing operand at end of expression")
        tok = self.tokens[self.pos]
        self.pos += 1
        if tok.kind == "num":
            return _parse_int(tok.text)
        if tok.kind == "chr":
            return _parse_char(tok.text)
        if tok.kind == "id":
            return self._name(tok)
        if tok.kind == "punct" and tok.text == "(":
            value = self._comma()
            if not self._accept(")"):
                raise _ExprError(f"missing ')' in expression, found '{self._text()}'")
            return value
        raise _ExprError(f"token '{tok.text[:20]}' is not valid in preprocessor expressions")

    def _name(self, tok: _Tok) -> _Value | str:
        if tok.text == "defined":  # produced by a macro expansion
            name, self.pos = _defined_operand(self.tokens, self.pos)
            if name is None:
                raise _ExprError("operator 'defined' requires a macro name")
            return int(name in self.macros), False
        if tok.text.startswith("__has_") and self._accept("("):
            self._skip_group()  # __has_include(<x>) and friends: nothing is available
            return 0, False
        return (1 if tok.text == "true" else 0), False  # C++ `true`; other names are 0

    def _skip_group(self) -> None:
        level = 1
        while self.pos < len(self.tokens) and level:
            text = self.tokens[self.pos].text
            level += (text == "(") - (text == ")")
            self.pos += 1
        if level:
            raise _ExprError("missing ')' in expression")


def _unary(op: str, value: _Value | str) -> _Value | str:
    if isinstance(value, str):
        return value
    number, unsigned = value
    if op == "-":
        return _wrap(-number, unsigned)
    if op == "~":
        return _wrap(~number, unsigned)
    if op == "!":
        return int(number == 0), False
    return value


def _binary(op: str, left: _Value | str,
            right: _Value | str) -> _Value | str:
    if isinstance(left, str):
        return left
    if op in ("&&", "||"):
        if (left[0] != 0) == (op == "||"):
            return int(op == "||"), False  # decided by the left operand alone
        return right if isinstance(right, str) else (int(right[0] != 0), False)
    if isinstance(right, str):
        return right
    if op in ("<<", ">>"):
        return _shift(op, left, right[0])
    unsigned = left[1] or right[1]  # the usual arithmetic conversions, on 64 bits
    a = left[0] & _MASK if unsigned else left[0]
    b = right[0] & _MASK if unsigned else right[0]
    if op in ("/", "%"):
        if b == 0:
            return "division by zero in #if"
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates
        return _wrap(quotient if op == "/" else a - b * quotient, unsigned)
    arithmetic = {"*": a * b, "+": a + b, "-": a - b, "&": a & b, "^": a ^ b, "|": a | b}
    if op in arithmetic:
        return _wrap(arithmetic[op], unsigned)
    comparison = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
    return int(comparison[op]), False


def _shift(op: str, left: _Value, count: int) -> _Value:
    number, unsigned = left
    if unsigned:
        number &= _MASK
    if count < 0 or count >= 64:  # undefined in C; never build a huge Python integer
        return (-1 if op == ">>" and number < 0 else 0), unsigned
    return _wrap(number << count if op == "<<" else number >> count, unsigned)


def _parse_int(text: str) -> _Value | str:
    match = _INT_RE.fullmatch(text.replace("'", ""))
    if match is None:
        return f"'{text[:20]}' is not an integer constant"
    digits, suffix = match.groups()
    if suffix.lower() not in _INT_SUFFIXES:
        return f"invalid suffix '{suffix}' on integer constant"
    if len(digits) > 70:
        return "integer constant is too large"
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        value = int(digits[2:], 2)
    elif digits.startswith("0") and len(digits) > 1:
        if not set(digits) <= set("01234567"):
            return f"invalid digit in octal constant '{text[:20]}'"
        value = int(digits, 8)
    else:
        value = int(digits)
    if value > _MASK:
        return "integer constant is too large"
    return value, "u" in suffix.lower() or value >= 1 << 63


def _parse_char(text: str) -> _Value | str:
    body = text[text.index("'") + 1:]
    if len(body) < 2 or not body.endswith("'"):
        return "unterminated character constant"
    body = body[:-1]
    codes: list[int] = []
    pos = 0
    while pos < len(body):
        if body[pos] == "\\" and pos + 1 < len(body):
            code, pos = _escape(body, pos + 1)
        else:
            code, pos = ord(body[pos]), pos + 1
        codes.append(code)
    if len(codes) == 1:
        return codes[0], False
    value = 0
    for code in codes:  # a multi-character constant, as GCC computes it
        value = (value << 8 | (code & 0xFF)) & 0xFFFFFFFF
    return value, False


def _escape(body: str, pos: int) -> tuple[int, int]:
    """Value of the escape sequence whose letter is at ``pos``, and the offset after it."""
    char = body[pos]
    if char == "x":
        end = pos + 1
        while end < len(body) and end < pos + 9 and body[end] in "0123456789abcdefABCDEF":
            end += 1
        return (int(body[pos + 1:end], 16) if end > pos + 1 else 0), end
    if char in "01234567":
        end = pos
        while end < len(body) and end < pos + 3 and body[end] in "01234567":
            end += 1
        return int(body[pos:end], 8), end
    return _ESCAPES.get(char, ord(char)), pos + 1
