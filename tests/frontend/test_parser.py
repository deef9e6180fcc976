"""Parser tests: the AST of every statement form, the precedence table of spec 4.9, and
syntax errors with their code, line and column."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from croqtile.frontend import syntax as ast
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.parser import (
    MAX_DEPTH, parse_expr_text, parse_function, parse_program, parse_stmt_text,
)
from croqtile.frontend.preprocessor import preprocess
from croqtile.frontend.printer import format_expr, strip_spans
from croqtile.frontend.regions import find_co_functions
from croqtile.frontend.source import NO_SPAN, Source, SourceMap, Span

DATA = Path(__file__).resolve().parents[1] / "data"

# --- building expected trees (spans are ignored by the comparison) ---------------------


def ex(value: Any) -> ast.Expr:
    """Shorthand: a str is a name, an int a literal, a node itself."""
    if isinstance(value, str):
        return ast.Ident(NO_SPAN, value)
    if isinstance(value, bool):
        return ast.BoolLit(NO_SPAN, value)
    if isinstance(value, int):
        return ast.IntLit(NO_SPAN, value, str(value))
    return value


def exs(*values: Any) -> tuple[ast.Expr, ...]:
    return tuple(ex(v) for v in values)


def n(cls: type, *args: Any, **kwargs: Any) -> Any:
    return cls(NO_SPAN, *args, **kwargs)


def lit(value: int, text: str, suffix: str = "") -> ast.IntLit:
    return n(ast.IntLit, value, text, suffix)


def flt(value: float, text: str) -> ast.FloatLit:
    return n(ast.FloatLit, value, text, text[-1] in "fF")


def bin_(op: str, lhs: Any, rhs: Any) -> ast.Binary:
    return n(ast.Binary, op, ex(lhs), ex(rhs))


def at(base: Any, *indices: Any) -> ast.ElemAccess:
    return n(ast.ElemAccess, ex(base), exs(*indices))


def idx(base: Any, index: Any) -> ast.Index:
    return n(ast.Index, ex(base), ex(index))


def sel(base: Any, index: Any) -> ast.Select:
    return n(ast.Select, ex(base), ex(index))


def mem(obj: Any, member: str) -> ast.Member:
    return n(ast.Member, ex(obj), member)


def call(name: str, *args: Any, template: tuple[Any, ...] = ()) -> ast.CallExpr:
    return n(ast.CallExpr, name, exs(*args), exs(*template))


def view(base: Any, *ops: ast.ViewOp) -> ast.View:
    return n(ast.View, ex(base), ops)


def vop(kind: str, *args: Any, strides: tuple[Any, ...] | None = None,
        step: tuple[Any, ...] | None = None, at: tuple[Any, ...] | None = None) -> ast.ViewOp:
    def opt(values: tuple[Any, ...] | None) -> tuple[ast.Expr, ...] | None:
        return None if values is None else exs(*values)
    return n(ast.ViewOp, kind, exs(*args), opt(strides), opt(step), opt(at))


def block(*stmts: ast.Stmt, braced: bool = True) -> ast.Block:
    return n(ast.Block, stmts, braced)


def one(stmt: ast.Stmt) -> ast.Block:
    return block(stmt, braced=False)


def assign(target: Any, value: Any, op: str = "=") -> ast.AssignStmt:
    return n(ast.AssignStmt, (n(ast.Assign, ex(target), op, ex(value)),))


def shape(*items: Any) -> ast.ShapeLit:
    return n(ast.ShapeLit, exs(*items))


def tup(*items: Any) -> ast.TupleLit:
    return n(ast.TupleLit, exs(*items))


def level(names: tuple[str, ...], bounds: tuple[Any, ...], lvl: str | None = None,
          **kwargs: Any) -> ast.ParallelLevel:
    return n(ast.ParallelLevel, names, exs(*bounds), lvl, **kwargs)


def item(name: str, init: ast.Expr | None = None, brace: bool = False) -> ast.ScalarItem:
    return n(ast.ScalarItem, name, init, brace)


def attr(name: str, *args: Any) -> ast.DmaAttr:
    return n(ast.DmaAttr, name, exs(*args))


X = assign("x", 1)


def reporter_for(text: str) -> Reporter:
    return Reporter(SourceMap.identity(Source(text)))


def parse_stmt(text: str) -> ast.Stmt:
    reporter = reporter_for(text)
    stmt = parse_stmt_text(text, reporter)
    assert not reporter.diagnostics, [d.render() for d in reporter.diagnostics]
    return stmt


def parse_expr(text: str) -> ast.Expr:
    reporter = reporter_for(text)
    expr = parse_expr_text(text, reporter)
    assert not reporter.diagnostics, [d.render() for d in reporter.diagnostics]
    return expr


# ----------------------------------------------------------------------------------------
# Statements (spec 4.2 - 4.7)
# ----------------------------------------------------------------------------------------

STATEMENTS: list[tuple[str, ast.Stmt]] = [
    # --- declarations (4.3) ---
    ("shared f16 [M_T, N_T] buf;",
     n(ast.SpannedDecl, "shared", "f16", exs("M_T", "N_T"), (n(ast.DeclVar, "buf"),))),
    ("local f32 [4] acc {0.0f};",
     n(ast.SpannedDecl, "local", "f32", exs(4), (n(ast.DeclVar, "acc", (), flt(0.0, "0.0f")),))),
    ("f32 [lhs.span] out;",
     n(ast.SpannedDecl, None, "f32", (mem("lhs", "span"),), (n(ast.DeclVar, "out"),))),
    ("s32 [lhs.span(0), rhs.span(1)] out;",
     n(ast.SpannedDecl, None, "s32", (sel(mem("lhs", "span"), 0), sel(mem("rhs", "span"), 1)),
       (n(ast.DeclVar, "out"),))),
    ("half [64, 64] out{0.0f}, t2[4][2];",
     n(ast.SpannedDecl, None, "f16", exs(64, 64),
       (n(ast.DeclVar, "out", (), flt(0.0, "0.0f")), n(ast.DeclVar, "t2", exs(4, 2))))),
    ("shared f16 [auto] b;", n(ast.SpannedDecl, "shared", "f16", None, (n(ast.DeclVar, "b"),))),
    ("global bfp16 [sp [(0) / 2]] g;",
     n(ast.SpannedDecl, "global", "bf16",
       (n(ast.Derive, ex("sp"), (bin_("/", n(ast.DimRef, 0), 2),), "[]"),),
       (n(ast.DeclVar, "g"),))),
    ("frag f16 [16, 16] fa, fb;",
     n(ast.SpannedDecl, None, "f16", exs(16, 16), (n(ast.DeclVar, "fa"), n(ast.DeclVar, "fb")),
       True)),
    ("int x = 1, y = 2;",
     n(ast.ScalarDecl, False, "int", (item("x", ex(1)), item("y", ex(2))))),
    ("mutable int s = 0;", n(ast.ScalarDecl, True, "int", (item("s", ex(0)),))),
    ("mutable v = 3, w{4};",
     n(ast.ScalarDecl, True, None, (item("v", ex(3)), item("w", ex(4), True)))),
    ("float h = 2.0f, z;",
     n(ast.ScalarDecl, False, "f32", (item("h", flt(2.0, "2.0f")), item("z")))),
    ("bool ok{true};", n(ast.ScalarDecl, False, "bool", (item("ok", ex(True), True),))),
    ("int r = call f(x);",
     n(ast.ScalarDecl, False, "int", (item("r", n(ast.ExternCall, ("f",), (), exs("x"))),))),
    ("sp : [7, 8];", n(ast.MdspanDecl, "sp", shape(7, 8))),
    ("mdspan<2> sp : [7, 8] + {2, 0};",
     n(ast.MdspanDecl, "sp", bin_("+", shape(7, 8), tup(2, 0)), 2, True)),
    ("mdspan sp : a.span [(1), (0) + 1];",
     n(ast.MdspanDecl, "sp",
       n(ast.Derive, mem("a", "span"), (n(ast.DimRef, 1), bin_("+", n(ast.DimRef, 0), 1)), "[]"),
       None, True)),
    ("ituple<3> t = {1, 2, 3};", n(ast.ItupleDecl, "t", tup(1, 2, 3), 3)),
    ("ituple t = u {(0), 5};",
     n(ast.ItupleDecl, "t", n(ast.Derive, ex("u"), (n(ast.DimRef, 0), ex(5)), "{}"))),
    ("shared event e;", n(ast.EventDecl, "shared", None, (n(ast.EventVar, "e"),))),
    ("shared event<128> full[2], empty[2] = ready;",
     n(ast.EventDecl, "shared", 128,
       (n(ast.EventVar, "full", exs(2)), n(ast.EventVar, "empty", exs(2), True)))),
    ("event e;", n(ast.EventDecl, None, None, (n(ast.EventVar, "e"),))),
    (";", n(ast.Empty)),
    # --- assignments (4.3) ---
    ("x = 1;", X),
    ("stage = iv_k % 4, k = 2;",
     n(ast.AssignStmt, (n(ast.Assign, ex("stage"), "=", bin_("%", "iv_k", 4)),
                        n(ast.Assign, ex("k"), "=", ex(2))))),
    ("sc = scales.subspan(64, 1).at(bm, k);",
     assign("sc", view("scales", vop("subspan", 64, 1, at=("bm", "k"))))),
    ("mc += bias;", assign("mc", "bias", "+=")),
    ("a + = b;", assign("a", "b", "+=")),
    ("s -= 1;", assign("s", 1, "-=")),
    ("s *= 2;", assign("s", 2, "*=")),
    ("s /= 2;", assign("s", 2, "/=")),
    ("s %= 2;", assign("s", 2, "%=")),
    ("out.at(i, j) += l.data.at(i, k) * r;",
     assign(at("out", "i", "j"), bin_("*", at(mem("l", "data"), "i", "k"), "r"), "+=")),
    ("buf[s] = 0;", assign(idx("buf", "s"), 0)),
    ("tiles[0][1].at(2) = 0;", assign(at(idx(idx("tiles", 0), 1), 2), 0)),
    ("t = {1, 2};", assign("t", tup(1, 2))),
    ("t2 = t {(0), 5};", assign("t2", n(ast.Derive, ex("t"), (n(ast.DimRef, 0), ex(5)), "{}"))),
    ("x = select(k, f0, f1);", assign("x", n(ast.SelectExpr, ex("k"), exs("f0", "f1")))),
    ("y = call ns::f<f16, 4>(a.chunkat(p), nullptr);",
     assign("y", n(ast.ExternCall, ("ns", "f"), exs("f16", 4),
                   (view("a", vop("chunkat", "p")), n(ast.NullLit))))),
    ("x++;", n(ast.ExprStmt, n(ast.Postfix, "++", ex("x")))),
    ("--x;", n(ast.ExprStmt, n(ast.Unary, "--", ex("x")))),
    ("m = a.chunkat(p).map<shared>(1, 2);",
     n(ast.BufferMap, "m = a.chunkat(p).map<shared>(1, 2)")),
    # --- calls and misc (4.7) ---
    ("call f(a, 3);", n(ast.ExprStmt, n(ast.ExternCall, ("f",), (), exs("a", 3)))),
    ('assert(a > 1, "too " "small");', n(ast.AssertStmt, bin_(">", "a", 1), "too small")),
    ('print("x", x);', n(ast.PrintStmt, False, False, (n(ast.StrLit, "x", '"x"'), ex("x")))),
    ("println!(x);", n(ast.PrintStmt, True, True, exs("x"))),
    ("__atomic_add(&out.at(i), 1);",
     n(ast.ExprStmt, call("__atomic_add", n(ast.Unary, "&", at("out", "i")), 1))),
    ("__bar_sync(1, 128);", n(ast.ExprStmt, call("__bar_sync", 1, 128))),
    ("__lib_trace(x);", n(ast.ExprStmt, call("__lib_trace", "x"))),
    ("mylib::fence();", n(ast.ExprStmt, call("mylib::fence"))),
    ("intrin<4>(x);", n(ast.ExprStmt, call("intrin", "x", template=(4,)))),
    ("vendor(x);", n(ast.ExprStmt, call("vendor", "x"))),
    ("reduce_sum(d, s, 1);", n(ast.ExprStmt, call("reduce_sum", "d", "s", 1))),
    ("all_reduce_sum(x);", n(ast.ExprStmt, call("all_reduce_sum", "x"))),
    ("copy(a, b);", n(ast.ExprStmt, call("copy", "a", "b"))),
    ("return;", n(ast.ReturnStmt, None)),
    ("return out;", n(ast.ReturnStmt, ex("out"))),
    ("return ++x;", n(ast.ReturnStmt, n(ast.Unary, "++", ex("x")))),
    ("break;", n(ast.BreakStmt)),
    ("continue;", n(ast.ContinueStmt)),
    ("yield;", n(ast.YieldStmt)),
    ('__cpp__("int a = 1;" "\\n");', n(ast.CppStmt, "int a = 1;\n")),
    ('__cpp__(R"(x = "y";)");', n(ast.CppStmt, 'x = "y";')),
    ('__asm__ volatile("mov %0, %1;" : "=r"(x) : "r"(y));',
     n(ast.AsmStmt, True, '"mov %0, %1;" : "=r"(x) : "r"(y)')),
    ('asm("nop");', n(ast.AsmStmt, False, '"nop"')),
    ("sync.shared;", n(ast.SyncStmt, "shared")),
    ("sync.global;", n(ast.SyncStmt, "global")),
    ("sync.barrier : block;", n(ast.SyncStmt, "barrier", "block")),
    ("sync.fence : group-4 <shared>;", n(ast.SyncStmt, "fence", "group-4", "shared")),
    ("wait f, full[s], e.at(k);",
     n(ast.WaitStmt, (ex("f"), idx("full", "s"), at("e", "k")))),
    ("trigger e;", n(ast.TriggerStmt, exs("e"))),
    ("trigger.cluster full[1] after f1, f2;",
     n(ast.TriggerStmt, (idx("full", 1),), exs("f1", "f2"), True)),
    ("swap(a, b);", n(ast.SwapStmt, "swap", ("a", "b"))),
    ("swap a, b;", n(ast.SwapStmt, "swap", ("a", "b"))),
    ("rotate(a, b, c);", n(ast.SwapStmt, "rotate", ("a", "b", "c"))),
    # --- parallel, with, foreach, while, if, inthreads, apply (4.4) ---
    ("parallel {i, j} by [4, 8] x = 1;",
     n(ast.Parallel, (level(("i", "j"), (4, 8), braced=True),), one(X))),
    ("parallel p by 16, q by 64 {}",
     n(ast.Parallel, (level(("p",), (16,)), level(("q",), (64,))), block())),
    ("parallel by 2 : block {}", n(ast.Parallel, (level((), (2,), "block"),), block())),
    ("parallel p by [2] : cluster {}",
     n(ast.Parallel, (level(("p",), (shape(2),), "cluster"),), block())),
    ("parallel t = {a, b} by [cdiv(M, 64), 2] : group-4 {}",
     n(ast.Parallel, (level(("a", "b"), (call("cdiv", "M", 64), 2), "group-4", tuple_name="t",
                            braced=True),), block())),
    ("parallel.async<s> p by 1 : block<cooperative>, q by 1 : device(gpu) {}",
     n(ast.Parallel, (level(("p",), (1,), "block", cooperative=True),
                      level(("q",), (1,), "device", device_name="gpu")), block(), True, "s")),
    ("[[launch_bounds(128, 1)]] [[maxnreg(64)]] parallel p by 4 : thread {}",
     n(ast.Parallel, (level(("p",), (4,), "thread"),), block(), False, None,
       (n(ast.Attribute, "launch_bounds", exs(128, 1)), n(ast.Attribute, "maxnreg", exs(64))))),
    ("with x in 6, {a, b} in [6, 17], idx = {c, d} in sp where a <-> c, b <-> d {}",
     n(ast.With, (n(ast.Within, ("x",), ex(6)), n(ast.Within, ("a", "b"), shape(6, 17), None, True),
                  n(ast.Within, ("c", "d"), ex("sp"), "idx", True)),
       block(), (("a", "c"), ("b", "d")))),
    ("foreach k in K / 16 x = 1;",
     n(ast.Foreach, (n(ast.Within, ("k",), bin_("/", "K", 16)),), one(X))),
    ("foreach {i, j} in lhs.span : unroll(4), vectorize(j, 8), unroll {}",
     n(ast.Foreach, (n(ast.Within, ("i", "j"), mem("lhs", "span"), None, True),), block(),
       (n(ast.LoopSuffix, "unroll", exs(4)), n(ast.LoopSuffix, "vectorize", exs("j", 8)),
        n(ast.LoopSuffix, "unroll", ())))),
    ("foreach index = {m, n} in [128 / #p, 256] {}",
     n(ast.Foreach, (n(ast.Within, ("m", "n"), shape(bin_("/", 128, n(ast.BoundOf, "p")), 256),
                       "index", True),), block())),
    ("foreach y(1:), y(:-1), c = k(1:-1:2), k, d(::2) {}",
     n(ast.Foreach, (n(ast.RangeItem, "y", None, ex(1), None, None, True),
                     n(ast.RangeItem, "y", None, None, lit(-1, "-1"), None, True),
                     n(ast.RangeItem, "k", "c", ex(1), lit(-1, "-1"), ex(2), True),
                     n(ast.RangeItem, "k"),
                     n(ast.RangeItem, "d", None, None, None, ex(2), True)), block())),
    ("while (x < n) { break; }", n(ast.While, bin_("<", "x", "n"), block(n(ast.BreakStmt)))),
    ("if (x) x = 1;", n(ast.If, ex("x"), one(X))),
    ("if (x) {} else x = 1;", n(ast.If, ex("x"), block(), one(X))),
    ("if (a) x = 1; else if (b) {} else ;",
     n(ast.If, ex("a"), one(X), one(n(ast.If, ex("b"), block(), one(n(ast.Empty)))))),
    ("if (a) if (b) x = 1; else ;",  # `else` binds to the nearest `if`
     n(ast.If, ex("a"), one(n(ast.If, ex("b"), one(X), one(n(ast.Empty)))))),
    ("if (call probe(x)) {}", n(ast.If, n(ast.ExternCall, ("probe",), (), exs("x")), block())),
    ("inthreads (p == 0) {}", n(ast.InThreads, bin_("==", "p", 0), block())),
    ("inthreads.async (g == 1) x = 1;", n(ast.InThreads, bin_("==", "g", 1), one(X), True)),
    ("apply {i, j} in acc.span {}", n(ast.Apply, ("i", "j"), "acc", block())),
    # --- DMA / TMA (4.5) ---
    ("f = dma.copy.async lhs.chunkat(p, _) => shared;",
     n(ast.DmaStmt, "f", "dma", "copy", view("lhs", vop("chunkat", "p", "_")),
       n(ast.StorageDest, "shared"), True)),
    ("dma.copy out_s => out.subspan(16, 16).at(bm, bn);",
     n(ast.DmaStmt, None, "dma", "copy", view("out_s"),
       view("out", vop("subspan", 16, 16, at=("bm", "bn"))))),
    ("dma.copy.swiz<32>.zfill a => b after g;",
     n(ast.DmaStmt, None, "dma", "copy", view("a"), view("b"), False,
       (attr("swiz", 32), attr("zfill")), after="g")),
    ("t = tma.load.async.evict_first.swiz<128> a => s;",
     n(ast.DmaStmt, "t", "tma", "load", view("a"), view("s"), True,
       (attr("evict_first"), attr("swiz", 128)))),
    ("tma.copy.evict_last.swizzle.multicast.promote<64>.sp<2:4> a => s;",
     n(ast.DmaStmt, None, "tma", "copy", view("a"), view("s"), False,
       (attr("evict_last"), attr("swiz"), attr("multicast"), attr("promote", 64),
        attr("sp", 2, 4)))),
    ("dma.copy.sp<2, 4> a => s;",
     n(ast.DmaStmt, None, "dma", "copy", view("a"), view("s"), False, (attr("sp", 2, 4),))),
    # [legacy] spec 12.9: `.zfill` on the source folds into the statement's attributes
    ("f = dma.copy.async a.subspan(16, 16).at(i, j).zfill => shared;",
     n(ast.DmaStmt, "f", "dma", "copy", view("a", vop("subspan", 16, 16, at=("i", "j"))),
       n(ast.StorageDest, "shared"), True, (attr("zfill"),))),
    # [legacy] spec 12.8: `.swiz<0..3>` is accepted as written
    ("dma.copy.swiz<3> a => b;",
     n(ast.DmaStmt, None, "dma", "copy", view("a"), view("b"), False, (attr("swiz", 3),))),
    ("f = dma.pad<{1, 0}, {1, 0}, {0, 0}, 0.0f>.async x => local;",
     n(ast.DmaStmt, "f", "dma", "pad", view("x"), n(ast.StorageDest, "local"), True,
       pad=n(ast.PadConfig, exs(1, 0), exs(1, 0), exs(0, 0), flt(0.0, "0.0f")))),
    ("dma.transp<0, 2, 1> x => shared;",
     n(ast.DmaStmt, None, "dma", "transp", view("x"), n(ast.StorageDest, "shared"),
       perm=exs(0, 2, 1))),
    ("dma.copy f.data => select(k, g, h);",
     n(ast.DmaStmt, None, "dma", "copy", view(mem("f", "data")),
       n(ast.SelectExpr, ex("k"), exs("g", "h")))),
    ("dma.copy buf[s].chunkat(p) => e.at(k);",
     n(ast.DmaStmt, None, "dma", "copy", view(idx("buf", "s"), vop("chunkat", "p")),
       view(at("e", "k")))),
    ("dma.copy a.view(17, 3 : 7, 2).from(11, 10).span_as([51]).sqz() => b;",
     n(ast.DmaStmt, None, "dma", "copy",
       view("a", vop("view", 17, 3, strides=(7, 2), at=(11, 10)), vop("span_as", 51),
            vop("sqz")), view("b"))),
    ("dma.copy a.chunk(4, 2).at(i, j).modspan(3 : 1).step(2).at(0).subspan(4) => b;",
     n(ast.DmaStmt, None, "dma", "copy",
       view("a", vop("chunk", 4, 2, at=("i", "j")),
            vop("modspan", 3, strides=(1,), step=(2,), at=(0,)), vop("subspan", 4)),
       view("b"))),
    ("f = dma.any;", n(ast.DmaAny, "f")),
    # --- MMA (4.6) ---
    ("mc = mma.fill 0.0;", n(ast.MmaFill, ex("mc"), flt(0.0, "0.0"))),
    ("mc = mma.fill.f32 0.0f;", n(ast.MmaFill, ex("mc"), flt(0.0, "0.0f"), "f32")),
    ("mma.fill acc[1], 1.5f;", n(ast.MmaFill, idx("acc", 1), flt(1.5, "1.5f"), None, False)),
    ("ma = mma.load lhs_s.chunkat(_, w);",
     n(ast.MmaLoad, ex("ma"), view("lhs_s", vop("chunkat", "_", "w")))),
    ("mb = mma.load.frag.swiz<128>.async rhs_s;",
     n(ast.MmaLoad, ex("mb"), view("rhs_s"), True, True, ex(128), True, True)),
    ("mb = mma.load.swiz rhs_s;", n(ast.MmaLoad, ex("mb"), view("rhs_s"), True, False, None, True)),
    ("mma.load out_s, acc[0];", n(ast.MmaLoad, idx("acc", 0), view("out_s"), False)),
    ("mma.row.row mc, ma, mb;", n(ast.MmaExec, "row", "row", ex("mc"), view("ma"), view("mb"))),
    ("mma.row.col mc, ls.chunkat(_, w), rs;",
     n(ast.MmaExec, "row", "col", ex("mc"), view("ls", vop("chunkat", "_", "w")), view("rs"))),
    ("f = mma.col.row.async acc[i], a, b;",
     n(ast.MmaExec, "col", "row", idx("acc", "i"), view("a"), view("b"), future="f",
       is_async=True)),
    ("mma.col.col.sp mc, a, b, meta;",
     n(ast.MmaExec, "col", "col", ex("mc"), view("a"), view("b"), "sp", (view("meta"),))),
    ("mma.row.row.sp mc, a, b;",
     n(ast.MmaExec, "row", "row", ex("mc"), view("a"), view("b"), "sp")),
    ("mma.row.row.scale mc, a, b, sa.subspan(64, 1).at(m, 0), sb;",
     n(ast.MmaExec, "row", "row", ex("mc"), view("a"), view("b"), "scale",
       (view("sa", vop("subspan", 64, 1, at=("m", 0))), ex("sb")))),
    ("[[schedule(k_tiles(0, 1))]] mma.row.row mc, a, b;",
     n(ast.MmaExec, "row", "row", ex("mc"), view("a"), view("b"),
       schedule=n(ast.Attribute, "schedule", (call("k_tiles", 0, 1),)))),
    ("mma.store mc, out_s.subspan(16, 16).at(wm, wn);",
     n(ast.MmaStore, ex("mc"), view("out_s", vop("subspan", 16, 16, at=("wm", "wn"))))),
    ("mma.store.transp mc, out;", n(ast.MmaStore, ex("mc"), view("out"), "transp")),
    ("mma.store.async mc, out;", n(ast.MmaStore, ex("mc"), view("out"), "async")),
    ("mma.store.mask mc, out, r, c;",
     n(ast.MmaStore, ex("mc"), view("out"), "mask", exs("r", "c"))),
    ("mma.scale mc, sa, sb;", n(ast.MmaScale, ex("mc"), view("sa"), ex("sb"))),
    ("mma.commit;", n(ast.MmaCommit)),
    ("frag.f32 acc[2]{0.0f};", n(ast.FragDecl, "f32", "acc", exs(2), flt(0.0, "0.0f"))),
    ("frag acc{0};", n(ast.FragDecl, None, "acc", (), ex(0))),
]


@pytest.mark.parametrize("source, expected", STATEMENTS, ids=[s for s, _ in STATEMENTS])
def test_statement(source: str, expected: ast.Stmt) -> None:
    assert strip_spans(parse_stmt(source)) == strip_spans(expected)


def test_single_statement_bodies_are_wrapped_unbraced() -> None:
    stmt = parse_stmt("foreach k in [4] x = 1;")
    assert isinstance(stmt, ast.Foreach) and stmt.body.braced is False


# ----------------------------------------------------------------------------------------
# Expressions (spec 4.9)
# ----------------------------------------------------------------------------------------


def sexp(e: ast.Expr) -> str:
    """Tree shape of an expression, for precedence tests."""
    if isinstance(e, ast.Binary):
        return f"({e.op} {sexp(e.lhs)} {sexp(e.rhs)})"
    if isinstance(e, (ast.Unary, ast.Postfix)):
        return f"({e.op} {sexp(e.operand)})"
    if isinstance(e, ast.Ternary):
        return f"(? {sexp(e.cond)} {sexp(e.then)} {sexp(e.other)})"
    if isinstance(e, ast.Select):
        return f"(sel {sexp(e.base)} {sexp(e.index)})"
    return format_expr(e)


PRECEDENCE = [
    # the examples of spec 4.9
    ("p # m + 1", "(+ (# p m) 1)"),
    ("2 * p # m", "(* 2 (# p m))"),
    ("a & b == c", "(== (& a b) c)"),
    ("a | b & c", "(& (| a b) c)"),
    ("!a & b", "(! (& a b))"),
    # one rule per level, from loose to tight
    ("a ? b : c ? d : e", "(? a b (? c d e))"),
    ("a || b ? c : d", "(? (|| a b) c d)"),
    ("a || b && c", "(|| a (&& b c))"),
    ("a && b == c", "(&& a (== b c))"),
    ("a == b < c", "(== a (< b c))"),
    ("a < b << 2", "(< a (<< b 2))"),
    ("a << 2 + b", "(<< a (+ 2 b))"),
    ("a + b * c", "(+ a (* b c))"),
    ("a * b #+ c", "(* a (#+ b c))"),
    ("a #- b #/ c", "(#- a (#/ b c))"),
    ("a #* b & c", "(#* a (& b c))"),
    ("!a + b", "(+ (! a) b)"),
    ("!a ^ b | c", "(! (| (^ a b) c))"),
    ("a & b # c", "(& a (# b c))"),
    ("~a # b", "(# (~ a) b)"),
    ("~a(0)", "(~ (sel a 0))"),
    ("a # b(1)", "(# a (sel b 1))"),
    ("!!a", "(! (! a))"),
    ("~~a", "(~ (~ a))"),
    # associativity
    ("a - b - c", "(- (- a b) c)"),
    ("a / b * c % d", "(% (* (/ a b) c) d)"),
    ("a # b # c", "(# (# a b) c)"),
    ("a != b == c", "(== (!= a b) c)"),
    ("a <= b > c", "(> (<= a b) c)"),
    ("a ^ b | c & d", "(& (| (^ a b) c) d)"),
    ("a #+ b #- c", "(#- (#+ a b) c)"),
    ("a >> 1 << 2", "(<< (>> a 1) 2)"),
    # parentheses and literals
    ("(a + b) * c", "(* (+ a b) c)"),
    ("a * (b + c)", "(* a (+ b c))"),
    ("x-1.0", "(- x 1.0)"),
    ("x - -1", "(- x -1)"),
    ("a * - 2", "(* a -2)"),
    ("++x + y--", "(+ (++ x) (-- y))"),
    ("k(-1) + t(1)(2)", "(+ (sel k -1) (sel (sel t 1) 2))"),
]


@pytest.mark.parametrize("source, tree", PRECEDENCE, ids=[s for s, _ in PRECEDENCE])
def test_precedence(source: str, tree: str) -> None:
    assert sexp(parse_expr(source)) == tree


EXPRESSIONS: list[tuple[str, ast.Expr]] = [
    ("42", ex(42)),
    ("0x1F", lit(31, "0x1F")),
    ("7u", lit(7, "7u", "u")),
    ("3ll", lit(3, "3ll", "ll")),
    ("-3", lit(-3, "-3")),
    ("- 3", lit(-3, "-3")),
    ("1.5f", flt(1.5, "1.5f")),
    ("-1.5", flt(-1.5, "-1.5")),
    ("true", ex(True)),
    ("inf", n(ast.InfLit)),
    ("-inf", flt(float("-inf"), "-inf")),
    ("nullptr", n(ast.NullLit)),
    ('"a" "b"', n(ast.StrLit, "ab", '"a" "b"')),
    ("_", ex("_")),
    ("#p", n(ast.BoundOf, "p")),
    ("|f.span|", n(ast.SizeOf, mem("f", "span"))),
    ("|f16|", n(ast.SizeOf, None, "f16")),
    ("|half|", n(ast.SizeOf, None, "f16")),
    ("|a + (b | c)|", n(ast.SizeOf, bin_("+", "a", bin_("|", "b", "c")))),
    ("__to<f16>(x)", n(ast.Cast, "f16", False, ex("x"))),
    ("__to<double>(x)", n(ast.Cast, "f64", False, ex("x"))),
    ('__to<"unsigned">(x)', n(ast.Cast, "unsigned", True, ex("x"))),
    ("cdiv(M, 64)", call("cdiv", "M", 64)),
    ("__exp(x)", call("__exp", "x")),
    ("__fmaf(a, b, c)", call("__fmaf", "a", "b", "c")),
    ("foo(a, b)", call("foo", "a", "b")),
    ("foo(a + 1)", call("foo", bin_("+", "a", 1))),
    ("foo()", call("foo")),
    ("ns::foo<2>(a)", call("ns::foo", "a", template=(2,))),
    ("sp(0)", sel("sp", 0)),
    ("t(i)", sel("t", "i")),
    ("x.span(0)", sel(mem("x", "span"), 0)),
    ("x.span(i + 1)", sel(mem("x", "span"), bin_("+", "i", 1))),
    ("f.data.at(i, j)", at(mem("f", "data"), "i", "j")),
    ("f.mdata", mem("f", "mdata")),
    ("x.at(idx)", at("x", "idx")),
    ("buf[i][j]", idx(idx("buf", "i"), "j")),
    ("sp [(0) / 2, (1) + 1]",
     n(ast.Derive, ex("sp"),
       (bin_("/", n(ast.DimRef, 0), 2), bin_("+", n(ast.DimRef, 1), 1)), "[]")),
    ("sp [(0)]", n(ast.Derive, ex("sp"), (n(ast.DimRef, 0),), "[]")),
    ("x.span[2]", n(ast.Derive, mem("x", "span"), exs(2), "[]")),
    ("sp [a, 2]", n(ast.Derive, ex("sp"), exs("a", 2), "[]")),
    ("{a, 2}", tup("a", 2)),
    ("[sp, 6]", shape("sp", 6)),
    ("[[1, 2], 3]", shape(shape(1, 2), 3)),
    ("&x", n(ast.Unary, "&", ex("x"))),
    ("&x.at(i)", n(ast.Unary, "&", at("x", "i"))),
    ("select(k, a, b)", n(ast.SelectExpr, ex("k"), exs("a", "b"))),
    ("a.chunkat(p).span", mem(view("a", vop("chunkat", "p")), "span")),
    ("a.span_as(2, 3)", view("a", vop("span_as", 2, 3))),
    ("a.span_as([2, 3])", view("a", vop("span_as", 2, 3))),
    ("a[b[0]]", idx("a", idx("b", 0))),
]


@pytest.mark.parametrize("source, expected", EXPRESSIONS, ids=[s for s, _ in EXPRESSIONS])
def test_expression(source: str, expected: ast.Expr) -> None:
    assert strip_spans(parse_expr(source)) == strip_spans(expected)


# ----------------------------------------------------------------------------------------
# Functions and programs (spec 4.1)
# ----------------------------------------------------------------------------------------


def parse_fn(text: str) -> tuple[ast.Function | None, Reporter]:
    reporter = reporter_for(text)
    return parse_function(text, 0, len(text), reporter), reporter


def test_function_header() -> None:
    fn, reporter = parse_fn(
        "__co__ s32 [64, M] f(global f16 [M, K] a, f32 [M, N]& out, s32 [?, ??] r, "
        "f16 mdspan<2> m, half bias, int n, bool b, stream s, f32 [2 * (3 + 1)]) { }")
    assert not reporter.diagnostics
    assert fn is not None and fn.name == "f"
    expected_params = (
        n(ast.Param, "global", n(ast.TypeSpec, "f16", n(ast.ShapeSpec, exs("M", "K"))), False, "a"),
        n(ast.Param, None, n(ast.TypeSpec, "f32", n(ast.ShapeSpec, exs("M", "N"))), True, "out"),
        n(ast.Param, None,
          n(ast.TypeSpec, "s32", n(ast.ShapeSpec, (n(ast.AnonDim, False), n(ast.AnonDim, True)))),
          False, "r"),
        n(ast.Param, None, n(ast.TypeSpec, "f16", n(ast.ShapeSpec, None, 2)), False, "m"),
        n(ast.Param, None, n(ast.TypeSpec, "f16"), False, "bias"),
        n(ast.Param, None, n(ast.TypeSpec, "int"), False, "n"),
        n(ast.Param, None, n(ast.TypeSpec, "bool"), False, "b"),
        n(ast.Param, None, n(ast.TypeSpec, "stream"), False, "s"),
        n(ast.Param, None,
          n(ast.TypeSpec, "f32", n(ast.ShapeSpec, (bin_("*", 2, bin_("+", 3, 1)),))),
          False, None),
    )
    assert strip_spans(fn.params) == strip_spans(expected_params)
    expected_ret = n(ast.TypeSpec, "s32", n(ast.ShapeSpec, exs(64, "M")))
    assert strip_spans(fn.ret) == strip_spans(expected_ret)
    assert fn.body == ast.Block(fn.body.span, ())
    assert fn.span == Span(0, fn.body.span.end)
    assert fn.name_span.start == fn.span.start + len("__co__ s32 [64, M] ")


@pytest.mark.parametrize("ret, expected", [
    ("void", None),
    ("auto", n(ast.TypeSpec, "auto")),
    ("int", n(ast.TypeSpec, "int")),
    ("f16 [4]", n(ast.TypeSpec, "f16", n(ast.ShapeSpec, exs(4)))),
])
def test_return_types(ret: str, expected: ast.TypeSpec | None) -> None:
    fn, reporter = parse_fn(f"__co__ {ret} f() {{ return; }}")
    assert not reporter.diagnostics and fn is not None
    assert strip_spans(fn.ret) == strip_spans(expected)


def test_spans_point_into_the_text() -> None:
    text = "__co__ void f() {\n  out.at(i) = a + b.at(j);\n}"
    fn, _ = parse_fn(text)
    assert fn is not None
    stmt = fn.body.stmts[0]
    assert isinstance(stmt, ast.AssignStmt)
    item = stmt.items[0]
    assert text[stmt.span.start:stmt.span.end] == "out.at(i) = a + b.at(j);"
    assert text[item.target.span.start:item.target.span.end] == "out.at(i)"
    assert text[item.value.span.start:item.value.span.end] == "a + b.at(j)"


def test_parse_program_takes_regions_from_the_region_finder() -> None:
    text = ("int host() { return 0; }\n"
            "__co__ void a() { x = 1; }\n"
            "void more_host();\n"
            "__co__ int b(int n) { return n; }\n")
    reporter = reporter_for(text)
    regions = find_co_functions(text, reporter)
    program = parse_program(text, regions, reporter)
    assert [f.name for f in program.functions] == ["a", "b"]
    as_tuples = parse_program(text, [(r.start, r.end) for r in regions], reporter)
    assert strip_spans(as_tuples) == strip_spans(program)
    assert not reporter.diagnostics


@pytest.mark.parametrize("path", sorted(DATA.glob("*.co")), ids=lambda p: p.name)
def test_seed_programs_parse_cleanly_and_fast(path: Path) -> None:
    source = Source(path.read_text(), path.name)
    reporter = Reporter(SourceMap.identity(source))
    pp = preprocess(source, reporter)
    reporter.source_map = pp.source_map
    regions = find_co_functions(pp.text, reporter)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        program = parse_program(pp.text, regions, reporter)
        best = min(best, time.perf_counter() - start)
    assert not reporter.diagnostics
    assert len(program.functions) == 1
    assert best < 0.010  # the whole compile has 100 ms; parsing a seed takes about 0.5 ms


# ----------------------------------------------------------------------------------------
# Syntax errors: code, message, line and column; recovery goes on to the next statement
# ----------------------------------------------------------------------------------------

ERRORS = [
    ("x = ;", "CQ0110", "expected an expression, found ';'", 2, 7),
    ("x = 1\n}", "CQ0110", "expected ';', found '}'", 3, 1),
    ("x = -y;", "CQ0110",
     "expected an expression (Croqtile has no unary minus: write `0 - x`), found '-'", 2, 7),
    ("dma.copy.swiz<128>.async a => b;", "CQ0114",
     "'.async' must come before the attributes (right after the operation and its config)", 2, 21),
    ("t = tma.load.async.swiz<128>.evict_first a => b;", "CQ0114",
     "'.evict_first' must come before '.swiz'", 2, 31),
    ("int block = 3;", "CQ0116", "'block' is a reserved word and cannot be used as a name", 2, 7),
    ("block = 3;", "CQ0116", "'block' is a reserved word and cannot be used as a name", 2, 3),
    ("u2 += 1;", "CQ0116", "'u2' is a reserved word and cannot be used as a name", 2, 3),
    ("x = in + 1;", "CQ0110", "expected an expression, found keyword 'in'", 2, 7),
    ("mdspan s = [2];", "CQ0217", "mdspan must be initialised with ':'", 2, 12),
    ("ituple t : {1};", "CQ0110", "expected '=', found ':'", 2, 12),
    ("parallel p by 4 : blok {}", "CQ0110",
     "expected a level (block, group-4, group, thread, cluster or device), found identifier "
     "'blok'", 2, 21),
    ("dma.copy a + b => c;", "CQ0110", "expected '=>', found '+'", 2, 14),
    ("dma.move a => c;", "CQ0110",
     "expected a DMA operation (.copy, .load, .pad, .transp or .any), found '.'", 2, 6),
    ("dma.any;", "CQ0111", "unexpected '.any' without a future name (write `f = dma.any;`)",
     2, 6),
    ("f = mma.row.row mc, a, b;", "CQ0110",
     "expected '.async' (only an asynchronous MMA yields a future), found identifier 'mc'", 2, 19),
    ("mma.wait<0>;", "CQ0110",
     "expected an MMA operation (.fill, .load, .store, .scale, .row or .col), found '.'", 2, 6),
    ("x.chunkat(p) = 1;", "CQ0110",
     "expected an assignment target (a name, x.at(...) or buf[i]), found 'x.chunkat(p)'", 2, 3),
    ("wait 3;", "CQ0110", "expected a future or an event (f, e[i] or e.at(k)), found '3'", 2, 8),
    ("mma.store mc, 3 + 4;", "CQ0110",
     "expected a view (a name, buf[i], f.data or a tiled view such as x.chunkat(i)), "
     "found '3'", 2, 17),
    ("else x = 1;", "CQ0111", "unexpected keyword 'else' at the start of a statement", 2, 3),
    ("sync.warp;", "CQ0110",
     "expected 'shared', 'global', 'local', 'barrier' or 'fence', found identifier 'warp'", 2, 8),
    ('__asm__ goto("jmp");', "CQ0111",
     "unexpected keyword 'goto' (asm goto is not supported)", 2, 11),
    ("[[unroll(2)]] parallel by 1 {}", "CQ0110",
     "expected an attribute (launch_bounds, maxnreg or schedule), found keyword 'unroll'", 2, 5),
    ("[[launch_bounds(2)]] x = 1;", "CQ0110",
     "expected 'parallel' after [[launch_bounds]] / [[maxnreg]], or 'mma' after [[schedule]], "
     "found identifier 'x'", 2, 24),
    ("foreach in [4] {}", "CQ0110", "expected a loop variable, found keyword 'in'", 2, 11),
    ("x = select(1);", "CQ0110", "expected ',', found ')'", 2, 15),
    ("foo(1) = 2;", "CQ0110", "expected ';', found '='", 2, 10),
    ("x = a @ b;", "CQ0101", "unexpected character '@'", 2, 9),
    ("x = 12ab;", "CQ0103", "malformed number literal '12ab'", 2, 7),
    ("shared x;", "CQ0110", "expected an element type or 'event', found identifier 'x'", 2, 10),
    ("x = a.step(2);", "CQ0110", "expected ';', found '.step'", 2, 8),
    ("swap(a b);", "CQ0110", "expected ')', found identifier 'b'", 2, 10),
]


@pytest.mark.parametrize("body, code, message, line, column", ERRORS,
                         ids=[e[0] for e in ERRORS])
def test_syntax_error(body: str, code: str, message: str, line: int, column: int) -> None:
    fn, reporter = parse_fn("__co__ void f() {\n  " + body + "\n}")
    diag = reporter.diagnostics[0]
    assert (diag.code, diag.message, diag.line, diag.column) == (code, message, line, column)
    assert fn is not None


def test_errors_recover_to_the_next_statement() -> None:
    text = ("__co__ void f() {\n"
            "  x = ;\n"
            "  parallel p by 4 : nowhere { y = 1; }\n"
            "  foreach k in [4] { z = ; w = 2; }\n"
            "  v = 3;\n"
            "}")
    fn, reporter = parse_fn(text)
    assert [(d.code, d.line) for d in reporter.diagnostics] == [
        ("CQ0110", 2), ("CQ0110", 3), ("CQ0110", 4)]
    assert fn is not None
    kept = fn.body.stmts
    assert [type(s).__name__ for s in kept] == ["Foreach", "AssignStmt"]
    foreach = kept[0]
    assert isinstance(foreach, ast.Foreach)
    assert strip_spans(foreach.body.stmts) == strip_spans((assign("w", 2),))


def test_unclosed_function_is_reported_once() -> None:
    fn, reporter = parse_fn("__co__ void f() {\n  if (x) {\n    foreach k in [4] {\n")
    assert [(d.code, d.message) for d in reporter.diagnostics] == [
        ("CQ0110", "expected '}', found end of input")]
    assert fn is not None


def test_text_after_the_function_is_reported() -> None:
    _, reporter = parse_fn("__co__ void f() { } extra")
    assert [(d.code, d.message) for d in reporter.diagnostics] == [
        ("CQ0111", "unexpected identifier 'extra' after the end of the function")]


def test_broken_header_still_checks_the_body() -> None:
    fn, reporter = parse_fn("__co__ void f(int n,, int m) {\n  x = ;\n}")
    assert [(d.code, d.line) for d in reporter.diagnostics] == [("CQ0110", 1), ("CQ0110", 2)]
    assert fn is not None and fn.name == "f"


def test_symbolic_expression_in_a_parameter_shape_is_rejected() -> None:
    _, reporter = parse_fn("__co__ void f(f16 [M / 2] a) { }")
    assert [(d.code, d.message) for d in reporter.diagnostics] == [
        ("CQ0111", "unexpected expression 'M / 2' in a parameter shape (write a constant, a "
                   "name, '?' or '??')")]


def test_empty_region_gives_no_function() -> None:
    reporter = reporter_for("")
    assert parse_function("", 0, 0, reporter) is None
    assert [d.code for d in reporter.diagnostics] == ["CQ0110"]


@pytest.mark.parametrize("nest", [
    lambda d: "x = " + "(" * d + "1" + ")" * d + ";",
    lambda d: "x = " + "!" * d + "a;",
    lambda d: "x = " + "a[" * d + "0" + "]" * d + ";",
    lambda d: "x = " + "f(" * d + "0" + ")" * d + ";",
    lambda d: "x = " + "{" * d + "1" + "}" * d + ";",
    lambda d: "x = " + " + ".join(["a"] * d) + ";",
    lambda d: "x = " + "a ? b : " * d + "c;",
    lambda d: "x = a" + "(0)" * d + ";",
    lambda d: "if (x) {" * d + "}" * d,
    lambda d: "if (x) " * d + "y = 1;",
    lambda d: "if (x) y = 1;" + " else if (x) y = 1;" * d,
    lambda d: "foreach k in [4] " * d + "y = 1;",
], ids=["parens", "not", "index", "call", "tuple", "chain", "ternary", "select", "blocks",
        "unbraced-if", "else-if", "foreach"])
def test_deep_nesting_ends_with_one_diagnostic(nest: Any) -> None:
    text = "__co__ void f() {\n" + nest(10_000) + "\n}"
    fn, reporter = parse_fn(text)
    assert fn is None
    assert [d.code for d in reporter.diagnostics] == ["CQ0115"]
    assert reporter.diagnostics[0].message == f"nesting is too deep ({MAX_DEPTH} levels)"


def test_nesting_below_the_limit_parses() -> None:
    depth = MAX_DEPTH // 2
    text = "__co__ void f() {\n x = " + "(" * depth + "1" + ")" * depth + ";\n" + \
        "if (x) {" * (depth // 3) + "}" * (depth // 3) + "\n}"
    fn, reporter = parse_fn(text)
    assert not reporter.diagnostics and fn is not None


def test_stmt_and_expr_helpers_report_leftovers() -> None:
    reporter = reporter_for("x = 1; y = 2;")
    parse_stmt_text("x = 1; y = 2;", reporter)
    assert [d.message for d in reporter.diagnostics] == [
        "unexpected identifier 'y' after the statement"]
    reporter = reporter_for("a b")
    assert strip_spans(parse_expr_text("a b", reporter)) == strip_spans(ex("a"))
    assert [d.code for d in reporter.diagnostics] == ["CQ0111"]
    reporter = reporter_for("x = ;")
    assert isinstance(parse_stmt_text("x = ;", reporter), ast.Empty)
