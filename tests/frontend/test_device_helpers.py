"""Device helpers: finding the file's ``__device__`` functions, inlining a ``call`` of one
(intrinsics renamed to built-ins, the member mask of a shuffle dropped), and the errors of
helpers, shuffles and ``__cpp__`` blocks, each at the user's call or statement. Also the
run-time integers that must be compile-time values (CQ0266)."""

from __future__ import annotations

import warnings

import pytest
import torch

import croqtile
from croqtile.frontend import syntax as ast
from croqtile.frontend.device_helpers import find_helpers
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.parser import parse_program
from croqtile.frontend.printer import format_function
from croqtile.frontend.source import Source, SourceMap
from croqtile.runtime.driver import check_source

from ..e2e.checks import line_of, only_error

HELPERS = """
// __device__ int commented(int x) { return x; }
const char* s = "__device__ int quoted(int x) { return x; }";
template <typename T>
__device__ __forceinline__ T SHFL(T var, int lane_mask, int width) {
  return __shfl_xor_sync(uint32_t(-1), var, lane_mask, width);
}
__device__ float declared(float x);
__device__ inline float loop(float x) { float r = x; return r; }
"""


def test_find_helpers_skips_comments_strings_and_declarations() -> None:
    found = {h.name: h for h in find_helpers(HELPERS, [])}
    assert set(found) == {"SHFL", "loop"}
    assert found["SHFL"].params == ("var", "lane_mask", "width")
    assert not found["SHFL"].problem
    body = HELPERS[found["SHFL"].start:found["SHFL"].end]
    assert body.startswith("__shfl_xor_sync(") and body.endswith(")")
    assert found["loop"].problem == "its body is not one 'return' of an expression"


def _program(text: str) -> ast.Program:
    reporter = Reporter(SourceMap.identity(Source(text, "t.co")))
    start = text.index("__co__")
    program = parse_program(text, [(start, len(text))], reporter)
    assert not reporter.errors
    return program


CALLS = HELPERS + """
__device__ float ABSV(float v) { return v < 0.0f ? -v : v; }
template <typename T, typename C>
__device__ T ADD(T* a, C b) { return atomicAdd(a, b); }

__co__ void f(global f32 [4, 32] x, global s32 [8] n) {
  parallel r by 4 : block
  parallel l by 32 : thread {
    f32 v = call SHFL(x.at(r, l), 1, 32);
    f32 a = call ABSV(v);
    call ADD(&n.at(l % 8), 1);
  }
}
"""


def _calls(program: ast.Program) -> list[ast.ExternCall]:
    return [n for n in ast.walk(program) if isinstance(n, ast.ExternCall)]


def test_calls_are_inlined_with_intrinsics_renamed() -> None:
    shfl, absv, add = sorted(_calls(_program(CALLS)), key=lambda c: c.span.start)
    assert isinstance(shfl.inlined, ast.CallExpr)
    assert shfl.inlined.name == "__shfl_xor_sync"
    assert shfl.inlined.args[0] is shfl.args[0]  # the mask is dropped, `var` substituted
    assert len(shfl.inlined.args) == 3
    assert isinstance(absv.inlined, ast.Ternary)
    assert isinstance(absv.inlined.other, ast.Ident) or isinstance(absv.inlined.then, ast.Unary)
    assert isinstance(add.inlined, ast.CallExpr) and add.inlined.name == "__atomic_add"
    assert isinstance(add.inlined.args[0], ast.Unary) and add.inlined.args[0].op == "&"


def test_inlined_calls_print_as_written() -> None:
    [fn] = _program(CALLS).functions
    text = format_function(fn)
    assert "call SHFL(x.at(r, l), 1, 32)" in text
    assert "call ADD(&n.at(l % 8), 1)" in text


def _compile_error(text: str) -> croqtile.Diagnostic:
    return only_error(text)


def test_an_unmapped_intrinsic_names_the_helper_and_the_intrinsic() -> None:
    text = """
__device__ float LOG2(float v) { return log2f(v); }
__co__ void f(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = call LOG2(x.at(p));
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0706"
    assert diag.message == ("the device helper 'LOG2' cannot be inlined: it calls 'log2f', "
                            "which has no Triton equivalent")
    assert (diag.line, diag.column) == (line_of(text, "call LOG2"), 15)


def test_a_helper_with_the_wrong_argument_count() -> None:
    text = """
__device__ float TWICE(float v) { return v * 2.0f; }
__co__ void f(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = call TWICE(x.at(p), 3);
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0706"
    assert diag.message.endswith("it takes 1 argument(s), the call passes 2")


def test_a_call_of_an_unknown_function_stays_unsupported() -> None:
    text = """
__co__ void f(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = call elsewhere(x.at(p));
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0701"
    assert "external calls ('call elsewhere')" in diag.message
    assert diag.line == line_of(text, "call elsewhere")


def test_a_shuffle_outside_a_thread_level_is_located_at_the_call() -> None:
    text = """
template <typename T>
__device__ T SWAP(T v) { return __shfl_xor_sync(0xffffffffu, v, 1); }
__co__ void f(global f32 [4, 32] x, global f32 [4, 32] y) {
  parallel {r, l} by [4, 32] : block
    y.at(r, l) = call SWAP(x.at(r, l));
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0707"
    assert diag.message.startswith("the device helper 'SWAP' shuffles ('__shfl_xor_sync') "
                                   "outside a ': thread' level")
    assert (diag.line, diag.column) == (line_of(text, "call SWAP"), 18)


def test_cpp_in_a_kernel_is_an_error() -> None:
    text = """
__co__ void f(global f32 [64] x) {
  parallel p by 64 {
    __cpp__("x[p] = 0;");
  }
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0708"
    assert diag.message == ("'__cpp__' inside a kernel is raw CUDA, which a Triton kernel "
                            "cannot run")
    assert (diag.line, diag.column) == (4, 5)


def test_cpp_on_the_host_is_skipped_with_a_warning() -> None:
    text = """
__co__ void f(global f32 [64] x, global f32 [64] y) {
  __cpp__("cudaStreamSynchronize(0); // a long line of host code that goes on");
  parallel p by 64
    y.at(p) = x.at(p) + 1.0f;
}
"""
    [diag] = check_source(text)
    assert diag.code == "CQ0709" and diag.severity == "warning"
    assert diag.message == ("the host '__cpp__' block is skipped (\"cudaStreamSynchronize(0); "
                            "// a long l...\"): host code runs in Python")
    assert (diag.line, diag.column) == (3, 3)
    with pytest.warns(croqtile.CompileWarning, match="CQ0709"):
        mod = croqtile.compile(text)
    x = torch.randn(64)
    y = torch.empty(64)
    mod.f(x, y)
    assert torch.equal(y, x + 1.0)


@pytest.mark.parametrize("decl, what", [
    ("local f32 [n] row;", "a dimension"),
])
def test_a_runtime_integer_where_a_constant_is_needed(decl: str, what: str) -> None:
    text = f"""
__co__ void f(global s32 [4] counts, global f32 [4, 64] y) {{
  parallel p by 4 : block {{
    s32 n = counts.at(p);
    {decl}
    y.at(p, 0) = 1.0f;
  }}
}}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0266"
    assert diag.message == (f"{what} must be known when the kernel is compiled, but 'n' is "
                            "an integer computed at run time")
    assert diag.line == line_of(text, decl)


def test_a_float_loop_bound_stays_cq0209() -> None:
    text = """
__co__ void f(global f32 [64] y) {
  parallel p by 64 {
    foreach k in [8.0f]
      y.at(p) = 1.0f;
  }
}
"""
    diag = _compile_error(text)
    assert diag.code == "CQ0209"
    assert diag.message == "a dimension must be an integer, got a scalar of type 'f32'"


def test_a_runtime_loop_bound_is_accepted() -> None:
    text = """
__co__ void f(global s32 [4] counts, global f32 [4, 64] y) {
  parallel p by 4 : block {
    s32 n = counts.at(p);
    foreach i in [cdiv(n, 4)]
      y.at(p, i) = 1.0f;
    foreach j in n
      y.at(p, 32 + j) = 2.0f;
  }
}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("error", croqtile.CompileWarning)
        croqtile.compile(text)
