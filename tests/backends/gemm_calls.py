"""A check shared by the GPU tests of the hand-written GEMMs (backend="cuda")."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ..e2e.checks import assert_close, poison, random


def assert_runs_triton_with_warning(fn: Any, m: int, n: int, k: int, match: str) -> None:
    """Calling ``fn`` (a compiled GEMM) on f16 CUDA matrices of an m x n x k product warns
    with ``match``, launches its Triton kernel once, and computes the product."""
    a, b = random((m, k), torch.float16, "cuda"), random((n, k), torch.float16, "cuda")
    out = poison(torch.empty(m, n, dtype=torch.float16, device="cuda"))
    with pytest.warns(RuntimeWarning, match=match):
        fn(a, b, out)
    assert fn.launches == 1
    assert_close(out, a.double() @ b.double().T, torch.float16)
