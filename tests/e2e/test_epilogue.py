"""Epilogues after the K loop (scale, bias, activation, conversion) written element-wise
over the stored accumulator stay in registers and fuse into the output store: no
shared-memory or global round trip.

Every form a linear layer's epilogue takes is checked against a float64 reference on
poisoned outputs (shapes that are not tile multiples, f16 and bf16), and its generated
Triton is checked to keep the whole epilogue in registers, with the plain GEMM's K loop
and one store of the output. Forms whose reads a register tile cannot give (a transposing
read, an in-place update in sequential order) and epilogue loops under a branch that every
lane takes alike go through per-program scratch memory, and are correct."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch

import croqtile

from .checks import DEVICES, assert_close, poison

# (the interpreter computes with numpy, which warns of the infinities and NaN that some
# intermediate values reach on purpose: exp of a large argument, the log of a negative)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the tiles and the K loop of every kernel below: x [M, K] times w [N, K]^T into mc (f32)
TILES = """
#define TM 64
#define TN 64
#define TK 32
"""
K_LOOP = """
    mc = mma.fill.f32 0.0f;
    foreach {kk} in [cdiv(K, TK)] {
      xs = dma.copy x.subspan(TM, TK).at(bm, kk) => shared;
      ws = dma.copy w.subspan(TN, TK).at(bn, kk) => shared;
      parallel p by 1 : group-4 {
        ma = mma.load xs.data;
        mb = mma.load ws.data;
        mma.row.row mc, ma, mb;
      }
    }
"""
BLOCKS = "  parallel {bm, bn} by [cdiv(M, TM), cdiv(N, TN)] : block {"

LINEAR = TILES + """
__co__ void linear(global f16 [M, K] x, global f16 [N, K] w, global f32 [N] bias,
                   global f16 [M, N] y, f32 alpha) {
""" + BLOCKS + K_LOOP + """
    shared f32 [TM, TN] acc_s;
    mma.store mc, acc_s;
    shared f16 [TM, TN] out_s;
    foreach {i, j} in [TM, TN]
      out_s.at(i, j) = __to<f16>(__max(acc_s.at(i, j) * alpha + bias.at(bn # j), 0.0f));
    dma.copy out_s => y.subspan(TM, TN).at(bm, bn);
  }
}
"""


def _linear(device: str, persistent: bool) -> None:
    mod = croqtile.compile(LINEAR, persistent=persistent)
    gen = torch.Generator().manual_seed(11)
    for m, n, k in [(100, 70, 80), (64, 128, 32)]:
        x = torch.randn(m, k, generator=gen).half().to(device)
        w = torch.randn(n, k, generator=gen).half().to(device)
        bias = torch.randn(n, generator=gen).to(device)
        y = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
        mod.linear(x, w, bias, y, 0.5)
        ref = torch.relu((x.double() @ w.double().T) * 0.5 + bias.double())
        assert not torch.isnan(y).any()
        assert ((y.double() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("persistent", [False, True])
def test_bias_scale_relu_epilogue(persistent: bool) -> None:
    _linear("cpu", persistent)


@pytest.mark.gpu
@pytest.mark.parametrize("persistent", [False, True])
def test_bias_scale_relu_epilogue_gpu(persistent: bool) -> None:
    _linear("cuda", persistent)


def _kernel(text: str, name: str = "linear") -> str:
    return text[text.index(f"def {name}_k0"):text.index(f"def host_{name}")]


def test_the_epilogue_stays_in_registers_and_fuses_into_the_store() -> None:
    kernel = _kernel(croqtile.compile(LINEAR).linear.triton_source)
    # one store of the output (a descriptor store, or the masked fallback), no other memory
    assert kernel.count("y_desc.store(") == 1 and kernel.count("tl.store(") == 1
    assert "y_ptr +" not in kernel.split("out_s =")[0]  # y is never read
    epilogue = next(line for line in kernel.splitlines() if line.strip().startswith("out_s ="))
    assert "tl.maximum(((mc_out * alpha) + tl.load(bias_ptr" in epilogue
    assert epilogue.endswith(".to(tl.float16)")


# ------------------------------------------------------------------------ every form

# A linear layer y = epilogue(x @ w^T) with a column vector (bias), a row vector
# (rowscale) and a scalar (alpha); IN is the operand type, OUT the output type.
TEMPLATE = TILES + """
__co__ void linear(global IN [M, K] x, global IN [N, K] w, global f32 [N] bias,
                   global f32 [M] rowscale, global OUT [M, N] y, f32 alpha) {
""" + BLOCKS + K_LOOP + """
EPILOGUE
  }
}
"""

# the plain GEMM the epilogues are compared with: the accumulator converted and copied out
PLAIN = """
    shared OUT [TM, TN] out_s;
    mma.store mc, out_s;
    dma.copy out_s => y.subspan(TM, TN).at(bm, bn);
"""

# the f32 accumulator staged in shared memory, read element-wise by the forms below
STAGED = """
    shared f32 [TM, TN] acc_s;
    mma.store mc, acc_s;
"""
COPY_OUT = """
    dma.copy out_s => y.subspan(TM, TN).at(bm, bn);
"""

Reference = Callable[..., torch.Tensor]  # (acc, bias, rowscale, alpha, out dtype) -> y


@dataclass(frozen=True)
class Form:
    name: str
    epilogue: str
    reference: Reference


def _gelu(v: torch.Tensor) -> torch.Tensor:
    return 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def _branches(acc, bias, rowscale, alpha, dt):
    v = acc + bias
    v = torch.where(v < 0, v * 0.125, v)
    clamped = torch.where(v > 2, torch.full_like(v, 2.0), v)
    return torch.where(rowscale[:, None] > 0, clamped, -v)


FORMS = [
    Form("temporary_silu", STAGED + """
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] {
      v = acc_s.at(i, j) + bias.at(bn # j);
      out_s.at(i, j) = __to<OUT>(v / (1.0f + __exp(0.0f - v)));
    }
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: torch.nn.functional.silu(acc + bias)),
    Form("in_place_update", STAGED + """
    foreach {i, j} in [TM, TN]
      acc_s.at(i, j) = acc_s.at(i, j) * alpha + bias.at(bn # j);
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN]
      out_s.at(i, j) = __to<OUT>(acc_s.at(i, j) * rowscale.at(bm # i));
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: (acc * alpha + bias) * rs[:, None]),
    Form("several_statements", STAGED + """
    foreach {i, j} in [TM, TN] {
      acc_s.at(i, j) += bias.at(bn # j);
      acc_s.at(i, j) = __gelu(acc_s.at(i, j));
      acc_s.at(i, j) *= rowscale.at(bm # i);
    }
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(acc_s.at(i, j));
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: _gelu(acc + bias) * rs[:, None]),
    # staged in the output type, then updated in place: the update sees rounded values
    Form("staged_read_back", """
    shared OUT [TM, TN] out_s;
    mma.store mc, out_s;
    foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(__max(out_s.at(i, j) * alpha, 0.0f));
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: torch.relu(acc.to(dt).double() * alpha)),
    Form("straight_to_global", STAGED + """
    foreach {i, j} in [TM, TN]
      y.at(bm # i, bn # j) = __to<OUT>(__tanh(acc_s.at(i, j) * alpha + bias.at(bn # j))
                                       * rowscale.at(bm # i));
""", lambda acc, bias, rs, alpha, dt: torch.tanh(acc * alpha + bias) * rs[:, None]),
    Form("if_else_and_ternary", STAGED + """
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] {
      mutable f32 v = acc_s.at(i, j) + bias.at(bn # j);
      if (v < 0.0f) v = v * 0.125f;
      if (rowscale.at(bm # i) > 0.0f) out_s.at(i, j) = __to<OUT>(v > 2.0f ? 2.0f : v);
      else out_s.at(i, j) = __to<OUT>(0.0f - v);
    }
""" + COPY_OUT, _branches),
    # a condition every lane shares (a scalar parameter) masks the lanes all the same
    Form("uniform_if", STAGED + """
    foreach {i, j} in [TM, TN] {
      if (alpha > 0.0f) acc_s.at(i, j) = acc_s.at(i, j) * alpha;
      else acc_s.at(i, j) = acc_s.at(i, j) + bias.at(bn # j);
    }
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(acc_s.at(i, j));
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: acc * alpha if alpha > 0 else acc + bias),
    # a temporary rounded to f16, widened again by a C++-typed cast
    Form("conversions", STAGED + """
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] {
      f16 h = __to<f16>(acc_s.at(i, j));
      out_s.at(i, j) = __to<OUT>(__to<"float">(h) * alpha + bias.at(bn # j));
    }
""" + COPY_OUT, lambda acc, bias, rs, alpha, dt: acc.half().double() * alpha + bias),
]


def _source(epilogue: str, out: str = "f16", operands: str = "f16") -> str:
    return TEMPLATE.replace("EPILOGUE", epilogue).replace("OUT", out).replace("IN", operands)


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def _run_form(form: Form, out: str, device: str) -> None:
    dt = DTYPES[out]
    mod = croqtile.compile(_source(form.epilogue, out, out))
    gen = torch.Generator().manual_seed(5)
    # (tails in M and N, whole tiles, and a decode-like M of 16)
    for (m, n, k), alpha in [((100, 70, 80), 0.5), ((64, 128, 32), -0.75), ((16, 70, 40), 2.0)]:
        x = torch.randn(m, k, generator=gen).to(dt)
        w = torch.randn(n, k, generator=gen).to(dt)
        bias = torch.randn(n, generator=gen)
        rowscale = torch.randn(m, generator=gen)
        y = poison(torch.empty(m, n, dtype=dt, device=device))
        mod.linear(x.to(device), w.to(device), bias.to(device), rowscale.to(device), y, alpha)
        acc = x.double() @ w.double().T
        ref = form.reference(acc, bias.double(), rowscale.double(), alpha, dt)
        assert_close(y, ref, dt)


@pytest.mark.parametrize("out", ["f16", "bf16"])
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_epilogue_form(form: Form, out: str) -> None:
    _run_form(form, out, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("out", ["f16", "bf16"])
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_epilogue_form_gpu(form: Form, out: str) -> None:
    _run_form(form, out, "cuda")


def _frame(kernel: str, k: str = "kk") -> list[str]:
    """The persistent tile loop's header and the K loop (the ``for k`` statement and its
    body): what a GEMM's speed depends on."""
    lines = kernel.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"for {k} in"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
        end += 1
    return [line for line in lines if "for tile in" in line] + lines[start:end]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_epilogue_form_stays_in_registers(form: Form) -> None:
    """No scratch memory or barrier, the plain GEMM's K loop, warps and stages, the output
    written by one store (a descriptor store, or its pointer fallback) and never read."""
    text = croqtile.compile(_source(form.epilogue)).linear.triton_source
    plain = croqtile.compile(_source(PLAIN)).linear.triton_source
    kernel = _kernel(text)
    assert "scratch" not in text and "debug_barrier" not in kernel
    assert _frame(kernel) == _frame(_kernel(plain))
    assert any("for tile in" in line for line in _frame(kernel))  # (persistent)
    assert kernel.count("y_desc.store(") == 1 and kernel.count("tl.store(") == 1
    assert "tl.load(y_ptr" not in kernel
    launch = next(line for line in text.splitlines() if "launch(linear_k0" in line)
    plain_launch = next(line for line in plain.splitlines() if "launch(linear_k0" in line)
    assert launch.split("num_warps")[1] == plain_launch.split("num_warps")[1]


# ------------------------------------------------------------------------ read-back rounding

# the accumulator stored twice, in f32 and in STAGE: their difference is the rounding of the
# staging type, exactly (the inputs are multiples of 1/64, so the f32 sums are exact)
ROUNDING = STAGED + """
    shared STAGE [TM, TN] c_s;
    mma.store mc, c_s;
    foreach {i, j} in [TM, TN]
      y.at(bm # i, bn # j) = (acc_s.at(i, j) - c_s.at(i, j)) * 256.0f;
"""


def _exact(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randint(-64, 65, shape, generator=gen).double() / 64


def _rounding(stage: str, device: str) -> None:
    dt = DTYPES[stage]
    mod = croqtile.compile(_source(ROUNDING.replace("STAGE", stage), "f32"))
    gen = torch.Generator().manual_seed(3)
    m, n, k = 100, 70, 80
    x, w = _exact((m, k), gen), _exact((n, k), gen)
    y = poison(torch.empty(m, n, device=device))
    mod.linear(x.half().to(device), w.half().to(device), torch.randn(n).to(device),
               torch.randn(m).to(device), y, 1.0)
    acc = x @ w.T
    ref = (acc - acc.to(dt).double()) * 256
    assert (ref != 0).float().mean() > 0.5  # the rounding shows in most elements
    assert torch.equal(y.cpu().double(), ref)


@pytest.mark.parametrize("stage", ["f16", "bf16"])
def test_a_read_back_sees_the_staging_type(stage: str) -> None:
    _rounding(stage, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("stage", ["f16", "bf16"])
def test_a_read_back_sees_the_staging_type_gpu(stage: str) -> None:
    _rounding(stage, "cuda")


# ------------------------------------------------------------------------ math built-ins

# one output slice per built-in of the spec (4.9), of u = acc / 16 (exact): arguments kept
# inside each function's domain
BUILTINS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "__exp": ("__exp(u)", torch.exp),
    "__exp2f": ("__exp2f(u)", torch.exp2),
    "__expm1": ("__expm1(u)", torch.expm1),
    "__log": ("__log(__fabs(u) + 0.5f)", lambda u: torch.log(u.abs() + 0.5)),
    "__log1p": ("__log1p(__fabs(u))", lambda u: torch.log1p(u.abs())),
    "__pow": ("__pow(__fabs(u) + 0.5f, 1.5f)", lambda u: (u.abs() + 0.5) ** 1.5),
    "__sqrt": ("__sqrt(__fabs(u))", lambda u: u.abs().sqrt()),
    "__rsqrt": ("__rsqrt(__fabs(u) + 0.25f)", lambda u: torch.rsqrt(u.abs() + 0.25)),
    "__frcp_rn": ("__frcp_rn(__fabs(u) + 0.5f)", lambda u: 1 / (u.abs() + 0.5)),
    "__fabs": ("__fabs(u)", torch.abs),
    "__fmaf": ("__fmaf(u, 3.0f, 0.5f)", lambda u: u * 3 + 0.5),
    "__sin": ("__sin(u * 4.0f)", lambda u: torch.sin(u * 4)),
    "__cos": ("__cos(u * 4.0f)", lambda u: torch.cos(u * 4)),
    "__tan": ("__tan(u)", torch.tan),
    "__asin": ("__asin(u * 0.5f)", lambda u: torch.asin(u * 0.5)),
    "__acos": ("__acos(u * 0.5f)", lambda u: torch.acos(u * 0.5)),
    "__atan": ("__atan(u * 4.0f)", lambda u: torch.atan(u * 4)),
    "__atan2": ("__atan2(u, 0.25f - u)", lambda u: torch.atan2(u, 0.25 - u)),
    "__sinh": ("__sinh(u * 2.0f)", lambda u: torch.sinh(u * 2)),
    "__cosh": ("__cosh(u * 2.0f)", lambda u: torch.cosh(u * 2)),
    "__tanh": ("__tanh(u * 4.0f)", lambda u: torch.tanh(u * 4)),
    "__ceil": ("__ceil(u * 8.0f)", lambda u: torch.ceil(u * 8)),
    "__floor": ("__floor(u * 8.0f)", lambda u: torch.floor(u * 8)),
    "__round": ("__round(u * 8.0f)", lambda u: torch.sign(u) * torch.floor((u * 8).abs() + 0.5)),
    "__sign": ("__sign(u)", torch.sign),
    "__isfinite": ("__to<f32>(__isfinite(__log(u)))", lambda u: (u > 0).double()),
    "__max": ("__max(u, 0.125f)", lambda u: u.clamp(min=0.125)),
    "__min": ("__min(u, 0.125f)", lambda u: u.clamp(max=0.125)),
    "__gelu": ("__gelu(u * 4.0f)", lambda u: _gelu(u * 4)),
    "__sigmoid": ("__sigmoid(u * 4.0f)", lambda u: torch.sigmoid(u * 4)),
    "__softplus": ("__softplus(u * 4.0f)", lambda u: torch.nn.functional.softplus(u * 4)),
    "__alignup": ("__to<f32>(__alignup(__to<int>(__fabs(u) * 256.0f), 8))",
                  lambda u: torch.ceil(torch.trunc(u.abs() * 256) / 8) * 8),
    "__aligndown": ("__to<f32>(__aligndown(__to<int>(__fabs(u) * 256.0f), 8))",
                    lambda u: torch.floor(torch.trunc(u.abs() * 256) / 8) * 8),
}

MATH = TILES + """
__co__ void math(global f16 [M, K] x, global f16 [N, K] w, global f32 [F, M, N] ys) {
""" + BLOCKS + K_LOOP + STAGED + """
    foreach {i, j} in [TM, TN] {
      u = acc_s.at(i, j) * 0.0625f;
BODY
    }
  }
}
"""


def test_every_math_builtin_of_the_spec_is_covered() -> None:
    from croqtile.backends.ir import builtins

    assert set(BUILTINS) == set(builtins.SUPPORTED)


def _math_source() -> str:
    body = "\n".join(f"      ys.at({f}, bm # i, bn # j) = {expr};"
                     for f, (expr, _) in enumerate(BUILTINS.values()))
    return MATH.replace("BODY", body)


def _math_outputs(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    mod = croqtile.compile(_math_source())
    gen = torch.Generator().manual_seed(9)
    m, n, k = 100, 70, 80
    x, w = _exact((m, k), gen), _exact((n, k), gen)
    ys = poison(torch.empty(len(BUILTINS), m, n, device=device))
    mod.math(x.half().to(device), w.half().to(device), ys)
    return ys.cpu(), (x @ w.T) / 16


@pytest.fixture(scope="module")
def math_outputs() -> tuple[torch.Tensor, torch.Tensor]:
    return _math_outputs("cpu")


@pytest.mark.parametrize("name", list(BUILTINS))
def test_math_builtin_in_an_epilogue(name: str, math_outputs) -> None:
    ys, u = math_outputs
    assert 0 < u.abs().max() < 1.5  # (every argument inside its function's domain)
    index = list(BUILTINS).index(name)
    assert_close(ys[index], BUILTINS[name][1](u), torch.float32)


@pytest.mark.gpu
def test_math_builtins_in_an_epilogue_gpu() -> None:
    ys, u = _math_outputs("cuda")
    failed = []
    for index, (name, (_, reference)) in enumerate(BUILTINS.items()):
        try:  # (the GPU's fast f32 math: a looser tolerance)
            assert_close(ys[index], reference(u), torch.float32, 1e-4)
        except AssertionError as exc:
            failed.append(f"{name}: {exc}")
    assert not failed, "\n".join(failed)


def test_the_math_epilogue_stays_in_registers() -> None:
    kernel = _kernel(croqtile.compile(_math_source()).math.triton_source, "math")
    assert "scratch" not in kernel and "debug_barrier" not in kernel
    assert kernel.count("tl.store(") == len(BUILTINS)  # one store per output, nothing else


# ------------------------------------------------------------------------ scratch forms

# a transposing read: lane (i, j) needs the element another lane holds
TRANSPOSING = STAGED + """
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN]
      out_s.at(i, j) = __to<OUT>(acc_s.at(j, i) + bias.at(bn # j));
""" + COPY_OUT

# epilogue loops under a branch every lane takes alike: the branch writes the output tile
# on one path only, and reads the accumulator transposed on that path
BRANCHED = STAGED + """
    shared OUT [TM, TN] out_s;
    if (alpha > 0.0f) {
      foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(acc_s.at(j, i) * alpha);
    } else {
      foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(acc_s.at(i, j) + bias.at(bn # j));
    }
""" + COPY_OUT

# an in-place update in sequential order that reads elements written by earlier iterations
# (the lower triangle ends up mirrored onto the upper one): no lane-parallel form exists
SEQUENTIAL = STAGED + """
    foreach {i, j} in [TM, TN]
      acc_s.at(i, j) = acc_s.at(j, i) * 2.0f;
    shared OUT [TM, TN] out_s;
    foreach {i, j} in [TM, TN] out_s.at(i, j) = __to<OUT>(acc_s.at(i, j));
""" + COPY_OUT


def _tiled(acc: torch.Tensor, tile: int, update: Callable[[torch.Tensor], torch.Tensor]
           ) -> torch.Tensor:
    """``update`` applied to every tile x tile block of ``acc`` (zero-padded at the edge)."""
    m, n = acc.shape
    padded = torch.zeros(-(-m // tile) * tile, -(-n // tile) * tile, dtype=acc.dtype)
    padded[:m, :n] = acc
    for r in range(0, padded.shape[0], tile):
        for c in range(0, padded.shape[1], tile):
            padded[r:r + tile, c:c + tile] = update(padded[r:r + tile, c:c + tile].clone())
    return padded[:m, :n]


def _sequential_transpose(block: torch.Tensor) -> torch.Tensor:
    out = block.clone()
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = out[j, i] * 2
    return out


def _run_scratch(epilogue: str, tile: int, shape: tuple[int, int, int],
                 reference: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 device: str, alpha: float = 1.0) -> str:
    source = _source(epilogue).replace("#define TM 64", f"#define TM {tile}").replace(
        "#define TN 64", f"#define TN {tile}")
    mod = croqtile.compile(source)
    gen = torch.Generator().manual_seed(13)
    m, n, k = shape
    x = torch.randn(m, k, generator=gen).half()
    w = torch.randn(n, k, generator=gen).half()
    bias = torch.randn(n, generator=gen)
    y = poison(torch.empty(m, n, dtype=torch.float16, device=device))
    mod.linear(x.to(device), w.to(device), bias.to(device), torch.randn(m).to(device), y, alpha)
    assert_close(y, reference(x.double() @ w.double().T, bias.double()), torch.float16)
    return mod.linear.triton_source


@pytest.mark.parametrize("device", DEVICES)
def test_a_transposing_read_of_the_accumulator_goes_through_scratch(device: str) -> None:
    text = _run_scratch(TRANSPOSING, 64, (99, 69, 80),
                        lambda acc, bias: _tiled(acc, 64, lambda t: t.T) + bias, device)
    assert "acc_s_scratch" in text and "debug_barrier" in text


@pytest.mark.parametrize("device", DEVICES)
def test_a_sequential_in_place_update_goes_through_scratch(device: str) -> None:
    # (one partial tile: the sequential loop runs element by element in the interpreter)
    text = _run_scratch(SEQUENTIAL, 16, (13, 11, 40),
                        lambda acc, bias: _tiled(acc, 16, _sequential_transpose), device)
    assert "acc_s_scratch" in text and "for i in range" in text


@pytest.mark.parametrize("alpha", [0.5, -0.5])
@pytest.mark.parametrize("device", DEVICES)
def test_epilogue_loops_under_a_uniform_branch_go_through_scratch(device: str,
                                                                  alpha: float) -> None:
    def reference(acc: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return _tiled(acc, 64, lambda t: t.T) * alpha if alpha > 0 else acc + bias

    text = _run_scratch(BRANCHED, 64, (99, 69, 80), reference, device, alpha)
    kernel = _kernel(text)
    # the accumulator moves to scratch before the branch, on both paths
    assert kernel.index("tl.store(acc_s_scratch_ptr") < kernel.index("if (alpha > 0.0)")


# ------------------------------------------------------------------------ the bench GEMM

GEMM = Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co"

# linear + bias + SiLU on the bench GEMM's tiles (128 x 256): the f32 accumulator is staged,
# and the result goes straight to global memory (an f32 staging tile and an output tile
# together would pass the shared-memory budget the checker applies)
SILU = """
    shared f32 [TILE_M, TILE_N] acc_s;
    mma.store acc, acc_s;
    foreach {i, j} in [TILE_M, TILE_N] {
      v = acc_s.at(i, j) + bias.at(block_n # j);
      output.at(block_m # i, block_n # j) = __to<DT>(v / (1.0f + __exp(0.0f - v)));
    }
"""


def _bench_silu(dt: str = "f16") -> str:
    gemm = GEMM.read_text()
    store = gemm[gemm.index("    shared DT [TILE_M, TILE_N] output_s;"):gemm.rindex("  }\n}")]
    source = gemm.replace(store, SILU.lstrip("\n")).replace(
        "global DT [N, K] rhs,", "global DT [N, K] rhs, global f32 [N] bias,")
    assert source.count("bias") == 2
    return source.replace("#define DT f16", f"#define DT {dt}")


def test_a_bias_silu_epilogue_keeps_the_bench_gemm_kernel() -> None:
    """The bench GEMM with a bias and SiLU: the same tile loop, K loop, warps and stages as
    the plain GEMM, the same descriptor store of the output; only the bias load and the
    element-wise math are added."""
    text = croqtile.compile(_bench_silu()).gemm.triton_source
    plain = croqtile.compile(GEMM.read_text()).gemm.triton_source
    kernel, plain_kernel = _kernel(text, "gemm"), _kernel(plain, "gemm")

    assert _frame(kernel, "iv_k") == _frame(plain_kernel, "iv_k")
    assert kernel.count("output_desc.store(") == 1 and kernel.count("tl.store(") == 1
    assert kernel.count("tl.load(") == plain_kernel.count("tl.load(") + 1  # the bias
    assert "scratch" not in text and "debug_barrier" not in kernel
    launch = next(line for line in text.splitlines() if "launch(gemm_k0" in line)
    plain_launch = next(line for line in plain.splitlines() if "launch(gemm_k0" in line)
    assert "num_warps=8" in launch and launch.split("num_warps")[1] == plain_launch.split(
        "num_warps")[1]


def _run_bench_silu(dt: str, device: str) -> None:
    dtype = DTYPES[dt]
    mod = croqtile.compile(_bench_silu(dt))
    gen = torch.Generator().manual_seed(17)
    m, n, k = 200, 300, 136
    x = torch.randn(m, k, generator=gen).to(dtype)
    w = torch.randn(n, k, generator=gen).to(dtype)
    bias = torch.randn(n, generator=gen)
    y = poison(torch.empty(m, n, dtype=dtype, device=device))
    mod.gemm(x.to(device), w.to(device), bias.to(device), y)
    ref = torch.nn.functional.silu(x.double() @ w.double().T + bias.double())
    assert_close(y, ref, dtype)


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("device", DEVICES)
def test_a_bias_silu_epilogue_on_the_bench_gemm(dt: str, device: str) -> None:
    _run_bench_silu(dt, device)

