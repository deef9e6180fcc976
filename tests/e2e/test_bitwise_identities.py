"""Constant folding keeps bitwise ``&`` with 1 on integers: ``a & 1`` is the low bit of
``a``, not ``a`` (the identity ``true & b`` holds for booleans only). The lowering once
returned ``a`` unchanged for ``a & 1``, ``1 & a`` and ``(a + b) & 1``."""

from __future__ import annotations

import pytest
import torch

import croqtile

PROGRAM = """
__co__ s32 [64] f(s32 [64] a, s32 [64] b) {
  s32 [64] o;
  parallel t by 64
    o.at(t) = EXPR;
  return o;
}"""

CASES = {
    "a.at(t) & 1": lambda a, b: a & 1,
    "1 & a.at(t)": lambda a, b: 1 & a,
    # (& binds tighter than + in Croqtile, unlike C)
    "a.at(t) + b.at(t) & 1": lambda a, b: a + (b & 1),
    "(a.at(t) + b.at(t)) & 1": lambda a, b: (a + b) & 1,
    "(a.at(t) & 1) == 1 ? b.at(t) : 0": lambda a, b: torch.where((a & 1) == 1, b, 0),
}


@pytest.mark.parametrize("expr", sorted(CASES))
def test_and_with_one_keeps_the_low_bit(expr: str) -> None:
    module = croqtile.compile(PROGRAM.replace("EXPR", expr))
    a = torch.randint(-1000, 1000, (64,), dtype=torch.int32)
    b = torch.randint(-1000, 1000, (64,), dtype=torch.int32)
    assert torch.equal(module.f(a, b), CASES[expr](a, b).to(torch.int32))
