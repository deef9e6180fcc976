"""backend="cuda": which functions the hand-written Hopper GEMM may replace (the matcher
on the lowered IR), the errors for the others, the fallback to the Triton kernel, the
nvcc build of the kernel, and (on a Hopper GPU) its results against float64."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile import settings
from croqtile.backends import dispatch
from croqtile.backends.cuda import backend as cuda_backend
from croqtile.backends.cuda import driver
from croqtile.backends.cuda.gemm import SOURCE, HopperGemm, hilbert_order, pick_width, unsupported
from croqtile.backends.cuda.backend import CudaPlan
from croqtile.backends.cuda.match import GemmPlan
from croqtile.backends.protocol import Toolchain, Unavailable
from croqtile.errors import CompileError

from ..e2e.checks import DATA, assert_close, poison, random
from .gemm_calls import assert_runs_triton_with_warning

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()


def _plan(source: str, defines: dict | None = None, **options: object) -> GemmPlan | None:
    mod = croqtile.compile(source, defines=defines, backend="cuda", **options)
    plan = mod.functions["gemm"].compiled.plan
    assert isinstance(plan, CudaPlan) and plan.blackwell is None
    return plan.gemm


@pytest.mark.parametrize("defines, options", [
    ({}, {}),
    ({}, {"persistent": False}),
    ({"DT": "bf16", "TILE_M": 64, "TILE_N": 128}, {}),
    ({"TILE_K": 32}, {"num_stages": 4, "group_m": 4}),
])
def test_the_bench_gemm_matches_at_any_tile_size(defines: dict, options: dict) -> None:
    dtype = "bf16" if defines.get("DT") == "bf16" else "f16"
    assert _plan(GEMM, defines, **options) == GemmPlan(0, 1, 2, dtype)


# Programs one edit away from the GEMM: each computes something else, or the same thing in
# a form the matcher does not prove, and must be refused, not run on the CUDA kernel.
NOT_GEMMS = {
    "f16 accumulator": ("mma.fill.f32 0.0f", "mma.fill.f16 0.0f"),
    "last K step skipped": ("[cdiv(K, TILE_K)]", "[cdiv(K, TILE_K) - 1]"),
    "lhs tile of the wrong row": ("lhs.subspan(TILE_M, TILE_K).at(block_m, iv_k)",
                                  "lhs.subspan(TILE_M, TILE_K).at(block_n, iv_k)"),
    "rhs tile of the wrong K step": ("rhs.subspan(TILE_N, TILE_K).at(block_n, iv_k)",
                                     "rhs.subspan(TILE_N, TILE_K).at(block_n, 0)"),
    "store at the wrong tile": ("output.subspan(TILE_M, TILE_N).at(block_m, block_n)",
                                "output.subspan(TILE_M, TILE_N).at(block_m, 0)"),
    # (the sparse matcher once stopped at an assertion when no loop followed the accumulator)
    "no K loop": ("foreach {iv_k} in [cdiv(K, TILE_K)] {", "iv_k = 0;\n    if (K > 0) {"),
}


@pytest.mark.parametrize("edit", sorted(NOT_GEMMS))
def test_a_program_that_is_not_the_plain_gemm_is_refused(edit: str) -> None:
    old, new = NOT_GEMMS[edit]
    assert old in GEMM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CompileError) as err:
            croqtile.compile(GEMM.replace(old, new), backend="cuda")
    text = str(err.value)
    assert "CQ0705" in text and "backend='cuda'" in text and "plain f16/bf16 GEMMs" in text
    croqtile.compile(GEMM.replace(old, new))  # a valid program for the Triton backend


@pytest.mark.parametrize("options", [{"stream_k": 2}, {"group_m": 1}, {"descriptors": False}])
def test_options_that_reshape_the_launch_are_refused_with_the_cuda_backend(options: dict) -> None:
    with pytest.raises(CompileError, match="CQ0705"):
        croqtile.compile(GEMM, backend="cuda", **options)


@pytest.mark.parametrize("program", ["seed000_sm90_gemm.co", "persistent_gemm.co",
                                     "scale_add.co"])
def test_other_programs_are_refused(program: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CompileError, match="backend='cuda'"):
            croqtile.load(DATA / program, backend="cuda")


def test_an_unknown_backend_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="backend='cud'"):
        croqtile.compile(GEMM, backend="cud")


def test_on_the_cpu_the_triton_kernel_runs() -> None:
    mod = croqtile.compile(GEMM, backend="cuda", defines={"TILE_M": 64, "TILE_N": 64})
    a, b = random((70, 40), torch.float16), random((36, 40), torch.float16)
    out = poison(torch.empty(70, 36, dtype=torch.float16))
    mod.gemm(a, b, out)
    assert_close(out, a.double() @ b.double().T, torch.float16)


def test_why_arguments_do_not_suit_the_kernel() -> None:
    a, b = torch.zeros(8, 8, dtype=torch.float16), torch.zeros(8, 8, dtype=torch.float16)
    assert unsupported(a, b, torch.zeros(8, 8, dtype=torch.float16)) == \
        "the tensors are not on a CUDA device"
    assert unsupported(a, b, torch.zeros(8, 9, dtype=torch.float16), device=False) == \
        "the shapes do not form a GEMM"
    assert unsupported(a, b.T, torch.zeros(8, 8, dtype=torch.float16), device=False) == \
        "a tensor is not a contiguous matrix"
    assert unsupported(a, b.float(), torch.zeros(8, 8), device=False) == \
        "the element type is not f16 or bf16 throughout"


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 7), (3, 5), (16, 16), (12, 16), (2, 40)])
def test_the_hilbert_order_visits_every_tile_once(rows: int, cols: int) -> None:
    order = hilbert_order(rows, cols)
    tiles = sorted(zip((order >> 16).tolist(), (order & 0xFFFF).tolist()))
    assert tiles == [(r, c) for r in range(rows) for c in range(cols)]


def test_the_hilbert_order_moves_one_tile_at_a_time_on_a_square() -> None:
    order = hilbert_order(16, 16)
    rows, cols = order >> 16, order & 0xFFFF
    steps = abs(rows[1:] - rows[:-1]) + abs(cols[1:] - cols[:-1])
    assert steps.tolist() == [1] * 255
    with pytest.raises(ValueError, match="grid of tiles"):
        hilbert_order(4, 1 << 16)


@pytest.mark.skipif(settings.nvcc() is None, reason="no nvcc on this machine")
def test_the_kernel_builds_with_nvcc_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cubin = driver.build(SOURCE, "90a", tmp_path, nvcc=settings.nvcc())
    assert cubin[:4] == b"\x7fELF"
    assert len(list((tmp_path / "cuda").glob("*.cubin"))) == 1

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("nvcc ran again for a cached kernel")

    monkeypatch.setattr(driver.subprocess, "run", no_build)  # (the version is remembered)
    assert driver.build(SOURCE, "90a", tmp_path, nvcc=settings.nvcc()) == cubin


@pytest.mark.parametrize("m, n, width", [
    (4096, 4096, 256),   # 256 tiles of 256 columns: 4 full waves of 66 clusters but the last
    (3072, 3072, 192),   # 144 wide tiles: the third wave 18 % full; 192 narrow: 91 %
    (8192, 8192, 256),   # the narrow tiles would save under 10 %
    (512, 6144, 192),    # 48 wide tiles (one wave, 73 %) against 64 narrow (97 %)
])
def test_the_tile_width_follows_the_waves(m: int, n: int, width: int) -> None:
    assert pick_width(m, n, clusters=66) == width


def test_a_missing_nvcc_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver.shutil, "which", lambda name: None)
    with pytest.raises(driver.CudaError, match="needs nvcc"):
        driver.build(SOURCE, "90a", tmp_path)


# ---- on a Hopper GPU -------------------------------------------------------------------

def _hopper() -> bool:
    return (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
            and shutil.which("nvcc") is not None)


SHAPES = [(256, 256, 64), (1000, 1032, 520), (130, 4096, 4096), (16, 512, 1024),
          (333, 264, 8), (2048, 2048, 2048), (4096, 4096, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_the_cuda_kernel_computes_the_gemm(m: int, n: int, k: int, dtype: torch.dtype) -> None:
    if not _hopper():
        pytest.skip("the CUDA GEMM needs a Hopper GPU and nvcc")
    name = "bf16" if dtype == torch.bfloat16 else "f16"
    fn = croqtile.compile(GEMM, backend="cuda", defines={"DT": name}).gemm
    a, b = random((m, k), dtype, "cuda"), random((n, k), dtype, "cuda")
    out = poison(torch.empty(m, n, dtype=dtype, device="cuda"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CUDA kernel runs: no fallback warning
        fn(a, b, out)
    assert fn.launches == 0  # no Triton launch
    assert_close(out, a.double() @ b.double().T, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(1000, 1032, 520), (333, 264, 8), (8192, 1024, 2048),
                                     (4096, 4096, 4096)])
def test_the_kernel_computes_the_gemm_in_hilbert_order(tmp_path: Path, m: int, n: int,
                                                       k: int) -> None:
    if not _hopper():
        pytest.skip("the CUDA GEMM needs a Hopper GPU and nvcc")
    gemm = HopperGemm(tmp_path, nvcc=settings.nvcc())
    gemm.order = "hilbert"
    for dtype in (torch.float16, torch.bfloat16):
        a, b = random((m, k), dtype, "cuda"), random((n, k), dtype, "cuda")
        for width in (256, 192):
            out = poison(torch.empty(m, n, dtype=dtype, device="cuda"))
            gemm(a, b, out, width)
            assert_close(out, a.double() @ b.double().T, dtype)


@pytest.mark.gpu
def test_arguments_the_kernel_cannot_take_run_on_triton() -> None:
    if not _hopper():
        pytest.skip("the CUDA GEMM needs a Hopper GPU and nvcc")
    fn = croqtile.compile(GEMM, backend="cuda").gemm
    assert_runs_triton_with_warning(fn, 128, 100, 64, "N must be multiples of 8|K and N")
    # a misaligned view of an otherwise suitable shape: the Triton kernel, per call
    base = random((128 * 64 + 1,), torch.float16, "cuda")
    shifted = base[1:].view(128, 64)
    b = random((128, 64), torch.float16, "cuda")
    out = poison(torch.empty(128, 128, dtype=torch.float16, device="cuda"))
    fn(shifted, b, out)
    assert_close(out, shifted.double() @ b.double().T, torch.float16)


# ---- the dispatch of calls (backends/dispatch.py), with stand-ins for the GPU -----------

PLAN = CudaPlan(GemmPlan(0, 1, 2, "f16"))


def _host(triton_host: object, args: tuple, plan: CudaPlan = PLAN) -> object:
    """The host function ``backends.dispatch`` gives calls like ``args`` on a CUDA device."""
    return dispatch.host(plan, "gemm", args, torch.device("cuda"), triton_host,
                         lambda: Toolchain(Path("unused")))

class _FakeGemm:
    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, ...]] = []

    def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        self.calls.append((a, b, out))


def _triton_host(calls: list[str]):
    def host(launcher: object, device: object, *values: object) -> str:
        calls.append("triton")
        return "triton"
    return host


def _operands(offset: int = 0) -> tuple[torch.Tensor, ...]:
    base = torch.zeros(64 * 32 + offset, dtype=torch.float16)
    a = base[offset:].view(64, 32)
    return a, torch.zeros(48, 32, dtype=torch.float16), torch.zeros(64, 48, dtype=torch.float16)


def test_suitable_calls_run_the_cuda_kernel_and_misaligned_ones_triton(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake, calls = _FakeGemm(), []
    monkeypatch.setattr(cuda_backend, "unsupported", lambda *a, **k: None)
    monkeypatch.setattr(cuda_backend, "load", lambda device, kind, toolchain: fake)
    host = _host(_triton_host(calls), _operands())
    args = _operands()
    assert host(None, None, *args, 64, 48, 32) is None
    assert len(fake.calls) == 1 and all(x is y for x, y in zip(fake.calls[0], args))
    assert host(None, None, *_operands(offset=1), 64, 48, 32) == "triton"  # 2-byte aligned
    assert calls == ["triton"] and len(fake.calls) == 1


@pytest.mark.parametrize("reason, kernel, message", [
    ("K and N must be multiples of 8", None, "K and N must be multiples of 8"),
    (None, "nvcc could not build gemm_sm90.cu", "could not be loaded: nvcc could not build"),
])
def test_calls_the_kernel_cannot_take_warn_once_and_run_triton(
        monkeypatch: pytest.MonkeyPatch, reason: str | None, kernel: str | None,
        message: str) -> None:
    calls: list[str] = []
    def load(device: object, kind: object, toolchain: object) -> object:
        raise Unavailable(f"the CUDA kernel could not be loaded: {kernel}")

    monkeypatch.setattr(cuda_backend, "unsupported", lambda *a, **k: reason)
    monkeypatch.setattr(cuda_backend, "load", load)
    monkeypatch.setattr(dispatch, "warned", set())
    triton_host = _triton_host(calls)
    with pytest.warns(RuntimeWarning, match=message):
        host = _host(triton_host, _operands())
    assert host is triton_host
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same reason again: no second warning
        assert _host(triton_host, _operands()) is triton_host
    # on the CPU the Triton kernel runs, silently: the kernels are CUDA's
    assert dispatch.host(PLAN, "gemm", _operands(), torch.device("cpu"), triton_host,
                         lambda: Toolchain(Path("unused"))) is triton_host


def test_strided_operands_are_copied_for_the_cuda_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel reads and writes contiguous matrices: a transposed rhs and a column
    slice of a bigger output reach it as contiguous copies, and the product lands in the
    caller's slice only."""
    class Product(_FakeGemm):
        def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
            super().__call__(a, b, out)
            out.copy_(a @ b.T)

    fake, calls = Product(), []
    monkeypatch.setattr(cuda_backend, "load", lambda device, kind, toolchain: fake)
    monkeypatch.setattr(cuda_backend, "unsupported", lambda *a, **k: None)
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(64, 32, generator=gen).half()
    weight = torch.randn(32, 48, generator=gen).half()  # [K, N]: rhs = weight.T is [N, K]
    wide = torch.full((64, 80), float("nan"), dtype=torch.float16)
    out = wide[:, 16:64]
    host = _host(_triton_host(calls), (a, weight.T, out))
    assert host(None, None, a, weight.T, out, 64, 48, 32) is None
    assert calls == [] and len(fake.calls) == 1
    assert all(t.is_contiguous() for t in fake.calls[0])
    assert torch.equal(fake.calls[0][1], weight.T.contiguous())
    assert torch.allclose(out.double(), a.double() @ weight.double(), rtol=1e-2, atol=5e-2)
    assert wide[:, :16].isnan().all() and wide[:, 64:].isnan().all()
