"""The public API contract: compile/load, Module and Function, argument errors, compile
errors rendered at the user's line, caching, package layout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import croqtile

GEMM = """
#define T 16
__co__ void mm(global f16 [M, K] a, global f16 [N, K] b, global f16 [M, N] c) {
  parallel {bm, bn} by [cdiv(M, T), cdiv(N, T)] : block {
    mc = mma.fill.f32 0.0f;
    foreach k in [cdiv(K, T)] {
      sa = dma.copy a.subspan(T, T).at(bm, k) => shared;
      sb = dma.copy b.subspan(T, T).at(bn, k) => shared;
      mma.row.row mc, sa.data, sb.data;
    }
    mma.store mc, c.subspan(T, T).at(bm, bn);
  }
}
"""

STATIC = """
__co__ s32 [4, 8] add(s32 [4, 8] x, s32 [4, 8] y, int k) {
  s32 [x.span] out;
  parallel {i, j} by [4, 8]
    out.at(i, j) = x.at(i, j) + y.at(i, j) + k;
  return out;
}
"""


@pytest.fixture(scope="module")
def gemm() -> croqtile.Module:
    return croqtile.compile(GEMM, filename="mm.co")


def f16(*shape: int) -> torch.Tensor:
    return torch.randn(shape).to(torch.float16)


def test_function_attributes_and_single_function_call(gemm: croqtile.Module) -> None:
    assert gemm.mm.params == ["a", "b", "c"]
    assert "@triton.jit" in gemm.mm.triton_source
    c = torch.empty(20, 24, dtype=torch.float16)
    a, b = f16(20, 40), f16(24, 40)
    gemm(a, b, c)  # one function: the module itself is callable
    ref = a.double() @ b.double().T
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-2


def test_unknown_function_name(gemm: croqtile.Module) -> None:
    with pytest.raises(AttributeError, match="no __co__ function named 'nope'.*mm"):
        _ = gemm.nope


def test_module_call_needs_exactly_one_function() -> None:
    mod = croqtile.compile(STATIC + STATIC.replace("add(", "add2("))
    with pytest.raises(TypeError, match="2 __co__ functions"):
        mod(torch.zeros(4, 8, dtype=torch.int32), torch.zeros(4, 8, dtype=torch.int32), 1)


@pytest.mark.parametrize("args, message", [
    (lambda: (f16(20, 40), f16(24, 40)), r"mm\(\) takes 3 argument\(s\) \(a, b, c\), got 2"),
    (lambda: (f16(20, 40).float(), f16(24, 40), f16(20, 24)),
     r"parameter 'a' expects dtype torch.float16 \(f16\), got torch.float32"),
    (lambda: (f16(20, 40, 1), f16(24, 40), f16(20, 24)),
     r"parameter 'a' expects rank 2, got a tensor of rank 3"),
    (lambda: (f16(20, 40), f16(24, 41), f16(20, 24)),
     r"parameter 'b', dimension 1 \(K\): expected 40 \(bound by 'a'\), got 41"),
    (lambda: (f16(20, 40), f16(24, 40), f16(1, 24).expand(20, 24)),
     r"parameter 'c' is written in place, but its elements share memory \(stride 0 along "
     r"dimension 0 of size 20"),
    (lambda: (f16(20, 40), f16(24, 40).to("meta"), f16(20, 24)),
     r"parameter 'b' is on meta but 'a' is on cpu"),
    (lambda: ([[1.0]], f16(24, 40), f16(20, 24)), r"parameter 'a' expects a torch.Tensor"),
])
def test_argument_errors(gemm: croqtile.Module, args, message: str) -> None:
    with pytest.raises(croqtile.ArgumentError, match=message) as info:
        gemm.mm(*args())
    assert isinstance(info.value, ValueError)


def test_static_dimension_and_scalar_errors() -> None:
    mod = croqtile.compile(STATIC)
    x = torch.zeros(4, 8, dtype=torch.int32)
    with pytest.raises(croqtile.ArgumentError, match=r"parameter 'y', dimension 1: expected 8, got 9"):
        mod(x, torch.zeros(4, 9, dtype=torch.int32), 1)
    with pytest.raises(croqtile.ArgumentError, match=r"parameter 'k' expects an integer"):
        mod(x, x, 1.5)


def test_second_call_compiles_nothing(gemm: croqtile.Module) -> None:
    fn = gemm.mm
    a, b, c = f16(20, 40), f16(24, 40), torch.empty(20, 24, dtype=torch.float16)
    fn(a, b, c)
    loads = fn.loads
    fn(a, b, c)
    assert fn.loads == loads == 1


def test_compile_error_shows_the_line_and_a_caret() -> None:
    src = "__co__ void f(global s32 [4] a) {\n  parallel i by 4\n    a.at(i) = y + 1;\n}\n"
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(src, filename="bad.co")
    err = info.value
    [diag] = err.diagnostics
    assert (diag.code, diag.severity, diag.line, diag.column) == ("CQ0201", "error", 3, 15)
    assert diag.message == "symbol 'y' is used before declaration"
    text = str(err)
    assert "--> bad.co:3:15" in text
    assert "    a.at(i) = y + 1;" in text
    assert "\n   |               ^\n" in text or text.rstrip().endswith("^")


def test_all_errors_of_a_compile_are_collected() -> None:
    src = "__co__ void f(s32 [4] a) {\n  x = y;\n  z = w;\n}\n"
    with pytest.raises(croqtile.CompileError) as info:
        croqtile.compile(src)
    assert [(d.code, d.line) for d in info.value.diagnostics] == [("CQ0201", 2), ("CQ0201", 3)]


def test_defines_override_source_constants() -> None:
    src = "#define W 4\n__co__ s32 [W] f(s32 [W] a) {\n  s32 [a.span] o;\n  parallel i by W\n" \
          "    o.at(i) = a.at(i) * 2;\n  return o;\n}\n"
    mod = croqtile.compile(src, defines={"W": 8})
    a = torch.arange(8, dtype=torch.int32)
    assert torch.equal(mod(a), a * 2)


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_wraps'"):
        croqtile.compile(STATIC, num_wraps=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_wraps'"):
        croqtile.load(Path(__file__).parent / "data" / "scale_add.co", num_wraps=4)


def test_load_reads_a_file(tmp_path) -> None:
    path = tmp_path / "k.co"
    path.write_text(STATIC)
    mod = croqtile.load(path)
    x = torch.ones(4, 8, dtype=torch.int32)
    assert torch.equal(mod.add(x, x, 3), x * 2 + 3)


def test_frontend_is_not_a_top_level_package(tmp_path) -> None:
    code = "import croqtile.frontend, croqtile.backends\n" \
           "try:\n    import frontend\nexcept ImportError:\n    pass\n" \
           "else:\n    raise SystemExit('frontend importable')\n" \
           "try:\n    import backends\nexcept ImportError:\n    pass\n" \
           "else:\n    raise SystemExit('backends importable')\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
