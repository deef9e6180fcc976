"""Shared/local buffers written element by element (arch 3.3).

A buffer that a copy fills is a view of the copy's source; one written by computation
needs storage of its own. Two representations, the cheaper first:

- a register tile, when a statement writes the whole buffer at once: the indices are
  exactly the tensor axes of the enclosing parallel levels or vectorised loops
  (``parallel p by 64 { out.at(p) = ...; }``);
- otherwise a per-program scratch region in global memory, allocated by the host next to
  the launch: one slice per program (and per thread for ``local`` buffers declared under
  thread axes). Writes are stores, reads are loads, and barriers around every write keep
  the threads of a program in step (``sync.barrier`` becomes one too). Correct for any
  access pattern, slower than registers.

A buffer moves from a tile (or a forwarded view) to scratch at the first write or read
that the tile cannot express; its current content is stored into the scratch first. That
move must happen in the block where the content was made (not inside a nested loop or
branch, which would move it on one path only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ...frontend import syntax as ast
from ...frontend.sema.effects import element_write
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from .errors import unsupported
from .state import KernelState, broadcast
from .tiles import load_tile, store_tile
from .values import Buffer, Region, TensorRef, Tile, access, padding_mask

_log = logging.getLogger(__name__)


def element_written(kl: KernelState, sym: object) -> bool:
    """Whether some statement of the kernel writes single elements of ``sym`` (an
    element assignment or an atomic)."""
    if kl.element_targets is None:
        targets: set[object] = set()
        # (writes inside `apply` replace whole register tiles: apply.py)
        in_apply = {id(n) for a in ast.walk(kl.root) if isinstance(a, ast.Apply)
                    for n in ast.walk(a.body)}
        for node in ast.walk(kl.root):
            if id(node) in in_apply:
                continue
            target = element_write(node)
            if target is not None:
                base = target.base
                if isinstance(base, ast.Member):
                    base = base.obj
                if isinstance(base, ast.Ident):
                    targets.add(kl.fn.refs.get(id(base)))
        kl.element_targets = targets
    return sym in kl.element_targets


def store_element(kl: KernelState, buffer: Buffer, target: ast.ElemAccess,
                  item: ast.Assign, span: Span) -> None:
    """``buf.at(i...) op= value`` for a shared/local buffer."""
    index = kl.element_index(target)
    rhs = kl.value(item.value)  # once: it may hold an atomic
    if _tile_write(kl, buffer, index, item, rhs):
        return
    region = scratch(kl, buffer, span)
    pointer, mask = access(region, index)
    if item.op == "=":
        value = b.cast(rhs, region.tensor.dtype)
    else:
        current = ir.Load(pointer.axes, pointer.dtype, pointer, mask)
        wide = kl.promoted(buffer.elem, item.value)
        value = b.cast(kl.arith(item.op[:-1], current, rhs, wide), region.tensor.dtype)
    mask = kl.guarded(b.and_(mask, padding_mask(b.merged(pointer, value))))
    kl.emit(ir.Barrier(span))  # readers of the old values first
    kl.emit(ir.Store(span, pointer, value, mask))
    kl.emit(ir.Barrier(span))


def _tile_write(kl: KernelState, buffer: Buffer, index: list[ir.Expr],
                item: ast.Assign, rhs: ir.Expr) -> bool:
    """Write the whole buffer as a register tile when the indices are tensor axes that walk
    its whole dimensions (its own, or those of a vectorised loop over the same shape: an
    epilogue updating a stored accumulator in place)."""
    content = buffer.content
    if buffer.owned or not (content is None or isinstance(content, Tile)):
        return False
    if kl.scopes[-1] is not buffer.scope:
        return False
    dims = _whole_axes(buffer, index)
    if dims is None:
        return False
    dtype = b.dtype_of(buffer.elem)
    predicate = kl.predicate()
    old: ir.Expr | None = None  # the current content over ``dims``
    if isinstance(content, Tile):
        if content.valid is not None and content.dims != dims:
            return False
        old = content.expr if content.dims == dims else tile_over(content, list(
            b.axis_index(d) for d in dims))
        if old is None:
            return False
    elif item.op != "=":
        return False  # an update of elements that hold nothing yet
    elif predicate is not None:
        # a partial first write (one branch of an `if`): the other elements hold nothing
        # a program may rely on, zeros stand in for them
        old = ir.Full(ir.sort_axes(dims), dtype, 0)
    if item.op == "=":
        value = b.cast(rhs, dtype)
    else:
        assert old is not None
        value = b.cast(kl.arith(item.op[:-1], old, rhs, kl.promoted(buffer.elem, item.value)),
                       dtype)
    private = set(dims) | set(buffer.lanes)
    if not set(value.axes) <= private:
        return False  # the value differs along lanes that share this buffer
    if predicate is not None:
        assert old is not None
        value = ir.Where(b.merged(predicate, value, old), dtype, predicate, value, old)
    axes = ir.sort_axes(tuple(set(value.axes) | set(dims)))
    if axes != value.axes:
        value = b.binary("+", value, ir.Full(axes, dtype, 0), dtype)
    name = kl.fresh(buffer.symbol.name)
    kl.emit(ir.Let(item.span, name, value))
    buffer.content = Tile(ir.Var(axes, dtype, name), dims, buffer.elem)
    return True


def _whole_axes(buffer: Buffer, index: list[ir.Expr]) -> tuple[ir.Axis, ...] | None:
    """The axes of ``index`` when each index walks one whole dimension of the buffer."""
    if len(index) != len(buffer.shape):
        return None
    dims = []
    for idx, extent in zip(index, buffer.shape):
        if not isinstance(idx, ir.AxisIndex) or idx.axis.extent != extent.value:
            return None
        dims.append(idx.axis)
    if len(set(dims)) != len(dims):
        return None
    return tuple(dims)


def readable(kl: KernelState, buffer: Buffer, index: list[ir.Expr],
             span: Span) -> Region | Tile:
    """What an element read of ``buffer`` at ``index`` reads from: its register tile when
    the indices are the tile's axes or walk it the same way (``tile_over``), its scratch
    otherwise (a transposing or shifted read: the tile moves to scratch here)."""
    content = buffer.content
    assert content is not None
    if isinstance(content, Tile) and not kl.apply_depth and not _own_axes(content, index) \
            and tile_over(content, index) is None:
        return scratch(kl, buffer, span)
    return content


def _own_axes(tile: Tile, index: list[ir.Expr]) -> bool:
    return all(isinstance(i, ir.AxisIndex) and i.axis is d for i, d in zip(index, tile.dims))


def tile_over(tile: Tile, index: list[ir.Expr]) -> ir.Expr | None:
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
    value = broadcast(tile.expr, ir.sort_axes(tile.dims))
    renamed = tuple(mapping[a] for a in value.axes)
    if renamed != ir.sort_axes(renamed):
        return None  # the index transposes the tile
    return ir.Relabel(renamed, value.dtype, value)


def settle(kl: KernelState, buffer: Buffer, span: Span) -> Buffer:
    """A buffer that a copy just filled: when the kernel writes its elements, it moves to
    scratch storage here, where its content is made. (Moving it at the first element
    write would move it on one path only when that write sits in a nested loop or
    branch, and a loop would not refill it on its next trip.)"""
    if not buffer.owned and element_written(kl, buffer.symbol):
        buffer.scope = kl.scopes[-1]  # the content is (re)made in this block
        scratch(kl, buffer, span)
    return buffer


def scratch(kl: KernelState, buffer: Buffer, span: Span) -> Region:
    """The buffer's scratch region, allocated (and filled with its current content) on
    first use. The content moves where it was made: in the current block, or -- for a
    register tile made in an enclosing block -- at the end of that block so far, that is
    just before the loop or branch being lowered (on every path)."""
    if buffer.owned:
        assert isinstance(buffer.content, Region)
        return buffer.content
    content = buffer.content
    if content is None or kl.scopes[-1] is buffer.scope:
        return _move(kl, buffer, span)
    scope = _made_in_enclosing_block(kl, buffer)
    if scope is None:
        raise unsupported(span, f"accessing single elements of '{buffer.symbol.name}' that "
                                "its register tile cannot give, inside a loop or branch, when "
                                "its content was made outside it",
                          "access the buffer in the block where it is filled, or fill it "
                          "element by element as well")
    # (the loop depth only decides barriers around loads and stores of tensors a loop
    # reads; the scratch region is new)
    with kl.emitting_into(scope, kl.loop_depth):
        return _move(kl, buffer, span)


def _made_in_enclosing_block(kl: KernelState, buffer: Buffer) -> list[ir.Stmt] | None:
    """The enclosing statement list the buffer's register tile was made in, when a
    statement appended to it now can read the tile (so that the tile can be stored at its
    end); None otherwise."""
    content = buffer.content
    made = buffer.scope
    if buffer.made is not None and buffer.made[0] is content:
        made = buffer.made[1]  # (an mma.store in a loop inside the declaring block)
    depth = next((d for d, scope in enumerate(kl.scopes) if scope is made), None)
    if depth is None or not isinstance(content, Tile):
        return None
    exprs = [content.expr] + ([content.valid] if content.valid is not None else [])
    return made if all(kl.readable_at(depth, e) for e in exprs) else None


def store_into(kl: KernelState, buffer: Buffer, offsets: Sequence[ir.Expr],
               extents: tuple[Sym, ...], tile: Tile, span: Span,
               ends: Sequence[tuple[int, ir.Expr]] = ()) -> None:
    """Store a tile into part of a buffer that lives in scratch memory (at ``offsets``,
    ``extents``; masked past the run-time ``ends``, as ``Region.limited`` takes them),
    between barriers: the readers of the old content first, the new content's after."""
    region = buffer.content
    assert buffer.owned and isinstance(region, Region)
    kl.emit(ir.Barrier(span))
    store_tile(kl, region.limited(ends).shifted(list(offsets), extents), tile, span)
    kl.emit(ir.Barrier(span))


def _move(kl: KernelState, buffer: Buffer, span: Span) -> Region:
    """Allocate the buffer's scratch region here and store its current content into it."""
    content = buffer.content
    region = _allocate(kl, buffer, span)
    if content is not None:
        if isinstance(content, Region):
            dims = tuple(kl.tile_axis(e, buffer.symbol.name, span)
                         for e in buffer.shape)
            content = load_tile(kl, content, dims, span, f"{buffer.symbol.name}_tile")
        saved, kl.predicates = kl.predicates, []  # the whole content moves, on every lane
        try:
            store_tile(kl, region, content, span)
        finally:
            kl.predicates = saved
        kl.emit(ir.Barrier(span))
    buffer.content = region
    buffer.owned = True
    return region


def _allocate(kl: KernelState, buffer: Buffer, span: Span) -> Region:
    """A host allocation of [programs, lanes..., shape...] and this program's slice."""
    elem = buffer.elem
    if elem.torch is None:  # pragma: no cover - declarations reject these earlier
        raise unsupported(span, f"scratch memory of '{elem.name}'")
    programs = Sym(1)
    for bound in kl.grid:
        programs = programs * bound
    lanes = tuple(Sym(axis.extent) for axis in buffer.lanes)
    dims = (programs, *lanes, *buffer.shape)
    name = kl.fl.fresh_tensor(f"{buffer.symbol.name}_scratch")
    tensor = TensorRef(name, elem, dims)
    kl.fl.tensors[name] = tensor
    kl.fl.body.append(ir.HostAlloc(name, dims, elem.torch, None, span))
    kl.use_tensor(tensor)
    kl.scratch_used = True
    _log.debug("kernel %s: '%s' lives in per-program scratch memory (global), with barriers "
               "around its writes: slower than registers", kl.name, buffer.symbol.name)
    kl.emit(ir.Comment(span, f"'{buffer.symbol.name}' lives in per-program scratch memory "
                             "(written element by element; slower than registers)"))
    origin = (kl.program_index, *(b.axis_index(a) for a in buffer.lanes),
              *(b.const(0) for _ in buffer.shape))
    first = 1 + len(lanes)
    # (the program index is below the program count by construction: no mask for it)
    limits = ((), *((b.sym(d),) for d in dims[1:]))
    return Region(tensor, origin, buffer.shape, limits, axes=tuple(range(first, len(dims))))


def private_lanes(kl: KernelState, storage: str | None) -> tuple[ir.Axis, ...]:
    """The vector axes a buffer declared here has one copy per: a ``local`` buffer belongs
    to one thread, a ``shared`` one to the whole program."""
    return tuple(kl.active) if storage == "local" else ()

