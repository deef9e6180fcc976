"""Warm eager calls of ``croqtile.nn.functional.linear`` run a kept launch plan
(``croqtile.runtime.module.Plan``): the checks and the choice of kernel are skipped for
arguments of a kind seen before. Each call still gives the float64 reference, and any
argument of another kind (shape, dtype, alignment, layout, a gradient wanted, a
dispatch mode) takes the checked path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf
from croqtile.backends.triton.launcher import Launcher, PlannedLauncher

from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def _reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return F.linear(x.double(), w.double(), None if b is None else b.double())


def _hits() -> int:
    return cf._LINEAR_PLANS.info().hits


@pytest.mark.parametrize("bias", [False, True])
def test_warm_calls_run_the_plan_and_match_the_reference(bias: bool) -> None:
    # (parameters, as a model's layer holds them: they require grad, and grad mode is off)
    w = torch.nn.Parameter(random((24, 40), torch.float32))
    b = torch.nn.Parameter(random((24,), torch.float32)) if bias else None
    with torch.no_grad():
        for _ in range(3):  # (fresh inputs each time: the plan keeps no tensor)
            x = random((2, 3, 40), torch.float32)
            before = _hits()
            assert_close(cf.linear(x, w, b), _reference(x, w, b), torch.float32)
        assert _hits() == before + 1


def test_other_kinds_of_arguments_take_the_checked_path() -> None:
    w = random((24, 40), torch.float32)
    with torch.no_grad():
        cf.linear(random((4, 40), torch.float32), w)
        cf.linear(random((4, 40), torch.float32), w)
        hits = _hits()
        # a misaligned x (an offset of one element), a transposed one, another shape,
        # another dtype: each is a miss, and each is right
        store = random((4 * 40 + 1,), torch.float32)
        misaligned = store[1:].view(4, 40)
        transposed = random((40, 4), torch.float32).t()
        longer = random((7, 40), torch.float32)
        for x, weight in ((misaligned, w), (transposed, w), (longer, w),
                          (random((4, 40), torch.float64), w.double())):
            assert_close(cf.linear(x, weight), _reference(x, weight, None), x.dtype)
        assert _hits() == hits


def test_a_gradient_or_a_dispatch_mode_never_runs_the_plan() -> None:
    w = random((24, 40), torch.float32)
    x = random((4, 40), torch.float32)
    with torch.no_grad():
        cf.linear(x, w)
        cf.linear(x, w)
    hits = _hits()
    wanted = x.clone().requires_grad_()
    out = cf.linear(wanted, w)
    out.sum().backward()
    assert wanted.grad is not None
    assert_close(wanted.grad, w.double().sum(0).expand(4, 40), torch.float32)
    _, ran = croqtile_ops(cf.linear, x, w)
    assert len(ran) == 1 and ran[0].startswith("croqtile.linear_"), ran
    assert _hits() == hits


def test_the_planned_launcher_counts_and_delegates_cpu_launches() -> None:
    base = Launcher()
    planned = PlannedLauncher(base)
    ran: list[tuple[int, ...]] = []

    def on_cpu(kernel: object, grid: tuple[int, ...], args: tuple[object, ...]) -> None:
        ran.append(grid)

    base._on_cpu = on_cpu  # type: ignore[method-assign]  # (a launch that records itself)
    for _ in range(2):
        planned("kernel", (3,), (), num_warps=4, num_stages=2, device=torch.device("cpu"))
    assert ran == [(3,), (3,)] and base.launches == 2 and planned.compiled == {}


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [16, 2048])
def test_warm_gpu_calls_launch_the_remembered_kernel(rows: int) -> None:
    """On the GPU a plan's launcher keeps each kernel's compiled form after the plan's
    first call and launches it directly afterwards; every call is right (fresh inputs,
    bf16, skinny and wide tiles)."""
    w = random((1000, 256), torch.bfloat16, "cuda")
    with torch.no_grad():
        for _ in range(4):
            x = random((rows, 256), torch.bfloat16, "cuda")
            assert_close(cf.linear(x, w), _reference(x, w, None), torch.bfloat16)
    key = cf._linear_key(x, w, None, None)
    found = cf._LINEAR_PLANS.get(key)
    assert found is not None and len(found[0].launcher.compiled) == 1


@pytest.mark.parametrize("shape", [40, (40,)])
def test_rms_norm_and_gated_linear_plans(shape: int | tuple[int]) -> None:
    w, up, g = (random(s, torch.float32) for s in ((24, 40), (24, 40), (40,)))
    with torch.no_grad():
        for _ in range(3):
            x = random((2, 3, 40), torch.float32)
            assert_close(cf.rms_norm(x, shape, g, 1e-5),
                         F.rms_norm(x.double(), (40,), g.double(), 1e-5), torch.float32)
            assert_close(cf.gated_linear(x, w, up), F.silu(x.double() @ w.double().T)
                         * (x.double() @ up.double().T), torch.float32)
    assert cf._RMS_PLANS.info().hits >= 2 and cf._GATED_PLANS.info().hits >= 2


def test_attention_plans_for_a_models_strided_heads() -> None:
    """q, k and v as a model makes them ([B, L, H, D] viewed as [B, H, L, D]), grouped
    query heads, causal or not: warm calls run the plan and match the reference; a new
    key length is a miss and is right too."""
    def heads(b: int, s: int, h: int) -> torch.Tensor:
        return random((b, s, h, 32), torch.float32).transpose(1, 2)

    with torch.no_grad():
        for causal in (True, False):
            hits = cf._ATTENTION_PLANS.info().hits
            for keys in (20, 20, 20, 24):
                q, k, v = heads(1, 20, 4), heads(1, keys, 2), heads(1, keys, 2)
                reference = F.scaled_dot_product_attention(
                    q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
                assert_close(cf.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                             enable_gqa=True),
                             reference, torch.float32)
            assert cf._ATTENTION_PLANS.info().hits == hits + 2


def test_the_planned_launcher_knows_each_launch_by_its_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A host function that launches one kernel twice with arguments of other kinds gets
    the compiled kernel of each launch at its place (a GPU simulated: the base launcher
    compiles, the planned one launches what it remembered)."""
    from croqtile.backends.triton import launcher as module

    launched: list[tuple[str, tuple[object, ...]]] = []

    class Base:
        launches = 0

        def __call__(self, kernel: object, grid: tuple[int, ...], args: tuple[object, ...],
                     **options: object) -> None:
            launched.append(("compiled now", args))

        def compiled_for(self, kernel: object, args: tuple[object, ...], index: int) -> str:
            return f"compiled for {args[0]}"

    monkeypatch.setattr(module, "_current_device", lambda: 0)
    monkeypatch.setattr(module, "_launch_compiled",
                        lambda compiled, grid, args, index: launched.append((compiled, args)))
    planned = PlannedLauncher(Base())  # type: ignore[arg-type]  # (a stand-in base)
    cuda = torch.device("cuda", 0)
    for _ in range(2):
        planned.begin()
        planned("kernel", (2,), (16,), num_warps=4, num_stages=2, device=cuda)
        planned("kernel", (2,), (17,), num_warps=4, num_stages=2, device=cuda)
    assert launched == [("compiled now", (16,)), ("compiled now", (17,)),
                        ("compiled for 16", (16,)), ("compiled for 17", (17,))]
