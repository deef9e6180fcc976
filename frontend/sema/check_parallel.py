"""Parallel levels and loops: ``parallel`` blocks and their launch attributes, thread
counts, the shared-memory budget of a kernel, ``foreach`` / ``with`` and their bounds.
"""

from __future__ import annotations

from .. import syntax as ast
from ..source import Span
from . import dtypes
from .check_common import CheckerBase, ErrorType, element_count, expr_text, is_intlike
from .dtypes import ElemType
from .levels import DEVICE_NAMES, infer_levels, is_device_scope
from .model import (Level, LevelInfo, LoopInfo, ScalarType, ShapeType, Symbol, SymKind,
                    runtime_trips)
from .symbolic import Sym


class ParallelChecks(CheckerBase):
    """Mixin of ``Checker``: ``parallel``, ``sync``, ``foreach`` and ``with``."""

    def _stmt_Parallel(self, stmt: ast.Parallel) -> None:
        for node in stmt.levels:
            if node.device_name is not None and node.device_name not in DEVICE_NAMES:
                self._error("CQ0623", node.span, name=node.device_name,
                            known=", ".join(DEVICE_NAMES))
        if not self.ctx.on_device and is_device_scope(stmt):
            self._device_scope(stmt)
            return
        outermost = not self.ctx.on_device
        if outermost:
            level_of, problems = infer_levels(stmt)
            for problem in problems:
                self._error(problem.code, problem.node.span, **problem.fields)
            self.ctx.level_of = level_of
            self.kernel_shared = []
        else:
            if stmt.is_async:
                self._error("CQ0619", stmt.span)
        if outermost:
            self.kernel_threads = None
        inner_before = self.inner_parallels
        self.inner_parallels += 1
        infos: list[LevelInfo] = []
        self.scopes.append({})
        seen: set[str] = set()
        for node in stmt.levels:
            level = self.ctx.level_of.get(id(node), Level.THREAD)
            info = self._parallel_level(node, level, seen)
            infos.append(info)
            self.ctx.levels.append(info)
        self._fn().parallels[id(stmt)] = tuple(infos)
        self._check_stream(stmt, infos[0].level if infos else Level.THREAD)
        self._block(stmt.body, new_scope=False)
        if self.inner_parallels == inner_before + 1:  # a leaf: the whole level path is known
            self._check_threads(stmt)
        for _ in infos:
            self.ctx.levels.pop()
        self.scopes.pop()
        self._check_launch_attributes(stmt, infos[0].level if infos else Level.THREAD)
        if outermost:
            self._check_shared_budget(stmt)

    def _device_scope(self, stmt: ast.Parallel) -> None:
        """``parallel by 1 : device(cpu) { ... }`` (spec 5.2 [ext]): which device runs the
        kernels inside. With one instance it is a scope of host code (the kernels run on
        the tensors' device); its variables are 0."""
        self.scopes.append({})
        for node in stmt.levels:
            bounds = self._bounds(node.bounds, len(node.vars), node.span, parallel=True)
            if node.level == "device" and any(bound.value != 1 for bound in bounds):
                self._error("CQ0701", node.span, hint="give the device level the bound 1",
                            construct="a device level with more than one instance")
            # a block's rank in its cluster has no value here: using it is a backend gap
            value = Sym(0) if node.level == "device" else None
            for name in node.vars:
                self._declare(Symbol(name, SymKind.SCALAR, node.span, elem=dtypes.INT,
                                     value=value, decl_node=stmt))
        self._block(stmt.body, new_scope=False)
        self.scopes.pop()

    def _check_stream(self, stmt: ast.Parallel, level: Level) -> None:
        """``parallel<s>`` binds a stream: a `stream` variable, on a block level."""
        if stmt.stream is None:
            return
        sym = self._lookup(stmt.stream)
        if sym is None:
            self._error("CQ0201", stmt.span, name=stmt.stream)
        elif not sym.is_stream:
            self._error("CQ0617", stmt.span, name=stmt.stream)
        elif level is not Level.BLOCK:
            self._error("CQ0618", stmt.span, level=level.value)

    def _check_launch_attributes(self, stmt: ast.Parallel, level: Level) -> None:
        """``[[launch_bounds(max_threads, ...)]]`` and ``[[maxnreg(n)]]``: block levels only,
        constant non-negative (positive for maxnreg) integers, enough threads."""
        for attr in stmt.attrs:
            if attr.name not in ("launch_bounds", "maxnreg"):
                continue
            if level is not Level.BLOCK:
                self._error("CQ0614", attr.span, attr=attr.name, level=level.value)
                continue
            values = [self._attribute_int(attr, arg) for arg in attr.args]
            if attr.name == "launch_bounds" and values and values[0] is not None:
                threads = self.kernel_threads[0] if self.kernel_threads else None
                if threads is not None and values[0] < threads:
                    self._error("CQ0616", attr.span, limit=values[0], threads=threads)

    def _attribute_int(self, attr: ast.Attribute, arg: ast.Expr) -> int | None:
        info = self._expr(arg)
        if isinstance(info.type, ScalarType) and not info.type.elem.is_int:
            self._error("CQ0615", arg.span, attr=attr.name, what="an integer",
                        actual=f"'{info.type.elem.name}'")
            return None
        if info.static is None or info.static.value is None:
            self._error("CQ0615", arg.span, attr=attr.name,
                        what="a compile-time integer constant", actual=f"'{expr_text(arg)}'")
            return None
        value = info.static.value
        if value < 0 or (attr.name == "maxnreg" and value == 0):
            what = "a positive integer" if attr.name == "maxnreg" else "a non-negative integer"
            self._error("CQ0615", arg.span, attr=attr.name, what=what, actual=value)
            return None
        return value

    def _check_threads(self, stmt: ast.Parallel) -> None:
        """Threads of one block (spec 5.2): at most 1024, whole warps when a group level
        exists, whole warpgroups when a group-4 level exists."""
        inner = [lv for lv in self.ctx.levels if lv.level is not Level.BLOCK]
        if not inner:
            return
        total = 1
        for info in inner:
            for bound in info.bounds:
                if bound.value is None:
                    return
                total *= bound.value
        leaf = inner[-1].level
        total *= {Level.GROUP: 32, Level.GROUP4: 128}.get(leaf, 1)
        if self.kernel_threads is None:
            self.kernel_threads = (total, stmt.span)
        elif self.kernel_threads[0] != total:
            self._error("CQ0620", stmt.span, threads=total, other=self.kernel_threads[0])
        kinds = {info.level for info in inner}
        if total > 1024:
            self._error("CQ0604", stmt.span, threads=total)
        elif Level.GROUP4 in kinds and total % 128:
            self._error("CQ0605", stmt.span, threads=total, multiple=128, level="group-4")
        elif Level.GROUP in kinds and total % 32:
            self._error("CQ0605", stmt.span, threads=total, multiple=32, level="group")

    def _check_shared_budget(self, stmt: ast.Parallel) -> None:
        """Every shared buffer of a kernel is live for the whole kernel (spec 7 row 36)."""
        used = sum(size for _, size, _ in self.kernel_shared)
        if self.target.shared_bytes is None or used <= self.target.shared_bytes:
            return  # (None: the target's budget is not known)
        biggest = sorted(self.kernel_shared, key=lambda item: -item[1])[:4]
        notes = tuple((f"'{name}' uses {size} bytes", span) for name, size, span in biggest)
        self.reporter.report("CQ0612", stmt.span, notes=notes, target=self.target.name,
                             used=used, limit=self.target.shared_bytes)

    def _note_shared(self, name: str, elem: ElemType, shape: tuple[Sym, ...], span: Span,
                     count: int = 1) -> None:
        size = element_count(shape)
        if size is not None:
            self.kernel_shared.append((name, size * max(1, elem.bits // 8) * count, span))

    def _stmt_SyncStmt(self, stmt: ast.SyncStmt) -> None:
        if stmt.kind == "barrier" and stmt.level == "device" and not any(
                info.node is not None and info.node.cooperative for info in self.ctx.levels):
            self._error("CQ0622", stmt.span, what="sync.barrier : device",
                        where="inside a 'parallel ... : block<cooperative>'")

    def _parallel_level(self, node: ast.ParallelLevel, level: Level, seen: set[str]) -> LevelInfo:
        bounds = self._bounds(node.bounds, len(node.vars), node.span, parallel=True)
        if node.cooperative and level is not Level.BLOCK:
            self._error("CQ0622", node.span, what="<cooperative>", where="on a block level")
        if level is not Level.BLOCK:
            for bound in bounds:
                if not bound.is_const and not self._specialisable(bound):
                    self._error("CQ0610", node.span, level=level.value, bound=bound)
        syms = []
        # an anonymous level (`parallel by 1, by 1`) cannot be referenced: each of its
        # variables gets a fresh name no program can write and no duplicate check
        names = node.vars or tuple(f"__anon{len(seen) + i}" for i in range(len(bounds)))
        for name, bound in zip(names, bounds):
            if name in seen and node.vars:
                self._error("CQ0602", node.span, name=name)
            seen.add(name)
            if name == "_":
                self._error("CQ0208", node.span, what="a parallel variable")
            sym = Symbol(name, SymKind.BOUNDED, node.span, elem=dtypes.INT, bound=bound,
                         level=level)
            syms.append(sym)
            if node.vars:
                self._declare(sym)
        tuple_sym = None
        if node.tuple_name:
            tuple_sym = Symbol(node.tuple_name, SymKind.BOUNDED_TUPLE, node.span,
                               members=tuple(syms), level=level)
            self._declare(tuple_sym)
        return LevelInfo(level, tuple(syms), tuple(bounds), node.level is None, node, tuple_sym)

    def _bounds(self, exprs: tuple[ast.Expr, ...], count: int, span: Span,
                parallel: bool) -> list[Sym]:
        """Bounds of ``by [a, b]`` / ``in [a, b]``: one per variable, static or symbolic."""
        dims = self._shape_items(exprs, span, "CQ0601" if parallel else "CQ0306")
        if dims is None:
            return [Sym(1)] * max(count, 1)
        if count and len(dims) != count:
            self._error("CQ0311", span, what="the bound list", expected=count, actual=len(dims))
            return (list(dims) + [Sym(1)] * count)[:count]
        return list(dims)

    def _stmt_Foreach(self, stmt: ast.Foreach) -> None:
        self._loop(stmt, Level.LOOP)

    def _stmt_With(self, stmt: ast.With) -> None:
        self._loop(stmt, Level.WITH)

    def _loop(self, stmt: ast.Foreach | ast.With, level: Level) -> None:
        self.scopes.append({})
        infos: list[LoopInfo] = []
        for item in stmt.items:
            if isinstance(item, ast.Within):
                infos.append(self._within(item, level))
            else:
                infos.append(self._range_item(item))
        if isinstance(stmt, ast.Foreach):
            self._check_unroll(stmt, infos)
        else:  # `where a <-> b` pairs names in scope (the clause has no spans of its own)
            for name in dict.fromkeys(n for pair in stmt.where for n in pair):
                if self._lookup(name) is None:
                    self._error("CQ0201", stmt.span, name=name)
        self._fn().loops[id(stmt)] = tuple(infos)
        self.ctx.loops += 1
        self._block(stmt.body, new_scope=False)
        self.ctx.loops -= 1
        self.scopes.pop()

    def _check_unroll(self, stmt: ast.Foreach, infos: list[LoopInfo]) -> None:
        """``: unroll(n)``: a positive factor no larger than the trip count."""
        innermost = infos[-1].bounds[-1] if infos and infos[-1].bounds else None
        trips = innermost.value if innermost is not None and innermost.value else 0
        for suffix in stmt.suffixes:
            if suffix.kind != "unroll" or not suffix.args:
                continue
            factor = self._expr(suffix.args[0]).static
            if factor is None or factor.value is None:
                continue
            if factor.value <= 0:
                self._error("CQ0621", suffix.span, factor=factor.value, problem="must be positive")
            elif trips and factor.value > trips:
                self._error("CQ0621", suffix.span, factor=factor.value,
                            problem=f"exceeds the innermost loop's {trips} iterations")

    def _within(self, item: ast.Within, level: Level) -> LoopInfo:
        runtime = self._runtime_trips(item.shape)
        # `foreach y in [n]`, n a runtime integer: its item was checked already
        info = self._fn().exprs[id(runtime)] if runtime is not None else self._expr(item.shape)
        dynamic: tuple[ast.Expr | None, ...] = ()
        if runtime is not None:
            # `foreach y in [n]`, n known only at run time (read from a tensor): n trips;
            # the bound is n's provable bound, or an opaque name the kernel binds to n
            bound = self._loop_bound(runtime, 4)
            bounds = [bound if bound is not None else runtime_trips(item)]
            dynamic = (runtime,)
        elif isinstance(info.type, ShapeType):
            bounds = list(info.type.dims)
            for bound in bounds:
                if bound.value is not None and bound.value <= 0:
                    self._error("CQ0306", item.shape.span, value=bound.value)
                    break
        elif info.static is not None:
            bounds = [info.static]
        elif isinstance(info.type, ErrorType):
            bounds = [Sym(1)]
        elif is_intlike(info):
            # `foreach y in X`, X a runtime integer: X trips (bound: X's static bound)
            high = self._static_bound(item.shape)
            bounds = [Sym(high) if high is not None and high > 0 else runtime_trips(item)]
            dynamic = (item.shape,)
        else:
            self._error("CQ0209", item.shape.span, what="a loop bound",
                        actual=info.type.describe())
            bounds = [Sym(1)]
        names = item.vars
        if len(names) != len(bounds) and not (len(names) == 1 and not item.braced):
            self._error("CQ0311", item.span, what="the variable list", expected=len(bounds),
                        actual=len(names))
        syms: list[Symbol] = []
        if len(names) == 1 and not item.braced and len(bounds) > 1:
            # `foreach idx in [a, b]`: idx is a bounded ituple of rank 2
            members = tuple(Symbol(f"{names[0]}({i})", SymKind.BOUNDED, item.span,
                                   elem=dtypes.INT, bound=b, level=level)
                            for i, b in enumerate(bounds))
            ituple = Symbol(names[0], SymKind.BOUNDED_TUPLE, item.span, members=members,
                            level=level)
            self._declare(ituple)
            return LoopInfo(members, tuple(bounds), ituple)
        for name, bound in zip(names, bounds):
            if name == "_":
                self._error("CQ0208", item.span, what="an iteration variable")
            sym = Symbol(name, SymKind.BOUNDED, item.span, elem=dtypes.INT, bound=bound,
                         level=level)
            self._declare(sym)
            syms.append(sym)
        tup: Symbol | None = None
        if item.tuple_name == "_":
            self._error("CQ0208", item.span, what="a with variable" if level is Level.WITH
                        else "an iteration variable")
        if item.tuple_name:
            tup = Symbol(item.tuple_name, SymKind.BOUNDED_TUPLE, item.span, members=tuple(syms),
                         level=level)
            self._declare(tup)
        return LoopInfo(tuple(syms), tuple(bounds[:len(syms)]), tup,
                        dynamic=dynamic[:len(syms)])

    def _range_item(self, item: ast.RangeItem) -> LoopInfo:
        """``foreach y(lb : ub : step)`` over an existing bounded variable: from ``lb``
        while below ``#y + ub``, by ``step`` (spec 5.1); a bounded ituple loops over all
        its members."""
        if item.var == "_" or item.name == "_":
            self._error("CQ0208", item.span, what="an iteration variable")
        sym = self._lookup(item.var)
        if sym is not None and sym.kind is SymKind.BOUNDED_TUPLE and not item.has_range:
            return self._tuple_range(item, sym)
        if sym is None or sym.kind is not SymKind.BOUNDED:
            self._error("CQ0207", item.span, name=item.var)
            sym = Symbol(item.var, SymKind.BOUNDED, item.span, elem=dtypes.INT, bound=Sym(1))
        for part in (item.lb, item.ub, item.step):
            if part is not None:
                self._expr(part)
        if item.step is not None:
            step = self._fn().exprs[id(item.step)].static
            if step is not None and step.value is not None and step.value <= 0:
                self._error("CQ0306", item.step.span, value=step.value)
        loop_sym = Symbol(item.name or item.var, SymKind.BOUNDED, item.span, elem=dtypes.INT,
                          bound=sym.bound, level=Level.LOOP)
        self.scopes[-1][loop_sym.name] = loop_sym
        self._fn().refs[id(item)] = sym
        return LoopInfo((loop_sym,), (sym.bound or Sym(1),), None, (item.lb,), (item.ub,),
                        (item.step,))

    def _tuple_range(self, item: ast.RangeItem, sym: Symbol) -> LoopInfo:
        members = tuple(Symbol(m.name, SymKind.BOUNDED, item.span, elem=dtypes.INT,
                               bound=m.bound, level=Level.LOOP) for m in sym.members)
        tup = Symbol(item.name or item.var, SymKind.BOUNDED_TUPLE, item.span, members=members,
                     level=Level.LOOP)
        self.scopes[-1][tup.name] = tup
        self._fn().refs[id(item)] = sym
        return LoopInfo(members, tuple(m.bound or Sym(1) for m in members), tup)
