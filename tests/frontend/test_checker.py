"""The checker: one bad program per rule it enforces (code, line, column), and no false
positives on the sample programs."""

from __future__ import annotations

from pathlib import Path

import pytest

from croqtile.frontend.diagnostics import CompileError, Reporter
from croqtile.frontend.parser import parse_program
from croqtile.frontend.preprocessor import preprocess
from croqtile.frontend.regions import find_co_functions
from croqtile.frontend.sema.checker import Checker
from croqtile.frontend.source import Source, SourceMap

DATA = Path(__file__).resolve().parent.parent / "data"


def check(text: str) -> Reporter:
    source = Source(text, "t.co")
    reporter = Reporter(SourceMap.identity(source))
    pp = preprocess(source, reporter)
    reporter.source_map = pp.source_map
    regions = find_co_functions(pp.text, reporter)
    program = parse_program(pp.text, [(r.start, r.end) for r in regions], reporter)
    assert not reporter.has_errors(), [d.render() for d in reporter.diagnostics]
    Checker(reporter).check_program(program)
    return reporter


def wrap(body: str, params: str = "global f32 [M, K] a, global f32 [N, K] b") -> str:
    return f"__co__ void f({params}) {{\n{body}\n}}\n"


# (name, program, expected code, line) -- line counts from the function header (line 1)
BAD = [
    ("undeclared", wrap("  x = y + 1;"), "CQ0201", 2),
    ("redeclared", "__co__ void f(s32 [4] a, int a) {}\n", "CQ0202", 1),
    ("immutable", wrap("  int x = 1;\n  x = 2;"), "CQ0203", 3),
    ("ituple rank", wrap("  ituple<3> t = {1, 2};"), "CQ0218", 2),
    ("mdspan rank", wrap("  mdspan<2> s : [1, 2, 3];"), "CQ0218", 2),
    ("shape arith rank", wrap("  s : [7, 8, 9] + {1, 2};"), "CQ0309", 2),
    ("zero dim", wrap("  parallel p by 1 { shared f32 [0] z; }"), "CQ0306", 2),
    ("shared on host", wrap("  shared f32 [4] z;"), "CQ0607", 2),
    ("global in parallel", wrap("  parallel p by 1 { global f32 [4] z; }"), "CQ0607", 2),
    ("shared param", "__co__ void f(shared f32 [4] a) {}\n", "CQ0219", 1),
    ("dma elem type", wrap("  parallel p by 1 : block {\n    shared f16 [4, 8] s;\n"
                           "    dma.copy a.subspan(4, 8).at(0, 0) => s;\n  }"), "CQ0401", 4),
    ("dma rank", wrap("  parallel p by 1 : block {\n    shared f32 [4, 8, 2] s;\n"
                      "    dma.copy a.subspan(4, 8).at(0, 0) => s;\n  }"), "CQ0402", 4),
    ("dma shape", wrap("  parallel p by 1 : block {\n    shared f32 [8, 4] s;\n"
                       "    dma.copy a.subspan(4, 8).at(0, 0) => s;\n  }"), "CQ0403", 4),
    ("dma to small", wrap("  parallel p by 1 : block {\n    shared f32 [2, 8] s;\n"
                          "    dma.copy a.subspan(4, 8).at(0, 0) => s;\n  }"), "CQ0404", 4),
    ("dma shared on host", wrap("  f = dma.copy a => shared;"), "CQ0405", 2),
    ("dma.load", wrap("  parallel p by 1 { f = dma.load a => shared; }"), "CQ0406", 2),
    ("swizzle", wrap("  parallel p by 1 { f = dma.copy.swiz<256> a => shared; }"), "CQ0407", 2),
    ("transpose perm", wrap("  parallel p by 1 { f = dma.transp<1, 0, 2> a => shared; }"),
     "CQ0408", 2),
    ("wait sync future", wrap("  parallel p by 1 {\n    f = dma.copy a => shared;\n    wait f;\n  }"),
     "CQ0412", 4),
    ("unnamed async", wrap("  parallel p by 1 { dma.copy.async a => shared; }"), "CQ0411", 2),
    ("chunkat arity", wrap("  parallel p by 4 { f = dma.copy a.chunkat(p) => shared; }"),
     "CQ0301", 2),
    ("chunkat too big", "__co__ void f(global f32 [16, 32] a) {\n"
                        "  parallel {p, q} by [32, 2] { f = dma.copy a.chunkat(p, q) => shared; }\n}\n",
     "CQ0302", 2),
    ("subspan too big", "__co__ void f(global f32 [16, 32] a) {\n"
                        "  parallel p by 1 { f = dma.copy a.subspan(8, 33) => shared; }\n}\n",
     "CQ0303", 2),
    ("span_as count", "__co__ void f(global f32 [16, 32] a) {\n"
                      "  parallel p by 1 { f = dma.copy a.span_as([16, 16]) => shared; }\n}\n",
     "CQ0308", 2),
    ("element rank", wrap("  parallel p by 4 { a.at(p) = 1.0f; }"), "CQ0305", 2),
    ("wildcard loop var", wrap("  foreach _ in [4] {}"), "CQ0208", 2),
    ("parallel bound", wrap("  parallel p by 0 {}"), "CQ0601", 2),
    ("duplicate parallel var", wrap("  parallel p by 2, p by 4 {}"), "CQ0602", 2),
    ("level order", wrap("  parallel x by 2 : thread { parallel y by 2 : block {} }"), "CQ0609", 2),
    ("break outside loop", wrap("  break;"), "CQ0606", 2),
    ("return in parallel", wrap("  parallel p by 1 { return; }"), "CQ0606", 2),
    ("return value in void", wrap("  return 1;"), "CQ0211", 2),
    ("missing return", "__co__ s32 [4] f(s32 [4] a) {\n  s32 [4] o;\n}\n", "CQ0212", 1),
    ("mma operand rank", wrap("  parallel p by 1 : block {\n    mc = mma.fill 0.0f;\n"
                              "    mma.row.row mc, a, b;\n  }",
                              "global f32 [4, 4, 4] a, global f32 [4, 4] b"), "CQ0501", 4),
    ("mma k mismatch", wrap("  parallel p by 1 : block {\n    mc = mma.fill.f32 0.0f;\n"
                            "    mma.row.col mc, a, b;\n  }",
                            "global f16 [16, 16] a, global f16 [8, 16] b"), "CQ0502", 4),
    ("mma types", wrap("  parallel p by 1 : block {\n    mc = mma.fill.f16 0.0f;\n"
                       "    mma.row.row mc, a, b;\n  }",
                       "global bf16 [16, 16] a, global bf16 [16, 16] b"), "CQ0504", 4),
    ("fill an operand", wrap("  parallel p by 1 : block {\n    ma = mma.load a;\n"
                             "    mma.fill ma, 0.0f;\n  }", "global f16 [16, 16] a"), "CQ0505", 4),
    ("acc never used", wrap("  parallel p by 1 : block { mc = mma.fill 0.0f; }"), "CQ0506", 2),
    ("store shape", wrap("  parallel p by 1 : block {\n    mc = mma.fill.f32 0.0f;\n"
                         "    mma.row.row mc, a, b;\n    mma.store mc, c;\n  }",
                         "global f16 [16, 16] a, global f16 [16, 16] b, global f16 [8, 16] c"),
     "CQ0507", 5),
    ("subbyte type", "__co__ void f(global f4_e2m1 [4] a) {}\n", "CQ0214", 1),
    ("operator types", wrap("  parallel p by 1 { f16 x = 1.0f; bf16 y = 1.0f; f32 z = x + y; }"),
     "CQ0205", 2),
    ("compose non-bounded", wrap("  int x = 1;\n  int y = x # x;"), "CQ0205", 3),
    ("bound of scalar", wrap("  int x = 1;\n  int y = #x;"), "CQ0207", 3),
]


@pytest.mark.parametrize("name, text, code, line", BAD, ids=[b[0] for b in BAD])
def test_rejects(name: str, text: str, code: str, line: int) -> None:
    reporter = check(text)
    codes = [(d.code, d.line) for d in reporter.diagnostics]
    assert (code, line) in codes, f"{name}: expected {code} at line {line}, got {codes}"
    diag = next(d for d in reporter.diagnostics if d.code == code)
    rendered = diag.render()
    assert rendered.startswith(f"{diag.severity}[{code}]: ")
    assert f"--> t.co:{diag.line}:{diag.column}" in rendered
    assert "^" in rendered


def test_lossy_conversion_is_a_warning_with_a_hint() -> None:
    reporter = check(wrap("  parallel p by 1 { f32 x = 1.0f; f16 y = x; }"))
    [diag] = reporter.diagnostics
    assert (diag.code, diag.severity) == ("CQ0206", "warning")
    assert diag.hint == "write `__to<f16>(...)` to make the conversion explicit"


def test_layout_hint_names_the_right_suffix() -> None:
    reporter = check(wrap("  parallel p by 1 : block {\n    mc = mma.fill.f32 0.0f;\n"
                          "    mma.row.row mc, a, b;\n  }",
                          "global f16 [16, 32] a, global f16 [32, 16] b"))
    diag = next(d for d in reporter.diagnostics if d.code == "CQ0502")
    assert "`mma.row.col`" in (diag.hint or "")


def test_diagnostic_in_a_macro_points_at_the_use() -> None:
    text = "#define BAD y + 1\n__co__ void f(s32 [4] a) {\n  int x = BAD;\n}\n"
    reporter = check(text)
    [diag] = reporter.diagnostics
    assert (diag.code, diag.line, diag.column) == ("CQ0201", 3, 11)


@pytest.mark.parametrize("path", sorted(DATA.glob("*.co")), ids=lambda p: p.name)
def test_no_false_positives_on_samples(path: Path) -> None:
    if "parse-only" in path.read_text().splitlines()[0]:
        pytest.skip("parse-only sample")
    reporter = check(path.read_text())
    assert not reporter.errors, "\n".join(d.render() for d in reporter.errors)


def test_compile_error_carries_every_error() -> None:
    reporter = check(wrap("  x = y;\n  int z = 1;\n  z = 2;"))
    err = CompileError(reporter.errors)
    assert [d.code for d in err.diagnostics] == ["CQ0201", "CQ0203"]
    assert err.to_dict()["diagnostics"][0]["line"] == 2


def test_line_directives_remap_diagnostics() -> None:
    text = '#line 32 "bb.c"\n__co__ void f(s32 [4] a) {\n#line 78\n  x = y;\n}\n'
    [diag] = check_anyway(text)
    assert (diag.filename, diag.line, diag.column) == ("bb.c", 78, 7)
    assert diag.source_line == "  x = y;"  # the text quoted is the physical line
    assert "--> bb.c:78:7" in diag.render()


def check_anyway(text: str) -> list:
    from croqtile.runtime.driver import check_source

    return check_source(text, filename="t.co")


BUFFER_ARRAY_INDEX = """__co__ void f(global f32 [4, 8] a) {{
  parallel p by 1 : block {{
    shared f32 [4, 8] s[3];
    parallel wg by 4 : group-4 {{
      {guard} {{
        dma.copy a => s[{index}];
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize("guard, index, message", [
    ("inthreads (wg > 0)", "wg - 1", None),
    ("if (wg >= 1 && wg < 4)", "wg - 1", None),
    ("if (0 < wg)", "2 * wg - 2", "the index '2 * wg - 2' of the buffer array 's' reaches 4, "
                                  "outside [0, 3)"),
    ("if (wg == 0)", "wg + 2", None),
    ("if (true)", "wg - 1", "the index 'wg - 1' of the buffer array 's' reaches -1, outside "
                            "[0, 3)"),
    ("if (wg < 3)", "wg + 1", "the index 'wg + 1' of the buffer array 's' reaches 3, outside "
                              "[0, 3)"),
])
def test_buffer_array_index_ranges_follow_enclosing_conditions(guard: str, index: str,
                                                               message: str | None) -> None:
    """A bounded index's range is narrowed by the conditions around it, and sums,
    differences and multiples of it are followed (not only its bound minus one)."""
    reporter = check(BUFFER_ARRAY_INDEX.format(guard=guard, index=index))
    found = [d.message for d in reporter.diagnostics if d.code == "CQ0315"]
    assert found == ([message] if message else [])


def test_mma_with_a_bad_operand_is_not_also_never_executed() -> None:
    """An accumulator whose MMA had an operand error is not reported as never executed."""
    reporter = check(wrap("  parallel p by 1 : block {\n    mc = mma.fill.f32 0.0f;\n"
                          "    mma.row.row mc, a.subspan(16, 16).at(0, 0), missing;\n"
                          "    mma.store mc, b.subspan(16, 16).at(0, 0);\n  }"))
    assert [d.code for d in reporter.diagnostics] == ["CQ0201"]


def test_a_whole_fragment_array_as_accumulator_is_one_error() -> None:
    """``mma ... mc, ...`` on an array of fragments: CQ0550, and no echo about the array
    never being executed."""
    reporter = check(wrap("  parallel p by 1 : block {\n    frag mc[1][3] {0};\n"
                          "    parallel w by 1 : group {\n"
                          "      mma.row.row mc, a.subspan(16, 16).at(0, 0), "
                          "b.subspan(16, 16).at(0, 0);\n"
                          "      mma.store mc[0][1], a.subspan(16, 16).at(0, 0);\n    }\n  }"))
    assert [(d.code, d.line) for d in reporter.diagnostics] == [("CQ0550", 5)]


def test_mma_load_into_a_register_tile_checks_the_shape() -> None:
    reporter = check(wrap("  parallel p by 1 : block {\n    frag f32 [16, 8] t {0.0f};\n"
                          "    mma.load a.subspan(16, 16).at(0, 0), t;\n  }"))
    assert [(d.code, d.line) for d in reporter.diagnostics] == [("CQ0403", 4)]
