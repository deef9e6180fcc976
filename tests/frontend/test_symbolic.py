"""The symbolic integer algebra of shapes and bounds."""

from __future__ import annotations

import pytest

from croqtile.frontend.sema.symbolic import Sym

M, N, K = Sym.var("M"), Sym.var("N"), Sym.var("K")


@pytest.mark.parametrize("expr, text", [
    (M * 2 + M, "3 * M"),
    ((M * 64).floordiv(64), "M"),
    ((M * 64).cdiv(64), "M"),
    (M.cdiv(64), "cdiv(M, 64)"),
    (M.cdiv(64) * 64, "64 * cdiv(M, 64)"),
    ((M * 4).floordiv(M), "4"),
    ((M + 1) - M, "1"),
    (Sym(128).floordiv(16), "8"),
    (Sym(100).cdiv(64), "2"),
    (Sym(100).mod(64), "36"),
    ((M * 8).mod(4), "0"),
    (M * K - K * M, "0"),
])
def test_canonical_forms(expr: Sym, text: str) -> None:
    assert expr.source() == text


def test_equal_expressions_compare_equal() -> None:
    assert (M + N) * 2 == N * 2 + M * 2
    assert M.cdiv(64) == M.cdiv(Sym(64))
    assert hash(M.cdiv(16)) == hash(M.cdiv(16))


@pytest.mark.parametrize("a, b, expected", [
    (M, M + 2, True), (M + 2, M, False), (M * 2, M, False), (M, M * 2, True), (Sym(3), Sym(4), True),
    (M, N, None), (M + N, M + N + 1, True),
])
def test_provably_le(a: Sym, b: Sym, expected: bool | None) -> None:
    assert a.provably_le(b) is expected


def test_evaluate_and_render() -> None:
    e = M.cdiv(64) * 64 + N.mod(8)
    assert e.evaluate({"M": 100, "N": 13}) == 128 + 5
    assert M.cdiv(64).render(lambda n: "d_" + n) == "((d_M + 64 - 1) // 64)"
    assert e.free_vars() == {"M", "N"}


def test_division_by_zero() -> None:
    with pytest.raises(ZeroDivisionError):
        M.floordiv(0)
    with pytest.raises(ZeroDivisionError):
        Sym(4).cdiv(0)
