"""Calls of names that are not built-ins suggest the built-in they most likely mean: CUDA
spellings (``__expf``, ``sqrtf``, ``fmaxf``) their Croqtile equivalents, typos the nearest
built-in."""

from __future__ import annotations

import pytest

from croqtile.backends.ir.builtins import SUPPORTED
from croqtile.runtime.driver import check_source
from croqtile.frontend.builtin_names import MATH_BUILTINS, suggest_builtin


@pytest.mark.parametrize("name, expected", [
    ("__expf", "__exp"), ("expf", "__exp"), ("exp", "__exp"), ("__logf", "__log"),
    ("sqrtf", "__sqrt"), ("rsqrtf", "__rsqrt"), ("fabsf", "__fabs"), ("fmaxf", "__max"),
    ("fminf", "__min"), ("tanhf", "__tanh"), ("__powf", "__pow"), ("exp2f", "__exp2f"),
    ("__fmaf_rn", "__fmaf"), ("__sigmod", "__sigmoid"), ("__exq", "__exp"),
])
def test_suggestions(name: str, expected: str) -> None:
    assert suggest_builtin(name) == expected


@pytest.mark.parametrize("name", ["__exp", "foo", "__log2f", "log10f", "__fdividef", "total"])
def test_no_suggestion_for_built_ins_unrelated_names_and_functions_without_one(name: str) -> None:
    assert suggest_builtin(name) is None


def test_suggestions_are_built_ins_the_triton_backend_lowers() -> None:
    assert MATH_BUILTINS <= SUPPORTED
    assert suggest_builtin("fmaxf", known={"__exp"}) is None  # only names of `known`


def program(expr: str) -> str:
    return f"""\
__co__ void f(global f32 [4] y) {{
  parallel p by 4 {{
    f32 x = 1.0f;
    y.at(p) = {expr};
  }}
}}
"""


@pytest.mark.parametrize("expr, code, message", [
    # one name argument: parsed as a selection of an undeclared name
    ("__expf(x)", "CQ0201", "symbol '__expf' is used before declaration"),
    # any other argument list: a call that no backend lowers
    ("__expf(x - 1.0f)", "CQ0701",
     "not supported by the Triton backend yet: the built-in '__expf'"),
])
def test_unknown_call_suggests_the_built_in(expr: str, code: str, message: str) -> None:
    errors = [d for d in check_source(program(expr), filename="k.co") if d.severity == "error"]
    assert [(d.code, d.message, d.hint) for d in errors] == [
        (code, message, "did you mean the built-in `__exp`?")]
    assert "   = hint: did you mean the built-in `__exp`?" in errors[0].render()


def test_the_suggested_program_compiles() -> None:
    assert not [d for d in check_source(program("__exp(x - 1.0f)"), filename="k.co")
                if d.severity == "error"]


def test_an_undeclared_name_that_is_no_built_in_has_no_hint() -> None:
    [diag] = [d for d in check_source(program("total(x)"), filename="k.co")
              if d.severity == "error"]
    assert (diag.code, diag.hint) == ("CQ0201", None)


@pytest.mark.parametrize("expr", ["__expf(x - 1.0f)", "sqrtf(x * 2.0f)", "__exq(x + x)"])
def test_a_cuda_spelling_adds_no_conversion_warning(expr: str) -> None:
    """The refused call is typed as the built-in it names (a float), so the only
    diagnostic is the error with its hint: no CQ0206 about an int result."""
    diags = check_source(program(expr), filename="k.co")
    assert [d.code for d in diags] == ["CQ0701"]
