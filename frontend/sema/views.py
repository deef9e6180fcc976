"""The view algebra (spec 5.4): shapes of ``chunkat``, ``chunk().at()``,
``subspan().step().at()``, ``view().from()``, ``span_as`` and ``sqz`` steps.

Each step is recorded as a ``ViewStep``: new extents, and per dimension an index
expression and a scale, so that the lowering computes the element offset of a view as
``sum(index * scale)`` over its steps without re-deriving any rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..source import Span
from .model import IndexItem, ViewStep
from .symbolic import Atom, Sym


@dataclass(frozen=True)
class TileArg:
    """A flattened ``chunkat``/``at`` argument: its index item and (for chunkat) the
    tiling factor, i.e. the upper bound of the argument; ``None`` factor = wildcard."""

    item: IndexItem
    factor: Sym | None
    span: Span


class ViewError(Exception):
    """A rule violation found while computing a view; carries a diagnostic code."""

    def __init__(self, code: str, span: Span, **fields: object) -> None:
        super().__init__(code)
        self.code = code
        self.span = span
        self.fields = fields


def chunkat_step(shape: tuple[Sym, ...], args: list[TileArg], span: Span) -> ViewStep:
    """``x.chunkat(a0, ...)``: factor ``#a_d``, extent ``D_d / F_d``, offset ``i_d * E_d``.

    A factor written as ``cdiv(D_d, T)`` over the same dimension tiles by ``T`` with a
    masked tail (the intended meaning; the literal ``D / cdiv(D, T)`` equals ``T``
    whenever ``T`` divides ``D``).
    """
    if len(args) != len(shape):
        raise ViewError("CQ0301", span, rank=len(shape), count=len(args))
    extents, scales, ceil = [], [], []
    for dim, (size, arg) in enumerate(zip(shape, args)):
        if arg.factor is None:
            extents.append(size)
            scales.append(Sym(0))
            ceil.append(False)
            continue
        factor = arg.factor
        if factor.value is not None and factor.value <= 0:
            raise ViewError("CQ0313", arg.span, factor=factor.value, dim=dim)
        tile = _ceil_tile(factor, size)
        if tile is not None:
            extents.append(tile)
            ceil.append(True)
        else:
            if factor.provably_le(size) is False:
                raise ViewError("CQ0302", arg.span, factor=factor, size=size, dim=dim)
            extents.append(size.floordiv(factor))
            ceil.append(False)
        scales.append(extents[-1])
    return ViewStep("chunkat", tuple(extents), tuple(a.item for a in args), tuple(scales),
                    span, tuple(ceil), tuple(a.factor for a in args))


def _ceil_tile(factor: Sym, size: Sym) -> Sym | None:
    """``T`` when ``factor`` is ``cdiv(size, T)`` (or constant-folds to the same)."""
    if len(factor.terms) == 1 and factor.const == 0:
        mono, coef = factor.terms[0]
        if coef == 1 and len(mono) == 1 and mono[0].op == "cdiv":
            atom: Atom = mono[0]
            num, tile = atom.args
            if num == size:
                return tile
    return None


def subspan_step(kind: str, shape: tuple[Sym, ...], extents: list[Sym | None],
                 step: list[Sym] | None, at: list[IndexItem] | None, span: Span) -> ViewStep:
    """``x.subspan(E...)[.step(S...)][.at(i...)]``: offset ``i_d * (S_d or E_d)``."""
    if len(extents) != len(shape):
        raise ViewError("CQ0311", span, what="subspan", expected=len(shape), actual=len(extents))
    resolved = tuple(size if e is None else e for e, size in zip(extents, shape))
    for dim, (extent, size) in enumerate(zip(resolved, shape)):
        if extent.value is not None and extent.value <= 0:
            raise ViewError("CQ0306", span, value=extent.value)
        if extent.provably_le(size) is False:
            raise ViewError("CQ0303", span, dim=dim, extent=extent, size=size)
    if step is not None and len(step) != len(shape):
        raise ViewError("CQ0311", span, what="step", expected=len(shape), actual=len(step))
    if at is not None and len(at) != len(shape):
        raise ViewError("CQ0311", span, what="at", expected=len(shape), actual=len(at))
    scales = tuple(step) if step is not None else resolved
    indices = tuple(at) if at is not None else tuple(IndexItem(None) for _ in shape)
    return ViewStep(kind, resolved, indices, scales, span, tuple(False for _ in shape))


def view_from_step(shape: tuple[Sym, ...], extents: list[Sym | None],
                   origin: list[IndexItem] | None, span: Span) -> ViewStep:
    """``x.view(E...).from(o...)``: explicit extents (``_``, None here: the whole
    dimension) and element offsets."""
    if len(extents) != len(shape):
        raise ViewError("CQ0311", span, what="view", expected=len(shape), actual=len(extents))
    if origin is not None and len(origin) != len(shape):
        raise ViewError("CQ0311", span, what="from", expected=len(shape), actual=len(origin))
    resolved = tuple(size if e is None else e for e, size in zip(extents, shape))
    for extent in resolved:
        if extent.value is not None and extent.value <= 0:
            raise ViewError("CQ0306", span, value=extent.value)
    indices = tuple(origin) if origin is not None else tuple(IndexItem(None) for _ in shape)
    return ViewStep("view", resolved, indices, tuple(Sym(1) for _ in shape), span,
                    tuple(False for _ in shape))


def span_as_step(shape: tuple[Sym, ...], new_shape: list[Sym], span: Span) -> ViewStep:
    """``x.span_as([n...])``: same elements, new shape (element counts must agree)."""
    old = _product(shape)
    new = _product(new_shape)
    if old.provably_eq(new) is False:
        from .symbolic import shape_text

        raise ViewError("CQ0308", span, src=shape_text(shape), src_count=old,
                        dst=shape_text(new_shape), dst_count=new)
    return ViewStep("span_as", tuple(new_shape), (), (), span)


def squeeze_step(shape: tuple[Sym, ...], span: Span) -> ViewStep:
    """``x.sqz()``: the same elements without the dimensions of static size 1 (a head of
    ``[1, 1, S, D]`` becomes ``[S, D]``); indices and scales are empty like span_as."""
    kept = tuple(d for d in shape if d.value != 1)
    return ViewStep("sqz", kept, (), (), span)


def _product(dims: tuple[Sym, ...] | list[Sym]) -> Sym:
    total = Sym(1)
    for d in dims:
        total = total * d
    return total

