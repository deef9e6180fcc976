"""Operators that ``torch.compile`` sees through (``croqtile.ops.traced``): while traced on
CUDA tensors, a function's operator decomposes into its Triton kernels
(``wrap_triton``); other devices and the function kinds ``opaque_reason`` names keep the
opaque operator.

No GPU here: the tests below trace CPU tensors as if they were CUDA ones
(``decomposing_on_cpu``), and the kernel launches the traced graph records run in
Triton's interpreter (through croqtile's launcher). What they check is what a GPU run
relies on: the graph holds the kernels with the right grid, arguments and constexprs,
the right tensors are mutated and returned, sizes stay symbolic under dynamic shapes."""

from __future__ import annotations

import itertools
import logging
import warnings
from typing import Any, Iterator

import pytest
import torch
from torch._functorch.aot_autograd import aot_module_simplified
from triton.runtime.jit import JITFunction

import croqtile
import croqtile.ops.traced
from croqtile.ops.library import schema_of
from croqtile.backends.triton.launcher import Launcher

from ..data.manifest import CORPUS
from ..e2e.checks import DATA, Case, assert_close, poison, random
from ..e2e.test_language_gaps import DEVICE_ASSERT
from ..e2e.test_symbolic_extents import WHOLE_TILE
from .test_registration import CONCAT, SCALE_ADD

_NAMESPACES = (f"croqtile_traced{i}" for i in itertools.count())
CPU = torch.device("cpu")


def _compile(source: str, **kw: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(source, library=next(_NAMESPACES), **kw)


@pytest.fixture()
def decomposing_on_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Traced CPU calls decompose as CUDA ones do; a recorded launch (torch runs it with
    ``kernel[grid](...)``, which ends in ``JITFunction.run``) runs in Triton's interpreter
    through croqtile's launcher. Yields the list of kernels so launched."""
    monkeypatch.setattr(croqtile.ops.traced, "DECOMPOSED_DEVICES", frozenset({"cuda", "cpu"}))
    launcher = Launcher()
    launched: list[Any] = []

    def run(kernel: Any, *args: Any, grid: Any, warmup: bool, num_warps: int = 4,
            num_stages: int = 3, **options: Any) -> None:
        del warmup, options
        launched.append(kernel)
        launcher(kernel, tuple(grid), args, num_warps=num_warps, num_stages=num_stages,
                 device=CPU)

    monkeypatch.setattr(JITFunction, "run", run)
    # without a GPU driver torch cannot analyse which arguments a kernel writes; it says
    # so at length and assumes all of them (still right, as the results below check)
    logger = logging.getLogger("torch._higher_order_ops.triton_kernel_wrap")
    level = logger.level
    logger.setLevel(logging.ERROR)
    torch._dynamo.reset()  # (the tests compile one code object for many functions)
    yield launched
    logger.setLevel(level)


class Graphs:
    """A ``torch.compile`` backend that keeps the forward graph AOTAutograd traced (the
    graph Inductor would compile) and runs it as it is."""

    def __init__(self) -> None:
        self.code: list[str] = []

    def __call__(self, gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        def keep(graph: torch.fx.GraphModule, _: Any) -> Any:
            self.code.append(graph.code)
            return graph

        return aot_module_simplified(gm, inputs, fw_compiler=keep)


def _model(scale_add: Any, stack: Any) -> Any:
    def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        scale_add(torch.sin(a), b, out, 2.0)
        return stack(out.reshape(-1, 4), b.reshape(-1, 4)).sum(0) + out[:4]
    return model


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_traced_model_holds_the_kernels(decomposing_on_cpu: list[Any], dynamic: bool) -> None:
    scale_add, stack = _compile(SCALE_ADD).scale_add, _compile(CONCAT).stack
    model = _model(scale_add, stack)
    graphs = Graphs()
    compiled = torch.compile(model, fullgraph=True, backend=graphs, dynamic=dynamic)
    for n in (64, 96, 40):
        a, b = random((n,), torch.float32), random((n,), torch.float32)
        assert_close(compiled(a, b), model(a, b).double(), torch.float32)
    code = "\n".join(graphs.code)
    assert "triton_kernel_wrapper_functional" in code
    assert str(scale_add.op) not in code and str(stack.op) not in code  # decomposed
    assert len(graphs.code) == (1 if dynamic else 3)  # dynamic: one graph for every size
    names = {k.fn.__name__ for k in decomposing_on_cpu}
    assert names == {"scale_add_k0", "stack_k0"}
    assert torch._dynamo.explain(model)(a, b).graph_break_count == 0


def test_cpu_calls_stay_opaque() -> None:
    scale_add = _compile(SCALE_ADD).scale_add
    graphs = Graphs()

    def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        scale_add(a, b, out, 2.0)
        return out * 2

    compiled = torch.compile(model, fullgraph=True, backend=graphs)
    a, b = random((64,), torch.float32), random((64,), torch.float32)
    assert_close(compiled(a, b), model(a, b).double(), torch.float32)
    assert f"{scale_add.op}.default" in graphs.code[0]
    assert "triton_kernel_wrapper" not in graphs.code[0]


def test_strided_arguments_take_the_opaque_call(decomposing_on_cpu: list[Any]) -> None:
    """A strided argument (a view with a step) keeps the operator opaque, whose call
    runs the variant compiled for that layout: right results, no error, no graph break,
    nothing decomposed."""
    scale_add = _compile(SCALE_ADD).scale_add
    graphs = Graphs()

    def model(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(b)
        scale_add(a[::2], b, out, 2.0)
        return out * 2

    compiled = torch.compile(model, fullgraph=True, backend=graphs)
    a, b = random((128,), torch.float32), random((64,), torch.float32)
    expected = (a[::2].double() * 2 + b.double()) * 2
    assert_close(compiled(a, b), expected, torch.float32)
    assert f"{scale_add.op}.default" in graphs.code[0]
    assert "triton_kernel_wrapper" not in graphs.code[0]
    assert decomposing_on_cpu == []
    assert torch._dynamo.explain(model)(a, b).graph_break_count == 0


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_every_corpus_program_decomposes_with_its_results(decomposing_on_cpu: list[Any],
                                                          case: Case) -> None:
    """Compiled with descriptors made in the kernel, every corpus program decomposes; the
    traced graph (symbolic sizes) returns and writes what an eager call does."""
    module = _compile(case.source, defines=case.defines, descriptors="kernel")
    function = getattr(module, case.function) if case.function else next(
        iter(module.functions.values()))
    assert croqtile.ops.traced.opaque_reason(function) is None
    inputs = tuple(case.inputs())
    eager = _cloned(inputs)
    want = function.call(*eager)
    graphs = Graphs()

    def call(*args: Any) -> Any:  # the result, and the arguments as the call left them
        return function.op(*args), [a for a in args if isinstance(a, torch.Tensor)]

    traced = _cloned(inputs)
    got = torch.compile(call, backend=graphs, fullgraph=True, dynamic=True)(*traced)
    assert str(function.op) not in graphs.code[0]  # decomposed
    schema = schema_of(function.compiled)
    # (a function returning a size has no kernel; one writing only its private copy of an
    # argument has no effect, and its launch leaves the graph)
    if function.compiled.artifact.kernels and ("!" in schema or schema.endswith("Tensor")):
        assert decomposing_on_cpu, "the traced graph launched no kernel"
        assert "triton_kernel_wrapper_functional" in graphs.code[0]
    torch.testing.assert_close(got, (want, [a for a in eager if isinstance(a, torch.Tensor)]),
                               rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(traced, eager, rtol=0, atol=0, equal_nan=True)


def _cloned(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def test_why_functions_stay_opaque(decomposing_on_cpu: list[Any]) -> None:
    gemm = _compile((DATA / "seed000_sm90_gemm.co").read_text())
    matmul = next(iter(gemm.functions.values()))
    assert "tensor descriptors made on the host" in str(croqtile.ops.traced.opaque_reason(matmul))
    staged = _compile(WHOLE_TILE).stage3
    assert "compiled per call" in str(croqtile.ops.traced.opaque_reason(staged))
    assert croqtile.ops.traced.traced_call(staged) is None
    tuned = _compile(SCALE_ADD, autotune="quick").scale_add
    assert "chosen per shape by timing" in str(croqtile.ops.traced.opaque_reason(tuned))
    checked = _compile(DEVICE_ASSERT).checked  # (its kernel checks device assertions)
    traced = croqtile.ops.traced.traced_call(checked)
    assert traced is not None and "device assertions" in str(traced.reason)
    assert not traced.decomposes((random((24,), torch.int32), torch.empty(24)))
    # an opaque operator stays in the traced graph, and its call gives the right result
    graphs = Graphs()
    compiled = torch.compile(lambda x, y: staged(x, y), fullgraph=True, backend=graphs)
    x, y = random((3, 5, 7), torch.float32), poison(torch.empty(3, 5, 7))
    compiled(x, y)
    assert torch.equal(y, x)
    assert f"{staged.op}.default" in graphs.code[0] and not decomposing_on_cpu


def test_traced_calls_check_their_arguments(decomposing_on_cpu: list[Any]) -> None:
    scale_add = _compile(SCALE_ADD).scale_add

    def model(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        scale_add(x, y, out, 2.0)
        return out

    x = random((64,), torch.float32)
    with pytest.raises(Exception, match=r"parameter 'y' expects dtype torch.float32"):
        torch.compile(model, backend=Graphs(), fullgraph=True)(x, x.double())
    with pytest.raises(Exception, match=r"parameter 'y', dimension 0 \(N\): must equal the "
                                        r"size bound by 'x'"):
        torch.compile(model, backend=Graphs(), fullgraph=True)(x, random((32,), torch.float32))
    assert not decomposing_on_cpu


def test_the_kernels_are_recorded_for_the_compile_cache() -> None:
    """AOTAutograd's cache key takes the source of the kernels recorded for an operator
    (as for a triton_op): a new source of an operator keys a new graph."""
    from torch._library.triton import get_triton_kernels_for_op

    scale_add = _compile(SCALE_ADD).scale_add
    kernels = get_triton_kernels_for_op(scale_add.op.default._name)
    assert [k.fn.__name__ for k in kernels] == ["scale_add_k0"]
    assert get_triton_kernels_for_op(_compile(WHOLE_TILE).stage3.op.default._name) == []
