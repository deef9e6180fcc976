"""Views and element access (a rule family of the lowering): every view expression
(``chunkat``, ``subspan().at()``, ``.step``, ``view().from()``, ``span_as``, ``.sqz``, arrays
of buffers) resolves to one record, a ``Region`` of a global tensor, a register ``Tile`` or a
``BufferSlot`` to write (arch 3.4); ``x.at(...)`` names one element of such a record."""

from __future__ import annotations

from dataclasses import replace

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.model import BoundedTupleType, IndexItem, TupleType, ViewInfo, ViewStep
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import apply, checks, scratch
from . import build as b
from . import nodes as ir
from .errors import NeedsContiguous, unsupported
from .state import BufferSlot, KernelState, as_expr
from .values import Acc, Buffer, BufferArray, Region, TensorRef, Tile


class Views(KernelState):
    """The view and element-access rules."""

    def resolve_view(self, view: ast.Expr, write: bool = False) -> Region | Tile | BufferSlot:
        """The region (or buffer slot, or register tile) a view expression denotes."""
        if not isinstance(view, ast.View):
            raise unsupported(view.span, "this operand")
        info: ViewInfo = self.fn.views[id(view)]
        root_sym = info.root  # (a view of a view alias carries the alias's steps)
        root = self.env.get(root_sym)
        if info.array_index:
            if not isinstance(root, BufferArray):
                raise unsupported(view.span, "indexing this value as an array of buffers")
            root = self.array_element(root, info.array_index, view.span, write)
        offsets: list[ir.Expr] = []
        extents = root_sym.shape or ()
        base = root
        if isinstance(root, Region):
            extents = root.extents
        elif isinstance(root, Tile):
            extents = tuple(Sym(d.extent) for d in root.dims)
        if isinstance(root, Buffer):
            extents = root.shape
            if not write:
                if root.content is None:
                    raise unsupported(view.span, f"reading '{root_sym.name}' before anything "
                                                 "is copied or stored into it")
                base = root.content
        elif isinstance(root, TensorRef):
            base = Region.whole(self.use_tensor(root))
            extents = root.dims
        elif not isinstance(root, (Region, Tile)):
            raise unsupported(view.span, f"'{root_sym.name}' as a view")
        offsets = [b.const(0) for _ in extents]
        ends: list[tuple[int, ir.Expr]] = []  # (view dim, end offset) of runtime extents
        for step in info.steps:
            if step.kind == "span_as":
                base = self._reshaped(base, offsets, tuple(extents), step)
                offsets = [b.const(0) for _ in step.extents]
                extents = step.extents
                continue
            if step.kind == "sqz":
                if not isinstance(base, Region):
                    raise unsupported(step.span, "'.sqz' of a register-resident buffer")
                base = base.limited(ends).shifted(offsets, tuple(extents)).squeezed()
                offsets = [b.const(0) for _ in step.extents]
                extents, ends = step.extents, []
                continue
            if step.strides is not None:
                base = self._restrided(base, offsets, tuple(extents), ends, step)
                offsets = [b.const(0) for _ in step.extents]
                extents, ends = step.extents, []
                continue
            for d, (item, scale) in enumerate(zip(step.indices, step.scales)):
                offsets[d] = b.add(offsets[d], b.mul(self.index_item(item), self.sym(scale)))
            extents = step.extents
            for d, runtime in enumerate(step.dynamic):
                if runtime is not None:
                    ends.append((d, b.add(offsets[d], self.value(runtime))))
        if isinstance(base, Buffer):
            # (a copy into a runtime-sized part: the copy masks its source by ``ends``)
            return BufferSlot(base, tuple(offsets), tuple(extents), tuple(ends))
        if isinstance(base, Region):
            self.use_tensor(base.tensor)
            if base.rank != len(offsets):
                raise unsupported(view.span, "views that change the rank of their data")
            return base.limited(ends).shifted(offsets, tuple(extents))
        assert isinstance(base, Tile)
        if all(b.is_const(o, 0) for o in offsets) and all(
                e.value == self._extent_of(d) for e, d in zip(extents, base.dims)):
            return base
        if base.split and all(b.is_const(o, 0) for o in offsets) and all(
                e.value == part for e, (_, part) in zip(extents, base.split)):
            return base  # an instance's whole element of an array its parts were stored to
        split = _instance_parts(offsets, tuple(extents), base)
        if split is not None:
            return replace(base, split=split)
        raise unsupported(view.span, "a sub-view of a register-resident buffer",
                          "copy the whole buffer, or stage the data with dma.copy first")

    def _extent_of(self, axis: ir.Axis) -> int:
        """The extent a view names along ``axis`` of a register tile: one instance's rows
        along the fused rows of side-by-side instances (each names its own)."""
        fused = self.fused
        return fused.rows if fused is not None and axis is fused.axis else axis.extent

    def _restrided(self, base: object, offsets: list[ir.Expr], extents: tuple[Sym, ...],
                   ends: list[tuple[int, ir.Expr]], step: ViewStep) -> Region:
        """A step with explicit element strides, applied to the view built so far."""
        if not isinstance(base, Region):
            raise unsupported(step.span, "explicit element strides in a view of a buffer",
                              "take the strided view of a global tensor")
        if base.tensor.name in self.fl.layout.strided:  # (strides of row-major memory)
            raise NeedsContiguous(base.tensor.name)
        if ends or any(d is not None for d in step.dynamic):
            raise unsupported(step.span, "explicit element strides with a runtime extent")
        self.use_tensor(base.tensor)
        parent = base.shifted(offsets, extents)
        origin = [b.mul(self.index_item(item), self.sym(scale))
                  for item, scale in zip(step.indices, step.scales)]
        for stride in step.strides or ():
            self.use_sym(stride)
        return parent.restrided(origin, step.extents, step.strides or ())

    def _reshaped(self, base: object, offsets: list[ir.Expr], extents: tuple[Sym, ...],
                  step: ViewStep) -> Region:
        """``span_as``: the same elements in a new shape. Supported for a whole tensor
        (row-major, so any shape of the same size is a re-striding of its memory)."""
        span = step.span
        if not isinstance(base, Region):
            raise unsupported(span, "'span_as' of a register-resident buffer")
        if base.tensor.name in self.fl.layout.strided:  # (a reshape of row-major memory)
            raise NeedsContiguous(base.tensor.name)
        whole = Region.whole(base.tensor)
        if not (all(b.is_const(o, 0) for o in offsets) and base.key()[1:] == whole.key()[1:]
                and all(e.provably_eq(d) for e, d in zip(extents, base.tensor.dims))):
            raise unsupported(span, "'span_as' of part of a tensor",
                              "reshape the whole tensor, then take the part")
        return Region.whole(TensorRef(base.tensor.name, base.tensor.elem, step.extents))

    def resolve_view_read(self, view: ast.Expr) -> Region | Tile:
        result = self.resolve_view(view)
        assert not isinstance(result, BufferSlot)
        return result

    def index_item(self, item: IndexItem) -> ir.Expr:
        if item.expr is None:
            return b.const(0)
        if item.member is None:
            return self.value(item.expr)
        return self.members(item.expr)[item.member]

    def members(self, expr: ast.Expr) -> list[ir.Expr]:
        """Element values of a bounded ituple or an ituple."""
        info = self.fn.exprs.get(id(expr))
        if info is not None and isinstance(info.type, TupleType):
            return [self.sym(v) if v is not None else b.const(0) for v in info.type.values]
        if isinstance(expr, ast.Ident):
            sym = self.fn.refs.get(id(expr))
            value = self.env.get(sym) if sym is not None else None
            if isinstance(value, list):
                return [as_expr(v, expr.span) for v in value]
        raise unsupported(expr.span, "this tuple expression")

    def element(self, e: ast.ElemAccess) -> tuple[Region | Tile, list[ir.Expr], dtypes.ElemType]:
        base = e.base
        if isinstance(base, ast.Member) and base.member in ("data", "mdata"):
            base = base.obj
        if isinstance(base, ast.View) and id(base) in self.fn.views:  # `a.span_as(64).at(i)`
            view = self.resolve_view_read(base)
            view_elem = view.tensor.elem if isinstance(view, Region) else view.elem
            return view, self.region_index(view, e), view_elem
        subscripts: list[ast.Expr] = []
        while isinstance(base, ast.Index):  # `ring[s].at(i)`: an element of a buffer array
            subscripts.insert(0, base.index)
            base = base.base
        if not isinstance(base, ast.Ident):
            raise unsupported(e.span, "this element access")
        sym = self.fn.refs.get(id(base))
        value = self.env.get(sym) if sym is not None else None
        if subscripts:
            if not isinstance(value, BufferArray):
                raise unsupported(e.span, "this element access")
            value = self.array_element(value, tuple(subscripts), e.span, write=False)
        if isinstance(value, TensorRef):
            source: Region | Tile = Region.whole(self.use_tensor(value))
            elem = value.elem
        elif isinstance(value, Buffer):
            if value.content is None:
                raise unsupported(e.span, f"reading '{base.name}' before it holds data")
            index = self.element_index(e)
            return scratch.readable(self, value, index, e.span), index, value.elem
        elif isinstance(value, Acc) and sym is not None:
            source = apply.register_tile(self, sym, e.span)
            elem = value.elem
        elif isinstance(value, (Region, Tile)):
            source = value
            elem = value.tensor.elem if isinstance(value, Region) else value.elem
            if isinstance(value, Region):
                self.use_tensor(value.tensor)
        else:
            raise unsupported(e.span, "this element access")
        return source, self.region_index(source, e), elem

    def region_index(self, source: Region | Tile, e: ast.ElemAccess) -> list[ir.Expr]:
        """The indices of ``x.at(...)`` into ``source``; in debug mode a view of a tensor
        whose origin comes from data is also checked to hold the element."""
        index = self.element_index(e)
        if isinstance(source, Region):
            checks.check_element_origin(self, source, index, e)
        return index

    def element_index(self, e: ast.ElemAccess) -> list[ir.Expr]:
        """The indices of ``x.at(...)`` (checked at run time in debug mode)."""
        index = self.indices(e.indices)
        checks.check_element(self, e, index)
        return index

    def indices(self, exprs: tuple[ast.Expr, ...]) -> list[ir.Expr]:
        """Element indices, bounded ituples spread into their members."""
        index: list[ir.Expr] = []
        for expr in exprs:
            info = self.fn.exprs.get(id(expr))
            if info is not None and isinstance(info.type, (BoundedTupleType, TupleType)):
                index.extend(self.members(expr))
            else:
                index.append(self.value(expr))
        return index

    def element_buffer(self, e: ast.ElemAccess) -> Buffer | None:
        """The shared/local buffer (or future's data) ``e`` writes into, if any."""
        base = e.base
        if isinstance(base, ast.Member) and base.member in ("data", "mdata"):
            base = base.obj
        sym = self.fn.refs.get(id(base)) if isinstance(base, ast.Ident) else None
        value = self.env.get(sym) if sym is not None else None
        return value if isinstance(value, Buffer) else None

    def array_element(self, array: BufferArray, index: tuple[ast.Expr, ...], span: Span,
                      write: bool) -> Buffer:
        """The buffer ``array[index]`` names. A write starts a fresh element under the
        index's key and forgets the others (they may be the same element at run time,
        unless both indices are different constants); a read must use the key of a write."""
        values = [self.value(i) for i in index]
        key = tuple(self.canonical(v) for v in values)
        constant = all(isinstance(v, ir.Const) for v in values)
        if write:
            for other in list(array.slots):
                if not (constant and other != key and all(k[0] == "Const" for k in other)):
                    del array.slots[other]
            array.slots[key] = Buffer(array.symbol, array.shape, array.elem,
                                      index=tuple(values))
            return array.slots[key]
        found = array.slots.get(key)
        if found is None:
            raise unsupported(span, f"reading an element of '{array.symbol.name}' that cannot "
                                    "be matched with the copy that filled it",
                              "index the array with the same expression as the copy into it, "
                              "e.g. `ring[k % STAGES]` for both")
        return found


def _instance_parts(offsets: list[ir.Expr], extents: tuple[Sym, ...],
                    tile: Tile) -> tuple[tuple[tuple[ir.Axis, ...], int], ...] | None:
    """``buf.subspan(64, 64).at(wg, 0)`` of a tile the instances filled side by side: when
    each offset is instance indices times whole parts, and the parts together cover the
    tile, the per-dimension split (see ``Tile.split``); None otherwise."""
    split = []
    for offset, extent, dim in zip(offsets, extents, tile.dims):
        lin = b.linearize(offset)
        if lin is None or lin.collapsed or not b.is_const(lin.rest, 0) or extent.value is None:
            return None
        covered = extent.value
        axes = []
        for axis, coef in sorted(lin.axes.items(), key=lambda kv: kv[1]):
            if coef != covered:
                return None
            axes.append(axis)
            covered *= axis.extent
        if covered != dim.extent:
            return None
        split.append((tuple(reversed(axes)), extent.value))
    return tuple(split)
