"""The checker's rules for 2:4 sparse MMA (spec 5.8, check 43): one bad program per
diagnostic, with its code, the user's line and column, and the rendered message; and the
well-formed programs they are variations of, which report nothing."""

from __future__ import annotations

import pytest

import croqtile
from croqtile.runtime.driver import check_source

GOOD = """\
__co__ void f(global f16 [64, {kp}] a, global f16 [32, {k}] b, global {meta_t} [64, {km}] meta,
              global f32 [64, 32] c) {{
  parallel p by 1 : block {{
    sm = dma.copy meta => shared;
    mc = mma.fill.f32 0.0f;
    parallel w by 1 : {level} {{
      me = mma.load sm;
      mma.row.row.sp mc, a, b, {operand};
    }}
    mma.store mc, c;
  }}
}}
"""


def program(kp: int = 16, k: int = 32, km: int = 4, meta_t: str = "u8", level: str = "group-4",
            operand: str = "me") -> str:
    return GOOD.format(kp=kp, k=k, km=km, meta_t=meta_t, level=level, operand=operand)


# (name, program, code, line, column, message)
BAD = [
    ("K not a multiple of 4", program(kp=3, k=6, km=1), "CQ0511", 8, 7,
     "sparse MMA needs K to be a multiple of 4 (K = 6)"),
    # (the accumulator's CQ0506 that follows is the checker's usual echo of a rejected MMA)
    ("packed A is not half of K", program(kp=32), "CQ0502", 8, 7,
     "MMA shapes do not match: 'a' [64, 32] and 'b' [32, 32] disagree on K for layout "
     ".row.row"),
    ("no metadata", program().replace("mc, a, b, me;", "mc, a, b;"), "CQ0513", 8, 7,
     "sparse MMA needs its metadata operand: 'mma.row.row.sp acc, a_packed, b, meta'"),
    ("metadata too narrow", program(km=2), "CQ0514", 8, 32,
     "sparse MMA metadata 'me' is u8 [64, 2]; with K = 32 it must be u8 [64, 4] (one 4-bit "
     "entry per group of 4 columns of K)"),
    ("metadata rows", program().replace("me = mma.load sm;", "me = mma.load sm.subspan(32, 4).at(0, 0);"),
     "CQ0514", 8, 32, "sparse MMA metadata 'me' is u8 [32, 4]; with K = 32 it must be u8 "
                      "[64, 4] (one 4-bit entry per group of 4 columns of K)"),
    ("metadata not bytes", program(meta_t="u16"), "CQ0514", 8, 32,
     "sparse MMA metadata 'me' is u16 [64, 4]; with K = 32 it must be u8 [64, 4] (one 4-bit "
     "entry per group of 4 columns of K)"),
    ("metadata rounds up to a byte", program(kp=18, k=36, km=4), "CQ0514", 8, 32,
     "sparse MMA metadata 'me' is u8 [64, 4]; with K = 36 it must be u8 [64, 5] (one 4-bit "
     "entry per group of 4 columns of K)"),
    ("warpgroup metadata not loaded", program(operand="sm"), "CQ0515", 8, 32,
     "a sparse warpgroup MMA reads its metadata from registers: load 'sm' with mma.load first"),
]


@pytest.mark.parametrize("name, source, code, line, column, message", BAD,
                         ids=[case[0] for case in BAD])
def test_bad_sparse_program(name: str, source: str, code: str, line: int, column: int,
                            message: str) -> None:
    errors = [d for d in check_source(source, filename="t.co") if d.severity == "error"]
    echo = [("CQ0506", 5, 5)] if code == "CQ0502" else []
    assert [(d.code, d.line, d.column) for d in errors] == [(code, line, column), *echo], \
        [d.render() for d in errors]
    assert errors[0].message.startswith(message)
    assert errors[0].render().startswith(f"error[{code}]: {message}")
    assert f"--> t.co:{line}:{column}" in errors[0].render()
    with pytest.raises(croqtile.CompileError, match=code):
        croqtile.compile(source)


@pytest.mark.parametrize("source", [
    program(),
    program(kp=18, k=36, km=5),  # K = 36: the last byte holds one group
    program(level="group", operand="sm"),  # a warp MMA may read the metadata from a view
], ids=["warpgroup", "half byte", "warp view"])
def test_good_sparse_program(source: str) -> None:
    diagnostics = check_source(source, filename="t.co")
    assert not [d for d in diagnostics if d.severity == "error"]
