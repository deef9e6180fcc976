"""``croqtile.compile(src, library="NS")``: every ``__co__`` function as a PyTorch operator
(arch 4.1). The schemas follow what the functions write, ``torch.library.opcheck`` passes
for the whole corpus, and ``torch.compile`` traces models calling the operators with no
graph break, with static and dynamic shapes, giving the eager results."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import pytest
import torch

import croqtile
from croqtile.ops.library import schema_of

from ..data.manifest import CORPUS
from ..dispatched import Dispatched
from ..e2e.checks import Case, assert_close, poison, random

_NAMESPACES = (f"croqtile_test{i}" for i in itertools.count())

SCALE_ADD = """
__co__ void scale_add(global f32 [N] x, global f32 [N] y, global f32 [N] out, float a) {
  parallel p by cdiv(N, 64) : block {
    xs = dma.copy x.subspan(64).at(p) => shared;
    parallel t by 64 : thread
      out.at(p # t) = xs.data.at(t) * a + y.at(p # t);
  }
}
"""

# a new tensor whose shape is an expression of the arguments' dimensions
CONCAT = """
__co__ auto stack(f32 [M, 4] a, f32 [N, 4] b) {
  f32 [M + N, 4] y;
  parallel i by M + N : block {
    parallel j by 4 : thread {
      if (i < M) y.at(i, j) = a.at(i, j);
      if (i >= M) y.at(i, j) = b.at(i - M, j) * 2.0f;
    }
  }
  return y;
}
"""


def _compile(source: str, **kw: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(source, library=next(_NAMESPACES), **kw)


def test_the_schema_marks_what_the_function_writes() -> None:
    fn = _compile(SCALE_ADD).scale_add
    assert schema_of(fn.compiled) == "(Tensor x, Tensor y, Tensor(a!) out, float a) -> ()"
    assert str(fn.op.default._schema).endswith(
        "scale_add(Tensor x, Tensor y, Tensor(a!) out, float a) -> ()")
    assert schema_of(_compile(CONCAT).stack.compiled) == "(Tensor a, Tensor b) -> Tensor"


def test_calling_the_function_goes_through_the_operator() -> None:
    mod = _compile(SCALE_ADD)
    x, y = random((100,), torch.float32), random((100,), torch.float32)
    out = poison(torch.empty(100))
    with Dispatched() as seen:
        mod.scale_add(x, y, out, 3.0)
    assert f"{mod.scale_add.op}.default" in seen.ops
    assert_close(out, 3.0 * x.double() + y.double(), torch.float32)


def test_a_returned_tensor_has_the_declared_shape_on_fake_and_real_inputs() -> None:
    op = _compile(CONCAT).stack.op
    a, b = random((3, 4), torch.float32), random((5, 4), torch.float32)
    assert_close(op(a, b), torch.cat([a, 2 * b]).double(), torch.float32)
    torch.library.opcheck(op, (a, b))
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = op(mode.from_tensor(a), mode.from_tensor(b))
    assert fake.shape == (8, 4) and fake.dtype == torch.float32


def test_the_fake_implementation_refuses_what_a_call_refuses() -> None:
    """A tensor of the wrong rank or dtype fails under fake tensors as it does eagerly,
    naming the parameter, instead of binding the wrong sizes (a [2, 10, 4] tensor once
    gave a fake result of shape [12, 4] here)."""
    op = _compile(CONCAT).stack.op
    from torch._subclasses.fake_tensor import FakeTensorMode
    a, b = random((2, 10, 4), torch.float32), random((5, 4), torch.float32)
    a2, b16 = a[0].clone(), b.half()
    with pytest.raises(croqtile.ArgumentError, match="parameter 'a' expects rank 2"):
        op(a, b)
    with FakeTensorMode() as mode:
        with pytest.raises(croqtile.ArgumentError, match="parameter 'a' expects rank 2"):
            op(mode.from_tensor(a), mode.from_tensor(b))
        with pytest.raises(croqtile.ArgumentError, match="parameter 'b' expects dtype"):
            op(mode.from_tensor(a2), mode.from_tensor(b16))


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_opcheck_passes_for_every_corpus_program(case: Case) -> None:
    module = _compile(case.source, defines=case.defines)
    function = getattr(module, case.function) if case.function else next(
        iter(module.functions.values()))
    torch.library.opcheck(function.op, tuple(case.inputs()))


def _model(scale_add: Any, stack: Any):
    def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        scale_add(torch.sin(a), b, out, 2.0)
        return stack(out.reshape(-1, 4), b.reshape(-1, 4)).sum(0) + 1
    return model


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_model_compiles_whole_with_the_operators(dynamic: bool) -> None:
    model = _model(_compile(SCALE_ADD).scale_add, _compile(CONCAT).stack)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=dynamic)
    for n in (64, 96, 40):  # (three shapes: recompiled, or traced once with dynamic sizes)
        a, b = random((n,), torch.float32), random((n,), torch.float32)
        assert_close(compiled(a, b), model(a, b).double(), torch.float32)
    explained = torch._dynamo.explain(model)(a, b)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_compiling_again_repoints_the_operator_and_a_new_schema_is_refused() -> None:
    namespace = next(_NAMESPACES)
    first = croqtile.compile(SCALE_ADD, library=namespace)
    again = croqtile.compile(SCALE_ADD.replace("xs.data.at(t) * a", "xs.data.at(t) * a * 2.0f"),
                             library=namespace)
    assert first.scale_add.op is again.scale_add.op
    x, y, out = torch.ones(64), torch.zeros(64), torch.empty(64)
    again.scale_add.op(x, y, out, 1.0)
    assert torch.equal(out, torch.full((64,), 2.0))
    other = SCALE_ADD.replace("global f32 [N] out, float a", "global f32 [N] out, int a")
    with pytest.raises(ValueError, match="already registered with the schema"):
        croqtile.compile(other, library=namespace)


def test_a_namespace_must_be_an_identifier() -> None:
    with pytest.raises(ValueError, match="library='my-ops'"):
        croqtile.compile(SCALE_ADD, library="my-ops")


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_model_compiles_whole_with_inductor_on_the_gpu(dynamic: bool) -> None:
    model = _model(_compile(SCALE_ADD).scale_add, _compile(CONCAT).stack)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    for n in (1024, 4096, 640):
        a = random((n,), torch.float32, "cuda")
        b = random((n,), torch.float32, "cuda")
        assert_close(compiled(a, b), model(a, b).double(), torch.float32)
