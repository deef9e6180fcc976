"""Every path runs on the device of its tensors: Triton launches with that CUDA device
current (and so on its current stream), tuning searches timed there, and a call whose
tensors are on two devices is an ``ArgumentError`` naming both. Stand-ins on the CPU;
the GPU tests at the end run on one GPU (side streams) or two (skipped with fewer)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import pytest
import torch

import croqtile
import croqtile.tuning.tuner
from croqtile.backends.triton import launcher as launcher_module
from croqtile.backends.triton.launcher import Launcher, device_scope

from .e2e.checks import DATA
from .test_api import GEMM
from .test_call_overhead import StandInCompiled, StandInKernel


class OnDevice(torch.Tensor):
    """A CPU tensor that reports a CUDA device (binding reads ``.device``)."""

    where: torch.device

    @staticmethod
    def of(t: torch.Tensor, device: str) -> OnDevice:
        fake = torch.Tensor._make_subclass(OnDevice, t)
        fake.where = torch.device(device)
        return fake

    @property  # type: ignore[override]
    def device(self) -> torch.device:
        return self.where


def test_tensors_on_two_devices_are_an_argument_error() -> None:
    fn = croqtile.compile(GEMM, filename="mm.co").mm
    a = OnDevice.of(torch.randn(8, 16).half(), "cuda:0")
    b = OnDevice.of(torch.randn(8, 16).half(), "cuda:1")
    c = OnDevice.of(torch.empty(8, 8).half(), "cuda:0")
    with pytest.raises(croqtile.ArgumentError) as err:
        fn(a, b, c)
    message = str(err.value)
    assert "mm(): parameter 'b' is on cuda:1 but 'a' is on cuda:0" in message
    assert ".to('cuda:0')" in message
    assert fn.launches == 0


class Devices:
    """Stands in for the CUDA runtime: the current device, switched by
    ``_select_device`` (recorded) and restored after its block."""

    def __init__(self) -> None:
        self.current = 0
        self.selected: list[int] = []

    @contextlib.contextmanager
    def select(self, index: int) -> Iterator[None]:
        self.selected.append(index)
        saved, self.current = self.current, index
        try:
            yield
        finally:
            self.current = saved


@pytest.fixture()
def devices(monkeypatch: pytest.MonkeyPatch) -> Devices:
    state = Devices()
    monkeypatch.setattr(launcher_module, "_ensure_allocator", lambda: None)
    monkeypatch.setattr(launcher_module, "_current_device", lambda: state.current)
    monkeypatch.setattr(launcher_module, "_select_device", state.select)
    return state


class Recording(StandInKernel):
    """Records the current device at each launch."""

    def __init__(self, devices: Devices) -> None:
        super().__init__()
        self.devices, self.on = devices, []

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        launch = super().__getitem__(grid)

        def run(*args: Any, **options: Any) -> None:
            self.on.append(self.devices.current)
            launch(*args, **options)

        return run


def test_launches_run_with_the_tensors_device_current(devices: Devices) -> None:
    kernel, launch = Recording(devices), Launcher()
    for index in (1, 0, 1, 1, 0):
        launch(kernel, (2,), (3,), num_warps=4, num_stages=2,
               device=torch.device("cuda", index))
    assert kernel.on == [1, 0, 1, 1, 0]
    assert devices.selected == [1, 1, 1]  # switched only away from the current device
    assert devices.current == 0  # and back after each launch


def test_compiled_kernels_are_kept_per_device(devices: Devices,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm path launches the kernel Triton compiled for that device, with it current
    (its stream is that device's current stream)."""
    direct: list[tuple[int, int]] = []
    monkeypatch.setattr(launcher_module, "_launch_compiled",
                        lambda compiled, grid, args, index: direct.append(
                            (index, devices.current)))
    kernel, launch = StandInCompiled(), Launcher()
    for index in (0, 1, 0, 1):
        launch(kernel, (2,), (3,), num_warps=4, num_stages=2,
               device=torch.device("cuda", index))
    assert len(kernel.launched) == 2  # one first launch per device
    assert direct == [(0, 0), (1, 1)]


def test_device_scope(devices: Devices) -> None:
    for device in (torch.device("cpu"), torch.device("cuda"), torch.device("cuda", 0)):
        with device_scope(device):
            assert devices.current == 0
    with device_scope(torch.device("cuda", 1)):
        assert devices.current == 1
    assert devices.current == 0 and devices.selected == [1]


def test_tuning_searches_on_the_tensors_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search (compiles, runs, timings) runs inside ``device_scope`` of the bound
    device; the choice is kept per GPU model."""
    scopes: list[Any] = []

    @contextlib.contextmanager
    def scope(device: Any) -> Iterator[None]:
        scopes.append(device)
        yield

    monkeypatch.setattr(croqtile.tuning.tuner, "device_scope", scope)
    mod = croqtile.load(DATA / "seed000_sm90_gemm.co", autotune="quick",
                        tunables=[{"num_warps": 4}, {"num_warps": 8}])
    fn = mod.matmul
    fn.timer, fn.cache, fn.verbose = (lambda run: run() or 1.0), False, False
    a, b = torch.randn(64, 32).half(), torch.randn(64, 32).half()
    c = torch.full((64, 64), float("nan")).half()
    fn(a, b, c)
    assert scopes == [torch.device("cpu")]
    want = a.double() @ b.double().T
    assert ((c.double() - want).abs().max() <= 2e-2 * want.abs().max()).item()


# ------------------------------------------------------------------------------- GPU


def _gemm() -> Any:
    return croqtile.load(DATA / "seed000_sm90_gemm.co").matmul


def _operands(m: int, n: int, k: int, device: str) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(m * 7 + n)
    a = torch.randn(m, k, generator=gen).half().to(device)
    b = torch.randn(n, k, generator=gen).half().to(device)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    return a, b, c


def _check(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    want = a.double().cpu() @ b.double().cpu().T
    got = c.double().cpu()
    assert bool(torch.isfinite(got).all())
    assert (got - want).norm() <= 1e-2 * want.norm()


@pytest.mark.gpu
def test_side_stream_runs_the_kernel_on_that_stream() -> None:
    fn = _gemm()
    a, b, c = _operands(256, 256, 128, "cuda")
    fn(a, b, torch.empty_like(c))  # (compiled and warm)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(400_000_000)  # (clock cycles: ~0.2 s of the side stream)
        fn(a, b, c)
    torch.cuda.current_stream().synchronize()  # the default stream has nothing queued
    assert bool(torch.isnan(c.cpu()).all()), "the kernel did not wait for its stream"
    side.synchronize()
    _check(a, b, c)


two_gpus = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                              reason="needs two CUDA devices")


@pytest.mark.gpu
@two_gpus
def test_second_device_while_the_first_is_current() -> None:
    fn = _gemm()
    torch.cuda.set_device(0)
    for m, n, k in [(256, 256, 128), (200, 136, 96)]:
        a, b, c = _operands(m, n, k, "cuda:1")
        fn(a, b, c)
        torch.cuda.synchronize(1)
        _check(a, b, c)
    assert torch.cuda.current_device() == 0


@pytest.mark.gpu
@two_gpus
@pytest.mark.parametrize("options", [{}, {"descriptors": "host"}, {"descriptors": False},
                                     {"backend": "cuda"}, {"persistent": True}])
def test_calls_alternating_devices(options: dict[str, Any]) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = croqtile.load(DATA / "seed000_sm90_gemm.co", **options).matmul
        for round_ in range(3):
            for index in (0, 1):
                with torch.cuda.device(1 - index):  # the other device is current
                    a, b, c = _operands(256 + 64 * round_, 256, 128, f"cuda:{index}")
                    fn(a, b, c)
                    torch.cuda.synchronize(index)
                    _check(a, b, c)


@pytest.mark.gpu
@two_gpus
def test_side_stream_on_the_second_device() -> None:
    fn = _gemm()
    a, b, c = _operands(256, 256, 128, "cuda:1")
    side = torch.cuda.Stream(device=1)
    with torch.cuda.device(1), torch.cuda.stream(side):
        fn(a, b, c)
    side.synchronize()
    _check(a, b, c)


@pytest.mark.gpu
@two_gpus
def test_real_tensors_on_two_devices_are_an_argument_error() -> None:
    a, b, c = _operands(64, 64, 32, "cuda:0")
    with pytest.raises(croqtile.ArgumentError, match="'b' is on cuda:1 but 'a' is on cuda:0"):
        _gemm()(a, b.to("cuda:1"), c)


@pytest.mark.gpu
@two_gpus
def test_tuning_on_the_second_device() -> None:
    mod = croqtile.load(DATA / "seed000_sm90_gemm.co", autotune="quick",
                        tunables=[{"num_warps": 4}, {"num_warps": 8}])
    fn = mod.matmul
    fn.cache, fn.verbose = False, False
    a, b, c = _operands(512, 512, 256, "cuda:1")
    fn(a, b, c)
    torch.cuda.synchronize(1)
    _check(a, b, c)
    assert fn.reports and fn.reports[-1].device == torch.cuda.get_device_name(1)
