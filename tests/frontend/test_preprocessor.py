"""Tests of the preprocessor: directives, macros, pinned defines, line map, robustness."""

from __future__ import annotations

import random
import time

import pytest

from croqtile.frontend.codes import Severity
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.preprocessor import Preprocessed, preprocess
from croqtile.frontend.source import Source, SourceMap, Span


def run(text: str, defines: dict[str, int | float | str | None] | None = None
        ) -> tuple[Preprocessed, Reporter]:
    """Preprocess ``text`` and check the invariants every result must keep."""
    source = Source(text, "test.co")
    reporter = Reporter(SourceMap.identity(source))
    result = preprocess(source, reporter, defines)
    assert result.text.count("\n") == text.count("\n"), "line structure changed"
    assert "CQ0901" not in codes(reporter)
    starts = [seg.pp_start for seg in result.source_map.segments]
    assert starts == sorted(starts) and (not starts or starts[0] == 0)
    return result, reporter


def lines(text: str, defines: dict[str, int | float | str | None] | None = None) -> list[str]:
    """The non-empty output lines, stripped."""
    result, _ = run(text, defines)
    return [line.strip() for line in result.text.split("\n") if line.strip()]


def codes(reporter: Reporter) -> list[str]:
    return [d.code for d in reporter.diagnostics]


def squash(text: str) -> str:
    return "".join(text.split())


# ----------------------------------------------------------------------------------------
# Object-like and function-like macros
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("#define N 128\nN\n", ["128"]),
    ("#define E\n[E]\n", ["[]"]),
    ("#define A B\n#define B 7\nA\n", ["7"]),
    ("#define A B\nA\n#define B 3\nA\n", ["B", "3"]),
    ("#define SUM a + b\nSUM;\n", ["a + b;"]),
    ("#define L 1 + \\\n  2\nL\n", ["1 + 2"]),
    ("#define C 1 /* x */ + 2 // y\nC\n", ["1 + 2"]),
    ("#define X 1\n#undef X\nX\n", ["X"]),
    ("#define EMPTY\na EMPTY b\n", ["a  b"]),
    ("  #  define  N  5\nN\n", ["5"]),
    ("/* lead */ #define N 6\nN\n", ["6"]),
])
def test_object_like(text: str, expected: list[str]) -> None:
    assert lines(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("#define F(a, b) a * b\nF(2, 3)\n", ["2 * 3"]),
    ("#define F(a, b) a * b\nF((1, 2), 3)\n", ["(1, 2) * 3"]),
    ("#define N 4\n#define F(x) x+x\nF(N)\n", ["4+4"]),
    ("#define F(x) (x)\nF(F(1))\n", ["((1))"]),
    ("#define F(x) x\nF + 1\n", ["F + 1"]),
    ("#define F (x) x\nF\n", ["(x) x"]),
    ("#define F(x) [x]\nF() F( ) F(  a  b  )\n", ["[] [] [a b]"]),
    ("#define Z() 0\nZ()\n", ["0"]),
    ("#define F(x) <x>\n#define G F\nG(1)\n", ["<1>"]),
    ("#define ID(x) x\n#define G ID(\nG 5)\n", ["5"]),
    ("#define F(x) x\nF\n(7)\n", ["7"]),
    ("#define F(x) x\n" + "F(" * 50 + "1" + ")" * 50 + "\n", ["1"]),
    ("#define T(x) x.span\nT(lhs)(0) T(lhs).at(1)\n", ["lhs.span(0) lhs.span.at(1)"]),
    ("#define P(a) a+\nP(1)+2 P(+)\n", ["1+ +2 + +"]),
    ("#define NEG -1\nx=-NEG;\n", ["x=- -1;"]),
    ("#define A [[x]]\nA\n", ["[[x]]"]),
    ("#define F(x) x\n#define G b\nF(a)G F(a)(1)\n", ["a b a(1)"]),
])
def test_function_like(text: str, expected: list[str]) -> None:
    assert lines(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("#define CAT(a, b) a ## b\nCAT(x, 1) CAT(, y) CAT(x, ) CAT(1, 2) CAT(,)\n", ["x1 y x 12"]),
    ("#define V(fmt, ...) f(fmt, __VA_ARGS__)\nV(a, b, c) V(a)\n", ["f(a, b, c) f(a,)"]),
    ("#define V(...) g(0, ## __VA_ARGS__)\nV() V(1)\n", ["g(0) g(0,1)"]),
    ("#define N 9\n#define CAT(a, b) a ## b\nCAT(N, 1) CAT(N, )\n", ["N1 9"]),
    # `#` is Croqtile's upper-bound operator, so it is not C's stringizing operator.
    ("#define UB(v) #v\nUB(tile_k) a#b\n", ["#tile_k a#b"]),
])
def test_paste_variadic_and_hash(text: str, expected: list[str]) -> None:
    assert lines(text) == expected


def test_c_standard_rescanning_example() -> None:
    # The example of C11 6.10.3.5 (without `#` stringizing), compared without blanks.
    text = (
        "#define x 3\n#define f(a) f(x * (a))\n#undef x\n#define x 2\n#define g f\n"
        "#define z z[0]\n#define h g(~\n#define m(a) a(w)\n#define w 0,1\n"
        "#define t(a) a\n#define p() int\n#define q(x) x\n#define r(x,y) x ## y\n"
        "f(y+1) + f(f(z)) % t(t(g)(0) + t)(1);\n"
        "g(x+(3,4)-w) | h 5) & m\n(f)^m(m);\n"
        "p() i[q()] = { q(1), r(2,3), r(4,), r(,5), r(,) };\n"
    )
    result, reporter = run(text)
    assert not reporter.diagnostics
    assert squash(result.text) == squash(
        "f(2 * (y+1)) + f(2 * (f(2 * (z[0])))) % f(2 * (0)) + t(1);"
        "f(2 * (2+(3,4)-0,1)) | f(2 * (~ 5)) & f(2 * (0,1))^m(0,1);"
        "int i[] = { 1, 23, 4, 5, };")


@pytest.mark.parametrize("text, expected", [
    ("#define A A\nA\n", ["A"]),
    ("#define A B\n#define B A\nA B\n", ["A B"]),
    ("#define f(x) f(x + 1)\nf(0)\n", ["f(0 + 1)"]),
    ("#define foo foo + 1\nfoo\n", ["foo + 1"]),
    ("#define A B(A)\n#define B(x) x\nA\n", ["A"]),
])
def test_recursive_macros_stop(text: str, expected: list[str]) -> None:
    result, reporter = run(text)
    assert [line.strip() for line in result.text.split("\n") if line.strip()] == expected
    assert not reporter.diagnostics


# ----------------------------------------------------------------------------------------
# Conditionals
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("#if 1\na\n#else\nb\n#endif\n", ["a"]),
    ("#if 0\na\n#else\nb\n#endif\n", ["b"]),
    ("#if 0\na\n#elif 1\nb\n#else\nc\n#endif\n", ["b"]),
    ("#if 0\na\n#elif 0\nb\n#else\nc\n#endif\n", ["c"]),
    ("#ifdef X\na\n#endif\n", []),
    ("#define X\n#ifdef X\na\n#endif\n", ["a"]),
    ("#ifndef X\na\n#endif\n", ["a"]),
    ("#define Y\n#if defined(X) || defined Y\na\n#else\nb\n#endif\n", ["a"]),
    ("#if !defined X\na\n#endif\n", ["a"]),
    ("#if 1\n#if 0\na\n#else\nb\n#endif\nc\n#endif\n", ["b", "c"]),
    ("#if 0\n#if 1\na\n#else\nb\n#endif\n#endif\nc\n", ["c"]),
    ("#if 1\na\n#elif 1/0\nb\n#endif\n", ["a"]),
    ("#if 0\n#define X 1\n#endif\nX\n", ["X"]),
    ("#if 0\n#elifdef X\na\n#elifndef X\nb\n#endif\n", ["b"]),
    ("#if 0\n/*\n#endif\n*/\n#endif\nok\n", ["ok"]),
    ("#if 0\n\"unterminated\n'x\n#else\nok\n#endif\n", ["ok"]),
    ("#if 0\n#error never\n#bogus\n#endif\nok\n", ["ok"]),
    ("#define N 128\n#if N > 64\nbig\n#endif\n", ["big"]),
    ("#define F(x) (x * 2)\n#if F(3) == 6\nsix\n#endif\n", ["six"]),
])
def test_conditionals(text: str, expected: list[str]) -> None:
    result, reporter = run(text)
    assert [line.strip() for line in result.text.split("\n") if line.strip()] == expected
    assert not reporter.diagnostics


@pytest.mark.parametrize("expr, value", [
    ("1 + 2 * 3 == 7", True), ("(1 + 2) * 3 == 9", True), ("10 / 3 == 3", True),
    ("-7 / 2 == -3", True), ("-7 % 2 == -1", True), ("1 << 4 == 16", True),
    ("256 >> 4 == 16", True), ("3 < 4 && 4 <= 4 && 5 > 4 && 5 >= 5", True),
    ("1 != 1", False), ("6 & 3", True), ("6 ^ 6", False), ("4 | 0", True),
    ("~0 == -1", True), ("!0", True), ("!5", False), ("1 ? 2 : 0", True),
    ("0 ? 2 : 0", False), ("1 ? 0 : 1 ? 1 : 1", False), ("UNKNOWN", False),
    ("UNKNOWN + 1", True), ("0x10 == 16", True), ("010 == 8", True), ("0b101 == 5", True),
    ("1'000 == 1000", True), ("10u - 11 > 0", True), ("-1 < 0u", False),
    ("'A' == 65", True), ("'\\n' == 10", True), ("0 && 1 / 0", False), ("1 || 1 / 0", True),
    ("(2, 3) == 3", True), ("true", True), ("false", False),
    ("__has_include(<cuda.h>)", False), ("1 - 1 - 1 == -1", True),
    ("2 - 3 * 4 + 5 == -5", True), ("0x7fffffffffffffff + 1 < 0", True),
    ("-9223372036854775807 - 1 < 0", True), ("18446744073709551615 == -1", True),
    ("1 << 100000000000", False), ("-+-+1 == 1", True), ("!!!!!!!!!!1", True),
])
def test_if_expressions(expr: str, value: bool) -> None:
    result, reporter = run(f"#if {expr}\nyes\n#else\nno\n#endif\n")
    assert not reporter.diagnostics
    assert squash(result.text) == ("yes" if value else "no")


@pytest.mark.parametrize("line", [
    "#if", "#if 1 +", "#if (1", "#if 1 / 0", "#if 1.5", '#if "s"', "#if defined",
    "#if 1 2", "#if 1 ? 2", "#if 99999999999999999999999", "#if 09", "#elif",
])
def test_if_errors(line: str) -> None:
    text = f"#if 0\n#else\n{line}\n#endif\nafter\n" if line == "#elif" else \
        f"{line}\nyes\n#endif\nafter\n"
    result, reporter = run(text)
    if line == "#elif":  # #elif after #else: a malformed directive
        assert codes(reporter) == ["CQ0003"]
        return
    assert codes(reporter) == ["CQ0004"]
    assert reporter.diagnostics[0].line == 1
    assert squash(result.text) == "after"  # a failed condition is false


def test_if_nested_too_deeply_is_an_error() -> None:
    _, reporter = run("#if " + "(" * 5000 + "1" + ")" * 5000 + "\n#endif\n")
    assert codes(reporter) == ["CQ0004"]
    _, reporter = run("#if " + "1?" * 5000 + "1" + ":0" * 5000 + "\n#endif\n")
    assert codes(reporter) == ["CQ0004"]


# ----------------------------------------------------------------------------------------
# Dropped directives, non-directives, pinned defines, push/pop
# ----------------------------------------------------------------------------------------


def test_other_directives_are_dropped_silently() -> None:
    text = ("#include <x>\n#include \"choreo.h\"\n#pragma once\n#error boom\n#warning w\n"
            "#line 10 \"f\"\n#ident \"x\"\n#\n# 1 \"file\"\n#pragma croq intrinsic prefix P\nok\n")
    result, reporter = run(text)
    assert not reporter.diagnostics
    assert result.text == "\n" * 10 + "ok\n"


def test_line_starting_with_upper_bound_operator_is_not_a_directive() -> None:
    text = "foreach k in [256 /\n  #tile_k] {}\n#tile_k\n"
    result, reporter = run(text)
    assert result.text == text
    assert not reporter.diagnostics


@pytest.mark.parametrize("defines, text, expected", [
    ({"N": 64}, "#define N 128\nN\n", ["64"]),
    ({"N": 64}, "#undef N\nN\n", ["64"]),
    ({"E": None}, "[E]\n", ["[]"]),
    ({"E": ""}, "[E]\n", ["[]"]),
    ({"F": 0.5}, "F\n", ["0.5"]),
    ({"I": 128}, "I\n", ["128"]),
    ({"S": "a + b"}, "S\n", ["a + b"]),
    ({"B": True}, "B\n", ["1"]),
    ({"F(x)": "x*2"}, "F(3)\n", ["3*2"]),
    ({"DBG": None}, "#ifdef DBG\na\n#endif\n", ["a"]),
    ({"M": 5}, '#pragma push_macro("M")\n#undef M\nM\n#pragma pop_macro("M")\nM\n', ["5", "5"]),
])
def test_pinned_defines(defines: dict[str, int | float | str | None], text: str,
                        expected: list[str]) -> None:
    result, reporter = run(text, defines)
    assert [line.strip() for line in result.text.split("\n") if line.strip()] == expected
    assert not reporter.diagnostics


def test_invalid_define_name_is_reported() -> None:
    _, reporter = run("x\n", {"1x": 1})
    assert codes(reporter) == ["CQ0003"]


@pytest.mark.parametrize("text, expected", [
    ('#define M 128\n#pragma push_macro("M")\n#undef M\nM\n#pragma pop_macro("M")\nM\n',
     ["M", "128"]),
    ('#pragma push_macro("M")\n#define M 1\nM\n#pragma pop_macro("M")\nM\n', ["1", "M"]),
    ('#define M 1\n#pragma push_macro("M")\n#undef M\n#define M 2\n#pragma push_macro("M")\n'
     '#undef M\n#define M 3\nM\n#pragma pop_macro("M")\nM\n#pragma pop_macro("M")\nM\n',
     ["3", "2", "1"]),
    ('#define M 1\n#pragma pop_macro("M")\nM\n', ["1"]),
    ('#define M 1\n#pragma push_macro(M)\n#undef M\n#pragma pop_macro(M)\nM\n', ["M"]),
])
def test_push_pop_macro(text: str, expected: list[str]) -> None:
    assert lines(text) == expected


# ----------------------------------------------------------------------------------------
# No expansion inside literals and comments
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", [
    '"N"', "'N'", 'R"(N)"', 'R"tag(N)")tag"', "/* N */", "// N", 'u8"N"', 'L"N"',
    'R"(\nN\n)"', '"a\\"N"', "/* multi\nline N */", '__cpp__("N {")',
])
def test_no_expansion_in_literals_and_comments(literal: str) -> None:
    result, _ = run("#define N 1\n#define L bad\n" + literal + "\n")
    assert result.text == "\n\n" + literal + "\n"


def test_comments_keep_their_place() -> None:
    text = "a /* c */ b // d\n/* e\n f */ g\n"
    assert run(text)[0].text == text


def test_continuation_keeps_lines() -> None:
    result, _ = run("#define LONG 1 + \\\n  2 + \\\n  3\nLONG\nend\n")
    assert result.text.split("\n") == ["", "", "", "1 + 2 + 3", "end", ""]


def test_continued_line_comment_blanks_the_next_line() -> None:
    result, _ = run("#define N 1\n// c \\\nN\nN\n")
    assert result.text.split("\n") == ["", "// c \\", "", "1", ""]


# ----------------------------------------------------------------------------------------
# The line map
# ----------------------------------------------------------------------------------------


def test_token_after_expansion_maps_to_its_column() -> None:
    text = "#define N 128\nx = N + y;\n"
    result, _ = run(text)
    smap = result.source_map
    y = result.text.index("y;")
    assert smap.original_offset(y) == text.index("y;")
    loc = smap.locate(Span(y, y + 1))
    assert (loc.line, loc.column) == (2, 9)


def test_span_inside_expansion_points_at_invocation() -> None:
    text = "#define N 128\nx = N + y;\n"
    result, _ = run(text)
    start = result.text.index("128")
    reporter = Reporter(result.source_map)
    diag = reporter.report("CQ0201", Span(start + 1, start + 2), name="x")
    assert (diag.line, diag.column) == (2, 5)
    loc = result.source_map.locate(Span(start, start + 3))
    assert (loc.line, loc.column, loc.end_line, loc.end_column) == (2, 5, 2, 6)


def test_function_like_expansion_maps_to_whole_call() -> None:
    text = "#define SQ(x) ((x) * (x))\nint a = SQ(3) + b;\n"
    result, _ = run(text)
    smap = result.source_map
    assert result.text.split("\n")[1] == "int a = ((3) * (3)) + b;"
    b = result.text.index("b;")
    assert smap.locate(Span(b, b + 1)).column == text.split("\n")[1].index("b") + 1
    expansion = result.text.index("((3)")
    loc = smap.locate(Span(expansion, expansion + 11))
    assert (loc.line, loc.column, loc.end_column) == (2, 9, 14)


def test_multiline_call_keeps_following_tokens_in_place() -> None:
    text = "#define F(a, b) a + b\nv = F(1,\n      2) * w;\nz\n"
    result, _ = run(text)
    out = result.text.split("\n")
    assert out[1] == "v = 1 + 2" and out[2] == " * w;" and out[3] == "z"
    w = result.text.index("w;")
    loc = result.source_map.locate(Span(w, w + 1))
    assert (loc.line, loc.column) == (3, 12)
    one = result.text.index("1 + 2")
    loc = result.source_map.locate(Span(one, one + 5))
    assert (loc.line, loc.column, loc.end_line, loc.end_column) == (2, 5, 3, 9)


def test_lines_after_directives_and_skipped_groups_keep_numbers() -> None:
    text = "#if 0\nskip\n#endif\n#define A 1\nkeep A\n"
    result, _ = run(text)
    keep = result.text.index("keep")
    assert result.source_map.locate(Span(keep, keep + 4)).line == 5
    end = len(result.text)
    assert result.source_map.original_offset(end) == len(text)


# ----------------------------------------------------------------------------------------
# Diagnostics
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, code, line, column", [
    ("x\n#if 1\ny\n", "CQ0001", 2, 1),
    ("#if 1\n  #if 0\n  #endif\n", "CQ0001", 1, 1),
    ("#ifdef A\n", "CQ0001", 1, 1),
    ("a\n#endif\n", "CQ0002", 2, 1),
    ("#else\n", "CQ0002", 1, 1),
    ("  #elif 1\n", "CQ0002", 1, 3),
    ("#if 1\n#else\n#else\n#endif\n", "CQ0003", 3, 1),
    ("#define\n", "CQ0003", 1, 1),
    ("#define 1 2\n", "CQ0003", 1, 1),
    ("#define F(a,a) a\n", "CQ0003", 1, 9),
    ("#define F(a b) a\n", "CQ0003", 1, 9),
    ("#define F(a\n", "CQ0003", 1, 9),
    ("#define X ## a\n", "CQ0003", 1, 9),
    ("#define defined 1\n", "CQ0003", 1, 1),
    ("#undef\n", "CQ0003", 1, 1),
    ("#ifdef\n#endif\n", "CQ0003", 1, 1),
    ("#define F(a, b) a\nx F(1)\n", "CQ0005", 2, 3),
    ("#define F(a) a\n\nF(1\n", "CQ0006", 3, 1),
    ("#define F(a) a\nF(1\n#define G\n)\n", "CQ0006", 2, 1),
    ("x /* never closed\n", "CQ0009", 1, 3),
    ("#define A 1\n#define A 2\n", "CQ0008", 2, 9),
])
def test_diagnostics(text: str, code: str, line: int, column: int) -> None:
    _, reporter = run(text)
    assert codes(reporter) == [code]
    diag = reporter.diagnostics[0]
    assert (diag.line, diag.column) == (line, column)
    assert diag.filename == "test.co"


def test_redefinition_is_a_warning_only_when_different() -> None:
    _, reporter = run("#define A 1\n#define A 2\n")
    assert reporter.diagnostics[0].severity_kind is Severity.WARNING
    assert not reporter.has_errors()
    _, reporter = run("#define A 1 + 2\n#define A 1   + 2 // same\n")
    assert not reporter.diagnostics


def test_wrong_argument_count_leaves_call_unexpanded() -> None:
    result, reporter = run("#define F(a, b) a\nx F(1) y\n")
    assert result.text.split("\n")[1] == "x F(1) y"
    assert reporter.diagnostics[0].message == "macro 'F' expects 2 argument(s), got 1"


def test_missing_endif_message_and_stray_endif_message() -> None:
    _, reporter = run("#if 1\n#endif\n#endif\n#if 0\n")
    assert codes(reporter) == ["CQ0002", "CQ0001"]
    assert "#endif" in reporter.diagnostics[0].message
    assert reporter.diagnostics[1].line == 4


def test_deep_argument_nesting_is_reported() -> None:
    text = "#define F(x) x\n" + "F(" * 300 + "1" + ")" * 300 + "\n"
    _, reporter = run(text)
    assert codes(reporter) == ["CQ0007"]
    assert reporter.diagnostics[0].line == 2


def test_exponential_expansion_is_stopped() -> None:
    chain = "".join(f"#define F{i}(x) F{i - 1}(F{i - 1}(x))\n" for i in range(1, 40))
    text = "#define F0(x) x x\n" + chain + "F39(1)\nafter F1(2)\n"
    started = time.perf_counter()
    result, reporter = run(text)
    assert time.perf_counter() - started < 20
    assert "CQ0010" in codes(reporter)
    assert result.text.split("\n")[-2] == "after F1(2)"  # expansion stops after CQ0010


# ----------------------------------------------------------------------------------------
# Robustness
# ----------------------------------------------------------------------------------------

_FRAGMENTS = (
    "#if ", "#ifdef ", "#elif ", "#else", "#endif", "#define ", "#undef ", "A", "B", "F", "(",
    ")", ",", "\n", "\\\n", '"', "'", 'R"(', ')"', "/*", "*/", "//", "##", "#", "__VA_ARGS__",
    "...", "__co__", "{", "}", " ", "1", "0", "defined", "&&", "||", "?", ":", "x",
    '#pragma push_macro("A")', '#pragma pop_macro("A")', "__co__ void f() {", "\r\n", "\t",
)


def _locate_everywhere(result: Preprocessed) -> None:
    step = max(1, len(result.text) // 40)
    for offset in range(0, len(result.text) + 1, step):
        result.source_map.locate(Span(offset, offset + 1))


@pytest.mark.parametrize("seed", range(20))
def test_random_token_soup(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(100):
        text = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 80)))
        result, _ = run(text, {"B": 1} if seed % 2 else None)
        _locate_everywhere(result)


@pytest.mark.parametrize("seed", range(10))
def test_random_bytes(seed: int) -> None:
    rng = random.Random(1000 + seed)
    for _ in range(20):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 2000)))
        result, _ = run(data.decode("latin-1"))
        _locate_everywhere(result)


def test_ten_thousand_nested_ifs() -> None:
    depth = 10_000
    result, reporter = run("#if 1\n" * depth + "x\n" + "#endif\n" * depth)
    assert squash(result.text) == "x" and not reporter.diagnostics
    result, reporter = run("#if 1\n" * depth + "x\n")
    assert squash(result.text) == "x"
    assert set(codes(reporter)) == {"CQ0001"}


@pytest.mark.parametrize("text", [
    "#define F(x) x\n" + "F(" * 100_000,
    "#define G F(\n#define F(x) x\n" + "G " * 100_000,
    'R"(' * 100_000,
    "/*" + "x" * 1_000_000,
    '"' * 100_000 + "\n" + "'" * 100_000,
    "".join(f"#define X{i} X{i + 1}\n" for i in range(20_000)) + "X0\n",
    "#if " + "!" * 100_000 + "1\n#endif\n",
    "\\\n" * 50_000,
])
def test_adversarial_inputs_finish(text: str) -> None:
    started = time.perf_counter()
    run(text)
    assert time.perf_counter() - started < 20


def test_one_megabyte_is_fast() -> None:
    unit = ("#define TILE 64\n#define F(a, b) ((a) * (b) + TILE)\n"
            "__co__ void f(f16 [M, K] a) { x = F(1, 2); /* c */ s = \"str {\"; }\n"
            "int main() { char c = '{'; return F(TILE, 3); }\n")
    text = unit * (1_000_000 // len(unit))
    started = time.perf_counter()
    result, reporter = run(text)
    elapsed = time.perf_counter() - started
    assert elapsed < 10, elapsed
    assert not reporter.has_errors()
    assert "TILE" not in result.text.replace("#define TILE", "")
