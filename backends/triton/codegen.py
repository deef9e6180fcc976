"""Tile IR -> the text of one Python module holding the Triton kernels and the host
function of a ``__co__`` function. The launcher reads the ``Artifact`` fields; nothing
re-parses the generated text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...frontend.parser import recursion_headroom
from ...frontend.sema.model import RuntimeCheck
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from ..ir import nodes as ir
from ..ir.errors import LoweringError

LocateFn = Callable[[Span], str | None]


@dataclass(frozen=True)
class Artifact:
    """What the launcher needs: the module text and the names in it."""

    source: str
    function: str  # name of the host function in the module
    kernels: tuple[str, ...]
    params: tuple[ir.HostParam, ...]
    dims: tuple[str, ...]
    returns: str
    num_warps: tuple[int, ...]
    num_stages: tuple[int, ...]
    checks: tuple[RuntimeCheck, ...] = ()  # conditions on dimensions tested before the host code
    # per kernel: Triton signature of each parameter ("*fp16", "i32", "fp32", "constexpr")
    signatures: tuple[dict[str, str], ...] = ()


class _Writer:
    """A small indented line writer."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str = "") -> None:
        self.lines.append(("    " * self.depth + text) if text else "")

    def indent(self) -> None:
        self.depth += 1

    def dedent(self) -> None:
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


host_name = ir.host_var_name
dim_name = ir.dim_var_name


# Python's own limits on one function (a Triton kernel is one): nested parentheses (200),
# indentation levels (100) and nested loops (20). Deep expressions are split into variables
# every _HOIST_DEPTH levels (a level writes at most a few brackets); deep statement nests
# cannot be written and are reported (CQ0702).
_HOIST_DEPTH = 32
_MAX_INDENT = 99  # the deepest indentation level of a line
_MAX_LOOPS = 20


class KernelWriter:
    def __init__(self, kernel: ir.Kernel, locate: LocateFn) -> None:
        self.kernel = kernel
        self.locate = locate
        self.w = _Writer()
        self.last_origin: str | None = None
        self.expr_depth = 0  # nesting of the expression being written
        self.loops = 0  # enclosing `for` loops
        self.hoisted = 0  # variables made by splitting deep expressions
        self.asserts = False  # whether the kernel checks device assertions
        # debug checks: message -> the variables whose values a failure on the CPU
        # reports (none for a protocol check)
        self.checked_values: dict[str, list[str]] = {}
        # descriptors whose stores are split into column slices: name -> block shape
        self.split_stores = _split_stores(kernel) if kernel.epilogue_split > 1 else {}

    # --------------------------------------------------------------- module pieces
    def write(self) -> list[str]:
        k = self.kernel
        self.w.line("@triton.jit")
        decorator = len(self.w.lines) - 1
        params = []
        for p in k.params:
            params.append(f"{p.name}: tl.constexpr" if p.kind is ir.ParamKind.FLAG else p.name)
        self.w.line(f"def {k.name}({', '.join(params)}):")
        self.w.indent()
        if k.span is not None:
            origin = self.locate(k.span)
            if origin:
                self.w.line(f"# {origin}")
                self.last_origin = origin
        for axis in k.axes:
            self.w.line(f"{axis.name} = tl.arange(0, {axis.size})")
        self.stmts(k.body)
        if not k.body:
            self.w.line("pass")
        self.w.dedent()
        if self.asserts:  # Triton checks device assertions only in debug mode
            self.w.lines[decorator] = "@triton.jit(debug=True)"
        return self.w.lines

    def stmts(self, body: list[ir.Stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def origin(self, stmt: ir.Stmt) -> None:
        if stmt.span is None:
            return
        text = self.locate(stmt.span)
        if text and text != self.last_origin:
            self.w.line(f"# {text}")
            self.last_origin = text

    def stmt(self, stmt: ir.Stmt) -> None:
        self.origin(stmt)
        w = self.w
        if isinstance(stmt, ir.Let):
            w.line(f"{stmt.name} = {self.expr(stmt.value, stmt.value.axes)}")
        elif isinstance(stmt, ir.Store):
            axes = ir.sort_axes(list(stmt.pointer.axes) + list(stmt.value.axes)
                                + (list(stmt.mask.axes) if stmt.mask is not None else []))
            ptr = self.pointer(stmt.pointer, axes)
            value = self.expr(stmt.value, axes)
            mask = f", mask={self.expr(stmt.mask, axes)}" if stmt.mask is not None else ""
            w.line(f"tl.store({ptr}, {value}{mask})")
        elif isinstance(stmt, ir.Atomic):
            parts = [stmt.pointer, stmt.value] + ([stmt.mask] if stmt.mask is not None else []) \
                + ([stmt.cmp] if stmt.cmp is not None else [])
            axes = ir.sort_axes([a for e in parts for a in e.axes])
            ptr = self.pointer(stmt.pointer, axes)
            value = self.expr(stmt.value, axes)
            if stmt.op == "cas":  # no broadcasting here: the operands take the pointer's shape
                assert stmt.cmp is not None  # (a compare-and-swap has its compare value)
                sizes = ", ".join(str(a.size) for a in axes)
                cmp, value = (f"tl.zeros([{sizes}], tl.{x.dtype.value}) + ({self.expr(x, axes)})"
                              if axes else self.expr(x, axes) for x in (stmt.cmp, stmt.value))
                call = f"tl.atomic_cas({ptr}, {cmp}, {value})"
            else:
                mask = f", mask={self.expr(stmt.mask, axes)}" if stmt.mask is not None else ""
                sem = f", sem={stmt.sem!r}" if stmt.sem else ""
                call = f"tl.atomic_{stmt.op}({ptr}, {value}{mask}{sem})"
            w.line(f"{stmt.result} = {call}" if stmt.result else call)
        elif isinstance(stmt, ir.DescStore):
            value = self.expr(stmt.value, stmt.value.axes)
            if tuple(stmt.dims) != ir.sort_axes(stmt.dims):
                value = f"tl.trans({value})"
            if stmt.squeezed:
                value = f"tl.reshape({value}, [{', '.join(map(str, stmt.squeezed))}])"
            offsets = [self.expr(o, o.axes) for o in stmt.offsets]
            if stmt.desc in self.split_stores:
                self._split_store(stmt.desc, offsets, value)
            else:
                w.line(f"{stmt.desc}.store([{', '.join(offsets)}], {value})")
        elif isinstance(stmt, ir.For):
            start = self.expr(stmt.start, ())
            stop = self.expr(stmt.stop, ())
            step = f", {self.expr(stmt.step, ())}" if stmt.step is not None else ""
            pipelined = stmt.pipelined and self.kernel.num_stages > 1  # (1: kept in order)
            if pipelined and stmt.stages:
                step += f", num_stages={stmt.stages}"
            for hint in ("flatten", "warp_specialize"):
                if getattr(stmt, hint):
                    step += f", {hint}=True"
            loop = "tl.range" if pipelined or stmt.flatten or stmt.warp_specialize else "range"
            w.line(f"for {stmt.var} in {loop}({start}, {stop}{step}):")
            self._loop_body(stmt)
        elif isinstance(stmt, ir.While):
            w.line(f"while {self.expr(stmt.cond, ())}:")
            self._loop_body(stmt)
        elif isinstance(stmt, ir.If):
            w.line(f"if {self.expr(stmt.cond, ())}:")
            self.block(stmt.then, stmt)
            if stmt.other:
                w.line("else:")
                self.block(stmt.other, stmt)
        elif isinstance(stmt, ir.Branch):
            w.line(f"if {stmt.flag}:")
            self.block(stmt.then, stmt)
            if stmt.other:
                w.line("else:")
                self.block(stmt.other, stmt)
        elif isinstance(stmt, ir.DefineDesc):
            shape = ", ".join(render_sym(s) for s in stmt.shape)
            strides = ", ".join(render_sym(s) for s in stmt.strides)
            block = ", ".join(str(b) for b in stmt.block)
            base = stmt.base
            if stmt.offset is not None:
                base = f"{base} + {self.expr(stmt.offset, ())}"
            w.line(f"{stmt.name} = tl.make_tensor_descriptor({base}, shape=[{shape}], "
                   f"strides=[{strides}], block_shape=[{block}])")
            if stmt.name in self.split_stores:  # the descriptor of one column slice
                rows, cols = stmt.block
                w.line(f"{stmt.name}_part = tl.make_tensor_descriptor({base}, "
                       f"shape=[{shape}], strides=[{strides}], "
                       f"block_shape=[{rows}, {cols // self.kernel.epilogue_split}])")
        elif isinstance(stmt, ir.Print):
            values = "".join(f", {self.expr(v, v.axes)}" for v in stmt.values)
            w.line(f"tl.device_print({stmt.label!r}{values})")
        elif isinstance(stmt, ir.Assert):
            self.asserts = True
            # both over the axes of either: a condition over rows and a mask over rows and
            # columns (an element of `apply {r, c}` under an `if`) broadcast lane by lane
            axes = ir.sort_axes(set(stmt.cond.axes) | set(stmt.mask.axes if stmt.mask else ()))
            cond = self.expr(stmt.cond, axes)
            mask = "" if stmt.mask is None else f", mask={self.expr(stmt.mask, axes)}"
            message = stmt.message
            if stmt.located:
                where = self.locate(stmt.span) if stmt.span is not None else ""
                message = f"{where}: {message}" if where else message
                self.checked_values.setdefault(message, []).extend(stmt.values)
            w.line(f"tl.device_assert({cond}, {message!r}{mask})")
        elif isinstance(stmt, ir.Barrier):
            w.line("tl.debug_barrier()")
        elif isinstance(stmt, ir.Comment):
            w.line(f"# {stmt.text}")
        else:  # pragma: no cover - every IR statement has a rule above
            raise TypeError(f"no code generation rule for {type(stmt).__name__}")

    def _split_store(self, desc: str, offsets: list[str], value: str) -> None:
        """A [R, C] tile stored as two [R, C/2] column slices (reshape to [R, 2, C/2],
        move the 2 last, split): the store stages half the tile in shared memory."""
        rows, cols = self.split_stores[desc]
        half = cols // 2
        self.hoisted += 1
        name = f"_slices{self.hoisted}"
        w = self.w
        w.line(f"{name} = tl.permute(tl.reshape({value}, [{rows}, 2, {half}]), (0, 2, 1))")
        w.line(f"{name}_0, {name}_1 = tl.split({name})")
        w.line(f"{desc}_part.store([{offsets[0]}, {offsets[1]}], {name}_0)")
        w.line(f"{desc}_part.store([{offsets[0]}, ({offsets[1]}) + {half}], {name}_1)")

    def _loop_body(self, stmt: ir.For | ir.While) -> None:
        """The body of a loop; Python's parser limits how deep loops nest."""
        self.loops += 1
        if self.loops > _MAX_LOOPS:
            raise self._too_deep(stmt, f"loops nested {self.loops} deep",
                                 f"Python nests {_MAX_LOOPS} loops at most")
        self.block(stmt.body, stmt)
        self.loops -= 1

    def block(self, body: list[ir.Stmt], owner: ir.Stmt) -> None:
        if self.w.depth + 1 > _MAX_INDENT:
            raise self._too_deep(owner, f"statements nested {self.w.depth} blocks deep",
                                 f"Python indents {_MAX_INDENT} levels at most")
        self.w.indent()
        saved = self.last_origin
        self.stmts(body)
        if not body:
            self.w.line("pass")
        self.last_origin = saved
        self.w.dedent()

    def _too_deep(self, stmt: ir.Stmt, construct: str, limit: str) -> LoweringError:
        span = stmt.span or self.kernel.span or Span(0, 0)
        return LoweringError("CQ0702", span, construct=construct,
                             reason=f"a Triton kernel is a Python function, and {limit}")

    # --------------------------------------------------------------- expressions
    def expr(self, e: ir.Expr, axes: tuple[ir.Axis, ...]) -> str:
        """Text of ``e`` laid out over ``axes`` (a superset of ``e.axes``)."""
        level = self.expr_depth
        self.expr_depth += 1
        try:
            text = self._expr(e)
        finally:
            self.expr_depth -= 1
        if level and level % _HOIST_DEPTH == 0 and not isinstance(e, (ir.Const, ir.Var)):
            # a deep expression: its inner part becomes a variable, written before the line
            # that uses it (the same value: Triton expressions have no side effects)
            self.hoisted += 1
            name = f"_deep{self.hoisted}"
            self.w.line(f"{name} = {text}")
            text = name
        return self.expand(text, e.axes, axes)

    @staticmethod
    def expand(text: str, have: tuple[ir.Axis, ...], want: tuple[ir.Axis, ...]) -> str:
        if not have or tuple(have) == tuple(want):
            return text
        index = ", ".join(":" if a in have else "None" for a in want)
        return f"{text}[{index}]"

    def pointer(self, p: ir.Pointer, axes: tuple[ir.Axis, ...]) -> str:
        text = f"{p.base} + {self.expr(p.offset, p.offset.axes)}"
        have = p.offset.axes
        if set(axes) - set(have):
            sizes = ", ".join(str(a.size) for a in axes)
            inner = self.expand(f"({text})", have, axes)
            return f"tl.broadcast_to({inner}, [{sizes}])" if have else \
                f"tl.full([{sizes}], 0, tl.int32) + ({text})"
        return text

    def _expr(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Const):
            return render_const(e.value, e.dtype)
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, ir.AxisIndex):
            return e.axis.name
        if isinstance(e, ir.Binary):
            return self._binary(e)
        if isinstance(e, ir.Unary):
            inner = self.expr(e.operand, e.axes)
            if e.op == "not":
                return f"({inner} == 0)"
            return f"({e.op}{inner})"
        if isinstance(e, ir.Cast):
            if isinstance(e.operand, ir.Const):
                return render_const(e.operand.value, e.dtype)
            inner = self.expr(e.operand, e.axes)
            if e.operand.dtype == e.dtype:
                return inner
            if e.dtype in ir.CPU_ROUNDED and e.operand.dtype.is_float \
                    and e.operand.dtype not in ir.FP8 and "ON_CPU" in self.kernel.flags \
                    and (e.dtype in ir.FP8 or e.operand.axes):  # (bf16: tensors)
                mantissa, lowest = _CPU_ROUNDED_FORMAT[e.dtype]
                inner = f"_rounded_on_cpu({inner}, ON_CPU, {mantissa}, {lowest})"
            if not e.operand.axes:  # a scalar: may be a Python number in the interpreter
                return f"tl.cast({inner}, tl.{e.dtype.value})"
            return f"({inner}).to(tl.{e.dtype.value})"
        if isinstance(e, ir.Where):
            return (f"tl.where({self.expr(e.cond, e.axes)}, {self.expr(e.then, e.axes)}, "
                    f"{self.expr(e.other, e.axes)})")
        if isinstance(e, ir.Call):
            args = ", ".join(self.expr(a, e.axes) for a in e.args)
            module = "" if e.fn.startswith("libdevice.") else "tl."
            return f"{module}{e.fn}({args})"
        if isinstance(e, ir.Load):
            axes = e.axes
            ptr = self.pointer(e.pointer, axes)
            parts = [ptr]
            if e.mask is not None:
                parts.append(f"mask={self.expr(e.mask, axes)}")
                parts.append(f"other={render_const(e.other, e.dtype)}")
            if e.eviction:
                parts.append(f"eviction_policy={e.eviction!r}")
            if e.cache:
                parts.append(f"cache_modifier={e.cache!r}")
            return f"tl.load({', '.join(parts)})"
        if isinstance(e, ir.DescLoad):
            offsets = ", ".join(self.expr(o, o.axes) for o in e.offsets)
            text = f"{e.desc}.load([{offsets}])"
            if e.squeezed:
                sizes = ", ".join(str(a.size) for a in e.dims)
                text = f"tl.reshape({text}, [{sizes}])"
            if tuple(e.dims) != ir.sort_axes(e.dims):
                text = f"tl.trans({text})"
            return text
        if isinstance(e, ir.Full):
            sizes = ", ".join(str(a.size) for a in e.axes)
            return f"tl.full([{sizes}], {render_const(e.value, e.dtype)}, tl.{e.dtype.value})"
        if isinstance(e, ir.Dot):
            return self._dot(e)
        if isinstance(e, ir.Relabel):
            return self.expr(e.operand, e.operand.axes)
        if isinstance(e, ir.Gather):
            sizes = ", ".join(str(a.size) for a in e.axes)
            src = self.expr(e.operand, e.axes)
            index = self.expr(e.index, e.axes)
            return (f"tl.gather(tl.broadcast_to({src}, [{sizes}]), "
                    f"tl.broadcast_to({index}, [{sizes}]), {e.axes.index(e.axis)})")
        if isinstance(e, ir.Reduce):
            dim = e.operand.axes.index(e.axis)
            return f"tl.{e.op}({self.expr(e.operand, e.operand.axes)}, {dim})"
        if isinstance(e, ir.Collapsed):  # pragma: no cover - removed by the MMA lowering
            raise TypeError("collapsed loop index reached code generation")
        raise TypeError(f"no code generation rule for {type(e).__name__}")

    def _binary(self, e: ir.Binary) -> str:
        lhs = self.expr(e.lhs, e.axes)
        rhs = self.expr(e.rhs, e.axes)
        return f"({lhs} {e.op} {rhs})"

    def _dot(self, e: ir.Dot) -> str:
        a = self.expr(e.a, e.a.axes)
        if e.a.axes != (e.m, e.k):
            a = f"tl.trans({a})"
        b = self.expr(e.b, e.b.axes)
        if e.b.axes != (e.k, e.n):
            b = f"tl.trans({b})"
        acc = self.expr(e.acc, e.acc.axes)
        extra = f", input_precision={e.input_precision!r}" if e.input_precision else ""
        return f"tl.dot({a}, {b}, {acc}, out_dtype=tl.{e.dtype.value}{extra})"


def _split_stores(kernel: ir.Kernel) -> dict[str, tuple[int, int]]:
    """Descriptors that store 2-D tiles in row order, at least 64 columns wide (their
    stores are written in slices under ``epilogue_split``): name -> block shape."""
    blocks: dict[str, tuple[int, ...]] = {}
    stored: set[str] = set()
    refused: set[str] = set()

    def walk(body: list[ir.Stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ir.DefineDesc):
                blocks[stmt.name] = stmt.block
            elif isinstance(stmt, ir.DescStore):
                transposed = tuple(stmt.dims) != ir.sort_axes(stmt.dims)
                (refused if transposed else stored).add(stmt.desc)
            for attr in ("body", "then", "other"):
                inner = getattr(stmt, attr, None)
                if isinstance(inner, list):
                    walk(inner)

    walk(kernel.body)
    return {name: (block[0], block[1]) for name, block in blocks.items()
            if name in stored - refused and len(block) == 2
            and block[1] >= 64 and block[1] % 2 == 0}


def render_const(value: int | float | bool, dtype: ir.DType) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if dtype.is_float:
        value = float(value)
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        if math.isnan(value):
            return "float('nan')"
        return repr(value)
    return str(int(value))


def render_sym(s: Sym) -> str:
    return s.render(dim_name)


# ------------------------------------------------------------------------ bf16 and fp8 on the CPU

# Mantissa bits and the exponent of the smallest normal number of each format.
_CPU_ROUNDED_FORMAT = {ir.DType.F8E4: (3, -6), ir.DType.F8E5: (2, -14),
                       ir.DType.BF16: (7, -126)}

# Triton 3.6's interpreter rounds float -> fp8 wrongly (1.9375 -> 1.0 in e4m3, ties not to
# even) and truncates f32 -> bf16; on the CPU the value is rounded to the nearest value of
# the type (ties to even) first, so that the interpreter's conversion is exact. The GPU
# converts in hardware.
_CPU_ROUNDED = """

@triton.jit
def _rounded_on_cpu(x, ON_CPU: tl.constexpr, MANTISSA: tl.constexpr, LOWEST: tl.constexpr):
    if ON_CPU:
        x = x.to(tl.float32)
        size = tl.abs(x)
        exponent = tl.maximum(tl.floor(tl.log2(tl.maximum(size, 1.0e-30))), LOWEST)
        quantum = tl.exp2(exponent - MANTISSA)
        t = size / quantum
        low = tl.floor(t)
        odd = low - 2.0 * tl.floor(low * 0.5)
        step = tl.where(t - low > 0.5, 1.0, tl.where(t - low < 0.5, 0.0, odd))
        rounded = (low + step) * quantum
        signed = tl.where(rounded == 0.0, x * 0.0, tl.where(x < 0.0, -rounded, rounded))
        x = tl.where(size < 3.0e38, signed, x)  # infinities and NaN as they are
    return x
"""


# ------------------------------------------------------------------------------ module


# The module-level table of a debug compile: check message -> let-bound variables whose
# values at the failing lanes the interpreter's error reports (launcher.py).
CHECKED_VALUES = "CROQTILE_CHECKED_VALUES"


def generate(fn: ir.Function, locate: LocateFn, filename: str) -> Artifact:
    with recursion_headroom():  # expressions nest up to the parser's MAX_DEPTH
        return _generate(fn, locate, filename)


def _generate(fn: ir.Function, locate: LocateFn, filename: str) -> Artifact:
    w = _Writer()
    w.line(f"# Generated by croqtile from {filename}: function '{fn.name}'.")
    w.line("# Kernels are Triton; the host function runs in Python between launches.")
    w.line("import torch")
    w.line("import triton")
    w.line("import triton.language as tl")
    w.line("from triton.language.extra import libdevice")
    w.line()
    if any("ON_CPU" in k.flags for k in fn.kernels):
        w.lines.extend(_CPU_ROUNDED.splitlines())
    checked: dict[str, list[str]] = {}
    for kernel in fn.kernels:
        w.line()
        writer = KernelWriter(kernel, locate)
        w.lines.extend(writer.write())
        w.line()
        for message, names in writer.checked_values.items():
            checked.setdefault(message, []).extend(names)
    if checked:  # (debug mode) read by the launcher when a check fails in the interpreter
        w.line(f"{CHECKED_VALUES} = {{")
        for message, names in checked.items():
            w.line(f"    {message!r}: {tuple(dict.fromkeys(names))!r},")
        w.line("}")
        w.line()
    w.line()
    _host_function(w, fn)
    return Artifact(
        source=w.text(),
        function=f"host_{fn.name}",
        kernels=tuple(k.name for k in fn.kernels),
        params=tuple(fn.params),
        dims=tuple(fn.dims),
        returns=fn.returns,
        num_warps=tuple(k.num_warps for k in fn.kernels),
        num_stages=tuple(k.num_stages for k in fn.kernels),
        checks=tuple(fn.checks),
        signatures=tuple(_signature(k) for k in fn.kernels),
    )


_SIGNATURE_TYPES = {
    ir.DType.I1: "i1", ir.DType.I8: "i8", ir.DType.I16: "i16", ir.DType.I32: "i32",
    ir.DType.I64: "i64", ir.DType.U8: "u8", ir.DType.U16: "u16", ir.DType.U32: "u32",
    ir.DType.U64: "u64", ir.DType.F16: "fp16", ir.DType.BF16: "bf16", ir.DType.F32: "fp32",
    ir.DType.F64: "fp64", ir.DType.F8E4: "fp8e4nv", ir.DType.F8E5: "fp8e5",
}


def _signature(kernel: ir.Kernel) -> dict[str, str]:
    """Triton's signature of a kernel's parameters, for compiling it ahead of a launch."""
    signature = {}
    for p in kernel.params:
        if p.kind is ir.ParamKind.FLAG:
            signature[p.name] = "constexpr"
        elif p.kind is ir.ParamKind.POINTER:
            signature[p.name] = "*" + _SIGNATURE_TYPES[p.dtype or ir.DType.F32]
        elif p.kind is ir.ParamKind.DESC:
            assert isinstance(p.source, ir.HostDesc)
            block = ", ".join(str(n) for n in p.source.block)
            signature[p.name] = f"tensordesc<{_SIGNATURE_TYPES[p.dtype or ir.DType.F32]}[{block}]>"
        elif p.kind is ir.ParamKind.FLOAT:
            signature[p.name] = "fp32"
        else:
            signature[p.name] = "i32"
    return signature


def _host_function(w: _Writer, fn: ir.Function) -> None:
    args = ["launch", "device"] + [host_name(p.name) for p in fn.params] + [
        dim_name(d) for d in fn.dims]
    w.line(f"def host_{fn.name}({', '.join(args)}):")
    w.indent()
    _host_layouts(w, fn)
    for stmt in fn.body:
        if isinstance(stmt, ir.HostAlloc):
            shape = ", ".join(render_sym(s) for s in stmt.shape)
            shape = f"({shape},)" if len(stmt.shape) == 1 else f"({shape})"
            if stmt.fill is None and stmt.written_first:
                w.line(f"{host_name(stmt.name)} = torch.empty({shape}, dtype=torch.{stmt.dtype}, "
                       "device=device)")
            elif stmt.fill is None:
                w.line(f"{host_name(stmt.name)} = torch.zeros({shape}, dtype=torch.{stmt.dtype}, "
                       "device=device)")
            else:
                fill = "float('nan')" if stmt.fill != stmt.fill else repr(stmt.fill)
                w.line(f"{host_name(stmt.name)} = torch.full({shape}, {fill}, "
                       f"dtype=torch.{stmt.dtype}, device=device)")
        elif isinstance(stmt, ir.HostLaunch):
            _launch(w, stmt.kernel)
        elif isinstance(stmt, ir.HostReturn):
            _copy_back(w, fn)
            if stmt.value is not None:
                w.line(f"return {render_sym(stmt.value)}")
            else:
                w.line(f"return {host_name(stmt.name)}" if stmt.name else "return None")
    if not fn.body or not isinstance(fn.body[-1], ir.HostReturn):
        _copy_back(w, fn)
        w.line("return None")
    w.dedent()


def _host_layouts(w: _Writer, fn: ir.Function) -> None:
    """The host function's first lines: private copies of the tensors it writes but the
    caller keeps (``clone_inputs``; contiguous when the caller's is strided, as a returned
    copy is then, like the operator's fake result), contiguous copies of the parameters
    the variant cannot take strided (the caller's tensor kept to be written back), and
    the element strides of the parameters the kernels take strided, read off the tensors
    launched."""
    copied = fn.layout.copied
    for name in fn.clone_inputs:
        strided = name in copied or name in fn.layout.strided
        fmt = "memory_format=torch.contiguous_format" if strided else ""
        w.line(f"{host_name(name)} = {host_name(name)}.clone({fmt})")
    for p in fn.params:
        if p.name in copied and p.name not in fn.clone_inputs:
            if p.name in fn.copy_back:
                w.line(f"{ir.caller_var_name(p.name)} = {host_name(p.name)}")
            w.line(f"{host_name(p.name)} = {host_name(p.name)}.contiguous()")
    for p in fn.params:
        if p.name in fn.layout.strided and p.dims:
            names = [dim_name(ir.stride_var_name(p.name, d)) for d in range(len(p.dims))]
            comma = "," if len(names) == 1 else ""
            w.line(f"{', '.join(names)}{comma} = {host_name(p.name)}.stride()")


def _copy_back(w: _Writer, fn: ir.Function) -> None:
    """Before the host function returns: the results written into contiguous copies go
    back into the caller's tensors (written in place, as the caller asked)."""
    for name in fn.copy_back:
        w.line(f"{ir.caller_var_name(name)}.copy_({host_name(name)})")


def _launch(w: _Writer, k: ir.Kernel) -> None:
    grid = [render_sym(g) for g in k.grid] or ["1"]
    if k.stream_k_floats:  # every SM: the last wave's K iterations are shared out
        w.line("programs = launch.sm_count(device)")
        w.line("workspace, counters = launch.stream_k_buffers("
               f"device, programs * {k.stream_k_floats}, programs)")
        grid = ["programs"]
    elif k.persistent_tiles is not None:  # one program per SM at most, each looping over tiles
        w.line(f"programs = min({render_sym(k.persistent_tiles)}, launch.sm_count(device))")
        grid = ["programs"]
    sources = {ir.PROGRAMS: "programs", ir.WORKSPACE: "workspace", ir.COUNTERS: "counters"}
    # a flag that decides whether the host makes descriptors is computed once, as a local
    # of its own name (host_var_name keeps Croqtile names off it)
    computed = sorted({p.source.flag for p in k.params if isinstance(p.source, ir.HostDesc)})
    for flag in computed:
        w.line(f"{flag} = {k.flags[flag]}")
    args = []
    for p in k.params:
        if isinstance(p.source, str) and p.source in sources:
            args.append(sources[p.source])
        elif isinstance(p.source, Sym):
            args.append(render_sym(p.source))
        elif isinstance(p.source, ir.HostDesc):
            d = p.source
            args.append(f"launch.descriptor({host_name(d.tensor)}, "
                        f"{_tuple([render_sym(s) for s in d.shape])}, "
                        f"{_tuple([render_sym(s) for s in d.strides])}, {d.block}) "
                        f"if {d.flag} else None")
        elif p.kind is ir.ParamKind.FLAG:
            args.append(p.name if p.name in computed else k.flags[p.name])
        else:
            args.append(host_name(str(p.source)))
    w.line(f"launch({k.name}, {_tuple(grid)}, {_tuple(args)}, "
           f"num_warps={k.num_warps}, num_stages={k.num_stages}, device=device)")


def _tuple(items: list[str]) -> str:
    """A Python tuple display: ``()`` for none (a kernel without parameters), ``(a,)``..."""
    return f"({', '.join(items)},)" if items else "()"
