"""Declarations and assignments (a rule family of the lowering): shared/local buffers
and arrays of them, scalar variables (per thread when mutable), assignments to names,
elements and fragment-array accumulators, ``dma.any`` and ``swap``/``rotate``."""

from __future__ import annotations

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.model import BoundedType, Symbol, SymKind
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import apply, checks, scratch
from . import build as b
from . import nodes as ir
from .dma import chosen_data
from .errors import LoweringError, unsupported
from .mma import acc_arith, acc_arith_at
from .state import KernelState, broadcast, var_names
from .tiles import store_tile
from .values import Acc, Bounded, Buffer, BufferArray, Region, Scalar, Tile, access, padding_mask


class Assignments(KernelState):
    """The declaration and assignment rules."""

    def lower_spanned_decl(self, stmt: ast.SpannedDecl) -> None:
        for sym in self.fn.decls.get(id(stmt), []):
            elem = sym.elem or dtypes.F32
            if elem.torch is None:
                raise LoweringError("CQ0214", stmt.span, elem=elem.name)
            if sym.array_dims:
                self.env[sym] = self._buffer_array(stmt, sym, elem)
                continue
            buffer = Buffer(sym, sym.shape or (), elem, scope=self.scopes[-1],
                            lanes=scratch.private_lanes(self, sym.storage))
            var = next(v for v in stmt.vars if v.name == sym.name)
            if var.init is not None:
                buffer.content = self._filled_tile(buffer, var.init)
                if scratch.element_written(self, sym):
                    scratch.scratch(self, buffer, stmt.span)  # filled, then written piecewise
            self.env[sym] = buffer

    def _buffer_array(self, stmt: ast.SpannedDecl, sym: Symbol,
                      elem: dtypes.ElemType) -> BufferArray:
        var = next(v for v in stmt.vars if v.name == sym.name)
        if var.init is not None:
            raise unsupported(var.init.span, "an initialiser on an array of buffers")
        count = 1
        for dim in sym.array_dims:
            if dim.value is None:
                raise LoweringError("CQ0704", stmt.span, extent=dim)
            count *= dim.value
        return BufferArray(sym, sym.shape or (), elem, count)

    def _filled_tile(self, buffer: Buffer, init: ast.Expr) -> Tile:
        value = self.value(init)
        if value.axes:
            raise unsupported(init.span, "a buffer initialiser that differs between threads")
        dims = self.register_axes(buffer.symbol, buffer.shape, init.span)
        dtype = b.dtype_of(buffer.elem)
        fill = value.value if isinstance(value, ir.Const) else None
        if fill is None:
            raise unsupported(init.span, "a buffer initialiser that is not a constant")
        tile = self.let(buffer.symbol.name, ir.Full(ir.sort_axes(dims), dtype, fill))
        return Tile(tile, dims, buffer.elem)

    def lower_scalar_decl(self, stmt: ast.ScalarDecl) -> None:
        for item, sym in zip(stmt.items, self.fn.decls.get(id(stmt), [])):
            elem = sym.elem or dtypes.INT
            dtype = b.dtype_of(elem)
            if item.init is None:
                value: ir.Expr = b.const(0, dtype)
            else:
                value = b.cast(self.value(item.init), dtype)
            if sym.mutable and sym in self.fl.reassigned:
                # a per-thread variable lives over the thread axes from the start, so that
                # its type stays the same when later updates depend on the thread (one
                # never assigned again keeps its own axes: uniform values stay scalars)
                name = self.fresh(sym.name)
                self._note_known(name, value)
                value = broadcast(value, tuple(self.active))
                self.emit(ir.Let(stmt.span, name, value))
                self.env[sym] = Scalar(ir.Var(value.axes, dtype, name), elem)
            else:
                self.env[sym] = Scalar(self.let(sym.name, value, stmt.span), elem)

    def lower_assign(self, stmt: ast.AssignStmt) -> None:
        declared = {s.name: s for s in self.fn.decls.get(id(stmt), [])}
        for item in stmt.items:
            self._assign(stmt, item, declared)

    def _assign(self, stmt: ast.Node, item: ast.Assign, declared: dict[str, Symbol]) -> None:
        """``item`` of the statement ``stmt`` (an assignment, or the node of an ``x++``)."""
        target = item.target
        if isinstance(target, ast.Ident):
            sym = self.fn.refs.get(id(target))
            if sym is None:
                raise unsupported(item.span, "this assignment")
            if target.name in declared and declared[target.name] is sym:
                self._declare_value(sym, item.value, stmt.span)
                return
            current = self.env.get(sym)
            if isinstance(current, Acc):
                acc_arith(self, current, item)
                return
            if isinstance(current, Scalar) and isinstance(current.expr, ir.Var):
                old = current.expr
                value = b.cast(self._compound(item.op, old, item.value, current.elem), old.dtype)
                predicate = self.predicate()
                if predicate is not None:  # lanes that do not execute keep their value
                    value = ir.Where(b.merged(predicate, value, old), old.dtype, predicate,
                                     value, old)
                if set(value.axes) - set(old.axes):
                    raise unsupported(item.span, f"giving the scalar '{target.name}' a value "
                                      "per thread when it was declared outside the threads")
                self._note_known(old.name, value)
                value = broadcast(value, old.axes)
                self.emit(ir.Let(stmt.span, old.name, value))
                return
            raise unsupported(item.span, f"assigning to '{target.name}' here")
        if isinstance(target, ast.ElemAccess):
            self._store_element(stmt, target, item)
            return
        if isinstance(target, ast.Index):  # an element of a fragment array
            acc_arith_at(self, target, item)
            return
        raise unsupported(item.span, "this assignment target")

    def _note_known(self, name: str, value: ir.Expr) -> None:
        """Remember the value of a mutable scalar while it is the same at every run of
        this point (straight-line code: no loop, no branch, no lane mask), so that event
        orders kept in such a variable are known when compiling (roles.py)."""
        for used in var_names(value) & set(self.known):
            value = b.substitute(value, used, b.const(self.known[used], value.dtype))
        if isinstance(value, ir.Const) and not self.loop_depth and not self.uncertain \
                and self.predicate() is None:
            self.known[name] = value.value
        else:
            self.known.pop(name, None)

    def update(self, target: ast.Ident, op: str, stmt: ast.Node) -> None:
        """``x++`` / ``x--`` of a mutable scalar, as its own statement (``stmt``: the node
        it is part of)."""
        one = ast.IntLit(target.span, 1, "1")
        self._assign(stmt, ast.Assign(target.span, target, "+=" if op == "++" else "-=", one),
                     {})

    def _declare_value(self, sym: Symbol, value: ast.Expr, span: Span) -> None:
        if sym.kind is SymKind.VIEW:
            self.env[sym] = self.resolve_view_read(value)
            return
        if sym.kind in (SymKind.FUTURE, SymKind.DATA) and isinstance(value, ast.SelectExpr):
            if scratch.element_written(self, sym):
                raise unsupported(span, f"writing elements of '{sym.name}', a buffer "
                                        "chosen by 'select'", "write the chosen buffer by name")
            self.env[sym] = chosen_data(self, sym, value)
            return
        info = self.fn.exprs.get(id(value))
        expr = self.value(value)
        if info is not None and isinstance(info.type, BoundedType):
            self.env[sym] = Bounded(self.let(sym.name, expr, span), info.type.bound)
        else:
            elem = sym.elem or dtypes.INT
            self.env[sym] = Scalar(self.let(sym.name, b.cast(expr, b.dtype_of(elem)), span), elem)

    def _compound(self, op: str, current: ir.Expr, value: ast.Expr, elem: dtypes.ElemType) -> ir.Expr:
        rhs = b.cast(self.value(value), current.dtype)
        if op == "=":
            return rhs
        return self.arith(op[:-1], current, rhs, elem)

    def _store_element(self, stmt: ast.Node, target: ast.ElemAccess, item: ast.Assign) -> None:
        register = self._apply_target(target)
        if register is not None:
            apply.store_element(self, register, target, item, stmt.span)
            return
        buffer = self.element_buffer(target)
        if buffer is not None:
            scratch.store_element(self, buffer, target, item, stmt.span)
            return
        region, index, elem = self.element(target)
        if isinstance(region, Tile):
            raise unsupported(target.span, "writing single elements of a register-resident buffer")
        self.fl.written.add(region.tensor.name)
        with checks.kept_lanes(self, region, index):
            rhs = self.value(item.value)
        if item.op == "=" and self._tile_store(region, index, rhs, stmt.span):
            return
        pointer, mask = access(region, index)
        if item.op == "=":
            value = b.cast(rhs, region.tensor.dtype)
        else:  # computed in the promoted type of both sides, rounded once (spec 3.6)
            current = ir.Load(pointer.axes, pointer.dtype, pointer, mask)
            wide = self.promoted(elem, item.value)
            value = b.cast(self.arith(item.op[:-1], current, rhs, wide), region.tensor.dtype)
        mask = self.guarded(b.and_(mask, padding_mask(b.merged(pointer, value))))
        self.emit(ir.Store(stmt.span, pointer, value, mask))

    def _tile_store(self, region: Region, index: list[ir.Expr], value: ir.Expr,
                    span: Span | None) -> bool:
        """``y.at(bm # i, bn # j) = v`` in a vectorised loop (an epilogue written straight
        to global memory): when each index is an offset plus its own tensor axis, in the
        axes' order, every lane writing one element, the write is one whole-tile store --
        a tensor-descriptor store where the tensor suits one, as the copy of a staged
        result tile is. Only in MMA kernels (element-wise kernels keep their pointer stores,
        measured as they are). False when it is anything else (then an element store)."""
        if not (self.masked_ifs and self.has_dot) or self.predicate() is not None:
            return False
        dims: list[ir.Axis] = []
        origin: list[ir.Expr] = []
        for idx in index:
            lin = b.linearize(idx)
            if lin is None or lin.collapsed or len(lin.axes) != 1 or lin.rest.axes:
                return False
            (axis, coef), = lin.axes.items()
            if coef != 1:
                return False
            dims.append(axis)
            origin.append(lin.rest)
        tile_axes = tuple(dims)
        if len(set(dims)) != len(dims) or tile_axes != ir.sort_axes(tile_axes) or not set(
                value.axes) <= set(dims):
            return False
        dtype = region.tensor.dtype
        tile = Tile(broadcast(b.cast(value, dtype), tile_axes), tile_axes, region.tensor.elem)
        target = region.shifted(origin, tuple(Sym(d.extent) for d in dims))
        store_tile(self, target, tile, span)
        return True

    def _apply_target(self, target: ast.ElemAccess) -> Symbol | None:
        """The accumulator or register buffer an element write inside ``apply`` replaces."""
        if not self.apply_depth or not isinstance(target.base, ast.Ident):
            return None
        sym = self.fn.refs.get(id(target.base))
        value = self.env.get(sym) if sym is not None else None
        if isinstance(value, Acc) or (isinstance(value, Buffer) and sym is not None
                                      and sym.storage == "local"
                                      and not isinstance(value.content, Region)):
            return sym
        return None

    def lower_dma_any(self, stmt: ast.DmaAny) -> None:
        """``f = dma.any;``: a name for a copy still to come (double buffering)."""
        for sym in self.fn.decls.get(id(stmt), []):
            self.env[sym] = Buffer(sym, sym.shape or (), sym.elem or dtypes.F32)

    def lower_swap(self, stmt: ast.SwapStmt) -> None:
        """``swap(a, b)`` / ``rotate(a, b, ...)``: the names exchange their copies (a takes
        b's, ..., the last takes a's). Copies are views, so nothing moves."""
        syms = self.fn.swaps.get(id(stmt))
        if not syms or (self.loop_depth and id(stmt) not in self.carried):
            raise unsupported(stmt.span, f"this '{stmt.kind}' inside a loop",
                              "the supported pattern copies into one future before the loop, "
                              "into the other inside it, and swaps them at the end")
        values = [self.env.get(sym) for sym in syms]
        for sym, value in zip(syms, values[1:] + values[:1]):
            self.env[sym] = value
        futures = [sym for sym in syms if sym.kind is SymKind.FUTURE]
        if len(futures) == len(syms):
            checks.swapped(self, futures, stmt.span)
