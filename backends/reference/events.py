"""Events and warp specialisation (spec 5.9), executed faithfully.

Instances of a parallel statement whose body waits for or triggers events cannot run one
after another: a consumer may wait for a producer that comes later. They run as
cooperative threads instead -- exactly one at a time, each until it finishes or reaches a
``wait`` that is not satisfied yet, then the next one that can go on. When every instance
that has not finished is waiting, the program would hang on the GPU: that is reported
with who waits for what.

An event (each slot of an event array) counts generations. Its triggerers are the
instances of the run that execute a ``trigger`` of it (decided before the run from the
conditions around the trigger statements); generation ``g`` is complete when every
triggerer has triggered ``g + 1`` times (one less with ``= ready``, whose generation 0 is
complete from the start). ``wait e`` / ``wait e[i]`` waits for the instance's next
generation of that slot; ``wait e.at(order)`` for generation ``order / N`` of slot
``order % N``. The hardware waits on the parity of the generation only, so a wait whose
slot is already two generations further is reported as ambiguous.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ...frontend import syntax as ast
from ...frontend.sema.model import Symbol, SymKind
from .errors import InterpretError, not_implemented


@dataclass
class EventArray:
    """The generation counters of one declared event (or event array)."""

    name: str
    size: int
    ready: bool
    arrivals: dict[tuple[int, object], int] = field(default_factory=dict)  # (slot, actor)
    waits: dict[tuple[int, object], int] = field(default_factory=dict)  # plain waits done

    def completed(self, slot: int, triggerers: int) -> int:
        counts = [n for (s, _), n in self.arrivals.items() if s == slot]
        done = min(counts) if len(counts) >= triggerers and counts else 0
        return done + int(self.ready)


def declare(it: Any, stmt: ast.EventDecl) -> None:
    """``shared event full[2], empty[2] = ready;``: one set of counters per block."""
    for var, sym in zip(stmt.vars, it.fn.decls.get(id(stmt), [])):
        size = 1
        for dim in sym.array_dims:
            size *= it.sym_value(dim)

        def allocate(name: str = var.name, size: int = size, ready: bool = var.ready) -> Any:
            return EventArray(name, size, ready)

        it.define(sym, var.name, it.block_shared((id(stmt), var.name), allocate))


def _target(it: Any, target: ast.Expr) -> tuple[Symbol, EventArray, int, int | None] | None:
    """(symbol, counters, slot, explicit generation) of an event target; None: a future."""
    named = it.fn.event_named(target)
    if named is None:
        return None
    sym, base = named
    if it.lanes:
        raise not_implemented("events inside a vectorised level")
    events = it.lookup(sym, base.name)
    if isinstance(target, ast.ElemAccess):
        order = int(it.eval(target.indices[0]))
        return sym, events, order % events.size, order // events.size
    slot = int(it.eval(target.index)) if isinstance(target, ast.Index) else 0
    if not 0 <= slot < events.size:
        raise InterpretError(f"event index {slot} is outside '{base.name}[{events.size}]'")
    return sym, events, slot, None


def is_event(it: Any, target: ast.Expr) -> bool:
    return it.fn.event_named(target) is not None


def trigger(it: Any, stmt: ast.TriggerStmt) -> None:
    for target in stmt.targets:
        found = _target(it, target)
        if found is None:
            raise InterpretError("only events can be triggered")
        _, events, slot, _ = found
        actor = _actor(it)
        events.arrivals[(slot, actor)] = events.arrivals.get((slot, actor), 0) + 1


def wait(it: Any, target: ast.Expr) -> None:
    """Block until the generation the target names is complete."""
    found = _target(it, target)
    assert found is not None
    sym, events, slot, generation = found
    actor = _actor(it)
    scheduler: Scheduler | None = it.scheduler
    triggerers = scheduler.triggerers.get(sym, 1) if scheduler is not None else 1
    if generation is None:
        generation = events.waits.get((slot, actor), 0)
    wanted = generation
    name = f"{events.name}[{slot}]" if events.size > 1 else events.name
    what = f"'{name}' (generation {generation})"

    def done() -> bool:
        return events.completed(slot, triggerers) > wanted

    if not done():
        if scheduler is None:
            raise InterpretError(f"wait for {what} would never return: nothing triggers it")
        scheduler.block(done, what)
    if isinstance(target, ast.ElemAccess) and events.completed(slot, triggerers) > wanted + 1:
        raise InterpretError(f"wait for {what} finds the slot two generations further: the "
                             "hardware's parity wait cannot tell them apart")
    events.waits[(slot, actor)] = events.waits.get((slot, actor), 0) + 1


def _actor(it: Any) -> object:
    """The instance that runs now: the innermost parallel frame's key."""
    frame = it.frame
    while frame is not None and frame.key is None:
        frame = frame.parent
    return frame.key if frame is not None else ()


# --------------------------------------------------------------------------- scheduling


def uses_events(fn: Any, body: ast.Block) -> bool:
    """Whether ``body`` waits for or triggers an event outside nested parallels."""
    return bool(_event_stmts(fn, body, []))


def _event_stmts(fn: Any, block: ast.Block, conds: list[tuple[ast.Expr, bool]]
                 ) -> list[tuple[ast.Stmt, list[tuple[ast.Expr, bool]]]]:
    """Wait/trigger statements of events in ``block`` with the conditions around them."""
    found: list[tuple[ast.Stmt, list[tuple[ast.Expr, bool]]]] = []
    for stmt in block.stmts:
        if isinstance(stmt, (ast.WaitStmt, ast.TriggerStmt)):
            if any(_names_event(fn, t) for t in stmt.targets):
                found.append((stmt, list(conds)))
        elif isinstance(stmt, ast.Parallel):
            continue
        elif isinstance(stmt, (ast.InThreads, ast.If)):
            cond = stmt.pred if isinstance(stmt, ast.InThreads) else stmt.cond
            body = stmt.body if isinstance(stmt, ast.InThreads) else stmt.then
            found += _event_stmts(fn, body, conds + [(cond, True)])
            if isinstance(stmt, ast.If) and stmt.other is not None:
                found += _event_stmts(fn, stmt.other, conds + [(cond, False)])
        else:
            for name in ("body",):
                child = getattr(stmt, name, None)
                if isinstance(child, ast.Block):
                    found += _event_stmts(fn, child, conds)
            if isinstance(stmt, ast.Block):
                found += _event_stmts(fn, stmt, conds)
    return found


def _names_event(fn: Any, target: ast.Expr) -> bool:
    return fn.event_named(target) is not None


class _Abort(BaseException):
    """Ends the threads of a run that failed elsewhere."""


class Scheduler:
    """Runs the instances of one parallel phase as threads, one at a time."""

    def __init__(self, it: Any) -> None:
        self.it = it
        self.lock = threading.Condition()
        self.running: int | None = None
        self.waiting: dict[int, tuple[Callable[[], bool], str]] = {}
        self.finished: set[int] = set()
        self.error: BaseException | None = None
        self.count = 0
        self.triggerers: dict[Symbol, int] = {}
        self.names: list[str] = []

    # ---- called by the interpreter
    def run(self, instances: list[Any], stmts: list[ast.Stmt],
            run_one: Callable[[Any, list[ast.Stmt]], None]) -> None:
        self.count = len(instances)
        self.triggerers = self._count_triggerers(instances, stmts)
        self.names = [_instance_name(inst) for inst in instances]
        saved = (self.it.frame, self.it.mask, self.it.lanes, self.it.scheduler)
        self.it.scheduler = self
        threads = [threading.Thread(target=self._worker, args=(i, inst, stmts, run_one),
                                    daemon=True) for i, inst in enumerate(instances)]
        try:
            with self.lock:
                for thread in threads:
                    thread.start()
                self.running = 0
                self.lock.notify_all()
                while len(self.finished) < self.count and self.error is None:
                    self.lock.wait()
                if self.error is not None:
                    self.running = -1  # every thread still waiting leaves
                    self.lock.notify_all()
            for thread in threads:
                thread.join()
        finally:
            self.it.frame, self.it.mask, self.it.lanes, self.it.scheduler = saved
        if self.error is not None:
            raise self.error

    def block(self, done: Callable[[], bool], what: str) -> None:
        """The running instance waits until ``done()``; another runs meanwhile."""
        me = self.running
        assert me is not None
        state = (self.it.frame, self.it.mask, self.it.lanes)
        with self.lock:
            self.waiting[me] = (done, what)
            self._hand_over(me)
            while self.running != me:
                if self.running == -1:
                    raise _Abort()
                self.lock.wait()
            del self.waiting[me]
        self.it.frame, self.it.mask, self.it.lanes = state

    # ---- threads
    def _worker(self, index: int, inst: Any, stmts: list[ast.Stmt],
                run_one: Callable[[Any, list[ast.Stmt]], None]) -> None:
        with self.lock:
            while self.running != index:
                if self.running == -1:
                    return
                self.lock.wait()
        try:
            run_one(inst, stmts)
        except _Abort:
            return
        except BaseException as err:  # reported by the thread that started the run
            with self.lock:
                self.error = err
                self.running = -1
                self.lock.notify_all()
            return
        with self.lock:
            self.finished.add(index)
            if len(self.finished) < self.count:
                self._hand_over(index)
            self.lock.notify_all()

    def _hand_over(self, me: int) -> None:
        """Give the turn to the next instance (after ``me``) that can make progress."""
        for step in range(1, self.count + 1):
            other = (me + step) % self.count
            if other in self.finished:
                continue
            waiting = self.waiting.get(other)
            if waiting is None or waiting[0]():
                self.running = other
                self.lock.notify_all()
                return
        stuck = "; ".join(f"{self.names[i]} waits for {what}"
                          for i, (_, what) in sorted(self.waiting.items())[:4])
        more = len(self.waiting) - 4
        self.error = InterpretError(
            "deadlock: every instance that has not finished waits for an event no "
            f"instance will trigger ({stuck}{f'; and {more} more' if more > 0 else ''})")
        self.running = -1
        self.lock.notify_all()
        if me in self.waiting:
            raise _Abort()

    # ---- who triggers what
    def _count_triggerers(self, instances: list[Any], stmts: list[ast.Stmt]) -> dict:
        fn = self.it.fn
        block = ast.Block(stmts[0].span, tuple(stmts), False) if stmts else None
        sites = _event_stmts(fn, block, []) if block is not None else []
        counts: dict[Symbol, int] = {}
        for inst in instances:
            symbols: set[Symbol] = set()
            for stmt, conds in sites:
                if isinstance(stmt, ast.TriggerStmt) and self._holds(inst, stmts, conds):
                    for target in stmt.targets:
                        base = target.base if isinstance(target, (ast.ElemAccess,
                                                                  ast.Index)) else target
                        sym = fn.refs.get(id(base))
                        if sym is not None:
                            symbols.add(sym)
            for sym in symbols:
                counts[sym] = counts.get(sym, 0) + 1
        return counts

    def _holds(self, inst: Any, stmts: list[ast.Stmt], conds: list) -> bool:
        """Whether the conditions around a trigger hold for ``inst``: evaluated in a
        scratch frame where the phase's leading scalar definitions (``pred = p < 128;``)
        have run."""
        if not conds:
            return True
        from .values import Frame

        it = self.it
        saved = it.frame
        it.frame = Frame(inst.frame)
        try:
            for stmt in stmts:
                decls = it.fn.decls.get(id(stmt), [])
                if isinstance(stmt, (ast.ScalarDecl, ast.AssignStmt)) and decls and all(
                        s.kind is SymKind.SCALAR for s in decls):
                    try:
                        it.exec(stmt)
                    except (InterpretError, NotImplementedError):
                        pass
            result = True
            for cond, polarity in conds:
                try:
                    value = bool(it.eval(cond))
                except (InterpretError, NotImplementedError) as err:
                    raise InterpretError("cannot tell before running which instances trigger "
                                         "an event: a condition around a 'trigger' depends on "
                                         f"values computed later ({err})") from err
                result = result and value == polarity
            return result
        finally:
            it.frame = saved


def _instance_name(inst: Any) -> str:
    parts = [f"{level}={index}" for level, index in inst.frame.key or ()]
    return "instance (" + ", ".join(parts) + ")"
