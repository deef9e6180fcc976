"""Copies and their synchronisation: ``dma`` / ``tma`` statements, futures, ``wait``,
``swap``, events and ``trigger``.
"""

from __future__ import annotations

from .. import syntax as ast
from .check_common import (CheckerBase, ErrorType, element_count, expr_text, idents,
                           with_article)
from .model import DataType, EventType, FutureType, Level, Symbol, SymKind
from .symbolic import shape_text


_STATE = ("is_async", "assigned_depth", "elem", "shape", "storage")


class DmaChecks(CheckerBase):
    """Mixin of ``Checker``: DMA / TMA copies, futures and events."""

    def _stmt_DmaStmt(self, stmt: ast.DmaStmt) -> None:
        self._dma_modifiers(stmt)
        self._in_tma = stmt.engine == "tma"
        try:
            self._dma(stmt)
        finally:
            self._in_tma = False

    def _dma(self, stmt: ast.DmaStmt) -> None:
        src = self._view_operand(stmt.src)
        if src is None:
            if stmt.future is not None and self._lookup(stmt.future) is None:
                self._declare_poisoned(stmt.future, stmt.span)
            return
        src_type = self._dma_result_shape(stmt, src)
        dst_type = self._dma_dest(stmt, src_type)
        if stmt.engine == "tma" and dst_type is not None:
            self._tma_rules(stmt, src_type, dst_type)
        if stmt.is_async and stmt.future is None and not stmt.after:
            self._error("CQ0411", stmt.span)
        if stmt.after:
            self._check_after(stmt)
        self._note_swizzle(stmt)
        if stmt.future is not None and dst_type is not None:
            self._bind_future(stmt, dst_type)
        elif stmt.future is not None and self._lookup(stmt.future) is None:
            self._declare_poisoned(stmt.future, stmt.span)

    def _dma_modifiers(self, stmt: ast.DmaStmt) -> None:
        if stmt.op == "load" and stmt.engine == "dma":
            self._error("CQ0406", stmt.span, op="load")
        for attr in stmt.attrs:
            if attr.name == "swiz" and attr.args:
                value = self._expr(attr.args[0]).static
                if value is not None and value.value not in (32, 64, 128, 0, 1, 2, 3):
                    self._error("CQ0407", attr.span, value=value)
            if attr.name == "promote" and attr.args:
                value = self._expr(attr.args[0]).static
                if value is not None and value.value not in (64, 128, 256):
                    self._error("CQ0440", attr.span, value=value)
            if attr.name in ("evict_first", "evict_last") and not (
                    stmt.engine == "tma" and stmt.op == "load"):
                self._error("CQ0422", attr.span, attr=attr.name)
            if attr.name == "sp" and attr.args:
                pattern = [self._expr(a).static for a in attr.args]
                values = [p.value if p is not None else None for p in pattern]
                if values != [2, 4]:
                    self._error("CQ0435", attr.span,
                                pattern=":".join("?" if v is None else str(v) for v in values))

    def _bind_future(self, stmt: ast.DmaStmt, dst_type: DataType) -> None:
        existing = self._lookup(stmt.future) if stmt.future else None
        if existing is not None and existing.kind is SymKind.FUTURE and existing.mutable:
            # a `dma.any` placeholder being filled
            existing.elem, existing.shape, existing.storage = (dst_type.elem, dst_type.shape,
                                                                dst_type.storage)
            existing.is_async = stmt.is_async
            future = existing
        else:
            previous = self.scopes[-1].get(stmt.future or "")
            if previous is not None and previous.kind is SymKind.FUTURE:
                # a future is bound once per scope; only dma.any placeholders are refilled
                self._error("CQ0202", stmt.span, name=stmt.future)
            future = Symbol(stmt.future or "", SymKind.FUTURE, stmt.span, elem=dst_type.elem,
                            shape=dst_type.shape, storage=dst_type.storage,
                            is_async=stmt.is_async, decl_node=stmt,
                            decl_depth=len(self.scopes) - 1)
            self.scopes[-1][future.name] = future
        self._note_decl(stmt, future)
        future.assigned_depth = len(self.scopes) - 1
        if stmt.is_async:
            self.async_defs.setdefault(future, stmt.span)
        for waited in self.waited_in_block:
            waited.discard(future)

    def _note_swizzle(self, stmt: ast.DmaStmt) -> None:
        """Remember the swizzle a buffer was filled with, for the consumer's mma.load."""
        swiz = [a for a in stmt.attrs if a.name == "swiz"]
        if not isinstance(stmt.dst, ast.View):
            return
        info = self._fn().views.get(id(stmt.dst))
        if info is None:
            return
        value = 128
        if swiz and swiz[0].args:
            info_arg = self._fn().exprs.get(id(swiz[0].args[0]))
            known = info_arg.static if info_arg is not None else None
            # (a swizzle known only when the kernel runs is not compared: 0, as unswizzled)
            value = (known.value or 0) if known is not None else 128
        self.swizzles[info.root] = value if swiz else 0

    def _tma_rules(self, stmt: ast.DmaStmt, src: DataType, dst: DataType) -> None:
        """TMA moves tiles between global and shared memory, issued by one thread of the
        block or of each warpgroup (spec 5.7): warp and thread indices cannot pick a tile."""
        if not 1 <= len(src.shape) <= 5:
            self._error("CQ0437", stmt.span, rank=len(src.shape))
        pair = (src.storage, dst.storage)
        legal = {("global", "shared")} if stmt.op == "load" else {("global", "shared"),
                                                                   ("shared", "global")}
        if pair not in legal:
            self._error("CQ0414", stmt.span, src=src.storage, dst=dst.storage)
        elif self.engine is not None and 1 <= len(src.shape) <= 5:  # (else: CQ0437)
            tile = dst if dst.storage == "shared" else src
            self.engine.tme(stmt.span, tile.shape, tile.elem, f"tma.{stmt.op}",
                            self._swizzle_of(stmt))
        for operand in (stmt.src, stmt.dst):
            for ident in idents(operand):
                sym = self._fn().refs.get(id(ident))
                if sym is not None and sym.kind is SymKind.BOUNDED and sym.level in (
                        Level.GROUP, Level.THREAD):
                    self._error("CQ0421", ident.span, name=sym.name, level=sym.level.value)
                    return

    def _swizzle_of(self, stmt: ast.DmaStmt) -> int | None:
        """The ``.swiz<N>`` of a copy in bytes (128 when written without N); None when the
        copy is not swizzled or N is not a known constant."""
        swiz = [a for a in stmt.attrs if a.name == "swiz"]
        if not swiz:
            return None
        if not swiz[0].args:
            return 128
        static = self._fn().exprs.get(id(swiz[0].args[0]))
        return static.static.value if static and static.static is not None else None

    def _dma_result_shape(self, stmt: ast.DmaStmt, src: DataType) -> DataType:
        """The shape a DMA produces from its source: transposed or padded for those ops."""
        if (stmt.op == "pad" and stmt.pad is None) or (stmt.op == "transp" and stmt.perm is None):
            # `dma.pad` without `<{low}, {high}, {mid}, value>`, `dma.transp` without `<perm>`
            what = "pad" if stmt.op == "pad" else "transpose"
            self._error("CQ0408", stmt.span, what=what, actual=0, rank=len(src.shape))
            return src
        if stmt.op == "transp" and stmt.perm is not None:
            perm = [self._static_int(p, "a transpose index").value for p in stmt.perm]
            rank = len(src.shape)
            if len(perm) != rank:
                self._error("CQ0408", stmt.span, what="transpose", actual=len(perm), rank=rank)
            elif sorted(p for p in perm if p is not None) != list(range(rank)):
                self._error("CQ0409", stmt.span, perm=", ".join(map(str, perm)), last=rank - 1)
            else:
                return DataType(src.elem, tuple(src.shape[p] for p in perm if p is not None),
                                src.storage)
        if stmt.op == "pad" and stmt.pad is not None:
            rank = len(src.shape)
            parts = [stmt.pad.low, stmt.pad.high, stmt.pad.mid]
            for part in parts:
                if len(part) != rank:
                    self._error("CQ0408", stmt.span, what="pad", actual=len(part), rank=rank)
                    return src
            self._expr(stmt.pad.value)
            shape = list(src.shape)
            for part in parts:
                for d, e in enumerate(part):
                    shape[d] = shape[d] + self._static_int(e, "a pad amount")
            return DataType(src.elem, tuple(shape), src.storage)
        return src

    def _dma_dest(self, stmt: ast.DmaStmt, src: DataType) -> DataType | None:
        dst = stmt.dst
        if isinstance(dst, ast.StorageDest):
            if dst.storage in ("shared", "local") and not self.ctx.on_device:
                self._error("CQ0405", dst.span, storage=dst.storage)
            if dst.storage == "shared":
                self._note_shared(stmt.future or "a copy", src.elem, src.shape, stmt.span)
            return DataType(src.elem, src.shape, dst.storage)
        if isinstance(dst, ast.SelectExpr):
            info = self._expr(dst)  # `=> select(k, bufA, bufB)`: one of same-typed buffers
            return info.type if isinstance(info.type, DataType) else None
        dst_type = self._view_operand(dst)
        if dst_type is None:
            return None
        if dst_type.elem != src.elem:
            self._error("CQ0401", stmt.span, src=src.elem.name, dst=dst_type.elem.name)
            return dst_type
        if len(dst_type.shape) != len(src.shape):
            self._error("CQ0402", stmt.span, src=len(src.shape), dst=len(dst_type.shape))
            return dst_type
        self._check_dma_shapes(stmt, src, dst_type)
        return dst_type

    def _ragged(self, operand: ast.Expr) -> bool:
        """Whether a view has an extent known only at run time (``subspan(rows, 128)``,
        ``rows`` read at run time): its shape holds the bound, the rest is masked."""
        info = self._fn().views.get(id(operand))
        return info is not None and any(d is not None for step in info.steps
                                        for d in step.dynamic)

    def _check_dma_shapes(self, stmt: ast.DmaStmt, src: DataType, dst: DataType) -> None:
        """Equal shapes copy totally; a smaller source may fill part of a bigger
        destination (the rest is zero with .zfill); symbolic mismatches are tested at
        call time."""
        zfill = any(a.name == "zfill" for a in stmt.attrs)
        equal = [a.provably_eq(b) for a, b in zip(src.shape, dst.shape)]
        if all(e is True for e in equal):
            if zfill and stmt.op == "copy" and not self._ragged(stmt.src) \
                    and not self._ragged(stmt.dst):
                self._error("CQ0425", stmt.span, shape=shape_text(src.shape))
            return
        fits = [a.provably_le(b) for a, b in zip(src.shape, dst.shape)]
        if all(f is not False for f in fits):
            for d, (a, b, f) in enumerate(zip(src.shape, dst.shape, fits)):
                if f is None:
                    self._runtime_check(a, "<=", b, f"the copy's source dimension {d} must fit "
                                        "its destination", stmt.span)
            if not zfill and stmt.engine == "dma" and all(f is True for f in fits):
                self._error("CQ0426", stmt.span, src=shape_text(src.shape),
                            dst=shape_text(dst.shape))
            return
        src_count = element_count(src.shape)
        dst_count = element_count(dst.shape)
        if src_count is not None and dst_count is not None and src_count > dst_count:
            self._error("CQ0404", stmt.span, src=src_count, dst=dst_count)
        self._error("CQ0403", stmt.span, src=shape_text(src.shape), dst=shape_text(dst.shape))

    def _stmt_DmaAny(self, stmt: ast.DmaAny) -> None:
        sym = Symbol(stmt.future, SymKind.FUTURE, stmt.span, mutable=True, decl_node=stmt,
                     decl_depth=len(self.scopes) - 1)
        self._declare(sym)
        self._note_decl(stmt, sym)
        self.placeholders[sym] = False

    def _stmt_WaitStmt(self, stmt: ast.WaitStmt) -> None:
        for target in stmt.targets:
            if not isinstance(target, ast.Ident):
                self._sync_target(target)
                continue
            sym = self._resolve(target)
            if sym is None:
                continue
            if sym.kind is SymKind.EVENT or sym.poisoned:
                continue
            if sym.kind is not SymKind.FUTURE:
                self._error("CQ0429", target.span, name=target.name, kind=with_article(sym.kind.value))
                continue
            if not sym.is_async and not sym.mutable:
                self._error("CQ0412", target.span, name=target.name)
                continue
            if sym in self.waited_in_block[-1]:
                self._error("CQ0417", target.span, name=target.name)
            self.waited_in_block[-1].add(sym)
            self.waited.add(sym)

    def _stmt_SwapStmt(self, stmt: ast.SwapStmt) -> None:
        """``swap(a, b)`` / ``rotate(a, b, ...)`` exchange future names. Placeholders
        (``dma.any`` not yet filled) go with anything; filled futures must come from
        copies in the same scope and agree on being asynchronous."""
        wanted = "2" if stmt.kind == "swap" else "2 or more"
        if (stmt.kind == "swap" and len(stmt.names) != 2) or len(stmt.names) < 2:
            self._error("CQ0428", stmt.span, kind=stmt.kind, expected=wanted,
                        actual=len(stmt.names))
            return
        syms = []
        for name in stmt.names:
            sym = self._lookup(name)
            if sym is None:
                self._error("CQ0201", stmt.span, name=name)
                return
            syms.append(sym)
        self.swap_groups.append(set(syms))
        self._fn().swaps[id(stmt)] = list(syms)
        first = syms[0]
        for name, sym in zip(stmt.names[1:], syms[1:]):
            depths = (self._scope_depth(stmt.names[0]), self._scope_depth(name))
            reason = _swap_problem(first, sym, stmt.names[0], name, depths)
            if reason:
                self._error("CQ0419", stmt.span, a=stmt.names[0], b=name, reason=reason)
                return  # a rejected swap exchanges nothing
        # the names now hold one another's futures (a <- b, ..., last <- a): the futures'
        # state moves, the names (and what later uses refer to) stay
        states = [_future_state(sym) for sym in syms]
        for sym, state in zip(syms, states[1:] + states[:1]):
            _set_future_state(sym, state)

    def _stmt_EventDecl(self, stmt: ast.EventDecl) -> None:
        for var in stmt.vars:
            dims = tuple(self._static_int(d, "an array dimension") for d in var.array_dims)
            sym = Symbol(var.name, SymKind.EVENT, var.span, storage=stmt.storage or "shared",
                         array_dims=dims, decl_node=stmt)
            self._declare(sym)
            self._note_decl(stmt, sym)

    def _sync_target(self, target: ast.Expr) -> Symbol | None:
        """A wait/trigger target: a future, an event, an event-array element or
        ``e.at(order)``."""
        info = self._expr(target)
        if isinstance(info.type, ErrorType):
            return None
        if isinstance(info.type, EventType):
            return info.type.symbol
        if isinstance(info.type, FutureType):
            return info.type.symbol
        self._error("CQ0429", target.span, name=expr_text(target), kind=info.type.describe())
        return None

    def _stmt_TriggerStmt(self, stmt: ast.TriggerStmt) -> None:
        for target in stmt.targets:
            self._sync_target(target)
            if stmt.after and len(stmt.after) > 1 and isinstance(target, ast.ElemAccess) and \
                    any(isinstance(i, ast.Postfix) for i in target.indices):
                self._error("CQ0434", target.span)
        for item in stmt.after:
            if not isinstance(item, ast.Ident):
                continue
            sym = self._lookup(item.name)
            if sym is None:
                self._error("CQ0201", item.span, name=item.name)
                continue
            reason = _trigger_after_problem(sym, self.waited)
            if reason:
                self._error("CQ0423", item.span, name=item.name, reason=reason)
            self.waited.add(sym)

    def _check_after(self, stmt: ast.DmaStmt) -> None:
        """``dma.copy ... after g``: ``g`` names a copy made before (spec 5.6)."""
        sym = self._lookup(stmt.after or "")
        if sym is None:
            self._error("CQ0201", stmt.span, name=stmt.after)
        elif sym.kind is not SymKind.FUTURE:
            self._error("CQ0204", stmt.span, name=stmt.after, actual=with_article(sym.kind.value),
                        expected="a DMA future")


def _swap_problem(a: Symbol, b: Symbol, a_name: str, b_name: str,
                  depths: tuple[int, int]) -> str | None:
    """Why two names cannot exchange their futures; ``depths`` are the scopes the *names*
    were declared in (a swap exchanges futures, the names stay where they are)."""
    if a.kind is not b.kind:
        return f"'{a_name}' is {with_article(a.kind.value)}, '{b_name}' {with_article(b.kind.value)}"
    if a.kind is not SymKind.FUTURE or a.assigned_depth < 0 or b.assigned_depth < 0:
        return None  # placeholders take any future
    if depths[0] != depths[1]:
        return "they are declared in different scopes"
    if a.is_async != b.is_async:
        return "one is asynchronous and the other is not"
    if a.shape is not None and b.shape is not None and (
            len(a.shape) != len(b.shape) or a.elem != b.elem or
            any(x.provably_eq(y) is False for x, y in zip(a.shape, b.shape))):
        return "their data have different types"
    return None


def _trigger_after_problem(sym: Symbol, waited: set[Symbol]) -> str | None:
    """Why a future cannot complete an event through `trigger ... after`, if it cannot."""
    node = sym.decl_node
    if sym.kind is not SymKind.FUTURE or not isinstance(node, ast.DmaStmt):
        return "only asynchronous TMA copies into shared memory complete events by themselves"
    if sym in waited:
        return "it was already waited"
    if node.engine != "tma" or not sym.is_async or sym.storage != "shared":
        return "only asynchronous TMA copies into shared memory complete events by themselves"
    return None


def _future_state(sym: Symbol) -> tuple[object, ...]:
    return tuple(getattr(sym, name) for name in _STATE)


def _set_future_state(sym: Symbol, state: tuple[object, ...]) -> None:
    for name, value in zip(_STATE, state):
        setattr(sym, name, value)
