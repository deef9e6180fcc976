"""Numeric checks shared by end-to-end tests: float64 references, poisoning, tolerances,
and running one program through the reference interpreter and the Triton path."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest import mock

import pytest
import torch

import croqtile
from croqtile.backends.reference import Semantics, interpret_source

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


@contextmanager
def poisoned_empty() -> Iterator[None]:
    """``torch.empty`` returns poisoned memory: a buffer the host code makes without a
    fill (one its first kernel is proven to write in full) then shows any element a
    kernel leaves unwritten, as a poisoned argument does."""
    real = torch.empty

    def empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        return poison(real(*args, **kwargs))

    with mock.patch.object(torch, "empty", empty):
        yield


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


Inputs = Callable[[], list[Any]]
Reference = Callable[[list[Any]], torch.Tensor]


@dataclass(frozen=True)
class Case:
    """One program, how to make its inputs and what it must compute."""

    id: str
    source: str
    inputs: Inputs
    reference: Reference  # float64 (exact for integers); NaN marks elements left unwritten
    dtype: torch.dtype
    output: int | None = None  # index of the argument written in place; None: returned
    tolerance: float | None = None
    defines: dict[str, int] = field(default_factory=dict)
    semantics: Semantics = Semantics()  # how the interpreter fills what the spec leaves open
    function: str | None = None  # which function of a source with several


def run_both(case: Case, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
    """The outputs of the interpreter (on the CPU) and of the Triton path (on ``device``),
    and the inputs."""
    args = case.inputs()
    mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    theirs = [a.clone().to(device) if isinstance(a, torch.Tensor) else a for a in args]
    got = interpret_source(case.source, mine, case.defines, semantics=case.semantics,
                           function=case.function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        module = croqtile.compile(case.source, defines=case.defines)
    function = getattr(module, case.function) if case.function else module
    with poisoned_empty():
        triton = function(*theirs)
    if case.output is not None:
        assert got is None and triton is None
        got, triton = mine[case.output], theirs[case.output]
    if not isinstance(got, torch.Tensor):  # a scalar result
        got, triton = torch.tensor(got), torch.tensor(triton)
    return got, triton.cpu(), args


def check(case: Case, device: str = "cpu") -> None:
    """Interpreter and Triton path against the torch reference, and against each other."""
    got, triton, args = run_both(case, device)
    expected = case.reference(args)
    for out, ref in ((got, expected), (triton, expected), (got, triton.double())):
        close(out, ref, case.dtype, case.tolerance)


def close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype,
          tolerance: float | None) -> None:
    """``assert_close``; NaN in the reference marks elements that must stay unwritten
    (still NaN from the poisoning)."""
    unwritten = torch.isnan(ref)
    if not unwritten.any():
        assert_close(out, ref, dtype, tolerance)
        return
    assert torch.equal(torch.isnan(out.double()), unwritten), "written elements differ"
    assert_close(out[~unwritten], ref[~unwritten], dtype, tolerance)


def compile_clean(text: str, **defines: int) -> croqtile.Module:
    """Compile ``text``, turning any compile warning into a failure (the kernel is clean)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", croqtile.CompileWarning)
        return croqtile.compile(text, defines=defines or None)


def only_error(text: str) -> croqtile.Diagnostic:
    """The one error compiling ``text`` raises."""
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(text)
    [diag] = [d for d in info.value.diagnostics if d.severity == "error"]
    return diag


def line_of(text: str, fragment: str) -> int:
    """The 1-based number of the first line of ``text`` that contains ``fragment``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)
