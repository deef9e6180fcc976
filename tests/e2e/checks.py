"""Numeric checks shared by end-to-end tests: float64 references, poisoning, tolerances."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

DATA = Path(__file__).resolve().parent.parent / "data"

# every e2e test runs on the CPU (Triton's interpreter) and, where present, the GPU
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

# relative-norm tolerances by element type (arch 5)
TOLERANCE = {
    torch.float32: 1e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 2e-2,
    torch.float64: 1e-12,
}


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill with a value no correct kernel produces: NaN for floats, a sentinel for ints."""
    if t.dtype.is_floating_point:
        return t.fill_(float("nan"))
    return t.fill_(-123456789 if t.dtype in (torch.int32, torch.int64) else 77)


def random(shape: tuple[int, ...], dtype: torch.dtype, device: str | torch.device = "cpu",
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Fresh random inputs, never all zeros."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float32, generator=generator).to(dtype).to(device)
    return torch.randint(-10, 11, shape, dtype=dtype, generator=generator).to(device)


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype,
                 tolerance: float | None = None) -> float:
    """Every element written (no NaN/sentinel left) and relative error within tolerance.
    Integers must match exactly. Returns the relative error."""
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    out64 = out.detach().to("cpu", torch.float64)
    ref64 = ref.detach().to("cpu", torch.float64)
    if not dtype.is_floating_point:
        mismatch = (out64 != ref64).nonzero()
        assert mismatch.numel() == 0, (
            f"{mismatch.shape[0]} elements differ, first at {mismatch[0].tolist()}: "
            f"{out64[tuple(mismatch[0])].item()} != {ref64[tuple(mismatch[0])].item()}")
        return 0.0
    assert torch.isfinite(out64).all(), (
        f"{(~torch.isfinite(out64)).sum().item()} elements not written or not finite, "
        f"first at {(~torch.isfinite(out64)).nonzero()[0].tolist()}")
    err = ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item()
    tol = tolerance if tolerance is not None else TOLERANCE[dtype]
    assert err <= tol, f"relative error {err:.3g} exceeds {tol:g}"
    return err
