"""Which host-allocated buffers the first kernel writes in full before anything reads them.

A buffer declared in a function (``DT [M, N] y;``) has undefined contents until written
(spec: function-scope buffers), but the lowering fills it with zeros unless it can prove
the fill is never seen: a fill costs a pass over memory per call (for an output of
2048 x 128256 bf16, a language model's last projection, half a gigabyte written before the
GEMM writes it again). The proof is deliberately narrow, the shape every GEMM-like kernel
has:

- the first host statement after the declaration that names the buffer is a ``parallel``
  of one ``block`` level;
- the block body names the buffer in exactly one of its top-level statements (so it is
  run once by every block, and nothing reads the buffer first), and the body holds no
  ``return``;
- that statement is ``mma.store acc, y.subspan(T...).at(b...)`` (no modifier or mask) or a
  synchronous ``dma``/``tma`` ``copy`` into such a view, writing a tile of the view's
  extents;
- each index ``b_d`` is a distinct block variable whose bound is ``cdiv(dim_d, T_d)``,
  and the view steps by its extents (``chunkat`` over ``cdiv`` factors is the same).

Then the blocks' tiles cover every element (the last tile of each dimension clipped), so
the buffer is made with ``torch.empty``. Anything else keeps the zero fill.
"""

from __future__ import annotations

from ...frontend import syntax as ast
from ...frontend.sema.model import CheckedFunction, Level, Symbol, ViewInfo
from ...frontend.sema.symbolic import Sym

__all__ = ["written_before_read"]


def written_before_read(fn: CheckedFunction) -> set[Symbol]:
    """The buffers declared at the top of ``fn`` whose first use writes all of them."""
    stmts = fn.node.body.stmts
    covered: set[Symbol] = set()
    for index, stmt in enumerate(stmts):
        if not isinstance(stmt, ast.SpannedDecl):
            continue
        for sym in fn.decls.get(id(stmt), []):
            if _initialised(stmt, sym):
                continue
            first = next((s for s in stmts[index + 1:] if _names(fn, s, sym)), None)
            if isinstance(first, ast.Parallel) and _block_writes_all(fn, first, sym):
                covered.add(sym)
    return covered


def _initialised(stmt: ast.SpannedDecl, sym: Symbol) -> bool:
    return any(v.name == sym.name and v.init is not None for v in stmt.vars)


def _names(fn: CheckedFunction, node: object, sym: Symbol) -> bool:
    return any(isinstance(n, ast.Ident) and fn.refs.get(id(n)) is sym for n in ast.walk(node))


def _block_writes_all(fn: CheckedFunction, stmt: ast.Parallel, sym: Symbol) -> bool:
    levels = fn.parallels.get(id(stmt), ())
    if len(levels) != 1 or levels[0].level is not Level.BLOCK or stmt.is_async:
        return False
    if any(isinstance(n, ast.ReturnStmt) for n in ast.walk(stmt.body)):
        return False
    users = [s for s in stmt.body.stmts if _names(fn, s, sym)]
    if len(users) != 1:
        return False
    user = users[0]
    if isinstance(user, ast.MmaStore) and user.modifier is None and not user.mask:
        dst, written = user.dst, _shape(fn, user.frag)
    elif isinstance(user, ast.DmaStmt) and user.op == "copy" and not user.is_async:
        dst, written = user.dst, _shape(fn, user.src)
    else:
        return False
    view = fn.views.get(id(dst))
    if view is None or view.root is not sym or view.array_index:
        return False
    bounds = dict(zip(levels[0].vars, levels[0].bounds))
    return _tiles_cover(fn, view, bounds, written)


def _shape(fn: CheckedFunction, expr: ast.Expr) -> tuple[Sym, ...] | None:
    """The shape of the tile a store or copy writes from (a fragment, a buffer or a view)."""
    view = fn.views.get(id(expr))
    if view is not None:
        return tuple(view.type.shape)
    if isinstance(expr, ast.Member) and expr.member == "data":
        expr = expr.obj
    sym = fn.refs.get(id(expr)) if isinstance(expr, ast.Ident) else None
    return sym.shape if sym is not None else None


def _tiles_cover(fn: CheckedFunction, view: ViewInfo, bounds: dict[Symbol, Sym],
                 written: tuple[Sym, ...] | None) -> bool:
    """Whether the one-step view, indexed by the block variables, tiles the whole buffer
    with tiles of shape ``written``."""
    shape = view.root.shape
    if len(view.steps) != 1 or shape is None:
        return False
    step = view.steps[0]
    if step.kind not in ("subspan", "chunkat") or step.strides is not None \
            or any(d is not None for d in step.dynamic):
        return False
    if written is None or tuple(written) != tuple(step.extents) or step.scales != step.extents:
        return False
    seen: set[Symbol] = set()
    for dim, (item, extent) in enumerate(zip(step.indices, step.extents)):
        if not isinstance(item.expr, ast.Ident) or item.member is not None:
            return False
        var = fn.refs.get(id(item.expr))
        if var is None or var in seen or var not in bounds:
            return False
        seen.add(var)
        if bounds[var] != shape[dim].cdiv(extent):
            return False
    return len(step.indices) == len(shape)
