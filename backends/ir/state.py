"""The state of a lowering and the helpers every lowering rule shares (the bottom layer).

``FunctionState`` holds what one ``__co__`` function's lowering collects (its parameters,
host statements, kernels and the tensors it writes); ``KernelState`` what one kernel's
lowering collects: the statements emitted so far (a stack of nested scopes), the tensor
axes of the inner parallel levels, the kernel parameters and constexpr flags, and the
bookkeeping of the rules (loops, predicates, events).

The lowering rules live above this module, one module per construct family (``exprs``,
``views``, ``control``, ``assign``, ``kernel``, ``dma``, ``mma``, ``apply``, ``loops``,
``roles``, ``scratch``, ``tiles``); ``lower.py`` combines them and dispatches statements.
Rules reach each other through the methods declared at the end of ``KernelState``.
"""

from __future__ import annotations

import itertools
import keyword
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Iterator

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.effects import reassigned_scalars
from ...frontend.sema.model import (CheckedFunction, Level, LevelInfo, ScalarType, Symbol,
                                     is_runtime_trips)
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from ..options import Options
from . import build as b
from . import nodes as ir
from .errors import static_extent, unsupported
from .values import Bounded, Buffer, Region, Scalar, TensorRef, Tile


# shared memory the default software pipeline may fill (Hopper has 227 KiB per block; the
# rest is left for the epilogue and layout conversions)
SHARED_BUDGET = 160 * 1024
SHARED_LIMIT = 224 * 1024  # (of the 227 KiB, a little for Triton's own barriers)


@dataclass(frozen=True)
class BufferSlot:
    """A write target inside a shared/local buffer: offsets and extents, and the end
    offsets of extents known only at run time (``buf.subspan(rows, K)``: (dimension, end)
    pairs, as ``Region.limited`` takes them)."""

    buffer: Buffer
    offsets: tuple[ir.Expr, ...]
    extents: tuple[Sym, ...]
    ends: tuple[tuple[int, ir.Expr], ...] = ()


@dataclass(frozen=True)
class FusedRows:
    """Warp(-group) instances that each own a slice of the rows of one tile, lowered side
    by side as one block-wide computation (instances.py): instance ``p`` owns rows
    ``[p * rows, (p + 1) * rows)`` of ``axis``, whose extent is the instance count times
    ``rows``. Inside their body the instance index is ``axis // rows``; register tiles of
    the symbols the body declares (``locals``) lay their ``rows``-long first dimension
    along ``axis``, so that each instance's rows sit where its MMA tile puts them."""

    axis: ir.Axis
    rows: int
    locals: frozenset[Symbol]

    def instance(self) -> ir.Expr:
        """The index of the instance that owns each lane of the row axis."""
        return b.binary("//", b.axis_index(self.axis), b.const(self.rows))

    def row(self) -> ir.Expr:
        """The row of each lane within its instance's slice."""
        return b.binary("%", b.axis_index(self.axis), b.const(self.rows))

    def is_row(self, e: ir.Expr) -> bool:
        """Whether ``e`` is ``row()`` (an index over one instance's rows)."""
        return (isinstance(e, ir.Binary) and e.op == "%" and isinstance(e.lhs, ir.AxisIndex)
                and e.lhs.axis is self.axis and b.is_const(e.rhs, self.rows))


@dataclass(frozen=True)
class HostScalar:
    """A host scalar whose value is an expression of scalar parameters and constants."""

    expr: ast.Expr
    elem: dtypes.ElemType


class FunctionState:
    """What the lowering of one ``__co__`` function collects (see ``lower.FunctionLowering``,
    which lowers its host statements)."""

    def __init__(self, fn: CheckedFunction, options: Options,
                 layout: ir.Layout | None = None) -> None:
        self.fn = fn
        self.options = options
        self.layout = layout or ir.Layout()
        self.env: dict[Symbol, object] = {}
        self.tensors: dict[str, TensorRef] = {}
        self.body: list[ir.HostStmt] = []
        self.kernels: list[ir.Kernel] = []
        self.written: set[str] = set()
        self.params: list[ir.HostParam] = []
        # buffers the first kernel writes in full before any read (coverage.py): no fill
        self.written_first: set[Symbol] = set()
        self.reassigned = reassigned_scalars(fn)  # the scalars assigned after declaration

    def fresh_tensor(self, base: str) -> str:
        """A host tensor name no parameter or buffer uses (scratch memory)."""
        names = set(self.tensors) | {p.name for p in self.params}
        name = base
        for i in itertools.count(1):
            if name not in names:
                return name
            name = f"{base}_{i}"
        raise AssertionError("unreachable")


class KernelState(ABC):
    """The state of one kernel's lowering, and the naming, emission, axis and parameter
    helpers every rule uses."""

    def __init__(self, fl: FunctionState, stmt: ast.Parallel | ast.Block | None,
                 name: str, fuse_instances: bool = True) -> None:
        self.fl = fl
        self.fn = fl.fn
        self.root = stmt
        self.name = name
        self.env: dict[Symbol, object] = dict(fl.env)
        self.scopes: list[list[ir.Stmt]] = [[]]
        self.binds: list[tuple[str, ...]] = [()]  # per scope: the names its construct binds
        self.prologue: list[ir.Stmt] = []
        self.axes: dict[object, ir.Axis] = {}
        self.order = itertools.count()
        self.params: dict[str, ir.KernelParam] = {}
        self.flags: dict[str, str] = {}
        # a scalar parameter is added to `params` under its own name when first used, so
        # temporaries must never take a scalar parameter's name, used yet or not (tensors
        # are passed as `<name>_ptr`, `<name>_desc`)
        self.used_names: set[str] = {p.name for p in self.fn.params
                                     if p.shape is None}
        self.level_bounds: dict[Level, int] = {}
        self.descs: dict[tuple[str, tuple[int, ...], tuple[int, ...]], str] = {}  # (tensor, block, order)
        # descriptors of squeezed views made by each program (tiles._view_descriptor): by
        # (tensor, block, the view's coordinates) -> (descriptor, its shift past the end)
        self.view_descs: dict[tuple[object, ...], tuple[str, str]] = {}
        # the tensor of each descriptor over the tensor's own dimension order (the tile
        # passes make descriptors of pieces of its block: split_tiles, halve_last_wave)
        self.desc_tensors: dict[str, TensorRef] = {}
        self.has_dot = False
        self.dot_bytes = 0  # the largest MMA accumulator tile, in bytes
        self.chained_dot = False  # an MMA multiplies a tile computed in registers (P·V)
        self.resident_bytes = 0  # MMA operand tiles loaded once before their loop (mma.py)
        self.active: list[ir.Axis] = []  # vector axes of the enclosing inner parallel levels
        self.predicates: list[ir.Expr] = []  # per-lane conditions of `inthreads` / vector `if`
        self.loop_depth = 0  # sequential loops around the statement being lowered
        self.apply_depth = 0  # inside `apply` blocks (apply.py)
        self.masked_ifs = 0  # inside vectorised loops: every `if` masks lanes (loops.py)
        self.carried: set[int] = set()  # swaps understood as double buffering (loops.py)
        self.collapsing: set[str] = set()  # K-slice loops being collapsed (loops.py)
        self.stage_bytes = 0  # shared memory one software-pipeline stage of MMA tiles needs
        self.grid: tuple[Sym, ...] = (Sym(1),)
        self.program_index: ir.Expr = b.const(0)  # this block's row-major index
        self.block_names: list[str] = []  # the variables of the `: block` level
        self.persistent_tiles: Sym | None = None  # the tile count of a persistent launch
        self.stream_k_floats = 0  # workspace floats per program of a stream-K launch
        self.element_targets: set[object] | None = None  # see scratch.element_written
        self.scratch_used = False  # some buffer lives in scratch memory (barriers matter)
        self.definitions: dict[str, ir.Expr] = {}  # let-bound names and their values
        self.events: object = None  # the event ledger of straight-line code (roles.py), made on use
        self.in_flight: dict[Symbol, str] = {}  # debug: the flags of futures (checks.py)
        # debug: the value each bounded local was declared with (checks.py)
        self.bounded_locals: dict[Symbol, ast.Expr] | None = None
        # debug: the lanes whose result is kept while the value of a store is lowered (the
        # lanes of its element inside the tensor); checks of that value skip the others
        self.kept_lanes: list[ir.Expr] = []
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
        self.hoisted: dict[tuple[object, ...], Tile] = {}  # tiles loaded where they were staged
        # MMA operand tiles loaded in the loop body, by region and tile shape: (the tile,
        # the statement list it was loaded into, where its loading statements start, them)
        self.operand_loads: dict[tuple[object, ...], tuple[Tile, list, int, tuple]] = {}
        # instances over row slices of one tile lowered side by side (instances.py): may
        # they be, the ones being lowered now, and whether any were (a failure then retries
        # the kernel with them in turn)
        self.fuse_instances = fuse_instances
        self.fused: FusedRows | None = None
        self.fusion_tried = False

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

    def nested(self, binds: tuple[str, ...] = ()) -> Nested:
        """A nested statement list; ``binds``: the names its construct binds (a loop's
        variable), visible inside it."""
        return Nested(self, binds)

    @contextmanager
    def emitting_into(self, scope: list[ir.Stmt], loop_depth: int) -> Iterator[None]:
        """Emit into ``scope``, an enclosing statement list (appended at its end: before the
        construct being lowered), as if at its loop depth."""
        depth = self.loop_depth
        self.scopes.append(scope)
        self.binds.append(())
        self.loop_depth = loop_depth
        try:
            yield
        finally:
            self.loop_depth = depth
            self.scopes.pop()
            self.binds.pop()

    def readable_at(self, depth: int, e: ir.Expr) -> bool:
        """Whether a statement appended to ``scopes[depth]`` now can compute ``e``."""
        names = {n for n in var_names(e) if n.isidentifier()}  # (others: symbolic sizes)
        return names <= self.visible_at(depth)

    def visible_at(self, depth: int) -> set[str]:
        """The names a statement appended to ``scopes[depth]`` now can read: kernel
        parameters, block indices, the prologue's names, and what that list and the lists
        enclosing it bind (lets, loop variables)."""
        names = set(self.params) | set(self.block_names)
        stmts = self.prologue + [s for scope in self.scopes[:depth + 1] for s in scope]
        while stmts:
            stmt = stmts.pop()
            if isinstance(stmt, (ir.Let, ir.DefineDesc)):
                names.add(stmt.name)
            elif isinstance(stmt, ir.Branch):  # (a constexpr choice: both define the names)
                stmts.extend(stmt.then + stmt.other)
        for binds in self.binds[:depth + 1]:
            names.update(binds)
        return names

    def let(self, base: str, value: ir.Expr, span: Span | None = None
            ) -> ir.Var | ir.Const | ir.AxisIndex:
        # A constant or an index is named by itself. A variable is not: accumulators,
        # mutable scalars and register tiles take new values under the same name, and a
        # local given such a variable must keep the value it had then (`int b = a;
        # a += 1;` leaves b as it was).
        if isinstance(value, (ir.Const, ir.AxisIndex)):
            return value
        name = self.fresh(base)
        self.emit(ir.Let(span, name, value))
        self.definitions[name] = value
        return ir.Var(value.axes, value.dtype, name)

    def canonical(self, e: ir.Expr) -> tuple[object, ...]:
        """The structural key of ``e`` with let-bound names replaced by their values, so
        that ``stage`` (``stage = k % 4``) and ``k % 4`` written elsewhere compare equal."""
        for _ in range(32):  # definitions nest as deep as the lets that made them
            names = [n for n in var_names(e) if n in self.definitions]
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

    def register_axes(self, sym: Symbol, shape: tuple[Sym, ...], span: Span
                      ) -> tuple[ir.Axis, ...]:
        """The axes of a register tile holding ``sym`` (a ``frag`` or ``local`` buffer):
        one per dimension; inside side-by-side instances, the instance's rows lie along
        the fused row axis."""
        fused = self.fused
        axes = []
        for d, extent in enumerate(shape):
            if (d == 0 and fused is not None and sym in fused.locals and sym.storage == "local"
                    and extent.value == fused.rows):
                axes.append(fused.axis)
            else:
                axes.append(self.tile_axis(extent, sym.name, span))
        return tuple(axes)

    # ------------------------------------------------------------------ parameters
    def use_tensor(self, tensor: TensorRef) -> TensorRef:
        if tensor.pointer not in self.params:
            self.params[tensor.pointer] = ir.KernelParam(tensor.pointer, ir.ParamKind.POINTER,
                                                         tensor.dtype, tensor.name)
        for dim in tensor.dims + tensor.explicit:
            self.use_sym(dim)
        return tensor

    def use_sym(self, value: Sym) -> None:
        for name in sorted(value.free_vars()):
            pname = ir.dim_var_name(name)
            if is_runtime_trips(name):
                continue  # (a run-time trip count: bound in the kernel, before its loop)
            if pname not in self.params:
                self.params[pname] = ir.KernelParam(pname, ir.ParamKind.INT, ir.DType.I32,
                                                    Sym.var(name))

    def sym(self, value: Sym) -> ir.Expr:
        self.use_sym(value)
        return b.sym(value)

    def tma_flag(self, tensor: TensorRef) -> str:
        """A constexpr flag the host sets when ``tensor`` suits a tensor descriptor:
        16-byte aligned base and leading strides, and (a parameter taken with its
        strides) a unit last stride and no zero stride."""
        name = f"TMA_{tensor.name}"
        if name not in self.flags:
            size = tensor.elem.bits // 8
            conds = [f"{ir.host_var_name(tensor.name)}.data_ptr() % 16 == 0"]
            strides = tensor.strides()
            if tensor.name in self.fl.layout.strided:
                conds.append(f"{strides[-1].render(ir.dim_var_name)} == 1")
                conds += [f"{stride.render(ir.dim_var_name)} > 0" for stride in strides[:-1]]
            for stride in strides[:-1]:
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

    # ------------------------------------------------------------------ levels
    def nested_levels(self, levels: list[LevelInfo]) -> LevelScope:
        return LevelScope(self, levels)

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
        self.bind_tuple(level)

    def bind_tuple(self, level: LevelInfo) -> None:
        if level.tuple_symbol is not None:
            self.env[level.tuple_symbol] = [self.env[v] for v in level.vars]

    # ------------------------------------------------------------------ the rules' interface
    # Defined by the rule families (control.py, exprs.py, views.py, assign.py) and combined
    # in lower.KernelLowering (which must define every one); construct modules call them
    # through the state they are given.
    @abstractmethod
    def stmt(self, stmt: ast.Stmt) -> None:
        """Lower one statement (lower.py dispatches it to its rule)."""

    @abstractmethod
    def block(self, block: ast.Block) -> None:
        """Lower the statements of a block (control.py)."""

    @abstractmethod
    def value(self, e: ast.Expr) -> ir.Expr:
        """The value of an expression (exprs.py)."""

    @abstractmethod
    def arith(self, op: str, lhs: ir.Expr, rhs: ir.Expr, elem: dtypes.ElemType) -> ir.Expr:
        """``lhs op rhs`` computed in ``elem`` (exprs.py)."""

    @abstractmethod
    def promoted(self, elem: dtypes.ElemType, value: ast.Expr) -> dtypes.ElemType:
        """The type ``x op= value`` computes in (exprs.py)."""

    @abstractmethod
    def choice(self, index: ir.Expr, options: list[ir.Expr]) -> ir.Expr:
        """``options[index]`` for a runtime index (exprs.py)."""

    @abstractmethod
    def update(self, target: ast.Ident, op: str, stmt: ast.Node) -> None:
        """``x++`` / ``x--`` of a mutable scalar (assign.py)."""

    @abstractmethod
    def resolve_view(self, view: ast.Expr, write: bool = False) -> Region | Tile | BufferSlot:
        """The region, buffer slot or register tile a view denotes (views.py)."""

    @abstractmethod
    def resolve_view_read(self, view: ast.Expr) -> Region | Tile:
        """A view that is read (views.py)."""

    @abstractmethod
    def element(self, e: ast.ElemAccess) -> tuple[Region | Tile, list[ir.Expr], dtypes.ElemType]:
        """What ``x.at(...)`` reads: its source, indices and element type (views.py)."""

    @abstractmethod
    def element_index(self, e: ast.ElemAccess) -> list[ir.Expr]:
        """The indices of ``x.at(...)`` (views.py)."""

    @abstractmethod
    def element_buffer(self, e: ast.ElemAccess) -> Buffer | None:
        """The shared/local buffer an element access names, if any (views.py)."""

    @abstractmethod
    def members(self, expr: ast.Expr) -> list[ir.Expr]:
        """The element values of a bounded ituple or an ituple (views.py)."""


class Nested:
    """``with kl.nested() as scope:`` collects statements into ``scope.body``."""

    def __init__(self, kl: KernelState, binds: tuple[str, ...]) -> None:
        self.kl = kl
        self.body: list[ir.Stmt] = []
        self.binds = binds

    def __enter__(self) -> Nested:
        self.kl.scopes.append(self.body)
        self.kl.binds.append(self.binds)
        return self

    def __exit__(self, *exc: object) -> None:
        self.kl.scopes.pop()
        self.kl.binds.pop()


class LevelScope:
    """Binds the variables of inner parallel levels for the duration of a body."""

    def __init__(self, kl: KernelState, levels: list[LevelInfo]) -> None:
        self.kl = kl
        self.levels = levels

    def __enter__(self) -> None:
        self.depth = len(self.kl.active)
        for level in self.levels:
            self.kl.enter_level(level)

    def __exit__(self, *exc: object) -> None:
        del self.kl.active[self.depth:]


# --------------------------------------------------------------------------- shared helpers


def children(node: ast.Node) -> Iterator[ast.Node]:
    """The AST nodes directly under ``node``."""
    for f in fields(node):
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        yield from (item for item in items if isinstance(item, ast.Node))


def broadcast(value: ir.Expr, axes: tuple[ir.Axis, ...]) -> ir.Expr:
    """``value`` laid out over ``axes`` (zeros added along the axes it lacks)."""
    missing = [a for a in axes if a not in value.axes]
    if not missing:
        return value
    zeros = ir.Full(ir.sort_axes(missing), value.dtype, 0)
    return b.binary("+", value, zeros, value.dtype)


def static_high(bound: Sym | None) -> int | None:
    """The largest value of an index in ``[0, bound)`` when the bound is static."""
    return bound.value - 1 if bound is not None and bound.value is not None else None


def var_names(e: ir.Expr) -> set[str]:
    if isinstance(e, ir.Var):
        return {e.name}
    names: set[str] = set()
    for child in b.children(e):
        names |= var_names(child)
    return names


def truth(e: ir.Expr) -> ir.Expr:
    return e if e.dtype == b.I1 else b.binary("!=", e, b.const(0, e.dtype), b.I1)


_RANK = [ir.DType.I1, ir.DType.I8, ir.DType.U8, ir.DType.I16, ir.DType.U16, ir.DType.I32,
         ir.DType.U32, ir.DType.I64, ir.DType.U64, ir.DType.F8E5, ir.DType.F8E4, ir.DType.BF16,
         ir.DType.F16, ir.DType.F32, ir.DType.F64]


def common_dtype(a: ir.DType, b_: ir.DType) -> ir.DType:
    return a if _RANK.index(a) >= _RANK.index(b_) else b_


def is_int_type(t: object) -> bool:
    return isinstance(t, ScalarType) and (t.elem.is_int or t.elem.name == "bool")


def describe(node: ast.Node) -> str:
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


def as_expr(value: object, span: Span) -> ir.Expr:
    """The expression a scalar or an index names."""
    if isinstance(value, (Scalar, Bounded)):
        return value.expr
    raise unsupported(span, "this value in an expression")
