"""How a compiled function is called: arguments by position or by parameter name (as a
Python function takes them), and a call that wants a gradient from a function without a
backward is an error, never a result that silently has no gradient path."""

from __future__ import annotations

import itertools
import warnings
from typing import Callable

import pytest
import torch

import croqtile

SCALE = """
__co__ f32 [N] scale_add(f32 [N] x, f32 [N] y, float a) {
  f32 [x.span] out;
  parallel i by N
    out.at(i) = x.at(i) * a + y.at(i);
  return out;
}
"""

_NAMESPACES = (f"croqtile_calls{i}" for i in itertools.count())


def _compile(**kw: object) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(SCALE, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def mod() -> croqtile.Module:
    return _compile()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(24), torch.randn(24)


@pytest.mark.parametrize("library", [False, True])
def test_keyword_arguments_bind_by_parameter_name(library: bool) -> None:
    mod = _compile(library=next(_NAMESPACES)) if library else _compile()
    x, y = _inputs()
    expected = x * 3.0 + y
    assert torch.allclose(mod.scale_add(x=x, y=y, a=3.0), expected)
    assert torch.allclose(mod.scale_add(x, a=3.0, y=y), expected)
    assert torch.allclose(mod(y=y, x=x, a=3.0), expected)  # the one function of the module
    assert torch.allclose(mod.scale_add.call(x, y, a=3.0), expected)


@pytest.mark.parametrize("call, message", [
    (lambda f, x, y: f(x=x, y=y, a=1.0, z=x),
     r"scale_add\(\) got an unexpected keyword argument 'z' \(its parameters: x, y, a\)"),
    (lambda f, x, y: f(x, x=x, y=y, a=1.0),
     r"scale_add\(\) got multiple values for parameter 'x' \(argument 1 by position"),
    (lambda f, x, y: f(x, a=1.0), r"scale_add\(\) is missing the argument\(s\) for 'y' "),
    (lambda f, x, y: f(x, y, 1.0, 2, a=1.0),
     r"scale_add\(\) takes 3 argument\(s\) \(x, y, a\), got 4 positional"),
])
def test_keyword_mistakes_name_the_function_and_parameter(
        mod: croqtile.Module, call: Callable[..., object], message: str) -> None:
    x, y = _inputs()
    with pytest.raises(croqtile.ArgumentError, match=message):
        call(mod.scale_add, x, y)


def test_a_call_that_wants_a_gradient_is_refused(mod: croqtile.Module) -> None:
    x, y = _inputs()
    x.requires_grad_(True)
    for _ in range(2):  # the first (checked) call and a warm one alike
        with pytest.raises(croqtile.ArgumentError) as info:
            mod.scale_add(x, y, 2.0)
        text = str(info.value)
        assert "scale_add(): argument 'x' requires grad" in text
        assert "torch.no_grad()" in text and "x.detach()" in text
        assert "library='NS'" in text and "torch.library.register_autograd" in text
    with torch.no_grad():  # inference: the same call runs
        out = mod.scale_add(x, y, 2.0)
    assert torch.allclose(out, x.detach() * 2.0 + y)
    assert torch.allclose(mod.scale_add(x.detach(), y, 2.0), out)
    # a signature that ran without grad mode does not let a later call through
    with pytest.raises(croqtile.ArgumentError, match="requires grad"):
        mod.scale_add(x, y, 2.0)


def test_an_operator_without_a_backward_is_refused_and_one_with_it_differentiates() -> None:
    namespace = next(_NAMESPACES)
    fn = _compile(library=namespace).scale_add
    x, y = _inputs()
    x.requires_grad_(True)
    with pytest.raises(croqtile.ArgumentError) as info:
        fn(x, y, 2.0)
    assert f"register one for {fn.op}" in str(info.value)

    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        ctx.a = inputs[2]

    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        return grad * ctx.a, grad, None

    torch.library.register_autograd(f"{namespace}::scale_add", backward,
                                    setup_context=setup_context)
    out = fn(x, y=y, a=2.0)
    out.sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.full_like(x, 2.0))
    assert torch.allclose(out.detach(), x.detach() * 2.0 + y)


@pytest.mark.filterwarnings("ignore:croqtile. scale_add. autotune='quick' needs a CUDA device")
def test_an_autotuned_function_is_refused_before_any_search() -> None:
    fn = _compile(autotune="quick").scale_add
    x, y = _inputs()
    with pytest.raises(croqtile.ArgumentError, match="scale_add\\(\\): argument 'y' requires grad"):
        fn(x, y.requires_grad_(True), 2.0)
    with torch.no_grad():
        assert torch.allclose(fn(x=x, y=y, a=2.0), x * 2.0 + y)
