"""Which parameters a ``__co__`` function writes (its effects on its caller's tensors).

A write is an element assignment (``x.at(i) = ...``), an atomic on an element, an
``mma.store`` or a copy into a view. Its target names a parameter directly, or through
a view alias (``o_head = o.subspan(...).at(...);``) whose root is one. Only ``global``
parameters are written in place: a written parameter without the qualifier is copied
first, so its caller sees no change (a by-reference one, ``f32 [M]& out``, is written
back: it counts). A write whose target cannot be traced to names
(none that the checker resolved) is taken to reach every global parameter.
"""

from __future__ import annotations

from .. import syntax as ast
from .model import CheckedFunction, Symbol, SymKind


def written_parameters(fn: CheckedFunction) -> frozenset[str]:
    """The names of the tensor parameters that ``fn`` may write in place (``global`` or
    by-reference ones)."""
    aliases = _alias_roots(fn)
    written: set[Symbol] = set()
    unknown = False
    for node in ast.walk(fn.node.body):
        for target in _write_targets(node):
            roots = _roots(fn, target, aliases)
            if roots is None:
                unknown = True
            else:
                written |= roots
    # (an unnamed parameter cannot be written: no statement can name it)
    in_place = {p.name for p in fn.node.params
                if p.name is not None and (p.storage == "global" or p.by_ref)}
    if unknown:
        return frozenset(in_place)
    return frozenset(s.name for s in written if s.is_param and s.name in in_place)


def written_copies(fn: CheckedFunction) -> list[tuple[Symbol, ast.Expr]]:
    """The tensor parameters that ``fn`` writes although they are neither ``global`` nor
    by-reference (the writes reach a copy, not the caller's tensor), each with its first
    written target."""
    copied = {p.name for p in fn.node.params
              if p.name is not None and p.storage != "global" and not p.by_ref}
    if not copied:
        return []
    aliases = _alias_roots(fn)
    found: dict[Symbol, ast.Expr] = {}
    for node in ast.walk(fn.node.body):
        for target in _write_targets(node):
            for sym in _roots(fn, target, aliases) or ():
                if sym.is_param and sym.name in copied and sym not in found:
                    found[sym] = target
    return list(found.items())


def reassigned_scalars(fn: CheckedFunction) -> frozenset[Symbol]:
    """The scalars some statement assigns after their declaration (``x = ...``, ``x += ...``,
    ``++x``, ``x--``): the others keep the value they were declared with."""
    found: set[Symbol] = set()
    for node in ast.walk(fn.node.body):
        if isinstance(node, ast.AssignStmt):
            declared = fn.decls.get(id(node), [])
            for item in node.items:
                sym = fn.refs.get(id(item.target)) if isinstance(item.target, ast.Ident) \
                    else None
                if sym is not None and sym not in declared:
                    found.add(sym)
        elif isinstance(node, (ast.Unary, ast.Postfix)) and node.op in ("++", "--") and \
                isinstance(node.operand, ast.Ident):
            sym = fn.refs.get(id(node.operand))
            if sym is not None:
                found.add(sym)
    return frozenset(found)


def element_write(node: ast.Node) -> ast.ElemAccess | None:
    """The element ``node`` writes: the target of an element assignment, or of an atomic
    (``__atomic_add(&h.at(i), 1)``); None for anything else."""
    target: object = None
    if isinstance(node, ast.Assign):
        target = node.target
    elif isinstance(node, ast.CallExpr) and node.name.startswith("__atomic_") and node.args:
        target = node.args[0]
        if isinstance(target, ast.Unary) and target.op == "&":
            target = target.operand
    return target if isinstance(target, ast.ElemAccess) else None


def _write_targets(node: ast.Node) -> list[ast.Expr]:
    element = element_write(node)
    if element is not None:
        return [element]
    if isinstance(node, ast.MmaStore):
        return [node.dst]
    if isinstance(node, ast.DmaStmt) and isinstance(node.dst, ast.SelectExpr):
        return list(node.dst.options)
    if isinstance(node, ast.DmaStmt) and not isinstance(node.dst, ast.StorageDest):
        return [node.dst]
    return []


def _roots(fn: CheckedFunction, target: ast.Expr,
           aliases: dict[Symbol, Symbol | None]) -> set[Symbol] | None:
    """The symbol a written target writes into (empty for registers, events and other
    non-data names; None: not known). Indices are not followed: ``h.at(x.at(i))`` writes
    ``h`` only."""
    while True:
        if isinstance(target, ast.Unary) and target.op == "&":
            target = target.operand
        elif isinstance(target, ast.ElemAccess):
            target = target.base
        elif isinstance(target, ast.Member):
            target = target.obj
        elif isinstance(target, ast.Index):  # an element of an array of buffers
            target = target.base
        else:
            break
    if isinstance(target, ast.View) and id(target) in fn.views:
        sym: Symbol | None = fn.views[id(target)].root
    elif isinstance(target, ast.Ident):
        sym = fn.refs.get(id(target))
    else:
        return None
    if sym is None:
        return None
    if sym.kind is SymKind.VIEW:
        sym = aliases.get(sym)
        if sym is None:
            return None
    return {sym} if sym.kind in (SymKind.DATA, SymKind.FUTURE) else set()


def _alias_roots(fn: CheckedFunction) -> dict[Symbol, Symbol | None]:
    """Each view alias with the data symbol it views (None when that is not known)."""
    aliases: dict[Symbol, Symbol | None] = {}
    for node in ast.walk(fn.node.body):
        if not isinstance(node, ast.AssignStmt):
            continue
        for item, sym in zip(node.items, fn.decls.get(id(node), [])):
            if sym.kind is SymKind.VIEW:
                info = fn.views.get(id(item.value))
                root = info.root if info is not None else None
                aliases[sym] = aliases.get(root, root) if root is not None and \
                    root.kind is SymKind.VIEW else root
    return aliases

