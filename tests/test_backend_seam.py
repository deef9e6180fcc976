"""One backend seam (``backends/protocol.py``, ``backends/dispatch.py``): each target the
``backend`` option names implements the protocol, the driver asks them in order, and the
public package reaches a backend's plans through the protocol only."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile.backends import dispatch
from croqtile.backends.cuda.backend import CUDA, CudaPlan, GemmKernel
from croqtile.backends.cuda.match import GemmPlan
from croqtile.backends.ir.lower import FunctionLowering
from croqtile.backends.options import Options
from croqtile.backends.protocol import Backend, Kernel, Plan, Unsuitable
from croqtile.backends.reference import check_text

ROOT = Path(__file__).resolve().parent.parent
GEMM = (ROOT / "croqtile" / "bench" / "kernels" / "gemm.co").read_text()
SCALE = """
__co__ f32 [N] twice(f32 [N] x) {
  f32 [x.span] y;
  parallel i by N
    y.at(i) = x.at(i) * 2.0f;
  return y;
}
"""


def _lowered(text: str, options: Options):  # type: ignore[no-untyped-def]
    (fn,), _ = check_text(text)
    return FunctionLowering(fn, options).lower()


def test_every_backend_option_has_its_backends_and_they_implement_the_protocol() -> None:
    field = next(f for f in croqtile.Options.__dataclass_fields__.values() if f.name == "backend")
    named = set(typing.get_args(typing.get_type_hints(Options)["backend"]))
    assert named == set(dispatch.BACKENDS) and field.default == "triton"
    assert dispatch.asked(Options()) == ()  # Triton: the fallback every function has
    assert dispatch.asked(Options(backend="cuda")) == (CUDA,)
    assert isinstance(CUDA, Backend) and CUDA.name == "cuda"
    plan = CudaPlan(GemmPlan(0, 1, 2, "f16"))
    assert isinstance(plan, Plan) and dispatch.backend_of(plan) is CUDA
    assert isinstance(GemmKernel(plan.gemm, lambda a, b, out: None), Kernel)


def test_the_driver_asks_the_backends_of_the_option_in_order() -> None:
    options = Options(backend="cuda")
    assert dispatch.recognise(_lowered(GEMM, options), options) == CudaPlan(GemmPlan(0, 1, 2, "f16"))
    assert dispatch.recognise(_lowered(GEMM, Options()), Options()) is None
    with pytest.raises(Unsuitable, match="plain f16/bf16 GEMMs"):
        dispatch.recognise(_lowered(SCALE, options), options)
    fn = croqtile.compile(GEMM, backend="cuda").gemm
    assert fn.compiled.plan == CudaPlan(GemmPlan(0, 1, 2, "f16"))
    assert fn.cuda_source == fn.compiled.plan.source()
    assert croqtile.compile(GEMM).gemm.compiled.plan is None


def test_a_call_on_the_cpu_runs_the_triton_kernel() -> None:
    fn = croqtile.compile(GEMM, backend="cuda").gemm
    a, b = torch.randn(64, 32).half(), torch.randn(48, 32).half()
    out = torch.full((64, 48), float("nan"), dtype=torch.float16)
    fn(a, b, out)
    assert fn.launches == 1  # (the Triton kernel, in the interpreter)
    ref = a.double() @ b.double().T
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2


def test_the_public_package_reaches_backends_through_the_seam_only() -> None:
    """No module of ``croqtile/`` imports a target's own package (``backends.cuda``) or
    names one of its plan types: the driver and the calls go through ``backends.dispatch``
    and ``backends.protocol``."""
    offenders = []
    for path in sorted((ROOT / "croqtile").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = ([a.name for a in node.names]
                     if isinstance(node, (ast.Import, ast.ImportFrom)) else [])
            if (module or "").lstrip(".").startswith("backends.cuda") or any(
                    n.startswith(("croqtile.backends.cuda", "backends.cuda")) or n.endswith("Plan")
                    and n != "Plan" for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")  # type: ignore[attr-defined]
    assert not offenders, offenders
