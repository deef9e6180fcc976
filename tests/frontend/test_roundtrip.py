"""Round trip: ``parse(format(parse(src)))`` equals ``parse(src)`` modulo spans, over every
statement form, the sample programs and random expression trees; plus canonical text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from croqtile.frontend import syntax as ast
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.parser import parse_expr_text, parse_program, parse_stmt_text
from croqtile.frontend.preprocessor import preprocess
from croqtile.frontend.printer import (
    format_expr, format_function, format_program, format_stmt, strip_spans,
)
from croqtile.frontend.regions import find_co_functions
from croqtile.frontend.source import NO_SPAN, Source, SourceMap
from croqtile.frontend.tokens import BINARY_PRECEDENCE

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = sorted(DATA.glob("**/*.co"))
TOUR = DATA / "parse_only" / "grammar_tour.co"


def reporter_for(text: str) -> Reporter:
    return Reporter(SourceMap.identity(Source(text)))


def parse_file_text(text: str) -> ast.Program:
    reporter = reporter_for(text)
    program = parse_program(text, find_co_functions(text, reporter), reporter)
    assert not reporter.diagnostics, [d.render() for d in reporter.diagnostics]
    return program


def load_sample(path: Path) -> ast.Program:
    source = Source(path.read_text(), path.name)
    reporter = Reporter(SourceMap.identity(source))
    pp = preprocess(source, reporter)
    reporter.source_map = pp.source_map
    program = parse_program(pp.text, find_co_functions(pp.text, reporter), reporter)
    assert not reporter.diagnostics, [d.render() for d in reporter.diagnostics]
    return program


def reparse_stmt(stmt: ast.Stmt) -> ast.Stmt:
    text = format_stmt(stmt)
    reporter = reporter_for(text)
    again = parse_stmt_text(text, reporter)
    assert not reporter.diagnostics, (text, [d.render() for d in reporter.diagnostics])
    return again


def reparse_expr(expr: ast.Expr) -> ast.Expr:
    text = format_expr(expr)
    reporter = reporter_for(text)
    again = parse_expr_text(text, reporter)
    assert not reporter.diagnostics, (text, [d.render() for d in reporter.diagnostics])
    return again


# --- whole programs --------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(DATA)))
def test_sample_program_round_trip(path: Path) -> None:
    program = load_sample(path)
    assert program.functions
    text = format_program(program)
    again = parse_file_text(text)
    assert strip_spans(again) == strip_spans(program)
    assert format_program(again) == text  # printing is a fixpoint


def _statements(block: ast.Block) -> list[ast.Stmt]:
    """Every statement of a body, nested ones included."""
    out: list[ast.Stmt] = []
    for stmt in block.stmts:
        out.append(stmt)
        for name in ("body", "then", "other"):
            child = getattr(stmt, name, None)
            if isinstance(child, ast.Block):
                out.extend(_statements(child))
    return out


def test_grammar_tour_covers_every_statement_class() -> None:
    program = load_sample(TOUR)
    seen = {type(s) for f in program.functions for s in _statements(f.body)}
    statement_classes = {cls for cls in vars(ast).values()
                         if isinstance(cls, type) and issubclass(cls, ast.Stmt)
                         and cls not in (ast.Stmt, ast.Block)}
    assert statement_classes - seen == set()


def test_every_statement_of_the_tour_round_trips_alone() -> None:
    program = load_sample(TOUR)
    for function in program.functions:
        for stmt in _statements(function.body):
            assert strip_spans(reparse_stmt(stmt)) == strip_spans(stmt), format_stmt(stmt)


# --- statements with printing subtleties -------------------------------------------------

STATEMENTS = [
    "if (a) x = 1; else if (b) y = 2; else if (c) {} else z = 3;",
    "if (a) if (b) x = 1; else y = 2;",
    "if (a) { if (b) x = 1; } else y = 2;",
    "if (a) ; else ;",
    "while (a) ;",
    "foreach k in [4] foreach j in [2] x.at(k, j) = 1;",
    "parallel p by 2 parallel q by 4 {}",
    "foreach y(::-1), c = y(:-1), z(1:2:3) {}",
    'assert(a, "quote \\" and backslash \\\\ and newline \\n and tab \\t");',
    '__cpp__(R"x(raw ")" text)x");',
    '__asm__("add %0, %1;" : "=r"(a[0]) : "r"(b), [n] "r"(c) : "memory");',
    "x = |(a | b) + 1| + |a * (b | c)| + |!(a | b)|;",
    "x = a - -1 - (-2) + -1.5f * -inf;",
    "t = u {(0), (1) + 2, 3};",
    "s32 [sp [(0) / 2, (1)], x.span [(0)]] out;",
    "x = foo(a), y = foo(a + 1), z = foo(), w = ns::g<1, f16>(a);",
    "foo(a);",
    "foo<2>(a);",
    "x = a ? b ? c : d : e ? f : g;",
    "x = (a ? b : c) ? d : e;",
    "x = !(a + b) & ~(c # d) | !!e;",
    "x = ~!a;",
    "x = a.chunkat(p).span(0) + (a + b).span;",
    "dma.copy.async.swiz<128> a => b;",
]


@pytest.mark.parametrize("source", STATEMENTS)
def test_statement_round_trip(source: str) -> None:
    reporter = reporter_for(source)
    stmt = parse_stmt_text(source, reporter)
    # the CQ0114 sample still parses; everything else is clean
    assert all(d.code == "CQ0114" for d in reporter.diagnostics)
    assert strip_spans(reparse_stmt(stmt)) == strip_spans(stmt)


# --- canonical text ----------------------------------------------------------------------

CANONICAL = [
    ("((a + b)) * c", "(a + b) * c"),
    ("(a - b) - c", "a - b - c"),
    ("a - (b - c)", "a - (b - c)"),
    ("a * (b + c) % d", "a * (b + c) % d"),
    ("(a | b) & c", "a | b & c"),
    ("a | (b & c)", "a | (b & c)"),
    ("(a & b) + c", "a & b + c"),
    ("(a + b) & c", "(a + b) & c"),
    ("!(a & b)", "!a & b"),
    ("(!a) & b", "(!a) & b"),
    ("(p # m) + 1", "p # m + 1"),
    ("p#m", "p # m"),
    ("(a ? b : c)", "a ? b : c"),
    ("x - 1.0", "x - 1.0"),
    ("x-1", "x - 1"),
    ("a*-1", "a * -1"),
    ("a - - 1", "a - -1"),
    ("{ a,b }", "{a, b}"),
    ("sp [ (0) /2 ]", "sp[(0) / 2]"),
    ("| f16 |", "|f16|"),
    ("|a * (b | c)|", "|(a * b | c)|"),
    ("__to< half >( x )", "__to<f16>(x)"),
    ('"a" "b"', '"a" "b"'),
    ("x.at(i,j)", "x.at(i, j)"),
    ("a.subspan(2, 11 : 1, 1).step(4, 4).at(i, j).chunkat(_, w)",
     "a.subspan(2, 11 : 1, 1).step(4, 4).at(i, j).chunkat(_, w)"),
    ("a.span_as([4, 4])", "a.span_as(4, 4)"),
]


@pytest.mark.parametrize("source, text", CANONICAL, ids=[s for s, _ in CANONICAL])
def test_canonical_expression_text(source: str, text: str) -> None:
    reporter = reporter_for(source)
    assert format_expr(parse_expr_text(source, reporter)) == text
    assert not reporter.diagnostics


def test_canonical_function_text() -> None:
    source = ("__co__ f16 [M] f(global half [M] a, int n) { parallel p by 4 : block "
              "{ foreach k in [4] a.at(p # k) = 0; if (n) { } else a.at(0) = 1; } return a; }")
    program = parse_file_text(source)
    assert format_function(program.functions[0]) == (
        "__co__ f16 [M] f(global f16 [M] a, int n) {\n"
        "  parallel p by 4 : block {\n"
        "    foreach k in [4]\n"
        "      a.at(p # k) = 0;\n"
        "    if (n) {\n"
        "    } else\n"
        "      a.at(0) = 1;\n"
        "  }\n"
        "  return a;\n"
        "}")


# --- random expression trees -------------------------------------------------------------


def _leaf(rng: random.Random) -> ast.Expr:
    choice = rng.randrange(6)
    if choice == 0:
        value = rng.randrange(-9, 100)
        return ast.IntLit(NO_SPAN, value, str(value))
    if choice == 1:
        text = rng.choice(["1.5", "-0.25f", "2.0f", "-3.0"])
        return ast.FloatLit(NO_SPAN, float(text.rstrip("f")), text, text.endswith("f"))
    if choice == 2:
        return ast.BoundOf(NO_SPAN, rng.choice("pqr"))
    if choice == 3:
        return ast.Member(NO_SPAN, ast.Ident(NO_SPAN, "x"), "span")
    return ast.Ident(NO_SPAN, rng.choice("abcde"))


def _tree(rng: random.Random, depth: int) -> ast.Expr:
    if depth == 0:
        return _leaf(rng)
    sub = lambda: _tree(rng, depth - 1)  # noqa: E731
    choice = rng.randrange(14)
    if choice < 5:
        return ast.Binary(NO_SPAN, rng.choice(list(BINARY_PRECEDENCE)), sub(), sub())
    if choice == 5:
        return ast.Ternary(NO_SPAN, sub(), sub(), sub())
    if choice == 6:
        return ast.Unary(NO_SPAN, rng.choice("!~"), sub())
    if choice == 7:
        name = ast.Ident(NO_SPAN, rng.choice("abc"))
        return rng.choice([ast.Unary(NO_SPAN, "++", name), ast.Postfix(NO_SPAN, "--", name),
                           ast.Unary(NO_SPAN, "&", name)])
    if choice == 8:
        return ast.SizeOf(NO_SPAN, sub())
    if choice == 9:
        index = _leaf(rng) if rng.random() < 0.5 else ast.IntLit(NO_SPAN, 1, "1")
        base = rng.choice([ast.Ident(NO_SPAN, "t"), ast.Member(NO_SPAN, ast.Ident(NO_SPAN, "x"),
                                                               "span")])
        if isinstance(index, (ast.IntLit, ast.Ident)):
            return ast.Select(NO_SPAN, base, index)
        return ast.Index(NO_SPAN, ast.Ident(NO_SPAN, "buf"), index)
    if choice == 10:
        return ast.ElemAccess(NO_SPAN, ast.Ident(NO_SPAN, "x"), (sub(), sub()))
    if choice == 11:
        return ast.CallExpr(NO_SPAN, rng.choice(["cdiv", "__max", "foo"]), (sub(), sub()))
    if choice == 12:
        return rng.choice([ast.TupleLit, ast.ShapeLit])(NO_SPAN, (sub(), sub()))
    return ast.Cast(NO_SPAN, "f16", False, sub())


def test_random_expression_trees_round_trip() -> None:
    rng = random.Random(20240601)
    for _ in range(600):
        tree = _tree(rng, rng.randrange(1, 6))
        assert strip_spans(reparse_expr(tree)) == strip_spans(tree), format_expr(tree)


def test_strip_spans_ignores_positions_only() -> None:
    a = ast.Binary(NO_SPAN, "+", ast.Ident(NO_SPAN, "x"), ast.IntLit(NO_SPAN, 1, "1"))
    moved = parse_expr_text("x + 1", reporter_for("x + 1"))
    assert strip_spans(a) == strip_spans(moved)
    assert strip_spans(a) != strip_spans(parse_expr_text("x + 2", reporter_for("x + 2")))
    assert strip_spans(a) == ("Binary", ("op", "+"), ("lhs", ("Ident", ("name", "x"))),
                              ("rhs", ("IntLit", ("value", 1), ("text", "1"), ("suffix", ""))))
