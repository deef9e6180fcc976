"""Checked AST -> tile IR (arch 3): the host program of a ``__co__`` function and one
kernel per outermost ``parallel``.

Blocks become programs, inner parallel levels and independent ``foreach`` loops become
tensor axes, staged buffers become views of their source (loads are forwarded), and the
four-step MMA becomes one ``tl.dot`` over the whole block tile (see ``mma.py``).
"""

from __future__ import annotations

import itertools
import keyword
from dataclasses import dataclass, fields, replace
from typing import Iterator

from ...frontend import syntax as ast
from ...frontend.parser import recursion_headroom
from ...frontend.sema import dtypes
from ...frontend.sema.levels import is_device_scope, threads_per_block
from ...frontend.sema.model import (BoundedTupleType, BoundedType, CheckedFunction, IndexItem,
                                    Level, LevelInfo, ScalarType, Symbol, SymKind, TupleType,
                                    ViewInfo, ViewStep)
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import builtins, scratch, split_tiles, stream_k
from . import nodes as ir
from .errors import LoweringError, NeedsSpecialization, static_extent, unsupported
from .values import (Acc, Bounded, Buffer, BufferArray, Region, Scalar, TensorRef, Tile,
                     access, padding_mask)


@dataclass(frozen=True)
class Options:
    """Lowering choices that do not change results."""

    num_warps: int | None = None
    num_stages: int | None = None  # default: 3, fewer when the staged tiles are large
    # tensor-descriptor loads/stores where aligned: made by the host and passed as
    # arguments ("host"), or by every program for itself ("kernel"); True picks "host",
    # or "kernel" when epilogue_split needs its sliced descriptors; False: pointer loads
    descriptors: bool | str = True
    f32_precision: str = "tf32"  # or "ieee"
    target: str = "sm_90"  # the GPU the checker's resource and MMA rules follow
    # The order and number of the programs of a `: block` level (see _block_ids): blocks
    # are independent, so any one-to-one order computes the same result.
    group_m: int = 8  # MMA kernels on a 2-D block grid: GROUP_M rows of tiles at a time
    # launch one program per SM, each looping over the tiles; None: for MMA kernels
    persistent: bool | None = None
    flatten: bool = False  # the persistent tile loop: tl.range(flatten=True)
    warp_specialize: bool = False  # the persistent tile loop: tl.range(warp_specialize=True)
    # tensor-descriptor stores of 2-D tiles written as this many column slices (1 or 2):
    # half the shared memory for the epilogue, which leaves room for pipeline stages
    epilogue_split: int = 1
    # persistent MMA launches: the K iterations of the last, partial wave of tiles are
    # shared by all programs (True) or by at most this many programs per tile (an int >= 2)
    # (stream_k.py)
    stream_k: bool | int = False
    # block tiles whose extent is the sum of two powers of two (192 = 128 + 64) computed in
    # those two pieces instead of padded to the next power of two (split_tiles.py)
    split_tiles: bool = False
    # "cuda": a function that is a plain dense GEMM runs the hand-written Hopper kernel
    # (backends/cuda) where the GPU and the arguments suit it, its Triton kernel elsewhere
    backend: str = "triton"

    @property
    def descriptor_maker(self) -> str | None:
        """Who makes the tensor descriptors: "host", "kernel" or None (no descriptors)."""
        if self.descriptors is True:
            return "kernel" if self.epilogue_split > 1 else "host"
        return self.descriptors or None


# shared memory the default software pipeline may fill (Hopper has 227 KiB per block; the
# rest is left for the epilogue and layout conversions)
SHARED_BUDGET = 160 * 1024


@dataclass(frozen=True)
class BufferSlot:
    """A write target inside a shared/local buffer: offsets and extents."""

    buffer: Buffer
    offsets: tuple[ir.Expr, ...]
    extents: tuple[Sym, ...]


# --------------------------------------------------------------------------- functions


class FunctionLowering:
    def __init__(self, fn: CheckedFunction, options: Options) -> None:
        self.fn = fn
        self.options = options
        self.env: dict[Symbol, object] = {}
        self.tensors: dict[str, TensorRef] = {}
        self.body: list[ir.HostStmt] = []
        self.kernels: list[ir.Kernel] = []
        self.written: set[str] = set()
        self.params: list[ir.HostParam] = []

    def lower(self) -> ir.Function:
        with recursion_headroom():  # statements and expressions nest up to MAX_DEPTH deep
            return self._lower()

    def host_params(self) -> list[ir.HostParam]:
        """The parameters the host function binds (without lowering the body)."""
        for sym in self.fn.params:
            self._param(sym)
        return self.params

    def _lower(self) -> ir.Function:
        node = self.fn.node
        self.host_params()
        pending: list[ast.Stmt] = []
        for stmt in node.body.stmts:
            if _touches_data(stmt):
                pending.append(stmt)
                continue
            self._host_program(pending)
            self._host_stmt(stmt)
        self._host_program(pending)
        clones = [p.name for p in self.params
                  if p.kind == "tensor" and p.storage != "global" and not p.by_ref
                  and p.name in self.written]
        return ir.Function(node.name, self.params, self.body, self.fn.returns,
                           sorted(self.fn.dims), self.kernels, clones,
                           list(self.fn.runtime_checks))

    def fresh_tensor(self, base: str) -> str:
        """A host tensor name no parameter or buffer uses (scratch memory)."""
        names = set(self.tensors) | {p.name for p in self.params}
        name = base
        for i in itertools.count(1):
            if name not in names:
                return name
            name = f"{base}_{i}"
        raise AssertionError("unreachable")

    def _param(self, sym: Symbol) -> None:
        elem = sym.elem or dtypes.F32
        if sym.kind is SymKind.DATA:
            tensor = TensorRef(sym.name, elem, sym.shape or ())
            self.tensors[sym.name] = tensor
            self.env[sym] = tensor
            storage = "global" if _declared_global(self.fn, sym) else "host"
            self.params.append(ir.HostParam(sym.name, "tensor", elem.name, sym.shape or (),
                                            by_ref=sym.by_ref, storage=storage))
        else:
            # Python numbers arrive as 32-bit ints or floats; narrower types are rounded in
            # the kernel, so an `f16` parameter holds an f16 value as the reference's does
            arrives = ir.DType.F32 if elem.is_float else ir.DType.I32
            self.env[sym] = Scalar(b.cast(b.var(sym.name, arrives), b.dtype_of(elem)), elem)
            self.params.append(ir.HostParam(sym.name, "scalar", elem.name))

    def _host_stmt(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, (ast.Empty, ast.MmaCommit, ast.SyncStmt)):
            return  # (launches finish before the host goes on: a host sync has nothing to do)
        if isinstance(stmt, ast.SpannedDecl):
            for sym in self.fn.decls.get(id(stmt), []):
                self._alloc(stmt, sym)
            return
        if isinstance(stmt, ast.Parallel) and is_device_scope(stmt):
            for inner in stmt.body.stmts:  # host code choosing a device: see the checker
                self._host_stmt(inner)
            return
        if isinstance(stmt, ast.Parallel):
            index = len(self.kernels)
            kernel = KernelLowering(self, stmt, f"{self.fn.node.name}_k{index}").lower()
            self.kernels.append(kernel)
            self.body.append(ir.HostLaunch(kernel))
            return
        if isinstance(stmt, ast.ReturnStmt):
            if self.fn.returns == "scalar" and stmt.value is not None:
                info = self.fn.exprs.get(id(stmt.value))
                if info is None or info.static is None:
                    raise unsupported(stmt.span, "returning a scalar computed at run time")
                self.body.append(ir.HostReturn(None, info.static))
                return
            sym = self.fn.returned
            self.body.append(ir.HostReturn(sym.name if sym is not None else None))
            if sym is not None and sym.is_param:
                self.written.add(sym.name)  # returning a parameter returns a copy
            return
        if isinstance(stmt, ast.ScalarDecl):
            for item, sym in zip(stmt.items, self.fn.decls.get(id(stmt), [])):
                self._host_scalar(sym, item.init, stmt.span)
            return
        decls = self.fn.decls.get(id(stmt), [])
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind is SymKind.SCALAR for s in decls):  # `n = cdiv(SEQ, 64);`
            for item, sym in zip(stmt.items, decls):
                self._host_scalar(sym, item.value, stmt.span)
            return
        if isinstance(stmt, (ast.MdspanDecl, ast.ItupleDecl)):
            return  # compile-time values: the checker folded their uses
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind in (SymKind.ITUPLE, SymKind.MDSPAN) for s in decls):
            return  # `t = {1, 2};` declares a compile-time ituple (other assignments: below)
        if isinstance(stmt, ast.AssignStmt) and decls and all(
                s.kind is SymKind.VIEW for s in decls):
            self._host_views(stmt, decls)
            return
        if isinstance(stmt, ast.PrintStmt):
            return  # `print!`: nothing to run
        if isinstance(stmt, ast.AssertStmt):
            if id(stmt) in self.fn.host_asserts:
                return  # decided at compile time, or tested when the arguments are bound
            raise unsupported(stmt.span, "an assert on values computed at run time")
        raise unsupported(stmt.span, f"the host statement '{type(stmt).__name__}'",
                          "host code may allocate buffers, launch parallel blocks and return")

    def _host_scalar(self, sym: Symbol, init: ast.Expr | None, span: Span) -> None:
        if sym.value is not None and not sym.mutable:
            return  # known from constants and sizes: uses are folded by the checker
        value = _literal_value(init, self.fn.exprs.get(id(init))) if init is not None else 0
        if value is None and init is not None and _from_scalars(init):
            # computed from scalar parameters: each kernel computes it again
            self.env[sym] = HostScalar(init, sym.elem or dtypes.INT)
            return
        if value is None:
            raise unsupported(span, "a host scalar computed at run time",
                              "host code computes scalars from parameters and "
                              "constants; read data inside a parallel block")
        elem = sym.elem or dtypes.INT
        self.env[sym] = Scalar(b.const(value, b.dtype_of(elem)), elem)

    def _host_program(self, stmts: list[ast.Stmt]) -> None:
        """Host statements that read or write data element by element (``foreach i ...
        M.at(i) = ...;`` between blocks) run in order as one program of one thread."""
        if not stmts:
            return
        span = stmts[0].span.join(stmts[-1].span)
        block = ast.Block(span, tuple(stmts))
        index = len(self.kernels)
        kernel = KernelLowering(self, block, f"{self.fn.node.name}_k{index}").lower()
        self.kernels.append(kernel)
        self.body.append(ir.HostLaunch(kernel))
        stmts.clear()

    def _host_views(self, stmt: ast.AssignStmt, decls: list[Symbol]) -> None:
        """``l = lhs.span_as(6, 64);`` on the host: a view the kernels read through. It
        is resolved as a kernel would resolve it; views that need run-time values (which
        the host does not compute) are rejected."""
        probe = KernelLowering(self, None, "host")  # type: ignore[arg-type]
        for item, sym in zip(stmt.items, decls):
            view = probe.resolve_view_read(item.value)
            if probe.scopes[0] or not isinstance(view, Region):
                raise unsupported(item.span, "a host view that needs values computed at run "
                                             "time", "declare the view inside the parallel block")
            self.env[sym] = view

    def _alloc(self, stmt: ast.SpannedDecl, sym: Symbol) -> None:
        elem = sym.elem or dtypes.F32
        if elem.torch is None:
            raise LoweringError("CQ0214", stmt.span, elem=elem.name)
        tensor = TensorRef(sym.name, elem, sym.shape or ())
        self.tensors[sym.name] = tensor
        self.env[sym] = tensor
        var = next(v for v in stmt.vars if v.name == sym.name)
        fill = None
        if var.init is not None:
            info = self.fn.exprs.get(id(var.init))
            fill = _literal_value(var.init, info)
            if fill is None:
                raise unsupported(var.init.span, "a buffer initialiser that is not a constant")
        self.body.append(ir.HostAlloc(sym.name, tensor.dims, elem.torch, fill, stmt.span))


def _limited(region: Region, ends: list[tuple[int, ir.Expr]]) -> Region:
    """``region`` masked past runtime extents: ``ends`` holds, per view dimension, an
    end offset from the region's origin (``view(1, X, _).from(...)``)."""
    if not ends:
        return region
    limits = list(region.limits)
    for d, end in ends:
        t = region.axis_of(d)
        limits[t] = limits[t] + (b.add(region.origin[t], end),)
    return region._replace(limits=tuple(limits))


@dataclass(frozen=True)
class HostScalar:
    """A host scalar whose value is an expression of scalar parameters and constants."""

    expr: ast.Expr
    elem: dtypes.ElemType


def _from_scalars(expr: ast.Expr) -> bool:
    """Whether ``expr`` reads no data (only names, literals, operators and math)."""
    allowed = (ast.Ident, ast.IntLit, ast.FloatLit, ast.BoolLit, ast.Binary, ast.Unary,
               ast.Ternary, ast.Cast)
    for node in scratch.walk(expr):
        if isinstance(node, ast.CallExpr) and node.name in builtins.SUPPORTED:
            continue
        if isinstance(node, ast.Expr) and not isinstance(node, allowed):
            return False
    return True


def _touches_data(stmt: ast.Stmt) -> bool:
    """Host statements that run as a one-thread program: loops, branches, element
    writes and atomics (what only computes views, shapes or constants stays on the host;
    a loop that launches parallel blocks is not one program)."""
    if any(isinstance(node, ast.Parallel) for node in scratch.walk(stmt)):
        return False
    if isinstance(stmt, (ast.Foreach, ast.If, ast.While, ast.ExprStmt)):
        return True
    if isinstance(stmt, ast.PrintStmt):
        return not stmt.static  # (`print!` prints when compiling: nothing runs)
    return isinstance(stmt, ast.AssignStmt) and all(
        isinstance(item.target, ast.ElemAccess) for item in stmt.items)


def _declared_global(fn: CheckedFunction, sym: Symbol) -> bool:
    for param in fn.node.params:
        if param.name == sym.name:
            return param.storage == "global"
    return False


def _literal_value(expr: ast.Expr | None, info: object) -> float | int | None:
    if isinstance(expr, ast.IntLit):
        return expr.value
    if isinstance(expr, ast.FloatLit):
        return expr.value
    if isinstance(expr, ast.BoolLit):
        return int(expr.value)
    static = getattr(info, "static", None)
    if static is not None and static.is_const:
        return static.value
    return None


# --------------------------------------------------------------------------- kernels


class KernelLowering:
    def __init__(self, fl: FunctionLowering, stmt: ast.Parallel, name: str) -> None:
        self.fl = fl
        self.fn = fl.fn
        self.root = stmt
        self.name = name
        self.env: dict[Symbol, object] = dict(fl.env)
        self.scopes: list[list[ir.Stmt]] = [[]]
        self.prologue: list[ir.Stmt] = []
        self.axes: dict[object, ir.Axis] = {}
        self.order = itertools.count()
        self.params: dict[str, ir.KernelParam] = {}
        self.flags: dict[str, str] = {}
        self.used_names: set[str] = set()
        self.level_bounds: dict[Level, int] = {}
        self.descs: dict[tuple[str, tuple[int, ...]], str] = {}
        # descriptors of whole padded tiles, which split_tiles replaces by per-piece ones
        self.split_descs: dict[str, TensorRef] = {}
        self.has_dot = False
        self.dot_bytes = 0  # the largest MMA accumulator tile, in bytes
        self.active: list[ir.Axis] = []  # vector axes of the enclosing inner parallel levels
        self.predicates: list[ir.Expr] = []  # per-lane conditions of `inthreads` / vector `if`
        self.loop_depth = 0  # sequential loops around the statement being lowered
        self.apply_depth = 0  # inside `apply` blocks (apply.py)
        self.carried: set[int] = set()  # swaps understood as double buffering (loops.py)
        self.stage_bytes = 0  # shared memory one software-pipeline stage of MMA tiles needs
        self.grid: tuple[Sym, ...] = (Sym(1),)
        self.program_index: ir.Expr = b.const(0)  # this block's row-major index
        self.block_names: list[str] = []  # the variables of the `: block` level
        self.persistent_tiles: Sym | None = None  # the tile count of a persistent launch
        self.stream_k_floats = 0  # workspace floats per program of a stream-K launch
        self.element_targets: set[object] | None = None  # see scratch.element_written
        self.scratch_used = False  # some buffer lives in scratch memory (barriers matter)
        self.definitions: dict[str, ir.Expr] = {}  # let-bound names and their values
        self.events = None  # the event ledger of straight-line code (roles.py), made on use
        self.known: dict[str, int | float] = {}  # mutable scalars of straight-line code
        self.uncertain = 0  # inside a branch that may not run
        self.bodies: set[int] = set()  # parallel bodies: where a `yield` may end a thread
        self.yielding: set[int] = set()  # branches of `if`s directly in those bodies
        self.blocks: list[int] = []  # the blocks being lowered, innermost last
        self.continuing: ir.Expr | None = None  # lanes an `if` with a `yield` lets through
        self.whiles: list[tuple[int, ir.Var]] = []  # enclosing `while`s: body, active lanes
        self.exits: set[int] = set()  # branches of `if`s that may `break`/`continue`
        # global tensors whose tiles a later loop iteration reads back (accumulators loaded
        # from memory): moved by plain loads and stores, whose ordering a barrier settles
        self.read_back: set[str] = set()
        self.pipelining = True  # false when a loop reads back a tensor it stores (_kernel)
        self.loop_loaded: set[str] = set()  # global tensors loaded inside a loop (tiles.py)

    # ------------------------------------------------------------------ naming and emission
    def fresh(self, base: str) -> str:
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base) or "v"
        if keyword.iskeyword(base) or base in ("tl", "triton", "torch"):
            base += "_"
        name = base
        for i in itertools.count(1):
            if name not in self.used_names and name not in self.params:
                break
            name = f"{base}_{i}"
        self.used_names.add(name)
        return name

    def emit(self, stmt: ir.Stmt) -> None:
        self.scopes[-1].append(stmt)

    def predicate(self) -> ir.Expr | None:
        """The lanes that execute here (every enclosing per-lane condition), or None."""
        mask: ir.Expr | None = None
        for cond in self.predicates:
            mask = b.and_(mask, cond)
        return mask

    def guarded(self, mask: ir.Expr | None) -> ir.Expr | None:
        """A store mask restricted to the executing lanes."""
        return b.and_(mask, self.predicate())

    @property
    def body(self) -> list[ir.Stmt]:
        return self.scopes[-1]

    def nested(self) -> _Nested:
        return _Nested(self)

    def let(self, base: str, value: ir.Expr, span: Span | None = None) -> ir.Var:
        if isinstance(value, (ir.Const, ir.Var, ir.AxisIndex)):
            return value  # type: ignore[return-value]
        name = self.fresh(base)
        self.emit(ir.Let(span, name, value))
        self.definitions[name] = value
        return ir.Var(value.axes, value.dtype, name)

    def canonical(self, e: ir.Expr) -> tuple[object, ...]:
        """The structural key of ``e`` with let-bound names replaced by their values, so
        that ``stage`` (``stage = k % 4``) and ``k % 4`` written elsewhere compare equal."""
        for _ in range(32):  # definitions nest as deep as the lets that made them
            names = [n for n in _var_names(e) if n in self.definitions]
            if not names:
                break
            for name in names:
                e = b.substitute(e, name, self.definitions[name])
        return b.key(e)

    def axis(self, key: object, extent: int, base: str, min_size: int = 1) -> ir.Axis:
        """The axis for ``key``; the same hardware level reuses its axis (so that an
        accumulator private to ``p1`` of one parallel matches ``p1`` of another).
        ``min_size`` pads small extents (``tl.dot`` needs 16 in every dimension)."""
        axis = self.axes.get(key)
        if axis is None:
            axis = ir.Axis(self.fresh(f"ax_{base}"), max(min_size, b.next_pow2(extent)), extent,
                           next(self.order))
            self.axes[key] = axis
        return axis

    def tile_axis(self, extent: Sym, base: str, span: Span) -> ir.Axis:
        return self.axis(object(), static_extent(extent, span), base)

    # ------------------------------------------------------------------ parameters
    def use_tensor(self, tensor: TensorRef) -> TensorRef:
        if tensor.pointer not in self.params:
            self.params[tensor.pointer] = ir.KernelParam(tensor.pointer, ir.ParamKind.POINTER,
                                                         tensor.dtype, tensor.name)
        for dim in tensor.dims:
            self.use_sym(dim)
        return tensor

    def use_sym(self, value: Sym) -> None:
        for name in sorted(value.free_vars()):
            pname = ir.dim_var_name(name)
            if pname not in self.params:
                self.params[pname] = ir.KernelParam(pname, ir.ParamKind.INT, ir.DType.I32,
                                                    Sym.var(name))

    def sym(self, value: Sym) -> ir.Expr:
        self.use_sym(value)
        return b.sym(value)

    def tma_flag(self, tensor: TensorRef) -> str:
        """A constexpr flag the host sets when ``tensor`` suits a tensor descriptor:
        16-byte aligned base and leading strides."""
        name = f"TMA_{tensor.name}"
        if name not in self.flags:
            size = tensor.elem.bits // 8
            conds = [f"{ir.host_var_name(tensor.name)}.data_ptr() % 16 == 0"]
            for stride in tensor.strides()[:-1]:
                conds.append(f"{stride.render(ir.dim_var_name)} * {size} % 16 == 0")
            if self.fl.options.descriptor_maker == "host":  # (the host's descriptors need them)
                conds += [f"{dim.render(ir.dim_var_name)} > 0" for dim in tensor.dims]
            self.flags[name] = " and ".join(conds)
        return name

    def cpu_flag(self) -> str:
        """A constexpr flag that is true when the kernel runs in Triton's interpreter."""
        self.flags.setdefault("ON_CPU", "device.type == 'cpu'")
        return "ON_CPU"

    def use_scalar(self, sym: Symbol) -> None:
        if sym.name not in self.params:
            kind = ir.ParamKind.FLOAT if sym.elem and sym.elem.is_float else ir.ParamKind.INT
            self.params[sym.name] = ir.KernelParam(sym.name, kind,
                                                   b.dtype_of(sym.elem or dtypes.INT), sym.name)

    # ------------------------------------------------------------------ kernel
    def lower(self) -> ir.Kernel:
        if isinstance(self.root, ast.Block):  # host statements (FunctionLowering._host_program)
            for stmt in self.root.stmts:
                self.stmt(stmt)
                self.emit(ir.Barrier(stmt.span))  # the next statement sees every write
            return self._kernel((Sym(1),))
        levels = list(self.fn.parallels[id(self.root)])
        grid: tuple[Sym, ...] = (Sym(1),)
        if levels and levels[0].level is Level.BLOCK:
            grid = self._program_ids(levels.pop(0))
        self.grid = grid
        with self.nested_levels(levels):
            self.bodies.add(id(self.root.body))
            self.block(self.root.body)
        return self._kernel(grid)

    def _kernel(self, grid: tuple[Sym, ...]) -> ir.Kernel:
        body = self._split_tiles(self.scopes[0])
        if self.block_names:
            body, grid = self._block_ids(body)
        body = self.prologue + body
        if ir.converts_to_fp8(body):
            self.cpu_flag()  # the interpreter's fp8 rounding is replaced (codegen)
        if ir.reads_back(body):
            self.pipelining = False
        params = sorted(self.params.values(), key=lambda p: list(ir.ParamKind).index(p.kind))
        for name in self.flags:
            params.append(ir.KernelParam(name, ir.ParamKind.FLAG))
        return ir.Kernel(self.name, params, grid, sorted(self.axes.values(), key=lambda a: a.order),
                         body, self._num_warps(), self._num_stages(), self.root.span,
                         dict(self.flags), self.persistent_tiles, self.fl.options.epilogue_split,
                         self.stream_k_floats)

    def _split_tiles(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """``body`` with each padded tile axis computed in two power-of-two pieces where
        ``split_tiles`` asks for it and the pass applies (split_tiles.py); an axis that
        stays whole loads and stores through pointers."""
        from .tiles import make_descriptor

        if not self.fl.options.split_tiles:
            return body

        def piece_desc(name: str, dims: tuple[ir.Axis, ...]) -> str:
            tensor = self.split_descs[name]
            piece = make_descriptor(self, tensor, tuple(d.size for d in dims))
            if any(d.padded for d in dims):  # (another axis of the tile is split next)
                self.split_descs[piece] = tensor
            return piece

        for key, axis in list(self.axes.items()):
            if not axis.padded or split_tiles.uses_axis(self.prologue, axis):
                continue
            try:
                body, pieces = split_tiles.split_axis(body, axis, self._piece_axis, piece_desc)
            except split_tiles.NotSplit:
                continue
            del self.axes[key]
            self.axes.update({object(): piece for piece in pieces})
        body = split_tiles.pointer_paths(body, lambda axis: axis.padded)
        # descriptors nothing loads or stores through: those of whole padded tiles (each
        # piece has its own now), and pieces made for an axis that then did not split
        used = {n.desc for n in ir._nodes(body) if isinstance(n, (ir.DescLoad, ir.DescStore))}
        made = {p.name for p in self.params.values() if p.kind is ir.ParamKind.DESC} | {
            d.name for d in ir._nodes(self.prologue) if isinstance(d, ir.DefineDesc)}
        unused = made - used
        for name in unused:
            self.params.pop(name, None)
        self.prologue = [s for s in self.prologue if not (
            isinstance(s, ir.Branch) and any(isinstance(d, ir.DefineDesc) and d.name in unused
                                             for d in s.then))]
        tested = {n.flag for n in ir._nodes(self.prologue + body) if isinstance(n, ir.Branch)}
        tested |= {p.source.flag for p in self.params.values()
                   if isinstance(p.source, ir.HostDesc)}
        for flag in [f for f in self.flags if f.startswith("TMA_") and f not in tested]:
            del self.flags[flag]  # (the flag of a descriptor no longer made)
        return body

    def _piece_axis(self, whole: ir.Axis, size: int) -> ir.Axis:
        """A power-of-two piece of a split tile axis (in the same place among the axes)."""
        return ir.Axis(self.fresh(whole.name), size, size, whole.order)

    def _program_ids(self, level: LevelInfo) -> tuple[Sym, ...]:
        """Bind the variables of the `: block` level to names; the statements that compute
        them are written by ``_block_ids`` once the body is lowered (their form depends on
        whether the kernel multiplies matrices). Returns the logical grid."""
        bounds = level.bounds
        for bound in bounds:
            self.use_sym(bound)
        names = [self.fresh(v.name) for v in level.vars]
        index: ir.Expr = b.const(0)
        for sym, name, bound in zip(level.vars, names, bounds):
            self.env[sym] = Bounded(b.var(name, high=_high(bound)), bound)
            index = b.add(b.mul(index, b.sym(bound)), b.var(name))
        self.program_index = index  # row-major: unique per block whatever the launch order
        self.block_names = names
        self._bind_tuple(level)
        return tuple(bounds)

    def _block_ids(self, body: list[ir.Stmt]) -> tuple[list[ir.Stmt], tuple[Sym, ...]]:
        """The kernel body with the block variables computed in front, and the launch grid.

        Up to three block axes map to program ids directly. Otherwise the blocks are
        numbered by one flat tile index: row-major for more than three axes, and for a 2-D
        grid of an MMA kernel in groups of ``group_m`` rows (the tiles running at the same
        time then share rows of A and columns of B in the L2 cache). With ``persistent``
        one program per SM loops over the tile indices (no launch tail of short-lived
        programs, tensor descriptors made once)."""
        bounds, names = self.grid, self.block_names
        options = self.fl.options
        grouped = len(bounds) == 2 and options.group_m > 1 and self.has_dot
        persistent = self.has_dot if options.persistent is None else options.persistent
        if options.stream_k and self.has_dot and not persistent:
            raise LoweringError("CQ0705", self.root.span, option="stream_k",
                                reason="it needs a persistent launch (persistent=False)")
        if not (grouped or persistent or len(bounds) > 3):
            ids = [ir.Let(None, name, ir.Call((), b.I32, "program_id", (b.const(i),)))
                   for i, name in enumerate(names)]
            return ids + body, bounds
        total = Sym(1)
        for bound in bounds:
            total = total * bound
        tile = self.fresh("tile")
        ids = (self._grouped_ids(tile, options.group_m) if grouped
               else self._row_major_ids(tile))
        program = ir.Call((), b.I32, "program_id", (b.const(0),))
        if not persistent:
            return [ir.Let(None, tile, program)] + ids + body, (total,)
        programs = self.fresh("n_programs")
        self.params[programs] = ir.KernelParam(programs, ir.ParamKind.INT, ir.DType.I32,
                                               ir.PROGRAMS)
        self.persistent_tiles = total
        loop = ir.For(self.root.span, tile, program, b.sym(total), ids + body,
                      step=b.var(programs), flatten=options.flatten,
                      warp_specialize=options.warp_specialize)
        if options.stream_k and self.has_dot:
            return self._stream_k(loop, total), (total,)
        return [loop], (total,)

    def _stream_k(self, loop: ir.For, tiles: Sym) -> list[ir.Stmt]:
        """The persistent tile loop with its last wave split along K (stream_k.py)."""
        parts = None if self.fl.options.stream_k is True else int(self.fl.options.stream_k)
        names = stream_k.Names(self.fresh("workspace_ptr"), self.fresh("counters_ptr"),
                               self.fresh("STREAM_K"), self.fresh, parts)
        outer = {s.name for s in self.prologue if isinstance(s, (ir.Let, ir.DefineDesc))}
        try:
            stmts, floats = stream_k.split_last_wave(loop, names, outer)
        except stream_k.NotSplittable as exc:
            raise LoweringError("CQ0705", self.root.span, option="stream_k",
                                reason=str(exc)) from None
        self.params[names.workspace] = ir.KernelParam(names.workspace, ir.ParamKind.POINTER,
                                                      ir.DType.F32, ir.WORKSPACE)
        self.params[names.counters] = ir.KernelParam(names.counters, ir.ParamKind.POINTER,
                                                     ir.DType.I32, ir.COUNTERS)
        self.stream_k_floats = floats
        count = tiles.render(ir.dim_var_name)
        self.flags[names.flag] = f"0 < ({count}) % programs * 2 <= programs"
        return stmts

    def _row_major_ids(self, tile: str) -> list[ir.Stmt]:
        ids: list[ir.Stmt] = []
        rest: ir.Expr = b.var(tile)
        for name, bound in reversed(list(zip(self.block_names, self.grid))):
            size = b.sym(bound)
            ids.insert(0, ir.Let(None, name, b.binary("%", rest, size)))
            rest = b.binary("//", rest, size)
        return ids

    def _grouped_ids(self, tile: str, group_m: int) -> list[ir.Stmt]:
        """Tile ``tile`` of a 2-D grid walked ``group_m`` rows at a time, column by column
        within the group (the last group may have fewer rows)."""
        (row, col), (rows, cols) = self.block_names, self.grid
        t, group = b.var(tile), b.const(group_m)
        width = self.fresh("group_width")
        first = self.fresh("first_row")
        height = self.fresh("group_rows")
        within = b.binary("%", t, b.var(width))
        return [
            ir.Let(None, width, b.mul(group, b.sym(cols))),
            ir.Let(None, first, b.mul(b.binary("//", t, b.var(width)), group)),
            ir.Let(None, height, ir.Call((), b.I32, "minimum",
                                         (b.binary("-", b.sym(rows), b.var(first)), group))),
            ir.Let(None, row, b.add(b.var(first), b.binary("%", within, b.var(height)))),
            ir.Let(None, col, b.binary("//", within, b.var(height))),
        ]

    def _bind_tuple(self, level: LevelInfo) -> None:
        if level.tuple_symbol is not None:
            self.env[level.tuple_symbol] = [self.env[v] for v in level.vars]

    def _num_stages(self) -> int:
        if not self.pipelining:  # a loop reads back what it stored: one stage, in order
            return 1
        if self.fl.options.num_stages:
            return self.fl.options.num_stages
        stages = 3
        while stages > 1 and stages * self.stage_bytes > SHARED_BUDGET:
            stages -= 1
        return stages

    def _num_warps(self) -> int:
        if self.fl.options.num_warps:
            return self.fl.options.num_warps
        threads = threads_per_block(self.level_bounds)
        warps = max(1, min(16, -(-threads // 32)))
        warps = b.next_pow2(warps)
        if not self.has_dot:
            return min(warps, 8)
        # a warpgroup at least; more when the accumulator would take over 128 registers a
        # thread (a 128 x 256 f32 tile: two warpgroups, as measured on the H200)
        by_registers = b.next_pow2(-(-self.dot_bytes // (32 * 128 * 4)))
        return max(warps, 4, min(by_registers, 8))

    # ------------------------------------------------------------------ levels
    def nested_levels(self, levels: list[LevelInfo]) -> _LevelScope:
        return _LevelScope(self, levels)

    def enter_level(self, level: LevelInfo) -> None:
        total = 1
        for j, (sym, bound) in enumerate(zip(level.vars, level.bounds)):
            extent = bound.value or 1
            total *= extent
            if extent == 1:
                self.env[sym] = Bounded(b.const(0), bound)
                continue
            axis = self.axis((level.level, j, extent), extent, sym.name)
            self.env[sym] = Bounded(b.axis_index(axis), bound)
            self.active.append(axis)
        previous = self.level_bounds.get(level.level, 1)
        self.level_bounds[level.level] = max(previous, total)
        self._bind_tuple(level)

    # ------------------------------------------------------------------ statements
    def block(self, block: ast.Block) -> None:
        """The statements of ``block``. A ``yield`` ends the thread: nothing after it in
        the block runs, and after an ``if`` whose branch yields, the rest of the parallel
        body runs only on the lanes that did not (spec 5.2: early exit, masked when the
        condition differs between threads). ``inthreads.async`` roles run side by side, so
        a run of them is lowered together (roles.py); declarations between them (which
        every thread makes) go first."""
        depth = len(self.predicates)
        self.blocks.append(id(block))
        stmts = block.stmts
        try:
            i = 0
            while i < len(stmts):
                stmt = stmts[i]
                if isinstance(stmt, ast.YieldStmt):
                    if id(block) not in self.bodies | self.yielding or self.loop_depth:
                        raise unsupported(stmt.span, "'yield' inside a loop or a nested block",
                                          "yield directly in the parallel body or in an "
                                          "`if` there")
                    break
                if isinstance(stmt, (ast.BreakStmt, ast.ContinueStmt)) and self.whiles and (
                        id(block) in self.exits or id(block) == self.whiles[-1][0]):
                    if isinstance(stmt, ast.BreakStmt) and id(block) == self.whiles[-1][0]:
                        self._leave_while(None)
                    break  # the enclosing `if` masks what follows
                if _is_role(stmt):
                    j = i
                    while j < len(stmts) and (_is_role(stmts[j]) or _declares_only(stmts[j])):
                        j += 1
                    while not _is_role(stmts[j - 1]):
                        j -= 1
                    for other in stmts[i:j]:
                        if not _is_role(other):
                            self.stmt(other)
                    self.roles([other for other in stmts[i:j] if _is_role(other)])
                    i = j
                else:
                    self.stmt(stmt)
                    i += 1
                if self.continuing is not None:
                    self.predicates.append(self.continuing)
                    self.continuing = None
        finally:
            self.blocks.pop()
            del self.predicates[depth:]

    def roles(self, roles: list[ast.InThreads]) -> None:
        from .roles import lower_roles

        lower_roles(self, roles)

    def stmt(self, stmt: ast.Stmt) -> None:
        method = getattr(self, "_s_" + type(stmt).__name__, None)
        if method is None:
            raise unsupported(stmt.span, _describe(stmt))
        try:
            method(stmt)
        except (LoweringError, NeedsSpecialization):
            raise
        except Exception as exc:  # a lowering bug: report it at the statement, not line 1
            if isinstance(stmt, (ast.Block, ast.Parallel, ast.Foreach, ast.With, ast.If)):
                raise
            raise LoweringError("CQ0901", stmt.span,
                                detail=f"lowering: {type(exc).__name__}: {exc}") from exc

    def _s_Block(self, stmt: ast.Block) -> None:
        self.block(stmt)

    def _s_Empty(self, stmt: ast.Empty) -> None:
        pass

    def _s_MmaCommit(self, stmt: ast.MmaCommit) -> None:
        pass

    def _s_SyncStmt(self, stmt: ast.SyncStmt) -> None:
        if stmt.kind == "barrier" and (stmt.level == "device" or (
                stmt.level == "block" and self._cooperative())):
            raise LoweringError("CQ0702", stmt.span, construct="a grid-wide barrier",
                                reason="Triton programs cannot wait for each other; split the "
                                       "work into two parallel blocks (two launches)")
        # a block barrier (`sync.barrier : block` outside cooperative launches, as in the
        # reference compiler), thread barriers, fences: tile values need no ordering, but
        # scratch memory does
        if stmt.kind in ("barrier", "shared") and self.scratch_used:
            self.emit(ir.Barrier(stmt.span))

    def _cooperative(self) -> bool:
        """Whether the blocks of this kernel are launched cooperatively (grid barriers)."""
        return any(info.node is not None and getattr(info.node, "cooperative", False)
                   for info in self.fn.parallels.get(id(self.root), ()))

    def _s_WaitStmt(self, stmt: ast.WaitStmt) -> None:
        """Copies are performed when issued, so waiting for a future has nothing left to
        do; waits for events outside warp-specialised roles are checked in program order."""
        from .roles import straight_line_event

        for target in stmt.targets:
            straight_line_event(self, stmt, target, "wait")

    def _s_TriggerStmt(self, stmt: ast.TriggerStmt) -> None:
        from .roles import straight_line_event

        for target in stmt.targets:
            straight_line_event(self, stmt, target, "trigger")

    def _s_EventDecl(self, stmt: ast.EventDecl) -> None:
        pass  # events carry no data: only their protocol is checked (roles.py)

    def _s_Parallel(self, stmt: ast.Parallel) -> None:
        levels = list(self.fn.parallels[id(stmt)])
        for level in levels:
            if level.level is Level.BLOCK:
                raise LoweringError("CQ0609", stmt.span, inner="block", outer="block")
        if apply.runs_in_turn(self, stmt):
            apply.lower_in_turn(self, stmt)
            return
        with self.nested_levels(levels):
            self.bodies.add(id(stmt.body))
            self.block(stmt.body)

    def _s_SpannedDecl(self, stmt: ast.SpannedDecl) -> None:
        for sym in self.fn.decls.get(id(stmt), []):
            elem = sym.elem or dtypes.F32
            if elem.torch is None:
                raise LoweringError("CQ0214", stmt.span, elem=elem.name)
            if sym.array_dims:
                self.env[sym] = self._buffer_array(stmt, sym, elem)
                continue
            buffer = Buffer(sym, sym.shape or (), elem, scope=self.scopes[-1],
                            lanes=scratch.private_lanes(self, sym.storage))
            var = next(v for v in stmt.vars if v.name == sym.name)
            if var.init is not None:
                buffer.content = self._filled_tile(buffer, var.init)
                if scratch.element_written(self, sym):
                    scratch.scratch(self, buffer, stmt.span)  # filled, then written piecewise
            self.env[sym] = buffer

    def _buffer_array(self, stmt: ast.SpannedDecl, sym: Symbol,
                      elem: dtypes.ElemType) -> BufferArray:
        var = next(v for v in stmt.vars if v.name == sym.name)
        if var.init is not None:
            raise unsupported(var.init.span, "an initialiser on an array of buffers")
        count = 1
        for dim in sym.array_dims:
            if dim.value is None:
                raise LoweringError("CQ0704", stmt.span, extent=dim)
            count *= dim.value
        return BufferArray(sym, sym.shape or (), elem, count)

    def array_element(self, array: BufferArray, index: tuple[ast.Expr, ...], span: Span,
                      write: bool) -> Buffer:
        """The buffer ``array[index]`` names. A write starts a fresh element under the
        index's key and forgets the others (they may be the same element at run time,
        unless both indices are different constants); a read must use the key of a write."""
        values = [self.value(i) for i in index]
        key = tuple(self.canonical(v) for v in values)
        constant = all(isinstance(v, ir.Const) for v in values)
        if write:
            for other in list(array.slots):
                if not (constant and other != key and all(k[0] == "Const" for k in other)):
                    del array.slots[other]
            array.slots[key] = Buffer(array.symbol, array.shape, array.elem,
                                      index=tuple(values))
            return array.slots[key]
        found = array.slots.get(key)
        if found is None:
            raise unsupported(span, f"reading an element of '{array.symbol.name}' that cannot "
                                    "be matched with the copy that filled it",
                              "index the array with the same expression as the copy into it, "
                              "e.g. `ring[k % STAGES]` for both")
        return found

    def _filled_tile(self, buffer: Buffer, init: ast.Expr) -> Tile:
        value = self.value(init)
        if value.axes:
            raise unsupported(init.span, "a buffer initialiser that differs between threads")
        dims = tuple(self.tile_axis(d, buffer.symbol.name, init.span) for d in buffer.shape)
        dtype = b.dtype_of(buffer.elem)
        fill = value.value if isinstance(value, ir.Const) else None
        if fill is None:
            raise unsupported(init.span, "a buffer initialiser that is not a constant")
        tile = self.let(buffer.symbol.name, ir.Full(ir.sort_axes(dims), dtype, fill))
        return Tile(tile, dims, buffer.elem)

    def _s_ScalarDecl(self, stmt: ast.ScalarDecl) -> None:
        for item, sym in zip(stmt.items, self.fn.decls.get(id(stmt), [])):
            elem = sym.elem or dtypes.INT
            dtype = b.dtype_of(elem)
            if item.init is None:
                value: ir.Expr = b.const(0, dtype)
            else:
                value = b.cast(self.value(item.init), dtype)
            if sym.mutable:
                # a per-thread variable lives over the thread axes from the start, so that
                # its type stays the same when later updates depend on the thread
                name = self.fresh(sym.name)
                self._note_known(name, value)
                value = _broadcast(value, tuple(self.active))
                self.emit(ir.Let(stmt.span, name, value))
                self.env[sym] = Scalar(ir.Var(value.axes, dtype, name), elem)
            else:
                self.env[sym] = Scalar(self.let(sym.name, value, stmt.span), elem)

    def _s_AssignStmt(self, stmt: ast.AssignStmt) -> None:
        declared = {s.name: s for s in self.fn.decls.get(id(stmt), [])}
        for item in stmt.items:
            self._assign(stmt, item, declared)

    def _assign(self, stmt: ast.AssignStmt, item: ast.Assign, declared: dict[str, Symbol]) -> None:
        target = item.target
        if isinstance(target, ast.Ident):
            sym = self.fn.refs.get(id(target))
            if sym is None:
                raise unsupported(item.span, "this assignment")
            if target.name in declared and declared[target.name] is sym:
                self._declare_value(sym, item.value, stmt.span)
                return
            current = self.env.get(sym)
            if isinstance(current, Acc):
                self._acc_arith(current, item)
                return
            if isinstance(current, Scalar) and isinstance(current.expr, ir.Var):
                old = current.expr
                value = b.cast(self._compound(item.op, old, item.value, current.elem), old.dtype)
                predicate = self.predicate()
                if predicate is not None:  # lanes that do not execute keep their value
                    value = ir.Where(b.merged(predicate, value, old), old.dtype, predicate,
                                     value, old)
                if set(value.axes) - set(old.axes):
                    raise unsupported(item.span, f"giving the scalar '{target.name}' a value "
                                      "per thread when it was declared outside the threads")
                self._note_known(old.name, value)
                value = _broadcast(value, old.axes)
                self.emit(ir.Let(stmt.span, old.name, value))
                return
            raise unsupported(item.span, f"assigning to '{target.name}' here")
        if isinstance(target, ast.ElemAccess):
            self._store_element(stmt, target, item)
            return
        if isinstance(target, ast.Index):  # an element of a fragment array
            from .mma import acc_arith_at

            acc_arith_at(self, target, item)
            return
        raise unsupported(item.span, "this assignment target")

    def _note_known(self, name: str, value: ir.Expr) -> None:
        """Remember the value of a mutable scalar while it is the same at every run of
        this point (straight-line code: no loop, no branch, no lane mask), so that event
        orders kept in such a variable are known when compiling (roles.py)."""
        for used in _var_names(value) & set(self.known):
            value = b.substitute(value, used, b.const(self.known[used], value.dtype))
        if isinstance(value, ir.Const) and not self.loop_depth and not self.uncertain \
                and self.predicate() is None:
            self.known[name] = value.value
        else:
            self.known.pop(name, None)

    def update(self, target: ast.Ident, op: str, stmt: ast.Stmt) -> None:
        """``x++`` / ``x--`` of a mutable scalar, as its own statement."""
        one = ast.IntLit(target.span, 1, "1")
        self._assign(stmt, ast.Assign(target.span, target, "+=" if op == "++" else "-=", one),
                     {})  # type: ignore[arg-type]

    def _declare_value(self, sym: Symbol, value: ast.Expr, span: Span) -> None:
        if sym.kind is SymKind.VIEW:
            self.env[sym] = self.resolve_view_read(value)  # type: ignore[arg-type]
            return
        if sym.kind in (SymKind.FUTURE, SymKind.DATA) and isinstance(value, ast.SelectExpr):
            from .dma import chosen_data

            if scratch.element_written(self, sym):
                raise unsupported(span, f"writing elements of '{sym.name}', a buffer "
                                        "chosen by 'select'", "write the chosen buffer by name")
            self.env[sym] = chosen_data(self, sym, value)
            return
        info = self.fn.exprs.get(id(value))
        expr = self.value(value)
        if info is not None and isinstance(info.type, BoundedType):
            self.env[sym] = Bounded(self.let(sym.name, expr, span), info.type.bound)
        else:
            elem = sym.elem or dtypes.INT
            self.env[sym] = Scalar(self.let(sym.name, b.cast(expr, b.dtype_of(elem)), span), elem)

    def _compound(self, op: str, current: ir.Expr, value: ast.Expr, elem: dtypes.ElemType) -> ir.Expr:
        rhs = b.cast(self.value(value), current.dtype)
        if op == "=":
            return rhs
        return self.arith(op[:-1], current, rhs, elem)

    def _store_element(self, stmt: ast.AssignStmt, target: ast.ElemAccess, item: ast.Assign) -> None:
        register = self._apply_target(target)
        if register is not None:
            apply.store_element(self, register, target, item, stmt.span)
            return
        buffer = self._element_buffer(target)
        if buffer is not None:
            scratch.store_element(self, buffer, target, item, stmt.span)
            return
        region, index, elem = self.element(target)
        if isinstance(region, Tile):
            raise unsupported(target.span, "writing single elements of a register-resident buffer")
        self.fl.written.add(region.tensor.name)
        pointer, mask = access(region, index)
        rhs = self.value(item.value)
        if item.op == "=":
            value = b.cast(rhs, region.tensor.dtype)
        else:  # computed in the promoted type of both sides, rounded once (spec 3.6)
            current = ir.Load(pointer.axes, pointer.dtype, pointer, mask)
            wide = self.promoted(elem, item.value)
            value = b.cast(self.arith(item.op[:-1], current, rhs, wide), region.tensor.dtype)
        mask = self.guarded(b.and_(mask, padding_mask(b.merged(pointer, value))))
        self.emit(ir.Store(stmt.span, pointer, value, mask))

    def _s_With(self, stmt: ast.With) -> None:
        for loop in self.fn.loops[id(stmt)]:
            for sym, bound in zip(loop.vars, loop.bounds):
                self.env[sym] = Bounded(b.const(0), bound)
            if loop.tuple_symbol is not None:
                self.env[loop.tuple_symbol] = [self.env[v] for v in loop.vars]
        self.block(stmt.body)

    def _s_Foreach(self, stmt: ast.Foreach) -> None:
        from .loops import lower_foreach

        lower_foreach(self, stmt)

    def _s_ExprStmt(self, stmt: ast.ExprStmt) -> None:
        expr = stmt.expr
        if isinstance(expr, ast.CallExpr) and expr.name in _ATOMICS:
            self.atomic(expr, stmt.span, want_result=False)
            return
        if isinstance(expr, ast.CallExpr) and expr.name in apply.FRAGMENT_CALLS:
            apply.lower_call(self, expr, stmt.span)
            return
        if isinstance(expr, (ast.Unary, ast.Postfix)) and expr.op in ("++", "--") and \
                isinstance(expr.operand, ast.Ident):
            self.update(expr.operand, expr.op, stmt)  # (its value is not used)
            return
        raise unsupported(stmt.span, _describe(expr) if not isinstance(expr, ast.CallExpr)
                          else f"the call '{expr.name}'")

    def atomic(self, call: ast.CallExpr, span: Span | None, want_result: bool) -> ir.Expr:
        """``__atomic_op(x.at(i), v[, w])``: one atomic read-modify-write per lane."""
        target = call.args[0]
        if isinstance(target, ast.Unary) and target.op == "&":
            target = target.operand
        if not isinstance(target, ast.ElemAccess):
            raise unsupported(call.span, "an atomic on something other than an element")
        buffer = self._element_buffer(target)
        if buffer is not None:
            source: Region | Tile = scratch.scratch(self, buffer, call.span)
            index = self.element_index(target)
            self.emit(ir.Barrier(span))
        else:
            source, index, _ = self.element(target)
        if isinstance(source, Tile):
            raise unsupported(call.span, "atomics on a register-resident buffer",
                              "update shared or global data that no copy forwards")
        self.fl.written.add(source.tensor.name)
        pointer, mask = access(source, index)
        dtype = source.tensor.dtype
        op = _ATOMICS[call.name]
        value = b.cast(self.value(call.args[1]), dtype)
        cmp = None
        if op == "sub":
            op, value = "add", b.binary("-", b.const(0, dtype), value)
        if op == "cas":
            cmp, value = value, b.cast(self.value(call.args[2]), dtype)
        mask = self.guarded(b.and_(mask, padding_mask(b.merged(pointer, value))))
        if op == "cas" and mask is not None:
            pointer, value, mask = _inert_cas(pointer, cmp, value, mask)
        result = self.fresh("old") if want_result else None
        self.emit(ir.Atomic(span, op, pointer, value, mask, cmp, result))
        if buffer is not None:
            self.emit(ir.Barrier(span))
        axes = b.merged(pointer, value)
        return ir.Var(axes, dtype, result) if result else b.const(0)

    def _e_CallExpr_atomic(self, e: ast.CallExpr) -> ir.Expr:
        return self.atomic(e, e.span, want_result=True)

    def _s_If(self, stmt: ast.If) -> None:
        cond = self._snapshot(_truth(self.value(stmt.cond)))
        continuing = self._yielding_if(stmt, cond)
        exits = self._exiting_if(stmt)
        if exits is not None and not cond.axes:
            cond = _broadcast(cond, self.whiles[-1][1].axes)  # masks, not a branch
        self._if(stmt, cond)
        if exits is not None:
            continuing = self._after_exit(cond, exits)
        self.continuing = continuing  # applies after the branches

    def _if(self, stmt: ast.If, cond: ir.Expr) -> None:
        if cond.axes:  # differs between threads: both branches run, under lane masks
            self._predicated(cond, stmt.then)
            if stmt.other is not None:
                self._predicated(ir.Unary(cond.axes, b.I1, "not", cond), stmt.other)
            return
        self.uncertain += 1
        try:
            with self.nested() as then:
                self.block(stmt.then)
            other: list[ir.Stmt] = []
            if stmt.other is not None:
                with self.nested() as other_scope:
                    self.block(stmt.other)
                other = other_scope.body
        finally:
            self.uncertain -= 1
        self.emit(ir.If(stmt.span, cond, then.body, other))

    def _yielding_if(self, stmt: ast.If, cond: ir.Expr) -> ir.Expr | None:
        """An ``if`` with a ``yield`` in a branch: the lanes that go on afterwards."""
        yields = [any(isinstance(s, ast.YieldStmt) for s in branch.stmts) if branch else False
                  for branch in (stmt.then, stmt.other)]
        if not any(yields):
            return None
        if self.blocks[-1] not in self.bodies or self.loop_depth:
            raise unsupported(stmt.span, "'yield' inside a loop or a nested block",
                              "yield from an `if` directly in the parallel body")
        self.yielding.update(id(branch) for branch in (stmt.then, stmt.other) if branch)
        if all(yields):
            return b.const(False, b.I1)
        return ir.Unary(cond.axes, b.I1, "not", cond) if yields[0] else cond

    def _s_InThreads(self, stmt: ast.InThreads) -> None:
        if stmt.is_async:
            self.roles([stmt])
            return
        cond = self._snapshot(_truth(self.value(stmt.pred)))
        if not cond.axes:
            with self.nested() as then:
                self.block(stmt.body)
            self.emit(ir.If(stmt.span, cond, then.body, []))
            return
        self._predicated(cond, stmt.body)

    def _snapshot(self, cond: ir.Expr) -> ir.Expr:
        """A per-lane condition under a name of its own: it masks statements that may
        change the variables it was computed from."""
        if not cond.axes or isinstance(cond, ir.AxisIndex):
            return cond
        name = self.fresh("cond")
        self.emit(ir.Let(None, name, cond))
        return ir.Var(cond.axes, cond.dtype, name)

    def _predicated(self, cond: ir.Expr, body: ast.Block) -> None:
        """Run ``body`` for the lanes where ``cond`` holds: every write is masked."""
        self.predicates.append(cond)
        try:
            self.block(body)
        finally:
            self.predicates.pop()

    def _s_While(self, stmt: ast.While) -> None:
        """``while (c) body``: lanes run while their condition holds. The loop goes on
        while any lane is active; the body is masked by the active lanes, ``break`` takes
        lanes out of the loop, ``continue`` masks the rest of their iteration."""
        cond = b.and_(_truth(self.value(stmt.cond)), self.predicate())
        assert cond is not None
        exits = any(isinstance(s, (ast.BreakStmt, ast.ContinueStmt)) for s in iter_stmts(stmt.body))
        # a condition every lane shares stays a scalar (the variables it reads may be
        # scalars the body updates); exits may differ between lanes, so they need the lanes
        axes = tuple(self.active) if cond.axes or exits else ()
        first = _broadcast(cond, axes)
        name = self.fresh("active")
        self.emit(ir.Let(stmt.span, name, first))
        active = ir.Var(first.axes, b.I1, name)
        with self.nested() as inner:
            self.whiles.append((id(stmt.body), active))
            self.predicates.append(active)
            self.loop_depth += 1
            try:
                self.block(stmt.body)
                again = b.and_(active, _truth(self.value(stmt.cond)))
                self.emit(ir.Let(stmt.span, name, _broadcast(again, active.axes)))
            finally:
                self.loop_depth -= 1
                self.predicates.pop()
                self.whiles.pop()
        any_active: ir.Expr = ir.Cast(active.axes, b.I32, active)
        for axis in active.axes:  # the largest flag over every lane
            rest = tuple(a for a in any_active.axes if a is not axis)
            any_active = ir.Reduce(rest, b.I32, "max", any_active, axis)
        any_active = b.binary(">", any_active, b.const(0), b.I1)
        self.emit(ir.While(stmt.span, any_active, inner.body))

    def _exiting_if(self, stmt: ast.If) -> tuple[str | None, str | None] | None:
        """For an ``if`` directly in a ``while`` body: which branch ends with ``break`` or
        ``continue`` (None when neither does)."""
        kinds = []
        for branch in (stmt.then, stmt.other):
            kind = None
            for inner in branch.stmts if branch else ():
                if isinstance(inner, ast.BreakStmt):
                    kind = "break"
                elif isinstance(inner, ast.ContinueStmt):
                    kind = "continue"
            kinds.append(kind)
        if not any(kinds) or not self.whiles:
            return None
        if self.blocks[-1] != self.whiles[-1][0]:
            raise unsupported(stmt.span, "'break'/'continue' nested deeper than an `if` "
                                         "directly in the 'while' body")
        self.exits.update(id(branch) for branch in (stmt.then, stmt.other) if branch)
        return kinds[0], kinds[1]

    def _after_exit(self, cond: ir.Expr, exits: tuple[str | None, str | None]) -> ir.Expr:
        """After an ``if`` that breaks or continues: the lanes that left stop being active
        (``break``); the rest of this iteration runs on the lanes that stayed."""
        taken = [cond, ir.Unary(cond.axes, b.I1, "not", cond)]
        stay: ir.Expr | None = None
        for kind, lanes in zip(exits, taken):
            if kind == "break":
                self._leave_while(lanes)
            if kind is not None:
                left = ir.Unary(lanes.axes, b.I1, "not", lanes)
                stay = b.and_(stay, left)
        assert stay is not None
        return stay

    def _leave_while(self, lanes: ir.Expr | None) -> None:
        """``break`` on ``lanes`` (all executing lanes when None)."""
        active = self.whiles[-1][1]
        leaving = b.and_(lanes, self.predicate()) if lanes is not None else self.predicate()
        remaining = ir.Unary(active.axes, b.I1, "not", leaving) if leaving is not None \
            else b.const(False, b.I1)
        self.emit(ir.Let(None, active.name, _broadcast(b.and_(active, remaining),
                                                       active.axes)))

    def _s_AssertStmt(self, stmt: ast.AssertStmt) -> None:
        """A device assertion: every active lane checks the condition (spec 5.10)."""
        if id(stmt) in self.fn.host_asserts:
            return  # decided at compile time, or tested when the arguments are bound
        cond = _truth(self.value(stmt.cond))
        self.emit(ir.Assert(stmt.span, cond, f"assertion failed: {stmt.message}",
                            self.guarded(padding_mask(cond.axes))))

    def _s_PrintStmt(self, stmt: ast.PrintStmt) -> None:
        if stmt.static:
            return  # print! happens at compile time in the reference; nothing to run
        args = [a for a in stmt.args if not isinstance(a, ast.StrLit)]
        label = " ".join(a.value for a in stmt.args if isinstance(a, ast.StrLit)) or "croqtile"
        values = [self.value(a) for a in args]
        self.emit(ir.Print(stmt.span, label, tuple(values)))

    # ------------------------------------------------------------------ DMA
    def _s_DmaStmt(self, stmt: ast.DmaStmt) -> None:
        from .dma import lower_dma

        lower_dma(self, stmt)

    def _s_DmaAny(self, stmt: ast.DmaAny) -> None:
        """``f = dma.any;``: a name for a copy still to come (double buffering)."""
        for sym in self.fn.decls.get(id(stmt), []):
            self.env[sym] = Buffer(sym, sym.shape or (), sym.elem or dtypes.F32)

    def _s_SwapStmt(self, stmt: ast.SwapStmt) -> None:
        """``swap(a, b)`` / ``rotate(a, b, ...)``: the names exchange their copies (a takes
        b's, ..., the last takes a's). Copies are views, so nothing moves."""
        syms = self.fn.swaps.get(id(stmt))
        if not syms or (self.loop_depth and id(stmt) not in self.carried):
            raise unsupported(stmt.span, f"this '{stmt.kind}' inside a loop",
                              "the supported pattern copies into one future before the loop, "
                              "into the other inside it, and swaps them at the end")
        values = [self.env.get(sym) for sym in syms]
        for sym, value in zip(syms, values[1:] + values[:1]):
            self.env[sym] = value

    # ------------------------------------------------------------------ MMA
    def _s_MmaFill(self, stmt: ast.MmaFill) -> None:
        from .mma import lower_fill

        lower_fill(self, stmt)

    def _s_MmaLoad(self, stmt: ast.MmaLoad) -> None:
        from .mma import lower_load

        lower_load(self, stmt)

    def _s_MmaExec(self, stmt: ast.MmaExec) -> None:
        from .mma import lower_exec

        lower_exec(self, stmt)

    def _s_MmaStore(self, stmt: ast.MmaStore) -> None:
        from .mma import lower_store

        lower_store(self, stmt)

    def _s_Apply(self, stmt: ast.Apply) -> None:
        apply.lower_apply(self, stmt)

    def _s_FragDecl(self, stmt: ast.FragDecl) -> None:
        from .mma import lower_frag_decl

        lower_frag_decl(self, stmt)

    def _s_MmaScale(self, stmt: ast.MmaScale) -> None:
        from .mma import lower_scale

        lower_scale(self, stmt)

    def _acc_arith(self, acc: Acc, item: ast.Assign) -> None:
        from .mma import acc_arith

        acc_arith(self, acc, item)

    # ------------------------------------------------------------------ views
    def resolve_view(self, view: ast.Expr, write: bool = False) -> Region | Tile | BufferSlot:
        """The region (or buffer slot, or register tile) a view expression denotes."""
        if not isinstance(view, ast.View):
            raise unsupported(view.span, "this operand")
        info: ViewInfo = self.fn.views[id(view)]
        root_sym = info.root  # (a view of a view alias carries the alias's steps)
        root = self.env.get(root_sym)
        if info.array_index:
            if not isinstance(root, BufferArray):
                raise unsupported(view.span, "indexing this value as an array of buffers")
            root = self.array_element(root, info.array_index, view.span, write)
        offsets: list[ir.Expr] = []
        extents = root_sym.shape or ()
        base = root
        if isinstance(root, Region):
            extents = root.extents
        elif isinstance(root, Tile):
            extents = tuple(Sym(d.extent) for d in root.dims)
        if isinstance(root, Buffer):
            extents = root.shape
            if not write:
                if root.content is None:
                    raise unsupported(view.span, f"reading '{root_sym.name}' before anything "
                                                 "is copied or stored into it")
                base = root.content
        elif isinstance(root, TensorRef):
            base = Region.whole(self.use_tensor(root))
            extents = root.dims
        elif not isinstance(root, (Region, Tile)):
            raise unsupported(view.span, f"'{root_sym.name}' as a view")
        offsets = [b.const(0) for _ in extents]
        ends: list[tuple[int, ir.Expr]] = []  # (view dim, end offset) of runtime extents
        for step in info.steps:
            if step.kind == "span_as":
                base = self._reshaped(base, offsets, tuple(extents), step)
                offsets = [b.const(0) for _ in step.extents]
                extents = step.extents
                continue
            if step.kind == "sqz":
                if not isinstance(base, Region):
                    raise unsupported(step.span, "'.sqz' of a register-resident buffer")
                base = _limited(base, ends).shifted(offsets, tuple(extents)).squeezed()
                offsets = [b.const(0) for _ in step.extents]
                extents, ends = step.extents, []
                continue
            if step.strides is not None:
                base = self._restrided(base, offsets, tuple(extents), ends, step)
                offsets = [b.const(0) for _ in step.extents]
                extents, ends = step.extents, []
                continue
            for d, (item, scale) in enumerate(zip(step.indices, step.scales)):
                offsets[d] = b.add(offsets[d], b.mul(self.index_item(item), self.sym(scale)))
            extents = step.extents
            for d, runtime in enumerate(step.dynamic):
                if runtime is not None:
                    ends.append((d, b.add(offsets[d], self.value(runtime))))
        if isinstance(base, Buffer):
            # (a copy into a runtime-sized part: the source's own masks say what arrives)
            return BufferSlot(base, tuple(offsets), tuple(extents))
        if isinstance(base, Region):
            self.use_tensor(base.tensor)
            if base.rank != len(offsets):
                raise unsupported(view.span, "views that change the rank of their data")
            return _limited(base, ends).shifted(offsets, tuple(extents))
        assert isinstance(base, Tile)
        if all(b.is_const(o, 0) for o in offsets) and all(
                e.value == d.extent for e, d in zip(extents, base.dims)):
            return base
        if base.split and all(b.is_const(o, 0) for o in offsets) and all(
                e.value == part for e, (_, part) in zip(extents, base.split)):
            return base  # an instance's whole element of an array its parts were stored to
        split = _instance_parts(offsets, tuple(extents), base)
        if split is not None:
            return replace(base, split=split)
        raise unsupported(view.span, "a sub-view of a register-resident buffer",
                          "copy the whole buffer, or stage the data with dma.copy first")

    def _restrided(self, base: object, offsets: list[ir.Expr], extents: tuple[Sym, ...],
                   ends: list[tuple[int, ir.Expr]], step: ViewStep) -> Region:
        """A step with explicit element strides, applied to the view built so far."""
        if not isinstance(base, Region):
            raise unsupported(step.span, "explicit element strides in a view of a buffer",
                              "take the strided view of a global tensor")
        if ends or any(d is not None for d in step.dynamic):
            raise unsupported(step.span, "explicit element strides with a runtime extent")
        self.use_tensor(base.tensor)
        parent = base.shifted(offsets, extents)
        origin = [b.mul(self.index_item(item), self.sym(scale))
                  for item, scale in zip(step.indices, step.scales)]
        for stride in step.strides or ():
            self.use_sym(stride)
        return parent.restrided(origin, step.extents, step.strides or ())

    def _reshaped(self, base: object, offsets: list[ir.Expr], extents: tuple[Sym, ...],
                  step: ViewStep) -> Region:
        """``span_as``: the same elements in a new shape. Supported for a whole tensor
        (row-major, so any shape of the same size is a re-striding of its memory)."""
        span = step.span
        if not isinstance(base, Region):
            raise unsupported(span, "'span_as' of a register-resident buffer")
        whole = Region.whole(base.tensor)
        if not (all(b.is_const(o, 0) for o in offsets) and base.key()[1:] == whole.key()[1:]
                and all(e.provably_eq(d) for e, d in zip(extents, base.tensor.dims))):
            raise unsupported(span, "'span_as' of part of a tensor",
                              "reshape the whole tensor, then take the part")
        return Region.whole(TensorRef(base.tensor.name, base.tensor.elem, step.extents))

    def resolve_view_read(self, view: ast.Expr) -> Region | Tile:
        result = self.resolve_view(view)
        assert not isinstance(result, BufferSlot)
        return result

    def index_item(self, item: IndexItem) -> ir.Expr:
        if item.expr is None:
            return b.const(0)
        if item.member is None:
            return self.value(item.expr)
        return self.members(item.expr)[item.member]

    def members(self, expr: ast.Expr) -> list[ir.Expr]:
        """Element values of a bounded ituple or an ituple."""
        info = self.fn.exprs.get(id(expr))
        if info is not None and isinstance(info.type, TupleType):
            return [self.sym(v) if v is not None else b.const(0) for v in info.type.values]
        if isinstance(expr, ast.Ident):
            sym = self.fn.refs.get(id(expr))
            value = self.env.get(sym) if sym is not None else None
            if isinstance(value, list):
                return [self._as_expr(v, expr.span) for v in value]
        raise unsupported(expr.span, "this tuple expression")

    # ------------------------------------------------------------------ element access
    def element(self, e: ast.ElemAccess) -> tuple[Region | Tile, list[ir.Expr], dtypes.ElemType]:
        base = e.base
        if isinstance(base, ast.Member) and base.member in ("data", "mdata"):
            base = base.obj
        if isinstance(base, ast.View) and id(base) in self.fn.views:  # `a.span_as(64).at(i)`
            view = self.resolve_view_read(base)
            view_elem = view.tensor.elem if isinstance(view, Region) else view.elem
            return view, self.element_index(e), view_elem
        subscripts: list[ast.Expr] = []
        while isinstance(base, ast.Index):  # `ring[s].at(i)`: an element of a buffer array
            subscripts.insert(0, base.index)
            base = base.base
        if not isinstance(base, ast.Ident):
            raise unsupported(e.span, "this element access")
        sym = self.fn.refs.get(id(base))
        value = self.env.get(sym) if sym is not None else None
        if subscripts:
            if not isinstance(value, BufferArray):
                raise unsupported(e.span, "this element access")
            value = self.array_element(value, tuple(subscripts), e.span, write=False)
        if isinstance(value, TensorRef):
            source: Region | Tile = Region.whole(self.use_tensor(value))
            elem = value.elem
        elif isinstance(value, Buffer):
            if value.content is None:
                raise unsupported(e.span, f"reading '{base.name}' before it holds data")
            index = self.element_index(e)
            return scratch.readable(self, value, index, e.span), index, value.elem
        elif isinstance(value, Acc) and sym is not None:
            source = apply.register_tile(self, sym, e.span)
            elem = value.elem
        elif isinstance(value, (Region, Tile)):
            source = value
            elem = value.tensor.elem if isinstance(value, Region) else value.elem
            if isinstance(value, Region):
                self.use_tensor(value.tensor)
        else:
            raise unsupported(e.span, "this element access")
        return source, self.element_index(e), elem

    def _apply_target(self, target: ast.ElemAccess) -> Symbol | None:
        """The accumulator or register buffer an element write inside ``apply`` replaces."""
        if not self.apply_depth or not isinstance(target.base, ast.Ident):
            return None
        sym = self.fn.refs.get(id(target.base))
        value = self.env.get(sym) if sym is not None else None
        if isinstance(value, Acc) or (isinstance(value, Buffer) and sym.storage == "local"
                                      and not isinstance(value.content, Region)):
            return sym
        return None

    def element_index(self, e: ast.ElemAccess) -> list[ir.Expr]:
        """The indices of ``x.at(...)``."""
        return self.indices(e.indices)

    def indices(self, exprs: tuple[ast.Expr, ...]) -> list[ir.Expr]:
        """Element indices, bounded ituples spread into their members."""
        index: list[ir.Expr] = []
        for expr in exprs:
            info = self.fn.exprs.get(id(expr))
            if info is not None and isinstance(info.type, (BoundedTupleType, TupleType)):
                index.extend(self.members(expr))
            else:
                index.append(self.value(expr))
        return index

    def _element_buffer(self, e: ast.ElemAccess) -> Buffer | None:
        """The shared/local buffer (or future's data) ``e`` writes into, if any."""
        base = e.base
        if isinstance(base, ast.Member) and base.member in ("data", "mdata"):
            base = base.obj
        sym = self.fn.refs.get(id(base)) if isinstance(base, ast.Ident) else None
        value = self.env.get(sym) if sym is not None else None
        return value if isinstance(value, Buffer) else None

    # ------------------------------------------------------------------ expressions
    def value(self, e: ast.Expr) -> ir.Expr:
        info = self.fn.exprs.get(id(e))
        if info is not None and info.static is not None and (
                _is_int_type(info.type) or isinstance(info.type, BoundedType)):
            return self.sym(info.static)
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            raise unsupported(e.span, _describe(e))
        return method(e)

    def _as_expr(self, value: object, span: Span) -> ir.Expr:
        if isinstance(value, (Scalar, Bounded)):
            return value.expr
        raise unsupported(span, "this value in an expression")

    def _e_Ident(self, e: ast.Ident) -> ir.Expr:
        sym = self.fn.refs.get(id(e))
        if sym is None:
            raise unsupported(e.span, f"the name '{e.name}' here")
        if sym.kind is SymKind.DIM:  # (a constant in a compile specialised on it)
            return self.sym(sym.value if sym.value is not None else Sym.var(sym.name))
        value = self.env.get(sym)
        if isinstance(value, Scalar) and sym.is_param:
            self.use_scalar(sym)
        if value is None and isinstance(sym.decl_node, ast.Parallel):
            raise unsupported(e.span, f"the rank of a block in its cluster ('{e.name}')",
                              "clusters are ignored (spec 8): index with the block variables")
        if isinstance(value, HostScalar):
            return b.cast(self.value(value.expr), b.dtype_of(value.elem))
        return self._as_expr(value, e.span)

    def _e_IntLit(self, e: ast.IntLit) -> ir.Expr:
        return b.const(e.value)

    def _e_FloatLit(self, e: ast.FloatLit) -> ir.Expr:
        return b.const(e.value, ir.DType.F32 if e.is_f32 else ir.DType.F64)

    def _e_BoolLit(self, e: ast.BoolLit) -> ir.Expr:
        return b.const(e.value, b.I1)

    def _e_InfLit(self, e: ast.InfLit) -> ir.Expr:
        return b.const(float("inf"), ir.DType.F32)

    def _e_ElemAccess(self, e: ast.ElemAccess) -> ir.Expr:
        source, index, elem = self.element(e)
        if isinstance(source, Tile):
            return self._tile_element(source, index, e.span)
        pointer, mask = access(source, index)
        if self.loop_depth:
            self.loop_loaded.add(source.tensor.name)
        return ir.Load(b.merged(pointer, *( [mask] if mask is not None else [])),
                       pointer.dtype, pointer, mask, source.fill,  # padding reads its value
                       source.eviction)

    def _tile_element(self, tile: Tile, index: list[ir.Expr], span: Span) -> ir.Expr:
        """Reading a register tile at indices that are exactly its own axes (or, inside
        ``apply``, the axes of the tile it spans)."""
        if all(isinstance(i, ir.AxisIndex) and i.axis is d for i, d in zip(index, tile.dims)):
            return tile.expr
        relabelled = _tile_over(tile, index)
        if relabelled is not None:
            return relabelled
        if self.apply_depth:
            return apply.read_element(tile, index, span)
        raise unsupported(span, "reading single elements of a register-resident buffer at "
                                "computed positions",
                          "read the data from where it was copied from, or use whole-tile code")

    def _e_Binary(self, e: ast.Binary) -> ir.Expr:
        if e.op == "#":
            rhs_info = self.fn.exprs[id(e.rhs)]
            bound = rhs_info.type.bound if isinstance(rhs_info.type, BoundedType) else Sym(1)
            return b.add(b.mul(self.value(e.lhs), self.sym(bound)), self.value(e.rhs))
        if e.op in ("#+", "#-"):  # the value stays; only the bound changes (spec 5.1)
            return self.value(e.lhs)
        lhs, rhs = self.value(e.lhs), self.value(e.rhs)
        info = self.fn.exprs[id(e)]
        if e.op in ("&&", "||"):
            return b.binary("&" if e.op == "&&" else "|", _truth(lhs), _truth(rhs), b.I1)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            common = _common_dtype(lhs.dtype, rhs.dtype)
            if common is ir.DType.BF16:
                common = ir.DType.F32
            return b.binary(e.op, b.cast(lhs, common), b.cast(rhs, common), b.I1)
        elem = info.type.elem if isinstance(info.type, ScalarType) else dtypes.INT
        return self.arith(e.op, lhs, rhs, elem)

    def promoted(self, elem: dtypes.ElemType, value: ast.Expr) -> dtypes.ElemType:
        """The type ``x op= value`` computes in: x's type promoted with the value's."""
        info = self.fn.exprs.get(id(value))
        other = info.type.elem if info is not None and isinstance(info.type, ScalarType) else elem
        return dtypes.promote(elem, other) or elem

    def arith(self, op: str, lhs: ir.Expr, rhs: ir.Expr, elem: dtypes.ElemType) -> ir.Expr:
        dtype = b.dtype_of(elem)
        if dtype in (ir.DType.BF16, ir.DType.F8E4, ir.DType.F8E5):
            # bf16 and fp8 arithmetic is computed in f32 and rounded once (what the hardware
            # does; Triton 3.6's interpreter would otherwise compute on the raw bit patterns)
            wide = self.arith(op, lhs, rhs, dtypes.F32)
            return b.cast(wide, dtype)
        lhs, rhs = b.cast(lhs, dtype), b.cast(rhs, dtype)
        if op == "/":
            op = "/" if dtype.is_float else "//"
        if op not in ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>"):
            raise unsupported(Span(0, 0), f"the operator '{op}'")
        return b.binary(op, lhs, rhs, dtype)

    def _e_Unary(self, e: ast.Unary) -> ir.Expr:
        if e.op in ("++", "--"):
            return self._stepped(e)
        operand = self.value(e.operand)
        if e.op == "!":
            return ir.Unary(operand.axes, b.I1, "not", operand)
        if e.op == "~":
            return ir.Unary(operand.axes, operand.dtype, "~", operand)
        raise unsupported(e.span, f"the operator '{e.op}' in an expression")

    def _stepped(self, e: ast.Unary | ast.Postfix) -> ir.Expr:
        """``++x`` / ``x--`` inside an expression: ``x`` is updated first; the value is the
        new one (prefix) or the one before (postfix, kept in a variable of its own)."""
        if not isinstance(e.operand, ast.Ident):
            raise unsupported(e.span, f"the operator '{e.op}' on this operand")
        before = None
        if isinstance(e, ast.Postfix):
            value = self.value(e.operand)
            before = ir.Var(value.axes, value.dtype, self.fresh(f"{e.operand.name}_before"))
            self.emit(ir.Let(e.span, before.name, value))
        self.update(e.operand, e.op, e)  # type: ignore[arg-type]
        return before if before is not None else self.value(e.operand)

    def _e_Postfix(self, e: ast.Postfix) -> ir.Expr:
        return self._stepped(e)

    def _e_Ternary(self, e: ast.Ternary) -> ir.Expr:
        cond = _truth(self.value(e.cond))
        then, other = self.value(e.then), self.value(e.other)
        info = self.fn.exprs[id(e)]
        dtype = b.dtype_of(info.type.elem) if isinstance(info.type, ScalarType) else then.dtype
        then, other = b.cast(then, dtype), b.cast(other, dtype)
        return ir.Where(b.merged(cond, then, other), dtype, cond, then, other)

    def _e_Select(self, e: ast.Select) -> ir.Expr:
        info = self.fn.exprs.get(id(e.base))
        index = self.fn.exprs[id(e.index)].static
        if info is not None and isinstance(info.type, BoundedTupleType) and index is not None:
            return self.members(e.base)[index.value or 0]
        raise unsupported(e.span, "this selection")

    def _e_SelectExpr(self, e: ast.SelectExpr) -> ir.Expr:
        """``select(k, x0, x1, ...)`` of scalars: ``x_k``."""
        info = self.fn.exprs[id(e)]
        if not isinstance(info.type, ScalarType):
            raise unsupported(e.span, "'select' of these values")
        dtype = b.dtype_of(info.type.elem)
        return self.choice(self.value(e.index),
                           [b.cast(self.value(o), dtype) for o in e.options])

    def choice(self, index: ir.Expr, options: list[ir.Expr]) -> ir.Expr:
        """``options[index]`` for a runtime ``index`` (the last option past the end)."""
        result = options[-1]
        for k in range(len(options) - 2, -1, -1):
            cond = b.binary("==", index, b.const(k, index.dtype))
            result = ir.Where(b.merged(cond, options[k], result), result.dtype, cond,
                              options[k], result)
        return result

    def _e_SizeOf(self, e: ast.SizeOf) -> ir.Expr:
        """``|n|`` of an integer computed at run time: n (shapes are folded earlier)."""
        info = self.fn.exprs.get(id(e.operand)) if e.operand is not None else None
        if info is None or not (_is_int_type(info.type) or isinstance(info.type, BoundedType)):
            raise unsupported(e.span, "'|...|' of this operand")
        return self.value(e.operand)  # type: ignore[arg-type]

    def _e_Cast(self, e: ast.Cast) -> ir.Expr:
        elem = dtypes.cast_target(e.target, e.quoted)
        if elem is None:
            raise unsupported(e.span, f"casts to the C++ type \"{e.target}\"")
        return b.cast(self.value(e.operand), b.dtype_of(elem))

    def _e_CallExpr(self, e: ast.CallExpr) -> ir.Expr:
        if e.name in _ATOMICS:
            return self._e_CallExpr_atomic(e)
        args = [self.value(a) for a in e.args]
        if e.name == "cdiv" and len(args) == 2:
            num, den = args
            return b.binary("//", b.binary("-", b.add(num, den), b.const(1)), den)
        info = self.fn.exprs[id(e)]
        dtype = b.dtype_of(info.type.elem) if isinstance(info.type, ScalarType) else b.I32
        if e.name not in builtins.SUPPORTED:
            raise unsupported(e.span, f"the built-in '{e.name}'")
        return builtins.lower_builtin(self, e.name, args, dtype, e.span)


def _inert_cas(pointer: ir.Pointer, cmp: ir.Expr | None, value: ir.Expr, mask: ir.Expr,
               ) -> tuple[ir.Pointer, ir.Expr, None]:
    """``tl.atomic_cas`` takes no mask: lanes outside ``mask`` compare-and-swap the
    tensor's first element with ``cmp`` for ``cmp``, which never changes it."""
    assert cmp is not None
    offset = ir.Where(b.merged(mask, pointer.offset), pointer.offset.dtype, mask,
                      pointer.offset, b.const(0, pointer.offset.dtype))
    inert = ir.Pointer(offset.axes, pointer.dtype, pointer.base, offset)
    value = ir.Where(b.merged(mask, value, cmp), value.dtype, mask, value, cmp)
    return inert, value, None


_ATOMICS = {
    "__atomic_add": "add", "__atomic_sub": "sub", "__atomic_exch": "xchg",
    "__atomic_min": "min", "__atomic_max": "max", "__atomic_and": "and", "__atomic_or": "or",
    "__atomic_xor": "xor", "__atomic_cas": "cas",
}


class _Nested:
    """``with kl.nested() as scope:`` collects statements into ``scope.body``."""

    def __init__(self, kl: KernelLowering) -> None:
        self.kl = kl
        self.body: list[ir.Stmt] = []

    def __enter__(self) -> _Nested:
        self.kl.scopes.append(self.body)
        return self

    def __exit__(self, *exc: object) -> None:
        self.kl.scopes.pop()


class _LevelScope:
    """Binds the variables of inner parallel levels for the duration of a body."""

    def __init__(self, kl: KernelLowering, levels: list[LevelInfo]) -> None:
        self.kl = kl
        self.levels = levels

    def __enter__(self) -> None:
        self.depth = len(self.kl.active)
        for level in self.levels:
            self.kl.enter_level(level)

    def __exit__(self, *exc: object) -> None:
        del self.kl.active[self.depth:]


def _instance_parts(offsets: list[ir.Expr], extents: tuple[Sym, ...],
                    tile: Tile) -> tuple[tuple[tuple[ir.Axis, ...], int], ...] | None:
    """``buf.subspan(64, 64).at(wg, 0)`` of a tile the instances filled side by side: when
    each offset is instance indices times whole parts, and the parts together cover the
    tile, the per-dimension split (see ``Tile.split``); None otherwise."""
    split = []
    for offset, extent, dim in zip(offsets, extents, tile.dims):
        lin = b.linearize(offset)
        if lin is None or lin.collapsed or not b.is_const(lin.rest, 0) or extent.value is None:
            return None
        covered = extent.value
        axes = []
        for axis, coef in sorted(lin.axes.items(), key=lambda kv: kv[1]):
            if coef != covered:
                return None
            axes.append(axis)
            covered *= axis.extent
        if covered != dim.extent:
            return None
        split.append((tuple(reversed(axes)), extent.value))
    return tuple(split)


def _children(node: ast.Node) -> Iterator[ast.Node]:
    """The AST nodes directly under ``node``."""
    for f in fields(node):
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        yield from (item for item in items if isinstance(item, ast.Node))


def _broadcast(value: ir.Expr, axes: tuple[ir.Axis, ...]) -> ir.Expr:
    """``value`` laid out over ``axes`` (zeros added along the axes it lacks)."""
    missing = [a for a in axes if a not in value.axes]
    if not missing:
        return value
    zeros = ir.Full(ir.sort_axes(missing), value.dtype, 0)
    return b.binary("+", value, zeros, value.dtype)


def _high(bound: Sym | None) -> int | None:
    """The largest value of an index in ``[0, bound)`` when the bound is static."""
    return bound.value - 1 if bound is not None and bound.value is not None else None


def _is_role(stmt: ast.Stmt) -> bool:
    return isinstance(stmt, ast.InThreads) and stmt.is_async


def _declares_only(stmt: ast.Stmt) -> bool:
    """A statement with no effect but a name: buffers without initialiser, events."""
    if isinstance(stmt, ast.SpannedDecl):
        return all(v.init is None for v in stmt.vars)
    return isinstance(stmt, (ast.Empty, ast.EventDecl))


def _var_names(e: ir.Expr) -> set[str]:
    if isinstance(e, ir.Var):
        return {e.name}
    names: set[str] = set()
    for child in b.children(e):
        names |= _var_names(child)
    return names


def _truth(e: ir.Expr) -> ir.Expr:
    return e if e.dtype == b.I1 else b.binary("!=", e, b.const(0, e.dtype), b.I1)


_RANK = [ir.DType.I1, ir.DType.I8, ir.DType.U8, ir.DType.I16, ir.DType.U16, ir.DType.I32,
         ir.DType.U32, ir.DType.I64, ir.DType.U64, ir.DType.F8E5, ir.DType.F8E4, ir.DType.BF16,
         ir.DType.F16, ir.DType.F32, ir.DType.F64]


def _common_dtype(a: ir.DType, b_: ir.DType) -> ir.DType:
    return a if _RANK.index(a) >= _RANK.index(b_) else b_


def _is_int_type(t: object) -> bool:
    return isinstance(t, ScalarType) and (t.elem.is_int or t.elem.name == "bool")


def _describe(node: ast.Node) -> str:
    names = {
        "While": "'while' loops", "InThreads": "'inthreads' blocks",
        "SwapStmt": "'swap'/'rotate'",
        "CppStmt": "'__cpp__' code", "AsmStmt": "inline assembly", "ExprStmt": "this statement",
        "PrintStmt": "'print'", "YieldStmt": "'yield'",
        "BreakStmt": "'break'", "ContinueStmt": "'continue'", "MmaScale": "'mma.scale'",
        "FragDecl": "'frag' declarations", "BufferMap": "'buffer.map'",
        "ExternCall": "external calls ('call')",
        "Unary": "a prefix operator as a statement",
    }
    return names.get(type(node).__name__, f"'{type(node).__name__}'")


def iter_stmts(block: ast.Block) -> Iterator[ast.Stmt]:
    """Every statement under ``block``, nested bodies included, in source order."""
    for stmt in block.stmts:
        yield stmt
        for name in ("body", "then", "other"):
            child = getattr(stmt, name, None)
            if isinstance(child, ast.Block):
                yield from iter_stmts(child)


from . import apply  # noqa: E402  (apply.py builds on this module)


def _tile_over(tile: Tile, index: list[ir.Expr]) -> ir.Expr | None:
    """A register tile read at the lanes of other axes of the same sizes, one per dimension
    in the same order (``foreach {i, j} in [TM, TN] ... acc_s.at(i, j)`` after
    ``mma.store mc, acc_s``: an epilogue on the accumulator): the tile itself, relabelled.
    None when the index is anything else."""
    axes = [i.axis for i in index if isinstance(i, ir.AxisIndex)]
    if len(axes) != len(index) or len(axes) != len(tile.dims) or len(set(axes)) != len(axes):
        return None
    if tile.split or set(tile.expr.axes) - set(tile.dims):
        return None  # differs between instances
    if any(a.size != d.size or a.extent != d.extent for a, d in zip(axes, tile.dims)):
        return None
    mapping = dict(zip(tile.dims, axes))
    value = _broadcast(tile.expr, ir.sort_axes(tile.dims))
    renamed = tuple(mapping[a] for a in value.axes)
    if renamed != ir.sort_axes(renamed):
        return None  # the index transposes the tile
    return ir.Relabel(renamed, value.dtype, value)
