"""The affine analysis of index expressions (``build.linearize``) and the lane guard built
on it (``control.lane_guard``): leaves, groups and residues of a fused row axis, and the
bound of an affine condition over the lanes, checked by evaluating it on every lane."""

from __future__ import annotations

import itertools

import pytest

from croqtile.backends.ir import build as b
from croqtile.backends.ir import nodes as ir
from croqtile.backends.ir.control import lane_guard

ROWS = ir.Axis("ax_rows", 128, 128, 0)
COLS = ir.Axis("ax_n", 64, 64, 1)


def _evaluate(e: ir.Expr, lanes: dict[ir.Axis, int], names: dict[str, int]) -> int:
    """The value of ``e`` at one lane (integers only)."""
    if isinstance(e, ir.Const):
        return int(e.value)
    if isinstance(e, ir.AxisIndex):
        return lanes[e.axis]
    if isinstance(e, ir.Var):
        return names[e.name]
    assert isinstance(e, ir.Binary), type(e)
    lhs, rhs = _evaluate(e.lhs, lanes, names), _evaluate(e.rhs, lanes, names)
    ops = {"+": lambda: lhs + rhs, "-": lambda: lhs - rhs, "*": lambda: lhs * rhs,
           "//": lambda: lhs // rhs, "%": lambda: lhs % rhs, ">": lambda: int(lhs > rhs),
           ">=": lambda: int(lhs >= rhs), "<": lambda: int(lhs < rhs),
           "<=": lambda: int(lhs <= rhs), "==": lambda: int(lhs == rhs),
           "!=": lambda: int(lhs != rhs), "&": lambda: lhs & rhs, "|": lambda: lhs | rhs}
    return ops[e.op]()


def _rows() -> tuple[ir.Expr, ir.Expr]:
    """The instance (rows // 64) and the row within it (rows % 64)."""
    index = b.axis_index(ROWS)
    return b.binary("//", index, b.const(64)), b.binary("%", index, b.const(64))


def test_groups_and_residues_are_leaves_only_when_asked_for() -> None:
    instance, row = _rows()
    e = b.add(b.mul(b.add(b.mul(b.var("bm"), b.const(2)), instance), b.const(64)), row)
    assert b.linearize(e) is None
    assert b.linearize(e, groups=True) is None  # (the residue is not affine then)
    lin = b.linearize(e, groups=True, residues=True)
    assert lin is not None
    assert lin.groups == {(ROWS, 64): 64} and lin.residues == {(ROWS, 64): 1}
    assert _evaluate(lin.rest, {}, {"bm": 3}) == 3 * 128


def test_the_upper_bound_is_the_largest_value_over_the_lanes() -> None:
    instance, row = _rows()
    # j - instance * 64 - row + bn * 64 - bm * 128: largest at j = 63, row 0 of instance 0
    e = b.binary("-", b.binary("-", b.add(b.axis_index(COLS), b.mul(b.var("bn"), b.const(64))),
                                b.add(b.mul(instance, b.const(64)), row)),
                 b.mul(b.var("bm"), b.const(128)))
    lin = b.linearize(e, groups=True, residues=True)
    assert lin is not None
    top = lin.upper_bound()
    assert top is not None
    for bn, bm in itertools.product(range(5), range(3)):
        names = {"bn": bn, "bm": bm}
        best = max(_evaluate(e, {ROWS: r, COLS: j}, names)
                   for r in range(128) for j in range(64))
        assert _evaluate(top, {}, names) == best


def test_no_bound_when_the_rest_differs_between_lanes() -> None:
    lane_dependent = b.mul(b.axis_index(COLS), b.axis_index(COLS))  # not affine
    lin = b.linearize(b.add(b.var("x"), lane_dependent))
    assert lin is None
    named = ir.Var((COLS,), b.I32, "per_lane")  # a per-lane value under a name
    lin = b.linearize(b.add(named, b.const(1)))
    assert lin is not None and lin.upper_bound() is None


@pytest.mark.parametrize("op", [">", ">=", "<", "<="])
def test_the_lane_guard_is_false_only_where_no_lane_holds(op: str) -> None:
    """Over many block positions, the guard is true exactly when the causal-style
    condition holds on some lane."""
    instance, row = _rows()
    key = b.add(b.mul(b.var("bn"), b.const(64)), b.axis_index(COLS))
    query = b.add(b.add(b.mul(b.var("bm"), b.const(128)), b.mul(instance, b.const(64))), row)
    cond = b.binary(op, key, query, b.I1)
    guard = lane_guard(cond)
    assert guard is not None and not guard.axes
    for bn, bm in itertools.product(range(8), range(4)):
        names = {"bn": bn, "bm": bm}
        some = any(_evaluate(cond, {ROWS: r, COLS: j}, names)
                   for r in range(128) for j in range(64))
        assert bool(_evaluate(guard, {}, names)) == some, (op, bn, bm)


def test_the_lane_guard_of_conjunctions_and_disjunctions() -> None:
    col = b.axis_index(COLS)
    bounded = b.binary(">", col, b.var("n"), b.I1)  # j > n: boundable
    unbounded = b.binary("==", col, b.var("n"), b.I1)  # not boundable
    flag = b.binary("!=", b.var("causal"), b.const(0), b.I1)  # the same on every lane
    both = b.binary("&", flag, bounded, b.I1)
    assert lane_guard(b.binary("&", bounded, unbounded, b.I1)) is not None
    assert lane_guard(b.binary("|", bounded, unbounded, b.I1)) is None
    assert lane_guard(unbounded) is None
    guard = lane_guard(both)
    assert guard is not None
    for n, causal in itertools.product(range(-2, 70, 7), (0, 1)):
        names = {"n": n, "causal": causal}
        some = any(_evaluate(both, {COLS: j}, names) for j in range(64))
        assert bool(_evaluate(guard, {}, names)) == some
