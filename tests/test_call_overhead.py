"""Warm calls: a call whose argument signature bound before skips ``bind``, yet every
mistake still raises the ``ArgumentError`` a first call raises, and results stay right.
Also the launcher's GPU launch path (with a stand-in kernel), ``sm_count`` and the
benchmarks' JSON reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import croqtile
import croqtile.runtime.module
from croqtile.backends.triton import launcher as launcher_module
from croqtile.backends.triton.launcher import KernelError, Launcher

from .e2e.checks import DATA
from .e2e.test_symbolic_extents import WHOLE_TILE
from .test_api import GEMM

ROOT = Path(__file__).resolve().parent.parent


SCALE = """
__co__ void scale(global f32 [N] x, global f32 [N] y, f32 s, int k, bool flip) {
  parallel p by cdiv(N, 32) : block
    parallel i by 32 : thread
      y.at(p # i) = x.at(p # i) * s + k;
}
"""



def f16(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(torch.float16)


def poisoned(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype)


def assert_every_element(out: torch.Tensor, ref: torch.Tensor, tol: float) -> None:
    """Every element finite (the NaN poison overwritten) and within ``tol`` of the
    float64 reference, relative to the reference's largest magnitude."""
    assert out.shape == ref.shape
    got = out.double()
    assert bool(torch.isfinite(got).all()), "an element was never written"
    scale = max(ref.abs().max().item(), 1.0)
    worst = (got - ref).abs().max().item()
    assert worst <= tol * scale, f"worst error {worst} (scale {scale})"


class CountingBind:
    """Stands in for ``croqtile.runtime.module.bind`` and counts the full bindings."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = croqtile.runtime.module.bind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture()
def counting_bind(monkeypatch: pytest.MonkeyPatch) -> CountingBind:
    counter = CountingBind()
    monkeypatch.setattr(croqtile.runtime.module, "bind", counter)
    return counter


@pytest.fixture(scope="module")
def gemm() -> croqtile.Module:
    return croqtile.compile(GEMM, filename="mm.co")


@pytest.fixture(scope="module")
def scale() -> croqtile.Module:
    return croqtile.compile(SCALE, filename="scale.co")


def test_repeated_calls_skip_bind_and_stay_correct(counting_bind: CountingBind) -> None:
    fn = croqtile.compile(GEMM, filename="mm.co").mm
    for seed in range(3):  # new tensors each time, same signature
        a, b, c = f16(20, 40, seed=seed), f16(24, 40, seed=seed + 10), poisoned(20, 24)
        fn(a, b, c)
        assert_every_element(c, a.double() @ b.double().T, 2e-2)
    assert counting_bind.calls == 1
    assert fn.warm_calls == 2
    assert fn.launches == 3


def test_a_new_shape_binds_again_then_is_warm(counting_bind: CountingBind) -> None:
    fn = croqtile.compile(GEMM, filename="mm.co").mm
    shapes = [(20, 24, 40), (33, 17, 16), (20, 24, 40), (33, 17, 16)]
    for m, n, k in shapes:
        a, b, c = f16(m, k), f16(n, k, seed=1), poisoned(m, n)
        fn(a, b, c)
        assert_every_element(c, a.double() @ b.double().T, 2e-2)
    assert counting_bind.calls == 2
    assert fn.warm_calls == 2


def test_scalars_are_converted_on_warm_calls(scale: croqtile.Module,
                                             counting_bind: CountingBind) -> None:
    fn = scale.scale
    x = torch.randn(70, dtype=torch.float32)
    calls = [(2, 3, True), (0.5, -1, False), (torch.tensor(1.5), torch.tensor(2), True)]
    for s, k, flip in calls + calls:
        y = poisoned(70, dtype=torch.float32)
        fn(x, y, s, k, flip)
        want = x.double() * float(s) + int(k)
        assert_every_element(y, want, 1e-6)
    assert counting_bind.calls == len(calls)  # one per distinct scalar type pattern
    assert fn.warm_calls == len(calls)


def test_specialised_function_warm_calls() -> None:
    """A function compiled per shape: the warm call runs that shape's kernels."""
    fn = croqtile.compile(WHOLE_TILE).stage3
    assert fn.specialize_on == ("A", "B", "C")
    for shape in [(3, 5, 7), (2, 3, 4), (3, 5, 7), (2, 3, 4)]:
        x = torch.randn(shape)
        y = poisoned(*shape, dtype=torch.float32)
        fn(x, y)
        assert_every_element(y, x.double(), 0.0)
    assert fn.warm_calls == 2 and fn.loads == 2
    assert "tl.arange(0, 4)" in fn.triton_source  # the last shape's module: (2, 3, 4)


def test_returned_tensor_on_warm_calls() -> None:
    mod = croqtile.load(DATA / "assert_holds.co")
    for n in (32, 48, 32, 48):
        a = torch.arange(n, dtype=torch.int32) - 7
        out = mod.squares(a)
        assert out.tolist() == [v * v for v in a.tolist()]
    assert mod.squares.warm_calls == 2


def message(call: Callable[[], Any]) -> str:
    with pytest.raises(croqtile.ArgumentError) as info:
        call()
    return str(info.value)


def GOOD() -> tuple[Any, ...]:  # noqa: N802 - named like the MISTAKES table beside it
    return f16(20, 40), f16(24, 40), poisoned(20, 24)



MISTAKES: dict[str, Callable[[], tuple[Any, ...]]] = {
    "dtype": lambda: (f16(20, 40).float(), f16(24, 40), poisoned(20, 24)),
    "rank": lambda: (f16(20, 40, 1), f16(24, 40), poisoned(20, 24)),
    "dimension": lambda: (f16(20, 40), f16(24, 41), poisoned(20, 24)),
    "output dimension": lambda: (f16(20, 40), f16(24, 40), poisoned(20, 25)),
    "expanded output": lambda: (f16(20, 40), f16(24, 40), poisoned(1, 24).expand(20, 24)),
    "device mix": lambda: (f16(20, 40), f16(24, 40).to("meta"), poisoned(20, 24)),
    "not a tensor": lambda: ([[1.0]], f16(24, 40), poisoned(20, 24)),
    "too few": lambda: (f16(20, 40), f16(24, 40)),
    "too many": lambda: (f16(20, 40), f16(24, 40), poisoned(20, 24), 1),
    "zero dimension": lambda: (f16(0, 40), f16(24, 40), poisoned(0, 24)),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_mistakes_after_warm_calls_raise_as_cold(mistake: str) -> None:
    cold = croqtile.compile(GEMM, filename="mm.co").mm
    warm = croqtile.compile(GEMM, filename="mm.co").mm
    for _ in range(2):
        warm(*GOOD())
    assert warm.warm_calls == 1
    expected = message(lambda: cold(*MISTAKES[mistake]()))
    assert message(lambda: warm(*MISTAKES[mistake]())) == expected
    assert message(lambda: warm(*MISTAKES[mistake]())) == expected  # never cached
    assert warm.warm_calls == 1


def test_same_shape_but_not_contiguous_after_warm_calls(counting_bind: CountingBind) -> None:
    """A strided tensor of a warm signature's shape and dtype is not that signature: it
    binds again and runs the strided variant, which reads its strides; and the contiguous
    signature stays warm after it."""
    fn = croqtile.compile(GEMM, filename="mm.co").mm
    b = f16(24, 40)
    for seed in range(2):
        a, c = f16(40, 40, seed=seed), poisoned(40, 24)
        fn(a, b, c)
        assert_every_element(c, a.double() @ b.double().T, 2e-2)
    assert (counting_bind.calls, fn.warm_calls) == (1, 1)
    for seed in range(2):
        transposed = f16(40, 40, seed=seed + 5).T  # the warm shape and dtype, strides (1, 40)
        c = poisoned(40, 24)
        fn(transposed, b, c)
        assert_every_element(c, transposed.double() @ b.double().T, 2e-2)
    assert (counting_bind.calls, fn.warm_calls) == (2, 2)
    a, c = f16(40, 40, seed=9), poisoned(40, 24)
    fn(a, b, c)
    assert_every_element(c, a.double() @ b.double().T, 2e-2)
    assert (counting_bind.calls, fn.warm_calls) == (2, 3)


def test_tensor_changed_in_place_is_checked_again() -> None:
    """The signature is read from the tensors on each call, not remembered by identity."""
    fn = croqtile.compile(GEMM, filename="mm.co").mm
    a, b, c = GOOD()
    fn(a, b, c)
    fn(a, b, c)
    b.resize_(24, 41)
    assert "parameter 'b', dimension 1 (K): expected 40" in message(lambda: fn(a, b, c))


@pytest.mark.parametrize("mistake", ["float for int", "str for float", "bool for int",
                                     "1-d tensor for float"])
def test_scalar_mistakes_after_warm_calls(scale: croqtile.Module, mistake: str) -> None:
    x = torch.randn(64)
    args = {"float for int": (2.0, 1.5, True), "str for float": ("2", 1, True),
            "bool for int": (2.0, True, True),
            "1-d tensor for float": (torch.ones(1), 1, True)}[mistake]
    cold = croqtile.compile(SCALE, filename="scale.co").scale
    expected = message(lambda: cold(x, torch.empty(64), *args))
    warm = scale.scale
    warm(x, torch.empty(64), 2.0, 1, True)
    warm(x, torch.empty(64), 2.0, 1, True)
    assert message(lambda: warm(x, torch.empty(64), *args)) == expected


def test_runtime_checks_after_warm_calls() -> None:
    cold = croqtile.load(DATA / "assert_holds.co").squares
    warm = croqtile.load(DATA / "assert_holds.co").squares
    for _ in range(2):
        warm(torch.arange(32, dtype=torch.int32))
    for n in (30, 80):
        a = torch.arange(n, dtype=torch.int32)
        expected = message(lambda a=a: cold(a))
        assert "assertion" in expected
        assert message(lambda a=a: warm(a)) == expected


def test_remembered_signatures_are_bounded() -> None:
    fn = croqtile.compile(SCALE, filename="scale.co", cache_size=2).scale
    for n in (32, 64, 96, 32):
        x = torch.randn(n)
        y = poisoned(n, dtype=torch.float32)
        fn(x, y, 1.0, 0, False)
        assert_every_element(y, x.double(), 0.0)
        assert len(fn._warm) <= 2


# ---------------------------------------------------------------- the launcher


class StandInKernel:
    """Records GPU launches the way ``kernel[grid](*args, **options)`` is called; raises
    Triton's ``OutOfResources`` above ``fits`` stages, or ``fail`` when given."""

    def __init__(self, fits: int = 8, fail: Exception | None = None,
                 debug: bool = False) -> None:
        self.fits, self.fail, self.debug = fits, fail, debug
        self.launched: list[tuple[tuple[int, ...], tuple[Any, ...], dict[str, Any]]] = []
        self.__name__ = "stand_in_k0"

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def launch(*args: Any, **options: Any) -> None:
            from triton.runtime.errors import OutOfResources

            if self.fail is not None:
                raise self.fail
            if options["num_stages"] > self.fits:
                raise OutOfResources(1 << 20, 1 << 18, "shared memory")
            self.launched.append((grid, args, options))

        return launch


CUDA = torch.device("cuda", 0)  # only compared by type: nothing runs on a GPU


@pytest.fixture()
def no_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher_module, "_ensure_allocator", lambda: None)
    monkeypatch.setattr(launcher_module, "_current_device", lambda: 0)


class StandInCompiled(StandInKernel):
    """A stand-in whose launches return a compiled kernel, as Triton's ``kernel[grid]``
    does: later launches with the same specialisation go to it directly."""

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., Any]:
        record = super().__getitem__(grid)

        def launch(*args: Any, **options: Any) -> Any:
            record(*args, **options)
            return self.compiled

        return launch

    compiled = type("Compiled", (), {"run": None})()


def test_a_seen_specialisation_skips_tritons_argument_binding(
        no_allocator: None, monkeypatch: pytest.MonkeyPatch) -> None:
    direct: list[tuple[Any, tuple[int, ...], tuple[Any, ...]]] = []
    monkeypatch.setattr(launcher_module, "_launch_compiled",
                        lambda compiled, grid, args, device: direct.append((compiled, grid, args)))
    kernel, launch = StandInCompiled(), Launcher()
    x = torch.zeros(64)
    for args in [(x, 1, 2.0), (x, 1, 3.0), (x, 16, 2.0), (x[1:], 1, 2.0), (x, 1, 2.0)]:
        launch(kernel, (2,), args, num_warps=4, num_stages=3, device=CUDA)
    # Triton binds the first call of each specialisation: k == 1, k % 16 == 0, an
    # unaligned tensor; the float's value and a seen specialisation go straight through
    def shown(args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0].data_ptr() - x.data_ptr(),) + args[1:]

    assert [shown(a) for _, a, _ in kernel.launched] == [(0, 1, 2.0), (0, 16, 2.0), (4, 1, 2.0)]
    assert [(c, g, shown(a)) for c, g, a in direct] == [(kernel.compiled, (2,), (0, 1, 3.0)),
                                                        (kernel.compiled, (2,), (0, 1, 2.0))]
    assert launch.launches == 5


def test_specialisation_keys_follow_tritons_rules() -> None:
    key = launcher_module._specialisation
    x = torch.zeros(64)
    assert key((x,)) == key((torch.ones(64),)) != key((x[1:],))  # 16-byte alignment
    assert key((x,)) != key((x.half(),))
    assert key((1,)) != key((2,)) and key((2,)) == key((3,)) != key((32,))
    assert key((5,)) != key((2**31,)) != key((2**63,))
    assert key((1.0,)) == key((2.5,)) and key((True,)) != key((False,))


def test_specialisation_keys_of_host_descriptors() -> None:
    """Triton compiles a tensor descriptor argument for its element type and block shape;
    its shape and strides are passed at run time."""
    key = launcher_module._specialisation
    desc = Launcher().descriptor
    x, y = torch.zeros(64, 32), torch.ones(128, 64)
    assert key((desc(x, (64, 32), (32, 1), (16, 32)),)) == key((desc(y, (128, 64), (64, 1),
                                                                     (16, 32)),))
    assert key((desc(x, (64, 32), (32, 1), (16, 32)),)) != key((desc(x, (64, 32), (32, 1),
                                                                     (32, 32)),))
    assert key((desc(x, (64, 32), (32, 1), (16, 32)),)) != key((desc(x.half(), (64, 32),
                                                                     (32, 1), (16, 32)),))
    assert key((None,)) != key((desc(x, (64, 32), (32, 1), (16, 32)),))


def test_gpu_launches_pass_grid_args_and_options(no_allocator: None) -> None:
    kernel, launch = StandInKernel(), Launcher()
    for _ in range(3):
        launch(kernel, (2, 3), (1, 2.0), num_warps=4, num_stages=3, device=CUDA)
    assert kernel.launched == [((2, 3), (1, 2.0), {"num_warps": 4, "num_stages": 3})] * 3
    assert launch.launches == 3


def test_out_of_resources_retries_with_fewer_stages_once(no_allocator: None) -> None:
    kernel, launch = StandInKernel(fits=2), Launcher()
    for _ in range(2):
        launch(kernel, (1,), (), num_warps=8, num_stages=4, device=CUDA)
    assert [opts["num_stages"] for _, _, opts in kernel.launched] == [2, 2]


def test_nothing_fits_or_other_failures_raise_kernel_error(no_allocator: None) -> None:
    with pytest.raises(KernelError, match=r"'stand_in_k0' \(OutOfResources"):
        Launcher()(StandInKernel(fits=0), (1,), (), num_warps=4, num_stages=3, device=CUDA)
    launch, kernel = Launcher(), StandInKernel()
    launch(kernel, (1,), (), num_warps=4, num_stages=3, device=CUDA)
    kernel.fail = ValueError("bad argument")
    with pytest.raises(KernelError, match=r"\(ValueError: bad argument\)") as info:
        launch(kernel, (1,), (), num_warps=4, num_stages=3, device=CUDA)
    assert isinstance(info.value.__cause__, ValueError)


def test_debug_kernels_launch_without_overflow_checks(no_allocator: None) -> None:
    kernel, launch = StandInKernel(debug=True), Launcher()
    for _ in range(2):
        launch(kernel, (1,), (), num_warps=4, num_stages=2, device=CUDA)
    assert all(opts["sanitize_overflow"] is False for _, _, opts in kernel.launched)
    assert len(kernel.launched) == 2


def test_empty_grid_launches_nothing(no_allocator: None) -> None:
    kernel, launch = StandInKernel(), Launcher()
    launch(kernel, (0, 4), (), num_warps=4, num_stages=3, device=CUDA)
    assert kernel.launched == [] and launch.launches == 1


def test_allocator_is_set_once_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton keeps the allocator per context: a new thread needs it set again."""
    import contextvars
    import threading

    import triton

    set_in: list[str] = []
    monkeypatch.setattr(triton, "set_allocator", lambda alloc: set_in.append(
        threading.current_thread().name))
    monkeypatch.setattr(launcher_module, "_current_device", lambda: 0)
    kernel, launch = StandInKernel(), Launcher()

    def two_launches() -> None:
        for _ in range(2):
            launch(kernel, (1,), (), num_warps=4, num_stages=3, device=CUDA)

    contextvars.Context().run(two_launches)  # a fresh context, as a new thread has
    worker = threading.Thread(target=two_launches, name="worker")
    worker.start()
    worker.join()
    assert set_in == [threading.current_thread().name, "worker"]
    assert len(kernel.launched) == 4


def test_sm_count_on_cpu() -> None:
    launch = Launcher()
    assert launch.sm_count(torch.device("cpu")) == 4
    assert launch.sm_count("cpu") == 4


def test_sm_count_asks_once_per_cuda_device(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    class Properties:
        def __init__(self, index: int) -> None:
            asked.append(index)
            self.multi_processor_count = 132 if index == 0 else 78

    monkeypatch.setattr(launcher_module, "_SM_COUNTS", {})
    monkeypatch.setattr(torch.cuda, "get_device_properties", Properties)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    launch = Launcher()
    counts = [launch.sm_count(d) for d in ("cuda", torch.device("cuda", 0), "cuda:1",
                                           torch.device("cuda", 1))]
    assert counts == [132, 132, 78, 78]
    assert asked == [0, 1]


# ---------------------------------------------------------------- the benchmarks


def run_bench(script: str, *args: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "report.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.read_text())


def test_call_overhead_bench_cpu_mode(tmp_path: Path) -> None:
    report = run_bench("call_overhead.py", "--calls", "50", "--reps", "3", tmp_path=tmp_path)
    assert report["gpu_measured"] is torch.cuda.is_available()
    assert report["calls"] == 50 and report["reps"] == 3
    assert set(report["python_path"]) == {"seed_gemm_64", "scale_256"}
    for row in report["python_path"].values():
        assert row["croqtile_warm_us"] > 0 and row["host_function_us"] > 0
        assert row["bind_us"] > 0
        assert row["added_us"] == pytest.approx(row["croqtile_warm_us"]
                                                - row["host_function_us"])
    if not torch.cuda.is_available():
        assert report["gpu_path"] == {} and "need CUDA" in report["note"]


def test_compile_latency_bench(tmp_path: Path) -> None:
    report = run_bench("compile_latency.py", "--runs", "2", tmp_path=tmp_path)
    assert set(report["seeds"]) == {"seed000_sm86_gemm.co", "seed000_sm90_gemm.co",
                                    "seed000_sm90_gemm_2wg.co", "seed000_sm90_gemm_direct.co",
                                    "seed004_dma_matmul.co"}
    for row in report["seeds"].values():
        assert row["wall_ms"] > 0 and row["cpu_ms"] > 0 and row["runs"] == 2
        assert {"parse", "check", "lower", "codegen"} <= set(row["stages_ms"])


class FakeCudaTensor:
    """Just what ``Launcher.descriptor`` reads of a CUDA tensor."""

    is_cuda = True

    def __init__(self, address: int, dtype: torch.dtype = torch.float16) -> None:
        self.address, self.dtype = address, dtype

    def data_ptr(self) -> int:
        return self.address


def test_host_descriptors_of_cuda_tensors_are_remembered_without_the_tensor() -> None:
    desc = Launcher().descriptor
    first = desc(FakeCudaTensor(4096), (64, 32), (32, 1), (16, 32))
    assert desc(FakeCudaTensor(4096), (64, 32), (32, 1), (16, 32)) is first
    assert first.base.data_ptr() == 4096 and first.base.dtype is torch.float16
    assert not isinstance(first.base, FakeCudaTensor)  # the tensor is not kept alive
    # anything a descriptor holds makes another one
    for other in [desc(FakeCudaTensor(8192), (64, 32), (32, 1), (16, 32)),
                  desc(FakeCudaTensor(4096, torch.bfloat16), (64, 32), (32, 1), (16, 32)),
                  desc(FakeCudaTensor(4096), (64, 16), (32, 1), (16, 32)),
                  desc(FakeCudaTensor(4096), (64, 32), (48, 1), (16, 32)),
                  desc(FakeCudaTensor(4096), (64, 32), (32, 1), (32, 32))]:
        assert other is not first
    cpu = torch.zeros(64, 32)
    assert desc(cpu, (64, 32), (32, 1), (16, 32)).base is cpu  # the interpreter reads it


class FakeRun:
    """Triton's CUDA launcher of a compiled kernel, around ``launch`` (a stand-in for the
    C launcher, wrapped by Triton's own descriptor handling)."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid = launch_pdl = False

    def __init__(self, signature: dict[str, str], metas: list[Any]) -> None:
        from triton.backends.nvidia.driver import wrap_handle_tensordesc

        self.calls: list[tuple[Any, ...]] = []
        self.launch = wrap_handle_tensordesc(lambda *a: self.calls.append(a), signature, metas)


def test_descriptor_expansions_are_remembered_below_tritons_launcher(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches of a kernel taking host descriptors hand Triton's C launcher the same
    arguments its descriptor wrapper would, expanding each remembered descriptor once."""
    import triton.backends.nvidia.driver as driver

    expanded: list[Any] = []

    def expand(desc: Any, meta: Any) -> list[Any]:
        expanded.append(desc)
        return [("map", desc.base.data_ptr(), meta), *desc.shape, *desc.strides]

    monkeypatch.setattr(driver, "make_tensordesc_arg", expand)
    signature = {"x_ptr": "*fp16", "x_desc": "tensordesc<fp16[16, 32]>", "n": "i32",
                 "y_desc": "tensordesc<fp16[32, 32]>", "FLAG": "constexpr"}
    run = FakeRun(signature, ["meta x", "meta y"])
    described = launcher_module._Described.of(run)
    assert described is not None and described.positions == [1, 3]
    desc = Launcher().descriptor
    x_desc = desc(FakeCudaTensor(4096), (64, 32), (32, 1), (16, 32))
    y_desc = desc(FakeCudaTensor(8192), (64, 32), (32, 1), (32, 32))
    compiled = type("Compiled", (), {"function": 7, "packed_metadata": "packed"})()
    args = ("x", x_desc, 5, y_desc, True)
    run.launch(1, 2, 3, 99, 7, False, False, None, None, "packed", None, None, None, *args)
    tritons_own = run.calls.pop()
    for _ in range(3):
        described.launch(run, (1, 2, 3), 99, compiled, None, None, None, args)
        assert run.calls.pop() == tritons_own
    assert expanded == [x_desc, y_desc, x_desc, y_desc]  # Triton's call, then ours once


def test_other_launchers_are_called_as_they_are() -> None:
    plain = type("Run", (), {"launch": staticmethod(lambda *a: None),
                             "global_scratch_size": 0, "profile_scratch_size": 0})()
    assert launcher_module._Described.of(plain) is None  # no descriptor arguments
    run = FakeRun({"x_desc": "tensordesc<fp16[16, 32]>"}, ["meta"])
    run.global_scratch_size = 128  # scratch to allocate per launch: Triton's own path
    assert launcher_module._Described.of(run) is None


def test_remembered_descriptors_carry_their_specialisation() -> None:
    desc = Launcher().descriptor(FakeCudaTensor(4096), (64, 32), (32, 1), (16, 32))
    fresh = Launcher().descriptor(torch.zeros(64, 32, dtype=torch.float16), (64, 32), (32, 1),
                                  (16, 32))
    key = launcher_module._specialisation
    assert key((desc,)) == key((fresh,)) == (("desc", torch.float16, (16, 32), "zero"),)
