"""Warp specialisation (spec 5.9) serialised into one program order.

Triton has no user-controlled warp roles: a program is one instruction stream. Roles
(``inthreads.async (pred) { ... }``) that exchange events are therefore run one after
another, in an order in which every ``wait`` finds the ``trigger`` it needs already done.
Events carry no data (copies are views, see ``dma.py``), so once the order is known they
are dropped. Two shapes have such an order:

* **straight-line roles** -- no loop of a role holds an event: the roles are scheduled
  statement by statement (a role runs until it reaches a wait that is not yet satisfied,
  then the next role runs). A wait no order satisfies would hang on the GPU: CQ0756.
* **a ring pipeline** -- one producer role and one or more consumer roles, each with one
  loop over the same iteration space ``k``::

      producer:  foreach k { wait empty.at(k); <copies into ring[k % S]>; trigger full.at(k); }
      consumer:  <release every slot of empty>
                 foreach k { wait full.at(k); <use ring[k % S]>; trigger empty.at(k); }

  It becomes one loop whose iteration ``k`` runs the producer's body and then each
  consumer's. In that order iteration ``k`` of a consumer reads exactly what the producer
  copied in iteration ``k``, which is what the protocol guarantees on the GPU; the copies
  turn into loads inside a ``tl.range(..., num_stages=S)`` loop, so Triton's software
  pipeliner recovers the overlap the roles expressed.

In a persistent loop (one block running several tiles) the consumers may release the
ring under ``if (i == 0)``, ``i`` the loop's variable; see ``_is_guarded_release``.

Anything else (other events in nested control flow, a producer that is not ahead of its
consumers by exactly the ring, orders that do not follow the loop) is CQ0755, with the
supported shapes in the hint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...frontend import syntax as ast
from ...frontend.sema.model import LoopInfo, Symbol, SymKind
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .errors import LoweringError, unsupported
from .loops import leave_loop
from .state import KernelState, children, iter_stmts, truth
from .values import Bounded, Buffer, Region, Scalar, Tile

MAIN = -1  # the actor of event statements outside roles


def _shape(span: Span, reason: str) -> LoweringError:
    return LoweringError("CQ0755", span, reason=reason)


# --------------------------------------------------------------------------- event references


@dataclass(frozen=True)
class EventRef:
    """One ``wait``/``trigger`` target that names an event: which slot, and for
    ``e.at(order)`` the order (its generation is ``order / size``)."""

    symbol: Symbol
    size: int
    slot: ir.Expr
    order: ir.Expr | None
    span: Span


def event_ref(kl: KernelState, target: ast.Expr) -> EventRef | None:
    """The event ``target`` names, or None for a future."""
    named = kl.fn.event_named(target)
    if named is None:
        return None
    sym, _ = named
    size = 1
    for dim in sym.array_dims:
        if dim.value is None:
            raise unsupported(target.span, "an event array without a constant size")
        size *= dim.value
    if isinstance(target, ast.ElemAccess):
        arg = target.indices[0]
        if isinstance(arg, ast.Postfix) and isinstance(arg.operand, ast.Ident):
            order = _known(kl, kl.value(arg.operand))  # the value before the update
            kl.update(arg.operand, arg.op, target)
        else:
            order = _known(kl, kl.value(arg))
        return EventRef(sym, size, b.binary("%", order, b.const(size)), order, target.span)
    if isinstance(target, ast.Index):
        if isinstance(target.base, ast.Index):
            raise unsupported(target.span, "multi-dimensional event arrays")
        return EventRef(sym, size, kl.value(target.index), None, target.span)
    return EventRef(sym, size, b.const(0), None, target.span)


def _known(kl: KernelState, e: ir.Expr) -> ir.Expr:
    """A mutable scalar of straight-line code replaced by the value it has here."""
    if isinstance(e, ir.Var) and e.name in kl.known and not kl.loop_depth:
        return b.const(kl.known[e.name], e.dtype)
    return e


def _is_ready(sym: Symbol) -> bool:
    """``shared event e = ready;``: generation 0 is complete from the start."""
    node = sym.decl_node
    if isinstance(node, ast.EventDecl):
        return any(v.name == sym.name and v.ready for v in node.vars)
    return False


def _event_syms(kl: KernelState, stmt: ast.Stmt) -> list[Symbol]:
    """The events ``stmt`` (a wait or trigger) names, without evaluating indices."""
    found = []
    for target in getattr(stmt, "targets", ()):
        base = target.base if isinstance(target, (ast.ElemAccess, ast.Index)) else target
        while isinstance(base, ast.Index):
            base = base.base
        sym = kl.fn.refs.get(id(base)) if isinstance(base, ast.Ident) else None
        if sym is not None and sym.kind is SymKind.EVENT:
            found.append(sym)
    return found


def _is_event_stmt(kl: KernelState, stmt: ast.Stmt) -> bool:
    return isinstance(stmt, (ast.WaitStmt, ast.TriggerStmt)) and bool(_event_syms(kl, stmt))


def _has_events(kl: KernelState, block: ast.Block) -> bool:
    return any(_is_event_stmt(kl, s) for s in iter_stmts(block))


# --------------------------------------------------------------------------- the ledger


@dataclass
class Ledger:
    """Generations of events in the serial order being built. ``participants`` are the
    roles that trigger an event: a generation completes when every one of them has
    triggered it. A trigger outside roles (MAIN) is made by every thread of the block,
    so it counts for all of them at once. ``unknown`` events left a pipelined loop in a
    state that depends on its trip count."""

    participants: dict[Symbol, set[int]] = field(default_factory=dict)
    arrivals: dict[tuple[Symbol, int, int], int] = field(default_factory=dict)
    waited: dict[tuple[Symbol, int, int], int] = field(default_factory=dict)
    unknown: set[Symbol] = field(default_factory=set)

    def completed(self, sym: Symbol, slot: int) -> int:
        roles = self.participants.get(sym, set())
        done = min((self.arrivals.get((sym, slot, a), 0) for a in roles), default=0)
        return self.arrivals.get((sym, slot, MAIN), 0) + done + int(_is_ready(sym))

    def trigger(self, sym: Symbol, slot: int, actor: int) -> None:
        if actor != MAIN:
            self.participants.setdefault(sym, set()).add(actor)
        key = (sym, slot, actor)
        self.arrivals[key] = self.arrivals.get(key, 0) + 1

    def generation(self, ref: EventRef, slot: int, actor: int) -> int:
        """The generation a wait on ``ref`` needs: the order's, or the actor's next."""
        if ref.order is not None:
            return _constant(ref.order, ref.span) // ref.size
        return self.waited.get((ref.symbol, slot, actor), 0)

    def consume(self, ref: EventRef, slot: int, actor: int) -> None:
        key = (ref.symbol, slot, actor)
        self.waited[key] = self.waited.get(key, 0) + 1


def _ledger(kl: KernelState) -> Ledger:
    if not isinstance(kl.events, Ledger):  # (None until the first use)
        kl.events = Ledger()
    return kl.events


def _constant(e: ir.Expr, span: Span) -> int:
    if not isinstance(e, ir.Const):
        raise _shape(span, "outside a pipelined loop, event slots and orders must be "
                           "constants")
    return int(e.value)


def _slot(ref: EventRef) -> int:
    slot = _constant(ref.slot, ref.span)
    if not 0 <= slot < ref.size:
        raise _shape(ref.span, f"slot {slot} is outside the event array of {ref.size}")
    return slot


def _usable(ledger: Ledger, ref: EventRef) -> None:
    if ref.symbol in ledger.unknown:
        raise _shape(ref.span, f"'{ref.symbol.name}' is used again after the pipelined loop "
                               "that cycles it")


def straight_line_event(kl: KernelState, stmt: ast.Stmt, target: ast.Expr,
                        kind: str) -> None:
    """A wait or trigger outside roles, in program order (a wait of a future is a no-op)."""
    ref = event_ref(kl, target)
    if ref is None:
        return
    if kl.loop_depth:
        raise _shape(stmt.span, "events inside a loop are supported only in the pipelined "
                                "loops of warp-specialised roles")
    if kl.uncertain:
        raise _shape(stmt.span, "events inside a branch: whether they happen is only known "
                                "at run time")
    ledger = _ledger(kl)
    _usable(ledger, ref)
    slot = _slot(ref)
    if kind == "trigger":
        ledger.trigger(ref.symbol, slot, MAIN)
        return
    if ledger.completed(ref.symbol, slot) <= ledger.generation(ref, slot, MAIN):
        raise LoweringError("CQ0756", ref.span, name=ref.symbol.name,
                            reason="nothing before it triggers it, and no role runs "
                                   "alongside")
    ledger.consume(ref, slot, MAIN)


# --------------------------------------------------------------------------- roles


@dataclass
class Role:
    """One ``inthreads.async`` role: the lanes it runs on and its body split around its
    pipelined loop (the one loop whose body waits or triggers events)."""

    number: int
    node: ast.InThreads
    cond: ir.Expr | None  # lane mask; None: every lane of the block runs it
    narrowed: tuple[Symbol, Bounded, ir.Axis, Bounded] | None  # see _narrowed
    before: list[ast.Stmt]
    loop: ast.Foreach | None
    after: list[ast.Stmt]


def lower_roles(kl: KernelState, nodes: list[ast.InThreads]) -> None:
    roles = [r for r in (_role(kl, i, n) for i, n in enumerate(nodes)) if r is not None]
    ledger = _ledger(kl)
    for role in roles:
        for stmt in iter_stmts(role.node.body):
            if isinstance(stmt, ast.TriggerStmt):
                for sym in _event_syms(kl, stmt):
                    ledger.participants.setdefault(sym, set()).add(role.number)
    looping = [r for r in roles if r.loop is not None]
    _schedule(kl, roles, [r.before for r in roles], bool(looping))
    if looping:
        _pipeline(kl, looping)
        _schedule(kl, roles, [r.after for r in roles], False)


def _role(kl: KernelState, number: int, node: ast.InThreads) -> Role | None:
    narrowed = _narrowed(kl, node)
    cond = b.const(True, b.I1) if narrowed is not None else truth(kl.value(node.pred))
    if isinstance(cond, ir.Const):
        if not cond.value:
            return None  # no lane runs it (a level of extent 1)
        mask = None
    elif cond.axes:
        mask = cond
    else:
        raise _shape(node.pred.span, "a role must be chosen by an inner parallel index "
                                     "(which warps run it), not by a value shared by the "
                                     "whole block")
    stmts = list(node.body.stmts)
    loops = [(i, s) for i, s in enumerate(stmts) if isinstance(s, ast.Foreach)
             and _has_events(kl, s.body) and not _is_release_loop(kl, s)]
    for stmt in stmts:
        if not isinstance(stmt, ast.Foreach) and not _is_event_stmt(kl, stmt) and \
                not _is_guarded_release(kl, stmt) and \
                any(_is_event_stmt(kl, s) for s in iter_stmts(_as_block(stmt))):
            raise _shape(stmt.span, "events inside nested control flow of a role")
    if len(loops) > 1:
        raise _shape(loops[1][1].span, "a role may have one loop that waits or "
                                           "triggers events")
    guarded = [s for s in stmts if _is_guarded_release(kl, s)]
    if guarded and (not loops or stmts.index(guarded[0]) > loops[0][0]):
        raise _shape(guarded[0].span, "a release under `if (i == 0)` must come before the "
                                      "role's pipelined loop")
    if not loops:
        return Role(number, node, mask, narrowed, stmts, None, [])
    at, loop = loops[0]
    return Role(number, node, mask, narrowed, stmts[:at], loop, stmts[at + 1:])


def _narrowed(kl: KernelState,
              node: ast.InThreads) -> tuple[Symbol, Bounded, ir.Axis, Bounded] | None:
    """A role chosen by a range of one parallel index (``wg == 0``, ``wg > 0``,
    ``wg >= 1 && wg < 3``) gets that range as an axis of its own: inside the role the
    index is ``lo + i`` over ``hi - lo`` lanes. Its MMAs then fuse over exactly its
    warpgroups (``a.subspan(64, 64).at(wg - 1, 0)`` starts at row 0) and nothing is
    computed for lanes that are not in the role. None when the predicate is not such a
    range; the role then runs under a lane mask."""
    found = _interval(kl, node.pred)
    if found is None:
        return None
    sym, lo, hi = found
    current = kl.env.get(sym)
    if not isinstance(current, Bounded) or not isinstance(current.expr, ir.AxisIndex):
        return None
    axis = current.expr.axis
    if _uses_axis_from_outside(kl, node, sym, axis):
        return None
    lo, hi = max(lo, 0), min(hi, axis.extent)
    if hi <= lo:
        return None  # no lane runs the role: its mask is all false
    if hi - lo == 1:
        inside = Bounded(b.const(lo), current.bound)
        return sym, current, axis, inside
    sub = kl.axis(("role", id(node)), hi - lo, sym.name)
    inside = Bounded(b.add(b.axis_index(sub), b.const(lo)), current.bound)
    return sym, current, axis, inside


def _uses_axis_from_outside(kl: KernelState, node: ast.InThreads, index: Symbol,
                            axis: ir.Axis) -> bool:
    """Whether the role reads a value made outside it that varies along ``axis`` (a
    scalar computed per thread before the roles), or assigns a scalar declared outside
    it: inside a narrowed role that axis is replaced, so such a value would not line up
    with the role's lanes, and an update would reach the threads of other roles."""
    declared = {sym for stmt in iter_stmts(node.body) for sym in kl.fn.decls.get(id(stmt), [])}
    stack: list[ast.Node] = [node.body]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Ident):
            sym = kl.fn.refs.get(id(item))
            if sym is not None and sym is not index and _varies(kl.env.get(sym), axis):
                return True
        if isinstance(item, ast.Assign) and isinstance(item.target, ast.Ident):
            sym = kl.fn.refs.get(id(item.target))
            if sym is not None and sym not in declared and sym.kind is SymKind.SCALAR:
                return True
        stack.extend(children(item))
    return False


def _varies(value: object, axis: ir.Axis) -> bool:
    if isinstance(value, (Scalar, Bounded)):
        return axis in value.expr.axes
    if isinstance(value, Buffer):
        content = value.content
        if isinstance(content, Tile):
            return axis in content.dims or axis in content.expr.axes
        if isinstance(content, Region):
            return any(axis in o.axes for o in content.origin)
    if isinstance(value, list):
        return any(_varies(v, axis) for v in value)
    return False


def _interval(kl: KernelState, pred: ast.Expr) -> tuple[Symbol, int, int] | None:
    """``pred`` as ``lo <= v < hi`` for one parallel index ``v``, or None."""
    if isinstance(pred, ast.Binary) and pred.op == "&&":
        left, right = _interval(kl, pred.lhs), _interval(kl, pred.rhs)
        if left is None or right is None or left[0] is not right[0]:
            return None
        return left[0], max(left[1], right[1]), min(left[2], right[2])
    if not isinstance(pred, ast.Binary) or pred.op not in ("==", "<", "<=", ">", ">="):
        return None
    lhs, op, rhs = pred.lhs, pred.op, pred.rhs
    if not isinstance(lhs, ast.Ident):
        flipped = {"==": "==", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
        lhs, op, rhs = rhs, flipped[op], lhs
    sym = kl.fn.refs.get(id(lhs)) if isinstance(lhs, ast.Ident) else None
    info = kl.fn.exprs.get(id(rhs))
    static = getattr(info, "static", None)
    if sym is None or sym.kind is not SymKind.BOUNDED or static is None or static.value is None:
        return None
    c = static.value
    big = 1 << 30
    return {"==": (sym, c, c + 1), "<": (sym, -big, c), "<=": (sym, -big, c + 1),
            ">": (sym, c + 1, big), ">=": (sym, c, big)}[op]


def _as_block(stmt: ast.Stmt) -> ast.Block:
    return stmt if isinstance(stmt, ast.Block) else ast.Block(stmt.span, (stmt,), False)


def _is_release_loop(kl: KernelState, stmt: ast.Foreach) -> bool:
    """``foreach {s} in [S] { trigger empty.at(s); }``: frees the ring's slots."""
    inner = [s for s in stmt.body.stmts if not isinstance(s, ast.Empty)]
    return bool(inner) and all(isinstance(s, ast.TriggerStmt) and not s.after
                               and _is_event_stmt(kl, s) for s in inner)


def _is_guarded_release(kl: KernelState, stmt: ast.Stmt) -> bool:
    """``if (i == 0) { <release loops or triggers> }``, ``i`` the variable of an enclosing
    loop that starts at 0: the ring's first use releases its slots, and every later
    iteration of that loop finds them as the previous iteration's pipelined loop left
    them. That is the released state again, because a ring loop waits for and triggers
    each slot equally often (``_check_ring``). So the release is counted once, as if it
    were unconditional, and the condition produces no code (events carry no data). The
    roles are taken to be reached on the enclosing loop's first iteration, as the
    protocol needs on the GPU."""
    if not isinstance(stmt, ast.If) or stmt.other is not None:
        return False
    inner = [s for s in stmt.then.stmts if not isinstance(s, ast.Empty)]
    if not inner or not all(
            (isinstance(s, ast.Foreach) and _is_release_loop(kl, s)) or
            (isinstance(s, ast.TriggerStmt) and not s.after and _is_event_stmt(kl, s))
            for s in inner):
        return False
    found = _first_iteration(kl, stmt.cond)
    return found is not None


def _first_iteration(kl: KernelState, cond: ast.Expr) -> Symbol | None:
    """The loop variable ``cond`` tests for its first value (``i == 0``), or None."""
    found = _interval(kl, cond)
    if found is None or found[1:] != (0, 1) or not \
            (isinstance(cond, ast.Binary) and cond.op == "=="):
        return None
    sym = found[0]
    for infos in kl.fn.loops.values():
        for info in infos:
            for i, var in enumerate(info.vars):
                if var is sym and not any(part[i] if i < len(part) else None
                                          for part in (info.lower, info.upper, info.step)):
                    return sym
    return None


class _RoleScope:
    """Statements lowered inside it run on the role's lanes only."""

    def __init__(self, kl: KernelState, role: Role) -> None:
        self.kl = kl
        self.role = role

    def __enter__(self) -> None:
        if self.role.cond is not None:
            self.kl.predicates.append(self.role.cond)
        self.active = list(self.kl.active)
        if self.role.narrowed is not None:
            sym, _, axis, inside = self.role.narrowed
            self.kl.env[sym] = inside
            self.kl.active = [a for a in self.kl.active if a is not axis] + [
                x.axis for x in b.children(inside.expr) + [inside.expr]
                if isinstance(x, ir.AxisIndex)]

    def __exit__(self, *exc: object) -> None:
        if self.role.cond is not None:
            self.kl.predicates.pop()
        if self.role.narrowed is not None:
            sym, outside, _, _ = self.role.narrowed
            self.kl.env[sym] = outside
        self.kl.active[:] = self.active


# --------------------------------------------------------------------------- straight line


def _schedule(kl: KernelState, roles: list[Role], parts: list[list[ast.Stmt]],
              loops_follow: bool) -> None:
    """Lower the roles' statement lists in an order that satisfies every wait: each role
    runs until it reaches a wait that is not yet satisfied, then the next one does.
    ``loops_follow``: these are the parts before pipelined loops, which must not wait
    for what the loops trigger."""
    ledger = _ledger(kl)
    cursors = [0] * len(roles)
    refs: dict[int, list[EventRef]] = {}  # a blocked wait's targets, evaluated once
    while True:
        progressed = False
        blocked: ast.Stmt | None = None
        for i, (role, stmts) in enumerate(zip(roles, parts)):
            with _RoleScope(kl, role):
                while cursors[i] < len(stmts):
                    stmt = stmts[cursors[i]]
                    if not _step(kl, ledger, role, stmt, refs):
                        blocked = blocked or stmt
                        break
                    cursors[i] += 1
                    progressed = True
        if all(c == len(p) for c, p in zip(cursors, parts)):
            return
        if not progressed:
            assert blocked is not None
            ref = refs[id(blocked)][0]
            if loops_follow:
                raise _shape(blocked.span, "a role waits before its pipelined loop for an "
                                           "event no role triggers before the loops")
            raise LoweringError("CQ0756", blocked.span, name=ref.symbol.name,
                                reason="in no order of the roles is it triggered first "
                                       "(every role waits for another)")


def _waits(kl: KernelState, stmt: ast.WaitStmt | ast.TriggerStmt) -> list[EventRef]:
    """The events a ``wait`` or ``trigger`` names."""
    return [r for r in (event_ref(kl, t) for t in stmt.targets) if r is not None]


def _step(kl: KernelState, ledger: Ledger, role: Role, stmt: ast.Stmt,
          evaluated: dict[int, list[EventRef]]) -> bool:
    """Run one statement of a role; False when it is a wait that must wait longer."""
    if isinstance(stmt, ast.Foreach) and _is_release_loop(kl, stmt):
        _release(kl, ledger, role, stmt)
        return True
    if isinstance(stmt, ast.If) and _is_guarded_release(kl, stmt):
        for inner in stmt.then.stmts:
            if not isinstance(inner, ast.Empty):
                _step(kl, ledger, role, inner, evaluated)
        return True
    if isinstance(stmt, ast.TriggerStmt) and _is_event_stmt(kl, stmt):
        for ref in _waits(kl, stmt):
            _usable(ledger, ref)
            ledger.trigger(ref.symbol, _slot(ref), role.number)
        return True
    if isinstance(stmt, ast.WaitStmt) and _is_event_stmt(kl, stmt):
        if id(stmt) not in evaluated:
            evaluated[id(stmt)] = _waits(kl, stmt)
        refs = evaluated[id(stmt)]
        for ref in refs:
            _usable(ledger, ref)
            slot = _slot(ref)
            if ledger.completed(ref.symbol, slot) <= ledger.generation(ref, slot, role.number):
                return False
        for ref in refs:
            ledger.consume(ref, _slot(ref), role.number)
        return True
    kl.stmt(stmt)
    return True


def _release(kl: KernelState, ledger: Ledger, role: Role, stmt: ast.Foreach) -> None:
    """A loop of triggers runs at compile time: its bound must be a constant."""
    loops = kl.fn.loops[id(stmt)]
    if len(loops) != 1 or len(loops[0].vars) != 1 or loops[0].lower or loops[0].upper \
            or loops[0].step or loops[0].bounds[0].value is None:
        raise _shape(stmt.span, "a loop that triggers events before the pipelined loop "
                                "must run over a constant range, e.g. `foreach {s} in [S]`")
    loop = loops[0]
    sym = loop.vars[0]
    for value in range(loop.bounds[0].value or 0):
        kl.env[sym] = Bounded(b.const(value), loop.bounds[0])
        for inner in stmt.body.stmts:
            if isinstance(inner, ast.TriggerStmt):
                for ref in _waits(kl, inner):
                    _usable(ledger, ref)
                    ledger.trigger(ref.symbol, _slot(ref), role.number)


# --------------------------------------------------------------------------- the ring


@dataclass
class _Sync:
    """An event statement of a pipelined loop body, seen while the body is lowered."""

    kind: str  # "wait" | "trigger"
    ref: EventRef
    after_data: bool  # whether a statement that touches data came before it


def _pipeline(kl: KernelState, roles: list[Role]) -> None:
    """One loop for the producer's and the consumers' pipelined loops (module doc)."""
    first = roles[0].loop
    assert first is not None
    infos = [_loop_info(kl, r) for r in roles]
    bound = infos[0].bounds[0]
    for role, info in zip(roles[1:], infos[1:]):
        if not info.bounds[0].provably_eq(bound):
            raise _shape(_loop(role).span, f"this loop runs over [{info.bounds[0]}], the first "
                                           f"role's over [{bound}]: the roles' loops must "
                                           "have the same iteration space")
    name = kl.fresh(infos[0].vars[0].name)
    var = b.var(name, high=bound.value - 1 if bound.value is not None else None)
    for info in infos:
        kl.env[info.vars[0]] = Bounded(var, bound)
    ledger = _ledger(kl)
    ordered = _producer_first(kl, ledger, roles)
    syncs: dict[int, list[_Sync]] = {}
    with kl.nested(binds=(name,)) as inner:
        kl.loop_depth += 1
        try:
            for role in ordered:
                with _RoleScope(kl, role):
                    syncs[role.number] = _loop_body(kl, role)
        finally:
            kl.loop_depth -= 1
    stages = _check_ring(kl, ledger, ordered, syncs, var)
    stop = kl.sym(bound)
    kl.emit(ir.For(first.span, name, b.const(0), stop, inner.body, pipelined=True,
                   stages=stages))
    leave_loop(kl, name, stop, None)


def _loop(role: Role) -> ast.Foreach:
    """The pipelined loop of a role that has one (the roles ``_pipeline`` orders)."""
    assert role.loop is not None
    return role.loop


def _loop_info(kl: KernelState, role: Role) -> LoopInfo:
    loops = kl.fn.loops[id(_loop(role))]
    if len(loops) != 1 or len(loops[0].vars) != 1 or loops[0].lower or loops[0].upper \
            or loops[0].step:
        raise _shape(_loop(role).span, "a pipelined loop must have one variable over a plain "
                                       "bound, e.g. `foreach {k} in [cdiv(K, 64)]`")
    return loops[0]


def _producer_first(kl: KernelState, ledger: Ledger, roles: list[Role]) -> list[Role]:
    """The producer is the role whose loop waits for an event some slot of which is free
    now (released before the loop); the consumers wait for what it triggers."""
    def waits_free(role: Role) -> bool:
        for stmt in _loop(role).body.stmts:
            if isinstance(stmt, ast.WaitStmt):
                for sym in _event_syms(kl, stmt):
                    size = max(1, _size(sym))
                    if any(ledger.completed(sym, s) for s in range(size)):
                        return True
        return False

    producers = [r for r in roles if waits_free(r)]
    if len(producers) != 1:
        span = _loop(roles[0]).span
        if not producers:
            raise _shape(span, "no role can start: release every slot of the ring before "
                               "the loops (`foreach {s} in [S] { trigger empty.at(s); }` in "
                               "each consumer) or declare the event `= ready`")
        raise _shape(_loop(producers[1]).span, "more than one role waits for a free slot: "
                                               "one producer role fills the ring")
    producer = producers[0]
    return [producer] + [r for r in roles if r is not producer]


def _size(sym: Symbol) -> int:
    size = 1
    for dim in sym.array_dims:
        size *= dim.value or 1
    return size


def _loop_body(kl: KernelState, role: Role) -> list[_Sync]:
    """Lower one role's loop body (events dropped), recording where its events are."""
    syncs: list[_Sync] = []
    touched = False
    for stmt in _loop(role).body.stmts:
        if isinstance(stmt, (ast.WaitStmt, ast.TriggerStmt)) and _is_event_stmt(kl, stmt):
            kind = "wait" if isinstance(stmt, ast.WaitStmt) else "trigger"
            for target in stmt.targets:
                ref = event_ref(kl, target)
                if ref is not None:
                    syncs.append(_Sync(kind, ref, touched))
            continue
        if _has_events(kl, _as_block(stmt)):
            raise _shape(stmt.span, "events inside nested control flow of a role")
        if not _bookkeeping(kl, stmt):
            touched = True
            if syncs and syncs[-1].kind == "trigger":
                raise _shape(stmt.span, "a role's pipelined loop must trigger its events "
                                        "after the statements that use the ring")
        kl.stmt(stmt)
    return syncs


def _bookkeeping(kl: KernelState, stmt: ast.Stmt) -> bool:
    """Statements that only name values (``stage = k % S``), touching no data."""
    if isinstance(stmt, (ast.Empty, ast.ScalarDecl)):
        return True
    if isinstance(stmt, ast.AssignStmt):
        decls = kl.fn.decls.get(id(stmt), [])
        return bool(decls) and all(s.kind in (SymKind.SCALAR, SymKind.BOUNDED) for s in decls) \
            and not any(isinstance(i.value, ast.View) for i in stmt.items)
    return False


def _check_ring(kl: KernelState, ledger: Ledger, ordered: list[Role],
                syncs: dict[int, list[_Sync]], var: ir.Var) -> int:
    """The protocol of the loops is the ring of the module doc; returns its stage count.

    ``ordered[0]`` is the producer: it waits once for ``empty`` and triggers ``full``
    once, each consumer waits once for ``full`` and triggers ``empty`` once, always in
    slot ``k % S`` (``.at(k)``, or ``[k % S]``); before the loop every slot of ``empty``
    is free exactly once and no slot of ``full`` is ready."""
    producer = ordered[0]
    psyncs = syncs[producer.number]
    span = _loop(producer).span
    empty = _only(psyncs, "wait", span, "the producer")
    full = _only(psyncs, "trigger", span, "the producer")
    if empty.ref.symbol is full.ref.symbol:
        raise _shape(full.ref.span, "the producer waits for and triggers the same event; "
                                    "a ring needs one event for full and one for empty slots")
    stages = empty.ref.size
    if full.ref.size != stages:
        raise _shape(full.ref.span, f"'{full.ref.symbol.name}' has {full.ref.size} slots and "
                                    f"'{empty.ref.symbol.name}' {stages}: the ring's two "
                                    "event arrays must be the same size")
    for sync in (empty, full):
        _check_order(kl, sync.ref, var, stages)
    if empty.after_data:
        raise _shape(empty.ref.span, "the producer must wait for a free slot before it "
                                     "copies into the ring")
    for consumer in ordered:
        if consumer is producer:
            continue
        csyncs = syncs[consumer.number]
        cspan = _loop(consumer).span
        wait = _only(csyncs, "wait", cspan, "a consumer")
        release = _only(csyncs, "trigger", cspan, "a consumer")
        if wait.ref.symbol is not full.ref.symbol or release.ref.symbol is not \
                empty.ref.symbol:
            raise _shape(cspan, f"a consumer must wait for '{full.ref.symbol.name}' (what the "
                                f"producer triggers) and trigger '{empty.ref.symbol.name}' "
                                "(what it waits for)")
        if wait.after_data:
            raise _shape(wait.ref.span, "a consumer must wait for a full slot before it uses "
                                        "the ring")
        for sync in (wait, release):
            _check_order(kl, sync.ref, var, stages)
    for slot in range(stages):
        free = ledger.completed(empty.ref.symbol, slot)
        if free != 1:
            raise _shape(empty.ref.span, f"slot {slot} of '{empty.ref.symbol.name}' is "
                                         f"released {free} times before the loop; the ring "
                                         "needs every slot free exactly once")
        if ledger.completed(full.ref.symbol, slot):
            raise _shape(full.ref.span, f"slot {slot} of '{full.ref.symbol.name}' is ready "
                                        "before the producer filled it")
    ledger.unknown.update({empty.ref.symbol, full.ref.symbol})
    return stages


def _only(syncs: list[_Sync], kind: str, span: Span, who: str) -> _Sync:
    found = [s for s in syncs if s.kind == kind]
    if len(found) != 1:
        verb = "wait for" if kind == "wait" else "trigger"
        raise _shape(found[1].ref.span if found else span,
                     f"{who} must {verb} exactly one event per iteration of its loop")
    return found[0]


def _check_order(kl: KernelState, ref: EventRef, var: ir.Var, stages: int) -> None:
    """The slot is ``k % S`` and an ``.at`` order is ``k`` itself: iteration ``k`` uses
    generation ``k / S`` of slot ``k % S``, which is what the serial loop reproduces."""
    expected = kl.canonical(b.binary("%", var, b.const(stages)) if stages > 1 else b.const(0))
    if ref.order is not None and kl.canonical(ref.order) != kl.canonical(var):
        raise _shape(ref.span, f"the order of '{ref.symbol.name}.at(...)' must be the loop "
                               "variable itself")
    if kl.canonical(ref.slot) != expected:
        raise _shape(ref.span, f"'{ref.symbol.name}' must be used in slot k % {stages} of "
                               "iteration k (`.at(k)` or `[k % S]`)")
