"""The rejection-conformance harness's own logic, on small synthetic lit files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.corpus import discover, file_programs, target_policy
from tests.conformance.lit import directives, pattern_regex, run_lines
from tests.conformance.locate import Role, expectations, roles
from tests.conformance.reject_upstream import (ACCEPTED, CRASH, OTHER_LINE, SAME_LINE, Reported,
                                               main, score)
from tests.conformance.source import SourceFile, active_lines, function_spans, physical_line


def _lines(text: str) -> list[str]:
    return text.strip("\n").splitlines()


# ----------------------------------------------------------------------------- lit


def test_run_line_options() -> None:
    [run] = run_lines(["// RUN: not choreo -DFOO -DN=4 -t cute -arch=sm_90a %s 2>&1 "
                       "| FileCheck --check-prefix=BAD %s"])
    assert run.negated and run.tool == "choreo" and run.is_compiler_run
    assert run.defines == (("FOO", "1"), ("N", "4"))
    assert run.targets == ("cute",) and run.arch == "sm_90a"
    assert run.prefixes == ("BAD",)


def test_run_line_continuation_and_disabled_runs() -> None:
    runs = run_lines(["// RUN: choreo -e %s \\", "// RUN:   | FileCheck %s", "// 1RUN: not choreo %s"])
    assert len(runs) == 1
    assert not runs[0].negated and runs[0].prefixes == ("CHECK",) and runs[0].filecheck


def test_directives_kinds_and_prefixes() -> None:
    lines = ["// CHECK: a", "// CHECK-NOT: b", "// CHECK-COUNT-3: c", "// OTHER: d",
             "// XCHECK: e", "// CHECK-DAG: f"]
    found = directives(lines, ("CHECK",))
    assert [(d.line, d.kind, d.count) for d in found] == [
        (1, "", 1), (2, "NOT", 1), (3, "COUNT", 3), (6, "DAG", 1)]
    assert [d.positive for d in found] == [True, False, True, True]


def test_pattern_regex_blocks_and_whitespace() -> None:
    regex = pattern_regex("value {{[0-9]+}} of   `x'")
    assert regex.search("error: value 42 of `x' here")
    assert regex.search("value 7 of\t`x'")
    assert not regex.search("value x of `x'")
    assert pattern_regex("at line [[@LINE+1]]", 10).search("at line 11")


# ----------------------------------------------------------------------------- source


def test_active_lines_follow_defines() -> None:
    lines = _lines("""
#ifdef A
a;
#else
b;
#endif
#if defined(B) && 1
c;
#endif
""")
    assert 2 in active_lines(lines, {"A": "1"}) and 4 not in active_lines(lines, {"A": "1"})
    assert 4 in active_lines(lines, {}) and 7 not in active_lines(lines, {})
    assert 7 in active_lines(lines, {"B": "1"})


def test_line_directives_map_back_to_physical_lines() -> None:
    lines = ["x", "#line 40 \"v.c\"", "y", "z"]
    assert physical_line(lines, "v.c", 41) == 4
    assert physical_line(lines, None, 1) == 1
    assert physical_line(lines, "w.c", 41) is None


def test_function_spans_skip_braces_in_comments() -> None:
    lines = _lines("""
__co__ void f() {   // {
  x = 1;
}
int other;
__co__ void g(s32 [4] a) {
  parallel p by 1 {
  }
}
""")
    assert function_spans(lines) == [(1, 3), (5, 8)]


# ----------------------------------------------------------------------------- locate

PROGRAM = """
// RUN: not choreo %s 2>&1 | FileCheck %s
__co__ void first() {
  int k = 1;
  k = 2;      // not allowed
}
// CHECK: error: cannot re-assign `k'.

__co__ void second(f32 [8] a) {
  parallel p by 1 {
    // CHECK: error: a barrier is wrong here
    sync.barrier : device;
  }
}
// CHECK: error: bad copy
// CHECK:     x = dma.copy a => shared;
// CHECK: Totally 3 errors have been detected.
"""


def _expect(text: str) -> list:
    lines = _lines(text)
    source = SourceFile(lines, {})
    return expectations(directives(lines, ("CHECK",)), source)


def test_roles_of_directives() -> None:
    lines = _lines(PROGRAM)
    source = SourceFile(lines, {})
    kinds = roles(directives(lines, ("CHECK",)), source)
    assert kinds == [Role.ERROR, Role.ERROR, Role.ERROR, Role.ERROR, Role.SUMMARY]


def test_expected_line_from_quoted_name_and_comment() -> None:
    first = _expect(PROGRAM)[0]
    assert first.lines == (4,) and first.how == "hint"


def test_expected_line_of_a_directive_inside_a_function() -> None:
    assert _expect(PROGRAM)[1].lines == (11,)


def test_expected_line_from_a_source_echo() -> None:
    text = PROGRAM.replace("    sync.barrier : device;", "    x = dma.copy a => shared;")
    third = _expect(text)[2]
    assert third.how == "echo" and third.lines == (11,)


def test_explicit_locations() -> None:
    text = """
__co__ void f() {
  bad;  // CHECK: error: [[@LINE]]
#line 70 "virtual.co"
  worse;
}
// CHECK: virtual.co:70.3: error: nope
"""
    first, second = _expect(text)
    assert first.lines == (2,) and first.how == "explicit"
    assert second.lines == (4,) and second.reported == ("virtual.co", 70)


def test_directives_above_every_function_are_about_the_following_ones() -> None:
    text = """
// CHECK: error: unknown name 'zz'
__co__ void f() {
  int a = 1;
  int b = zz;
}
"""
    assert _expect(text)[0].lines == (4,)


# ----------------------------------------------------------------------------- corpus


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / "tests" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"))
    return path


VARIANTS = """
// RUN: not choreo -DONE %s 2>&1 | FileCheck --check-prefix=C1 %s
// RUN: not choreo -DTWO %s 2>&1 | FileCheck --check-prefix=C2 %s
__co__ void f() {
#ifdef ONE
  int a = q;
#endif
#ifdef TWO
  int b = r;
#endif
}
// C1: error: symbol `q' is used before declaration.
// C2: error: symbol `r' is used before declaration.
"""


def test_define_variants_become_programs(tmp_path: Path) -> None:
    path = _write(tmp_path, "check/variants.co", VARIANTS)
    programs, why = file_programs(path, "tests/check/variants.co", "check")
    assert why == ""
    assert [(p.variant, p.expectations[0].lines) for p in programs] == [
        ("-DONE", (5,)), ("-DTWO", (8,))]


def test_applicability_and_skips(tmp_path: Path) -> None:
    _write(tmp_path, "check/chip.co", "// RUN: not choreo %s 2>&1 | FileCheck %s\n"
           "__co__ void f() {}\n// CHECK: error: too many lanes for SM_80.\n")
    _write(tmp_path, "amdgpu/check/hip.co", "// RUN: not choreo -t hip %s 2>&1 | FileCheck %s\n"
           "__co__ void f() {}\n// CHECK: error: nope\n")
    _write(tmp_path, "check/off.co", "// 1RUN: not choreo %s 2>&1 | FileCheck %s\n"
           "__co__ void f() {}\n// CHECK: error: nope\n")
    _write(tmp_path, "check/positive.co", "// RUN: choreo %s | FileCheck %s\n"
           "__co__ void f() {}\n// CHECK: void f\n")
    programs, skipped = discover(tmp_path)
    by_file = {p.rel: p for p in programs}
    assert set(by_file) == {"tests/check/chip.co", "tests/amdgpu/check/hip.co"}
    assert not by_file["tests/check/chip.co"].applicable
    assert "SM_80" in by_file["tests/check/chip.co"].reason
    assert not by_file["tests/amdgpu/check/hip.co"].applicable
    assert [s.rel for s in skipped] == ["tests/check/off.co"]
    assert target_policy("plain language rule") == ""


# ----------------------------------------------------------------------------- scoring


def _reported(line: int, code: str = "CQ0100", severity: str = "error") -> Reported:
    return Reported(code, severity, line, 1, "x.co", "m")


@pytest.mark.parametrize("reported, status", [
    ([_reported(4)], SAME_LINE),
    ([_reported(6)], OTHER_LINE),
    ([_reported(4, severity="warning")], ACCEPTED),
    ([], ACCEPTED),
    ([_reported(4), _reported(0, "CQ0901")], CRASH),
])
def test_score(tmp_path: Path, reported: list[Reported], status: str) -> None:
    path = _write(tmp_path, "check/one.co", "// RUN: not choreo %s 2>&1 | FileCheck %s\n"
                  + PROGRAM.split("\n", 2)[2])
    [program] = file_programs(path, "tests/check/one.co", "check")[0]
    assert score(program, reported).status == status


def test_main_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "parse/syntax.co", """
// RUN: not choreo %s 2>&1 | FileCheck %s
__co__ void f() {
  int a = ;
}
// CHECK: error: syntax error
""")
    out = tmp_path / "out.json"
    assert main([str(tmp_path), "--json", str(out), "--only", "parse"]) == 0
    text = capsys.readouterr().out
    assert "applicable 1" in text and "1/1 = 100.0%" in text
    assert out.read_text().count('"status": "SAME-LINE"') == 1
