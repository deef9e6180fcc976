"""``#pragma croq intrinsic prefix|namespace``: a pragma holds to the end of its braces
(file, function or block scope); a call only a closed scope covered is CQ0118 on its line.
The calls themselves are not lowered by the Triton backend (CQ0701), so only CQ0118 is
looked at here."""

from __future__ import annotations

import pytest

from croqtile.runtime.driver import check_source
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.preprocessor import preprocess
from croqtile.frontend.source import Source, SourceMap

VALID = """\
#pragma croq intrinsic prefix file_
#pragma croq intrinsic namespace filelib

__co__ auto file_scope(s32 [32, 4] a) {
  parallel by 1 {
    filelib::init();
    file_transfer(0, 0, 0);
  }
  return 0;
}

__co__ auto function_scope(s32 [32, 4] a) {
  #pragma croq intrinsic prefix func_
  #pragma choreo intrinsic namespace funclib
  parallel by 1 {
    funclib::flush();
    func_activate(0);
  }
  return 0;
}

__co__ auto block_scope(s32 [32, 4] a) {
  #pragma croq intrinsic prefix outer_
  parallel by 1 {
    #pragma croq intrinsic prefix inner_
    inner_activate(0);
  }
  outer_pass();
  file_transfer(1, 1, 1);
  return 0;
}
"""

LEAKS = {
    "namespace_of_an_earlier_function": (
        "__co__ auto a(s32 [4] x) {\n  #pragma croq intrinsic namespace lib\n"
        "  parallel by 1 { lib::fence(); }\n  return 0;\n}\n"
        "__co__ auto b(s32 [4] x) {\n  parallel by 1 {\n    lib::fence();\n  }\n"
        "  return 0;\n}\n",
        8, "'lib::fence' is called outside the scope of `#pragma croq intrinsic namespace lib`"),
    "prefix_of_an_earlier_function": (
        "__co__ auto a(s32 [4] x) {\n  #pragma croq intrinsic prefix my_\n"
        "  parallel by 1 { my_op(0); }\n  return 0;\n}\n"
        "__co__ auto b(s32 [4] x) {\n  parallel by 1 {\n    my_op(0);\n  }\n"
        "  return 0;\n}\n",
        8, "'my_op' is called outside the scope of `#pragma croq intrinsic prefix my_`"),
    "prefix_of_a_closed_block": (
        "__co__ auto a(s32 [4] x) {\n  #pragma croq intrinsic prefix outer_\n"
        "  parallel by 1 {\n    #pragma croq intrinsic prefix inner_\n    inner_go(0);\n  }\n"
        "  inner_fail();\n  return 0;\n}\n",
        7, "'inner_fail' is called outside the scope of `#pragma croq intrinsic prefix inner_`"),
}


def _scope_errors(text: str) -> list[tuple[int, str]]:
    return [(d.line, d.message) for d in check_source(text) if d.code == "CQ0118"]


def test_calls_inside_their_scopes_are_accepted() -> None:
    diagnostics = check_source(VALID)
    assert "CQ0118" not in [d.code for d in diagnostics]
    # the calls reach the backend, which names each of them
    assert {d.line for d in diagnostics if d.code == "CQ0701"} <= {6, 7, 16, 17, 26, 28, 29}


@pytest.mark.parametrize("case", LEAKS)
def test_a_call_outside_the_scope_is_rejected_on_its_line(case: str) -> None:
    text, line, message = LEAKS[case]
    assert _scope_errors(text) == [(line, message)]


def test_calls_no_pragma_names_are_left_alone() -> None:
    text = "__co__ auto a(s32 [4] x) {\n  parallel by 1 { vendor_op(0); }\n  return 0;\n}\n"
    assert _scope_errors(text) == []


def test_the_preprocessor_records_pragmas_where_they_are() -> None:
    text = "int x;\n#pragma croq intrinsic prefix p_\n#pragma croq intrinsic namespace ns\n" \
           "#pragma once\n#pragma croq intrinsic bogus q\n"
    source = Source(text, "<t>")
    result = preprocess(source, Reporter(SourceMap.identity(source)))
    assert [(p.kind, p.name, p.offset) for p in result.intrinsics] == [
        ("prefix", "p_", len("int x;\n")), ("namespace", "ns", len("int x;\n\n"))]
    assert result.text == "int x;\n\n\n\n\n"
