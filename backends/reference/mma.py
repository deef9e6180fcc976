"""The four-step MMA (spec 5.8): fill, load, ``mma.LA.LB``, store; ``.scale`` fused and
``mma.scale`` standalone (two accumulators), ``mc += bias``.

Layout contract (spec 5.8 table): ``row`` means the M (A) or N (B) index is the first
dimension of the tile, ``col`` that K is. ``row.col``: C += A·B with B [K, N];
``row.row``: C += A·Bᵀ with B [N, K]; ``col.*``: A is [K, M].

Arithmetic: the products of one ``mma`` statement are summed in f32 (f64 for f64, int64
for 8-bit integers) and added to the accumulator, which is then rounded to its element
type -- an f16 accumulator rounds once per ``mma`` statement, as the tensor cores do
per instruction. f32 operands are rounded to tf32 first unless ``f32_precision="ieee"``
(spec 3.1: the reference treats f32 MMA operands as tf32).
"""

from __future__ import annotations

from typing import Any

import torch

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.dtypes import ElemType
from ...frontend.sema.model import Symbol, SymKind
from . import arith
from .errors import InterpretError, not_implemented
from .values import DataView, Frag, FragArray, Future, PrivateCell


def frag_symbol(it: Any, expr: ast.Expr) -> tuple[Symbol, str]:
    base = expr
    while isinstance(base, ast.Index):
        base = base.base
    if isinstance(base, ast.View) and not base.ops:
        base = base.base
    if not isinstance(base, ast.Ident):
        raise InterpretError("an MMA fragment must be a name")
    sym = it.fn.refs.get(id(base))
    if sym is None or sym.kind is not SymKind.FRAG:
        raise InterpretError(f"'{base.name}' is not an MMA fragment")
    return sym, base.name


def frag(it: Any, expr: ast.Expr) -> Frag:
    """The fragment ``expr`` names: ``mc`` or an element ``mc[i][j]`` of an array."""
    sym, name = frag_symbol(it, expr)
    value = it.lookup(sym, name)
    indices: list[int] = []
    while isinstance(expr, ast.Index):
        indices.insert(0, int(it.eval(expr.index)))
        expr = expr.base
    if isinstance(value, FragArray):
        if len(indices) != len(value.dims):
            raise InterpretError(f"'{name}' is an array of fragments: select one element")
        value = value.at(indices)
    if not isinstance(value, Frag):
        raise InterpretError(f"'{name}' is not an MMA fragment")
    return value


def acc_shape(it: Any, sym: Symbol) -> tuple[int, ...] | None:
    if sym.shape is None:
        return None
    return tuple(it.sym_value(d) for d in sym.shape)


def exec_fill(it: Any, stmt: ast.MmaFill) -> None:
    """``mc = mma.fill[.T] v`` / ``mma.fill mc, v``: an accumulator of the type the
    checker settled on (``.T``, else A's element type at the first mma)."""
    sym: Symbol = it.fn.frags[id(stmt)]
    elem = sym.elem or dtypes.F32
    fill = arith.convert(it.eval(stmt.value), elem)
    shape = acc_shape(it, sym)
    value = None if shape is None else _full(shape, fill, elem)
    if stmt.declares:
        name = stmt.target.name if isinstance(stmt.target, ast.Ident) else sym.name
        it.define(sym, name, PrivateCell(Frag(elem, value, fill), name))
        return
    acc = frag(it, stmt.target)
    acc.value, acc.fill, acc.part, acc.pending = value, fill, None, False


def exec_frag_decl(it: Any, stmt: ast.FragDecl) -> None:
    """``frag[.T] mc {v};`` / ``frag[.T] mc[2][3] {v};``: accumulators filled with ``v``."""
    sym: Symbol = it.fn.frags[id(stmt)]
    elem = sym.elem or dtypes.F32
    fill = arith.convert(it.eval(stmt.value), elem)
    shape = acc_shape(it, sym)

    def one() -> Frag:
        return Frag(elem, None if shape is None else _full(shape, fill, elem), fill)

    value: Frag | FragArray = one()
    if sym.array_dims:
        dims = tuple(it.sym_value(d) for d in sym.array_dims)
        count = 1
        for d in dims:
            count *= d
        value = FragArray(dims, [one() for _ in range(count)])
    it.define(sym, stmt.name, PrivateCell(value, stmt.name))


def _full(shape: tuple[int, ...], fill: Any, elem: ElemType) -> torch.Tensor:
    value = fill.item() if isinstance(fill, torch.Tensor) else fill
    return torch.full(shape, value, dtype=torch.float64 if elem.is_float else torch.int64).to(
        arith.torch_dtype(elem))


def exec_load(it: Any, stmt: ast.MmaLoad) -> None:
    """``ma = mma.load view``: the tile as it is in memory (nothing transposed); also
    ``mc = mma.load view`` for an accumulator and ``mma.load view, frag``. ``.async``
    loads complete at once."""
    data: DataView = it.data_of(stmt.src)
    tile = data.read(it.undefined_value(data.elem))
    sym = it.fn.frags.get(id(stmt))
    if not stmt.declares and sym is not None and sym.kind is SymKind.DATA:
        dst: DataView = it.data_of(stmt.target)  # a `frag T [M, K] x` register tile
        dst.write(_convert_tile(tile, dst.elem), None)
        return
    if not stmt.declares:
        target = frag(it, stmt.target)
        target.value = tile.to(arith.torch_dtype(target.elem))
        return
    assert sym is not None
    name = stmt.target.name if isinstance(stmt.target, ast.Ident) else sym.name
    if sym.frag_role == "acc":  # an accumulator (re)loaded from memory: C input
        elem = sym.elem or data.elem
        value = tile.to(arith.torch_dtype(elem))
        if it.owner(sym, name) is None:
            it.define(sym, name, PrivateCell(Frag(elem, value), name))
            return
        target = it.lookup(sym, name)
        target.value, target.part, target.pending = value, None, False
        return
    it.bind(sym, name, Frag(data.elem, tile))


def operand(it: Any, expr: ast.Expr) -> tuple[torch.Tensor, ElemType]:
    """An MMA operand: a loaded fragment or a view (the shared-memory operand form)."""
    if isinstance(expr, ast.View) and not expr.ops and isinstance(expr.base, ast.Ident):
        sym = it.fn.refs.get(id(expr.base))
        if sym is not None and sym.kind is SymKind.FRAG:
            f = frag(it, expr)
            if f.value is None:
                raise InterpretError(f"the fragment '{expr.base.name}' holds no tile")
            return f.value, f.elem
    data = it.data_of(expr)
    return data.read(it.undefined_value(data.elem)), data.elem


def exec_mma(it: Any, stmt: ast.MmaExec) -> None:
    acc = frag(it, stmt.acc)
    a, a_elem = operand(it, stmt.a)
    b, b_elem = operand(it, stmt.b)
    a_mk = a if stmt.layout_a == "row" else a.T  # row: A is [M, K]; col: [K, M]
    if stmt.kind == "sp":
        if not stmt.extra:
            raise not_implemented("sparse MMA without a metadata operand")
        meta, _ = operand(it, stmt.extra[0])
        a_mk = decompress_2_4(a_mk, meta)
    b_kn = b.T if stmt.layout_b == "row" else b  # row: B is [N, K]; col: [K, N]
    if a_mk.shape[1] != b_kn.shape[0]:
        raise InterpretError(f"MMA operands of shapes {list(a.shape)} and {list(b.shape)} "
                             f"do not agree on K for mma.{stmt.layout_a}.{stmt.layout_b}")
    product, compute = _product(it, a_mk, b_kn, a_elem, b_elem, acc.elem)
    if stmt.kind == "scale":
        sa, sb = stmt.extra
        product = product * _row_scales(it, sa, product.shape[0], compute) * \
            arith.as_tensor(it.eval(sb), dtypes.F32).to(compute)
    _accumulate(it, acc, product, compute, into_part=_has_scale_points(it, stmt.acc))
    if stmt.future is not None:
        for sym in it.fn.decls.get(id(stmt), ()):
            if sym.kind is SymKind.FUTURE:
                it.bind(sym, stmt.future, Future(None, True, stmt.future))


def decompress_2_4(packed: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
    """The dense ``[M, K]`` A of a 2:4 sparse MMA (spec 5.8): for each row and group ``g``
    of 4 dense columns, the kept positions ``i0 < i1`` are the nibble ``i0 | i1 << 2``
    of byte ``g // 2`` of the row's metadata (even groups in the low nibble), and
    ``packed[m, 2g + t] = A[m, 4g + i_t]``."""
    m, half = packed.shape
    groups = half // 2
    if half % 2 or meta.shape[0] != m or meta.shape[1] * 2 < groups:
        raise InterpretError(f"sparse MMA: packed A {list(packed.shape)} and metadata "
                             f"{list(meta.shape)} do not fit (expected [M, K/8] bytes)")
    g = torch.arange(groups)
    nibbles = (meta.to(torch.int64)[:, g // 2] >> (4 * (g % 2))) & 0xF  # [M, groups]
    positions = torch.stack([nibbles & 3, (nibbles >> 2) & 3], dim=-1)  # [M, groups, 2]
    columns = (4 * g).reshape(1, groups, 1) + positions
    # moved as bit patterns: torch has no CPU scatter for fp8
    bits = _SAME_SIZE_INT[packed.element_size()]
    dense = torch.zeros(m, 4 * groups, dtype=bits)
    dense.scatter_(1, columns.reshape(m, -1), packed.contiguous().view(bits).reshape(m, -1))
    return dense.view(packed.dtype)


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _product(it: Any, a: torch.Tensor, b: torch.Tensor, a_elem: ElemType, b_elem: ElemType,
             acc: ElemType) -> tuple[torch.Tensor, torch.dtype]:
    if acc.is_int:
        return a.to(torch.int64) @ b.to(torch.int64), torch.int64
    compute = torch.float64 if acc.name == "f64" else torch.float32
    a, b = a.to(compute), b.to(compute)
    if compute == torch.float32 and it.options.f32_precision == "tf32":
        a = _tf32(a) if a_elem.name in ("f32", "tf32") else a
        b = _tf32(b) if b_elem.name in ("f32", "tf32") else b
    return a @ b, compute


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round f32 values to tf32 (10 mantissa bits), to nearest even."""
    bits = x.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0xFFF + lsb) & ~0x1FFF
    finite = torch.isfinite(x)
    return torch.where(finite, rounded.view(torch.float32), x)


def _row_scales(it: Any, expr: ast.Expr, m: int, compute: torch.dtype) -> torch.Tensor:
    """A ``[M, 1]`` or ``[1, M]`` view of per-row scales, as a column to broadcast."""
    data: DataView = it.data_of(expr)
    values = data.read(None).to(compute).reshape(-1)
    if values.numel() != m:
        raise InterpretError(f"MMA scale '{data.name}' has {values.numel()} values for {m} rows")
    return values.reshape(m, 1)


def _has_scale_points(it: Any, acc_expr: ast.Expr) -> bool:
    sym, _ = frag_symbol(it, acc_expr)
    return sym in it.scaled_frags


def _accumulate(it: Any, acc: Frag, product: torch.Tensor, compute: torch.dtype,
                into_part: bool) -> None:
    dtype = arith.torch_dtype(acc.elem)
    if acc.value is None:
        acc.value = _full(tuple(product.shape), acc.fill, acc.elem)
    if tuple(acc.value.shape) != tuple(product.shape):
        raise InterpretError(f"an MMA of shape {list(product.shape)} into an accumulator of "
                             f"shape {list(acc.value.shape)}")
    if into_part:  # mma.scale follows: collect raw products separately
        if acc.part is None:
            acc.part = torch.zeros(product.shape, dtype=dtype)
        acc.part = (acc.part.to(compute) + product).to(dtype)
        acc.pending = True
        return
    acc.value = (acc.value.to(compute) + product).to(dtype)


def exec_scale(it: Any, stmt: ast.MmaScale) -> None:
    """``mma.scale mc, sa, sb``: the products since the previous scale point (or the
    fill), times ``sa[m] * sb``, are added to the running result (spec 5.8)."""
    acc = frag(it, stmt.frag)
    if acc.value is None:
        raise InterpretError("mma.scale of an accumulator no mma has updated")
    if acc.part is None:
        return
    compute = torch.float64 if acc.elem.name == "f64" else torch.float32
    scaled = acc.part.to(compute) * _row_scales(it, stmt.scale_a, acc.part.shape[0], compute) * \
        arith.as_tensor(it.eval(stmt.scale_b), dtypes.F32).to(compute)
    acc.value = (acc.value.to(compute) + scaled).to(acc.value.dtype)
    acc.part = None
    acc.pending = False


def exec_store(it: Any, stmt: ast.MmaStore) -> None:
    """``mma.store[.transp|.mask] mc, dst[, r[, c]]``: values converted to the
    destination's element type; ``.transp`` writes ``dst[n, m] = mc[m, n]``; ``.mask``
    only rows < r (and columns < c); a smaller destination drops the rest."""
    acc = frag(it, stmt.frag)
    if acc.value is None:
        raise InterpretError("mma.store of an accumulator that holds no values")
    if acc.pending:
        raise InterpretError("mma.store of an accumulator with products not yet scaled by "
                             "mma.scale (unspecified, spec 5.8)")
    dst: DataView = it.data_of(stmt.dst)
    value = acc.value.T if stmt.modifier == "transp" else acc.value
    limit = None
    if stmt.modifier == "mask":
        bounds = [int(it.eval(x)) for x in stmt.mask]
        limit = tuple(bounds + [value.shape[1]] * (2 - len(bounds)))
    dst.write(_convert_tile(value, dst.elem), limit)


def _convert_tile(value: arith.Value, elem: ElemType) -> torch.Tensor:
    out = arith.convert(value, elem)
    assert isinstance(out, torch.Tensor)
    return out


def frag_arith(it: Any, acc: Frag, item: ast.Assign) -> None:
    """``mc += bias``: element-wise with a scalar, in the promoted type, converted back."""
    if acc.value is None:
        raise InterpretError("arithmetic on an accumulator before its first mma")
    scalar = it.eval(item.value)
    elem = arith.promote(acc.elem, it.elem_of(item.value))
    result = arith.binary(item.op[:-1], acc.value, scalar, elem)
    acc.value = _convert_tile(result, acc.elem)
