"""Lexer tests: token kinds and spellings, literals, the `-` rule, errors, spans, speed."""

from __future__ import annotations

import time

import pytest

from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.lexer import lex
from croqtile.frontend.source import Source, SourceMap, Span
from croqtile.frontend.tokens import (
    DOTTED_WORDS, ELEM_ALIASES, KEYWORDS, Token, TokenKind, canonical_elem,
)

K = TokenKind


def tokens(text: str) -> tuple[list[Token], Reporter]:
    reporter = Reporter(SourceMap.identity(Source(text)))
    return lex(text, 0, len(text), reporter), reporter


def kinds_texts(text: str) -> list[tuple[TokenKind, str]]:
    toks, reporter = tokens(text)
    assert not reporter.diagnostics, [d.message for d in reporter.diagnostics]
    assert toks[-1].kind is K.EOF
    return [(t.kind, t.text) for t in toks[:-1]]


@pytest.mark.parametrize("text, expected", [
    ("parallel p by 4", [(K.KEYWORD, "parallel"), (K.NAME, "p"), (K.KEYWORD, "by"),
                         (K.INT, "4")]),
    ("group-4 group - 4", [(K.KEYWORD, "group-4"), (K.KEYWORD, "group"), (K.PUNCT, "-"),
                           (K.INT, "4")]),
    ("group-42", [(K.KEYWORD, "group"), (K.INT, "-42")]),
    ("_ x_1 __exp __lib_foo __mine", [(K.NAME, "_"), (K.NAME, "x_1"), (K.KEYWORD, "__exp"),
                                       (K.KEYWORD, "__lib_foo"), (K.NAME, "__mine")]),
    ("half f8 copy ready", [(K.KEYWORD, "half"), (K.KEYWORD, "f8"), (K.KEYWORD, "copy"),
                            (K.NAME, "ready")]),
])
def test_names_and_keywords(text: str, expected: list[tuple[TokenKind, str]]) -> None:
    assert kinds_texts(text) == expected


@pytest.mark.parametrize("text, expected", [
    # longest match among dotted words: `.span_as` vs `.span` vs `.sp`
    ("x.span_as(", [".span_as"]),
    ("x.span(", [".span"]),
    (".sp<2:4>", [".sp"]),
    (".swizzle .swiz", [".swizzle", ".swiz"]),
    (".chunkat .chunk", [".chunkat", ".chunk"]),
    (".evict_first .evict_last", [".evict_first", ".evict_last"]),
])
def test_dotted_words_longest_match(text: str, expected: list[str]) -> None:
    assert [t for k, t in kinds_texts(text) if k is K.DOT_WORD] == expected


@pytest.mark.parametrize("word", DOTTED_WORDS)
def test_every_dotted_word_is_one_token(word: str) -> None:
    assert kinds_texts("x" + word) == [(K.NAME, "x"), (K.DOT_WORD, word)]


@pytest.mark.parametrize("text, expected", [
    # a dot followed by another word is '.' + word (`mma.fill.f16`, `sync.shared`)
    ("mma.fill.f16", [(K.KEYWORD, "mma"), (K.DOT_WORD, ".fill"), (K.PUNCT, "."),
                      (K.KEYWORD, "f16")]),
    ("sync.shared", [(K.KEYWORD, "sync"), (K.PUNCT, "."), (K.KEYWORD, "shared")]),
    ("x.spam", [(K.NAME, "x"), (K.PUNCT, "."), (K.NAME, "spam")]),
    ("x.atx", [(K.NAME, "x"), (K.PUNCT, "."), (K.NAME, "atx")]),
])
def test_plain_dot(text: str, expected: list[tuple[TokenKind, str]]) -> None:
    assert kinds_texts(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("a => b", ["=>"]),
    ("a <-> b", ["<->"]),
    ("a::b", ["::"]),
    ("[[x]]", ["[[", "]]"]),
    ("a # b #+ c #- d #* e #/ f #% g", ["#", "#+", "#-", "#*", "#/", "#%"]),
    ("a == b != c <= d >= e && f || g << h >> i", ["==", "!=", "<=", ">=", "&&", "||", "<<",
                                                  ">>"]),
    ("++a; b--", ["++", ";", "--"]),
    ("? ?? : ,", ["?", "??", ":", ","]),
    ("& | ^ ~ ! %", ["&", "|", "^", "~", "!", "%"]),
])
def test_punctuation(text: str, expected: list[str]) -> None:
    assert [t for k, t in kinds_texts(text) if k is K.PUNCT] == expected


@pytest.mark.parametrize("text, kind, value", [
    ("42", K.INT, 42),
    ("0", K.INT, 0),
    ("0x1F", K.INT, 31),
    ("0X1f", K.INT, 31),
    ("7u", K.INT, 7),
    ("7U", K.INT, 7),
    ("3ll", K.INT, 3),
    ("3ull", K.INT, 3),
    ("0xFFu", K.INT, 255),
    ("4294967296", K.INT, 4294967296),
    ("1.5f", K.FLOAT, 1.5),
    ("0.0F", K.FLOAT, 0.0),
    ("1.5", K.FLOAT, 1.5),
    ("-1.5f", K.FLOAT, -1.5),
    ("-3", K.INT, -3),
])
def test_number_literals(text: str, kind: TokenKind, value: object) -> None:
    toks, reporter = tokens(text)
    assert not reporter.diagnostics
    assert (toks[0].kind, toks[0].text, toks[0].value) == (kind, text, value)
    assert len(toks) == 2


@pytest.mark.parametrize("text, expected", [
    # the reference mis-lexes `x-1.0` as `x` `-1.0`; after an operand `-` is the operator
    ("x-1.0", ["x", "-", "1.0"]),
    ("x - 1.0", ["x", "-", "1.0"]),
    ("x-1", ["x", "-", "1"]),
    ("f(x)-1", ["f", "(", "x", ")", "-", "1"]),
    ("a[0]-1", ["a", "[", "0", "]", "-", "1"]),
    ("x.span-1", ["x", ".span", "-", "1"]),
    ("k(-1)", ["k", "(", "-1", ")"]),
    ("a*-1.5f", ["a", "*", "-1.5f"]),
    ("y(:-1)", ["y", "(", ":", "-1", ")"]),
    ("= -2", ["=", "-2"]),
    ("- 2", ["-", "2"]),  # a blank separates: the parser joins them
])
def test_minus_joins_a_number_only_in_operand_position(text: str, expected: list[str]) -> None:
    assert [t for _, t in kinds_texts(text)] == expected


@pytest.mark.parametrize("text, value", [
    ('"plain"', "plain"),
    (r'"a\nb\tc"', "a\nb\tc"),
    (r'"q\"q"', 'q"q'),
    (r'"back\\slash"', "back\\slash"),
    (r'"keep\r"', "keep\\r"),  # unsupported escapes stay as written (as in the reference)
    ('R"(raw \\n "quoted")"', 'raw \\n "quoted"'),
    ('R"tag(a)" b)tag"', 'a)" b'),
    ('R"(multi\nline)"', "multi\nline"),
])
def test_strings(text: str, value: str) -> None:
    toks, reporter = tokens(text)
    assert not reporter.diagnostics
    assert toks[0].kind is K.STRING
    assert (toks[0].text, toks[0].value) == (text, value)


def test_adjacent_strings_are_separate_tokens() -> None:
    toks, _ = tokens('"a" "b"')
    assert [(t.kind, t.value) for t in toks[:-1]] == [(K.STRING, "a"), (K.STRING, "b")]


def test_comments_and_whitespace_are_skipped() -> None:
    text = "a // line\n/* block\n comment ** */ b\n\tc\r\n/**/d//"
    assert [t for _, t in kinds_texts(text)] == ["a", "b", "c", "d"]


def test_spans_are_absolute_offsets_of_the_slice() -> None:
    text = "host code; __co__ x = 12;  trailing"
    start = text.index("__co__")
    end = text.index("trailing")
    reporter = Reporter(SourceMap.identity(Source(text)))
    toks = lex(text, start, end, reporter)
    assert [t.text for t in toks] == ["__co__", "x", "=", "12", ";", ""]
    for tok in toks[:-1]:
        assert text[tok.span.start:tok.span.end] == tok.text
    assert toks[-1].kind is K.EOF and toks[-1].span == Span(end, end)


@pytest.mark.parametrize("text, code, message, column", [
    ("a @ b", "CQ0101", "unexpected character '@'", 3),
    ("a $", "CQ0101", "unexpected character '$'", 3),
    ('x = "open\ny', "CQ0102", "unterminated string literal", 5),
    ('R"(never closed', "CQ0102", "unterminated string literal", 1),
    ("1e-3", "CQ0103", "malformed number literal '1e-3'", 1),  # one literal, sign and all
    ("x = 12ab", "CQ0103", "malformed number literal '12ab'", 5),
    ("007", "CQ0103", "malformed number literal '007'", 1),
    ("1.5ff", "CQ0103", "malformed number literal '1.5ff'", 1),
    ("a /* never closed", "CQ0009", "unterminated comment", 3),
])
def test_lexical_errors(text: str, code: str, message: str, column: int) -> None:
    _, reporter = tokens(text)
    diag = reporter.diagnostics[0]
    assert (diag.code, diag.message, diag.line, diag.column) == (code, message, 1, column)


@pytest.mark.parametrize("text, literal, written", [
    ("y = -1e30f;", "-1e30f", "`-1000000000000000000000000000000.0f`, or use `-inf`"),
    ("y = 1e-3;", "1e-3", ": `0.001`"),
    ("y = 2.5E+2f;", "2.5E+2f", ": `250.0f`"),
    ("y = x-1.5e-7f;", "1.5e-7f", ": `0.00000015f`"),  # the `-` after an operand subtracts
    ("y = 1e400;", "1e400", ", or use `inf` / `-inf`"),
])
def test_exponent_notation_hints_at_how_to_write_the_number(
        text: str, literal: str, written: str) -> None:
    _, reporter = tokens(text)
    [diag] = reporter.diagnostics
    assert (diag.code, diag.message) == ("CQ0103", f"malformed number literal '{literal}'")
    assert diag.hint is not None
    assert diag.hint.startswith("Croqtile has no exponent notation (`1e-3`): write the digits out")
    assert written in diag.hint


def test_suggested_numbers_are_literals_the_lexer_accepts() -> None:
    for text in ("-1e30f", "1e-3", "2.5E+2f", "1.5e-7f"):
        _, reporter = tokens(text)
        suggestion = reporter.diagnostics[0].hint.split("`")[3]  # the second code span
        toks, again = tokens(suggestion)
        assert not again.diagnostics and toks[0].kind is K.FLOAT
        assert toks[0].value == float(text.rstrip("fF"))


def test_hex_minus_is_still_a_subtraction_and_other_bad_literals_have_no_hint() -> None:
    assert [t.text for t in tokens("0x1E-1")[0][:-1]] == ["0x1E", "-", "1"]
    _, reporter = tokens("12ab")
    assert reporter.diagnostics[0].hint is None

def test_bad_characters_are_skipped_and_lexing_continues() -> None:
    toks, reporter = tokens("a @ b $ c")
    assert [t.text for t in toks[:-1]] == ["a", "b", "c"]
    assert [d.code for d in reporter.diagnostics] == ["CQ0101", "CQ0101"]


def test_malformed_number_becomes_zero_so_parsing_can_go_on() -> None:
    toks, _ = tokens("x = 12ab;")
    assert [(t.kind, t.value) for t in toks[2:4]] == [(K.INT, 0), (K.PUNCT, None)]


def test_tables() -> None:
    assert canonical_elem("half") == "f16" and canonical_elem("f8") == "f8_e4m3"
    assert canonical_elem("s32") == "s32"
    assert set(ELEM_ALIASES) <= KEYWORDS
    assert {"copy", "block", "in", "by", "select", "event", "frag", "yield"} <= KEYWORDS
    assert "ready" not in KEYWORDS


def test_lexing_large_input_is_fast() -> None:
    line = "      lhs_load = dma.copy lhs.chunkat(px, tile_k) => shared; // 16 x 16 tile\n"
    text = line * (2_000_000 // len(line))
    reporter = Reporter(SourceMap.identity(Source("")))
    start = time.perf_counter()
    toks = lex(text, 0, len(text), reporter)
    elapsed = time.perf_counter() - start
    assert len(toks) > 300_000 and not reporter.diagnostics
    assert elapsed < 10.0  # about 0.6 s on a laptop core; 10 MB takes about 4 s
