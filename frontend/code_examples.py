"""One wrong program and its fix for every diagnostic code (the error-code reference).

``EXAMPLES[code]`` holds a minimal complete program that reports ``code``, the smallest
change that makes it compile, and the exact message the diagnostic carries; ``MEANINGS``
says in a sentence or two what each code means. A code no program can produce (an
internal compiler error) is listed in ``UNTRIGGERABLE`` with the reason instead of an
example. The tables are plain data: ``croqtile explain CODE`` prints them,
``croqtile.tools.errors_doc`` renders the documentation's error-code page from them, and
``tests/test_error_codes.py`` checks every example against the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import code_examples_s5000 as s5000


@dataclass(frozen=True, slots=True)
class Example:
    """``bad`` reports the code with ``message``; ``fixed`` compiles without errors.
    ``target`` is the GPU the checker assumes (None: the default, sm_90)."""

    bad: str
    fixed: str
    message: str
    target: str | None = None


EXAMPLES: dict[str, Example] = {
    # --- preprocessor
    "CQ0001": Example(
        bad="""\
#ifndef N
#define N 64

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#ifndef N
#define N 64
#endif

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="unterminated conditional directive: missing #endif",
    ),
    "CQ0002": Example(
        bad="""\
#define N 64
#endif

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#define N 64

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="#endif without a matching #if",
    ),
    "CQ0003": Example(
        bad="""\
#define 64 N

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#define N 64

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="malformed directive: #define expects a macro name",
    ),
    "CQ0004": Example(
        bad="""\
#define N 64
#if N % 16 ==
#define TILE 16
#endif

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#define N 64
#if N % 16 == 0
#define TILE 16
#endif

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="cannot evaluate #if expression: missing operand at end of expression",
    ),
    "CQ0005": Example(
        bad="""\
#define AXPY(a, x, y) ((a) * (x) + (y))

__co__ void axpy(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = AXPY(x.at(p), y.at(p));
}
""",
        fixed="""\
#define AXPY(a, x, y) ((a) * (x) + (y))

__co__ void axpy(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = AXPY(2.0f, x.at(p), y.at(p));
}
""",
        message="macro 'AXPY' expects 3 argument(s), got 2",
    ),
    "CQ0006": Example(
        bad="""\
#define TWICE(v) ((v) * 2.0f)

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = TWICE(x.at(p);
}
""",
        fixed="""\
#define TWICE(v) ((v) * 2.0f)

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = TWICE(x.at(p));
}
""",
        message="unterminated argument list for macro 'TWICE'",
    ),
    "CQ0007": Example(
        bad="#define S(v) ((v) + 1.0f)\n\n"
            "__co__ void add101(global f32 [64] x, global f32 [64] y) {\n"
            "  parallel p by 64\n"
            "    y.at(p) = " + "S(" * 101 + "x.at(p)" + ")" * 101 + ";\n}\n",
        fixed="#define S(v) ((v) + 1.0f)\n\n"
              "__co__ void add101(global f32 [64] x, global f32 [64] y) {\n"
              "  parallel p by 64\n"
              "    y.at(p) = x.at(p) + 101.0f;\n}\n",
        message="macro expansion of 'S' is too deep (recursive macro?)",
    ),
    "CQ0008": Example(
        bad="""\
#define N 64
#define N 128

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#define N 64
#undef N
#define N 128

__co__ void scale(global f32 [N] x, global f32 [N] y) {
  parallel p by N
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="macro 'N' redefined differently",
    ),
    "CQ0009": Example(
        bad="""\
/* y = 2 * x, one thread per element
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
/* y = 2 * x, one thread per element */
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="unterminated comment",
    ),
    "CQ0010": Example(
        bad="""\
#define A x.at(p) + x.at(p)
#define B A + A + A + A + A + A + A + A
#define C B + B + B + B + B + B + B + B
#define D C + C + C + C + C + C + C + C
#define E D + D + D + D + D + D + D + D
#define F E + E + E + E + E + E + E + E

__co__ void sum(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = F;
}
""",
        fixed="""\
#define A x.at(p) + x.at(p)
#define B A + A + A + A + A + A + A + A
#define C B + B + B + B + B + B + B + B
#define D C + C + C + C + C + C + C + C
#define E D + D + D + D + D + D + D + D
#define F x.at(p) * 65536.0f

__co__ void sum(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = F;
}
""",
        message=("macro expansion of 'F' produces too much text; macros are not expanded any "
                 "further"),
    ),
    # --- lexer and parser
    "CQ0101": Example(
        bad="""\
__co__ void mul(global f32 [64] x, global f32 [64] w, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) @ w.at(p);
}
""",
        fixed="""\
__co__ void mul(global f32 [64] x, global f32 [64] w, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * w.at(p);
}
""",
        message="unexpected character '@'",
    ),
    "CQ0102": Example(
        bad="""\
__co__ void scale(global f32 [N] x, global f32 [N] y) {
  assert(N % 64 == 0, "N must be a multiple of 64);
  parallel p by N / 64 : block, q by 64 : thread
    y.at(p # q) = x.at(p # q) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [N] x, global f32 [N] y) {
  assert(N % 64 == 0, "N must be a multiple of 64");
  parallel p by N / 64 : block, q by 64 : thread
    y.at(p # q) = x.at(p # q) * 2.0f;
}
""",
        message="unterminated string literal",
    ),
    "CQ0103": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 1e-3f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 0.001f;
}
""",
        message="malformed number literal '1e-3f'",
    ),
    "CQ0104": Example(
        bad="""\
__co__ void mask(global u64 [64] x, global u64 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) & 18446744073709551616u;
}
""",
        fixed="""\
__co__ void mask(global u64 [64] x, global u64 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) & 18446744073709551615u;
}
""",
        message="number literal '18446744073709551616u' does not fit in 64 bits",
    ),
    "CQ0110": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
  }
}
""",
        message="expected ';', found '}'",
    ),
    "CQ0111": Example(
        bad="""\
__co__ void halve(global f32 [N] x, global f32 [N / 2] y) {
  parallel p by N / 2
    y.at(p) = x.at(p * 2);
}
""",
        fixed="""\
__co__ void halve(global f32 [N] x, global f32 [H] y) {
  parallel p by H : block
    y.at(p) = x.at(p * 2);
}
""",
        message=("unexpected expression 'N / 2' in a parameter shape (write a constant, a name, "
                 "'?' or '??')"),
    ),
    "CQ0112": Example(
        bad="""\
void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="no __co__ function found in the source",
    ),
    "CQ0113": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
  }
}
""",
        message="unbalanced braces: the __co__ function 'scale' is never closed",
    ),
    "CQ0114": Example(
        bad="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.load.swiz<128>.evict_first x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.load.evict_first.swiz<128> x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="'.evict_first' must come before '.swiz'",
    ),
    "CQ0115": Example(
        bad="__co__ void deep(global s32 [64] y) {\n  parallel p by 64\n    y.at(p) = "
            + "(" * 400 + "p" + ")" * 400 + ";\n}\n",
        fixed="__co__ void deep(global s32 [64] y) {\n  parallel p by 64\n    y.at(p) = "
              + "(" * 100 + "p" + ")" * 100 + ";\n}\n",
        message="nesting is too deep (400 levels)",
    ),
    "CQ0116": Example(
        bad="""\
__co__ void copy(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        fixed="""\
__co__ void copy_all(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        message="'copy' is a reserved word and cannot be used as a name",
    ),
    # --- names, types, scalars
    "CQ0201": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(q) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="symbol 'q' is used before declaration",
    ),
    "CQ0202": Example(
        bad="""\
__co__ void add(global f32 [64] x, global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) + w.at(p);
}
""",
        fixed="""\
__co__ void add(global f32 [64] x, global f32 [64] w, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) + w.at(p);
}
""",
        message="symbol 'x' has been declared already",
    ),
    "CQ0203": Example(
        bad="""\
__co__ void count(global s32 [64, 8] x, global s32 [64] y) {
  parallel p by 64 {
    int n = 0;
    foreach k in [8]
      n = n + x.at(p, k);
    y.at(p) = n;
  }
}
""",
        fixed="""\
__co__ void count(global s32 [64, 8] x, global s32 [64] y) {
  parallel p by 64 {
    mutable int n = 0;
    foreach k in [8]
      n = n + x.at(p, k);
    y.at(p) = n;
  }
}
""",
        message="only mutable variables can be re-assigned ('n')",
    ),
    "CQ0204": Example(
        bad="""\
__co__ void fill(global s32 [64] y) {
  parallel p by 64 {
    int base;
    y.at(p) = base + p;
  }
}
""",
        fixed="""\
__co__ void fill(global s32 [64] y) {
  parallel p by 64 {
    int base = 100;
    y.at(p) = base + p;
  }
}
""",
        message="'base' is not initialised, expected an initial value for an immutable scalar",
    ),
    "CQ0205": Example(
        bad="""\
__co__ void add(global f16 [64] a, global bf16 [64] b, global f32 [64] c) {
  parallel p by 64
    c.at(p) = a.at(p) + b.at(p);
}
""",
        fixed="""\
__co__ void add(global f16 [64] a, global bf16 [64] b, global f32 [64] c) {
  parallel p by 64
    c.at(p) = __to<f32>(a.at(p)) + __to<f32>(b.at(p));
}
""",
        message="operator '+' cannot be applied to 'f16' and 'bf16'",
    ),
    "CQ0206": Example(
        bad="""\
__co__ void narrow(global f32 [64] x, global f16 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        fixed="""\
__co__ void narrow(global f32 [64] x, global f16 [64] y) {
  parallel p by 64
    y.at(p) = __to<f16>(x.at(p));
}
""",
        message="implicit conversion from 'f32' to 'f16' may lose precision",
    ),
    "CQ0207": Example(
        bad="""\
__co__ void reverse(global s32 [64] x, global s32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(#x - 1 - p);
}
""",
        fixed="""\
__co__ void reverse(global s32 [64] x, global s32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(#p - 1 - p);
}
""",
        message="'x' is not a bounded variable: '#' needs a parallel, foreach or with variable",
    ),
    "CQ0208": Example(
        bad="""\
__co__ void repeat(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    mutable f32 acc = 0.0f;
    foreach _ in [4]
      acc = acc + x.at(p);
    y.at(p) = acc;
  }
}
""",
        fixed="""\
__co__ void repeat(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    mutable f32 acc = 0.0f;
    foreach i in [4]
      acc = acc + x.at(p);
    y.at(p) = acc;
  }
}
""",
        message="'_' is not allowed as an iteration variable",
    ),
    "CQ0209": Example(
        bad="""\
__co__ void rowsum(global f32 [64, 8] x, global f32 [64] y) {
  parallel p by 64 {
    mutable f32 acc = 0.0f;
    foreach k in [8.0f]
      acc = acc + x.at(p, k);
    y.at(p) = acc;
  }
}
""",
        fixed="""\
__co__ void rowsum(global f32 [64, 8] x, global f32 [64] y) {
  parallel p by 64 {
    mutable f32 acc = 0.0f;
    foreach k in [8]
      acc = acc + x.at(p, k);
    y.at(p) = acc;
  }
}
""",
        message="a dimension must be an integer, got a scalar of type 'f32'",
    ),
    "CQ0266": Example(
        bad="""\
__co__ void firsts(global s32 [4] counts, global f32 [4, 64] x, global f32 [4, 64] y) {
  parallel p by 4 : block {
    s32 n = counts.at(p);
    local f32 [n] row;
    y.at(p, 0) = x.at(p, 0);
  }
}
""",
        fixed="""\
__co__ void firsts(global s32 [4] counts, global f32 [4, 64] x, global f32 [4, 64] y) {
  parallel p by 4 : block {
    s32 n = counts.at(p);
    foreach i in [n]
      y.at(p, i) = x.at(p, i);
  }
}
""",
        message="a dimension must be known when the kernel is compiled, but 'n' is an integer "
                "computed at run time",
    ),
    "CQ0210": Example(
        bad="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, j} by [x.span(1), x.span(2)] : block
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, j} by [x.span(0), x.span(1)] : block
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        message="index 2 is out of range for an mdspan of rank 2",
    ),
    "CQ0211": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
  return y;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="return statement with a value in void function 'scale'",
    ),
    "CQ0212": Example(
        bad="""\
__co__ f32 [64] scale(f32 [64] x) {
  f32 [x.span] y;
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ f32 [64] scale(f32 [64] x) {
  f32 [x.span] y;
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
  return y;
}
""",
        message="non-void function 'scale' has no return statement",
    ),
    "CQ0213": Example(
        bad="""\
__co__ void iota(global s32 [64, 64] y) {
  parallel p by 64 : block {
    foreach k in [64]
      y.at(p, k) = k.span(0);
  }
}
""",
        fixed="""\
__co__ void iota(global s32 [64, 64] y) {
  parallel p by 64 : block {
    foreach k in [64]
      y.at(p, k) = #k;
  }
}
""",
        message="'k' is a bounded integer (bound 64); it cannot be used with .span",
    ),
    "CQ0214": Example(
        bad="""\
__co__ void copy4(global f4_e2m1 [64] x, global f4_e2m1 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        fixed="""\
__co__ void copy4(global u8 [64] x, global u8 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        message="the element type 'f4_e2m1' has no torch or Triton equivalent",
    ),
    "CQ0215": Example(
        bad="""\
#define WARPS 0

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 / WARPS
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
#define WARPS 1

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 / WARPS
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="division by zero in a constant expression",
    ),
    "CQ0216": Example(
        bad="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  ituple<2> tile = [16, 32];
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    t = dma.copy x.subspan(tile(0), tile(1)).at(i, j) => shared;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        fixed="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  ituple<2> tile = {16, 32};
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    t = dma.copy x.subspan(tile(0), tile(1)).at(i, j) => shared;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        message="ituple must be initialised with '{' and '}'",
    ),
    "CQ0217": Example(
        bad="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  mdspan<2> tile = [16, 32];
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    shared f32 [tile] t;
    dma.copy x.subspan(tile(0), tile(1)).at(i, j) => t;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        fixed="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  mdspan<2> tile : [16, 32];
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    shared f32 [tile] t;
    dma.copy x.subspan(tile(0), tile(1)).at(i, j) => t;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        message="mdspan must be initialised with ':'",
    ),
    "CQ0218": Example(
        bad="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  mdspan<2> tile : [16, 32, 1];
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    shared f32 [tile] t;
    dma.copy x.subspan(tile(0), tile(1)).at(i, j) => t;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        fixed="""\
__co__ void tiles(global f32 [64, 64] x, global f32 [64, 64] y) {
  mdspan<2> tile : [16, 32];
  parallel {i, j} by [64 / tile(0), 64 / tile(1)] : block {
    shared f32 [tile] t;
    dma.copy x.subspan(tile(0), tile(1)).at(i, j) => t;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        message="'tile' is declared as mdspan<2> but initialised as mdspan<3>",
    ),
    "CQ0219": Example(
        bad="""\
__co__ void scale(shared f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="the shared storage cannot be used for a parameter",
    ),
    # --- shapes and views
    "CQ0301": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(p) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="data rank (2) must match the number of tiling factors (1)",
    ),
    "CQ0302": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 128 : block {
    t = dma.copy x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 16 : block {
    t = dma.copy x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="tiling factor exceeds data size (128 > 64) in dimension 0",
    ),
    "CQ0313": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunk(0, 1).at(p, 0) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunk(4, 1).at(p, 0) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="the tiling factor of dimension 0 must be positive, got 0",
    ),
    "CQ0314": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y, int n) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(n, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y, int n) {
  parallel p by 4 : block {
    t = dma.copy x.chunk(4, 1).at(n % 4, 0) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="'n' is not a bounded variable: chunkat tiles by the bounds of parallel, "
                "foreach or with indices",
    ),
    "CQ0303": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.subspan(16, 64).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 32).at(p, 0);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.subspan(16, 32).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 32).at(p, 0);
  }
}
""",
        message="subspan too large for dimension 1 (64 > 32)",
    ),
    "CQ0304": Example(
        bad="""\
__co__ void last_tile(global f32 [64] x, global f32 [16] y) {
  parallel p by 1 : block {
    t = dma.copy x.subspan(16).at(4) => shared;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void last_tile(global f32 [64] x, global f32 [16] y) {
  parallel p by 1 : block {
    t = dma.copy x.subspan(16).at(3) => shared;
    dma.copy t => y;
  }
}
""",
        message="index out of bounds for dimension 0 (4 >= 4)",
    ),
    "CQ0305": Example(
        bad="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, j} by [16, 64] : block
    y.at(i, j) = x.at(i) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, j} by [16, 64] : block
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        message="'x' has rank 2 but the access gives 1 index values",
    ),
    "CQ0306": Example(
        bad="""\
#define TILE 16
#define HALO 0

__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    shared f32 [TILE * HALO] t;
    dma.copy x.chunkat(p) => t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        fixed="""\
#define TILE 16
#define HALO 1

__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    shared f32 [TILE * HALO] t;
    dma.copy x.chunkat(p) => t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        message="the mdspan size '0' is invalid: dimensions must be positive",
    ),
    "CQ0308": Example(
        bad="""\
__co__ void flat(global f32 [16, 32] x, global f32 [512] y) {
  parallel p by 1 : block {
    t = dma.copy x.span_as([256]) => shared;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void flat(global f32 [16, 32] x, global f32 [512] y) {
  parallel p by 1 : block {
    t = dma.copy x.span_as([512]) => shared;
    dma.copy t => y;
  }
}
""",
        message="cannot apply span_as to reshape [16, 32] (512) to [256] (256)",
    ),
    "CQ0309": Example(
        bad="""\
__co__ void tiles(global f32 [64, 32] x, global f32 [64, 32] y) {
  tile : x.span / {4, 2, 1};
  parallel {i, j} by [4, 2] : block {
    t = dma.copy x.subspan(tile(0), tile(1)).at(i, j) => shared;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        fixed="""\
__co__ void tiles(global f32 [64, 32] x, global f32 [64, 32] y) {
  tile : x.span / {4, 2};
  parallel {i, j} by [4, 2] : block {
    t = dma.copy x.subspan(tile(0), tile(1)).at(i, j) => shared;
    dma.copy t => y.subspan(tile(0), tile(1)).at(i, j);
  }
}
""",
        message="in operation '/': dimension inconsistent (2 vs. 3)",
    ),
    "CQ0310": Example(
        bad="""\
__co__ void stage(global f32 [N] x, global f32 [N] y) {
  parallel p by cdiv(N, 16) : block {
    t = dma.copy x.chunkat(p) => shared;
    dma.copy t => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [N] x, global f32 [N] y) {
  parallel p by cdiv(N, 16) : block {
    t = dma.copy x.subspan(16).at(p) => shared;
    dma.copy t => y.subspan(16).at(p);
  }
}
""",
        message=("chunkat over a cdiv bound tiles dimension(s) 0 (size N) by 16 with a masked "
                 "last tile; the literal rule (size / bound) tiles differently when the tile "
                 "does not divide the size"),
    ),
    "CQ0311": Example(
        bad="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.subspan(16).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 32).at(p, 0);
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [64, 32] x, global f32 [64, 32] y) {
  parallel p by 4 : block {
    t = dma.copy x.subspan(16, 32).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 32).at(p, 0);
  }
}
""",
        message="subspan expects 2 values, got 1",
    ),
    "CQ0317": Example(
        bad="""\
__co__ void rows(global f32 [8, 16] x, global f32 [8, 16] y) {
  parallel p by 8 : block {
    t = dma.copy x.chunkat(p, _).sqz() => shared;
    dma.copy t => y.subspan(1, 16).at(p, 0).sqz();
  }
}
""",
        fixed="""\
__co__ void rows(global f32 [8, 16] x, global f32 [8, 16] y) {
  parallel p by 8 : block {
    t = dma.copy x.subspan(1, 16).at(p, 0).sqz() => shared;
    dma.copy t => y.subspan(1, 16).at(p, 0).sqz();
  }
}
""",
        message="'.sqz()' needs a '.subspan', '.view' or '.span_as' before it in the view chain",
    ),
    "CQ0312": Example(
        bad="""\
__co__ f32 [64] downsample(f32 [128] x) {
  f32 [32] y;
  parallel p by 64
    y.at(p) = x.at(p * 2);
  return y;
}
""",
        fixed="""\
__co__ f32 [64] downsample(f32 [128] x) {
  f32 [64] y;
  parallel p by 64
    y.at(p) = x.at(p * 2);
  return y;
}
""",
        message="'y' has shape [32], expected [64]",
    ),
    # --- DMA and TMA
    "CQ0401": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f16 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="DMA element types differ: 'from' is f32, 'to' is f16",
    ),
    "CQ0402": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [1024] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="DMA rank mismatch between 'from' and 'to': 2 != 1",
    ),
    "CQ0403": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [64, 16] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="DMA shapes are inconsistent: 'from' is [16, 64], 'to' is [64, 16]",
    ),
    "CQ0404": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [8, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="DMA to-buffer is too small (1024 > 512 elements)",
    ),
    "CQ0405": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  t = dma.copy x => shared;
  parallel p by 1 : block
    dma.copy t => y;
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 1 : block {
    t = dma.copy x => shared;
    dma.copy t => y;
  }
}
""",
        message="'shared' cannot be a DMA destination outside a parallel block",
    ),
    "CQ0406": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    t = dma.load x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="'.load' is a TMA-only operation",
    ),
    "CQ0407": Example(
        bad="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = dma.copy.swiz<256> x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = dma.copy.swiz<128> x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="swizzle value must be 128, 64 or 32 (got 256)",
    ),
    "CQ0408": Example(
        bad="""\
__co__ void transpose(global f32 [64, 32] x, global f32 [32, 64] y) {
  parallel p by 1 : block {
    t = dma.transp<1, 0, 2> x => shared;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void transpose(global f32 [64, 32] x, global f32 [32, 64] y) {
  parallel p by 1 : block {
    t = dma.transp<1, 0> x => shared;
    dma.copy t => y;
  }
}
""",
        message="the transpose configuration has 3 entries but the data has rank 2",
    ),
    "CQ0409": Example(
        bad="""\
__co__ void transpose(global f32 [64, 32] x, global f32 [32, 64] y) {
  parallel p by 1 : block {
    t = dma.transp<1, 2> x => shared;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void transpose(global f32 [64, 32] x, global f32 [32, 64] y) {
  parallel p by 1 : block {
    t = dma.transp<1, 0> x => shared;
    dma.copy t => y;
  }
}
""",
        message="the transpose layout <1, 2> is not a permutation of 0..1",
    ),
    "CQ0410": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(p) => shared;
    parallel q by 16 : thread
      y.at(p # q) = p.data.at(q);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    t = dma.copy x.chunkat(p) => shared;
    parallel q by 16 : thread
      y.at(p # q) = t.data.at(q);
  }
}
""",
        message="'p' is not a DMA future",
    ),
    "CQ0411": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    shared f32 [16] t;
    dma.copy.async x.chunkat(p) => t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    shared f32 [16] t;
    f = dma.copy.async x.chunkat(p) => t;
    wait f;
    dma.copy t => y.chunkat(p);
  }
}
""",
        message="asynchronous DMA must be bound to a named future",
    ),
    "CQ0412": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy x.chunkat(p) => shared;
    wait f;
    dma.copy f => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy x.chunkat(p) => shared;
    dma.copy f => y.chunkat(p);
  }
}
""",
        message="non-async future 'f' cannot be waited",
    ),
    "CQ0413": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy.async x.chunkat(p) => shared;
    dma.copy f => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy.async x.chunkat(p) => shared;
    wait f;
    dma.copy f => y.chunkat(p);
  }
}
""",
        message="some async futures are never waited: f",
    ),
    "CQ0414": Example(
        bad="""\
__co__ void copy_rows(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    tma.load x.chunkat(p, _) => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void copy_rows(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.load x.chunkat(p, _) => shared;
    tma.copy t => y.chunkat(p, _);
  }
}
""",
        message="TMA copies move data between global and shared memory only (got global -> global)",
    ),
    "CQ0415": Example(
        bad="""\
__co__ void ragged(global f16 [64, 64] x, global s32 [4] rows, global f16 [64, 64] y) {
  parallel p by 4 : block {
    int n = rows.at(p);
    t = tma.load x.subspan(n, 64).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 64).at(p, 0);
  }
}
""",
        fixed="""\
__co__ void ragged(global f16 [64, 64] x, global s32 [4] rows, global f16 [64, 64] y) {
  parallel p by 4 : block {
    int n = rows.at(p);
    t = tma.load x.subspan(16, 64).at(p, 0) => shared;
    dma.copy t => y.subspan(16, 64).at(p, 0);
  }
}
""",
        message=("the TMA box shape must be computable on the host; 'n' is a value computed in "
                 "the kernel"),
    ),
    "CQ0417": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy.async x.chunkat(p) => shared;
    wait f;
    wait f;
    dma.copy f => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy.async x.chunkat(p) => shared;
    wait f;
    dma.copy f => y.chunkat(p);
  }
}
""",
        message="the async future 'f' is waited twice",
    ),
    "CQ0418": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    next = dma.any;
    f = dma.copy x.chunkat(p) => shared;
    dma.copy f => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy x.chunkat(p) => shared;
    dma.copy f => y.chunkat(p);
  }
}
""",
        message="dma.any 'next' is defined but never used",
    ),
    "CQ0419": Example(
        bad="""\
__co__ void pingpong(global f32 [64] x, global f32 [64] y) {
  parallel p by 1 : block {
    shared f32 [16] spare;
    cur = dma.copy.async x.subspan(16).at(0) => shared;
    foreach k in [4] {
      wait cur;
      dma.copy cur => y.subspan(16).at(k);
      swap(cur, spare);
    }
  }
}
""",
        fixed="""\
__co__ void pingpong(global f32 [64] x, global f32 [64] y) {
  parallel p by 1 : block {
    with k in [4] {
      cur = dma.copy.async x.subspan(16).at(0) => shared;
      nxt = dma.any;
      foreach k(1:) {
        nxt = dma.copy.async x.subspan(16).at(k) => shared;
        wait cur;
        dma.copy cur => y.subspan(16).at(k - 1);
        swap(cur, nxt);
      }
      wait cur;
      dma.copy cur => y.subspan(16).at(3);
    }
  }
}
""",
        message="cannot swap 'cur' and 'spare': 'cur' is a future, 'spare' a spanned data",
    ),
    "CQ0420": Example(
        bad="""\
__co__ void pick(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    a = dma.copy x.chunkat(p) => shared;
    b = dma.copy x.chunkat(p) => shared;
    c = select(2, a, b);
    dma.copy c => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void pick(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    a = dma.copy x.chunkat(p) => shared;
    b = dma.copy x.chunkat(p) => shared;
    c = select(1, a, b);
    dma.copy c => y.chunkat(p);
  }
}
""",
        message="the select index 2 is not in bound [0, 2)",
    ),
    "CQ0421": Example(
        bad="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    parallel w by 4 : group {
      t = tma.load x.subspan(4, 64).at(p # w, 0) => shared;
      dma.copy t => y.subspan(4, 64).at(p # w, 0);
    }
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    parallel w by 4 : group {
      t = dma.copy x.subspan(4, 64).at(p # w, 0) => shared;
      dma.copy t => y.subspan(4, 64).at(p # w, 0);
    }
  }
}
""",
        message=("TMA copies are issued once per block or warpgroup: 'w' (a group variable) "
                 "cannot select the tile"),
    ),
    "CQ0422": Example(
        bad="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = dma.copy.evict_first x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.load.evict_first x.chunkat(p, _) => shared;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="'.evict_first' is only valid on tma.load",
    ),
    "CQ0423": Example(
        bad="""\
__co__ void produce(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    shared event full;
    f = dma.copy.async x.chunkat(p, _) => shared;
    trigger full after f;
    wait full;
    dma.copy f => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void produce(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    shared event full;
    f = tma.load.async x.chunkat(p, _) => shared;
    trigger full after f;
    wait full;
    dma.copy f => y.chunkat(p, _);
  }
}
""",
        message=("cannot bind 'f' to an event with 'after': only asynchronous TMA copies into "
                 "shared memory complete events by themselves"),
    ),
    "CQ0424": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    shared f16 [16, 16] sa, sb;
    dma.copy.swiz<128> a => sa;
    dma.copy.swiz<128> b => sb;
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load.swiz<64> sa;
      mb = mma.load.swiz<128> sb;
      mma.row.row mc, ma, mb;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    shared f16 [16, 16] sa, sb;
    dma.copy.swiz<128> a => sa;
    dma.copy.swiz<128> b => sb;
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load.swiz<128> sa;
      mb = mma.load.swiz<128> sb;
      mma.row.row mc, ma, mb;
      mma.store mc, c;
    }
  }
}
""",
        message="'sa' was staged with .swiz<128> but is loaded with .swiz<64>",
    ),
    "CQ0425": Example(
        bad="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy.zfill x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64, 64] x, global f32 [64, 64] y) {
  parallel p by 4 : block {
    shared f32 [16, 64] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="redundant .zfill: source and destination have the same shape [16, 64]",
    ),
    "CQ0426": Example(
        bad="""\
__co__ void pad_rows(global f16 [12, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    shared f16 [16, 16] sa;
    dma.copy a => sa;
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void pad_rows(global f16 [12, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    shared f16 [16, 16] sa;
    dma.copy.zfill a => sa;
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa, b;
      mma.store mc, c;
    }
  }
}
""",
        message=("the source [12, 16] is smaller than the destination [16, 16]: elements past "
                 "the source are undefined"),
    ),
    # --- MMA
    "CQ0501": Example(
        bad="""\
__co__ void gemm(global f16 [M, 16] a, global f16 [16, 16] b, global f32 [M, 16] c) {
  parallel p by cdiv(M, 16) : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.row.row mc, ma, mb;
      mma.store mc, c.subspan(16, 16).at(p, 0);
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [M, 16] a, global f16 [16, 16] b, global f32 [M, 16] c) {
  parallel p by cdiv(M, 16) : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a.subspan(16, 16).at(p, 0);
      mb = mma.load b;
      mma.row.row mc, ma, mb;
      mma.store mc, c.subspan(16, 16).at(p, 0);
    }
  }
}
""",
        message="MMA operand 'a' must be a matrix with a static shape, got [M, 16]",
    ),
    "CQ0502": Example(
        bad="""\
__co__ void gemm(global f16 [16, 32] a, global f16 [32, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 32] a, global f16 [32, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.col mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        message=("MMA shapes do not match: 'a' [16, 32] and 'b' [32, 16] disagree on K for "
                 "layout .row.row"),
    ),
    "CQ0522": Example(
        bad="""\
__co__ void gemm(global bf16 [64, 64] a, global bf16 [128, 64] b, global f32 [64, 128] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      acc = mma.fill.f32 0.0f;
      [[schedule(k_tiles(3, 2, 2, 0))]]
      mma.row.row acc, sa.data, sb.data;
      mma.store acc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global bf16 [64, 64] a, global bf16 [128, 64] b, global f32 [64, 128] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      acc = mma.fill.f32 0.0f;
      [[schedule(k_tiles(3, 2, 1, 0))]]
      mma.row.row acc, sa.data, sb.data;
      mma.store acc, c;
    }
  }
}
""",
        message="MMA k_tiles schedule (3, 2, 2, 0) must be a permutation of [0, 4)",
    ),
    "CQ0503": Example(
        bad="""\
__co__ void gemm(global f16 [16, 32] a, global f16 [16, 32] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a.subspan(16, 16).at(0, 0), b.subspan(16, 16).at(0, 0);
      mma.row.row mc, a.subspan(16, 16).at(0, 1), b.subspan(8, 16).at(0, 1);
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 32] a, global f16 [16, 32] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a.subspan(16, 16).at(0, 0), b.subspan(16, 16).at(0, 0);
      mma.row.row mc, a.subspan(16, 16).at(0, 1), b.subspan(16, 16).at(0, 1);
      mma.store mc, c;
    }
  }
}
""",
        message="MMA accumulator 'mc' has shape [16, 16], but the operands produce [16, 8]",
    ),
    "CQ0504": Example(
        bad="""\
__co__ void gemm(global bf16 [16, 16] a, global bf16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f16 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global bf16 [16, 16] a, global bf16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        message="MMA operand types bf16 x bf16 with accumulator f16 are not supported",
    ),
    "CQ0505": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.row.row ma, ma, mb;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.row.row mc, ma, mb;
      mma.store mc, c;
    }
  }
}
""",
        message=("only an accumulator created by mma.fill or mma.load can be accumulated into "
                 "('ma')"),
    ),
    "CQ0506": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.row.row mc, ma, mb;
      mma.store mc, c;
    }
  }
}
""",
        message="the MMA operation of 'mc' is never executed",
    ),
    "CQ0507": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [8, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [8, 16] b, global f32 [16, 8] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        message="mma.store destination has shape [16, 16], the accumulator has [16, 8]",
    ),
    "CQ0508": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      local f32 [16, 16] acc {0.0f};
      mma.row.row acc, a, b;
      mma.store acc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      acc = mma.fill.f32 0.0f;
      mma.row.row acc, a, b;
      mma.store acc, c;
    }
  }
}
""",
        message="'acc' is not an MMA fragment",
    ),
    "CQ0509": Example(
        bad="""\
__co__ void gemm(global f8_e4m3 [16, 32] a, global f8_e4m3 [16, 32] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 32] a, global f16 [16, 32] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        message="MMA on f8_e4m3 operands is not supported on sm_86",
        target="sm_86",
    ),
    "CQ0510": Example(
        bad="""\
__co__ void gemm(global f16 [64, 16] a, global f16 [64, 16] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [64, 16] a, global f16 [64, 16] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    parallel g by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        message="warpgroup MMA (inside a group-4 level) needs sm_90 or newer; the target is sm_86",
        target="sm_86",
    ),
    "CQ0511": Example(
        bad="""\
__co__ void sparse(global f16 [16, 3] a, global f16 [16, 6] b, global u8 [16, 1] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void sparse(global f16 [16, 4] a, global f16 [16, 8] b, global u8 [16, 1] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, c;
    }
  }
}
""",
        message="sparse MMA needs K to be a multiple of 4 (K = 6)",
    ),
    "CQ0513": Example(
        bad="""\
__co__ void sparse(global f16 [16, 8] a, global f16 [16, 16] b, global u8 [16, 2] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void sparse(global f16 [16, 8] a, global f16 [16, 16] b, global u8 [16, 2] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, c;
    }
  }
}
""",
        message="sparse MMA needs its metadata operand: 'mma.row.row.sp acc, a_packed, b, meta'",
    ),
    "CQ0514": Example(
        bad="""\
__co__ void sparse(global f16 [16, 16] a, global f16 [16, 32] b, global u8 [16, 2] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void sparse(global f16 [16, 16] a, global f16 [16, 32] b, global u8 [16, 4] meta,
                   global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, c;
    }
  }
}
""",
        message="sparse MMA metadata 'meta' is u8 [16, 2]; with K = 32 it must be u8 [16, 4] "
                "(one 4-bit entry per group of 4 columns of K)",
    ),
    "CQ0515": Example(
        bad="""\
__co__ void sparse(global f16 [64, 16] a, global f16 [16, 32] b, global u8 [64, 4] meta,
                   global f32 [64, 16] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sm = dma.copy meta => shared;
    mc = mma.fill.f32 0.0f;
    parallel w by 1 : group-4 {
      mma.row.row.sp mc, sa, b, sm;
    }
    mma.store mc, c;
  }
}
""",
        fixed="""\
__co__ void sparse(global f16 [64, 16] a, global f16 [16, 32] b, global u8 [64, 4] meta,
                   global f32 [64, 16] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sm = dma.copy meta => shared;
    mc = mma.fill.f32 0.0f;
    parallel w by 1 : group-4 {
      me = mma.load sm;
      mma.row.row.sp mc, sa, b, me;
    }
    mma.store mc, c;
  }
}
""",
        message="a sparse warpgroup MMA reads its metadata from registers: load 'sm' with "
                "mma.load first",
    ),
    "CQ0512": Example(
        bad="""\
__co__ void scaled(global f8_e4m3 [16, 32] a, global f8_e4m3 [16, 32] b,
                   global f32 [16, 2] sa, f32 sb, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.scale mc, a, b, sa, sb;
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void scaled(global f8_e4m3 [16, 32] a, global f8_e4m3 [16, 32] b,
                   global f32 [16, 1] sa, f32 sb, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.scale mc, a, b, sa, sb;
      mma.store mc, c;
    }
  }
}
""",
        message="the MMA scale operand must have shape [M, 1] or [1, M] with M = 16, got [16, 2]",
    ),
    "CQ0560": Example(
        bad="""\
__co__ void row_max(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      frag f32[8] peak;
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      reduce_max(peak, mc, 1);
      apply {i, j} in mc.span
        mc.at(i, j) -= peak.at(i);
      mma.store mc, c;
    }
  }
}
""",
        fixed="""\
__co__ void row_max(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      frag f32[16] peak;
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      reduce_max(peak, mc, 1);
      apply {i, j} in mc.span
        mc.at(i, j) -= peak.at(i);
      mma.store mc, c;
    }
  }
}
""",
        message="'reduce_max' into 'peak' of shape [8]: the source 'mc' gives [16]",
    ),
    "CQ0550": Example(
        bad="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      frag.f32 acc[2] {0.0f};
      mma.row.row acc, a, b;
      mma.store acc[0], c;
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      frag.f32 acc[2] {0.0f};
      mma.row.row acc[0], a, b;
      mma.store acc[0], c;
    }
  }
}
""",
        message="'acc' is an array of MMA fragments [2]: select one element, as in 'acc[0]'",
    ),
    # --- parallel levels and control flow
    "CQ0601": Example(
        bad="""\
#define BLOCKS 0

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by BLOCKS : block, q by 64 : thread
    y.at(q) = x.at(q) * 2.0f;
}
""",
        fixed="""\
#define BLOCKS 1

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by BLOCKS : block, q by 64 : thread
    y.at(q) = x.at(q) * 2.0f;
}
""",
        message="bound 0 in parallel is invalid: it must be greater than 0",
    ),
    "CQ0602": Example(
        bad="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, i} by [16, 64]
    y.at(i, i) = x.at(i, i) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel {i, j} by [16, 64]
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        message="the parallel variable 'i' is used twice in the same parallel statement",
    ),
    "CQ0603": Example(
        bad="""\
__co__ void scale(global f32 [256] x, global f32 [256] y) {
  parallel p by 2 : block {
    parallel w by 4 {
      parallel t by 32 : thread
        y.at(p # w # t) = x.at(p # w # t) * 2.0f;
    }
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [256] x, global f32 [256] y) {
  parallel p by 2 : block {
    parallel w by 4 : group {
      parallel t by 32 : thread
        y.at(p # w # t) = x.at(p # w # t) * 2.0f;
    }
  }
}
""",
        message="unable to infer the parallel level(s) between block and thread",
    ),
    "CQ0604": Example(
        bad="""\
__co__ void scale(global f32 [32, 64] x, global f32 [32, 64] y) {
  parallel {i, j} by [32, 64]
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [32, 64] x, global f32 [32, 64] y) {
  parallel i by 32, j by 64
    y.at(i, j) = x.at(i, j) * 2.0f;
}
""",
        message="2048 threads per block exceed the limit of 1024",
    ),
    "CQ0605": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    parallel w by 1 : group {
      parallel t by 16 : thread
        y.at(p # t) = x.at(p # t) * 2.0f;
    }
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 2 : block {
    parallel w by 1 : group {
      parallel t by 32 : thread
        y.at(p # t) = x.at(p # t) * 2.0f;
    }
  }
}
""",
        message="threads per block (16) must be a multiple of 32 when a 'group' level exists",
    ),
    "CQ0606": Example(
        bad="""\
__co__ f32 [64] scale(f32 [64] x) {
  f32 [x.span] y;
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
    return y;
  }
}
""",
        fixed="""\
__co__ f32 [64] scale(f32 [64] x) {
  f32 [x.span] y;
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
  }
  return y;
}
""",
        message="return is not allowed inside a parallel block",
    ),
    "CQ0607": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  shared f32 [16] t;
  parallel p by 4 : block {
    dma.copy x.chunkat(p) => t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    shared f32 [16] t;
    dma.copy x.chunkat(p) => t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        message="'shared' buffer 't' must be declared inside a parallel block",
    ),
    "CQ0608": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64.0
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="the parallel bound must be an integer, got 'f64'",
    ),
    "CQ0609": Example(
        bad="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel t by 64 : thread {
    parallel b by 16 : block
      y.at(b, t) = x.at(b, t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [16, 64] x, global f32 [16, 64] y) {
  parallel b by 16 : block {
    parallel t by 64 : thread
      y.at(b, t) = x.at(b, t) * 2.0f;
  }
}
""",
        message="a 'block' level cannot be nested inside a 'thread' level",
    ),
    "CQ0611": Example(
        bad="""\
#define TILE 24

__co__ void stage(global f32 [64] x, global f32 [64] y) {
  assert(64 % TILE == 0, "TILE must divide 64");
  parallel p by 64 / TILE : block {
    t = dma.copy x.subspan(TILE).at(p) => shared;
    dma.copy t => y.subspan(TILE).at(p);
  }
}
""",
        fixed="""\
#define TILE 16

__co__ void stage(global f32 [64] x, global f32 [64] y) {
  assert(64 % TILE == 0, "TILE must divide 64");
  parallel p by 64 / TILE : block {
    t = dma.copy x.subspan(TILE).at(p) => shared;
    dma.copy t => y.subspan(TILE).at(p);
  }
}
""",
        message="assertion failed: TILE must divide 64",
    ),
    "CQ0612": Example(
        bad="""\
__co__ void stage(global f32 [256, 256] x, global f32 [256, 256] y) {
  parallel p by 1 : block {
    shared f32 [256, 256] t;
    dma.copy x => t;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [256, 256] x, global f32 [256, 256] y) {
  parallel p by 4 : block {
    shared f32 [64, 256] t;
    dma.copy x.chunkat(p, _) => t;
    dma.copy t => y.chunkat(p, _);
  }
}
""",
        message="one block uses 262144 bytes of shared memory; sm_86 has 101376",
        target="sm_86",
    ),
    "CQ0623": Example(
        bad="""\
__co__ void twice(global f32 [64] x, global f32 [64] y) {
  parallel by 1 : device(npu) {
    parallel p by 64 : thread
      y.at(p) = x.at(p) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void twice(global f32 [64] x, global f32 [64] y) {
  parallel by 1 : device(gpu) {
    parallel p by 64 : thread
      y.at(p) = x.at(p) * 2.0f;
  }
}
""",
        message="unknown device target 'npu' (known: cpu, gpu, hetero)",
    ),
    "CQ0613": Example(
        bad="""\
__co__ void first(global f32 [64] x, global f32 [4] y) {
  parallel p by 4 : block {
    parallel t by 16 : thread {
      int leader = 0;
      inthreads (leader == 0)
        y.at(p) = x.at(p # t);
    }
  }
}
""",
        fixed="""\
__co__ void first(global f32 [64] x, global f32 [4] y) {
  parallel p by 4 : block {
    parallel t by 16 : thread {
      int leader = 0;
      inthreads (t == leader)
        y.at(p) = x.at(p # t);
    }
  }
}
""",
        message="the inthreads predicate must depend on a parallel variable",
    ),
    # --- constructs the Triton backend cannot map
    "CQ0701": Example(
        bad="""\
__co__ void leading(global s32 [64, 8] x, global s32 [64] y) {
  parallel p by 64 {
    y.at(p) = 0;
    foreach k in [8] {
      if (x.at(p, k) < 0) {
        yield;
      }
      y.at(p) = y.at(p) + 1;
    }
  }
}
""",
        fixed="""\
__co__ void leading(global s32 [64, 8] x, global s32 [64] y) {
  parallel p by 64 {
    s32 k = 0;
    while (k < 8) {
      if (x.at(p, k) < 0)
        break;
      k = k + 1;
    }
    y.at(p) = k;
  }
}
""",
        message="not supported by the Triton backend yet: 'yield' inside a loop or a nested "
                "block",
    ),
    "CQ0702": Example(
        bad="""\
__co__ void two_phase(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block<cooperative> {
    parallel t by 16 : thread
      x.at(p # t) = x.at(p # t) * 2.0f;
    sync.barrier : device;
    parallel t by 16 : thread
      y.at(p # t) = x.at(63 - p # t);
  }
}
""",
        fixed="""\
__co__ void two_phase(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    parallel t by 16 : thread
      x.at(p # t) = x.at(p # t) * 2.0f;
  }
  parallel p by 4 : block {
    parallel t by 16 : thread
      y.at(p # t) = x.at(63 - p # t);
  }
}
""",
        message=("a grid-wide barrier has no Triton mapping: Triton programs cannot wait for "
                 "each other; split the work into two parallel blocks (two launches)"),
    ),
    "CQ0703": Example(
        bad="""\
__co__ void gemm(global f16 [32, 16] a, global f16 [16, 16] b, global f32 [32, 16] c) {
  parallel p by 1 : block {
    parallel w by 2 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a.subspan(16, 16).at((w + 1) % 2, 0), b;
      mma.store mc, c.subspan(16, 16).at(w, 0);
    }
  }
}
""",
        fixed="""\
__co__ void gemm(global f16 [32, 16] a, global f16 [16, 16] b, global f32 [32, 16] c) {
  parallel p by 1 : block {
    parallel w by 2 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a.subspan(16, 16).at(w, 0), b;
      mma.store mc, c.subspan(16, 16).at(w, 0);
    }
  }
}
""",
        message=("cannot lower this MMA to one tile-level dot: its offset is not an affine "
                 "function of the parallel and loop indices"),
    ),
    "CQ0704": Example(
        bad="""\
__co__ void ragged(global f32 [64] x, global s32 [4] sizes, global f32 [64] y) {
  parallel p by 4 : block {
    int n = sizes.at(p);
    t = dma.copy x.subspan(n).at(p) => shared;
    dma.copy t => y.subspan(n).at(p);
  }
}
""",
        fixed="""\
__co__ void ragged(global f32 [64] x, global s32 [4] sizes, global f32 [64] y) {
  parallel p by 4 : block {
    int n = sizes.at(p);
    t = dma.copy x.subspan(16).at(p) => shared;
    dma.copy t => y.subspan(16).at(p);
  }
}
""",
        message="tile extent 'n' has no static bound; Triton needs a constant tile shape",
    ),
    "CQ0706": Example(
        bad="""\
__device__ float twice(float v) {
  float r = v;
  return r * 2.0f;
}

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = call twice(x.at(p));
}
""",
        fixed="""\
__device__ float twice(float v) {
  return v * 2.0f;
}

__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = call twice(x.at(p));
}
""",
        message="the device helper 'twice' cannot be inlined: its body is not one 'return' "
                "of an expression",
    ),
    "CQ0707": Example(
        bad="""\
template <typename T>
__device__ T lane_swap(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }

__co__ void swap_pairs(global f32 [4, 32] x, global f32 [4, 32] y) {
  parallel r by 4 : block
    y.at(r, 0) = call lane_swap(x.at(r, 0), 1);
}
""",
        fixed="""\
template <typename T>
__device__ T lane_swap(T v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }

__co__ void swap_pairs(global f32 [4, 32] x, global f32 [4, 32] y) {
  parallel r by 4 : block
    parallel l by 32 : thread
      y.at(r, l) = call lane_swap(x.at(r, l), 1);
}
""",
        message="the device helper 'lane_swap' shuffles ('__shfl_xor_sync') outside a "
                "': thread' level: Triton has no shuffles, so a shuffle permutes the lanes of "
                "one ': thread' level",
    ),
    "CQ0708": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    __cpp__("y[p] = 2.0f * x[p];");
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 {
    y.at(p) = x.at(p) * 2.0f;
  }
}
""",
        message="'__cpp__' inside a kernel is raw CUDA, which a Triton kernel cannot run",
    ),
    "CQ0709": Example(
        bad="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  __cpp__("cudaDeviceSynchronize();");
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) * 2.0f;
}
""",
        message="the host '__cpp__' block is skipped (\"cudaDeviceSynchronize();\"): host code "
                "runs in Python",
    ),
    "CQ0755": Example(
        bad="""\
__co__ void ring(global f16 [64, 256] a, global f16 [64, 256] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    shared event full[2], empty[2];
    shared f16 [64, 64] ra[2], rb[2];
    parallel wg by 2 : group-4 {
      inthreads.async (wg == 0) {
        foreach {k} in [4] {
          wait empty.at(k);
          fa = tma.copy.async a.subspan(64, 64).at(0, k) => ra[k % 2];
          fb = tma.copy.async b.subspan(64, 64).at(0, k) => rb[k % 2];
          trigger full.at(k) after fa, fb;
        }
      }
      inthreads.async (wg == 1) {
        acc = mma.fill.f32 0.0f;
        foreach {k} in [4] {
          wait full.at(k);
          mma.row.row acc, ra[k % 2], rb[k % 2];
          trigger empty.at(k);
        }
        mma.store acc, c;
      }
    }
  }
}
""",
        fixed="""\
__co__ void ring(global f16 [64, 256] a, global f16 [64, 256] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    shared event full[2], empty[2];
    shared f16 [64, 64] ra[2], rb[2];
    parallel wg by 2 : group-4 {
      inthreads.async (wg == 0) {
        foreach {k} in [4] {
          wait empty.at(k);
          fa = tma.copy.async a.subspan(64, 64).at(0, k) => ra[k % 2];
          fb = tma.copy.async b.subspan(64, 64).at(0, k) => rb[k % 2];
          trigger full.at(k) after fa, fb;
        }
      }
      inthreads.async (wg == 1) {
        acc = mma.fill.f32 0.0f;
        foreach {s} in [2] { trigger empty.at(s); }
        foreach {k} in [4] {
          wait full.at(k);
          mma.row.row acc, ra[k % 2], rb[k % 2];
          trigger empty.at(k);
        }
        mma.store acc, c;
      }
    }
  }
}
""",
        message=("this warp specialisation cannot be serialised into one loop: no role can "
                 "start: release every slot of the ring before the loops (`foreach {s} in "
                 "[S] { trigger empty.at(s); }` in each consumer) or declare the event "
                 "`= ready`"),
    ),
    "CQ0756": Example(
        bad="""\
__co__ void handshake(global s32 [256] a, global s32 [256] out) {
  parallel p by 256 : thread {
    shared event ping, pong;
    inthreads.async (p < 128) {
      wait pong;
      trigger ping;
    }
    inthreads.async (p >= 128) {
      wait ping;
      trigger pong;
    }
    out.at(p) = a.at(p);
  }
}
""",
        fixed="""\
__co__ void handshake(global s32 [256] a, global s32 [256] out) {
  parallel p by 256 : thread {
    shared event ping, pong;
    inthreads.async (p < 128) {
      trigger ping;
      wait pong;
    }
    inthreads.async (p >= 128) {
      wait ping;
      trigger pong;
    }
    out.at(p) = a.at(p);
  }
}
""",
        message=("'wait' on 'pong' would never return: in no order of the roles is it "
                 "triggered first (every role waits for another)"),
    ),
    "CQ0220": Example(
        bad="""\
__co__ void bump(global f32 [64]& x) {
  parallel p by 64
    x.at(p) = x.at(p) + 1.0f;
}
""",
        fixed="""\
__co__ void bump(global f32 [64] x) {
  parallel p by 64
    x.at(p) = x.at(p) + 1.0f;
}
""",
        message="the global parameter 'x' cannot be passed by reference",
    ),
    "CQ0221": Example(
        bad="""\
__co__ void fill(global f32 [64] x, f32& v) {
  parallel p by 64
    x.at(p) = v;
}
""",
        fixed="""\
__co__ void fill(global f32 [64] x, f32 v) {
  parallel p by 64
    x.at(p) = v;
}
""",
        message="the scalar parameter 'v' cannot be passed by reference",
    ),
    "CQ0222": Example(
        bad="""\
__co__ void gather(f32 [??] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        fixed="""\
__co__ void gather(global f32 [??] x, global f32 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p);
}
""",
        message="the parameter 'x' has an unbounded dimension ('??') and must be global",
    ),
    "CQ0223": Example(
        bad="""\
__co__ void tag(global s32 [4] x) {
  name = "tile";
  parallel p by 4
    x.at(p) = p;
}
""",
        fixed="""\
__co__ void tag(global s32 [4] x) {
  parallel p by 4
    x.at(p) = p;
}
""",
        message="string variables are not supported ('name')",
    ),
    "CQ0315": Example(
        bad="""\
__co__ void stage(global f32 [2, 4] a, global f32 [2, 4] o) {
  parallel wg by 3 : block {
    local f32 [2, 4] b[2];
    dma.copy a => b[wg];
    dma.copy b[0] => o;
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [2, 4] a, global f32 [2, 4] o) {
  parallel wg by 3 : block {
    local f32 [2, 4] b[3];
    dma.copy a => b[wg];
    dma.copy b[wg] => o;
  }
}
""",
        message="the index 'wg' of the buffer array 'b' reaches 2, outside [0, 2)",
    ),
    "CQ0427": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.any;
    g = f;
    g = dma.copy x.chunkat(p) => shared;
    dma.copy g => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    g = dma.copy x.chunkat(p) => shared;
    dma.copy g => y.chunkat(p);
  }
}
""",
        message="'g' cannot be initialised from the placeholder 'f'",
    ),
    "CQ0428": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy x.chunkat(p) => shared;
    swap(f);
    dma.copy f => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    f = dma.copy x.chunkat(p) => shared;
    dma.copy f => y.chunkat(p);
  }
}
""",
        message="'swap' takes 2 futures, got 1",
    ),
    "CQ0614": Example(
        bad="""\
__co__ void scale(global f32 [128] x) {
  parallel p by 1 : block {
    [[launch_bounds(128)]]
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x) {
  [[launch_bounds(128)]]
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        message="[[launch_bounds]] is only valid on a block-level parallel (this level is 'thread')",
    ),
    "CQ0615": Example(
        bad="""\
__co__ void scale(global f32 [128] x) {
  [[maxnreg(0)]]
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x) {
  [[maxnreg(128)]]
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        message='[[maxnreg]] argument must be a positive integer, got 0',
    ),
    "CQ0616": Example(
        bad="""\
__co__ void scale(global f32 [128] x) {
  [[launch_bounds(64)]]
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x) {
  [[launch_bounds(128)]]
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        message='[[launch_bounds]] allows 64 threads per block but the block has 128',
    ),
    "CQ0617": Example(
        bad="""\
__co__ void scale(global f32 [128] x, int s) {
  parallel<s> p by 128 : block
    x.at(p) = x.at(p) * 2.0f;
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x, stream s) {
  parallel<s> p by 128 : block
    x.at(p) = x.at(p) * 2.0f;
}
""",
        message="'s' is not a stream; parallel<...> takes a stream variable",
    ),
    "CQ0618": Example(
        bad="""\
__co__ void scale(global f32 [128] x, stream s) {
  parallel p by 1 : block {
    parallel<s> t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x, stream s) {
  parallel<s> p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        message="a stream can only be bound to a block-level parallel (this level is 'thread')",
    ),
    "CQ0619": Example(
        bad="""\
__co__ void scale(global f32 [128] x) {
  parallel p by 1 : block {
    parallel.async t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [128] x) {
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
  }
}
""",
        message='an inner parallel level cannot be asynchronous',
    ),
    "CQ0620": Example(
        bad="""\
__co__ void scale(global f32 [256] x) {
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
    parallel t by 256 : thread
      x.at(t) = x.at(t) + 1.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [256] x) {
  parallel p by 1 : block {
    parallel t by 128 : thread
      x.at(t) = x.at(t) * 2.0f;
    parallel t by 128 : thread
      x.at(128 + t) = x.at(128 + t) + 1.0f;
  }
}
""",
        message='parallel levels of one block imply different thread counts (256 here, 128 before)',
    ),
    "CQ0224": Example(
        bad="""\
__co__ void count(global s32 [4] x) {
  mutable n;
  parallel p by 4
    x.at(p) = p;
}
""",
        fixed="""\
__co__ void count(global s32 [4] x) {
  mutable int n = 0;
  parallel p by 4
    x.at(p) = p;
}
""",
        message="cannot deduce the type of 'n'",
    ),
    "CQ0225": Example(
        bad="""\
__co__ void count(global s32 [4] x) {
  mutable t = {1, 2};
  parallel p by 4
    x.at(p) = p;
}
""",
        fixed="""\
__co__ void count(global s32 [4] x) {
  t = {1, 2};
  parallel p by 4
    x.at(p) = p;
}
""",
        message="'t' is an ituple of rank 2; only scalars can be mutable",
    ),
    "CQ0226": Example(
        bad="""\
__co__ void fill(global f32 [4, 8] x, global f32 [4, 8] y) {
  parallel p by 1 : block {
    shared f32 [4, 8] s{x};
    dma.copy s => y;
  }
}
""",
        fixed="""\
__co__ void fill(global f32 [4, 8] x, global f32 [4, 8] y) {
  parallel p by 1 : block {
    shared f32 [4, 8] s{0.0f};
    dma.copy s => y;
  }
}
""",
        message="the initialiser of 's' must be a constant scalar, got global f32 [4, 8] data",
    ),
    "CQ0227": Example(
        bad="""\
__co__ void hist(global s32 [64] x, global s32 [16] h) {
  parallel p by 64 : block
    __atomic_add(h.at(x.at(p) % 16));
}
""",
        fixed="""\
__co__ void hist(global s32 [64] x, global s32 [16] h) {
  parallel p by 64 : block
    __atomic_add(h.at(x.at(p) % 16), 1);
}
""",
        message="'__atomic_add' takes 2 arguments, got 1",
    ),
    "CQ0228": Example(
        bad="""\
__co__ void total(global s32 [64] x, global s32 [1] t) {
  parallel p by 64 : block {
    mutable s32 v = x.at(p);
    __atomic_add(v, 1);
    __atomic_add(t.at(0), v);
  }
}
""",
        fixed="""\
__co__ void total(global s32 [64] x, global s32 [1] t) {
  parallel p by 64 : block {
    mutable s32 v = x.at(p);
    v = v + 1;
    __atomic_add(t.at(0), v);
  }
}
""",
        message="'__atomic_add' needs an element of shared or global data as its first argument",
    ),
    "CQ0229": Example(
        bad="""\
__co__ void head(global f32 [8, 8] x, global f32 [8] y) {
  parallel p by 1 : block {
    t = dma.copy x => shared;
    parallel i by 8 : thread
      y.at(i) = t.at(i, 0);
  }
}
""",
        fixed="""\
__co__ void head(global f32 [8, 8] x, global f32 [8] y) {
  parallel p by 1 : block {
    t = dma.copy x => shared;
    parallel i by 8 : thread
      y.at(i) = t.data.at(i, 0);
  }
}
""",
        message="'t' is a future: read its tile with 't.data.at(...)'",
    ),
    "CQ0230": Example(
        bad="""\
__co__ void clear(f32 [64] x) {
  parallel p by 64 : thread
    x.at(p) = 0.0f;
}
""",
        fixed="""\
__co__ void clear(global f32 [64] x) {
  parallel p by 64 : thread
    x.at(p) = 0.0f;
}
""",
        message="'x' is written, but it is neither 'global' nor passed by reference: the "
                "function writes a copy and the caller's tensor does not change",
    ),
    "CQ0265": Example(
        bad="""\
__co__ void spread(global s32 [32] x, global s32 [32] y) {
  parallel p by 16 : block {
    q = p #* 2;
    y.at(q) = x.at(q);
  }
}
""",
        fixed="""\
__co__ void spread(global s32 [32] x, global s32 [32] y) {
  parallel p by 16 : block {
    q = p * 2;
    y.at(q) = x.at(q);
  }
}
""",
        message="the operator '#*' is reserved: bounded values combine with '#', '#+' and '#-' "
                "only",
    ),
    "CQ0429": Example(
        bad="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    t = dma.copy.async x.chunkat(p) => shared;
    wait p;
    wait t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        fixed="""\
__co__ void stage(global f32 [64] x, global f32 [64] y) {
  parallel p by 4 : block {
    t = dma.copy.async x.chunkat(p) => shared;
    wait t;
    dma.copy t => y.chunkat(p);
  }
}
""",
        message="'p' cannot be waited or triggered: it is a bounded variable",
    ),
    "CQ0430": Example(
        bad="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready;
    wait ready.at(0);
  }
}
""",
        fixed="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready[2];
    trigger ready.at(0);
    wait ready.at(0);
  }
}
""",
        message="'.at(order)' needs a one-dimensional event array; 'ready' is an event",
    ),
    "CQ0431": Example(
        bad="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready[2];
    wait ready.at(1.0f);
  }
}
""",
        fixed="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready[2];
    trigger ready.at(1);
    wait ready.at(1);
  }
}
""",
        message="the event order must be an integer, got 'f32'",
    ),
    "CQ0432": Example(
        bad="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready[2];
    mutable int order = 0;
    wait ready.at(order++ + 1);
  }
}
""",
        fixed="""\
__co__ void ring(global f32 [64] x) {
  parallel p by 1 : block {
    shared event ready[2];
    mutable int order = 0;
    trigger ready.at(0);
    wait ready.at(order++);
  }
}
""",
        message="an event order may only be updated as the whole '.at' argument",
    ),
    "CQ0433": Example(
        bad="""\
__co__ void poll(global f32 [64] x, bool more) {
  parallel p by 1 : block {
    shared event ready;
    trigger ready;
    while (ready && more);
  }
}
""",
        fixed="""\
__co__ void poll(global f32 [64] x, bool more) {
  parallel p by 1 : block {
    shared event ready;
    trigger ready;
    wait ready;
  }
}
""",
        message='an event cannot be combined with a value that is not an event in a condition',
    ),
    "CQ0434": Example(
        bad="""\
__co__ void join(global f16 [64, 64] a, global f16 [64, 64] b) {
  parallel p by 1 : block {
    shared f16 [64, 64] sa;
    shared f16 [64, 64] sb;
    shared event full[2];
    mutable int order = 0;
    fa = tma.load.async a => sa;
    fb = tma.load.async b => sb;
    trigger full.at(order++) after fa, fb;
  }
}
""",
        fixed="""\
__co__ void join(global f16 [64, 64] a, global f16 [64, 64] b) {
  parallel p by 1 : block {
    shared f16 [64, 64] sa;
    shared f16 [64, 64] sb;
    shared event full[2];
    mutable int order = 0;
    fa = tma.load.async a => sa;
    fb = tma.load.async b => sb;
    trigger full.at(order) after fa, fb;
    order = order + 1;
  }
}
""",
        message='one incremented event order cannot be bound to several futures',
    ),
    "CQ0435": Example(
        bad="""\
__co__ void pack(global f32 [16, 16] x, global f32 [16, 16] y) {
  parallel p by 1 : block {
    f = dma.copy.sp<1:4> x => shared;
    dma.copy f => y;
  }
}
""",
        fixed="""\
__co__ void pack(global f32 [16, 16] x, global f32 [16, 16] y) {
  parallel p by 1 : block {
    f = dma.copy x => shared;
    dma.copy f => y;
  }
}
""",
        message='sparse copies take the 2:4 pattern (got 1:4)',
    ),
    "CQ0440": Example(
        bad="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.copy.promote<32> x.chunkat(p, _) => shared;
    tma.copy t => y.chunkat(p, _);
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 4 : block {
    t = tma.copy.promote<128> x.chunkat(p, _) => shared;
    tma.copy t => y.chunkat(p, _);
  }
}
""",
        message="L2 promotion must be 64, 128 or 256 bytes (got 32)",
    ),
    "CQ0621": Example(
        bad="""\
__co__ void scale(global f32 [64] x) {
  parallel p by 16 : block {
    foreach i in [4] : unroll(8)
      x.at(p # i) = x.at(p # i) * 2.0f;
  }
}
""",
        fixed="""\
__co__ void scale(global f32 [64] x) {
  parallel p by 16 : block {
    foreach i in [4] : unroll(4)
      x.at(p # i) = x.at(p # i) * 2.0f;
  }
}
""",
        message="unroll factor 8 exceeds the innermost loop's 4 iterations",
    ),
    "CQ0622": Example(
        bad="""\
__co__ void twostep(global s32 [2] x) {
  parallel b by 2 : block {
    x.at(b) = b;
    sync.barrier : device;
  }
}
""",
        fixed="""\
__co__ void twostep(global s32 [2] x) {
  parallel b by 2 : block
    x.at(b) = b;
}
""",
        message="'sync.barrier : device' is only valid inside a 'parallel ... : block<cooperative>'",
    ),
    "CQ0436": Example(
        bad="""\
__co__ void pick(global f32 [4, 8] x, global f32 [4, 8] y) {
  parallel p by 1 : block {
    shared f32 [4, 8] a;
    shared f32 [8, 4] b;
    foreach k in [2] {
      f = dma.copy x => select(k, a, b);
      dma.copy f => y;
    }
  }
}
""",
        fixed="""\
__co__ void pick(global f32 [4, 8] x, global f32 [4, 8] y) {
  parallel p by 1 : block {
    shared f32 [4, 8] a;
    shared f32 [4, 8] b;
    foreach k in [2] {
      f = dma.copy x => select(k, a, b);
      dma.copy f => y;
    }
  }
}
""",
        message=("select options have different types: 'a' is shared f32 [4, 8] data, 'b' is "
                 "shared f32 [8, 4] data"),
    ),
    "CQ0117": Example(
        # a body of 100,001 empty statements: the limit counts tokens, not meaning
        bad="__co__ void big(global s32 [4] x) {\n" + "  ;\n" * 100_001 + "}\n",
        fixed="""\
__co__ void big(global s32 [4] x) {
  parallel p by 4
    x.at(p) = p;
}
""",
        message="this __co__ function is too large: more than 100,000 tokens",
    ),
    "CQ0118": Example(
        bad="""\
__co__ void relu(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 : block {
    #pragma croq intrinsic prefix act_
    y.at(p) = x.at(p) * 2.0f;
  }
  parallel q by 64 : block
    y.at(q) = act_relu(y.at(q));
}
""",
        # Moving the pragma to file scope is the fix for the reference compiler, whose CUDA
        # output passes intrinsics through; the Triton backend passes none (CQ0701), so the
        # program that compiles here calls the built-in that does the same work.
        fixed="""\
__co__ void relu(global f32 [64] x, global f32 [64] y) {
  parallel p by 64 : block {
    y.at(p) = x.at(p) * 2.0f;
  }
  parallel q by 64 : block
    y.at(q) = __max(y.at(q), 0.0f);
}
""",
        message="'act_relu' is called outside the scope of `#pragma croq intrinsic prefix "
                "act_`",
    ),
    "CQ0437": Example(
        bad="""\
__co__ void stage(global f16 [2, 2, 2, 2, 4, 8] x, global f16 [2, 2, 2, 2, 4, 8] y) {
  parallel p by 1 : block {
    t = tma.copy x => shared;
    dma.copy t => y;
  }
}
""",
        fixed="""\
__co__ void stage(global f16 [2, 2, 2, 2, 4, 8] x, global f16 [2, 2, 2, 2, 4, 8] y) {
  parallel p by 1 : block {
    t = dma.copy x => shared;
    dma.copy t => y;
  }
}
""",
        message="TMA moves tiles of rank 1 to 5, this one has rank 6",
    ),
    "CQ0316": Example(
        bad="""\
__co__ void scale(global f32 [32, 16] a, global f32 [8] c) {
  a *= c;
}
""",
        fixed="""\
__co__ void scale(global f32 [32, 16] a, global f32 [32, 16] c) {
  parallel {i, j} by [32, 16]
    a.at(i, j) *= c.at(i, j);
}
""",
        message="inconsistent shapes for the spanned operation '*': [32, 16] vs. [8]",
    ),
}
# The S5000 target's rules have their examples in their own module (checked for that target).
EXAMPLES.update({code: Example(**fields, target=s5000.TARGET)
                 for code, fields in s5000.EXAMPLES.items()})

# Codes no program can produce, with the reason.
UNTRIGGERABLE: dict[str, str] = {
    "CQ0307": "a symbolic dimension of a device buffer is always a parameter dimension, and a "
              "function that needs one as a constant is compiled per call with its value "
              "(limits such as shared memory are checked then, as an ArgumentError)",
    "CQ0610": "a symbolic bound of a group or thread level is always a parameter dimension, "
              "and a function that needs one as a constant is compiled per call with its "
              "value (the thread limits are checked then, as an ArgumentError)",
    "CQ0705": "it follows from a compile option, not from the program alone (the examples "
              "are checked without options); tests/e2e/test_stream_k.py triggers it with "
              "stream_k=True, tests/backends/test_cuda_gemm.py with backend='cuda'",
    "CQ0901": "an internal compiler error is a bug in the compiler itself; every program "
              "that produces one is a bug to fix in the compiler, not an example to keep",
}

# What each code means, in a sentence or two (the reference's "what it means" line).
MEANINGS: dict[str, str] = {
    "CQ0118": "An intrinsic prefix or namespace declared by `#pragma croq intrinsic` inside "
              "braces holds only until the closing brace, as in the reference compiler. The "
              "Triton backend passes no intrinsic through (CQ0701): where a built-in does the "
              "work, call it instead.",
    "CQ0316": "Arithmetic on whole spanned data works element by element, so both sides need the same shape.",
    "CQ0437": "The tensor memory accelerator copies boxes of one to five dimensions.",
    "CQ0117": (
        "A function or source is so large that compiling it would take minutes; the compiler "
        "stops with this error instead. Split the work into smaller functions."
    ),
    "CQ0436": (
        "A select picks one of several buffers or futures at run time, so all of them must "
        "have the same element type, shape and storage."
    ),
    "CQ0224": (
        'Untyped `mutable` declarations take their type from the initial value; without one the '
        'type is unknown.'
    ),
    'CQ0225': 'Only scalars can be declared `mutable`; shapes and tuples are compile-time values.',
    'CQ0226': "A buffer's `{v}` initialiser fills every element with one constant value.",
    "CQ0227": (
        'Each atomic built-in takes a fixed number of arguments: the element, the operand (and '
        'the comparand for `__atomic_cas`).'
    ),
    "CQ0228": (
        'Atomics update memory that other threads see; their first argument is an element of '
        'shared or global data.'
    ),
    "CQ0229": (
        'A future is the handle of a copy; its tile is `f.data`, so elements are read with '
        '`f.data.at(...)`.'
    ),
    "CQ0230": (
        'A parameter without `global` is the caller\'s data copied for the function (spec: '
        'host data copied to the device on entry): writes to it stay in the copy unless the '
        'parameter is passed by reference (`f32 [N]& x`, copied back). A `void` function '
        'that writes one leaves its caller\'s tensor unchanged, which is rarely what was meant.'
    ),
    "CQ0265": (
        '`#*`, `#/` and `#%` are tokens of the language without a meaning; every checker '
        'rejects them.'
    ),
    'CQ0429': '`wait` and `trigger` take futures of asynchronous copies or events, nothing else.',
    "CQ0430": (
        '`e.at(order)` picks slot `order % N` of an event array `e[N]`; a single event or a 2-D '
        'array has no such slot.'
    ),
    'CQ0431': 'The order of `e.at(order)` counts generations of an event array: an integer.',
    "CQ0432": (
        'Incrementing the order inside a larger expression makes it unclear which generation is '
        'meant; `.at(order++)` is the one allowed form.'
    ),
    'CQ0433': 'An event in a condition waits for it; combining it with an ordinary value has no '
              'meaning. Wait for the event with `wait e;` and test the value on its own.',
    "CQ0434": (
        'With several futures after one trigger, `order++` would be applied once per future; '
        'update the order separately.'
    ),
    'CQ0435': 'Sparse tensor cores use 2-of-4 structured sparsity; `.sp<2:4>` is the only pattern.',
    'CQ0621': '`: unroll(n)` unrolls n iterations at a time: n must be positive and at most the trip count.',
    "CQ0622": (
        'A grid-wide barrier needs a cooperative launch, and `<cooperative>` applies to block '
        'levels only.'
    ),
    "CQ0220": (
        'Global parameters are device data used in place already; a reference `&` on them means '
        'nothing and is rejected.'
    ),
    'CQ0221': 'Scalars are passed by value; a scalar reference parameter is not supported.',
    "CQ0222": (
        'A dimension written `??` has no bound the host can check, so only global (device) data '
        'may have one.'
    ),
    'CQ0223': 'Strings may appear in `assert`, `print` and `__cpp__`, but cannot be stored in variables.',
    "CQ0315": (
        'An index into an array of buffers (`buf[i]`) must stay inside the array; a bounded index'
        ' reaches its bound minus one.'
    ),
    'CQ0427': 'A `dma.any` placeholder holds no copy yet, so another name cannot be initialised from it.',
    'CQ0428': '`swap` exchanges exactly two futures and `rotate` cycles two or more.',
    "CQ0614": (
        '`[[launch_bounds]]` and `[[maxnreg]]` describe a whole thread block, so they go on the '
        'block-level parallel.'
    ),
    "CQ0615": (
        'Launch attributes take compile-time integer constants: non-negative for launch_bounds, '
        'positive for maxnreg.'
    ),
    "CQ0616": (
        'The first argument of `[[launch_bounds]]` is the most threads a block may have; the '
        'parallel levels of the block need more.'
    ),
    'CQ0617': '`parallel<s>` launches the kernel on a stream, so `s` must be a `stream` parameter.',
    "CQ0618": (
        'A stream binds a kernel launch, which is the block level; inner levels cannot have their'
        ' own stream.'
    ),
    "CQ0619": (
        '`parallel.async` makes a kernel launch asynchronous; inner levels are part of the launch'
        ' and cannot be.'
    ),
    "CQ0620": (
        'All inner parallel statements of a block run on the same threads, so they must describe '
        'the same thread count.'
    ),
    "CQ0001": "An `#if`, `#ifdef` or `#ifndef` group is still open at the end of the file. "
              "Every conditional group ends with its own `#endif`.",
    "CQ0002": "An `#elif`, `#else` or `#endif` appears where no conditional group is open, "
              "usually one `#endif` too many.",
    "CQ0003": "A preprocessor directive does not have the form it needs, for example "
              "`#define` without a macro name or `#else` after `#else`.",
    "CQ0004": "The expression of an `#if` or `#elif` is not a complete integer expression "
              "the preprocessor can evaluate.",
    "CQ0005": "A function-like macro is called with a different number of arguments than "
              "its `#define` declares.",
    "CQ0006": "A call of a function-like macro opens `(` but the matching `)` never comes; "
              "the preprocessor read to the end of the file looking for it.",
    "CQ0007": "Macro calls are nested inside each other's arguments more than 100 levels "
              "deep; the preprocessor stops expanding them.",
    "CQ0008": "A macro is defined a second time with a different body; the later "
              "definition wins. `#undef` the macro first when the change is intended.",
    "CQ0009": "A `/*` comment has no closing `*/`, so the rest of the file is commented out.",
    "CQ0010": "Expanding macros produced more text than the preprocessor allows for the "
              "file, typically macros whose expansion multiplies with every level.",
    "CQ0101": "The source contains a character that is not part of any Croqtile token.",
    "CQ0102": "A string literal has no closing `\"` on its line.",
    "CQ0103": "A number is not written in a form Croqtile accepts. Croqtile has no "
              "exponent notation and no leading- or trailing-dot floats.",
    "CQ0104": "A number literal is too large to represent: integers must fit in 64 bits "
              "and floats in a double. As in C, an integer literal without a `u` suffix is "
              "signed and must fit in 63 bits (at most 9223372036854775807), minus sign "
              "included: `-9223372036854775808` is out of range too.",
    "CQ0110": "The parser needed a specific token or construct here and found something "
              "else, most often a missing `;`, `)` or `}`.",
    "CQ0111": "A token or expression appears where the grammar does not allow it, for "
              "example an expression inside a parameter shape.",
    "CQ0112": "The source has no function marked `__co__`; only `__co__` functions are "
              "Croqtile, everything else is skipped as host code.",
    "CQ0113": "The braces of a `__co__` function never balance, so its end cannot be found.",
    "CQ0114": "DMA and TMA modifiers are written in a fixed order: the operation and its "
              "configuration, then `.async`, then the attributes, with TMA eviction "
              "hints before `.swiz`.",
    "CQ0115": "Expressions or blocks are nested more deeply than the compiler supports.",
    "CQ0116": "A reserved word of Croqtile (a type, storage, level or statement keyword "
              "such as `copy`, `block` or `in`) is used as a name.",
    "CQ0201": "A name is used that no declaration, parameter or earlier assignment "
              "introduces in an enclosing scope.",
    "CQ0202": "A name is declared twice in the same scope, or a parameter reuses the name "
              "of another parameter or of a symbolic dimension.",
    "CQ0203": "Scalars are immutable unless declared `mutable`; assigning to an immutable "
              "one (or to a parameter, shape or loop variable) is an error.",
    "CQ0204": "A name or expression is of the wrong kind for where it is used, for example "
              "an immutable scalar without an initial value or a non-buffer in a DMA.",
    "CQ0205": "The operand types of a binary operator have no common type (for example "
              "`f16` and `bf16`) or the operator does not apply to them.",
    "CQ0206": "An assignment converts a value to a narrower type implicitly. The "
              "conversion happens, but it may round or overflow.",
    "CQ0207": "`#v` (the upper bound) needs a bounded variable created by `parallel`, "
              "`foreach` or `with`; this name is something else.",
    "CQ0313": "A tiling factor given with `chunk(F...)` is zero or negative; every dimension "
              "is split into a positive number of tiles.",
    "CQ0314": "`chunkat` takes the number of tiles of each dimension from the bound of its "
              "argument, so the argument must be a parallel, foreach or with index; give the "
              "count explicitly with `chunk(F).at(i)` otherwise.",
    "CQ0208": "`_` is the wildcard of `chunkat` and `subspan` argument lists; it cannot name "
              "a variable or stand for a value.",
    "CQ0209": "A dimension, loop bound, tile extent or index must be an integer, and this "
              "one has another type.",
    "CQ0266": "A value that shapes the kernel (a buffer dimension, a shape) must be known "
              "when the kernel is compiled; this one is an integer computed at run time (read "
              "from a tensor, say). A trip count may be one: `foreach i in [n]`.",
    "CQ0210": "A constant index into an mdspan, ituple or bounded ituple (`s(i)`) is outside "
              "its rank. Indices start at 0.",
    "CQ0211": "A `void` function returns a value.",
    "CQ0212": "A function that declares a return type has no `return` of a value.",
    "CQ0213": "A name of one kind (a bounded variable, a fragment, a future) is used in a way "
              "only another kind supports, such as `.span` on a loop variable.",
    "CQ0214": "The element type has no torch dtype, so the Triton backend cannot pass or "
              "store it (sub-byte, fp6 and fp4 types).",
    "CQ0215": "A constant expression (a shape, bound or `cdiv`) divides by zero.",
    "CQ0216": "An ituple is written with braces, `{16, 32}`; square brackets make an mdspan.",
    "CQ0217": "An mdspan is declared with `:`, as in `mdspan<2> s : [16, 32];`, not with `=`.",
    "CQ0218": "An `ituple<N>` or `mdspan<N>` declaration states a rank that its initial "
              "value does not have.",
    "CQ0219": "Parameters live in global memory; `shared` and `local` buffers are declared "
              "inside a `parallel` block instead.",
    "CQ0301": "`chunkat` takes one tiling argument per dimension of the data (use `_` to "
              "keep a dimension whole).",
    "CQ0302": "A `chunkat` tiling factor (the bound of its argument) is larger than the "
              "dimension it splits, or not positive.",
    "CQ0303": "A `subspan` extent is larger than the dimension of the data it is taken from.",
    "CQ0304": "A constant tile index of `.at(...)` or `.from(...)`, or a constant element "
              "index, is past the last tile or element of its dimension.",
    "CQ0305": "An element access `x.at(...)` gives a different number of indices than `x` "
              "has dimensions.",
    "CQ0306": "A buffer dimension or tile extent is zero or negative.",
    "CQ0307": "Buffers declared inside a `parallel` block need dimensions that are constants "
              "when the kernel is compiled; parameter dimensions qualify (the function is "
              "then compiled per call with their values).",
    "CQ0308": "`span_as` reshapes data without moving it, so the new shape must have "
              "exactly as many elements as the old one.",
    "CQ0309": "Element-wise arithmetic on shapes or ituples needs operands of the same rank "
              "(or a scalar).",
    "CQ0310": "`chunkat` over a `cdiv(size, tile)` bound is read as tiles of `tile` "
              "elements with a masked last tile; the reference compiler computes "
              "`size / cdiv(size, tile)` instead, which differs when `tile` does not "
              "divide `size`. A note, not a warning: this compiler's reading covers "
              "every element for every size (the last tile is masked), so nothing is wrong "
              "with the program here; the note marks where it would tile differently under "
              "the reference compiler (whose literal tiles can leave trailing elements "
              "uncovered). `croqtile check` lists notes; compiling does not raise them as "
              "Python warnings, so kernels such as the seed GEMM compile silently.",
    "CQ0311": "A list (view extents, `.at` indices, a `parallel` bound list, `cdiv` "
              "arguments, ...) has a different number of entries than it needs.",
    "CQ0317": "`.sqz()` drops the unit dimensions of a tile whose extents the chain "
              "spelled out (`.subspan`, `.view` or `.span_as`); after a `.chunkat` alone the "
              "extents are derived from the bounds, and the reference compiler rejects the "
              "squeeze there, so this compiler does too.",
    "CQ0312": "The buffer a function returns does not have the declared return shape.",
    "CQ0401": "A DMA copies bytes and does not convert, so source and destination must have "
              "the same element type.",
    "CQ0402": "Source and destination of a DMA must have the same rank.",
    "CQ0403": "The static shapes of a DMA's source and destination disagree in a way a "
              "masked copy cannot cover.",
    "CQ0404": "The DMA destination has fewer elements than the source.",
    "CQ0405": "`=> shared` and `=> local` allocate device memory, which exists only inside a "
              "`parallel` block.",
    "CQ0406": "`.load` exists only for TMA (`tma.load`); the DMA engine copies with "
              "`dma.copy`.",
    "CQ0407": "Shared-memory swizzles come in 32, 64 and 128 bytes.",
    "CQ0440": "A TMA copy can ask for its tile to be promoted into L2 in 64-, 128- or "
              "256-byte lines; no other size exists (the Triton backend ignores the hint but "
              "checks the value).",
    "CQ0408": "A `dma.transp` permutation or `dma.pad` list needs one entry per dimension "
              "of the data.",
    "CQ0409": "The `dma.transp` layout must list every dimension `0..rank-1` exactly once.",
    "CQ0410": "`.data` reads the destination of a DMA future; this name is not one.",
    "CQ0411": "An asynchronous copy must be named (`f = dma.copy.async ...`) so that it can "
              "be waited, or be bound to an event with `after`.",
    "CQ0412": "A synchronous copy is complete when its statement ends; only `.async` "
              "futures can be waited.",
    "CQ0413": "Every asynchronous copy must be waited (or bound to an event) before the "
              "function ends, otherwise its data may never arrive.",
    "CQ0414": "TMA moves tiles between global and shared memory only (`tma.load`: global to "
              "shared).",
    "CQ0415": "A TMA box (tile) shape is encoded on the host before the kernel starts, so it "
              "may depend on parameters and constants but not on values computed in the "
              "kernel.",
    "CQ0417": "An asynchronous future is waited twice in the same block; each async copy is "
              "waited exactly once.",
    "CQ0418": "A `dma.any` placeholder future is declared but never used.",
    "CQ0419": "`swap` exchanges two names of the same kind declared in the same scope (two "
              "futures, both async or both not).",
    "CQ0420": "A constant `select` index is not smaller than the number of choices.",
    "CQ0421": "A TMA copy is issued once per block or per warpgroup, so its tile cannot "
              "depend on a warp or thread index.",
    "CQ0422": "The eviction hints `.evict_first` and `.evict_last` exist only on `tma.load`.",
    "CQ0423": "`trigger e after f` binds an event to the completion of an asynchronous TMA "
              "load into shared memory; other futures, and futures already waited, "
              "cannot complete an event.",
    "CQ0424": "A shared buffer written with one swizzle is read by `mma.load` with another; "
              "on the reference target the operand would be read scrambled.",
    "CQ0425": "`.zfill` zeroes the part of the destination the source does not cover; when "
              "both have the same shape it does nothing.",
    "CQ0426": "The copy fills only part of its destination and leaves the rest undefined; "
              "add `.zfill` when the whole destination is read afterwards.",
    "CQ0501": "MMA operands must be matrices (rank 2) whose shape is known when compiling.",
    "CQ0502": "The K extents of the A and B operands differ under the layout suffixes "
              "(`row`: K is the second dimension of the tile, `col`: the first).",
    "CQ0522": "`[[schedule(k_tiles(...))]]` orders the K tiles an MMA takes; every tile "
              "index from 0 must appear exactly once.",
    "CQ0503": "An accumulator keeps the `[M, N]` shape of its first MMA; a later MMA into it "
              "produces a different shape.",
    "CQ0504": "The combination of operand and accumulator element types is not one the "
              "tensor cores support (for example bf16 operands need an f32 accumulator).",
    "CQ0505": "Only accumulators (from `mma.fill` or `mma.load` into an accumulator) can be "
              "accumulated into, re-filled or stored; operand fragments cannot.",
    "CQ0506": "An accumulator is created but no MMA ever accumulates into it.",
    "CQ0507": "The `mma.store` destination does not have the accumulator's shape (`[N, M]` "
              "for `mma.store.transp`).",
    "CQ0508": "MMA statements take fragments made by `mma.fill` or `mma.load` where an "
              "accumulator or fragment is expected; this name is something else.",
    "CQ0509": "The tensor cores of the target GPU do not take operands of this element type "
              "(fp8 MMA needs sm_89 or newer).",
    "CQ0510": "MMA inside a `group-4` (warpgroup) level is Hopper's warpgroup MMA and needs "
              "sm_90 or newer.",
    "CQ0511": "2:4 sparse MMA compresses K in groups of four, so K must be a multiple of 4.",
    "CQ0513": "A 2:4 sparse MMA multiplies a packed A, whose kept values the metadata "
              "operand locates: `mma.LA.LB.sp acc, a_packed, b, meta` needs all four operands.",
    "CQ0514": "The metadata of a 2:4 sparse MMA is u8 `[M, K/8]` (K rounded up to 8): per "
              "row, one 4-bit entry `i0 | i1 << 2` for each group of four columns of K, two "
              "entries a byte (layout in `croqtile.sparse`).",
    "CQ0515": "A warpgroup (`group-4`) sparse MMA takes its metadata from registers: bring "
              "it in with `mma.load`, then pass the fragment.",
    "CQ0512": "The per-row scale of a scaled MMA has one value per row of the accumulator: "
              "shape `[M, 1]` or `[1, M]`.",
    "CQ0560": "`copy(dst, src)` needs a destination of the source's shape; "
              "`reduce_max/reduce_sum(dst, src, d)` one of the source's shape without "
              "dimension `d` (a row maximum of a [64, 32] accumulator is a `frag f32[64]`).",
    "CQ0550": "`frag mc[2][3] {v};` declares an array of accumulators; MMA statements work on "
              "one of them at a time, named with its indices.",
    "CQ0601": "A `parallel` bound is zero or negative.",
    "CQ0602": "The same variable name is used twice in one `parallel` statement.",
    "CQ0603": "An unannotated `parallel` level sits where more than one hardware level "
              "(`group-4`, `group`) would fit; annotate it.",
    "CQ0604": "The thread levels of one block (group-4, group and thread bounds together) "
              "ask for more than 1024 threads.",
    "CQ0605": "When a `group` (warp) or `group-4` (warpgroup) level exists, the threads of a "
              "block must fill whole warps (32) or warpgroups (128).",
    "CQ0606": "A statement appears where it has no meaning: `return` inside a `parallel` "
              "block, `break`/`continue` outside a loop, `call`, `inthreads` or `yield` "
              "outside a `parallel` block.",
    "CQ0607": "`shared` and `local` buffers are declared inside a `parallel` block, `global` "
              "ones outside of every `parallel` block.",
    "CQ0608": "A `parallel` bound must be an integer.",
    "CQ0609": "Parallel levels nest from coarse to fine (block > group-4 > group > thread); "
              "a coarser level cannot sit inside a finer one.",
    "CQ0610": "The thread-side levels of a block need bounds that are constants when the "
              "kernel is compiled; parameter dimensions qualify (the function is then "
              "compiled per call with their values).",
    "CQ0611": "An `assert` whose condition is known when compiling evaluates to false.",
    "CQ0612": "The shared buffers of one kernel need more shared memory than one block of "
              "the target GPU has.",
    "CQ0623": "`: device(name)` picks the device that runs the kernels inside; the names "
              "are those the reference compiler knows (`cpu`, `gpu`, `hetero`). Any other "
              "name is most likely a typo.",
    "CQ0613": "`inthreads` selects some of the parallel instances, so its predicate must "
              "depend on a parallel variable.",
    "CQ0706": "A `call` names a `__device__` function of the same file, which the Triton "
              "backend inlines when its body is one `return` of an expression over warp "
              "shuffles, atomics and math or bit intrinsics; this helper is not of that form "
              "(the message says what stops it).",
    "CQ0707": "A warp shuffle reads the value another lane holds. A Triton program holds all "
              "lanes of a `: thread` level as one tensor axis, so the shuffle becomes a "
              "gather along that axis; it needs a `: thread` level with one variable around "
              "the call.",
    "CQ0708": "`__cpp__` pastes CUDA C++ into the generated code of the reference compiler. A "
              "Triton kernel is Python, so CUDA inside a kernel cannot run there.",
    "CQ0709": "Host code of a `__co__` function runs as Python between the launches; a "
              "`__cpp__` block there (an L2 policy, a stream setting) is left out.",
    "CQ0701": "The program is valid Croqtile, but the Triton backend cannot lower this "
              "construct yet.",
    "CQ0702": "The construct is valid Croqtile, but Triton has no equivalent (for example "
              "a grid-wide barrier).",
    "CQ0703": "The Triton backend fuses the MMAs of all warps into one `tl.dot`; that needs "
              "operand offsets that are affine in the parallel and loop indices.",
    "CQ0704": "Triton tiles have shapes fixed when the kernel is compiled; this tile's "
              "extent is only known at run time, and nothing bounds it (an extent such as "
              "`(T < rest) ? T : rest` or `c ? 2 : 3` is bounded: the tile takes the bound "
              "and masks the rest).",
    "CQ0705": "A compile option that reshapes the launch (stream_k splits the K loop of the "
              "last wave of tiles over all SMs; backend='cuda' replaces a plain GEMM by a "
              "hand-written kernel) needs a kernel of the shape it can rewrite; this one is "
              "not, and the option is refused rather than ignored.",
    "CQ0755": "Triton has no warp roles, so producer and consumer roles are serialised "
              "into one loop; that is only possible for the ring shape in the hint (or "
              "roles without loops), where the serial order provably reads what the "
              "protocol would have delivered.",
    "CQ0756": "No order of the roles lets this wait find its trigger: on the GPU every "
              "role would wait for another forever.",
    "CQ0901": "A bug inside the compiler, reported instead of a Python traceback.",
}
MEANINGS.update(s5000.MEANINGS)
