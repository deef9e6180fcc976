"""Lexer: turns a slice of preprocessed text into Croqtile tokens (spec 2.3 - 2.6)."""

from __future__ import annotations

import contextlib
import decimal
import gc
import math
import re
import threading
from collections.abc import Iterator

from .diagnostics import Reporter
from .source import Span
from .tokens import DOTTED_WORDS, PUNCTUATION, Token, TokenKind, is_keyword


def _alternation(words: tuple[str, ...]) -> str:
    # Python's `|` takes the first alternative that matches, so longer spellings go first.
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# Whitespace and comments (directive lines are blanked by the preprocessor). After them one
# alternative always matches (`end` or `bad` at the latest), so the greedy loops below never
# backtrack; Python 3.10 has no possessive quantifiers to say so.
_SKIP = r"(?:\s+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*"

# The text of a number literal, well formed or not: decimal digits with an exponent
# (`1.5e-3f`, never valid), or digits followed by word characters and an optional fraction.
_NUMBER = r"(?:\d+(?:\.\d+)?[eE][+-]\d+\w*|\d\w*(?:\.\d\w*)?)"

_TOKEN_RE = re.compile(
    _SKIP + "(?:"
    r"(?P<end>\Z)"
    r"|(?P<open_comment>/\*)"
    r'|(?P<raw>R"(?P<delim>[^\s()\\"]{0,16})\((?P<body>[\s\S]*?)\)(?P=delim)")'
    r'|(?P<bad_raw>R"[^\s()\\"]{0,16}\()'
    r'|(?P<string>"(?:[^"\\\n]|\\.)*")'
    r'|(?P<bad_string>"(?:[^"\\\n]|\\.)*)'
    # a number swallows every following word character so that `1e3` or `12ab` is one
    # malformed literal rather than a number and a name, and a signed exponent so that
    # `1e-3` is one literal (reported with a hint: there is no exponent notation)
    r"|(?P<negnum>-" + _NUMBER + ")"
    r"|(?P<num>" + _NUMBER + ")"
    r"|(?P<group4>group-4(?!\w))"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<dotword>(?:" + _alternation(DOTTED_WORDS) + r")(?!\w))"
    r"|(?P<punct>" + _alternation(PUNCTUATION) + r")"
    r"|(?P<bad>[\s\S])"
    ")",
    re.ASCII,
)

_FLOAT_RE = re.compile(r"-?\d+\.\d+([fF]?)", re.ASCII)
_INT_RE = re.compile(
    r"-?(?:0[xX][0-9a-fA-F]+|0|[1-9][0-9]*)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?",
    re.ASCII,
)

# Tokens after which a `-` is the binary operator (so `x-1.0` is `x - 1.0`, spec 2.5 quirk
# relaxed); elsewhere `-` directly followed by a number is part of the literal.
_OPERAND_KINDS = frozenset({TokenKind.NAME, TokenKind.INT, TokenKind.FLOAT, TokenKind.STRING})
_OPERAND_ENDS = frozenset({
    ")", "]", "}", "]]", "++", "--", ".span", ".data", ".mdata", "true", "false", "inf",
    "nullptr",
})

_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}

_KW, _NAME, _PUNCT, _DOT = TokenKind.KEYWORD, TokenKind.NAME, TokenKind.PUNCT, TokenKind.DOT_WORD


def lex(text: str, start: int, end: int, reporter: Reporter,
        limit: int | None = None) -> list[Token]:
    """Tokens of ``text[start:end]``, ending with an EOF token; spans are absolute offsets.

    Bad characters and malformed literals are reported and skipped (or replaced by a
    literal 0) so that parsing can go on and report further errors. With a ``limit``,
    lexing stops after more than ``limit`` tokens and bad characters: the list then has
    no EOF token (the caller reports the excess).
    """
    with gc_paused():
        return _lex(text, start, end, reporter, limit)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: building millions of small tokens or nodes
    otherwise triggers collections that rescan them all (lexing 10 MB takes 6 s, not 4)."""
    # (the collector is the process's: threads compiling at once share one pause, ended
    # when the last of them leaves)
    with _PAUSE_LOCK:
        if _PAUSE["holders"] == 0:
            _PAUSE["resume"] = gc.isenabled()
            gc.disable()
        _PAUSE["holders"] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSE["holders"] -= 1
            if _PAUSE["holders"] == 0 and _PAUSE["resume"]:
                gc.enable()


# threads inside gc_paused, and whether the collector was enabled before the first
_PAUSE = {"holders": 0, "resume": True}
_PAUSE_LOCK = threading.Lock()


def _lex(text: str, start: int, end: int, reporter: Reporter, limit: int | None) -> list[Token]:
    tokens: list[Token] = []
    append = tokens.append
    steps = 0
    for m in _TOKEN_RE.finditer(text, start, end):
        steps += 1
        if limit is not None and steps > limit and m.lastgroup != "end":
            return tokens  # truncated: no EOF token
        group = m.lastgroup
        assert group is not None  # every alternative of _TOKEN_RE is a named group
        tstart = m.start(group)
        tend = m.end()
        if group == "name":
            word = m.group(group)
            append(Token(_KW if is_keyword(word) else _NAME, word, Span(tstart, tend)))
        elif group == "punct":
            append(Token(_PUNCT, m.group(group), Span(tstart, tend)))
        elif group == "dotword":
            append(Token(_DOT, m.group(group), Span(tstart, tend)))
        elif group == "num":
            append(_number(m.group(group), tstart, tend, reporter))
        elif group == "negnum":
            literal = m.group(group)
            prev = tokens[-1] if tokens else None
            if prev is not None and (prev.kind in _OPERAND_KINDS or prev.text in _OPERAND_ENDS):
                append(Token(_PUNCT, "-", Span(tstart, tstart + 1)))
                append(_number(literal[1:], tstart + 1, tend, reporter))
            else:
                append(_number(literal, tstart, tend, reporter))
        elif group == "group4":
            append(Token(_KW, "group-4", Span(tstart, tend)))
        elif group == "string":
            literal = m.group(group)
            append(Token(TokenKind.STRING, literal, Span(tstart, tend), _unescape(literal[1:-1])))
        elif group == "raw":
            append(Token(TokenKind.STRING, m.group(group), Span(tstart, tend), m.group("body")))
        elif group == "end":
            break
        elif group == "bad":
            reporter.report("CQ0101", Span(tstart, tend), char=m.group(group))
        elif group in ("bad_string", "bad_raw"):
            reporter.report("CQ0102", Span(tstart, tend))
            if group == "bad_raw":
                break  # the rest of the slice is inside the unterminated raw string
        else:  # open_comment: the rest of the slice is inside the comment
            reporter.report("CQ0009", Span(tstart, tend))
            break
    append(Token(TokenKind.EOF, "", Span(end, end)))
    return tokens


_MAX_INT = (1 << 64) - 1  # the widest integer type, u64
# A literal without a `u` suffix is signed, as in C: it fits in s64 (so `-9223372036854775808`
# is out of range, its digits being read before the minus).
_MAX_SIGNED = (1 << 63) - 1
# More characters than any 64-bit literal has (`-0x` + 16 digits, 20 decimal digits): such
# text is never converted (Python refuses int() of more than 4300 digits).
_MAX_INT_CHARS = 24


def _number(literal: str, start: int, end: int, reporter: Reporter) -> Token:
    span = Span(start, end)
    if "." in literal:
        m = _FLOAT_RE.fullmatch(literal)
        if m is not None:
            number = float(literal[:-1] if m.group(1) else literal)
            if math.isinf(number):
                reporter.report("CQ0104", span, text=_clip(literal), what="a 64-bit float")
                return Token(TokenKind.FLOAT, "0.0", span, 0.0)
            return Token(TokenKind.FLOAT, literal, span, number)
    elif _INT_RE.fullmatch(literal):
        digits = literal.rstrip("uUlL")
        value = int(digits, 0) if len(digits) <= _MAX_INT_CHARS else None
        if value is None or abs(value) > _MAX_INT:
            reporter.report("CQ0104", span, text=_clip(literal), what="64 bits")
            return Token(TokenKind.INT, "0", span, 0)
        if abs(value) > _MAX_SIGNED and not any(c in "uU" for c in literal[len(digits):]):
            reporter.report("CQ0104", span, text=_clip(literal), what="a signed 64-bit integer",
                            hint="add a `u` suffix for an unsigned 64-bit literal")
            return Token(TokenKind.INT, "0", span, 0)
        return Token(TokenKind.INT, literal, span, value)
    reporter.report("CQ0103", span, text=_clip(literal), hint=_malformed_hint(literal))
    return Token(TokenKind.INT, "0", span, 0)


_EXPONENT_RE = re.compile(r"(-?\d+(?:\.\d+)?[eE][+-]?\d+)([fF]?)", re.ASCII)
# Written out, a literal longer than this is not worth suggesting digit for digit.
_MAX_WRITTEN_OUT = 48


def _malformed_hint(literal: str) -> str | None:
    """The hint of a malformed literal in exponent notation (spec 2.5: there is none):
    the same number with its digits written out, and ``inf``/``-inf`` for large ones."""
    m = _EXPONENT_RE.fullmatch(literal)
    if m is None:
        return None
    number = decimal.Decimal(m.group(1))
    written = format(number, "f")
    if "." not in written:
        written += ".0"
    suffix = m.group(2)
    lead = "Croqtile has no exponent notation (`1e-3`): write the digits out"
    if len(written) > _MAX_WRITTEN_OUT:
        return f"{lead}, or use `inf` / `-inf` (f32 infinity) for a bound no value reaches"
    infinity = "-inf" if number < 0 else "inf"
    if abs(number) >= decimal.Decimal("1e10"):
        return f"{lead}, `{written}{suffix}`, or use `{infinity}` (f32 infinity) for a bound " \
               "no value reaches"
    return f"{lead}: `{written}{suffix}`"


def _clip(text: str) -> str:
    """A literal as messages quote it: a 100,000-digit number is shown by its start."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _unescape(body: str) -> str:
    """Decode ``\\n \\t \\" \\\\``; other escapes are kept verbatim (as the reference does)."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch == "\\" and i + 1 < n and body[i + 1] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)
