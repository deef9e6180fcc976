"""Expressions (a rule family of the lowering): names, literals, operators, casts,
``select``, built-in calls and atomics, as tile IR values. A value differs between
threads when it has tensor axes; ``value`` folds what the checker computed statically."""

from __future__ import annotations

from collections.abc import Callable

from ...frontend import syntax as ast
from ...frontend.builtin_names import BIT_BUILTINS, builtin_hint
from ...frontend.sema import dtypes
from ...frontend.sema.model import BoundedTupleType, BoundedType, ScalarType, SymKind
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import apply, builtins, intrinsics, scratch
from . import build as b
from . import nodes as ir
from .errors import unsupported
from .state import (HostScalar, KernelState, as_expr, common_dtype, describe,
                    is_int_type, truth)
from .values import Region, Scalar, Tile, access, padding_mask


class Expressions(KernelState):
    """The expression rules: ``value(e)`` dispatches on the node type."""

    def value(self, e: ast.Expr) -> ir.Expr:
        info = self.fn.exprs.get(id(e))
        if info is not None and info.static is not None and (
                is_int_type(info.type) or isinstance(info.type, BoundedType)):
            return self.sym(info.static)
        method: Callable[[ast.Expr], ir.Expr] | None = getattr(
            self, "_e_" + type(e).__name__, None)
        if method is None:
            raise unsupported(e.span, describe(e))
        return method(e)

    def _e_Ident(self, e: ast.Ident) -> ir.Expr:
        sym = self.fn.refs.get(id(e))
        if sym is None:
            raise unsupported(e.span, f"the name '{e.name}' here")
        if sym.kind is SymKind.DIM:  # (a constant in a compile specialised on it)
            return self.sym(sym.value if sym.value is not None else Sym.var(sym.name))
        value = self.env.get(sym)
        if isinstance(value, Scalar) and sym.is_param:
            self.use_scalar(sym)
        if value is None and isinstance(sym.decl_node, ast.Parallel):
            raise unsupported(e.span, f"the rank of a block in its cluster ('{e.name}')",
                              "clusters are ignored (spec 8): index with the block variables")
        if isinstance(value, HostScalar):
            return b.cast(self.value(value.expr), b.dtype_of(value.elem))
        return as_expr(value, e.span)

    def _e_IntLit(self, e: ast.IntLit) -> ir.Expr:
        return b.const(e.value)

    def _e_FloatLit(self, e: ast.FloatLit) -> ir.Expr:
        return b.const(e.value, ir.DType.F32 if e.is_f32 else ir.DType.F64)

    def _e_BoolLit(self, e: ast.BoolLit) -> ir.Expr:
        return b.const(e.value, b.I1)

    def _e_InfLit(self, e: ast.InfLit) -> ir.Expr:
        return b.const(float("inf"), ir.DType.F32)

    def _e_ElemAccess(self, e: ast.ElemAccess) -> ir.Expr:
        source, index, elem = self.element(e)
        if isinstance(source, Tile):
            return self._tile_element(source, index, e.span)
        pointer, mask = access(source, index)
        if self.loop_depth:
            self.loop_loaded.add(source.tensor.name)
        executing = self.predicate()
        if executing is not None and set(executing.axes) <= set(pointer.axes):
            # a read per lane inside a per-lane branch: the lanes outside the branch read
            # nothing (their index may be out of the tensor: `if (i >= n) x.at(i - n)`)
            mask = b.and_(mask, executing)
        return ir.Load(b.merged(pointer, *( [mask] if mask is not None else [])),
                       pointer.dtype, pointer, mask, source.fill,  # padding reads its value
                       source.eviction)

    def _tile_element(self, tile: Tile, index: list[ir.Expr], span: Span) -> ir.Expr:
        """Reading a register tile at indices that are exactly its own axes (or, inside
        ``apply``, the axes of the tile it spans)."""
        if all(isinstance(i, ir.AxisIndex) and i.axis is d for i, d in zip(index, tile.dims)):
            return tile.expr
        relabelled = scratch.tile_over(tile, index)
        if relabelled is not None:
            return relabelled
        if self.apply_depth:
            return apply.read_element(self, tile, index, span)
        raise unsupported(span, "reading single elements of a register-resident buffer at "
                                "computed positions",
                          "read the data from where it was copied from, or use whole-tile code")

    def _e_Binary(self, e: ast.Binary) -> ir.Expr:
        if e.op == "#":
            rhs_info = self.fn.exprs[id(e.rhs)]
            bound = rhs_info.type.bound if isinstance(rhs_info.type, BoundedType) else Sym(1)
            return b.add(b.mul(self.value(e.lhs), self.sym(bound)), self.value(e.rhs))
        if e.op in ("#+", "#-"):  # the value stays; only the bound changes (spec 5.1)
            return self.value(e.lhs)
        lhs, rhs = self.value(e.lhs), self.value(e.rhs)
        info = self.fn.exprs[id(e)]
        if e.op in ("&&", "||"):
            return b.binary("&" if e.op == "&&" else "|", truth(lhs), truth(rhs), b.I1)
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            common = common_dtype(lhs.dtype, rhs.dtype)
            if common is ir.DType.BF16:
                common = ir.DType.F32
            return b.binary(e.op, b.cast(lhs, common), b.cast(rhs, common), b.I1)
        elem = info.type.elem if isinstance(info.type, ScalarType) else dtypes.INT
        return self.arith(e.op, lhs, rhs, elem)

    def promoted(self, elem: dtypes.ElemType, value: ast.Expr) -> dtypes.ElemType:
        """The type ``x op= value`` computes in: x's type promoted with the value's."""
        info = self.fn.exprs.get(id(value))
        other = info.type.elem if info is not None and isinstance(info.type, ScalarType) else elem
        return dtypes.promote(elem, other) or elem

    def arith(self, op: str, lhs: ir.Expr, rhs: ir.Expr, elem: dtypes.ElemType) -> ir.Expr:
        dtype = b.dtype_of(elem)
        if dtype in (ir.DType.BF16, ir.DType.F8E4, ir.DType.F8E5):
            # bf16 and fp8 arithmetic is computed in f32 and rounded once (what the hardware
            # does; Triton 3.6's interpreter would otherwise compute on the raw bit patterns)
            wide = self.arith(op, lhs, rhs, dtypes.F32)
            return b.cast(wide, dtype)
        lhs, rhs = b.cast(lhs, dtype), b.cast(rhs, dtype)
        if op == "/":
            op = "/" if dtype.is_float else "//"
        if op not in ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>"):
            raise unsupported(Span(0, 0), f"the operator '{op}'")
        return b.binary(op, lhs, rhs, dtype)

    def _e_Unary(self, e: ast.Unary) -> ir.Expr:
        if e.op in ("++", "--"):
            return self._stepped(e)
        operand = self.value(e.operand)
        if e.op == "!":
            return ir.Unary(operand.axes, b.I1, "not", operand)
        if e.op == "~":
            return ir.Unary(operand.axes, operand.dtype, "~", operand)
        if e.op == "-":  # (only in a device helper's C expression)
            return ir.Unary(operand.axes, operand.dtype, "-", operand)
        raise unsupported(e.span, f"the operator '{e.op}' in an expression")

    def _stepped(self, e: ast.Unary | ast.Postfix) -> ir.Expr:
        """``++x`` / ``x--`` inside an expression: ``x`` is updated first; the value is the
        new one (prefix) or the one before (postfix, kept in a variable of its own)."""
        operand = e.operand
        if not isinstance(operand, ast.Ident):
            raise unsupported(e.span, f"the operator '{e.op}' on this operand")
        before = None
        if isinstance(e, ast.Postfix):
            value = self.value(operand)
            before = ir.Var(value.axes, value.dtype, self.fresh(f"{operand.name}_before"))
            self.emit(ir.Let(e.span, before.name, value))
        self.update(operand, e.op, e)
        return before if before is not None else self.value(operand)

    def _e_Postfix(self, e: ast.Postfix) -> ir.Expr:
        return self._stepped(e)

    def _e_Ternary(self, e: ast.Ternary) -> ir.Expr:
        cond = truth(self.value(e.cond))
        then, other = self.value(e.then), self.value(e.other)
        info = self.fn.exprs[id(e)]
        dtype = b.dtype_of(info.type.elem) if isinstance(info.type, ScalarType) else then.dtype
        then, other = b.cast(then, dtype), b.cast(other, dtype)
        return ir.Where(b.merged(cond, then, other), dtype, cond, then, other)

    def _e_Select(self, e: ast.Select) -> ir.Expr:
        info = self.fn.exprs.get(id(e.base))
        index = self.fn.exprs[id(e.index)].static
        if info is not None and isinstance(info.type, BoundedTupleType) and index is not None:
            return self.members(e.base)[index.value or 0]
        raise unsupported(e.span, "this selection")

    def _e_SelectExpr(self, e: ast.SelectExpr) -> ir.Expr:
        """``select(k, x0, x1, ...)`` of scalars: ``x_k``."""
        info = self.fn.exprs[id(e)]
        if not isinstance(info.type, ScalarType):
            raise unsupported(e.span, "'select' of these values")
        dtype = b.dtype_of(info.type.elem)
        return self.choice(self.value(e.index),
                           [b.cast(self.value(o), dtype) for o in e.options])

    def choice(self, index: ir.Expr, options: list[ir.Expr]) -> ir.Expr:
        """``options[index]`` for a runtime ``index`` (the last option past the end)."""
        result = options[-1]
        for k in range(len(options) - 2, -1, -1):
            cond = b.binary("==", index, b.const(k, index.dtype))
            result = ir.Where(b.merged(cond, options[k], result), result.dtype, cond,
                              options[k], result)
        return result

    def _e_SizeOf(self, e: ast.SizeOf) -> ir.Expr:
        """``|n|`` of an integer computed at run time: n (shapes are folded earlier)."""
        operand = e.operand
        info = self.fn.exprs.get(id(operand)) if operand is not None else None
        if operand is None or info is None or not (
                is_int_type(info.type) or isinstance(info.type, BoundedType)):
            raise unsupported(e.span, "'|...|' of this operand")
        return self.value(operand)

    def _e_Cast(self, e: ast.Cast) -> ir.Expr:
        elem = dtypes.cast_target(e.target, e.quoted)
        if elem is None:
            raise unsupported(e.span, f"casts to the C++ type \"{e.target}\"")
        return b.cast(self.value(e.operand), b.dtype_of(elem))

    def _e_CallExpr(self, e: ast.CallExpr) -> ir.Expr:
        if e.name in ATOMICS:
            return self.atomic(e, e.span, want_result=True)
        if id(e) in self.fn.lanes:  # a warp shuffle of an inlined device helper
            return intrinsics.shuffle(self, e)
        if e.name in BIT_BUILTINS:
            return intrinsics.bits(self, e.name, self.value(e.args[0]))
        args = [self.value(a) for a in e.args]
        if e.name == "cdiv" and len(args) == 2:
            num, den = args
            return b.binary("//", b.binary("-", b.add(num, den), b.const(1)), den)
        info = self.fn.exprs[id(e)]
        dtype = b.dtype_of(info.type.elem) if isinstance(info.type, ScalarType) else b.I32
        if e.name not in builtins.SUPPORTED:
            raise unsupported(e.span, f"the built-in '{e.name}'",
                              builtin_hint(e.name, builtins.SUPPORTED))
        return builtins.lower_builtin(self, e.name, args, dtype, e.span)

    def _e_ExternCall(self, e: ast.ExternCall) -> ir.Expr:
        if e.inlined is None:
            raise unsupported(e.span, f"external calls ('call {'::'.join(e.path)}')",
                              "define the function in this file as a __device__ helper "
                              "whose body returns one expression")
        return self.value(e.inlined)  # a device helper of this file

    def lower_expr_stmt(self, stmt: ast.ExprStmt) -> None:
        expr = stmt.expr
        if isinstance(expr, ast.ExternCall) and expr.inlined is not None:
            expr = expr.inlined  # (a helper's result that is not used)
            if not isinstance(expr, ast.CallExpr) or expr.name not in ATOMICS:
                self.value(expr)
                return
        if isinstance(expr, ast.CallExpr) and expr.name in ATOMICS:
            self.atomic(expr, stmt.span, want_result=False)
            return
        if isinstance(expr, ast.CallExpr) and expr.name in apply.FRAGMENT_CALLS:
            apply.lower_call(self, expr, stmt.span)
            return
        if isinstance(expr, (ast.Unary, ast.Postfix)) and expr.op in ("++", "--") and \
                isinstance(expr.operand, ast.Ident):
            self.update(expr.operand, expr.op, stmt)  # (its value is not used)
            return
        if not isinstance(expr, ast.CallExpr):
            raise unsupported(stmt.span, describe(expr))
        raise unsupported(stmt.span, f"the call '{expr.name}'",
                          builtin_hint(expr.name, builtins.SUPPORTED))

    def atomic(self, call: ast.CallExpr, span: Span | None, want_result: bool) -> ir.Expr:
        """``__atomic_op(x.at(i), v[, w])``: one atomic read-modify-write per lane."""
        target = call.args[0]
        if isinstance(target, ast.Unary) and target.op == "&":
            target = target.operand
        if not isinstance(target, ast.ElemAccess):
            raise unsupported(call.span, "an atomic on something other than an element")
        buffer = self.element_buffer(target)
        if buffer is not None:
            source: Region | Tile = scratch.scratch(self, buffer, call.span)
            index = self.element_index(target)
            self.emit(ir.Barrier(span))
        else:
            source, index, _ = self.element(target)
        if isinstance(source, Tile):
            raise unsupported(call.span, "atomics on a register-resident buffer",
                              "update shared or global data that no copy forwards")
        self.fl.written.add(source.tensor.name)
        pointer, mask = access(source, index)
        dtype = source.tensor.dtype
        op = ATOMICS[call.name]
        value = b.cast(self.value(call.args[1]), dtype)
        cmp = None
        if op == "sub":
            op, value = "add", b.binary("-", b.const(0, dtype), value)
        if op == "cas":
            cmp, value = value, b.cast(self.value(call.args[2]), dtype)
        mask = self.guarded(b.and_(mask, padding_mask(b.merged(pointer, value))))
        if op == "cas" and mask is not None:
            pointer, value, mask = _inert_cas(pointer, cmp, value, mask)
        result = self.fresh("old") if want_result else None
        self.emit(ir.Atomic(span, op, pointer, value, mask, cmp, result))
        if buffer is not None:
            self.emit(ir.Barrier(span))
        axes = b.merged(pointer, value)
        return ir.Var(axes, dtype, result) if result else b.const(0)


def _inert_cas(pointer: ir.Pointer, cmp: ir.Expr | None, value: ir.Expr, mask: ir.Expr,
               ) -> tuple[ir.Pointer, ir.Expr, None]:
    """``tl.atomic_cas`` takes no mask: lanes outside ``mask`` compare-and-swap the
    tensor's first element with ``cmp`` for ``cmp``, which never changes it."""
    assert cmp is not None
    offset = ir.Where(b.merged(mask, pointer.offset), pointer.offset.dtype, mask,
                      pointer.offset, b.const(0, pointer.offset.dtype))
    inert = ir.Pointer(offset.axes, pointer.dtype, pointer.base, offset)
    value = ir.Where(b.merged(mask, value, cmp), value.dtype, mask, value, cmp)
    return inert, value, None


ATOMICS = {
    "__atomic_add": "add", "__atomic_sub": "sub", "__atomic_exch": "xchg",
    "__atomic_min": "min", "__atomic_max": "max", "__atomic_and": "and", "__atomic_or": "or",
    "__atomic_xor": "xor", "__atomic_cas": "cas",
}
