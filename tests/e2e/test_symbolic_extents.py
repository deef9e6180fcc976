"""Sizes and parallel forms that need more than one static compile: a staged tile or
shared buffer shaped by parameter dimensions, group and thread bounds from them, runtime
extents with a static bound, anonymous parallel levels, device and cluster levels, and
shared buffers written element by element.

A function that needs dimensions as constants is compiled per call, specialised on the
dimensions of its arguments (one compile per distinct shape); the per-block limits are
checked then and reported as ``ArgumentError``. Every program runs through the Triton path
(Triton's CPU interpreter) and the reference interpreter against float64 torch
references, and its kernels compile for sm_90."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.backends.reference import interpret_source

from ..backends.sm90 import HAVE_CUDA_BACKEND, compile_for_sm90
from .checks import assert_close, poison, random


@dataclass(frozen=True)
class Case:
    """``inputs`` are the arguments before the output (written in place, last)."""

    source: str
    function: str
    inputs: Callable[[], list[torch.Tensor]]
    out_shape: Callable[[list[torch.Tensor]], tuple[int, ...]]
    reference: Callable[[list[torch.Tensor]], torch.Tensor]
    dtype: torch.dtype


ANONYMOUS = """
__co__ void twice(global s32 [R, C] x, global s32 [R, C] y) {
  parallel by 1, by 1 {
    f = dma.copy x.subspan(4, 16).at(0, 0) => shared;
    dma.copy f.data => y.subspan(4, 16).at(0, 0);
  }
  parallel by 1 : block, by 1 : thread {
    g = dma.copy x.subspan(4, 16).at(1, 0) => shared;
    dma.copy g.data => y.subspan(4, 16).at(1, 0);
  }
}
"""

WHOLE_TILE = """
__co__ void stage3(global f32 [A, B, C] x, global f32 [A, B, C] y) {
  parallel p by 1 : block
    parallel q by 32 : thread {
      t = dma.copy x.subspan(A, B, C) => shared;
      dma.copy t => y;
    }
}
"""

SHARED_SYMBOLIC = """
__co__ void stage_async(global f16 [M, N] x, global f16 [M, N] y) {
  parallel p by 1 : block
    parallel q by 64 : thread {
      shared f16 [M, N] buf;
      f = dma.copy.async x.subspan(M, N) => buf.subspan(M, N);
      wait f;
      dma.copy buf.subspan(M, N) => y;
    }
}
"""

GROUP_BOUND = """
__co__ void rows(global f32 [R, 32] x, global f32 [R, 32] bias, global f32 [R, 32] y) {
  parallel p by 1 : block
    parallel q by x.span(0) : group
      parallel t by 32 : thread
        y.at(q, t) = x.at(q, t) * 3.0f + bias.at(q, t);
}
"""

THREAD_BOUND = """
__co__ void scale(global s32 [N] x, global s32 [N] y) {
  parallel t by N : thread
    y.at(t) = x.at(t) * 5 - 1;
}
"""

DERIVED = """
__co__ void halves(global f32 [K, N] x, global f32 [K, N] y) {
  parallel p by 8 : block {
    s = dma.copy x.chunkat(p, _) => shared;
    shared f32 [s.span] keep;
    dma.copy s.data => keep;
    parallel t by 16 : thread
      foreach i in [keep.span(0)]
        y.at(p # i, t) = keep.at(i, t) + 1.0f;
  }
}
"""

SCRATCH_INIT = """
__co__ void combine(global s32 [R, C] a, global s32 [R, C] b, global s32 [R, C] out) {
  parallel p by 2 : block {
    shared s32 [R / 2, C] acc{3};
    parallel t by C : thread
      foreach i in [R / 2] {
        acc.at(i, t) += a.at(p * (R / 2) + i, t) * 2;
        acc.at(i, t) = acc.at(i, t) - b.at(p * (R / 2) + i, t);
      }
    dma.copy acc => out.chunkat(p, _);
  }
}
"""

SCRATCH_GROUPS = """
__co__ void mix(global f32 [G, 3, 32] x, global f32 [G, 3, 32] y) {
  parallel g by x.span(0) : group {
    s = dma.copy.async x => shared;
    wait s;
    shared f32 [s.span] t;
    foreach k in [3]
      parallel {j} by [32]
        t.at(g, k, j) = s.data.at(g, k, j) * s.data.at(g, 2 - k, j);
    dma.copy t => y;
  }
}
"""

RUNTIME_EXTENT_MIN = """
__co__ void rowtail(global f32 [37, 48] x, global f32 [37, 48] y) {
  parallel p by 3 : block {
    int rest = 37 - p * 16;
    n = (16 < rest) ? 16 : rest;
    shared f32 [16, 48] out;
    f = dma.copy.async x.view(n, _).from(p * 16, 0) => shared;
    wait f;
    parallel t by 48 : thread
      foreach r in n
        out.at(r, t) = f.data.at(r, t) * 2.0f + 1.0f;
    dma.copy out.subspan(n, _) => y.view(n, _).from(p * 16, 0);
  }
}
"""

RUNTIME_EXTENT_CHOICE = """
__co__ void pieces(global s32 [4, 11, 32] a, global s32 [4, 11, 32] b) {
  parallel p by 4 : block {
    foreach k in 3 {
      w = (k == 2) ? 3 : 4;
      shared s32 [1, 4, 32] sa, sb;
      f = dma.copy a.view(1, w, _).from(p, 4 * k, 0) => sa.subspan(1, w, _);
      parallel q by 32
        foreach r in w
          sb.at(0, r, q) = sa.at(0, r, q) - q;
      dma.copy sb => b.view(1, w, _).from(p, 4 * k, 0);
    }
  }
}
"""

NAMED_SLICES = """
__co__ void gemm(global f16 [M, K] a, global f16 [N, K] b, global f32 [M, N] c) {
  parallel {bm, bn} by [cdiv(M, 64), cdiv(N, 64)] : block {
    acc = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, 64)] {
      sa = dma.copy a.subspan(64, 64).at(bm, kk) => shared;
      sb = dma.copy b.subspan(64, 64).at(bn, kk) => shared;
      foreach {s} in [4] {
        parallel by 1 : group-4 {
          va = sa.data.chunkat(_, s);
          vb = sb.data.chunkat(_, s);
          mma.row.row acc, va, vb;
        }
      }
    }
    shared f32 [64, 64] cs;
    mma.store acc, cs;
    dma.copy cs => c.subspan(64, 64).at(bm, bn);
  }
}
"""

CASES = {
    "anonymous levels": Case(
        ANONYMOUS, "twice", lambda: [random((2, 16), torch.int32)],
        lambda a: (2, 16), lambda a: a[0], torch.int32),
    "whole tile of symbolic dims": Case(
        WHOLE_TILE, "stage3", lambda: [random((3, 5, 7), torch.float32)],
        lambda a: tuple(a[0].shape), lambda a: a[0], torch.float32),
    "shared buffer of symbolic dims": Case(
        SHARED_SYMBOLIC, "stage_async", lambda: [random((6, 20), torch.float16)],
        lambda a: tuple(a[0].shape), lambda a: a[0], torch.float16),
    "group bound from a dimension": Case(
        GROUP_BOUND, "rows",
        lambda: [random((5, 32), torch.float32), random((5, 32), torch.float32)],
        lambda a: (5, 32), lambda a: a[0] * 3 + a[1], torch.float32),
    "thread bound from a dimension": Case(
        THREAD_BOUND, "scale", lambda: [random((100,), torch.int32)],
        lambda a: (100,), lambda a: a[0] * 5 - 1, torch.int32),
    "derived extent K / 8": Case(
        DERIVED, "halves", lambda: [random((24, 16), torch.float32)],
        lambda a: (24, 16), lambda a: a[0] + 1, torch.float32),
    "element writes into an initialised shared buffer": Case(
        SCRATCH_INIT, "combine",
        lambda: [random((6, 20), torch.int32), random((6, 20), torch.int32)],
        lambda a: (6, 20), lambda a: 3 + 2 * a[0] - a[1], torch.int32),
    "element writes into a shared buffer, one group per row": Case(
        SCRATCH_GROUPS, "mix", lambda: [random((3, 3, 32), torch.float32)],
        lambda a: (3, 3, 32), lambda a: a[0] * a[0].flip(1), torch.float32),
    "runtime extent: the smaller of a tile and the rest": Case(
        RUNTIME_EXTENT_MIN, "rowtail", lambda: [random((37, 48), torch.float32)],
        lambda a: (37, 48), lambda a: a[0] * 2 + 1, torch.float32),
    "runtime extent chosen by a condition, runtime loop bound": Case(
        RUNTIME_EXTENT_CHOICE, "pieces", lambda: [random((4, 11, 32), torch.int32)],
        lambda a: (4, 11, 32), lambda a: a[0] - torch.arange(32, dtype=torch.float64),
        torch.int32),
    "MMA operands named per K slice under an anonymous group-4 level": Case(
        NAMED_SLICES, "gemm",
        lambda: [random((64, 128), torch.float16), random((128, 128), torch.float16)],
        lambda a: (64, 128), lambda a: a[0] @ a[1].T, torch.float32),
}


def _args(case: Case) -> list[Any]:
    inputs = case.inputs()
    out = poison(torch.empty(case.out_shape(inputs), dtype=case.dtype))
    return inputs + [out]


@pytest.mark.parametrize("name", CASES)
def test_triton_path(name: str) -> None:
    case = CASES[name]
    args = _args(case)
    fn = getattr(croqtile.compile(case.source), case.function)
    fn(*args)
    reference = case.reference([a.double() for a in args[:-1]])
    assert_close(args[-1], reference, case.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_triton_path_on_the_gpu(name: str) -> None:
    case = CASES[name]
    args = _args(case)
    fn = getattr(croqtile.compile(case.source), case.function)
    fn(*[a.cuda() for a in args[:-1]], out := args[-1].cuda())
    reference = case.reference([a.double() for a in args[:-1]])
    assert_close(out.cpu(), reference, case.dtype)


@pytest.mark.parametrize("name", CASES)
def test_reference_interpreter(name: str) -> None:
    case = CASES[name]
    args = _args(case)
    interpret_source(case.source, args, function=case.function)
    reference = case.reference([a.double() for a in args[:-1]])
    assert_close(args[-1], reference, case.dtype)


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("name", CASES)
def test_kernels_compile_for_sm90(name: str) -> None:
    case = CASES[name]
    fn = getattr(croqtile.compile(case.source), case.function)
    artifact = fn.artifact_for(*_args(case))
    for index in range(len(artifact.kernels)):
        compile_for_sm90(artifact, index, f"{name}:{case.function}")


def test_one_compile_per_shape() -> None:
    """The function is specialised per distinct dimensions; a repeated shape reuses it."""
    fn = croqtile.compile(WHOLE_TILE).stage3
    assert fn.specialize_on == ("A", "B", "C")
    for shape in [(3, 5, 7), (2, 3, 4), (3, 5, 7)]:
        x = random(shape, torch.float32)
        y = poison(torch.empty(shape))
        fn(x, y)
        assert_close(y, x.double(), torch.float32)
    assert fn.loads == 2
    source = fn.triton_source  # the last shape's: 5 and 7 padded to 8, masked
    assert "tl.arange(0, 8)" in source and "< 7)" in source and "< 5)" in source


def test_static_functions_are_not_specialised() -> None:
    fn = croqtile.compile(THREAD_BOUND.replace("[N]", "[64]").replace("by N", "by 64")).scale
    assert fn.specialize_on == ()


def test_too_many_threads_for_the_shape() -> None:
    fn = croqtile.compile(THREAD_BOUND).scale
    x = random((2000,), torch.int32)
    with pytest.raises(croqtile.ArgumentError, match=r"N = 2000.*CQ0604 2000 threads"):
        fn(x, torch.empty_like(x))


def test_too_much_shared_memory_for_the_shape() -> None:
    fn = croqtile.compile(SHARED_SYMBOLIC).stage_async
    x = random((400, 400), torch.float16)
    with pytest.raises(croqtile.ArgumentError, match=r"M = 400, N = 400.*CQ0612"):
        fn(x, torch.empty_like(x))


def test_group_bound_limit_for_the_shape() -> None:
    fn = croqtile.compile(GROUP_BOUND).rows
    x = random((40, 32), torch.float32)
    with pytest.raises(croqtile.ArgumentError, match=r"R = 40.*1280 threads"):
        fn(x, x, torch.empty_like(x))


def test_backend_gap_of_a_specialised_function_is_a_compile_error() -> None:
    """A construct the backend cannot lower is no fault of the shapes: CompileError."""
    source = WHOLE_TILE.replace("dma.copy t => y;", "dma.copy t => y;\n      foreach i in [2]"
                                "\n        if (q > i) yield;")
    fn = croqtile.compile(source).stage3
    x = random((2, 3, 4), torch.float32)
    with pytest.raises(croqtile.CompileError, match=r"CQ0701\]: .*'yield'"):
        fn(x, torch.empty_like(x))


DEVICE_SCOPE = """
__co__ void bump(global s32 [R] a, global f32 [R] b) {
  parallel.async by 1 : device(cpu) {
    parallel p by R : block
      a.at(p) = a.at(p) * 2 + 7;
  }
  parallel d by 1 : device(cpu) {
    parallel q by R : block
      b.at(q) = b.at(q) - 0.5f + d;
  }
  sync.global;
}
"""


def test_device_scope() -> None:
    """``: device`` levels of one instance pick where the kernels inside run: host code."""
    a, b = random((9,), torch.int32), random((9,), torch.float32)
    expected = [a.double() * 2 + 7, b.double() - 0.5]
    for run in (croqtile.compile(DEVICE_SCOPE).bump,
                lambda *args: interpret_source(DEVICE_SCOPE, list(args))):
        got = [a.clone(), b.clone()]
        run(*got)
        assert_close(got[0], expected[0], torch.int32)
        assert_close(got[1], expected[1], torch.float32)
    if HAVE_CUDA_BACKEND:
        artifact = croqtile.compile(DEVICE_SCOPE).bump.artifact_for(a, b)
        for index in range(len(artifact.kernels)):
            compile_for_sm90(artifact, index, "device scope")


def test_device_scope_of_several_instances_is_rejected() -> None:
    source = DEVICE_SCOPE.replace("parallel d by 1", "parallel d by 2")
    with pytest.raises(croqtile.CompileError, match="CQ0701.*device level with more than one"):
        croqtile.compile(source)


def test_runtime_extent_without_a_static_bound_is_rejected() -> None:
    source = RUNTIME_EXTENT_MIN.replace("n = (16 < rest) ? 16 : rest;", "n = rest + 0;")
    with pytest.raises(croqtile.CompileError,
                       match=r"CQ0704\]: tile extent 'n' has no static bound"):
        croqtile.compile(source)


def test_runtime_extent_that_would_move_its_tile_is_rejected() -> None:
    """``subspan(n).at(i)`` places the tile at ``i * n``: a runtime n would move it."""
    source = RUNTIME_EXTENT_MIN.replace("out.subspan(n, _) =>", "out.subspan(n, _).at(0, 0) =>")
    with pytest.raises(croqtile.CompileError, match="CQ0704"):
        croqtile.compile(source)


WRITE_STAGED = """
__co__ void twice(global f32 [4, 40] x, global f32 [4, 40] y) {
  parallel p by 4 : block {
    s = dma.copy x.chunkat(p, _) => shared;
    parallel t by 40 : thread
      s.data.at(0, t) = s.data.at(0, t) * 2.0f - 1.0f;
    dma.copy s.data => y.chunkat(p, _);
  }
}
"""


def test_element_writes_into_a_staged_copy_leave_the_source_alone() -> None:
    """A staged copy is a view of its source until an element is written into it: then it
    gets its own storage, holding what was copied (the caller's tensor must not change)."""
    x = random((4, 40), torch.float32)
    expected = x.double() * 2 - 1
    for run in (croqtile.compile(WRITE_STAGED).twice,
                lambda *args: interpret_source(WRITE_STAGED, list(args))):
        source, out = x.clone(), poison(torch.empty(4, 40))
        run(source, out)
        assert torch.equal(source, x)
        assert_close(out, expected, torch.float32)
    if HAVE_CUDA_BACKEND:
        artifact = croqtile.compile(WRITE_STAGED).twice.artifact_for(x, x)
        compile_for_sm90(artifact, 0, "write staged")


CLUSTER = """
__co__ void shift(global f32 [N, 64] x, global f32 [N, 64] y) {
  parallel {c} by [2] : cluster {
    parallel {bm} by [cdiv(N, 16)] : block {
      shared f32 [16, 64] xs;
      tma.copy.multicast x.subspan(16, 64).at(bm, 0) => xs;
      parallel t by 64 : thread
        foreach r in [16]
          y.at(bm # r, t) = xs.at(r, t) + 0.25f;
    }
  }
}
"""


def test_cluster_scope_and_multicast() -> None:
    """Clusters only group blocks (for multicast TMA): the kernels inside run as if the
    level were not there, and a multicast copy is each block's own copy (spec 8)."""
    x = random((48, 64), torch.float32)
    for run in (croqtile.compile(CLUSTER).shift,
                lambda *args: interpret_source(CLUSTER, list(args))):
        out = poison(torch.empty(48, 64))
        run(x, out)
        assert_close(out, x.double() + 0.25, torch.float32)
    if HAVE_CUDA_BACKEND:
        artifact = croqtile.compile(CLUSTER).shift.artifact_for(x, x)
        compile_for_sm90(artifact, 0, "cluster")


def test_cluster_rank_is_rejected() -> None:
    source = CLUSTER.replace("xs.at(r, t) + 0.25f", "xs.at(r, t) + c")
    with pytest.raises(croqtile.CompileError, match=r"CQ0701\]: .*rank of a block in its cluster"):
        croqtile.compile(source)


REFILLED = """
__co__ void runs(global s32 [3, 4, 32] x, global s32 [3, 4, 32] y) {
  parallel p by 3 : block {
    foreach k in [4] {
      shared s32 [1, 1, 32] acc{5};
      s = dma.copy x.view(1, 1, 32).from(p, k, 0) => shared;
      parallel t by 32 : thread
        foreach i in [2] {
          acc.at(0, 0, t) += s.data.at(0, 0, t);
          s.data.at(0, 0, t) = s.data.at(0, 0, t) * 3;
        }
      dma.copy acc => y.view(1, 1, 32).from(p, k, 0);
    }
  }
}
"""


def test_buffers_written_by_element_are_refilled_on_every_trip() -> None:
    """A buffer declared (or filled by a copy) inside a loop gets its initialiser (or the
    copy) again on every trip, also when its first element write sits in an inner loop."""
    x = random((3, 4, 32), torch.int32)
    expected = 5 + x.double() + 3 * x.double()
    for run in (croqtile.compile(REFILLED).runs,
                lambda *args: interpret_source(REFILLED, list(args))):
        source, out = x.clone(), poison(torch.empty(3, 4, 32, dtype=torch.int32))
        run(source, out)
        assert torch.equal(source, x)
        assert_close(out, expected, torch.int32)
    if HAVE_CUDA_BACKEND:
        artifact = croqtile.compile(REFILLED).runs.artifact_for(x, x)
        compile_for_sm90(artifact, 0, "refilled")
