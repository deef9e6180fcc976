"""The four-step MMA as one ``tl.dot`` over the whole block tile (arch 3.5).

``mma.LA.LB c, a, b`` runs once per warp or warpgroup instance. Its operand views are
affine in the instance indices: when the A tile of instance ``p`` starts at row
``p * Em`` (and B's at ``q * En``) the union over all instances is one contiguous
``[#p * Em, K]`` tile, so all instances together compute one dot of the fused shape. A
K-slice loop whose index ``w`` selects columns ``w * Ek`` of both operands is collapsed
the same way into one dot over ``n * Ek`` columns. Anything else gets CQ0703 explaining
which index breaks the pattern.

Around that core: accumulators start from a fill, from memory (``mc = mma.load view``,
C input) or from a ``frag`` declaration (one accumulator per element of a fragment array);
``.scale`` multiplies each product by per-row and scalar scales, and ``mma.scale`` folds a
raw partial sum into the result (spec 5.8, two accumulators); register tiles (a filled
``frag`` tile, another accumulator) enter the dot as they are (RS mode); u8 operands are
shifted to s8 with exact corrections, since ``tl.dot`` multiplies signed bytes only; the
packed A of a 2:4 sparse MMA (``.sp``) is decompressed into a dense tile first (``sparse``).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ...frontend import syntax as ast
from ...frontend.sema import dtypes
from ...frontend.sema.model import Symbol
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from . import scratch, sparse
from .errors import LoweringError, static_extent, unsupported
from .state import BufferSlot, KernelState, broadcast, iter_stmts
from .tiles import load_operand, load_tile, staging_scope, store_tile, widen_bf16_on_cpu
from .values import (Acc, AccLayout, Buffer, FragArray, Operand, Region, Tile, access,
                     padding_mask)


DOT_MIN = 16  # tl.dot needs every dimension >= 16: smaller MMA tiles (m8n8k4) are padded


def lower_fill(kl: KernelState, stmt: ast.MmaFill) -> None:
    sym = kl.fn.frags[id(stmt)]
    fill = _fill_value(kl, stmt.value)
    acc = _acc(kl, sym, fill, stmt.target)
    acc.fill = fill
    _start(kl, acc, stmt.span, with_value=True)


def _fill_value(kl: KernelState, expr: ast.Expr) -> float | int:
    fill = kl.value(expr)
    if not isinstance(fill, ir.Const):
        raise unsupported(expr.span, "an accumulator fill value that is not a constant")
    return fill.value


def lower_frag_decl(kl: KernelState, stmt: ast.FragDecl) -> None:
    """``frag[.T] mc {v};`` is ``mc = mma.fill[.T] v;``; ``frag mc[2][3] {v};`` reserves
    the initialisation of each element here, made when the element is first used."""
    sym = kl.fn.frags[id(stmt)]
    fill = _fill_value(kl, stmt.value)
    if not sym.array_dims:
        _start(kl, _acc(kl, sym, fill, None), stmt.span, with_value=True)
        return
    dims = [d.value or 1 for d in sym.array_dims]
    per_element = 2 if sym in _scaled_symbols(kl) else 1
    slots: dict[tuple[int, ...], list[tuple[list[ir.Stmt], int]]] = {}
    for index in itertools.product(*(range(d) for d in dims)):
        slots[index] = []
        for _ in range(per_element):
            kl.body.append(ir.Comment(stmt.span, f"{sym.name}{list(index)}: not used"))
            slots[index].append((kl.body, len(kl.body) - 1))
    kl.env[sym] = FragArray(sym, fill, slots)


def _acc(kl: KernelState, sym: Symbol, fill: float | int, expr: ast.Expr | None) -> Acc:
    """The accumulator ``expr`` names (``sym``, or an element of the array ``sym``),
    created at its first fill or load."""
    current = kl.env.get(sym)
    if isinstance(current, FragArray):
        assert expr is not None
        return _element(kl, current, expr)
    if not isinstance(current, Acc):
        current = _new_acc(kl, sym, fill, sym.name)
        kl.env[sym] = current
    return current


def _new_acc(kl: KernelState, sym: Symbol, fill: float | int, base: str) -> Acc:
    acc = Acc(sym, kl.fresh(base), sym.elem or dtypes.F32, fill)
    if sym in _scaled_symbols(kl):
        acc.part = kl.fresh(f"{base}_part")
    return acc


def _named_acc(kl: KernelState, sym: Symbol, expr: ast.Expr) -> Acc | None:
    """The accumulator an MMA, store or scale statement names, if it has one."""
    current = kl.env.get(sym)
    if isinstance(current, FragArray):
        return _element(kl, current, expr)
    return current if isinstance(current, Acc) else None


def _element(kl: KernelState, array: FragArray, expr: ast.Expr) -> Acc:
    """``mc[i][j]``: constant indices name distinct accumulators; one runtime index that
    stays the same through the kernel (scalar parameters) may select the element instead,
    when it is the only way the array is indexed."""
    indices: list[ast.Expr] = []
    while isinstance(expr, ast.Index):
        indices.insert(0, expr.index)
        expr = expr.base
    values = [kl.value(i) for i in indices]
    constants = [v for v in values if isinstance(v, ir.Const)]
    dynamic = len(constants) != len(values)
    if dynamic:
        if any(not _kernel_invariant(kl, v) for v in values):
            raise unsupported(indices[0].span, "a fragment selected by an index that changes "
                                               "within the kernel",
                              "index fragment arrays with constants or scalar parameters")
        key: object = tuple(b.key(v) for v in values)
        slot = tuple(0 for _ in values)
    else:
        slot = tuple(int(v.value) for v in constants)
        key = slot
    if array.dynamic is not None and (array.dynamic != dynamic or (dynamic and key not in
                                                                   array.elements)):
        raise unsupported(indices[0].span, "a fragment array indexed both by constants and by "
                                           "a runtime value (or by two runtime values)")
    array.dynamic = dynamic
    acc = array.elements.get(key)
    if acc is None:
        if slot not in array.slots:
            raise unsupported(indices[0].span, "an index outside the fragment array")
        sym = array.symbol
        acc = _new_acc(kl, sym, array.fill, f"{sym.name}_{'_'.join(map(str, slot))}")
        names = [(acc.name, b.dtype_of(acc.elem), array.fill)]
        if acc.part is not None:
            names.append((acc.part, _part_dtype(acc), 0))
        for (body, index), (name, dtype, value) in zip(array.slots[slot], names):
            body[index] = ir.Comment(body[index].span, f"{name}: accumulator (shape from its "
                                                       "first mma)")
            acc.pending.append((body, index, name, dtype, value))
        array.elements[key] = acc
    return acc


def _kernel_invariant(kl: KernelState, e: ir.Expr) -> bool:
    """Whether ``e`` only reads scalar parameters of the kernel (one value throughout)."""
    if isinstance(e, ir.Var):
        return e.name in kl.params
    if e.axes or isinstance(e, (ir.Load, ir.Call)):
        return False
    return all(_kernel_invariant(kl, child) for child in b.children(e))


def _scaled_symbols(kl: KernelState) -> set[Symbol]:
    """Accumulators that some ``mma.scale`` scales: they keep two tiles (spec 5.8)."""
    found = set()
    for stmt in iter_stmts(kl.fn.node.body):
        if isinstance(stmt, ast.MmaScale) and id(stmt) in kl.fn.frags:
            found.add(kl.fn.frags[id(stmt)])
    return found


def _start(kl: KernelState, acc: Acc, span: Span, with_value: bool) -> None:
    """(Re)initialise the accumulator to its fill value (``with_value``) and its raw partial
    products to zero; before the first mma fixes the shape, placeholders stand in."""
    inits = [(acc.name, b.dtype_of(acc.elem), acc.fill)] if with_value else []
    if acc.part is not None:
        inits.append((acc.part, _part_dtype(acc), 0))
    for name, dtype, value in inits:
        if acc.layout is not None:
            kl.emit(ir.Let(span, name, ir.Full((acc.layout.m, acc.layout.n), dtype, value)))
        else:
            kl.body.append(ir.Comment(span, f"{name}: accumulator (shape from its first mma)"))
            acc.pending.append((kl.body, len(kl.body) - 1, name, dtype, value))


def _part_dtype(acc: Acc) -> ir.DType:
    """Raw products waiting for ``mma.scale`` are summed in f32 (f64, s32 alike)."""
    if acc.elem.is_int:
        return ir.DType.I32
    return ir.DType.F64 if acc.elem.name == "f64" else ir.DType.F32


def lower_load(kl: KernelState, stmt: ast.MmaLoad) -> None:
    sym = kl.fn.frags.get(id(stmt))
    if sym is None:
        raise unsupported(stmt.span, "this 'mma.load'")
    if sym.frag_role == "acc":
        _load_accumulator(kl, stmt, sym)
        return
    source = kl.resolve_view_read(stmt.src)
    tile = kl.env.get(sym)
    if isinstance(tile, Buffer):  # `mma.load view, x;` into a `frag T [M, K] x` tile
        tile.content = source.clipped(tile.shape, True) if isinstance(source, Region) else source
        return
    kl.env[sym] = Operand(source, sym.elem or dtypes.F16)


def _load_accumulator(kl: KernelState, stmt: ast.MmaLoad, sym: Symbol) -> None:
    """``mc = mma.load out.chunkat(...)``: the accumulator starts from memory (C input).
    The instances' views must sit side by side as their MMA tiles will, so the fused
    accumulator is one tile load; its layout is fixed here rather than at the first mma."""
    source = kl.resolve_view_read(stmt.src)
    if isinstance(source, Tile):
        raise unsupported(stmt.src.span, "an accumulator loaded from a register-resident buffer",
                          "load it from the global or shared data it was copied from")
    acc = _acc(kl, sym, 0, stmt.target)
    row_t, col_t = source.axis_of(0), source.axis_of(1)
    em, en = _static(source.extents[0], stmt.src), _static(source.extents[1], stmt.src)
    lin_row = _linear(kl, source.origin[row_t], stmt.src)
    lin_col = _linear(kl, source.origin[col_t], stmt.src)
    if lin_row.collapsed or lin_col.collapsed:
        raise _fail(stmt.src, "a collapsed K loop selects the accumulator tile")
    m_parts, m_total, fused = _fuse(kl, lin_row, em, stmt.src, "M")
    n_parts, n_total, _ = _fuse(kl, lin_col, en, stmt.src, "N")
    layout = _layout(kl, acc, m_parts, n_parts, em, en, m_total, n_total, stmt, fused)
    region = replace(source, origin=_replace(source.origin, {row_t: lin_row.rest,
                                                             col_t: lin_col.rest}),
                     extents=(Sym(m_total), Sym(n_total)), fill=0, filled=True)
    if kl.loop_depth:  # the previous iteration may have stored this tile from other threads
        kl.emit(ir.Barrier(stmt.span))
        kl.read_back.add(source.tensor.name)
    tile = load_tile(kl, region, (layout.m, layout.n), stmt.span, f"{acc.name}_in")
    kl.emit(ir.Let(stmt.span, acc.name, b.cast(tile.expr, b.dtype_of(acc.elem))))
    _start(kl, acc, stmt.span, with_value=False)


def _operand(kl: KernelState, expr: ast.Expr) -> Region | Tile:
    if isinstance(expr, ast.View) and not expr.ops and isinstance(expr.base, ast.Ident):
        sym = kl.fn.refs.get(id(expr.base))
        value = kl.env.get(sym) if sym is not None else None
        if isinstance(value, Operand):
            source = value.source
        elif isinstance(value, Acc):
            source = _accumulator_tile(value, expr)
        elif isinstance(value, (Region, Tile)):
            source = value  # a named view (`ma = buf.chunkat(_, k);`), resolved when named
        else:
            source = kl.resolve_view_read(expr)
    else:
        source = kl.resolve_view_read(expr)
    return source


def _accumulator_tile(acc: Acc, node: ast.Expr) -> Tile:
    """An accumulator read as the operand of another MMA (register A, as in P·V)."""
    layout = acc.layout
    if layout is None:
        raise unsupported(node.span, "an accumulator that no MMA updated used as an operand")
    if layout.m_parts or layout.n_parts:
        raise _fail(node, "this accumulator is split between instances, and each instance "
                          "would multiply only its own part")
    # (fused rows of side-by-side instances are checked as a register operand's rows)
    dims = (layout.m, layout.n)
    return Tile(ir.Var(dims, b.dtype_of(acc.elem), acc.name), dims, acc.elem)


def lower_exec(kl: KernelState, stmt: ast.MmaExec) -> None:
    if stmt.kind not in ("plain", "scale", "sp"):
        raise unsupported(stmt.span, f"'mma.{stmt.layout_a}.{stmt.layout_b}.{stmt.kind}'")
    acc = _named_acc(kl, kl.fn.frags[id(stmt)], stmt.acc)
    if acc is None:
        raise unsupported(stmt.acc.span, "an accumulator that was not filled in this kernel")
    a = _operand(kl, stmt.a)
    bb = _operand(kl, stmt.b)
    a_m, a_k = (0, 1) if stmt.layout_a == "row" else (1, 0)
    b_n, b_k = (0, 1) if stmt.layout_b == "row" else (1, 0)
    sparse_ = stmt.kind == "sp"
    packed = sparse.packed_region(a, stmt.a, "operand") if sparse_ else None
    if packed is not None:  # 2:4 sparse: A is packed, half of K (spec 5.8)
        a = packed
    em, ek = _static(_extent(a, a_m), stmt.a), _static(_extent(a, a_k), stmt.a)
    ek = 2 * ek if sparse_ else ek
    en = _static(_extent(bb, b_n), stmt.b)
    lin_am, lin_ak = _origin(kl, a, a_m, stmt.a), _origin(kl, a, a_k, stmt.a)
    lin_bn, lin_bk = _origin(kl, bb, b_n, stmt.b), _origin(kl, bb, b_k, stmt.b)
    for lin, what, node in ((lin_am, "M", stmt.a), (lin_bn, "N", stmt.b)):
        if lin.collapsed:
            raise _fail(node, f"the loop index of a collapsed K loop selects {what} here")
    for lin, node in ((lin_ak, stmt.a), (lin_bk, stmt.b)):
        if lin.axes or lin.groups:
            raise _fail(node, "a parallel index selects the K dimension of this operand")
    shared = set(lin_am.axes) & set(lin_bn.axes)
    if shared:
        raise _fail(stmt.b, "the same parallel index selects rows of A and columns of B")
    k_total = _collapse_k(kl, sparse.dense_k(lin_ak) if sparse_ else lin_ak, lin_bk, ek, stmt)
    em = _register_rows(kl, a, a_m, a_k, stmt.a, lin_am, em)
    _register_rows(kl, bb, -1, -1, stmt.b, lin_bn, en)
    m_parts, m_total, fused = _fuse(kl, lin_am, em, stmt.a, "M")
    n_parts, n_total, _ = _fuse(kl, lin_bn, en, stmt.b, "N")
    layout = _layout(kl, acc, m_parts, n_parts, em, en, m_total, n_total, stmt, fused)
    # tl.dot needs K >= 32 for one-byte operands (int8, fp8) and >= 16 otherwise
    a_elem = a.elem if isinstance(a, Tile) else a.tensor.elem
    k_min = 32 if a_elem.bits == 8 else DOT_MIN
    k_axis = kl.axis(object(), k_total, "k", k_min)
    a_dims = (layout.m, k_axis) if a_m == 0 else (k_axis, layout.m)
    b_dims = (layout.n, k_axis) if b_n == 0 else (k_axis, layout.n)
    # the fused operand tiles: every instance's slice together, masked elements read as 0
    if packed is not None:
        meta = sparse.packed_region(_operand(kl, stmt.extra[0]), stmt.extra[0], "metadata")
        a_tile = sparse.dense_operand(kl, packed, meta, a_m, lin_am, lin_ak, lin_bk, layout.m,
                                      k_axis, stmt)
    else:
        a_tile = _operand_tile(kl, a, {a_m: lin_am.rest, a_k: lin_ak.rest}, a_dims, stmt.a,
                               "a")
    b_tile = _operand_tile(kl, bb, {b_n: lin_bn.rest, b_k: lin_bk.rest}, b_dims, stmt.b, "b")
    kl.has_dot = True
    acc_bytes = layout.m.size * layout.n.size * max(1, acc.elem.bits // 8)
    kl.dot_bytes = max(kl.dot_bytes, acc_bytes)
    precision = None
    if a_elem.name in ("f32", "tf32"):
        precision = kl.fl.options.f32_precision
    axes = (layout.m, layout.n)
    a_expr, b_expr, correction = _signed_bytes(kl, a_tile.expr, b_tile.expr, k_axis)
    # with mma.scale later, products collect in the raw partial sum until the scale point
    target, dtype = (acc.part, _part_dtype(acc)) if acc.part else (acc.name, b.dtype_of(acc.elem))
    current = ir.Var(axes, dtype, target)
    if stmt.kind == "scale":  # acc += (A·B)[m, n] * sa[m] * sb, in f32
        factor = _scale_factor(kl, stmt.extra[0], stmt.extra[1], layout)
        wide = _part_dtype(acc)
        dot: ir.Expr = ir.Dot(axes, wide, a_expr, b_expr, ir.Full(axes, wide, 0),
                              layout.m, layout.n, k_axis, precision)
        value = b.cast(b.add(b.cast(current, wide), b.mul(dot, factor)), dtype)
    else:
        value = ir.Dot(axes, dtype, a_expr, b_expr, current, layout.m, layout.n, k_axis,
                       precision)
        if correction is not None:
            value = b.add(value, correction)
    kl.emit(ir.Let(stmt.span, target, value))


def _signed_bytes(kl: KernelState, a: ir.Expr, bb: ir.Expr,
                  k: ir.Axis) -> tuple[ir.Expr, ir.Expr, ir.Expr | None]:
    """``tl.dot`` multiplies signed bytes only. A u8 operand X is X' + 128 with
    X' = X - 128 in int8, and exactly (in int32)
    A·B = A'·B' + 128·sum_k A'[m, k] (when B is u8) + 128·sum_k B[k, n] (when A is u8);
    K padding (0 in both operands) adds nothing to the right-hand side."""
    if ir.DType.U8 not in (a.dtype, bb.dtype):
        return a, bb, None
    a_s = _to_signed(kl, a, "a_s8")
    b_s = _to_signed(kl, bb, "b_s8")
    correction: ir.Expr | None = None
    for unsigned, other in ((bb, a_s), (a, bb)):
        if unsigned.dtype is ir.DType.U8:
            term = b.mul(b.const(128), _k_sum(other, k))
            correction = term if correction is None else b.add(correction, term)
    return a_s, b_s, correction


def _to_signed(kl: KernelState, x: ir.Expr, base: str) -> ir.Expr:
    if x.dtype is not ir.DType.U8:
        return x
    shifted = b.binary("-", b.cast(x, ir.DType.I32), b.const(128))
    return kl.let(base, b.cast(shifted, ir.DType.I8))


def _k_sum(x: ir.Expr, k: ir.Axis) -> ir.Expr:
    axes = tuple(a for a in x.axes if a is not k)
    return ir.Reduce(axes, ir.DType.I32, "sum", b.cast(x, ir.DType.I32), k)


def lower_scale(kl: KernelState, stmt: ast.MmaScale) -> None:
    """``mma.scale mc, sa, sb``: the raw products since the last scale point, times
    ``sa[m] * sb``, join the running result; the raw sum starts again from zero."""
    acc = _named_acc(kl, kl.fn.frags[id(stmt)], stmt.frag)
    if acc is None or acc.layout is None or acc.part is None:
        raise unsupported(stmt.span, "'mma.scale' of an accumulator that no MMA in this "
                                     "kernel updated")
    axes = (acc.layout.m, acc.layout.n)
    factor = _scale_factor(kl, stmt.scale_a, stmt.scale_b, acc.layout)
    wide = _part_dtype(acc)
    dtype = b.dtype_of(acc.elem)
    scaled = b.mul(ir.Var(axes, wide, acc.part), factor)
    kl.emit(ir.Let(stmt.span, acc.name,
                   b.cast(b.add(b.cast(ir.Var(axes, dtype, acc.name), wide), scaled), dtype)))
    _start(kl, acc, stmt.span, with_value=False)


def _scale_factor(kl: KernelState, sa: ast.Expr, sb: ast.Expr, layout: AccLayout) -> ir.Expr:
    """``sa[m] * sb`` over the accumulator rows: ``sa`` a ``[M, 1]`` or ``[1, M]`` view of
    per-row scales (each instance's rows where its tile sits), ``sb`` one scalar. A scale
    that changes along a collapsed K loop stops the collapse (CQ0703)."""
    region = kl.resolve_view_read(sa)
    if isinstance(region, Tile):
        raise unsupported(sa.span, "MMA scales held in a register-resident buffer",
                          "pass a view of the global or staged scales")
    rows = 1 if region.extents[0] == Sym(1) and region.extents[1] != Sym(1) else 0
    row_t, other_t = region.axis_of(rows), region.axis_of(1 - rows)
    lin = _linear(kl, region.origin[row_t], sa)
    other = _linear(kl, region.origin[other_t], sa)
    if lin.collapsed or other.has_leaves():
        raise _fail(sa, "the scales change along the K slices of one MMA")
    _unfuse(kl, lin, layout.m_parts, layout.tile_m, sa, "rows", layout.fused)
    origin = _replace(region.origin, {row_t: lin.rest})
    index: list[ir.Expr] = [b.const(0), b.const(0)]
    index[rows] = b.axis_index(layout.m)
    pointer, mask = access(replace(region, origin=origin), index)
    mask = b.and_(mask, padding_mask((layout.m,)))
    kl.use_tensor(region.tensor)
    row_scales = ir.Load((layout.m,), region.tensor.dtype, pointer, mask, 0)
    scalar = kl.value(sb)
    leaves = b.linearize(scalar)
    if leaves is None or leaves.has_leaves():
        raise _fail(sb, "the scalar scale differs between instances or K slices")
    return b.mul(b.cast(row_scales, ir.DType.F32), b.cast(scalar, ir.DType.F32))


def _extent(source: Region | Tile, dim: int) -> Sym:
    return Sym(source.dims[dim].extent) if isinstance(source, Tile) else source.extents[dim]


def _origin(kl: KernelState, source: Region | Tile, dim: int, node: ast.Expr) -> b.Linear:
    """Where an operand starts along ``dim``, split into instance and loop leaves; a
    register tile is whole and the same for every instance."""
    if isinstance(source, Tile):
        return b.Linear({}, {}, b.const(0))
    return _linear(kl, source.origin_of(dim), node)


def _register_rows(kl: KernelState, source: Region | Tile, m: int, k: int, node: ast.Expr,
                   lin: b.Linear, extent: int) -> int:
    """An operand's tile height along ``m`` (-1: an operand with no M dimension, B). A
    register tile laid along the fused rows of side-by-side instances is one instance's
    rows per instance, like a view the instance index selects (``lin`` records that as a
    group leaf); the fused rows anywhere else would mix instances."""
    fused = kl.fused
    if fused is None or not isinstance(source, Tile) or fused.axis not in source.dims:
        return extent
    if m < 0 or source.dims[m] is not fused.axis or source.dims[k] is fused.axis:
        raise _fail(node, "the rows of warpgroup instances lowered side by side would mix "
                          "in this MMA")
    lin.groups[(fused.axis, fused.rows)] = fused.rows
    return fused.rows


def _operand_tile(kl: KernelState, source: Region | Tile, rest: dict[int, ir.Expr],
                  dims: tuple[ir.Axis, ir.Axis], node: ast.Expr, base: str) -> Tile:
    """The operand as a tile over the dot's axes ``dims``: a view is loaded (all instances'
    slices together, from their common origin ``rest`` per view dimension), a register
    tile is taken as it is (RS-mode MMA)."""
    if isinstance(source, Tile):
        return _register_operand(kl, source, dims, node, base)
    extents = tuple(Sym(d.extent) for d in dims)
    origin = _replace(source.origin, {source.axis_of(d): r for d, r in rest.items()})
    region = replace(source, origin=origin, extents=extents, fill=0, filled=True)
    scope = staging_scope(kl, region)
    if scope is None:
        tile = load_operand(kl, region, dims, node.span, base)
        if tile.expr.__class__ is not ir.Relabel:  # (a tile loaded again takes no stage)
            kl.stage_bytes += _tile_bytes(tile, region)  # (a stage of the loop's pipeline)
        return tile
    # loaded once where it was staged (before the loop), kept in registers
    key = (id(scope), region.key(), tuple(id(d) for d in dims))
    if key not in kl.hoisted:
        with kl.emitting_into(scope, region.staged.loop_depth if region.staged else 0):
            tile = load_tile(kl, region, dims, node.span, base)
            widen_bf16_on_cpu(kl, tile.expr)
        kl.hoisted[key] = tile
        kl.resident_bytes += _tile_bytes(tile, region)
    return kl.hoisted[key]


def _register_operand(kl: KernelState, tile: Tile, dims: tuple[ir.Axis, ir.Axis],
                      node: ast.Expr, base: str) -> Tile:
    """A register tile (``frag f16 [M, K] a {1.0f}``, a computed buffer) as a dot operand:
    the same values laid along the dot's axes. Its padding must match the dot's, and lanes
    past its extent along K must not add anything."""
    kl.chained_dot = True
    if set(tile.expr.axes) - set(tile.dims) or tile.split:
        raise unsupported(node.span, "an MMA operand held in registers that differs between "
                                     "instances")
    for have, want in zip(tile.dims, dims):
        if have.size != want.size or have.extent != want.extent:
            raise _fail(node, f"the register operand's extent {have.extent} is padded to "
                              f"{have.size}, the dot needs {want.size}")
    value = broadcast(tile.expr, ir.sort_axes(tile.dims))
    padding = padding_mask(tile.dims)
    if padding is not None:
        value = ir.Where(value.axes, value.dtype, padding, value, b.cast(b.const(0), value.dtype))
    mapping = dict(zip(tile.dims, dims))
    relabelled: ir.Expr = ir.Relabel(tuple(mapping[a] for a in value.axes), value.dtype, value)
    name = kl.fresh(base)
    kl.emit(ir.Let(node.span, name, relabelled))
    var = ir.Var(relabelled.axes, relabelled.dtype, name)
    widen_bf16_on_cpu(kl, var)
    return Tile(var, dims, tile.elem)


def _tile_bytes(tile: Tile, region: Region) -> int:
    count = 1
    for axis in tile.dims:
        count *= axis.size
    return count * max(1, region.tensor.elem.bits // 8)


def _static(extent: Sym, node: ast.Node) -> int:
    return static_extent(extent, node.span)


def _linear(kl: KernelState, expr: ir.Expr, node: ast.Expr) -> b.Linear:
    """``expr`` split into leaves (with group leaves inside side-by-side instances)."""
    lin = b.linearize(expr, groups=kl.fused is not None)
    if lin is None:
        raise _fail(node, "its offset is not an affine function of the parallel and loop "
                          "indices")
    return lin


def _fail(node: ast.Node, reason: str) -> LoweringError:
    return LoweringError("CQ0703", node.span, reason=reason)


def _collapse_k(kl: KernelState, lin_ak: b.Linear, lin_bk: b.Linear, ek: int,
                stmt: ast.MmaExec) -> int:
    """K extent after merging collapsed K-slice loops (each must step both operands by
    whole slices, in mixed radix)."""
    if set(lin_ak.collapsed) != set(lin_bk.collapsed):
        raise _fail(stmt, "a collapsed K loop moves one operand along K but not the other")
    if kl.collapsing - set(lin_ak.collapsed):  # (then each trip adds the same product)
        raise _fail(stmt, "a loop around this MMA does not move its operands along K")
    total = ek
    for name, (coef, extent) in sorted(lin_ak.collapsed.items(), key=lambda kv: kv[1][0]):
        if coef != total or lin_bk.collapsed[name][0] != total:
            raise _fail(stmt, "the K-slice loop does not step both operands by whole slices")
        total *= extent
    return total


def _fuse(kl: KernelState, lin: b.Linear, tile: int, node: ast.Expr,
          what: str) -> tuple[tuple[ir.Axis, ...], int, bool]:
    """Vector axes merged into the M (or N) dimension, outermost first, and its extent;
    or the fused row axis of side-by-side instances, when each instance's slice starts at
    its own rows (True last)."""
    if lin.groups:
        rows = kl.fused
        if what != "M" or rows is None or lin.axes or tile != rows.rows or \
                lin.groups != {(rows.axis, rows.rows): rows.rows}:
            raise _fail(node, f"the instance index selects {what} here other than by whole "
                              "slices of rows of one tile")
        return (), rows.axis.extent, True
    parts = []
    total = tile
    for axis, coef in sorted(lin.axes.items(), key=lambda kv: kv[1]):
        if coef != total:
            raise _fail(node, f"parallel index '{axis.name[3:]}' moves this operand by {coef} "
                              f"along {what}, not by the {total} the tiles need to fit "
                              "side by side")
        parts.append(axis)
        total *= axis.extent
    return tuple(reversed(parts)), total, False


def _layout(kl: KernelState, acc: Acc, m_parts: tuple[ir.Axis, ...],
            n_parts: tuple[ir.Axis, ...], em: int, en: int, m_total: int, n_total: int,
            stmt: ast.Node, fused: bool = False) -> AccLayout:
    layout = acc.layout
    if layout is None:
        m = kl.fused.axis if fused and kl.fused else kl.axis(object(), m_total, "m", DOT_MIN)
        n = kl.axis(object(), n_total, "n", DOT_MIN)
        layout = AccLayout(m, n, m_parts, n_parts, em, en, fused)
        acc.layout = layout
        for body, index, name, dtype, value in acc.pending:
            body[index] = ir.Let(body[index].span, name, ir.Full((m, n), dtype, value))
        acc.pending.clear()
        return layout
    if (layout.m_parts, layout.n_parts, layout.tile_m, layout.tile_n, layout.fused) != (
            m_parts, n_parts, em, en, fused):
        raise _fail(stmt, "this MMA splits the accumulator differently from an earlier one")
    return layout


def start_layout(kl: KernelState, acc: Acc, span: Span) -> AccLayout:
    """The layout of an accumulator read element-wise before its first MMA (``apply``
    at the top of a loop whose MMA comes later): one instance's tile of the shape the
    checker found. An MMA that would split it differently fails later."""
    shape = acc.symbol.shape
    if shape is None or len(shape) != 2:
        raise unsupported(span, "an accumulator whose shape no MMA gives")
    m, n = (static_extent(d, span) for d in shape)
    decl = acc.symbol.decl_node
    assert decl is not None  # (its mma.fill or frag declaration made the accumulator)
    rows = kl.fused
    if rows is not None and acc.symbol in rows.locals and m == rows.rows:
        # an accumulator of each side-by-side instance: its rows lie along the fused axis
        return _layout(kl, acc, (), (), m, n, rows.axis.extent, n, decl, True)
    return _layout(kl, acc, (), (), m, n, m, n, decl)


def _replace(origin: tuple[ir.Expr, ...], new: dict[int, ir.Expr]) -> tuple[ir.Expr, ...]:
    return tuple(new.get(d, o) for d, o in enumerate(origin))


def _dims2(first: int, outer: int, k: int) -> tuple[Sym, Sym]:
    return (Sym(outer), Sym(k)) if first == 0 else (Sym(k), Sym(outer))


def lower_store(kl: KernelState, stmt: ast.MmaStore) -> None:
    acc = _named_acc(kl, kl.fn.frags[id(stmt)], stmt.frag)
    if acc is None or acc.layout is None:
        raise unsupported(stmt.span, "storing an accumulator that no MMA in this kernel updated")
    layout = acc.layout
    transposed = stmt.modifier == "transp"
    row, col = (1, 0) if transposed else (0, 1)
    target = kl.resolve_view(stmt.dst, write=True)
    if isinstance(target, Tile):
        raise unsupported(stmt.dst.span, "storing into a register-resident buffer twice")
    if isinstance(target, BufferSlot) and target.buffer.index is not None and (
            layout.m_parts or layout.n_parts or layout.fused):
        _store_to_elements(kl, stmt, acc, target, transposed)
        return
    if isinstance(target, BufferSlot):
        origin, row_t, col_t = target.offsets, row, col
    else:
        origin, row_t, col_t = target.origin, target.axis_of(row), target.axis_of(col)
    lin_row = _linear(kl, origin[row_t], stmt.dst)
    lin_col = _linear(kl, origin[col_t], stmt.dst)
    _unfuse(kl, lin_row, layout.m_parts, layout.tile_m, stmt.dst, "rows", layout.fused)
    _unfuse(kl, lin_col, layout.n_parts, layout.tile_n, stmt.dst, "columns")
    dims = (layout.n, layout.m) if transposed else (layout.m, layout.n)
    dst_elem = target.buffer.elem if isinstance(target, BufferSlot) else target.tensor.elem
    tile = _converted(kl, acc, dst_elem, dims, stmt.span)
    new_origin = _replace(origin, {row_t: lin_row.rest, col_t: lin_col.rest})
    if isinstance(target, BufferSlot):
        _store_to_buffer(kl, target, tile, new_origin, stmt)
        return
    extents = tuple(Sym(d.extent) for d in dims)
    if stmt.modifier == "mask":
        tile = replace(tile, valid=_row_col_guard(kl, stmt, layout))
    store_tile(kl, replace(target, origin=new_origin, extents=extents), tile, stmt.span)


def _converted(kl: KernelState, acc: Acc, elem: dtypes.ElemType, dims: tuple[ir.Axis, ...],
               span: Span) -> Tile:
    """The accumulator converted to the destination's element type, as a tile."""
    assert acc.layout is not None
    axes = (acc.layout.m, acc.layout.n)
    name = kl.fresh(f"{acc.name}_out")
    kl.emit(ir.Let(span, name, b.cast(ir.Var(axes, b.dtype_of(acc.elem), acc.name),
                                      b.dtype_of(elem))))
    return Tile(ir.Var(axes, b.dtype_of(elem), name), dims, elem)


def _store_to_elements(kl: KernelState, stmt: ast.MmaStore, acc: Acc, slot: BufferSlot,
                       transposed: bool) -> None:
    """``mma.store mc, out_s[g0];``: each instance stores its tile into its own element of
    an array of buffers. The elements together hold the fused accumulator: the element
    keeps the whole tile, marked as split between the instances (``Tile.split``), so that a
    later copy of ``out_s[g0]`` stores every instance's part at once."""
    layout = acc.layout
    assert layout is not None
    if layout.fused:
        raise unsupported(stmt.dst.span, "storing the rows of warpgroup instances lowered "
                                         "side by side into elements of an array of buffers")
    parts = [(layout.m_parts, layout.tile_m), (layout.n_parts, layout.tile_n)]
    if transposed:
        parts.reverse()
    whole = all(b.is_const(o, 0) for o in slot.offsets) and all(
        s.value == extent for s, (_, extent) in zip(slot.buffer.shape, parts))
    if not whole:
        raise unsupported(stmt.dst.span, "an mma.store that fills only part of an element of "
                                         "an array of buffers")
    index = slot.buffer.index or ()
    if not _one_element_each(index, layout.m_parts + layout.n_parts):
        raise _fail(stmt.dst, "the array index does not give every instance its own element")
    dims = (layout.n, layout.m) if transposed else (layout.m, layout.n)
    tile = _converted(kl, acc, slot.buffer.elem, dims, stmt.span)
    slot.buffer.content = replace(tile, split=tuple(parts))


def _one_element_each(index: tuple[ir.Expr, ...], parts: tuple[ir.Axis, ...]) -> bool:
    """Whether distinct instances (values of the ``parts`` axes) get distinct indices: each
    index dimension is affine in whole mixed-radix steps of its axes, and every part axis
    appears."""
    seen: set[ir.Axis] = set()
    for expr in index:
        lin = b.linearize(expr)
        if lin is None or lin.collapsed:
            return False
        step = 1
        for axis, coef in sorted(lin.axes.items(), key=lambda kv: abs(kv[1])):
            if abs(coef) < step:
                return False
            step = abs(coef) * axis.extent
            seen.add(axis)
    return set(parts) <= seen


def _row_col_guard(kl: KernelState, stmt: ast.MmaStore, layout: AccLayout) -> ir.Expr | None:
    """``mma.store.mask mc, dst, rows[, cols]``: only rows < rows (and cols < cols)."""
    guard = None
    for axis, parts, tile, limit in zip((layout.m, layout.n), (layout.m_parts, layout.n_parts),
                                        (layout.tile_m, layout.tile_n), stmt.mask):
        index: ir.Expr = b.axis_index(axis)
        if parts or (axis is layout.m and layout.fused):  # the row within one instance's tile
            index = b.binary("%", index, b.const(tile))
        guard = b.and_(guard, b.binary("<", index, kl.value(limit)))
    return guard


def _unfuse(kl: KernelState, lin: b.Linear, parts: tuple[ir.Axis, ...], tile: int,
            node: ast.Expr, what: str, fused: bool = False) -> None:
    """The destination must place the instances' tiles exactly as the fused accumulator
    holds them (the rows of side-by-side instances: at the instance index times their
    height)."""
    rows = kl.fused
    if fused or lin.groups:
        if not fused or rows is None or lin.groups != {(rows.axis, rows.rows): rows.rows}:
            raise _fail(node, f"the destination does not place the {what} of each instance "
                              "side by side as the MMA computed them")
    expected = tile
    coefs = dict(lin.axes)
    for axis in reversed(parts):
        if coefs.pop(axis, None) != expected:
            raise _fail(node, f"the destination does not place the {what} of each instance "
                              f"'{axis.name[3:]}' side by side as the MMA computed them")
        expected *= axis.extent
    if coefs:
        name = next(iter(coefs)).name[3:]
        raise _fail(node, f"parallel index '{name}' moves the destination but not the operands")


def _store_to_buffer(kl: KernelState, slot: BufferSlot, tile: Tile,
                     origin: tuple[ir.Expr, ...], stmt: ast.MmaStore) -> None:
    """The buffer holds the tile (in registers), made in the current block; a buffer
    already in scratch memory (scratch.py) stores it there."""
    buffer: Buffer = slot.buffer
    whole = all(b.is_const(o, 0) for o in origin) and all(
        Sym(d.extent).provably_eq(s) for d, s in zip(tile.dims, buffer.shape))
    if not whole:
        raise unsupported(stmt.dst.span, "an mma.store that fills only part of a shared buffer",
                          "store every instance's tile so that together they cover the buffer")
    if buffer.owned:
        scratch.store_into(kl, buffer, origin, buffer.shape, tile, stmt.span)
        return
    buffer.content = tile
    buffer.made = (tile, kl.scopes[-1])


def acc_arith_at(kl: KernelState, target: ast.Index, item: ast.Assign) -> None:
    """``mc[1] *= s;``: arithmetic on one accumulator of a fragment array."""
    base: ast.Expr = target
    while isinstance(base, ast.Index):
        base = base.base
    sym = kl.fn.refs.get(id(base))
    acc = _named_acc(kl, sym, target) if sym is not None else None
    if acc is None:
        raise unsupported(item.span, "this assignment target")
    acc_arith(kl, acc, item)


def acc_arith(kl: KernelState, acc: Acc, item: ast.Assign) -> None:
    """``mc += bias;``: element-wise arithmetic of the accumulator with a scalar."""
    if acc.layout is None:
        raise unsupported(item.span, "arithmetic on an accumulator before its first mma")
    value = kl.value(item.value)
    if value.axes:
        raise unsupported(item.value.span, "accumulator arithmetic with a per-thread value")
    dtype = b.dtype_of(acc.elem)
    current = ir.Var((acc.layout.m, acc.layout.n), dtype, acc.name)
    result = kl.arith(item.op[:-1], current, b.cast(value, dtype), acc.elem)
    kl.emit(ir.Let(item.span, acc.name, b.cast(result, dtype)))
