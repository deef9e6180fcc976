"""Two clauses the checker once let through unchecked: the names paired by a ``with ...
where a <-> b`` clause must be in scope, and ``.promote<N>`` takes 64, 128 or 256 bytes."""

from __future__ import annotations

import pytest

import croqtile

WITH = """
__co__ s32 [4, 8] f(s32 [4, 8] a) {
  s32 [a.span] out;
  parallel p by 1 : block {
    with {i, j} in [4, 8] where PAIR { foreach i, j out.at(i, j) = a.at(i, j); }
  }
  return out;
}"""

PROMOTE = """
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.copy.promote<BYTES> x.chunkat(p, _) => shared;
    tma.copy t => y.chunkat(p, _);
  }
}"""


def test_where_pairs_names_in_scope() -> None:
    croqtile.compile(WITH.replace("PAIR", "i <-> j"))


@pytest.mark.parametrize("pair, unknown", [("i <-> zz", "zz"), ("q <-> j", "q")])
def test_an_unknown_name_in_where_is_reported_at_the_with(pair: str, unknown: str) -> None:
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(WITH.replace("PAIR", pair))
    [diag] = info.value.diagnostics
    assert (diag.code, diag.line) == ("CQ0201", 5)
    assert f"'{unknown}'" in diag.message


@pytest.mark.parametrize("value", [64, 128, 256])
def test_promote_sizes(value: int) -> None:
    croqtile.compile(PROMOTE.replace("BYTES", str(value)))


@pytest.mark.parametrize("value", [7, 32, 512])
def test_other_promote_sizes_are_refused(value: int) -> None:
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(PROMOTE.replace("BYTES", str(value)))
    assert [d.code for d in info.value.diagnostics] == ["CQ0440"]
    assert f"(got {value})" in info.value.diagnostics[0].message
