"""Recognise a lowered function that is a plain dense GEMM, ``out = lhs @ rhs^T``.

The hand-written kernels (the Hopper gemm_sm90.cu, the Blackwell gemm_sm100.cu) may replace
a function's Triton kernel only when the function computes exactly what they compute.
`match_gemm` reads the lowered IR and accepts one form, the one the lowering gives the GEMM
of bench/kernels/gemm.co at any tile size:

* one kernel launch and nothing else on the host; three global tensor parameters
  lhs [M, K], rhs [N, K] and out [M, N] of one type, f16 or bf16, row-major (or
  8-bit float operands, e4m3 or e5m2, and an f16 or bf16 output: the Blackwell kernel's);
* every (block_m, block_n) tile of cdiv(M, TM) x cdiv(N, TN) visited once, in the
  lowering's grouped order (a persistent loop over the tiles or one program per tile);
* in each tile: an f32 accumulator set to zero; one loop over cdiv(K, TK) steps that
  loads the lhs tile at (block_m * TM, k * TK) and the rhs tile at (block_n * TN, k * TK)
  and accumulates their product; then the accumulator converted to the output type
  and stored at (block_m * TM, block_n * TN).

Anything else (an epilogue with a bias or an activation, another accumulator type, a
different loop, extra statements) raises `NotAGemm` saying what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...frontend.sema.symbolic import Sym
from ..ir import nodes as ir

_TYPES = {ir.DType.F16: "f16", ir.DType.BF16: "bf16"}
# 8-bit operands (the tcgen05 kernel's .kind::f8f6f4) into an f16 or bf16 output
_FP8 = {ir.DType.F8E4: "f8_e4m3", ir.DType.F8E5: "f8_e5m2"}


class NotAGemm(Exception):
    """The function is not the plain GEMM the CUDA kernel computes; the message says why."""


class NotSparse(NotAGemm):
    """The K loop of the function does not rebuild a 2:4 sparse A tile at all (the reason
    the dense matcher gives is then the one to report)."""


@dataclass(frozen=True)
class GemmPlan:
    """Where the GEMM's operands are among the function's parameters."""

    lhs: int
    rhs: int
    out: int
    dtype: str  # of the operands: "f16" or "bf16" (or "f8_e4m3", "f8_e5m2")
    output: str = ""  # of the output: "f16" or "bf16" ("": the operands' type)

    def __post_init__(self) -> None:
        if not self.output:
            object.__setattr__(self, "output", self.dtype)


def match_gemm(fn: ir.Function) -> GemmPlan:
    """The plan of ``fn`` when it is a plain GEMM; raises ``NotAGemm`` otherwise."""
    kernel, tile, body, tiles, acc_at = _frame(fn)
    acc, k_loop, cast, store = body[acc_at:]
    assert isinstance(acc, ir.Let)  # (_frame found the zeroed accumulator there)
    if not isinstance(k_loop, ir.For):
        raise NotAGemm("the accumulator is not followed by a loop over K")
    loads = _k_loop(k_loop, acc.name)
    lhs, rhs = (_desc(kernel, loads[name].desc) for name in ("a", "b"))
    out_desc, out_offsets, value = _store(store)
    out = _desc(kernel, out_desc)
    if not (isinstance(cast, ir.Let) and isinstance(cast.value, ir.Cast) and cast.name == value
            and _is_var(cast.value.operand, acc.name)):
        raise NotAGemm("the stored tile is not the accumulator converted")
    m, k = lhs.shape
    n = rhs.shape[0]
    if (rhs.shape[1], out.shape) != (k, (m, n)) or any(
            d.strides != (d.shape[1], Sym.of(1)) for d in (lhs, rhs, out)):
        raise NotAGemm("the operands are not lhs [M, K], rhs [N, K] and out [M, N], row-major")
    (tm, tk), (tn, tk_b), block_out = lhs.block, rhs.block, out.block
    if tk_b != tk or block_out != (tm, tn):
        raise NotAGemm("the tile shapes of the operands do not agree")
    block_m, block_n = _tiles_and_k_loop(body[:acc_at], tile, tiles, k_loop, m, n, k,
                                         (tm, tn, tk))
    wanted = {"a": (block_m, tm), "b": (block_n, tn)}
    for name, load in loads.items():
        row, factor = wanted[name]
        if not (_is_scaled(load.offsets[0], row, factor)
                and _is_scaled(load.offsets[1], k_loop.var, tk)):
            raise NotAGemm("an operand tile is not loaded at (block * tile, k * TK)")
    if not (_is_scaled(out_offsets[0], block_m, tm) and _is_scaled(out_offsets[1], block_n, tn)):
        raise NotAGemm("the output tile is not stored at (block_m * TM, block_n * TN)")
    operand, output = loads["a"].dtype, cast.value.dtype
    if loads["b"].dtype != operand or output not in _TYPES or (
            operand != output and operand not in _FP8):
        raise NotAGemm("the operands and the output are not all f16 or all bf16 (or 8-bit "
                       "float operands into f16 or bf16)")
    names = [p.name for p in fn.params]
    positions = [names.index(d.tensor) if d.tensor in names else -1 for d in (lhs, rhs, out)]
    if -1 in positions or len(set(positions)) != 3 or any(
            fn.params[i].storage != "global" or fn.params[i].kind != "tensor" for i in positions):
        raise NotAGemm("the operands are not three distinct global tensor parameters")
    lhs_at, rhs_at, out_at = positions
    return GemmPlan(lhs_at, rhs_at, out_at, dtype={**_TYPES, **_FP8}[operand],
                    output=_TYPES[output])


@dataclass(frozen=True)
class SparseGemmPlan:
    """Where a 2:4 sparse GEMM's operands are among the function's parameters: A as
    ``packed`` [M, K/2] and ``meta`` u8 [M, K/8] (spec "Sparse (.sp, 2:4)"), ``rhs``
    [N, K], ``out`` [M, N]."""

    packed: int
    meta: int
    rhs: int
    out: int
    dtype: str  # "f16" or "bf16", of the operands and the output


def match_sparse_gemm(fn: ir.Function) -> SparseGemmPlan:
    """The plan of ``fn`` when it is the sparse GEMM ``out = A @ rhs^T`` of
    bench/kernels/gemm_sp.co: the frame of `match_gemm` (one launch, every tile once in
    grouped order, a zeroed f32 accumulator, a K loop, a conversion and a store), with a
    K loop that rebuilds the dense A tile from the packed values and the metadata of rows
    block_m * TM.. and packed columns k * TK/2.. (metadata bytes k * TK/8..), loads the
    rhs tile at (block_n * TN, k * TK) and accumulates A @ rhs^T. Raises ``NotAGemm``."""
    kernel, tile, body, tiles, acc_at = _frame(fn)
    acc, k_loop, cast, store = body[acc_at:]
    assert isinstance(acc, ir.Let)  # (_frame found the zeroed accumulator there)
    if not isinstance(k_loop, ir.For):
        raise NotAGemm("the accumulator is not followed by a loop over K")
    sparse, b_load, dot = _sparse_k_loop(k_loop, acc.name)
    rhs = _desc(kernel, b_load.desc)
    out_desc, out_offsets, value = _store(store)
    out = _desc(kernel, out_desc)
    if not (isinstance(cast, ir.Let) and isinstance(cast.value, ir.Cast) and cast.name == value
            and _is_var(cast.value.operand, acc.name)):
        raise NotAGemm("the stored tile is not the accumulator converted")
    params = {p.name: p for p in kernel.params}
    packed_name, meta_name = (params[base].source if base in params else None
                              for base in (sparse["packed"], sparse["meta"]))
    by_name = {p.name: i for i, p in enumerate(fn.params)}
    if packed_name not in by_name or meta_name not in by_name:
        raise NotAGemm("the packed operand or the metadata is not a tensor parameter")
    packed, meta = fn.params[by_name[packed_name]], fn.params[by_name[meta_name]]
    n, k = rhs.shape
    m = out.shape[0]
    if (len(packed.dims), len(meta.dims)) != (2, 2) or (packed.dims[0], meta.dims[0],
                                                        out.shape[1]) != (m, m, n) or any(
            d.strides != (d.shape[1], Sym.of(1)) for d in (rhs, out)):
        raise NotAGemm("the operands are not packed [M, K/2], meta [M, K/8], rhs [N, K] and "
                       "out [M, N], row-major")
    tm, tn, (tn_b, tk) = dot.m.size, dot.n.size, rhs.block
    if (tn_b, out.block) != (tn, (tm, tn)) or tk % 8:
        raise NotAGemm("the tile shapes of the operands do not agree")
    block_m, block_n = _tiles_and_k_loop(body[:acc_at], tile, tiles, k_loop, m, n, k,
                                         (tm, tn, tk))
    if not (_is_scaled(b_load.offsets[0], block_n, tn)
            and _is_scaled(b_load.offsets[1], k_loop.var, tk)):
        raise NotAGemm("the rhs tile is not loaded at (block_n * TN, k * TK)")
    expected = _decompression(sparse, block_m, tm, k_loop.var, tk, dot,
                              _dim(m), _dim(packed.dims[1]), _dim(meta.dims[1]))
    if sparse["text"] != expected:
        raise NotAGemm("the dense A tile is not rebuilt from the packed values and metadata "
                       "of rows block_m * TM.. and K step k")
    if not (_is_scaled(out_offsets[0], block_m, tm) and _is_scaled(out_offsets[1], block_n, tn)):
        raise NotAGemm("the output tile is not stored at (block_m * TM, block_n * TN)")
    dtype = b_load.dtype
    if dtype not in _TYPES or cast.value.dtype != dtype or sparse["dtype"] != dtype or \
            meta.elem != "u8":
        raise NotAGemm("the operands and the output are not all f16 or all bf16, with u8 "
                       "metadata")
    positions = [by_name.get(name, -1) for name in (packed_name, meta_name, rhs.tensor,
                                                     out.tensor)]
    if -1 in positions or len(set(positions)) != 4 or any(
            fn.params[i].storage != "global" or fn.params[i].kind != "tensor" for i in positions):
        raise NotAGemm("the operands are not four distinct global tensor parameters")
    packed_at, meta_at, rhs_at, out_at = positions
    return SparseGemmPlan(packed_at, meta_at, rhs_at, out_at, dtype=_TYPES[dtype])


def _sparse_k_loop(loop: ir.For, acc: str) -> tuple[dict, ir.DescLoad, ir.Dot]:
    """The K loop of a sparse GEMM: the metadata byte, its nibble, the two masked loads
    of packed values, the dense tile, the rhs tile load and the accumulating product.
    Returns the decompression as text (with the pointer bases and the element type),
    the rhs load and the product."""
    body = [s for s in loop.body if not _on_cpu_only(s)]
    names = ["sp_meta", "sp_nib", "sp_a0", "sp_a1", "a_dense"]
    lets = [s for s in body[:5] if isinstance(s, ir.Let)]
    if len(body) != 7 or len(lets) != 5 or any(not s.name.startswith(name)
                                               for s, name in zip(lets, names)):
        raise NotSparse("the K loop is not a sparse A tile rebuilt from its metadata, a tile "
                        "load and one product")
    meta, nibble, a0, a1, dense = lets
    branch, product = body[5:]
    b_let = branch.then[0] if isinstance(branch, ir.Branch) and len(branch.then) == 1 else None
    if not (isinstance(b_let, ir.Let) and isinstance(b_let.value, ir.DescLoad)):
        raise NotAGemm("the rhs operand of the K loop is not a tile load")
    dot = product.value if isinstance(product, ir.Let) else None
    if not (isinstance(product, ir.Let) and isinstance(dot, ir.Dot) and product.name == acc
            and _is_var(dot.acc, acc) and _is_var(dot.a, dense.name) and _is_var(dot.b, b_let.name)
            and dot.dtype is ir.DType.F32 and b_let.value.dims == (dot.n, dot.k)
            and not any(axis.padded for axis in (dot.m, dot.n, dot.k))):
        raise NotAGemm("the K loop does not accumulate A_dense @ rhs_tile^T in f32 over "
                       "whole tiles")
    loads = [s.value for s in (meta, a0, a1) if isinstance(s.value, ir.Load) and s.value.other == 0]
    if len(loads) != 3 or loads[1].pointer.base != loads[2].pointer.base:
        raise NotAGemm("the sparse A tile is not loaded from one packed tensor")
    names_map = {meta.name: "META", nibble.name: "NIB", a0.name: "A0", a1.name: "A1"}
    text = [_sparse_text(s.value, names_map) for s in lets]
    return ({"packed": loads[1].pointer.base, "meta": loads[0].pointer.base, "text": text,
             "dtype": loads[1].dtype if loads[2].dtype == loads[1].dtype else None},
            b_let.value, dot)


def _decompression(found: dict, block_m: str, tm: int, kv: str, tk: int, dot: ir.Dot,
                   d_m: str, d_kp: str, d_km: str) -> list[str]:
    """The text of the five statements of ``backends/ir/sparse.py``'s decompression of
    the A tile at rows block_m * TM.. and dense columns k * TK.. (see `_sparse_text`)."""
    rows = f"(({block_m} * {tm}) + arange({dot.m.name}))"
    group = f"(arange({dot.k.name}) // 4)"
    position = f"(arange({dot.k.name}) % 4)"
    byte = f"(({kv} * {tk // 8}) + ({group} // 2))"
    columns = [f"(({kv} * {tk // 2}) + ({group} * 2))",
               f"(({kv} * {tk // 2}) + (({group} * 2) + 1))"]
    kept = ["(NIB % 4)", "((NIB >> 2) % 4)"]
    meta = (f"load(META_PTR[(({rows} * {d_km}) + {byte})], "
            f"(({rows} < {d_m}) & ({byte} < {d_km})))")
    values = [f"load(A_PTR[(({rows} * {d_kp}) + {column})], "
              f"((({rows} < {d_m}) & ({column} < {d_kp})) & ({position} == {index})))"
              for column, index in zip(columns, kept)]
    return [meta, f"(cast(META) >> (4 * ({group} % 2)))", *values,
            f"where(({position} == {kept[1]}), A1, A0)"]


def _sparse_text(expr: ir.Expr | None, names: dict[str, str]) -> str:
    """`_text` extended to the tensor expressions of the sparse decompression, with the
    let-bound names replaced by their roles and pointer bases by META_PTR / A_PTR."""
    if isinstance(expr, ir.AxisIndex):
        return f"arange({expr.axis.name})"
    if isinstance(expr, ir.Var):
        return names.get(expr.name, expr.name)
    if isinstance(expr, ir.Cast):
        return f"cast({_sparse_text(expr.operand, names)})"
    if isinstance(expr, ir.Load):
        base = "META_PTR" if expr.dtype is ir.DType.U8 else "A_PTR"
        return (f"load({base}[{_sparse_text(expr.pointer.offset, names)}], "
                f"{_sparse_text(expr.mask, names)})")
    if isinstance(expr, ir.Where):
        return (f"where({_sparse_text(expr.cond, names)}, {_sparse_text(expr.then, names)}, "
                f"{_sparse_text(expr.other, names)})")
    if isinstance(expr, ir.Binary):
        return f"({_sparse_text(expr.lhs, names)} {expr.op} {_sparse_text(expr.rhs, names)})"
    return _text(expr)


# ---- the parts of the kernel ----------------------------------------------------------

def _frame(fn: ir.Function) -> tuple[ir.Kernel, str, list[ir.Stmt], Sym, int]:
    """The kernel of a single-launch void function, its tile variable, per-tile body and
    tile count, and where in the body the f32 accumulator is set to zero (followed by
    exactly three statements: the K loop, the conversion and the store)."""
    if len(fn.kernels) != 1 or len(fn.body) != 1 or not isinstance(fn.body[0], ir.HostLaunch):
        raise NotAGemm("the function is not a single kernel launch")
    if fn.returns != "void" or fn.clone_inputs:
        raise NotAGemm("the function returns a value or copies its inputs")
    kernel = fn.kernels[0]
    tile, body, tiles = _tile_body(kernel)
    acc_at = next((i for i, s in enumerate(body) if _is_zero_acc(s)), None)
    if acc_at is None or len(body) != acc_at + 4:
        raise NotAGemm("the block body is not: an f32 accumulator set to zero, a loop over K, "
                       "a conversion and a store")
    return kernel, tile, body, tiles, acc_at


def _tile_body(kernel: ir.Kernel) -> tuple[str, list[ir.Stmt], Sym]:
    """The tile variable, the per-tile statements and the number of tiles."""
    body = kernel.body
    if kernel.persistent_tiles is not None:
        loop = body[0] if len(body) == 1 else None
        if not (isinstance(loop, ir.For) and _text(loop.start) == "program_id(0)"
                and loop.step is not None and _text(loop.step) == "n_programs"):
            raise NotAGemm("the persistent launch is not one loop over the tiles")
        return loop.var, loop.body, kernel.persistent_tiles
    first = body[0] if body else None
    if not (len(kernel.grid) == 1 and isinstance(first, ir.Let)
            and _text(first.value) == "program_id(0)"):
        raise NotAGemm("the blocks are not numbered along one grid axis")
    return first.name, body[1:], kernel.grid[0]


def _tiles_and_k_loop(lets: list[ir.Stmt], tile: str, tiles: Sym, k_loop: ir.Stmt, m: Sym,
                      n: Sym, k: Sym, sizes: tuple[int, int, int]) -> tuple[str, str]:
    """block_m and block_n, checked to number cdiv(M, TM) x cdiv(N, TN) tiles in grouped
    order, with the K loop checked to run over cdiv(K, TK) steps from 0."""
    tm, tn, tk = sizes
    if tiles != m.cdiv(tm) * n.cdiv(tn):
        raise NotAGemm("the blocks do not cover cdiv(M, TM) x cdiv(N, TN) tiles")
    block_m, block_n = _grouped_order(lets, tile, m, n, tm, tn)
    k_steps = f"(({_dim(k)} + {tk} - 1) // {tk})"
    if not (isinstance(k_loop, ir.For) and _is_var(k_loop.stop, k_steps)
            and _is_const(k_loop.start, 0)
            and (k_loop.step is None or _is_const(k_loop.step, 1))):
        raise NotAGemm("the K loop does not run over cdiv(K, TK) steps from 0")
    return block_m, block_n


def _grouped_order(lets: list[ir.Stmt], tile: str, m: Sym, n: Sym, tm: int,
                   tn: int) -> tuple[str, str]:
    """The names of block_m and block_n, checked to be the lowering's grouped order of
    the tile number (a one-to-one map of the tiles)."""
    let_stmts = [s for s in lets if isinstance(s, ir.Let)]
    if len(lets) != 5 or len(let_stmts) != 5:
        raise NotAGemm("the tile indices are not the grouped order of the tile number")
    width, first, rows, block_m, block_n = let_stmts
    value = width.value
    group = value.lhs.value if isinstance(value, ir.Binary) and isinstance(value.lhs, ir.Const) \
        else None
    tiles_m, tiles_n = f"(({_dim(m)} + {tm} - 1) // {tm})", f"(({_dim(n)} + {tn} - 1) // {tn})"
    expected = [
        (width, f"({group} * {tiles_n})"),
        (first, f"(({tile} // {width.name}) * {group})"),
        (rows, f"minimum(({tiles_m} - {first.name}), {group})"),
        (block_m, f"({first.name} + (({tile} % {width.name}) % {rows.name}))"),
        (block_n, f"(({tile} % {width.name}) // {rows.name})"),
    ]
    if group is None or any(_text(let.value) != text for let, text in expected):
        raise NotAGemm("the tile indices are not the grouped order of the tile number")
    return block_m.name, block_n.name


def _is_zero_acc(stmt: ir.Stmt) -> bool:
    return (isinstance(stmt, ir.Let) and isinstance(stmt.value, ir.Full)
            and stmt.value.dtype is ir.DType.F32 and stmt.value.value == 0
            and len(stmt.value.axes) == 2)


def _k_loop(stmt: ir.Stmt, acc: str) -> dict[str, ir.DescLoad]:
    """The two tile loads of the K loop by role ("a": lhs, "b": rhs), checked to feed
    one accumulating product."""
    body = [s for s in stmt.body if not _on_cpu_only(s)] if isinstance(stmt, ir.For) else []
    if len(body) != 3:
        raise NotAGemm("the K loop is not two tile loads and one product")
    *branches, product = body
    loads: dict[str, ir.DescLoad] = {}
    for branch in branches:
        let = branch.then[0] if isinstance(branch, ir.Branch) and len(branch.then) == 1 else None
        if not (isinstance(let, ir.Let) and isinstance(let.value, ir.DescLoad)):
            raise NotAGemm("an operand of the K loop is not a tile load")
        loads[let.name] = let.value
    dot = product.value if isinstance(product, ir.Let) else None
    if not (isinstance(product, ir.Let) and isinstance(dot, ir.Dot) and product.name == acc
            and _is_var(dot.acc, acc) and isinstance(dot.a, ir.Var) and isinstance(dot.b, ir.Var)
            and {dot.a.name, dot.b.name} == set(loads) and dot.a.name != dot.b.name
            and dot.dtype is ir.DType.F32):
        raise NotAGemm("the K loop does not accumulate the product of its two tiles in f32")
    a, b = loads[dot.a.name], loads[dot.b.name]
    if a.dims != (dot.m, dot.k) or b.dims != (dot.n, dot.k) or any(
            axis.padded for axis in (dot.m, dot.n, dot.k)):
        raise NotAGemm("the product is not lhs_tile @ rhs_tile^T over whole tiles")
    return {"a": a, "b": b}


def _on_cpu_only(stmt: ir.Stmt) -> bool:
    """A statement that runs only under Triton's CPU interpreter (a bf16 operand widened
    for it): no part of the computation on the GPU."""
    return isinstance(stmt, ir.Branch) and stmt.flag == "ON_CPU" and not stmt.other


def _store(stmt: ir.Stmt) -> tuple[str, tuple[ir.Expr, ...], str]:
    store = stmt.then[0] if isinstance(stmt, ir.Branch) and len(stmt.then) == 1 else None
    if not (isinstance(store, ir.DescStore) and isinstance(store.value, ir.Var)):
        raise NotAGemm("the epilogue is not one tile store")
    return store.desc, store.offsets, store.value.name


def _desc(kernel: ir.Kernel, name: str) -> ir.HostDesc:
    for param in kernel.params:
        if param.name == name and isinstance(param.source, ir.HostDesc):
            return param.source
    raise NotAGemm(f"the tile of '{name}' is not described by the host")


# ---- expressions ----------------------------------------------------------------------

def _text(expr: ir.Expr | None) -> str:
    """A scalar expression as text, for comparing shapes of index arithmetic."""
    if isinstance(expr, ir.Var):
        return expr.name
    if isinstance(expr, ir.Const):
        return str(expr.value)
    if isinstance(expr, ir.Binary):
        return f"({_text(expr.lhs)} {expr.op} {_text(expr.rhs)})"
    if isinstance(expr, ir.Call):
        return f"{expr.fn}({', '.join(_text(a) for a in expr.args)})"
    return f"<{type(expr).__name__}>"


def _dim(sym: Sym) -> str:
    names = sym.free_vars()
    if len(names) != 1 or sym != Sym.var(next(iter(names))):
        raise NotAGemm(f"the dimension '{sym}' is not a plain parameter dimension")
    return ir.dim_var_name(next(iter(names)))


def _is_var(expr: ir.Expr | None, name: str) -> bool:
    return isinstance(expr, ir.Var) and expr.name == name


def _is_const(expr: ir.Expr | None, value: int) -> bool:
    return isinstance(expr, ir.Const) and expr.value == value


def _is_scaled(expr: ir.Expr, name: str, factor: int) -> bool:
    return _text(expr) == f"({name} * {factor})"
