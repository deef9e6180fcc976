"""On the GPU: croqtile operators in CUDA graphs and under Inductor (issue 17, item 2).

A warm call neither synchronises, nor copies between host and device, nor allocates
beyond its outputs, nor touches a file (``tests/watched_calls.py``, in a process of its
own); ``torch.cuda.CUDAGraph`` captures it and replays
it on new data; a model mixing torch and croqtile operators compiles whole with Inductor
(``fullgraph=True``, static and dynamic shapes, no graph break), its croqtile kernels in
Inductor's code, and with ``mode="reduce-overhead"``; results are those of eager calls."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

import croqtile

from ..e2e.checks import DATA, assert_close, poison, random
from ..library.test_registration import CONCAT, SCALE_ADD
from ..test_warm_calls import watched

pytestmark = pytest.mark.gpu

_NAMESPACES = (f"croqtile_gpu_graphs{i}" for i in itertools.count())
GEMM = (DATA / "seed000_sm90_gemm.co").read_text()


def _compile(source: str, **kw: Any) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(source, library=next(_NAMESPACES), **kw)


@dataclass
class Call:
    """One croqtile call on the GPU: fresh arguments, the reference of its effect (the
    result, or the argument it writes, in float64), and the tensors it makes per call."""

    name: str
    function: Any
    args: Callable[[], tuple[Any, ...]]
    reference: Callable[[tuple[Any, ...]], torch.Tensor]
    written: int | None  # the argument written in place, None: the result
    dtype: torch.dtype
    allocations: int  # tensors a warm call makes (outputs; scratch of in-kernel descriptors)


def _calls() -> list[Call]:
    scale_add = _compile(SCALE_ADD).scale_add
    stack = _compile(CONCAT).stack
    host_gemm = next(iter(_compile(GEMM).functions.values()))
    kernel_gemm = next(iter(_compile(GEMM, descriptors="kernel").functions.values()))

    def f32(*shape: int) -> torch.Tensor:
        return random(shape, torch.float32, "cuda")

    def f16(*shape: int) -> torch.Tensor:
        return random(shape, torch.float16, "cuda")

    def gemm_args() -> tuple[Any, ...]:
        return f16(256, 64), f16(128, 64), poison(torch.empty(256, 128, device="cuda").half())

    return [
        Call("scale_add", scale_add,
             lambda: (f32(1000), f32(1000), poison(torch.empty(1000, device="cuda")), 3.0),
             lambda a: 3.0 * a[0].double() + a[1].double(), 2, torch.float32, 0),
        Call("stack", stack, lambda: (f32(30, 4), f32(50, 4)),
             lambda a: torch.cat([a[0], 2 * a[1]]).double(), None, torch.float32, 1),
        Call("gemm_host_descriptors", host_gemm, gemm_args,
             lambda a: a[0].double() @ a[1].double().T, 2, torch.float16, 0),
        # a program building its tensor descriptors takes global scratch from Triton's
        # allocator (a torch allocation, which CUDA graphs capture): at most one per launch
        Call("gemm_kernel_descriptors", kernel_gemm, gemm_args,
             lambda a: a[0].double() @ a[1].double().T, 2, torch.float16, 1),
    ]


CALLS = ["scale_add", "stack", "gemm_host_descriptors", "gemm_kernel_descriptors"]


def _call(name: str) -> Call:
    return next(c for c in _calls() if c.name == name)


def _effect(call: Call, result: Any, args: tuple[Any, ...]) -> torch.Tensor:
    return result if call.written is None else args[call.written]


def watched_calls() -> list[tuple[str, Any, Callable[[], tuple[Any, ...]], Any]]:
    """The calls above as ``tests.watched_calls`` takes them: (name, function, fresh
    arguments, check of a call's effect)."""

    def checker(call: Call) -> Callable[[Any, tuple[Any, ...]], None]:
        def check(result: Any, args: tuple[Any, ...]) -> None:
            torch.cuda.synchronize()
            assert_close(_effect(call, result, args), call.reference(args), call.dtype)
        return check

    return [(c.name, c.function, c.args, checker(c)) for c in _calls()]


def test_warm_calls_touch_no_file_and_compile_nothing() -> None:
    report = watched("cuda")
    cold = report.pop("cold")
    assert report == {name: [] for name in CALLS}
    assert any(line.startswith(("load_module", "open", "exec")) for line in cold), cold


@pytest.mark.parametrize("name", CALLS)
def test_warm_calls_neither_sync_nor_copy_nor_allocate(name: str) -> None:
    call = _call(name)
    args = call.args()
    for _ in range(3):
        call.function(*args)
    torch.cuda.synchronize()
    calls = 20
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")  # a synchronising call raises
    try:
        for _ in range(calls):
            call.function(*args)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    made = torch.cuda.memory_stats()["allocation.all.allocated"] - before
    if name == "gemm_kernel_descriptors":
        assert made <= calls * call.allocations
    else:
        assert made == calls * call.allocations
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            call.function(*args)
        torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "memcpy" in e.name.lower()]
    assert copies == []
    torch.cuda.synchronize()
    assert_close(_effect(call, call.function(*args), args), call.reference(args), call.dtype)


@pytest.mark.parametrize("name", CALLS)
def test_a_cuda_graph_replays_a_croqtile_call_on_new_data(name: str) -> None:
    call = _call(name)
    static = call.args()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm: kernels compiled, signatures known
        for _ in range(3):
            call.function(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = call.function(*static)
    for _ in range(3):
        fresh = call.args()
        for target, value in zip(static, fresh):
            if isinstance(target, torch.Tensor):
                target.copy_(value)
        graph.replay()
        torch.cuda.synchronize()
        assert_close(_effect(call, result, static), call.reference(fresh), call.dtype)


def _models() -> tuple[Any, tuple[Any, ...]]:
    """A model of torch operators around croqtile ones: decomposed ones (scale_add,
    stack, a GEMM with descriptors made in the kernel) and an opaque one (the GEMM with
    host descriptors); and those four operators."""
    scale_add = _compile(SCALE_ADD).scale_add
    stack = _compile(CONCAT).stack
    gemm = next(iter(_compile(GEMM, descriptors="kernel").functions.values()))
    opaque = next(iter(_compile(GEMM).functions.values()))

    def model(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        scale_add(torch.sin(a), b, out, 2.0)
        rows = stack(out.reshape(-1, 4), b.reshape(-1, 4))  # 2n/4 rows of 4
        x = (rows.reshape(-1, 64) * 0.5).half()  # n/32 rows of 64
        y = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=torch.float16)
        gemm(x, w, y)
        z = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=torch.float16)
        opaque(torch.relu(x), w, z)
        return y.float().sum(1) + z.float().sum(1) + out.reshape(-1, 32).sum(1)[:1]

    return model, (scale_add.op, stack.op, gemm.op, opaque.op)


def _inputs(n: int) -> tuple[torch.Tensor, ...]:
    return (random((n,), torch.float32, "cuda"), random((n,), torch.float32, "cuda"),
            random((128, 64), torch.float16, "cuda"))


@pytest.mark.parametrize("dynamic", [False, True])
def test_inductor_compiles_a_model_with_croqtile_kernels_whole(dynamic: bool) -> None:
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    model, ops = _models()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    code: list[str] = []
    for n in (2048, 4096, 1024):
        args = _inputs(n)
        got, sources = run_and_get_code(compiled, *args)
        code.extend(sources)
        assert_close(got, model(*args).double(), torch.float32, 2e-2)
    text = "\n".join(code)
    # the decomposed operators' kernels are in Inductor's code, the opaque one is called
    for kernel in ("scale_add_k0", "stack_k0", "matmul_k0"):
        assert kernel in text, kernel
    assert str(ops[3]) in text
    explained = torch._dynamo.explain(model)(*_inputs(2048))
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_reduce_overhead_mode_replays_croqtile_kernels() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model, _ = _models()
    compiled = torch.compile(model, fullgraph=True, mode="reduce-overhead")
    for _ in range(5):  # warm-up runs, the recording, then replays on new data
        args = _inputs(2048)
        got = compiled(*args).clone()
        assert_close(got, model(*args).double(), torch.float32, 2e-2)
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
