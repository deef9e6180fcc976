"""DMA and TMA statements (spec 5.6, 5.7): copies with tails, ``.zfill``, ``transp``,
``pad``, fresh ``=> shared`` buffers, futures, ``dma.any``, ``wait``, ``swap``/``rotate``.

Copies complete when issued, so ``wait`` has nothing left to do (spec 10: erasing the
asynchrony gives the same results).

Tails: a source tile that reaches past its data reads only the elements inside it; a
destination that reaches past its data receives only those. Destination elements that
receive no source element (a tail, or a source smaller than the destination) are zero
with ``.zfill`` and with TMA; otherwise the spec leaves them undefined and the
interpreter's ``undefined`` setting decides (see ``Semantics``).
"""

from __future__ import annotations

from typing import Any

import torch

from ...frontend import syntax as ast
from ...frontend.sema.model import SymKind
from . import arith
from .errors import InterpretError, not_implemented
from .values import DataView, Future


def exec_dma(it: Any, stmt: ast.DmaStmt) -> None:
    attrs = {a.name for a in stmt.attrs}
    if "sp" in attrs:
        raise not_implemented("sparse copies ('.sp')")
    src = it.data_of(stmt.src)
    zero = stmt.engine == "tma" or "zfill" in attrs
    tile = src.read(0 if zero else it.undefined_value(src.elem))
    valid = src.valid
    if stmt.op == "transp":
        tile, valid = _transpose(it, stmt, tile, valid)
    elif stmt.op == "pad":
        tile, valid = _pad(it, stmt, tile, valid)
    dst = _destination(it, stmt, tile)
    fill = 0 if zero else it.missing_value(dst)
    deliver(tile, valid, dst, fill)
    _bind_future(it, stmt, dst)


def _transpose(it: Any, stmt: ast.DmaStmt, tile: torch.Tensor,
               valid: tuple[int, ...]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``dma.transp<p...>``: output dimension i is input dimension p_i (spec 5.6)."""
    perm = [int(it.eval(p)) for p in stmt.perm or ()]
    if sorted(perm) != list(range(tile.dim())):
        raise InterpretError(f"transpose permutation {perm} of a rank-{tile.dim()} tile")
    return tile.permute(perm).contiguous(), tuple(valid[p] for p in perm)


def _pad(it: Any, stmt: ast.DmaStmt, tile: torch.Tensor,
         valid: tuple[int, ...]) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``dma.pad<{lo}, {hi}, {mid}, v>``: dst[j] = src[j - lo] inside, v outside."""
    cfg = stmt.pad
    assert cfg is not None
    low = [int(it.eval(x)) for x in cfg.low]
    high = [int(it.eval(x)) for x in cfg.high]
    mid = [int(it.eval(x)) for x in cfg.mid]
    if any(mid):
        raise not_implemented("interior padding in 'dma.pad' (a non-zero middle list)")
    value = arith.convert(it.eval(cfg.value), arith.elem_of_dtype(tile.dtype))
    shape = [s + lo + hi for s, lo, hi in zip(tile.shape, low, high)]
    out = torch.empty(shape, dtype=tile.dtype)
    out.fill_(value.item() if isinstance(value, torch.Tensor) else value)
    inner = tuple(slice(lo, lo + s) for lo, s in zip(low, tile.shape))
    out[inner] = tile
    return out, tuple(shape)


def _destination(it: Any, stmt: ast.DmaStmt, tile: torch.Tensor) -> DataView:
    dst = stmt.dst
    if isinstance(dst, ast.StorageDest):
        # `=> shared` / `=> local`: a fresh buffer of the (transformed) source shape;
        # shared memory is per block when the copy runs in an inner parallel level
        elem = arith.elem_of_dtype(tile.dtype)

        def allocate() -> DataView:
            return DataView.allocate(tuple(tile.shape), elem, dst.storage,
                                     stmt.future or f"{dst.storage} copy", it.undefined_value(elem))

        return it.block_shared((id(stmt),), allocate) if dst.storage == "shared" else allocate()
    if isinstance(dst, ast.SelectExpr):
        chosen = it.eval(dst)
        if isinstance(chosen, Future):
            if chosen.data is None:
                raise InterpretError("the selected future holds no data")
            return chosen.data
        if isinstance(chosen, DataView):
            return chosen
        raise InterpretError("a copy into a selection that is not data")
    data: DataView = it.data_of(dst)
    return data


def deliver(tile: torch.Tensor, valid: tuple[int, ...], dst: DataView, fill: Any) -> None:
    """Write the defined ``valid`` box of ``tile`` into ``dst``; the destination elements
    it does not cover become ``fill`` (left unchanged when ``fill`` is None)."""
    if tile.dim() != len(dst.shape):
        raise InterpretError(f"a copy of rank {tile.dim()} into '{dst.name}' of rank "
                             f"{len(dst.shape)}")
    if any(s > d for s, d in zip(tile.shape, dst.shape)):
        raise InterpretError(f"a copy of a {list(tile.shape)} tile into '{dst.name}' of "
                             f"shape {list(dst.shape)}: the destination is too small")
    box = tuple(slice(0, v) for v in valid)
    if fill is None:
        dst.write(tile, limit=valid)
        return
    out = torch.empty(dst.shape, dtype=tile.dtype)
    out.fill_(fill)
    out[box] = tile[box]
    dst.write(out)


def _bind_future(it: Any, stmt: ast.DmaStmt, dst: DataView) -> None:
    if stmt.future is None:
        return
    future = Future(dst, stmt.is_async, stmt.future)
    for sym in it.fn.decls.get(id(stmt), ()):
        if sym.kind is SymKind.FUTURE:
            it.bind(sym, stmt.future, future)
            return
    # the checker records no future for a copy into `select(...)`: fill the placeholder
    # (or the future) the name denotes
    frame, key = it.key_by_name(stmt.future)
    frame.vars[key] = future


def exec_any(it: Any, stmt: ast.DmaAny) -> None:
    """``f = dma.any;``: a placeholder future for double buffering."""
    for sym in it.fn.decls.get(id(stmt), ()):
        it.bind(sym, stmt.future, Future(None, True, stmt.future))


def exec_wait(it: Any, stmt: ast.WaitStmt) -> None:
    for target in stmt.targets:
        if not isinstance(target, ast.Ident):
            raise not_implemented("waiting on events")
        sym = it.fn.refs.get(id(target))
        if sym is not None and sym.kind is SymKind.EVENT:
            raise not_implemented("waiting on events")
        value = it.eval(target)
        if not isinstance(value, Future):
            raise InterpretError(f"'{target.name}' is not a future")


def exec_swap(it: Any, stmt: ast.SwapStmt) -> None:
    """``swap(a, b)`` exchanges two names; ``rotate(a, b, c)`` moves b to a, c to b and
    a to c (the reference's left rotation). No data moves."""
    keys = [it.key_by_name(name) for name in stmt.names]
    values = [frame.vars[key] for frame, key in keys]
    rotated = values[1:] + values[:1]
    for (frame, key), value in zip(keys, rotated):
        frame.vars[key] = value
