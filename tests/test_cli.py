"""``croqtile check`` and ``croqtile explain``: exact positions, formats, exit statuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from croqtile.cli import main

TWICE = """\
__co__ s32 [8] twice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8
    y.at(i) = x.at(i) * 2;
  return y;
}
"""

# Line 4, column 20 is the undeclared `j`.
UNDECLARED_J = TWICE.replace("x.at(i) * 2", "x.at(j) * 2")

# A lossy conversion: a warning (line 5, column 13) with a hint, and no error.
LOSSY = """\
__co__ s32 [8] twice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8 {
    f32 a = 1.0f;
    f16 b = a;
    y.at(i) = x.at(i) * 2;
  }
  return y;
}
"""

# Correct only while N is 8: line 8, column 15 names the undeclared `w` otherwise.
DEPENDS_ON_N = """\
#define N 8
__co__ s32 [8] twice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8
#if N == 8
    y.at(i) = x.at(i) * 2;
#else
    y.at(i) = w.at(i) * 2;
#endif
  return y;
}
"""

# Two kernels, the second one wrong: `j` on line 18, column 20 of the .py file.
TWO_KERNELS = '''\
import croqtile
import torch

GOOD = """
__co__ s32 [8] twice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8
    y.at(i) = x.at(i) * 2;
  return y;
}
"""

def kernels():
    good = croqtile.compile(GOOD)
    bad = croqtile.compile("""__co__ s32 [8] thrice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8
    y.at(i) = x.at(j) * 3;
  return y;
}""")
    return good, bad
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def position_of(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first ``needle``: cross-checks the literals above."""
    before = text[:text.index(needle)]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


def test_the_fixtures_put_the_mistakes_where_the_tests_say() -> None:
    assert position_of(UNDECLARED_J, "j)") == (4, 20)
    assert position_of(LOSSY, "a;") == (5, 13)
    assert position_of(DEPENDS_ON_N, "w.at") == (8, 15)
    assert position_of(TWO_KERNELS, "j)") == (18, 20)


# --- .co files ----------------------------------------------------------------------------


def test_co_file_error_is_reported_at_its_line_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.co", UNDECLARED_J)
    status, out, err = run(capsys, "check", str(path))
    assert status == 1
    assert out == f"{path}:4:20: CQ0201 error: symbol 'j' is used before declaration\n"
    assert err == "1 error, 0 warnings in 1 file\n"


def test_clean_co_file_prints_nothing_and_exits_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "good.co", TWICE)
    status, out, err = run(capsys, "check", str(path))
    assert (status, out) == (0, "")
    assert err == "0 errors, 0 warnings in 1 file\n"


def test_the_seed_programs_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).parent / "data"
    status, out, _ = run(capsys, "check", *sorted(str(p) for p in data.glob("*.co")))
    assert status == 0
    assert " error: " not in out  # notes (CQ0310 on cdiv tiling) are expected


def test_a_warning_alone_exits_0_and_shows_its_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "lossy.co", LOSSY)
    status, out, err = run(capsys, "check", str(path))
    assert status == 0
    assert out == (f"{path}:5:13: CQ0206 warning: implicit conversion from 'f32' to 'f16' may "
                   "lose precision (hint: write `__to<f16>(...)` to make the conversion "
                   "explicit)\n")
    assert err == "0 errors, 1 warning in 1 file\n"


def test_full_format_shows_the_line_with_a_caret(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.co", UNDECLARED_J)
    status, out, _ = run(capsys, "check", "--format", "full", str(path))
    assert status == 1
    assert out.splitlines()[:5] == [
        "error[CQ0201]: symbol 'j' is used before declaration",
        f"  --> {path}:4:20",
        "   |",
        " 4 |     y.at(i) = x.at(j) * 2;",
        "   |                    ^",
    ]


# --- .py files ----------------------------------------------------------------------------


def test_py_file_with_two_kernels_reports_the_wrong_one_at_the_py_position(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "kernels.py", TWO_KERNELS)
    status, out, err = run(capsys, "check", str(path))
    assert status == 1
    assert out == f"{path}:18:20: CQ0201 error: symbol 'j' is used before declaration\n"
    assert err == "1 error, 0 warnings in 1 file (2 embedded sources)\n"


def test_py_file_full_format_quotes_the_py_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "kernels.py", TWO_KERNELS)
    _, out, _ = run(capsys, "check", "--format", "full", str(path))
    assert out.splitlines()[1:5] == [
        f"  --> {path}:18:20",
        "    |",
        " 18 |     y.at(i) = x.at(j) * 3;",
        "    |                    ^",
    ]


def test_embedded_source_on_the_quote_line_gets_the_column_offset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_line = UNDECLARED_J.replace("\n", " ").strip()
    text = f"import croqtile as ct\nmod = ct.compile(r'{one_line}')\n"
    path = write(tmp_path / "one_line.py", text)
    status, out, _ = run(capsys, "check", str(path))
    line, column = position_of(text, "j)")
    assert (line, column) == (2, 109)
    assert status == 1
    assert out == f"{path}:2:109: CQ0201 error: symbol 'j' is used before declaration\n"


def test_embedded_source_after_a_syntax_error_is_still_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = "def broken(:\n    return )\n\n" + TWO_KERNELS
    path = write(tmp_path / "broken.py", broken)
    status, out, _ = run(capsys, "check", str(path))
    assert status == 1
    assert out == f"{path}:21:20: CQ0201 error: symbol 'j' is used before declaration\n"


def test_python_file_without_kernels_is_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "plain.py", "x = compile('1 + 1', '<s>', 'eval')\n")
    status, out, err = run(capsys, "check", str(path))
    assert (status, out) == (0, "")
    assert err == "0 errors, 0 warnings in 1 file (0 embedded sources)\n"


# --- JSON, defines, directories ---------------------------------------------------------


def test_json_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.co", UNDECLARED_J)
    lossy = write(tmp_path / "lossy.co", LOSSY)
    kernels = write(tmp_path / "kernels.py", TWO_KERNELS.replace(
        '}""")', '}""", filename="thrice.co")'))
    status, out, err = run(capsys, "check", "--format", "json", str(bad), str(lossy), str(kernels))
    assert (status, err) == (1, "")
    report = json.loads(out)
    assert report["files"] == [str(bad), str(lossy), str(kernels)]
    assert (report["errors"], report["warnings"], report["embedded_sources"]) == (2, 1, 2)
    first, second, third = report["diagnostics"]
    assert first == {
        "code": "CQ0201", "severity": "error", "message": "symbol 'j' is used before declaration",
        "file": str(bad), "line": 4, "column": 20, "end_line": 4, "end_column": 21,
        "hint": None, "notes": [], "source_filename": None,
    }
    assert (second["file"], second["code"], second["severity"]) == (str(lossy), "CQ0206", "warning")
    assert second["hint"] == "write `__to<f16>(...)` to make the conversion explicit"
    assert (third["file"], third["line"], third["column"]) == (str(kernels), 18, 20)
    assert third["source_filename"] == "thrice.co"


def test_defines_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "n.co", DEPENDS_ON_N)
    assert run(capsys, "check", str(path))[:2] == (0, "")
    expected = f"{path}:8:15: CQ0201 error: symbol 'w' is used before declaration\n"
    assert run(capsys, "check", "-D", "N=4", str(path))[:2] == (1, expected)
    assert run(capsys, "check", "-DN=4", str(path))[:2] == (1, expected)
    assert run(capsys, "check", "-D", "N", str(path))[:2] == (1, expected)  # N alone is 1
    assert run(capsys, "check", "-D", "N=8", "-D", "M=2", str(path))[:2] == (0, "")


def test_defines_of_the_compile_call_apply_and_the_command_line_wins(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = f'import croqtile\nSRC = """{DEPENDS_ON_N}"""\nm = croqtile.compile(SRC, defines={{"N": 4}})\n'
    path = write(tmp_path / "n.py", text)
    status, out, _ = run(capsys, "check", str(path))
    assert status == 1
    assert out == f"{path}:9:15: CQ0201 error: symbol 'w' is used before declaration\n"
    assert run(capsys, "check", "-D", "N=8", str(path))[:2] == (0, "")


def test_directories_are_walked_for_co_and_py_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "a.co", UNDECLARED_J)
    write(tmp_path / "b.co", TWICE)
    write(tmp_path / "sub" / "kernels.py", TWO_KERNELS)
    write(tmp_path / "sub" / "notes.txt", UNDECLARED_J)  # not a .co or .py file
    write(tmp_path / ".hidden" / "c.co", UNDECLARED_J)  # hidden directories are skipped
    status, out, err = run(capsys, "check", str(tmp_path))
    assert status == 1
    assert out.splitlines() == [
        f"{tmp_path / 'a.co'}:4:20: CQ0201 error: symbol 'j' is used before declaration",
        f"{tmp_path / 'sub' / 'kernels.py'}:18:20: CQ0201 error: symbol 'j' is used before "
        "declaration",
    ]
    assert err == "2 errors, 0 warnings in 3 files (2 embedded sources)\n"


def test_a_file_named_twice_is_checked_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.co", UNDECLARED_J)
    status, out, _ = run(capsys, "check", str(path), str(tmp_path))
    assert status == 1 and len(out.splitlines()) == 1


# --- --target -------------------------------------------------------------------------------

# Correct for the NVIDIA targets; for the S5000, warp-scope f16 MMA accumulates in f32 only
# and `mma.fill 0.0` gives f16 operands an f16 accumulator (line 5, column 7: the MMA).
F16_ACCUMULATOR = """\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill 0.0;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
"""


def test_target_s5000_reports_the_engine_rules(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "gemm.co", F16_ACCUMULATOR)
    assert position_of(F16_ACCUMULATOR, "mma.row.row") == (5, 7)
    status, out, err = run(capsys, "check", str(path))
    assert (status, out) == (0, "")
    status, out, err = run(capsys, "check", "--target", "s5000", str(path))
    assert status == 1
    assert out == (f"{path}:5:7: CQ0516 error: warp MMA f16 x f16 -> f16 is not in the S5000 "
                   "WMMA table: its rows for f16 x f16 accumulate in f32 only (hint: declare "
                   "the accumulator as f32, e.g. `mc = mma.fill.f32 0.0f;`)\n")
    assert err == "1 error, 0 warnings in 1 file\n"
    fixed = write(tmp_path / "fixed.co", F16_ACCUMULATOR.replace("mma.fill 0.0", "mma.fill.f32 0.0f"))
    status, out, _ = run(capsys, "check", "--target", "mp_31", str(fixed))
    assert (status, out) == (0, "")


def test_target_applies_to_sources_embedded_in_python(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "model.py", f'import croqtile\nmod = croqtile.compile("""\n'
                 f'{F16_ACCUMULATOR}""")\n')
    status, out, _ = run(capsys, "check", "--target", "s5000", "--format", "json", str(path))
    report = json.loads(out)
    assert status == 1
    assert [(d["code"], d["line"]) for d in report["diagnostics"]] == [("CQ0516", 7)]


def test_unknown_target_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "good.co", TWICE)
    status, out, err = run(capsys, "check", "--target", "s6000", str(path))
    assert (status, out) == (2, "")
    assert err.startswith("croqtile check: error: unknown target 's6000'; choose from ")
    assert "s5000" in err and "sm_90" in err


# --- usage errors -----------------------------------------------------------------------------


def test_missing_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.co"
    status, out, err = run(capsys, "check", str(missing))
    assert (status, out) == (2, "")
    assert err == f"croqtile check: error: no such file or directory: {str(missing)!r}\n"


def test_bad_define_and_no_command_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "check", "-D", "=4", ".")
    assert status == 2 and "expected NAME or NAME=VALUE" in err
    status, _, err = run(capsys)
    assert status == 2 and "usage: croqtile" in err
    status, _, err = run(capsys, "check", "--format", "xml", ".")
    assert status == 2 and "invalid choice" in err


# --- explain ------------------------------------------------------------------------------


def test_explain_prints_severity_message_and_hint(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "explain", "CQ0201")
    assert status == 0
    assert out.splitlines()[:2] == ["CQ0201 (error)",
                                    "  message: symbol '{name}' is used before declaration"]
    _, out, _ = run(capsys, "explain", "cq203")
    assert out.splitlines()[:3] == [
        "CQ0203 (error)",
        "  message: only mutable variables can be re-assigned ('{name}')",
        "  hint: declare it with `mutable`, e.g. `mutable {type} {name} = ...;`",
    ]


def test_explain_shows_examples_when_the_module_has_them(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    examples = types.ModuleType("croqtile.frontend.code_examples")
    examples.EXAMPLES = {"CQ0201": (UNDECLARED_J, TWICE)}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "croqtile.frontend.code_examples", examples)
    status, out, _ = run(capsys, "explain", "CQ0201")
    assert status == 0
    assert "A program with this problem:" in out and "Fixed:" in out
    assert "        y.at(i) = x.at(j) * 2;" in out and "        y.at(i) = x.at(i) * 2;" in out


def test_explain_says_what_the_code_means(capsys: pytest.CaptureFixture[str]) -> None:
    from croqtile.frontend.code_examples import MEANINGS

    status, out, _ = run(capsys, "explain", "CQ0433")
    assert status == 0
    paragraphs = out.split("\n\n")
    # after the message and hint lines, before the examples: the reference's explanation
    assert " ".join(paragraphs[1].split()) == MEANINGS["CQ0433"]
    assert paragraphs[2].startswith("A program with this problem")
    assert max(len(line) for line in paragraphs[1].splitlines()) <= 88


def test_explain_into_a_closed_pipe_exits_quietly() -> None:
    # `croqtile explain CQ0201 | head -3`: the reader has gone before the writer is done
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before anything is written: every write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "croqtile", "explain", "CQ0201"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" line
    assert done.returncode == 1

def test_explain_unknown_code_lists_nearby_codes(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "explain", "CQ0299")
    assert (status, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == "croqtile explain: error: unknown code 'CQ0299'; nearby codes:"
    from croqtile.frontend.codes import CODES

    highest = max(code for code in CODES if code.startswith("CQ02"))
    assert lines[1].startswith(f"  {highest}  error: ")  # the nearest code first
    assert all(line.startswith("  CQ02") for line in lines[1:])
    status, _, err = run(capsys, "explain", "oops")
    assert status == 2 and "codes look like CQ0201" in err


# --- python -m croqtile -------------------------------------------------------------------------


def test_python_dash_m_croqtile_check(tmp_path: Path) -> None:
    write(tmp_path / "kernels.py", TWO_KERNELS)
    done = subprocess.run([sys.executable, "-m", "croqtile", "check", "kernels.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stdout == "kernels.py:18:20: CQ0201 error: symbol 'j' is used before declaration\n"
    assert done.stderr == "1 error, 0 warnings in 1 file (2 embedded sources)\n"
