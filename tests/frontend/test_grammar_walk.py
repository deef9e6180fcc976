"""A walk over the grammar (spec 4): every statement form and expression form in a small
``__co__`` program. Each either compiles -- and then computes the expected result on the
CPU (Triton's interpreter) -- or is rejected with diagnostics that are not internal errors
(CQ0901) and point at a line of the program. A last test checks that the walk reaches
every statement and expression class of the syntax tree, so a new form cannot be
forgotten."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.frontend import syntax as ast
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.parser import parse_program
from croqtile.frontend.regions import find_co_functions
from croqtile.frontend.source import Source, SourceMap

from ..data.manifest import masked_rows
from ..e2e.checks import close, poison, random

Args = dict[str, Any]
Expect = Callable[[Args], dict[str, torch.Tensor]]

T = torch.arange(16, dtype=torch.float64)  # the thread index of the standard program


@dataclass(frozen=True)
class Form:
    """A program showing one form; ``expect`` maps the inputs to the expected value of
    each output (``"result"`` for the returned value), float64, NaN where unwritten."""

    name: str
    source: str
    expect: Expect | None = None
    args: Callable[[], Args] = field(default=lambda: standard_args())
    tolerance: float | None = None


def standard_args(out_fill: int | None = None) -> Args:
    out = torch.full((16,), out_fill, dtype=torch.int32) if out_fill is not None else \
        poison(torch.empty(16, dtype=torch.int32))
    return {"a": random((16,), torch.int32), "out": out, "h": random((16, 16), torch.float16),
            "c": poison(torch.empty(16, 16))}


def program(thread: str = "", block: str = "", host: str = "") -> str:
    """The standard program: statements at host level, in one block and in its 16
    threads (index ``t``); ``a`` is read, ``out`` and ``c`` are written."""
    threads = f"    parallel t by 16 : thread {{\n      {thread}\n    }}\n" if thread else ""
    return ("__co__ void walk(global s32 [16] a, global s32 [16] out, global f16 [16, 16] h,\n"
            "                 global f32 [16, 16] c) {\n"
            f"  {host}\n"
            "  parallel p by 1 : block {\n"
            f"    {block}\n"
            f"{threads}"
            "  }\n"
            "}\n")


def copy_args(n: int = 16) -> Callable[[], Args]:
    """Inputs of a program ``walk(global s32 [n] a, global s32 [n] out)``."""
    return lambda: {"a": random((n,), torch.int32),
                    "out": poison(torch.empty(n, dtype=torch.int32))}


def out_is(fn: Callable[[torch.Tensor], torch.Tensor]) -> Expect:
    """``out`` is ``fn(a)`` (``a`` as float64)."""
    return lambda args: {"out": fn(args["a"].double())}


def c_is(fn: Callable[[torch.Tensor], torch.Tensor]) -> Expect:
    """``c`` is ``fn(h)`` (``h`` as float64)."""
    return lambda args: {"c": fn(args["h"].double())}


COPY = "out.at(t) = a.at(t);"
SAME = out_is(lambda a: a)


def expr(name: str, text: str, fn: Callable[[torch.Tensor], torch.Tensor], before: str = "",
         host: str = "") -> Form:
    """An expression form: ``out.at(t) = text`` in every thread."""
    return Form(name, program(f"{before} out.at(t) = {text};", host=host), out_is(fn))


MMA = "mc = mma.fill.f32 0.0f; ma = mma.load h; mb = mma.load h;"


def mma(body: str, fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        name: str = "", tolerance: float = 1e-2) -> Form:
    return Form(name or body, program(block=f"{MMA} {body}"), c_is(fn) if fn else None,
                tolerance=tolerance)


def halves_swapped(a: torch.Tensor) -> torch.Tensor:
    return torch.cat([a[8:], a[:8]])


def returns(source: str, expect: Callable[[torch.Tensor], torch.Tensor],
            name: str) -> Form:
    """A function ``walk(s32 [16] a)`` whose result is checked."""
    return Form(name, source, lambda args: {"result": expect(args["a"].double())},
                args=lambda: {"a": random((16,), torch.int32)})


STATEMENTS = [
    # ---- blocks and declarations (4.2, 4.3)
    Form("empty statement", program(f"; {COPY} ;"), SAME),
    Form("nested block", program(f"{{ {{ {COPY} }} }}"), SAME),
    Form("host buffer with initialiser", program("out.at(t) = tmp.at(t) + a.at(t);",
                                                 host="s32 [a.span] tmp{7};"), out_is(lambda a: a + 7)),
    Form("shared buffer", program("out.at(t) = buf.at(t) * 2;",
                                  "shared s32 [16] buf; dma.copy a => buf;"), out_is(lambda a: a * 2)),
    Form("local buffer", program("out.at(t) = buf.at(t) + 1;",
                                 "local s32 [16] buf; dma.copy a => buf;"), out_is(lambda a: a + 1)),
    Form("buffer array", program(
        "if (t < 8) out.at(t) = halves[1].at(t); else out.at(t) = halves[0].at(t - 8);",
        "shared s32 [8] halves[2]; dma.copy a.subspan(8).at(0) => halves[0];"
        " dma.copy a.subspan(8).at(1) => halves[1];"), out_is(halves_swapped)),
    Form("element writes into a shared buffer", program(
        "buf.at(t) = a.at(t) + 1; out.at(t) = buf.at(t);", "shared s32 [16] buf;"),
        out_is(lambda a: a + 1)),
    Form("frag declaration", program(COPY, "frag f32 [16, 16] fr;"), SAME),
    Form("scalar declarations", program("int k = 3, m = 2; out.at(t) = a.at(t) * k + m;"),
         out_is(lambda a: a * 3 + 2)),
    Form("scalar brace initialiser", program("int k{4}; out.at(t) = a.at(t) + k;"),
         out_is(lambda a: a + 4)),
    Form("float scalar", program("f32 x = 1.5f; out.at(t) = __to<s32>(__to<f32>(a.at(t)) * x);"),
         out_is(lambda a: (a * 1.5).trunc())),
    Form("bool scalar", program("bool pos = a.at(t) > 0; out.at(t) = pos ? 1 : 0;"),
         out_is(lambda a: (a > 0).double())),
    Form("mutable scalar", program("mutable int s = 0; s += a.at(t); s *= 2; out.at(t) = s;"),
         out_is(lambda a: a * 2)),
    Form("untyped mutable scalar", program("mutable s = 1; s = s + a.at(t); out.at(t) = s;"),
         out_is(lambda a: a + 1)),
    Form("host scalar", program("out.at(t) = a.at(t) + k;", host="int k = 16 / 4;"),
         out_is(lambda a: a + 4)),
    Form("shape declaration", program("out.at(t) = a.at(t) + |sp|;", host="sp : [4, 4];"),
         out_is(lambda a: a + 16)),
    Form("mdspan declaration", program("out.at(t) = a.at(t) + sp(1);",
                                       host="mdspan<2> sp : [4, 5];"), out_is(lambda a: a + 5)),
    Form("derived shape", program("out.at(t) = a.at(t) + |sp2|;",
                                  host="sp : [4, 8]; mdspan sp2 : sp [(0) * 2, (1) / 2];"),
         out_is(lambda a: a + 32)),
    Form("ituple declaration", program("out.at(t) = a.at(t) * tup(0) + tup(1);",
                                       host="ituple tup = {2, 5};"), out_is(lambda a: a * 2 + 5)),
    Form("derived ituple", program("out.at(t) = a.at(t) + t2(0) + t2(1);",
                                   host="ituple tup = {2, 5}; ituple<2> t2 = tup {(1), 7};"),
         out_is(lambda a: a + 12)),
    Form("event declaration", program(COPY, "shared event e;"), SAME),

    # ---- assignments (4.3)
    Form("assignment declares", program("v = a.at(t) + 1; out.at(t) = v;"), out_is(lambda a: a + 1)),
    Form("several assignments", program("x = a.at(t), y = x * 2; out.at(t) = y;"),
         out_is(lambda a: a * 2)),
    Form("compound element assignments", program(
        "out.at(t) = a.at(t); out.at(t) += 3; out.at(t) -= 1; out.at(t) *= 2; out.at(t) /= 2;"
        " out.at(t) %= 7;"), out_is(lambda a: torch.fmod(a + 2, 7))),
    Form("compound assignment with a space", program(
        "mutable int s = a.at(t); s + = 1; out.at(t) = s;"), out_is(lambda a: a + 1)),
    Form("postfix increments", program("mutable int s = a.at(t); s++; s++; s--; out.at(t) = s;"),
         out_is(lambda a: a + 1)),
    Form("prefix increments", program("mutable int s = a.at(t); ++s; --s; --s; out.at(t) = s;"),
         out_is(lambda a: a - 1)),
    Form("increment in an expression", program("mutable int s = a.at(t); out.at(t) = ++s * 2;"),
         out_is(lambda a: 2 * a + 2)),
    Form("view alias", program("out.at(t) = f.data.at(t % 8);",
                               "v = a.subspan(8).at(1); f = dma.copy v => shared;"),
         out_is(lambda a: a[8:].repeat(2))),

    # ---- calls, assert, print (4.7)
    Form("atomic statement", program("__atomic_add(out.at(0), a.at(t));"),
         lambda args: {"out": torch.cat([args["a"].double().sum().reshape(1), torch.zeros(15)])},
         args=lambda: standard_args(out_fill=0)),
    Form("atomic value", program("old = __atomic_max(out.at(0), a.at(t));"),
         lambda args: {"out": torch.cat([args["a"].double().max().clamp(min=0).reshape(1),
                                         torch.zeros(15)])},
         args=lambda: standard_args(out_fill=0)),
    Form("atomic compare-and-swap", program("__atomic_cas(&out.at(t), 0, a.at(t));"), SAME,
         args=lambda: standard_args(out_fill=0)),
    Form("intrinsic call", program(f"vendor_op(t); {COPY}"), SAME),
    Form("external call", program(f"call helper::run<4>(t, nullptr); {COPY}"), SAME),
    Form("external call value", program("r = call twice(a.at(t)); out.at(t) = r;"),
         out_is(lambda a: a * 2)),
    Form("device assert", program(f'assert(a.at(t) < 100, "small"); {COPY}'), SAME),
    Form("host assert", program(COPY, host='assert(a.span(0) == 16, "sixteen");'), SAME),
    Form("print", program(f'print("value", a.at(t)); {COPY}'), SAME),
    Form("println", program(f"println(t, a.at(t)); {COPY}"), SAME),
    Form("print at compile time", program(COPY, host='print!("compiling"); println!(16);'), SAME),
    Form("cpp code", program(f'__cpp__("int unused = 0;"); {COPY}'), SAME),
    Form("inline assembly", program(f'asm("nop"); {COPY}'), SAME),
    Form("volatile inline assembly",
         program(f'__asm__ volatile("mov.u32 %0, %1;" : "=r"(x) : "r"(y)); {COPY}'), SAME),
    Form("sync shared", program(COPY, "sync.shared;"), SAME),
    Form("sync global and local", program(COPY, "sync.global; sync.local;"), SAME),
    Form("barrier", program(COPY, "sync.barrier : block;"), SAME),
    Form("fence", program(COPY, "sync.fence : block <shared>;"), SAME),
    Form("buffer map", program(COPY, "m = a.chunkat(p).map<shared>(1, 2);"), SAME),

    # ---- returns (4.2)
    returns("__co__ s32 [16] walk(s32 [16] a) {\n  s32 [16] r;\n  parallel t by 16\n"
            "    r.at(t) = a.at(t) + 1;\n  return r;\n}\n", lambda a: a + 1, "return data"),
    returns("__co__ auto walk(s32 [16] a) {\n  s32 [a.span] r;\n  parallel t by 16\n"
            "    r.at(t) = a.at(t) * 3;\n  return r;\n}\n", lambda a: a * 3, "return auto"),
    returns("__co__ int walk(s32 [N] a) {\n  return N * 2;\n}\n", lambda a: torch.tensor(32.0),
            "return scalar"),
    Form("return void", program(COPY) + "__co__ void nothing() {\n  return;\n}\n", SAME),

    # ---- loops and conditions (4.4)
    Form("break", program("mutable int s = 0; foreach k in [8] { if (k == 3) break; s += 1; }"
                          " out.at(t) = s;"), out_is(lambda a: torch.full((16,), 3.0))),
    Form("continue", program("mutable int s = 0; foreach k in [8] { if (k % 2 == 0) continue;"
                             " s += k; } out.at(t) = s;"), out_is(lambda a: torch.full((16,), 16.0))),
    Form("yield", program("out.at(t) = 0; if (t > 7) yield; out.at(t) = a.at(t);"),
         out_is(lambda a: torch.where(T > 7, 0.0, a))),
    Form("with and foreach over its variable", program(
        "mutable int s = 0; with k in [4] { foreach k s += k; } out.at(t) = s + a.at(t);"),
        out_is(lambda a: a + 6)),
    Form("with braced variables", program(
        "mutable int s = 0; with {i, j} in [2, 3] { foreach i, j s += i * j; } out.at(t) = s;"),
        out_is(lambda a: torch.full((16,), 3.0))),
    Form("with where", program(
        "mutable int s = 0; with i in [4], j in [4] where i <-> j { foreach i s += 1; }"
        " out.at(t) = s;"), out_is(lambda a: torch.full((16,), 4.0))),
    Form("foreach in a shape", program("mutable int s = 0; foreach k in [4] s += k; out.at(t) = s;"),
         out_is(lambda a: torch.full((16,), 6.0))),
    Form("foreach in shape arithmetic", program(
        "mutable int s = 0; foreach k in 16 / 4 s += 1; out.at(t) = s;"),
        out_is(lambda a: torch.full((16,), 4.0))),
    Form("foreach in a span", program(
        "mutable int s = 0; foreach k in a.span s += a.at(k); out.at(t) = s;"),
        out_is(lambda a: a.sum().expand(16))),
    Form("foreach with a tuple name", program(
        "mutable int s = 0; foreach it = {i, j} in [2, 2] s += i + j; out.at(t) = s;"),
        out_is(lambda a: torch.full((16,), 4.0))),
    Form("foreach ranges", program(
        "mutable int s = 0; with k in [8] { foreach k(1:) s += k; foreach k(:-1) s += 1;"
        " foreach j = k(::2) s += j; } out.at(t) = s;"), out_is(lambda a: torch.full((16,), 47.0))),
    Form("last index after a loop", program(
        "with k in [8] { foreach k(:-1) out.at(t) = 0; out.at(t) = a.at(k(-1)) + t; }"),
        out_is(lambda a: a[7] + T)),
    Form("foreach unroll", program("mutable int s = 0; foreach k in [4] : unroll s += k;"
                                   " out.at(t) = s;"), out_is(lambda a: torch.full((16,), 6.0))),
    Form("while", program("mutable int i = 0; while (i < 5) i += 1; out.at(t) = i + a.at(t);"),
         out_is(lambda a: a + 5)),
    Form("if else", program("if (a.at(t) > 0) out.at(t) = 1; else out.at(t) = 2;"),
         out_is(lambda a: torch.where(a > 0, 1.0, 2.0))),
    Form("else if chain", program("if (a.at(t) > 3) out.at(t) = 3; else if (a.at(t) < -3) out.at(t) = -3;"
                                  " else out.at(t) = a.at(t);"), out_is(lambda a: a.clamp(-3, 3))),
    Form("if on a call", program(f"if (call probe(t)) {{ }} {COPY}"), SAME),
    Form("inthreads", program("out.at(t) = 0; inthreads (t < 4) out.at(t) = a.at(t);"),
         out_is(lambda a: torch.where(T < 4, a, 0.0))),
    Form("inthreads async", program("out.at(t) = 0; inthreads.async (t < 4) out.at(t) = a.at(t);"),
         out_is(lambda a: torch.where(T < 4, a, 0.0))),
    Form("apply", program(block=f"{MMA} mma.row.col mc, ma, mb; apply {{i, j}} in mc.span "
                          "{ mc.at(i, j) = 1.0f; } mma.store mc, c;"),
         c_is(lambda h: torch.ones(16, 16))),

    # ---- parallel (4.4)
    Form("group level", "__co__ void walk(global s32 [64] a, global s32 [64] out) {\n"
         "  parallel p by 1 : block {\n    parallel g by 2 : group {\n"
         "      parallel t by 32 : thread\n        out.at(g # t) = a.at(g # t);\n    }\n  }\n}\n",
         SAME, args=copy_args(64)),
    Form("group-4 level", "__co__ void walk(global s32 [256] a, global s32 [256] out) {\n"
         "  parallel p by 1 : block {\n    parallel g by 2 : group-4 {\n"
         "      parallel t by 128 : thread\n        out.at(g # t) = a.at(g # t);\n    }\n  }\n}\n",
         SAME, args=copy_args(256)),
    Form("two levels in one statement", "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  parallel p by 2 : block, t by 8 : thread\n    out.at(p # t) = a.at(p # t);\n}\n",
         SAME, args=copy_args()),
    Form("braced variables with a tuple name",
         "__co__ void walk(global s32 [4, 4] a, global s32 [4, 4] out) {\n"
         "  parallel pt = {i, j} by [4, 4] : block\n    out.at(pt) = a.at(i, j) + 1;\n}\n",
         lambda args: {"out": args["a"].double() + 1},
         args=lambda: {"a": random((4, 4), torch.int32),
                       "out": poison(torch.empty(4, 4, dtype=torch.int32))}),
    Form("default level", "__co__ s32 [16] walk(s32 [16] a) {\n  s32 [16] out;\n"
         "  parallel t by 16\n    out.at(t) = a.at(t) * 2;\n  return out;\n}\n",
         lambda args: {"result": args["a"].double() * 2},
         args=lambda: {"a": random((16,), torch.int32)}),
    Form("one bound in brackets", "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  parallel p by [1] : block {\n    parallel t by 16 : thread\n      out.at(t) = a.at(t);\n"
         "  }\n}\n", SAME, args=copy_args()),
    Form("anonymous parallel variable", "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  parallel by 1 : block {\n    parallel t by 16 : thread\n      out.at(t) = a.at(t);\n"
         "  }\n}\n", SAME, args=copy_args()),
    Form("cluster level", "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  parallel q by 1 : cluster {\n    parallel p by 1 : block {\n"
         "      parallel t by 16 : thread\n        out.at(t) = a.at(t);\n    }\n  }\n}\n",
         SAME, args=copy_args()),
    Form("launch bounds and cooperative blocks",
         "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  [[launch_bounds(16, 1)]] [[maxnreg(64)]]\n  parallel p by 1 : block<cooperative> {\n"
         "    parallel t by 16 : thread\n      out.at(t) = a.at(t);\n  }\n}\n",
         SAME, args=copy_args()),
    Form("asynchronous parallel on a stream",
         "__co__ void walk(global s32 [16] a, global s32 [16] out, stream st) {\n"
         "  parallel.async<st> p by 1 : block {\n    parallel t by 16 : thread\n"
         "      out.at(t) = a.at(t);\n  }\n}\n"),
    Form("device level", "__co__ void walk(global s32 [16] a, global s32 [16] out) {\n"
         "  parallel d by 1 : device {\n    parallel p by 1 : block {\n"
         "      parallel t by 16 : thread\n        out.at(t) = a.at(t);\n    }\n  }\n}\n",
         SAME, args=copy_args()),

    # ---- DMA and TMA (4.5)
    Form("dma.copy to a fresh buffer", program("out.at(t) = f.data.at(t);",
                                               "f = dma.copy a => shared;"), SAME),
    Form("dma.copy.async and wait", program("out.at(t) = f.data.at(t);",
                                            "f = dma.copy.async a => shared; wait f;"), SAME),
    Form("dma.copy.zfill", program("out.at(t) = f.data.at(t % 8);",
                                   "f = dma.copy.zfill a.subspan(8).at(1) => shared;"),
         out_is(lambda a: a[8:].repeat(2))),
    Form("dma.copy.swiz", program("out.at(t) = buf.at(t);",
                                  "shared s32 [16] buf; dma.copy.swiz<64> a => buf;"), SAME),
    Form("dma.copy after", program("out.at(t) = g.data.at(t);",
                                   "f = dma.copy.async a => shared; g = dma.copy a => shared after f;"
                                   " wait f;"), SAME),
    Form("dma.copy to global", program(block="dma.copy a => out;"), SAME),
    Form("dma.copy into select", program(
        "out.at(t) = b1.at(t);", "shared s32 [16] b0, b1; k = 1; dma.copy a => select(k, b0, b1);"),
        SAME),
    Form("dma.copy.sp", program(COPY, "shared s32 [16] buf; dma.copy.sp<2:4> a => buf;"), SAME),
    Form("dma.pad", program("out.at(t) = f.data.at(t);",
                            "f = dma.pad<{2}, {0}, {0}, 9> a.subspan(14).at(0) => shared;"),
         out_is(lambda a: torch.cat([torch.full((2,), 9.0), a[:14]]))),
    Form("dma.transp", program("foreach j in [16] c.at(t, j) = f.data.at(t, j);",
                               "f = dma.transp<1, 0> h => shared;"), c_is(lambda h: h.T)),
    Form("tma.copy", program("out.at(t) = f.data.at(t);", "f = tma.copy a => shared;"), SAME),
    Form("tma.load", program("out.at(t) = f.data.at(t);", "f = tma.load a => shared;"), SAME),
    Form("tma.load attributes", program(
        "out.at(t) = f.data.at(t);", "f = tma.load.async.evict_first.swiz<128> a => shared; wait f;"),
        SAME),
    Form("tma.copy.multicast", program("out.at(t) = f.data.at(t);",
                                       "f = tma.copy.multicast a => shared;"), SAME),
    Form("dma.any and swap", program(
        "if (t < 8) out.at(t) = f.data.at(t); else out.at(t) = g.data.at(t - 8);",
        "f = dma.copy a.subspan(8).at(0) => shared; g = dma.any;"
        " g = dma.copy a.subspan(8).at(1) => shared; swap(f, g);"), out_is(halves_swapped)),
    Form("swap without parentheses", program(
        "if (t < 8) out.at(t) = f.data.at(t); else out.at(t) = g.data.at(t - 8);",
        "f = dma.copy a.subspan(8).at(0) => shared; g = dma.copy a.subspan(8).at(1) => shared;"
        " swap f, g;"), out_is(halves_swapped)),
    Form("rotate", program(
        "if (t < 8) out.at(t) = f.data.at(t); else out.at(t) = g.data.at(t - 8);",
        "f = dma.copy a.subspan(8).at(0) => shared; g = dma.copy a.subspan(8).at(1) => shared;"
        " rotate(f, g);"), out_is(halves_swapped)),
    Form("events and trigger", program(
        "out.at(t) = f.data.at(t);",
        "shared event e; f = tma.copy.async a => shared; trigger e after f; wait e;"), SAME),

    Form("tma.any placeholder", program(
        "out.at(t) = f.data.at(t);", "g = tma.any; f = tma.copy a => shared;"), SAME),
    Form("a future as a copy source", program(
        "out.at(t) = g.data.at(t);", "f = dma.copy a => shared; g = dma.copy f => local;"), SAME),
    Form("dma.copy to fresh global memory", program(
        "out.at(t) = f.data.at(t);", "f = dma.copy a => global;"), SAME),

    # ---- views (4.8)
    Form("chunkat", program("out.at(t) = f.data.at(t);", "f = dma.copy a.chunkat(p) => shared;"),
         SAME),
    Form("chunk at", program("out.at(t) = f.data.at(t % 8);",
                             "f = dma.copy a.chunk(2).at(1) => shared;"),
         out_is(lambda a: a[8:].repeat(2))),
    Form("subspan step at", program("out.at(t) = f.data.at(t % 4);",
                                    "f = dma.copy a.subspan(4).step(6).at(2) => shared;"),
         out_is(lambda a: a[12:].repeat(4))),
    Form("subspan of the whole dimension", program("out.at(t) = f.data.at(t);",
                                                   "f = dma.copy a.subspan(_) => shared;"), SAME),
    Form("subspan with strides", program("out.at(t) = f.data.at(t % 4);",
                                         "f = dma.copy a.subspan(4 : 3).at(0) => shared;"),
         out_is(lambda a: a[0:12:3].repeat(4))),
    Form("modspan", program("out.at(t) = f.data.at(0);",  # the remainder tile: 16 % 5 = 1
                            "f = dma.copy a.modspan(5).at(3) => shared;"),
         out_is(lambda a: a[15].expand(16))),
    Form("view from", program("out.at(t) = f.data.at(t % 4);",
                              "f = dma.copy a.view(4).from(3) => shared;"),
         out_is(lambda a: a[3:7].repeat(4))),
    Form("view with strides", program("out.at(t) = f.data.at(t % 4);",
                                      "f = dma.copy a.view(4 : 3).from(1) => shared;"),
         out_is(lambda a: a[3:15:3].repeat(4))),
    Form("span_as", program("out.at(t) = f.data.at(t / 4, t % 4);",
                            "f = dma.copy a.span_as([4, 4]) => shared;"), SAME),
    Form("sqz", program("foreach j in [16] c.at(t, j) = f.data.at(j);",
                        "f = dma.copy h.subspan(1, 16).at(3, 0).sqz() => shared;"),
         c_is(lambda h: h[3].expand(16, 16))),

    # ---- MMA (4.6)
    mma("mma.row.col mc, ma, mb; mma.store mc, c;", lambda h: h @ h),
    mma("mma.row.row mc, ma, mb; mma.store mc, c;", lambda h: h @ h.T),
    mma("mma.col.col mc, ma, mb; mma.store mc, c;", lambda h: h.T @ h),
    mma("mma.col.row mc, ma, mb; mma.store mc, c;", lambda h: h.T @ h.T),
    mma("mma.row.col mc, h, h; mma.store mc, c;", lambda h: h @ h, "views as operands"),
    Form("f16 accumulator", program(block="mc = mma.fill 0.0; ma = mma.load h; mb = mma.load h;"
                                    " mma.row.col mc, ma, mb; mma.store mc, c;"),
         c_is(lambda h: h @ h), tolerance=1e-2),
    mma("mma.fill mc, 1.0f; mma.row.col mc, ma, mb; mma.store mc, c;", lambda h: h @ h + 1,
        "re-fill"),
    mma("mx = mma.load.swiz<128> h; my = mma.load.async h; mma.row.col mc, mx, my;"
        " mma.store mc, c;", lambda h: h @ h, "mma.load attributes"),
    mma("mma.load h, ma; mma.row.col mc, ma, mb; mma.store mc, c;", lambda h: h @ h,
        "mma.load into a fragment"),
    mma("mma.row.col mc, ma, mb; mma.store.transp mc, c;", lambda h: (h @ h).T),
    mma("mma.row.col mc, ma, mb; mma.store.mask mc, c, 5, 8;", lambda h: masked_rows(h @ h, 5, 8)),
    mma("mma.row.col mc, ma, mb; mma.store.mask mc, c, 5;", lambda h: masked_rows(h @ h, 5, 16)),
    mma("mma.row.col mc, ma, mb; mma.store.async mc, c;", lambda h: h @ h),
    mma("fut = mma.row.col.async mc, ma, mb; wait fut; mma.store mc, c;", lambda h: h @ h),
    mma("mma.row.col mc, ma, mb; mma.commit; mma.store mc, c;", lambda h: h @ h),
    mma("[[schedule(k_tiles(0))]] mma.row.col mc, ma, mb; mma.store mc, c;", lambda h: h @ h),
    mma("mma.row.col mc, ma, mb; mc += 1.0f; mc *= 2.0f; mma.store mc, c;",
        lambda h: (h @ h + 1) * 2, "fragment arithmetic"),
    mma("mma.row.col.scale mc, ma, mb, c.subspan(16, 1).at(0, 0), 2.0f; mma.store mc, c;",
        name="fused scaling"),
    mma("mma.row.col mc, ma, mb; mma.scale mc, c.subspan(16, 1).at(0, 0), 2.0f;"
        " mma.store mc, c;", name="standalone scaling"),
    mma("mma.row.row.sp mc, ma, mb; mma.store mc, c;", name="sparse"),
    mma("frag accs[2]{0.0f}; mma.row.col mc, ma, mb; mma.store mc, c;", lambda h: h @ h,
        "frag fill-declaration"),
]


EXPRESSIONS = [
    expr("arithmetic", "a.at(t) * 3 + 4 - t / 2 % 3", lambda a: a * 3 + 4 - (T // 2) % 3),
    expr("comparisons", "(a.at(t) == t ? 1 : 0) + (a.at(t) != 0 ? 2 : 0) + (a.at(t) < 1 ? 4 : 0)"
         " + (a.at(t) <= 2 ? 8 : 0) + (a.at(t) > 3 ? 16 : 0) + (a.at(t) >= 4 ? 32 : 0)",
         lambda a: (a == T) * 1.0 + (a != 0) * 2.0 + (a < 1) * 4.0 + (a <= 2) * 8.0
         + (a > 3) * 16.0 + (a >= 4) * 32.0),
    expr("logic", "a.at(t) > 0 && t > 4 || a.at(t) == 0 ? 1 : 0",
         lambda a: (((a > 0) & (T > 4)) | (a == 0)).double()),
    expr("not", "!(a.at(t) > 0) ? 1 : 0", lambda a: (a <= 0).double()),
    expr("bitwise", "a.at(t) & 6 | t ^ 3",
         lambda a: (((a.long() & 6) | T.long()) ^ 3).double()),
    expr("shifts", "(a.at(t) << 2) + (t >> 1)", lambda a: a * 4 + T.long().__rshift__(1)),
    expr("complement", "~a.at(t)", lambda a: -a - 1),
    expr("compose", "a.at(p # t) + (p # t)", lambda a: a + T),
    expr("bound", "a.at(t) + #t", lambda a: a + 16),
    expr("nested ternary", "a.at(t) > 0 ? (t > 8 ? 2 : 1) : 0",
         lambda a: torch.where(a > 0, torch.where(T > 8, 2.0, 1.0), 0.0)),
    expr("extended compose", "a.at(t) + (t #+ 1) + (t #- 1)", lambda a: a + 2 * T),
    Form("rejected compose operators", program("out.at(t) = a.at(t) + (t #* 2);")),
    expr("integer literals", "a.at(t) + 0x10 + 3", lambda a: a + 19),
    expr("integer literal suffixes", "a.at(t) + 3ll", lambda a: a + 3),
    expr("float literals", "__to<s32>(__to<f32>(a.at(t)) * 1.5f + 0.5)",
         lambda a: (a * 1.5 + 0.5).trunc()),
    expr("bool literals", "true && a.at(t) > 0 ? 1 : 0", lambda a: (a > 0).double()),
    expr("inf", "__to<f32>(a.at(t)) < inf && __to<f32>(a.at(t)) > -inf ? 1 : 0",
         lambda a: torch.ones(16)),
    expr("negative literal", "a.at(t) * -2 + -1", lambda a: a * -2 - 1),
    expr("quoted conversion", '__to<"int">(a.at(t)) + 1', lambda a: a + 1),
    expr("sizes", "a.at(t) + |a.span| + |f16|", lambda a: a + 18),
    expr("size of an expression", "a.at(t) + |4 * (2 + 1)|", lambda a: a + 12),
    expr("span dimension", "a.at(t) + a.span(0)", lambda a: a + 16),
    expr("cdiv", "cdiv(a.at(t) + 20, 4)", lambda a: torch.div(a + 23, 4, rounding_mode="floor")),
    expr("math built-in", "__max(a.at(t), t) + __min(a.at(t), 0)",
         lambda a: torch.maximum(a, T) + torch.minimum(a, torch.zeros(16))),
    expr("align up", "__alignup(t, 4) + a.at(t)", lambda a: (T + 3) // 4 * 4 + a),
    expr("select", "select(1, a.at(t), t)", lambda a: T),
    expr("parenthesised", "((a.at(t) + 1) * (t - 2))", lambda a: (a + 1) * (T - 2)),
    Form("element of .data", program("out.at(t) = f.data.at(t) + f.span(0);",
                                     "f = dma.copy a => shared;"), out_is(lambda a: a + 16)),
    expr("address of an element", "__atomic_add(&out.at(t), 0) + a.at(t)", lambda a: a,
         "out.at(t) = 0;"),
    expr("tuple literal", "a.at(t) + tup(1)", lambda a: a + 2, host="ituple tup = {1, 2};"),
    expr("shape literal", "a.at(t) + |sp|", lambda a: a + 6, host="sp : [2, 3];"),
]

FUNCTIONS = [
    Form("unnamed parameter and scalar parameters",
         "__co__ s32 [16] walk(s32 [16] a, f32 [4], f16 bias, bool flag, int n) {\n"
         "  s32 [16] out;\n  parallel t by 16\n"
         "    out.at(t) = flag ? a.at(t) + n + __to<s32>(bias) : 0;\n  return out;\n}\n",
         lambda args: {"result": args["a"].double() + 5},
         args=lambda: {"a": random((16,), torch.int32), "x": torch.zeros(4), "bias": 2.0,
                       "flag": True, "n": 3}),
    Form("anonymous dimensions",
         "__co__ void walk(global s32 [?] a, global s32 [??] out) {\n"
         "  parallel t by 16\n    out.at(t) = a.at(t);\n}\n", SAME,
         args=copy_args()),
    Form("mdspan parameters",
         "__co__ void walk(global s32 mdspan<1> a, global s32 mdspan[16] out) {\n"
         "  parallel t by 16\n    out.at(t) = a.at(t);\n}\n", SAME,
         args=copy_args()),
    Form("shared parameter", "__co__ void walk(shared s32 [16] a) {\n  parallel t by 16 {}\n}\n"),
    Form("type aliases", "__co__ auto walk(half [16] a, float [16] b) {\n  float [16] out;\n"
         "  parallel t by 16\n    out.at(t) = a.at(t) + b.at(t);\n  return out;\n}\n",
         lambda args: {"result": args["a"].double() + args["b"].double()},
         args=lambda: {"a": random((16,), torch.float16), "b": random((16,), torch.float32)},
         tolerance=1e-3),
]

WALK = STATEMENTS + EXPRESSIONS + FUNCTIONS


def run(form: Form, module: croqtile.Module) -> None:
    args = form.args()
    given = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    result = module.walk(*given.values())
    expected = form.expect(args)  # type: ignore[misc]
    for name, want in expected.items():
        got = result if name == "result" else given[name]
        got = got if isinstance(got, torch.Tensor) else torch.tensor(got)
        dtype = got.dtype if got.dtype != torch.int64 else torch.int32
        close(got, want, dtype, form.tolerance)


@pytest.mark.parametrize("form", WALK, ids=lambda f: f.name)
def test_form_compiles_and_runs_or_is_diagnosed(form: Form) -> None:
    lines = form.source.count("\n") + 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(form.source, filename="walk.co")
    except croqtile.CompileError as error:
        assert error.diagnostics, "a compile error without diagnostics"
        for d in error.diagnostics:
            assert d.code != "CQ0901", d.render()
            assert d.filename == "walk.co" and 1 <= d.line <= lines, d.render()
        return
    if form.expect is not None:
        run(form, module)


def node_classes(node: Any) -> set[type]:
    """The classes of ``node`` and of every node under it."""
    found: set[type] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(item)
        elif isinstance(item, ast.Node):
            found.add(type(item))
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return found


def parse(text: str) -> ast.Program | None:
    """The syntax tree of ``text``; None when it has syntax errors (such forms are in the
    walk to show their diagnostics)."""
    reporter = Reporter(SourceMap.identity(Source(text)))
    program = parse_program(text, find_co_functions(text, reporter), reporter)
    return None if reporter.diagnostics else program


def test_the_walk_covers_every_statement_and_expression_class() -> None:
    seen: set[type] = set()
    for form in WALK:
        seen |= node_classes(parse(form.source))
    classes = [c for c in vars(ast).values() if isinstance(c, type) and c.__module__ == ast.__name__
               and issubclass(c, (ast.Stmt, ast.Expr)) and c not in (ast.Stmt, ast.Expr)]
    missing = sorted(c.__name__ for c in classes if c not in seen)
    assert missing == [], f"no form of the walk uses {missing}"
