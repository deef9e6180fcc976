"""Lowering of ``foreach`` (spec 5.3), with three rules:

1. An MMA K-slice loop -- a loop whose body only loads operand slices and accumulates
   them into the same accumulators -- is *collapsed*: its index becomes a ``Collapsed``
   leaf that the MMA lowering widens into one dot over the whole K tile.
2. Variables whose iterations are independent -- every element written in the body is
   indexed injectively by the variable and nothing written is read -- become tensor axes.
3. The remaining variables are sequential loops; an accumulation ``x.at(i) += e`` whose
   element does not depend on them is kept in a register across the loop (one load
   before, one store after).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from ...frontend import syntax as ast
from ...frontend.sema.model import LoopInfo, Symbol, SymKind, is_runtime_trips
from . import build as b
from . import nodes as ir
from .errors import LoweringError, unsupported
from .state import KernelState, broadcast, children, iter_stmts
from .scratch import scratch
from .values import Bounded, Buffer, Region, Tile, access, padding_mask


def lower_foreach(kl: KernelState, stmt: ast.Foreach) -> None:
    loops = kl.fn.loops[id(stmt)]
    if _is_mma_slice_loop(kl, stmt, loops) and _try_collapse(kl, stmt, loops):
        return
    vector = _vectorizable(kl, stmt, loops)
    sequential: list[tuple[Symbol, LoopInfo, int]] = []
    lanes: list[ir.Axis] = []
    for loop in loops:
        for i, sym in enumerate(loop.vars):
            if sym in vector:
                axis = kl.axis(("loop", id(sym)), loop.bounds[i].value or 1, sym.name)
                kl.env[sym] = Bounded(b.axis_index(axis), loop.bounds[i])
                lanes.append(axis)
            else:
                sequential.append((sym, loop, i))
    if not lanes:
        _lower_loops(kl, stmt, loops, sequential)
        return
    # the iterations are lanes: a temporary of the body holds one value per lane, and an
    # `if` masks the lanes it skips (the body is nothing but element-wise code)
    depth = len(kl.active)
    kl.active.extend(lanes)
    kl.masked_ifs += 1
    try:
        _lower_loops(kl, stmt, loops, sequential)
    finally:
        del kl.active[depth:]
        kl.masked_ifs -= 1


def _lower_loops(kl: KernelState, stmt: ast.Foreach, loops: tuple[LoopInfo, ...],
                 sequential: list[tuple[Symbol, LoopInfo, int]]) -> None:
    """The loop over its sequential variables (its vector ones are bound already)."""
    accumulation = None if _exits(stmt) else _promotable(kl, stmt, [s for s, _, _ in sequential])
    if accumulation is not None:
        _lower_accumulation(kl, stmt, sequential, loops, accumulation)
        return
    _scratch_for_scalar_access(kl, stmt, sequential)
    if _exits(stmt):
        _lower_exiting(kl, stmt, sequential, loops)
        return
    _emit_loops(kl, sequential, loops, lambda: kl.block(stmt.body), stmt)


def _exits(stmt: ast.Foreach) -> bool:
    """Whether ``break`` or ``continue`` leaves this loop (not a loop nested in it)."""
    stack = list(stmt.body.stmts)
    while stack:
        inner = stack.pop()
        if isinstance(inner, (ast.BreakStmt, ast.ContinueStmt)):
            return True
        if isinstance(inner, ast.If):
            stack.extend(inner.then.stmts)
            stack.extend(inner.other.stmts if inner.other else ())
        elif isinstance(inner, ast.Block):
            stack.extend(inner.stmts)
    return False


def _lower_exiting(kl: KernelState, stmt: ast.Foreach,
                   sequential: list[tuple[Symbol, LoopInfo, int]],
                   loops: tuple[LoopInfo, ...]) -> None:
    """A loop that ``break``s or ``continue``s: every trip runs, masked by the lanes still
    in the loop (a flag per lane, as in a ``while`` loop); ``break`` clears the flag of
    the lanes that take it, ``continue`` masks the rest of their trip."""
    if len(sequential) != 1 or any(len(loop.vars) != 1 for loop in loops):
        raise unsupported(stmt.span, "'break'/'continue' in a loop over several variables",
                          "loop over one variable")
    predicate = kl.predicate()
    first = broadcast(predicate if predicate is not None else b.const(True, b.I1),
                       tuple(kl.active))
    name = kl.fresh("active")
    kl.emit(ir.Let(stmt.span, name, first))
    active = ir.Var(first.axes, b.I1, name)

    def body() -> None:
        kl.whiles.append((id(stmt.body), active))
        kl.predicates.append(active)
        try:
            kl.block(stmt.body)
        finally:
            kl.predicates.pop()
            kl.whiles.pop()

    _emit_loops(kl, sequential, loops, body, stmt)


def _bind_tuples(kl: KernelState, loops: tuple[LoopInfo, ...]) -> None:
    for loop in loops:
        if loop.tuple_symbol is not None and all(v in kl.env for v in loop.vars):
            kl.env[loop.tuple_symbol] = [kl.env[v] for v in loop.vars]


def _emit_loops(kl: KernelState, sequential: list[tuple[Symbol, LoopInfo, int]],
                loops: tuple[LoopInfo, ...], body: Callable[[], None],
                stmt: ast.Foreach) -> None:
    """Nested ``for`` loops over the sequential variables, then the body."""
    if not sequential:
        _bind_tuples(kl, loops)
        body()
        return
    sym, loop, i = sequential[0]
    name = kl.fresh(sym.name)
    bound = loop.bounds[i]
    start: ir.Expr = b.const(0)
    runtime = loop.dynamic[i] if i < len(loop.dynamic) else None
    if runtime is not None:  # `foreach y in X`: X trips (bound: the static bound of X)
        stop = kl.value(runtime)
        if bound.value is None and bound.free_vars() and \
                all(is_runtime_trips(n) for n in bound.free_vars()):
            # no provable bound: `#y` names the trip count, bound here
            (trips,) = bound.free_vars()
            kl.emit(ir.Let(stmt.span, ir.dim_var_name(trips), stop))
            stop = b.sym(bound)
    else:
        stop = kl.sym(bound)
    lower = loop.lower[i] if loop.lower else None
    upper = loop.upper[i] if loop.upper else None
    step_expr = loop.step[i] if loop.step else None
    if lower is not None:
        start = kl.value(lower)
    if upper is not None:
        stop = b.add(stop, kl.value(upper))
    step = kl.value(step_expr) if step_expr is not None else None
    high = bound.value - 1 if bound.value is not None else None
    if upper is not None or lower is not None:
        high = None  # (a runtime trip count stays below the bound: `high` holds)
    kl.env[sym] = Bounded(b.var(name, high=high), bound)
    with kl.nested(binds=(name,)) as inner:
        if len(sequential) == 1:
            _carry_futures(kl, stmt, name, start, step)
        kl.loop_depth += 1
        try:
            _emit_loops(kl, sequential[1:], loops, body, stmt)
        finally:
            kl.loop_depth -= 1
    kl.emit(ir.For(stmt.span, name, start, stop, inner.body, pipelined=False, step=step))
    leave_loop(kl, name, stop, step)


# ----------------------------------------------------------------------- MMA K-slice loops


def _is_mma_slice_loop(kl: KernelState, stmt: ast.Foreach,
                       loops: tuple[LoopInfo, ...]) -> bool:
    if any(loop.lower or loop.upper or loop.step for loop in loops):
        return False
    if not all(bound.value is not None for loop in loops for bound in loop.bounds):
        return False
    execs = 0
    for inner in iter_stmts(stmt.body):
        if isinstance(inner, ast.MmaExec):
            execs += 1
        elif isinstance(inner, ast.MmaLoad) and inner.declares:
            continue
        elif _declares_views(kl, inner):
            continue
        elif not isinstance(inner, (ast.Parallel, ast.Block, ast.Empty, ast.MmaCommit)):
            return False
    return execs > 0


def _declares_views(kl: KernelState, stmt: ast.Stmt) -> bool:
    """``ma = lhs_s.chunkat(_, k);``: names for operand views (no data moves)."""
    decls = kl.fn.decls.get(id(stmt), [])
    return isinstance(stmt, ast.AssignStmt) and bool(decls) and all(
        s.kind is SymKind.VIEW for s in decls)


def _try_collapse(kl: KernelState, stmt: ast.Foreach, loops: tuple[LoopInfo, ...]) -> bool:
    """Lower the body once with collapsed indices; on CQ0703 undo and report False."""
    body_len = len(kl.body)
    saved_env = dict(kl.env)
    names = set()
    for loop in loops:
        for sym, bound in zip(loop.vars, loop.bounds):
            names.add(sym.name + str(id(sym)))
            kl.env[sym] = Bounded(ir.Collapsed((), b.I32, sym.name + str(id(sym)),
                                               bound.value or 1), bound)
    _bind_tuples(kl, loops)
    kl.collapsing |= names
    try:
        kl.block(stmt.body)
    except LoweringError as err:
        if err.code != "CQ0703":
            raise
        del kl.body[body_len:]
        kl.env = saved_env
        return False
    finally:
        kl.collapsing -= names
    return True


# ----------------------------------------------------------------------- vectorisation


def _vectorizable(kl: KernelState, stmt: ast.Foreach,
                  loops: tuple[LoopInfo, ...]) -> set[Symbol]:
    """The loop variables whose iterations are independent, to become tensor axes. The
    body may hold element writes, temporaries (scalars declared in it), ``if``s and nested
    loops. Every iteration must touch its own elements: each written element access is
    injective in the variable, and an element that is also read (an in-place update, a
    compound assignment) is read and written at one and the same index."""
    nodes = _nodes(stmt.body)
    stmts = [node for node in nodes if isinstance(node, ast.Stmt)]
    local = _locals(kl, stmts)
    if local is None:
        return set()
    targets = _element_targets(kl, stmts, local, nodes)
    if not targets or not _own_elements(kl, targets, local, nodes):
        return set()
    chosen: set[Symbol] = set()
    for loop in loops:
        if loop.lower or loop.upper or loop.step or any(loop.dynamic):
            continue  # (a runtime trip count: a scalar loop)
        for sym, bound in zip(loop.vars, loop.bounds):
            if bound.value is None or bound.value > 1024:
                continue
            if all(isinstance(item.target, ast.ElemAccess)
                   and any(_injective(kl, idx, sym) for idx in item.target.indices)
                   for item in targets):
                chosen.add(sym)
    return chosen


# symbols a vectorised body may declare and assign: one value per iteration (per lane)
_LANE_KINDS = (SymKind.SCALAR, SymKind.BOUNDED)


def _element_targets(kl: KernelState, stmts: list[ast.Stmt], local: set[Symbol],
                     nodes: list[ast.Node]) -> list[ast.Assign] | None:
    """The element assignments of a body (its statements ``stmts``, its nodes ``nodes``)
    that is nothing but element assignments, temporaries (``local``) and ``if``s (None
    otherwise)."""
    targets: list[ast.Assign] = []
    for inner in stmts:
        if isinstance(inner, (ast.Block, ast.Empty, ast.Foreach, ast.If, ast.ScalarDecl)):
            continue
        if not isinstance(inner, ast.AssignStmt):
            return None
        for item in inner.items:
            if isinstance(item.target, ast.ElemAccess):
                targets.append(item)
            elif not (isinstance(item.target, ast.Ident)
                      and kl.fn.refs.get(id(item.target)) in local):
                return None  # a variable that lives on after the iteration
    if any(isinstance(node, (ast.Unary, ast.Postfix)) and node.op in ("++", "--") and
           kl.fn.refs.get(id(node.operand)) not in local for node in nodes):
        return None
    return targets


def _locals(kl: KernelState, stmts: list[ast.Stmt]) -> set[Symbol] | None:
    """The scalars the statements ``stmts`` declare (None when they declare anything
    else)."""
    local: set[Symbol] = set()
    for inner in stmts:
        if isinstance(inner, ast.Foreach):
            continue  # (its variables are bound by the loop)
        for sym in kl.fn.decls.get(id(inner), []):
            if sym.kind not in _LANE_KINDS:
                return None
            local.add(sym)
    return local


def _own_elements(kl: KernelState, targets: list[ast.Assign], local: set[Symbol],
                  nodes: list[ast.Node]) -> bool:
    """Whether every written root that the body also reads is accessed at one index only
    (the same element in every statement of an iteration), an index no temporary of the
    body changes."""
    roots = {_root(kl, item.target) for item in targets}
    if None in roots:
        return False
    stores = {id(item.target) for item in targets if item.op == "="}
    keys: dict[Symbol, set[object]] = {}
    read: set[Symbol] = set()
    for node in nodes:
        if not isinstance(node, ast.ElemAccess):
            continue
        root = _root(kl, node)
        if root is None or root not in roots:
            continue
        if any(_references(kl, idx, sym) for idx in node.indices for sym in local):
            keys.setdefault(root, set()).add(object())  # (never equal to another access)
        else:
            keys.setdefault(root, set()).add(_key(kl, node.indices))
        if id(node) not in stores:
            read.add(root)
    return all(len(keys[root]) == 1 for root in read)


def _nodes(node: ast.Node) -> list[ast.Node]:
    """Every AST node under ``node``, itself included (a stack, not recursion: loops nest
    hundreds deep)."""
    found: list[ast.Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children(current))
    return found


def _key(kl: KernelState, node: object) -> object:
    """The structure of an expression, names replaced by what they refer to: two equal
    keys denote the same value (element indices are free of side effects)."""
    if isinstance(node, ast.Ident):
        return ("name", id(kl.fn.refs.get(id(node))) if id(node) in kl.fn.refs else node.name)
    if isinstance(node, ast.Node):
        return (type(node).__name__,) + tuple(
            _key(kl, getattr(node, f.name)) for f in fields(node) if f.name != "span")
    if isinstance(node, tuple):
        return tuple(_key(kl, item) for item in node)
    return node


def _root(kl: KernelState, access_node: ast.Expr) -> Symbol | None:
    base = access_node.base if isinstance(access_node, ast.ElemAccess) else access_node
    if isinstance(base, ast.Member):
        base = base.obj
    return kl.fn.refs.get(id(base)) if isinstance(base, ast.Ident) else None


def _reads(kl: KernelState, expr: ast.Node, roots: set[Symbol | None]) -> bool:
    if isinstance(expr, ast.ElemAccess) and _root(kl, expr) in roots:
        return True
    return any(_reads(kl, child, roots) for child in children(expr))


def _references(kl: KernelState, expr: ast.Node, sym: Symbol) -> bool:
    if isinstance(expr, ast.Ident):
        ref = kl.fn.refs.get(id(expr))
        return ref is sym or (ref is not None and sym in ref.members)
    return any(_references(kl, child, sym) for child in children(expr))


def _injective(kl: KernelState, expr: ast.Expr, sym: Symbol) -> bool:
    """Whether distinct values of ``sym`` give distinct values of ``expr``: ``sym``
    itself, a bounded ituple holding it, or a ``#`` composition with such a side."""
    if isinstance(expr, ast.Ident):
        ref = kl.fn.refs.get(id(expr))
        return ref is sym or (ref is not None and sym in ref.members)
    if isinstance(expr, ast.Binary) and expr.op == "#":
        left, right = _references(kl, expr.lhs, sym), _references(kl, expr.rhs, sym)
        if left and not right:
            return _injective(kl, expr.lhs, sym)
        if right and not left:
            return _injective(kl, expr.rhs, sym)
    return False


def _scratch_for_scalar_access(kl: KernelState, stmt: ast.Foreach,
                               loop_vars: list[tuple[Symbol, LoopInfo, int]]) -> None:
    """A buffer held as a register tile that a sequential loop reads or writes at single
    elements (an index with a loop variable) moves to scratch memory before the loop, where
    its content was made: the tile cannot give one element at a runtime position. (Inside
    ``apply``, elements of register tiles are read along the tile's own axes: apply.py.)"""
    sequential = [sym for sym, _, _ in loop_vars]
    if not sequential or kl.apply_depth or not any(
            isinstance(v, Buffer) and isinstance(v.content, Tile) for v in kl.env.values()):
        return
    for node in _nodes(stmt.body):
        if not isinstance(node, ast.ElemAccess):
            continue
        root = _root(kl, node)
        buffer = kl.env.get(root) if root is not None else None
        if not isinstance(buffer, Buffer) or not isinstance(buffer.content, Tile):
            continue
        if buffer.scope is kl.scopes[-1] and any(
                _references(kl, idx, sym) for idx in node.indices for sym in sequential):
            scratch(kl, buffer, node.span)


# ----------------------------------------------------------------------- accumulation


def _promotable(kl: KernelState, stmt: ast.Foreach, sequential: list[Symbol]) -> ast.Assign | None:
    if not sequential:
        return None
    stmts = [s for s in stmt.body.stmts if not isinstance(s, ast.Empty)]
    if len(stmts) != 1 or not isinstance(stmts[0], ast.AssignStmt) or len(stmts[0].items) != 1:
        return None
    item = stmts[0].items[0]
    if item.op not in ("+=", "-=") or not isinstance(item.target, ast.ElemAccess):
        return None
    if any(_references(kl, idx, sym) for idx in item.target.indices for sym in sequential):
        return None
    if _reads(kl, item.value, {_root(kl, item.target)}):
        return None
    return item


def _lower_accumulation(kl: KernelState, stmt: ast.Foreach,
                        sequential: list[tuple[Symbol, LoopInfo, int]],
                        loops: tuple[LoopInfo, ...], item: ast.Assign) -> None:
    _bind_tuples(kl, loops)
    target = item.target
    assert isinstance(target, ast.ElemAccess)  # (_promotable takes element targets only)
    source, index, elem = kl.element(target)
    if not isinstance(source, Region):
        raise unsupported(item.target.span, "accumulating into a register-resident buffer")
    kl.fl.written.add(source.tensor.name)
    pointer, mask = access(source, index)
    dtype = source.tensor.dtype
    name = kl.fresh("acc")
    kl.emit(ir.Let(stmt.span, name, ir.Load(b.merged(pointer, *([mask] if mask else [])),
                                            dtype, pointer, mask)))
    current = ir.Var(pointer.axes, dtype, name)

    wide = kl.promoted(elem, item.value)  # each update rounds once (spec 3.6)

    def accumulate(value: ir.Expr) -> None:
        if set(value.axes) - set(pointer.axes):
            raise unsupported(item.span, "accumulating values of several threads into one "
                                         "element", "give each thread its own element")
        new = kl.arith(item.op[:-1], current, value, wide)
        kl.emit(ir.Let(item.span, name, b.cast(new, dtype)))

    if _reducible(sequential, pointer):
        accumulate(_reduced_value(kl, sequential, loops, item, b.dtype_of(wide)))
    else:
        _scratch_for_scalar_access(kl, stmt, sequential)
        _emit_loops(kl, sequential, loops, lambda: accumulate(kl.value(item.value)), stmt)
    store_mask = kl.guarded(b.and_(mask, padding_mask(b.merged(pointer, current))))
    kl.emit(ir.Store(item.span, pointer, current, store_mask))


REDUCE_LIMIT = 1 << 15  # elements of the widest tensor a vectorised reduction may create


def _reducible(sequential: list[tuple[Symbol, LoopInfo, int]], pointer: ir.Expr) -> bool:
    """Whether the accumulation loops can become one tensor reduction: static trip
    counts, no ranges, and a small enough product tensor."""
    size = 1
    for axis in pointer.axes:
        size *= axis.size
    for _, loop, i in sequential:
        extent = loop.bounds[i].value
        if extent is None or loop.lower or loop.upper or loop.step:
            return False
        size *= b.next_pow2(extent)
    return size <= REDUCE_LIMIT


def _reduced_value(kl: KernelState, sequential: list[tuple[Symbol, LoopInfo, int]],
                   loops: tuple[LoopInfo, ...], item: ast.Assign, dtype: ir.DType) -> ir.Expr:
    """``sum over the loop indices of value``, the indices laid out as tensor axes."""
    axes = []
    for sym, loop, i in sequential:
        extent = loop.bounds[i].value or 1
        axis = kl.axis(("loop", id(sym)), extent, sym.name)
        kl.env[sym] = Bounded(b.axis_index(axis), loop.bounds[i])
        axes.append(axis)
    _bind_tuples(kl, loops)
    value = b.cast(kl.value(item.value), dtype)
    for axis in axes:
        if axis not in value.axes:
            value = b.mul(value, b.const(axis.extent, dtype))
            continue
        if axis.padded:
            keep = b.binary("<", b.axis_index(axis), b.const(axis.extent))
            value = ir.Where(value.axes, dtype, keep, value, b.const(0, dtype))
        value = ir.Reduce(tuple(a for a in value.axes if a is not axis), dtype, "sum", value, axis)
    return value


# ----------------------------------------------------------------------- double buffering


def _carry_futures(kl: KernelState, stmt: ast.Foreach, var: str, start: ir.Expr,
                   step: ir.Expr | None) -> None:
    """Multiple buffering: ``swap(f0, f1)`` / ``rotate(f0, ..., fn-1)`` ends each
    iteration, and the loop copies into one of the futures, ``fj``. Every copy is a view
    of its source ``src(k)``; a rotation gives ``fi`` what ``fi+1`` held, so at the top of
    iteration k, ``fi`` holds ``src(k - m)`` with ``m = (j - i) mod n`` (n for ``fj``
    itself) -- provided the copies before the loop made those views for its first
    iteration."""
    stride = step if step is not None else b.const(1)
    for inner in stmt.body.stmts:
        if not isinstance(inner, ast.SwapStmt):
            continue
        syms = kl.fn.swaps.get(id(inner)) or []
        copies = _copies_in(kl, stmt.body, syms)
        if len(syms) < 2 or len(copies) != 1:
            raise unsupported(inner.span, f"this '{inner.kind}' inside a loop",
                              "the supported pattern copies into one of the futures inside "
                              "the loop, into the others before it, and rotates them at "
                              "the end")
        copied, copy = next(iter(copies.items()))
        source = kl.resolve_view_read(copy.src)
        if isinstance(copy.dst, ast.StorageDest):
            from .dma import staged

            source = staged(source, copy)
        j = syms.index(copied)
        lagged = {}
        for i, sym in enumerate(syms):
            if sym is not copied:
                lagged[sym] = _lagged(kl, inner, source, sym, var, start,
                                      b.mul(b.const((j - i) % len(syms)), stride))
        kl.env.update(lagged)
        kl.carried.add(id(inner))


def _lagged(kl: KernelState, swap: ast.SwapStmt, source: object, sym: Symbol, var: str,
            start: ir.Expr, lag: ir.Expr) -> Buffer:
    """``sym`` at the top of every iteration: the loop's copy made ``lag`` trips earlier,
    checked against what ``sym`` holds when the loop starts."""
    current = kl.env.get(sym)
    if not isinstance(source, Region) or not isinstance(current, Buffer) or not isinstance(
            current.content, Region):
        raise unsupported(swap.span, "this multiple-buffering pattern",
                          "copy into the futures before the loop and rotate them with the "
                          "one copied inside the loop")
    content = current.content
    if not _same_view(source.substituted(var, b.binary("-", start, lag)), content):
        raise unsupported(swap.span, f"multiple buffering where what '{sym.name}' holds "
                                     "before the loop differs from the copy the loop makes "
                                     "for it")
    earlier = source.substituted(var, b.binary("-", b.var(var), lag))
    return Buffer(sym, current.shape, current.elem,
                  earlier.clipped(content.extents, content.filled))


def _copies_in(kl: KernelState, body: ast.Block, syms: list) -> dict:
    """The swapped futures that a copy in ``body`` (directly) assigns, with the copy."""
    found = {}
    for inner in body.stmts:
        if isinstance(inner, ast.DmaStmt):
            for sym in kl.fn.decls.get(id(inner), []):
                if sym in syms:
                    found[sym] = inner
    return found


def _same_view(a: Region, b_: Region) -> bool:
    return a.key() == b_.key() or a._replace(extents=b_.extents, limits=b_.limits).key() == \
        b_.key()


def leave_loop(kl: KernelState, var: str, stop: ir.Expr, step: ir.Expr | None) -> None:
    """After the loop its index is gone: views that still mention it (copies made in the
    last iteration) take its last value."""
    last = b.binary("-", stop, step if step is not None else b.const(1))
    for sym, value in list(kl.env.items()):
        if isinstance(value, Buffer) and isinstance(value.content, Region) and \
                value.content.mentions(var):
            kl.env[sym] = Buffer(value.symbol, value.shape, value.elem,
                                 value.content.substituted(var, last))
