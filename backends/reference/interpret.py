"""The reference interpreter: executes a checked ``__co__`` function on CPU torch tensors,
following spec 5 literally.

Host statements run directly. Every outermost ``parallel`` is a kernel launch: each
instance of each of its levels runs in turn -- block, group-4, group, thread -- one
statement at a time (spec 5.2). Shared buffers live in a block instance's frame, local
ones in a thread instance's; MMA fragments and local buffers declared at an outer level
are private to each inner instance that uses them. A parallel level whose body only
computes scalars and single elements may run its instances side by side as lanes
(``lanes.py``; ``Semantics.vectorize``); everything else runs instance by instance.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, TextIO

import torch

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.dtypes import ElemType
from ...frontend.sema.effects import written_parameters
from ...frontend.sema.levels import is_device_scope
from ...frontend.sema.model import (CheckedFunction, Level, LevelInfo, SymKind, Symbol,
                                     is_runtime_trips)
from ...frontend.source import Span
from ..options import Options
from . import arith, dma, events, mma
from .errors import AssertionFailed, InterpretError, not_implemented
from .exprs import Evaluator
from .lanes import lane_safe, walk
from .values import BufferArray, DataView, Frag, Frame, PrivateCell

UNDEFINED = ("zero", "keep", "poison")


@dataclass(frozen=True)
class Semantics:
    """How the interpreter fills what the spec leaves open, and how it runs (the compile
    options, ``croqtile.Options``, are separate: the interpreter reads their
    ``f32_precision``).

    ``undefined`` -- destination elements a copy does not write (a tail tile without
    ``.zfill``, spec 5.6) and fresh buffers without an initialiser (spec 6):
    ``"zero"`` (default) zero-fills shared/local destinations and fresh buffers and leaves
    global memory unchanged, as the Triton backend does (spec 5.6's recommended
    semantics); ``"keep"`` leaves every destination unchanged (the literal "not
    copied"); ``"poison"`` writes NaN / a sentinel, to find programs that read them.
    ``out_of_bounds`` -- an element access (``x.at(i)``) outside its data: ``"error"``
    (default; the spec defines no masking for element access, only for copies) or
    ``"mask"``: such writes are dropped and reads give the undefined value above, as the
    Triton backend's masked loads and stores do.
    ``vectorize`` -- run simple parallel levels as lanes (same results, much faster).
    ``out`` -- where ``print``/``println`` write (default ``sys.stdout``).
    """

    undefined: str = "zero"
    out_of_bounds: str = "error"
    vectorize: bool = True
    out: TextIO | None = None

    def __post_init__(self) -> None:
        if self.undefined not in UNDEFINED:
            raise ValueError(f"undefined must be one of {UNDEFINED}, not {self.undefined!r}")
        if self.out_of_bounds not in ("error", "mask"):
            raise ValueError("out_of_bounds must be 'error' or 'mask'")


class _Return(Exception):
    """``return`` on the host: unwinds to ``Interpreter.call`` with the value."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    """``break``: ends the innermost while/foreach (all variables of a foreach)."""


class _Continue(Exception):
    """``continue``: the next iteration of the innermost loop variable."""


class _Yield(Exception):
    """``yield``: the current parallel instance leaves the kernel."""


@dataclass
class _Instance:
    """One instance of a parallel statement: its frame, and whether it left (yield)."""

    frame: Frame
    done: bool = False


class Interpreter(Evaluator):
    """Runs one checked function; ``call(args)`` executes it once."""

    def __init__(self, fn: CheckedFunction, dims: dict[str, int], options: Options,
                 semantics: Semantics, locate: Callable[[Span], str] | None = None) -> None:
        self.fn = fn
        self.dims = dims
        self.options = options
        self.semantics = semantics
        self.locate = locate
        self.frame = Frame(None)
        self.mask: torch.Tensor | None = None  # active lanes (None: all of them)
        self.lanes = False  # inside a parallel running as lanes
        self.scaled_frags = _scaled_frags(fn)
        self.scheduler: events.Scheduler | None = None  # instances exchanging events
        self._lane_cache: dict[int, bool] = {}
        self._cooperative: set[int] = set()  # copies the whole block makes once
        self._stmt_methods: dict[type, Callable[[Any], None]] = {}
        self._init_evaluator()

    # ------------------------------------------------------------------ undefined values
    def undefined_value(self, elem: ElemType) -> Any:
        """The contents of a fresh buffer without an initialiser, and of tile elements
        read past the end of their data (spec 5.6, 6: undefined)."""
        return arith.poison(elem) if self.semantics.undefined == "poison" else 0

    def element_fill(self, elem: ElemType) -> Any:
        """What an element read outside its data gives: None (an error) or a value."""
        return None if self.semantics.out_of_bounds == "error" else self.undefined_value(elem)

    def missing_value(self, dst: DataView) -> Any:
        """What a copy writes into destination elements no source element reaches
        (None: leave them unchanged)."""
        if self.semantics.undefined == "poison":
            return arith.poison(dst.elem)
        if self.semantics.undefined == "zero" and dst.space != "global":
            return 0
        return None

    # ------------------------------------------------------------------ binding
    def bind(self, sym: Symbol, name: str, value: object) -> None:
        """Assign when the variable exists (a re-executed statement, a ``dma.any``
        placeholder), declare otherwise."""
        if self.owner(sym, name) is not None:
            self.assign(sym, name, value)
        else:
            self.define(sym, name, value)

    # ------------------------------------------------------------------ function
    def call(self, args: list[Any]) -> Any:
        node = self.fn.node
        for param, sym, arg in zip(node.params, self.fn.params, args):
            self.define(sym, sym.name, self._param_value(param, sym, arg))
        try:
            self.block(node.body)
        except _Return as ret:
            return ret.value
        return None

    def _param_value(self, param: ast.Param, sym: Symbol, arg: Any) -> Any:
        elem = sym.elem or dtypes.INT
        if sym.kind is SymKind.SCALAR:
            return arith.convert(arg, elem)
        # spec 6: global and by-reference parameters are used in place; other parameters
        # are copied in, so the caller never sees the kernel's writes
        tensor = arg if param.storage == "global" or param.by_ref else arg.clone()
        return DataView.whole(tensor, elem, "global", sym.name)

    # ------------------------------------------------------------------ statements
    def block(self, block: ast.Block) -> None:
        for stmt in block.stmts:
            self.exec(stmt)

    def exec(self, stmt: ast.Stmt) -> None:
        method = self._stmt_methods.get(type(stmt))
        if method is None:
            method = getattr(self, "_s_" + type(stmt).__name__, None)
            if method is None:
                raise self._located(not_implemented(_describe(stmt)), stmt)
            self._stmt_methods[type(stmt)] = method
        try:
            method(stmt)
        except (InterpretError, NotImplementedError) as err:
            self._located(err, stmt)
            raise

    def _located(self, err: Exception, stmt: ast.Stmt) -> Exception:
        """Prefix the message with the innermost statement's ``file:line``."""
        if self.locate is not None and not getattr(err, "located", False):
            err.args = (f"{self.locate(stmt.span)}: {err.args[0] if err.args else ''}",)
            err.located = True  # type: ignore[attr-defined]  # a marker on any exception
        return err

    def _s_Block(self, stmt: ast.Block) -> None:
        self.block(stmt)

    def _s_Empty(self, stmt: ast.Empty) -> None:
        pass

    def _s_CppStmt(self, stmt: ast.CppStmt) -> None:
        pass  # host C++: skipped (the checker warned; in a kernel it is an error)

    def _s_MmaCommit(self, stmt: ast.MmaCommit) -> None:
        pass  # spec 12.7: accepted as a no-op

    def _s_SyncStmt(self, stmt: ast.SyncStmt) -> None:
        """Barriers between the statements of one parallel body are honoured by the
        parallel runner: phases, or lanes in lockstep. Fences order nothing here: every
        write is visible at once."""

    def _s_SpannedDecl(self, stmt: ast.SpannedDecl) -> None:
        for var, sym in zip(stmt.vars, self.fn.decls.get(id(stmt), [])):
            elem = sym.elem or dtypes.F32
            shape = tuple(self.sym_value(d) for d in sym.shape or ())
            fill = self.undefined_value(elem)
            if var.init is not None:
                fill = arith.convert(self.eval(var.init), elem)
                fill = fill.item() if isinstance(fill, torch.Tensor) else fill
            # `frag T [M, K] x {v};`: a register tile, private to each instance
            space = "local" if stmt.frag else sym.storage or "global"
            arrays = tuple(self.sym_value(d) for d in sym.array_dims)
            allocate = functools.partial(_allocate, sym.name, arrays, shape, elem, space, fill)
            value = self.block_shared((id(stmt), var.name), allocate) if space == "shared" \
                else allocate()
            if space == "local":
                value = PrivateCell(value, sym.name)
            self.define(sym, var.name, value)

    def block_shared(self, key: tuple, allocate: Callable[[], Any]) -> Any:
        """A shared buffer declared (or allocated by ``=> shared``) inside an inner
        parallel level is one buffer for the whole block (spec 3.4), made by the first
        instance that gets there; declared by a block instance itself, it is made anew
        each time the declaration runs."""
        frame: Frame | None = self.frame
        while frame is not None and frame.key is None:
            frame = frame.parent
        if frame is None or frame.key is None or frame.shared is None or \
                all(k[0] == "block" for k in frame.key):
            return allocate()
        block = tuple(k for k in frame.key if k[0] == "block")
        cache = frame.shared
        if (block, key) not in cache:
            cache[(block, key)] = allocate()
        return cache[(block, key)]

    def _s_ScalarDecl(self, stmt: ast.ScalarDecl) -> None:
        for item, sym in zip(stmt.items, self.fn.decls.get(id(stmt), [])):
            elem = sym.elem or dtypes.INT
            value = self.eval(item.init) if item.init is not None else 0
            self.define(sym, item.name, arith.convert(value, elem))

    def _s_MdspanDecl(self, stmt: ast.MdspanDecl | ast.ItupleDecl) -> None:
        for sym in self.fn.decls.get(id(stmt), []):
            self.define(sym, stmt.name, self.eval(stmt.value))

    def _s_ItupleDecl(self, stmt: ast.ItupleDecl) -> None:
        self._s_MdspanDecl(stmt)

    def _s_AssignStmt(self, stmt: ast.AssignStmt) -> None:
        declared = {s.name: s for s in self.fn.decls.get(id(stmt), [])}
        for item in stmt.items:
            self._assign_item(item, declared)

    def _assign_item(self, item: ast.Assign, declared: dict[str, Symbol]) -> None:
        target = item.target
        if isinstance(target, ast.ElemAccess):
            self._store_element(target, item)
            return
        if isinstance(target, ast.Index):  # an element of a fragment array
            mma.frag_arith(self, mma.frag(self, target), item)
            return
        if not isinstance(target, ast.Ident):
            raise not_implemented(f"assigning to '{type(target).__name__}'")
        sym = self.fn.refs.get(id(target))
        if sym is None:
            raise InterpretError(f"'{target.name}' was not resolved by the checker")
        if declared.get(target.name) is sym or (sym.kind is SymKind.FUTURE
                                               and self.owner(sym, target.name) is None):
            self.define(sym, target.name, self._declared_value(sym, item.value))
            return
        current = self.lookup(sym, target.name)
        if isinstance(current, Frag):
            mma.frag_arith(self, current, item)
            return
        value = self.eval(item.value)
        if item.op != "=":
            elem = arith.promote(sym.elem or dtypes.INT, self.elem_of(item.value))
            value = arith.binary(item.op[:-1], current, value, elem, self.mask)
        if sym.kind is SymKind.SCALAR:
            value = arith.convert(value, sym.elem or dtypes.INT)
        self.assign(sym, target.name, value)

    def _declared_value(self, sym: Symbol, value: ast.Expr) -> Any:
        """``x = expr`` declaring ``x`` with the type of ``expr`` (spec 3.2)."""
        if sym.kind is SymKind.VIEW:
            return self.data_of(value)
        result = self.eval(value)
        if sym.kind is SymKind.SCALAR:
            return arith.convert(result, sym.elem or dtypes.INT)
        return result

    def _store_element(self, target: ast.ElemAccess, item: ast.Assign) -> None:
        """``x.at(i) = v`` / ``x.at(i) op= v``: computed in the promoted type, converted to
        the element type."""
        data, index = self.element_target(target)
        masked = self.semantics.out_of_bounds == "mask"
        address, inside = data.address(index, self.mask, masked)
        value = self.eval(item.value)
        if item.op != "=":
            current = data.load_at(address, inside, self.undefined_value(data.elem))
            elem = arith.promote(data.elem, self.elem_of(item.value))
            value = arith.binary(item.op[:-1], current, value, elem, self.mask)
        data.store_at(address, inside, arith.as_tensor(value, data.elem), self.mask)

    def _s_ExprStmt(self, stmt: ast.ExprStmt) -> None:
        self.eval(stmt.expr)

    def _s_AssertStmt(self, stmt: ast.AssertStmt) -> None:
        cond = arith.truth(self.eval(stmt.cond))
        if isinstance(cond, torch.Tensor):
            failed = ~cond if self.mask is None else self.mask & ~cond
            if bool(failed.any()):
                raise AssertionFailed(f"assertion failed: {stmt.message}")
        elif not cond:
            raise AssertionFailed(f"assertion failed: {stmt.message}")

    def _s_PrintStmt(self, stmt: ast.PrintStmt) -> None:
        if stmt.static:
            return  # print! happens at compile time
        parts = [_format(self.eval(a)) for a in stmt.args]
        out = self.semantics.out or sys.stdout
        out.write(" ".join(parts) + ("\n" if stmt.newline else ""))

    def _s_ReturnStmt(self, stmt: ast.ReturnStmt) -> None:
        if stmt.value is None:
            raise _Return(None)
        value = self.eval(stmt.value)
        if isinstance(value, DataView):
            sym = self.fn.returned
            tensor = value.as_tensor()
            if sym is not None and sym.is_param:
                tensor = tensor.clone()  # spec 6: returning a parameter returns a copy
            raise _Return(tensor.contiguous())
        if isinstance(value, torch.Tensor):
            value = value.item()
        raise _Return(value)

    def _s_BreakStmt(self, stmt: ast.BreakStmt) -> None:
        raise _Break()

    def _s_ContinueStmt(self, stmt: ast.ContinueStmt) -> None:
        raise _Continue()

    def _s_YieldStmt(self, stmt: ast.YieldStmt) -> None:
        raise _Yield()

    # ------------------------------------------------------------------ control flow
    def _s_If(self, stmt: ast.If) -> None:
        self._branch(stmt.cond, stmt.then, stmt.other)

    def _s_InThreads(self, stmt: ast.InThreads) -> None:
        """Only instances where ``pred`` holds run the body (spec 5.3); ``.async`` roles run
        the same way, their instances interleaved at event waits (``events.py``)."""
        self._branch(stmt.pred, stmt.body, None)

    def _branch(self, cond_expr: ast.Expr, then: ast.Block, other: ast.Block | None) -> None:
        """One branch per instance; with lanes, each branch on the lanes that take it."""
        cond = arith.truth(self.eval(cond_expr))
        if not isinstance(cond, torch.Tensor):
            if cond:
                self.block(then)
            elif other is not None:
                self.block(other)
            return
        self.masked(cond, lambda: self.block(then), None)
        if other is not None:
            self.masked(~cond, lambda: self.block(other), None)

    def _s_While(self, stmt: ast.While) -> None:
        if self.lanes:
            raise not_implemented("'while' inside a vectorised level")
        while arith.truth(self.eval(stmt.cond)):
            try:
                self.block(stmt.body)
            except _Break:
                break
            except _Continue:
                continue

    def _s_With(self, stmt: ast.With) -> None:
        """``with x in E``: ``x`` is bounded by ``E`` and its value is 0 (spec 5.1)."""
        for loop in self.fn.loops[id(stmt)]:
            for sym in loop.vars:
                self.define(sym, sym.name, 0)
            if loop.tuple_symbol is not None:
                self.define(loop.tuple_symbol, loop.tuple_symbol.name, (0,) * len(loop.vars))
        self.block(stmt.body)

    def _s_Foreach(self, stmt: ast.Foreach) -> None:
        """Iterations in order; variables nest left (outer) to right (spec 5.3); a range
        ``v(lb:ub:step)`` runs from ``lb`` while ``v < #v + ub`` (spec 5.1, 12.4)."""
        loops = self.fn.loops[id(stmt)]
        plan: list[tuple[Symbol, range]] = []
        for item, loop in zip(stmt.items, loops):
            for i, (sym, bound) in enumerate(zip(loop.vars, loop.bounds)):
                start, step = 0, 1
                dynamic = loop.dynamic[i] if i < len(loop.dynamic) else None
                if dynamic is not None:
                    stop = int(self.eval(dynamic))  # `foreach y in X`: X trips
                    for name in bound.free_vars():  # (an opaque bound: `#y` is X)
                        if is_runtime_trips(name):
                            self.dims[name] = stop
                else:
                    stop = self.sym_value(bound)
                if isinstance(item, ast.RangeItem):
                    if item.lb is not None:
                        start = int(self.eval(item.lb))
                    if item.ub is not None:
                        stop += int(self.eval(item.ub))
                    if item.step is not None:
                        step = int(self.eval(item.step))
                plan.append((sym, range(start, stop, step)))
        tuples = [loop for loop in loops if loop.tuple_symbol is not None]
        self._loop(plan, 0, tuples, stmt.body)

    def _loop(self, plan: list[tuple[Symbol, range]], depth: int, tuples: list,
              body: ast.Block) -> bool:
        """Runs the nest from ``depth``; False once a ``break`` ended the whole foreach."""
        if depth == len(plan):
            for loop in tuples:
                self.define(loop.tuple_symbol, loop.tuple_symbol.name,
                            tuple(self.lookup(v, v.name) for v in loop.vars))
            self.block(body)
            return True
        sym, values = plan[depth]
        for value in values:
            self.define(sym, sym.name, value)
            try:
                if not self._loop(plan, depth + 1, tuples, body):
                    return False
            except _Break:
                return False
            except _Continue:
                continue
        return True

    def _s_Apply(self, stmt: ast.Apply) -> None:
        """``apply {i, j} in x.span``: the body once for every element of ``x``. The
        elements are independent, so they run as lanes (like a vectorised parallel
        level): ``i`` and ``j`` are tensors over every index pair, branches are masks."""
        loop = self.fn.loops[id(stmt)][0]
        bounds = [self.sym_value(b) for b in loop.bounds]
        if self.lanes:
            raise not_implemented("'apply' inside a parallel level run as lanes")
        grids = torch.meshgrid(*(torch.arange(n, dtype=torch.int32) for n in bounds),
                               indexing="ij")
        frame = Frame(self.frame)
        for sym, grid in zip(loop.vars, grids):
            frame.vars[(sym, sym.name)] = grid.reshape(-1)
        self._as_lanes(frame, stmt.body)

    # ------------------------------------------------------------------ parallel (5.2)
    def _s_Parallel(self, stmt: ast.Parallel) -> None:
        """Every instance of every level of this statement runs the body. Statements of
        the body separated by a barrier (``sync.shared``, ``sync.barrier``) run as phases:
        every instance finishes one phase before any starts the next."""
        if is_device_scope(stmt):  # picks the device of the kernels inside: host code
            self.block(stmt.body)
            return
        if self.lanes:
            raise not_implemented("a parallel level nested in a vectorised level")
        levels = self.fn.parallels[id(stmt)]
        sizes = [[self.sym_value(b) for b in level.bounds] for level in levels]
        for bounds in sizes:
            if any(b <= 0 for b in bounds):
                raise InterpretError(f"parallel bounds {bounds} must be positive")
        if self.semantics.vectorize and self._lane_safe(stmt):
            self._run_lanes(stmt, levels, sizes)
            return
        has_blocks = any(level.level is Level.BLOCK for level in levels)
        phases = _phases(stmt.body, has_blocks)
        if not has_blocks:
            phases = self._cooperative_copies(phases, levels)
        shared: dict = {}
        instances = [self._instance(levels, sizes, combo, shared)
                     for combo in itertools.product(*(
                         list(itertools.product(*(range(b) for b in bounds)))
                         for bounds in sizes))]
        cooperative = events.uses_events(self.fn, stmt.body)
        for phase in phases:
            live = [inst for inst in instances if not inst.done]
            if cooperative:
                events.Scheduler(self).run(live, phase, self._run_instance)
                continue
            once = len(phase) == 1 and id(phase[0]) in self._cooperative
            for inst in live:
                self._run_instance(inst, phase)
                if once:
                    break

    def _cooperative_copies(self, phases: list[list[ast.Stmt]],
                            levels: tuple[LevelInfo, ...]) -> list[list[ast.Stmt]]:
        """A copy into shared memory that every thread of the block issues alike (it
        names no thread variable and binds no future) is one copy by the whole block
        (spec 5.2): it runs once, after every thread finished what comes before it and
        before any thread goes on."""
        names = {sym for level in levels for sym in level.vars}
        split: list[list[ast.Stmt]] = []
        for phase in phases:
            split.append([])
            for stmt in phase:
                if self._shared_copy(stmt, names):
                    self._cooperative.add(id(stmt))
                    split.extend([[stmt], []])
                else:
                    split[-1].append(stmt)
        return [phase for phase in split if phase]

    def _shared_copy(self, stmt: ast.Stmt, names: set) -> bool:
        if not isinstance(stmt, ast.DmaStmt) or stmt.future is not None or stmt.is_async:
            return False
        info = self.fn.views.get(id(stmt.dst))
        if info is None or info.root.storage != "shared":
            return False
        return not any(isinstance(node, ast.Ident) and self.fn.refs.get(id(node)) in names
                       for node in _nodes(stmt))

    def _lane_safe(self, stmt: ast.Parallel) -> bool:
        known = self._lane_cache.get(id(stmt))
        if known is None:
            known = self._lane_cache[id(stmt)] = lane_safe(self.fn, stmt)
        return known

    def _instance(self, levels: tuple[LevelInfo, ...], sizes: list[list[int]],
                  combo: tuple[tuple[int, ...], ...], shared: dict) -> _Instance:
        """A frame binding each level's variables to this instance's values; its key
        (level, linear index) per level names the instance for private values."""
        key = []
        frame = Frame(self.frame, (), shared)
        for level, bounds, values in zip(levels, sizes, combo):
            linear = 0
            for value, bound in zip(values, bounds):
                linear = linear * bound + value
            key.append((level.level.value, linear))
            for sym, value in zip(level.vars, values):
                frame.vars[(sym, sym.name)] = value
            if level.tuple_symbol is not None:
                frame.vars[(level.tuple_symbol, level.tuple_symbol.name)] = tuple(values)
        frame.key = tuple(key)
        return _Instance(frame)

    def _run_instance(self, inst: _Instance, stmts: list[ast.Stmt]) -> None:
        saved = self.frame
        self.frame = inst.frame
        try:
            for stmt in stmts:
                self.exec(stmt)
        except _Yield:
            inst.done = True  # `yield`: this instance leaves the kernel
        finally:
            self.frame = saved

    def _run_lanes(self, stmt: ast.Parallel, levels: tuple[LevelInfo, ...],
                   sizes: list[list[int]]) -> None:
        """All instances at once: variable values are int32 tensors over the lanes."""
        flat = [b for bounds in sizes for b in bounds]
        grids = torch.meshgrid(*(torch.arange(b, dtype=torch.int32) for b in flat),
                               indexing="ij") if flat else ()
        columns = [g.reshape(-1) for g in grids]
        frame = Frame(self.frame, (("lanes", 0),))
        i = 0
        for level, bounds in zip(levels, sizes):
            values = columns[i:i + len(bounds)]
            for sym, value in zip(level.vars, values):
                frame.vars[(sym, sym.name)] = value
            if level.tuple_symbol is not None:
                frame.vars[(level.tuple_symbol, level.tuple_symbol.name)] = tuple(values)
            i += len(bounds)
        self._as_lanes(frame, stmt.body)

    def _as_lanes(self, frame: Frame, body: ast.Block) -> None:
        """Run ``body`` once with every instance a lane of ``frame``'s variables."""
        saved = self.frame, self.mask, self.lanes
        self.frame, self.mask, self.lanes = frame, None, True
        try:
            self.block(body)
        finally:
            self.frame, self.mask, self.lanes = saved

    # ------------------------------------------------------------------ DMA, MMA
    def _s_DmaStmt(self, stmt: ast.DmaStmt) -> None:
        dma.exec_dma(self, stmt)

    def _s_DmaAny(self, stmt: ast.DmaAny) -> None:
        dma.exec_any(self, stmt)

    def _s_WaitStmt(self, stmt: ast.WaitStmt) -> None:
        futures = [t for t in stmt.targets if not events.is_event(self, t)]
        dma.exec_wait(self, replace(stmt, targets=tuple(futures)))
        for target in stmt.targets:
            if events.is_event(self, target):
                events.wait(self, target)

    def _s_TriggerStmt(self, stmt: ast.TriggerStmt) -> None:
        events.trigger(self, stmt)

    def _s_EventDecl(self, stmt: ast.EventDecl) -> None:
        events.declare(self, stmt)

    def _s_SwapStmt(self, stmt: ast.SwapStmt) -> None:
        dma.exec_swap(self, stmt)

    def _s_FragDecl(self, stmt: ast.FragDecl) -> None:
        mma.exec_frag_decl(self, stmt)

    def _s_MmaFill(self, stmt: ast.MmaFill) -> None:
        mma.exec_fill(self, stmt)

    def _s_MmaLoad(self, stmt: ast.MmaLoad) -> None:
        mma.exec_load(self, stmt)

    def _s_MmaExec(self, stmt: ast.MmaExec) -> None:
        mma.exec_mma(self, stmt)

    def _s_MmaStore(self, stmt: ast.MmaStore) -> None:
        mma.exec_store(self, stmt)

    def _s_MmaScale(self, stmt: ast.MmaScale) -> None:
        mma.exec_scale(self, stmt)


# ---------------------------------------------------------------------- entry point


def run(fn: CheckedFunction, args: list[Any], dims: dict[str, int] | None = None,
        options: Options | None = None, locate: Callable[[Span], str] | None = None,
        semantics: Semantics | None = None) -> Any:
    """Execute the checked function ``fn`` on ``args`` (CPU torch tensors and Python
    scalars, in parameter order). ``dims`` gives the symbolic dimensions (bound from the
    argument shapes when omitted); ``options`` the compile options the program is run
    for (its ``f32_precision``), ``semantics`` how what the spec leaves open is filled.
    Returns the returned tensor or scalar, or None."""
    from .binding import bind_arguments

    bound = bind_arguments(fn, args, dims)
    interpreter = Interpreter(fn, bound, options or Options(), semantics or Semantics(),
                              locate)
    # strided tensors (views, slices, permuted dimensions) run as contiguous copies, and
    # what the function wrote in place into a copy goes back into the caller's tensor
    dense = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
    result = interpreter.call(dense)
    written = written_parameters(fn)
    for sym, given, used in zip(fn.params, args, dense):
        if used is not given and sym.name in written:
            given.copy_(used)
    return result


def _allocate(name: str, arrays: tuple[int, ...], shape: tuple[int, ...], elem: ElemType,
              space: str, fill: Any) -> DataView | BufferArray:
    """A declared buffer (``arrays`` non-empty: an array of buffers) filled with ``fill``."""
    if not arrays:
        return DataView.allocate(shape, elem, space, name, fill)
    whole = DataView.allocate(arrays + shape, elem, space, name, fill)
    return BufferArray(whole.storage.view(arrays + shape), elem, space, name, arrays)


def _phases(body: ast.Block, has_blocks: bool) -> list[list[ast.Stmt]]:
    """The body split at top-level barriers: every instance finishes a phase before any
    starts the next. A grid-wide barrier (``sync.barrier : device``) needs the block
    level among the statement's levels. A barrier nested in control flow cannot be
    honoured one instance at a time (the lane runner honours it: lanes run in lockstep)."""
    phases: list[list[ast.Stmt]] = [[]]
    for stmt in body.stmts:
        if _is_barrier(stmt):
            if isinstance(stmt, ast.SyncStmt) and stmt.level == "device" and not has_blocks:
                raise not_implemented("a grid-wide barrier inside an inner parallel level")
            phases.append([])
        elif _has_barrier(stmt):
            raise not_implemented("a barrier inside control flow of a parallel body that "
                                  "cannot run as lanes")
        else:
            phases[-1].append(stmt)
    return phases


def _nodes(node: Any) -> Iterator[Any]:
    """Every AST node under ``node``."""
    yield node
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, ast.Node):
                    yield from _nodes(item)


def _is_barrier(stmt: ast.Stmt) -> bool:
    return isinstance(stmt, ast.SyncStmt) and stmt.kind in ("shared", "barrier")


def _has_barrier(stmt: ast.Stmt) -> bool:
    """A barrier in ``stmt``, not counting the bodies of nested parallel statements."""
    if _is_barrier(stmt):
        return True
    if isinstance(stmt, ast.Parallel):
        return False
    for name in ("body", "then", "other"):
        child = getattr(stmt, name, None)
        if isinstance(child, ast.Block) and any(_has_barrier(s) for s in child.stmts):
            return True
    if isinstance(stmt, ast.Block):
        return any(_has_barrier(s) for s in stmt.stmts)
    return False


def _scaled_frags(fn: CheckedFunction) -> set[Symbol]:
    """Accumulators that ``mma.scale`` statements scale (they keep two accumulators)."""
    found: set[Symbol] = set()
    for node in walk(fn.node.body):
        if isinstance(node, ast.MmaScale):
            base = node.frag.base if isinstance(node.frag, ast.View) else node.frag
            sym = fn.refs.get(id(base))
            if sym is not None:
                found.add(sym)
    return found


def _format(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        value = value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _describe(stmt: ast.Stmt) -> str:
    names = {
        "Apply": "'apply' blocks",
        "FragDecl": "'frag' declarations", "CppStmt": "'__cpp__' code",
        "AsmStmt": "inline assembly", "BufferMap": "'buffer.map'",
    }
    return names.get(type(stmt).__name__, f"the statement '{type(stmt).__name__}'")


