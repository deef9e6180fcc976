"""Control flow and synchronisation (a rule family of the lowering): blocks (with
``yield``, ``break`` and ``continue``), ``if``, ``inthreads``, ``while``, nested
``parallel`` levels, ``with``, barriers and fences, event waits outside roles, ``assert``
and ``print``. A condition that differs between threads masks both branches instead of
branching (spec 5.2)."""

from __future__ import annotations

from typing import TypeGuard

from ...frontend import syntax as ast
from ...frontend.sema.model import Level, SymKind
from . import checks, instances, roles
from . import build as b
from . import nodes as ir
from .errors import LoweringError, unsupported
from .state import KernelState, broadcast, iter_stmts, truth
from .values import Acc, Bounded, Buffer, Scalar, Tile, padding_mask


class Control(KernelState):
    """The control-flow rules."""

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

    def roles(self, roles_: list[ast.InThreads]) -> None:
        roles.lower_roles(self, roles_)

    def lower_sync(self, stmt: ast.SyncStmt) -> None:
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

    def lower_wait(self, stmt: ast.WaitStmt) -> None:
        """Copies are performed when issued, so waiting for a future has nothing left to
        do; waits for events outside warp-specialised roles are checked in program order."""
        for target in stmt.targets:
            sym = self.fn.refs.get(id(target)) if isinstance(target, ast.Ident) else None
            if sym is not None and sym.kind is SymKind.FUTURE:
                checks.waited(self, sym, target.span)  # (debug: it must be in flight)
            roles.straight_line_event(self, stmt, target, "wait")

    def lower_trigger(self, stmt: ast.TriggerStmt) -> None:
        for target in stmt.targets:
            roles.straight_line_event(self, stmt, target, "trigger")

    def lower_parallel(self, stmt: ast.Parallel) -> None:
        levels = list(self.fn.parallels[id(stmt)])
        for level in levels:
            if level.level is Level.BLOCK:
                raise LoweringError("CQ0609", stmt.span, inner="block", outer="block")
        if instances.lower_instances(self, stmt):
            return
        with self.nested_levels(levels):
            self.bodies.add(id(stmt.body))
            self.block(stmt.body)

    def lower_with(self, stmt: ast.With) -> None:
        for loop in self.fn.loops[id(stmt)]:
            for sym, bound in zip(loop.vars, loop.bounds):
                self.env[sym] = Bounded(b.const(0), bound)
            if loop.tuple_symbol is not None:
                self.env[loop.tuple_symbol] = [self.env[v] for v in loop.vars]
        self.block(stmt.body)

    def lower_if(self, stmt: ast.If) -> None:
        if self._guarded_if(stmt):
            return
        cond = self._snapshot(truth(self.value(stmt.cond)))
        continuing = self._yielding_if(stmt, cond)
        exits = self._exiting_if(stmt)
        if exits is not None and not cond.axes:
            cond = broadcast(cond, self.whiles[-1][1].axes)  # masks, not a branch
        self._if(stmt, cond)
        if exits is not None:
            continuing = self._after_exit(cond, exits)
        self.continuing = continuing  # applies after the branches

    def _guarded_if(self, stmt: ast.If) -> bool:
        """An ``if`` without ``else`` or exits inside a loop: when its condition differs
        between lanes but is affine in them, some trips of the loop may have no lane where
        it holds (the blocks of a causal attention loop off the diagonal). The masked
        statements then sit in a uniform ``if`` on whether any lane can hold it (a bound of
        the condition over the lanes), so that those trips skip them. False: not such an
        ``if``, lowered as usual."""
        if not self.loop_depth or stmt.other is not None or any(
                isinstance(s, (ast.YieldStmt, ast.BreakStmt, ast.ContinueStmt))
                for s in iter_stmts(stmt.then)):
            return False
        with self.nested() as inner:
            raw = truth(self.value(stmt.cond))
            cond = self._snapshot(raw)
            carried = self._carried()
            if cond.axes:
                self._predicated(cond, stmt.then)
        guard = lane_guard(raw) if cond.axes else None
        if guard is not None and (self._carried() != carried or
                                  not self.readable_at(len(self.scopes) - 1, guard)):
            guard = None  # (the body gave a value a new name: it must be made on every trip)
        if guard is None:
            for inner_stmt in inner.body:
                self.emit(inner_stmt)
            if not cond.axes:
                self._if(stmt, cond)
        else:
            self.emit(ir.If(stmt.span, guard, inner.body, []))
        self.continuing = None
        return True

    def _carried(self) -> set[tuple[int, object]]:
        """The variables that hold the current values of accumulators, register buffers and
        mutable scalars (a statement that renames one cannot be skipped)."""
        names: set[tuple[int, object]] = set()
        for sym, value in self.env.items():
            if isinstance(value, Acc):
                names.add((id(sym), (value.name, value.part)))
            elif isinstance(value, Buffer):
                content = value.content
                expr = content.expr if isinstance(content, Tile) else None
                names.add((id(sym), expr.name if isinstance(expr, ir.Var) else id(content)))
            elif isinstance(value, Scalar) and isinstance(value.expr, ir.Var):
                names.add((id(sym), value.expr.name))
        return names

    def _if(self, stmt: ast.If, cond: ir.Expr) -> None:
        # differs between threads (or sits in a vectorised loop, whose body is element-wise
        # code): both branches run, under lane masks
        if cond.axes or self.masked_ifs:
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
        inner = then.body[0] if len(then.body) == 1 and not other else None
        if isinstance(inner, ir.If) and not inner.other:
            # `if (a) { if (b) ... }` is `if (a && b)`: one branch in the loop body, whose
            # value Triton keeps in one layout (nested, it converted the scores twice)
            self.emit(ir.If(stmt.span, b.binary("&", truth(cond), truth(inner.cond), b.I1),
                            inner.then, []))
            return
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

    def lower_inthreads(self, stmt: ast.InThreads) -> None:
        if stmt.is_async:
            self.roles([stmt])
            return
        cond = self._snapshot(truth(self.value(stmt.pred)))
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

    def lower_while(self, stmt: ast.While) -> None:
        """``while (c) body``: lanes run while their condition holds. The loop goes on
        while any lane is active; the body is masked by the active lanes, ``break`` takes
        lanes out of the loop, ``continue`` masks the rest of their iteration."""
        cond = b.and_(truth(self.value(stmt.cond)), self.predicate())
        assert cond is not None
        exits = any(isinstance(s, (ast.BreakStmt, ast.ContinueStmt)) for s in iter_stmts(stmt.body))
        # a condition every lane shares stays a scalar (the variables it reads may be
        # scalars the body updates); exits may differ between lanes, so they need the lanes
        axes = tuple(self.active) if cond.axes or exits else ()
        first = broadcast(cond, axes)
        name = self.fresh("active")
        self.emit(ir.Let(stmt.span, name, first))
        active = ir.Var(first.axes, b.I1, name)
        with self.nested() as inner:
            self.whiles.append((id(stmt.body), active))
            self.predicates.append(active)
            self.loop_depth += 1
            try:
                self.block(stmt.body)
                again = b.and_(active, truth(self.value(stmt.cond)))
                self.emit(ir.Let(stmt.span, name, broadcast(again, active.axes)))
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
        self.emit(ir.Let(None, active.name, broadcast(b.and_(active, remaining),
                                                       active.axes)))

    def lower_assert(self, stmt: ast.AssertStmt) -> None:
        """A device assertion: every active lane checks the condition (spec 5.10)."""
        if id(stmt) in self.fn.host_asserts:
            return  # decided at compile time, or tested when the arguments are bound
        cond = truth(self.value(stmt.cond))
        self.emit(ir.Assert(stmt.span, cond, f"assertion failed: {stmt.message}",
                            self.guarded(padding_mask(cond.axes))))

    def lower_print(self, stmt: ast.PrintStmt) -> None:
        if stmt.static:
            return  # print! happens at compile time in the reference; nothing to run
        args = [a for a in stmt.args if not isinstance(a, ast.StrLit)]
        label = " ".join(a.value for a in stmt.args if isinstance(a, ast.StrLit)) or "croqtile"
        values = [self.value(a) for a in args]
        self.emit(ir.Print(stmt.span, label, tuple(values)))


def lane_guard(cond: ir.Expr) -> ir.Expr | None:
    """A uniform condition that is false only where ``cond`` is false on every lane, or
    None when that is not known: comparisons of integers affine in the lane indices (and
    in the instance and row of fused instances) are bounded over the lanes; ``&&`` keeps
    the conjuncts it can bound, ``||`` needs both."""
    if not cond.axes:
        return cond
    if isinstance(cond, ir.Binary) and cond.op in ("&", "|") and cond.dtype == b.I1:
        lhs, rhs = lane_guard(cond.lhs), lane_guard(cond.rhs)
        if cond.op == "&":
            return rhs if lhs is None else lhs if rhs is None else b.binary("&", lhs, rhs, b.I1)
        return None if lhs is None or rhs is None else b.binary("|", lhs, rhs, b.I1)
    if not (isinstance(cond, ir.Binary) and cond.op in ("<", "<=", ">", ">=")) or \
            cond.lhs.dtype.is_float or cond.rhs.dtype.is_float:
        return None
    above = cond.op in (">", ">=")  # lhs - rhs > 0 (or >= 0), else rhs - lhs
    diff = b.binary("-", cond.lhs, cond.rhs) if above else b.binary("-", cond.rhs, cond.lhs)
    lin = b.linearize(diff, groups=True, residues=True)
    top = lin.upper_bound() if lin is not None else None
    if top is None:
        return None
    strict = cond.op in (">", "<")
    return b.binary(">" if strict else ">=", top, b.const(0, top.dtype), b.I1)


def _is_role(stmt: ast.Stmt) -> TypeGuard[ast.InThreads]:
    """An ``inthreads.async`` block: a role of a warp-specialised kernel."""
    return isinstance(stmt, ast.InThreads) and stmt.is_async


def _declares_only(stmt: ast.Stmt) -> bool:
    """A statement with no effect but a name: buffers without initialiser, events."""
    if isinstance(stmt, ast.SpannedDecl):
        return all(v.init is None for v in stmt.vars)
    return isinstance(stmt, (ast.Empty, ast.EventDecl))
