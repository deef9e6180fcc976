"""Expression evaluation (spec 4.9, 5.1, 5.5): literals, names, bounded values and ``#``,
element access, arithmetic in the checker's promoted types, built-ins, views.

``Evaluator`` is a mixin of the interpreter: it reads ``fn`` (the checked function),
``dims`` (symbolic dimensions), the current frame and ``mask`` (active lanes, or None).
"""

from __future__ import annotations

from dataclasses import replace

from typing import Any, Callable

import torch

from ...frontend import syntax as ast
from ...frontend.builtin_names import BIT_BUILTINS
from ...frontend.sema import dtypes
from ...frontend.sema.dtypes import ElemType
from ...frontend.sema.model import (BoundedType, CheckedFunction, ExprInfo, IndexItem,
                                    ScalarType, ShapeType, SymKind, Symbol, TupleType, ViewStep)
from ...frontend.sema.symbolic import Sym
from . import arith
from .errors import InterpretError, not_implemented
from .values import BufferArray, DataView, Frag, Frame, Future, PrivateCell


class Evaluator:
    fn: CheckedFunction
    dims: dict[str, int]
    frame: Frame
    mask: torch.Tensor | None

    def element_fill(self, elem: ElemType) -> Any:
        """What an element read outside its data gives (the interpreter's option)."""
        raise NotImplementedError

    def _init_evaluator(self) -> None:
        self._plans: dict[int, Any] = {}

    # ------------------------------------------------------------------ variables
    def define(self, sym: Symbol, name: str, value: object) -> None:
        self.frame.vars[(sym, name)] = value

    def lookup(self, sym: Symbol, name: str) -> Any:
        """The value of a variable; values private to inner parallel instances resolve
        to the copy of the current instance (spec 5.2)."""
        frame: Frame | None = self.frame
        crossed: list[tuple] = []
        key = (sym, name)
        while frame is not None:
            if key in frame.vars:
                value = frame.vars[key]
                if isinstance(value, PrivateCell):
                    return value.resolve(tuple(reversed(crossed)))
                return value
            if frame.key is not None:
                crossed.append(frame.key)
            frame = frame.parent
        raise InterpretError(f"'{name}' has no value here")

    def assign(self, sym: Symbol, name: str, value: object) -> None:
        """Overwrite an existing variable (masked on inactive lanes)."""
        frame: Frame | None = self.frame
        key = (sym, name)
        crossed = False
        while frame is not None:
            if key in frame.vars:
                if crossed:
                    raise not_implemented(f"assigning to '{name}', declared outside the "
                                          "enclosing parallel level, from its instances")
                old = frame.vars[key]
                if self.mask is not None and not isinstance(old, (DataView, Future, Frag)):
                    value = _merge(self.mask, value, old)
                frame.vars[key] = value
                return
            crossed = crossed or frame.key is not None
            frame = frame.parent
        raise InterpretError(f"'{name}' has no value here")

    def key_by_name(self, name: str) -> tuple[Frame, tuple]:
        """The variable a bare name denotes (``swap(a, b)`` names, unchecked expressions):
        the latest one declared in the nearest frame."""
        frame: Frame | None = self.frame
        while frame is not None:
            for key in reversed(list(frame.vars)):
                if key[1] == name:
                    return frame, key
            frame = frame.parent
        raise InterpretError(f"'{name}' has no value here")

    def owner(self, sym: Symbol, name: str) -> Frame | None:
        frame: Frame | None = self.frame
        while frame is not None:
            if (sym, name) in frame.vars:
                return frame
            frame = frame.parent
        return None

    # ------------------------------------------------------------------ entry
    def info(self, e: ast.Expr) -> ExprInfo | None:
        return self.fn.exprs.get(id(e))

    def eval(self, e: ast.Expr) -> Any:
        plan = self._plans.get(id(e))
        if plan is None:
            plan = self._plan(e)
        if type(plan) is int:
            return plan
        return plan(e)

    def _plan(self, e: ast.Expr) -> Any:
        """How to evaluate ``e``: its value when the checker knows it (an integer), else
        the method for its node type."""
        info = self.fn.exprs.get(id(e))
        if info is not None and info.static is not None and _int_typed(info):
            plan: Any = int(info.static.evaluate(self.dims))
        else:
            plan = getattr(self, "_e_" + type(e).__name__, None)
            if plan is None:
                raise not_implemented(f"the expression '{type(e).__name__}'")
        self._plans[id(e)] = plan
        return plan

    def sym_value(self, value: Sym) -> int:
        return value.evaluate(self.dims)

    def elem_of(self, e: ast.Expr) -> ElemType:
        """The element type of a scalar expression, as the checker typed it."""
        info = self.info(e)
        if info is not None:
            if isinstance(info.type, ScalarType):
                return info.type.elem
            if isinstance(info.type, BoundedType):
                return dtypes.INT
        value = self.eval(e)
        if isinstance(value, torch.Tensor):
            return arith.elem_of_dtype(value.dtype)
        if isinstance(value, bool):
            return dtypes.BOOL
        return dtypes.INT if isinstance(value, int) else dtypes.F64

    # ------------------------------------------------------------------ literals, names
    def _e_IntLit(self, e: ast.IntLit) -> int:
        return e.value

    def _e_FloatLit(self, e: ast.FloatLit) -> float:
        return e.value

    def _e_BoolLit(self, e: ast.BoolLit) -> bool:
        return e.value

    def _e_InfLit(self, e: ast.InfLit) -> float:
        return float("inf")

    def _e_StrLit(self, e: ast.StrLit) -> str:
        return e.value

    def _e_Ident(self, e: ast.Ident) -> Any:
        sym = self.fn.refs.get(id(e))
        if sym is None:  # an expression the checker does not analyse (print arguments)
            if e.name in self.dims:
                return self.dims[e.name]
            frame, key = self.key_by_name(e.name)
            value = frame.vars[key]
            return value.resolve(()) if isinstance(value, PrivateCell) else value
        if sym.kind is SymKind.DIM:
            return self.dims[sym.name]
        return self.lookup(sym, e.name)

    def _e_Member(self, e: ast.Member) -> Any:
        info = self.info(e)
        if e.member == "span":
            if info is not None and isinstance(info.type, ShapeType):
                return tuple(self.sym_value(d) for d in info.type.dims)
            return tuple(self.data_of(e.obj).shape)
        if e.member in ("data", "mdata"):
            return self.data_of(e.obj)
        raise not_implemented(f"the member '.{e.member}'")

    def data_of(self, e: ast.Expr) -> DataView:
        """Spanned data named by ``x``, ``f.data``, ``buf[i]`` or a view expression."""
        if isinstance(e, ast.View):
            return self.view(e)
        if isinstance(e, ast.Member) and e.member in ("data", "mdata"):
            return self.data_of(e.obj)
        if isinstance(e, ast.Index):
            return self._array_element(e)
        value = self.eval(e)
        if isinstance(value, DataView):
            return value
        if isinstance(value, Future):
            if value.data is None:
                raise InterpretError(f"the future '{value.name}' holds no data (dma.any or "
                                     "an MMA future)")
            return value.data
        if isinstance(value, Frag):
            return _frag_elements(value, _text(e))
        raise InterpretError(f"'{_text(e)}' is not spanned data")

    def _array_element(self, e: ast.Index) -> DataView:
        indices: list[int] = []
        base: ast.Expr = e
        while isinstance(base, ast.Index):
            indices.insert(0, _int(self.eval(base.index), "an array index"))
            base = base.base
        array = self.eval(base)
        if not isinstance(array, BufferArray):
            raise not_implemented(f"indexing '{_text(base)}' with []")
        return array.element(indices)

    def _e_Index(self, e: ast.Index) -> DataView:
        return self._array_element(e)

    # ------------------------------------------------------------------ elements (5.5)
    def indices(self, exprs: tuple[ast.Expr, ...]) -> list[Any]:
        """Element indices; a bounded ituple or ituple contributes all its elements."""
        out: list[Any] = []
        for expr in exprs:
            value = self.eval(expr)
            if isinstance(value, tuple):
                out.extend(value)
            else:
                out.append(_index(value))
        return out

    def element_target(self, e: ast.ElemAccess) -> tuple[DataView, list[Any]]:
        base = e.base
        if isinstance(base, ast.Ident):
            sym = self.fn.refs.get(id(base))
            if sym is not None and sym.kind is SymKind.EVENT:
                raise not_implemented("events")
        return self.data_of(base), self.indices(e.indices)

    def _e_ElemAccess(self, e: ast.ElemAccess) -> torch.Tensor:
        data, index = self.element_target(e)
        return data.load(index, self.mask, self.element_fill(data.elem))

    def _e_Select(self, e: ast.Select) -> Any:
        info = self.info(e)
        if info is not None and info.static is not None and info.static.value is not None:
            return info.static.value  # `k(-1)`: #k - 1, known when compiling
        base = self.eval(e.base)
        i = _int(self.eval(e.index), "a selection index")
        if isinstance(base, tuple):
            return base[i]
        raise not_implemented(f"selecting '({i})' of '{_text(e.base)}'")

    def _e_BoundOf(self, e: ast.BoundOf) -> Any:
        info = self.info(e)
        if info is not None and isinstance(info.type, TupleType) and \
                all(v is not None for v in info.type.values):
            return tuple(self.sym_value(v) for v in info.type.values if v is not None)
        raise InterpretError(f"'#{e.name}' has no bound")

    # ------------------------------------------------------------------ operators
    def _e_Binary(self, e: ast.Binary) -> Any:
        op = e.op
        if op == "#":  # composition (spec 5.1): a * #b + b
            rhs_info = self.info(e.rhs)
            bound = self.sym_value(rhs_info.type.bound) if rhs_info is not None and \
                isinstance(rhs_info.type, BoundedType) else 1
            return arith.binary("+", arith.binary("*", self.eval(e.lhs), bound, dtypes.INT),
                                self.eval(e.rhs), dtypes.INT)
        if op in ("#+", "#-"):  # the value is kept, only the bound changes
            return self.eval(e.lhs)
        if op in ("&&", "||"):
            return self._logic(e)
        info = self.info(e)
        if info is not None and isinstance(info.type, (ShapeType, TupleType)):
            return self._shape_arith(e, info.type)
        lhs, rhs = self.eval(e.lhs), self.eval(e.rhs)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            common = arith.promote(self.elem_of(e.lhs), self.elem_of(e.rhs))
            return arith.compare(op, lhs, rhs, common)
        elem = self._result_elem(info)
        return arith.binary(op, lhs, rhs, elem, self.mask)

    def _result_elem(self, info: ExprInfo | None) -> ElemType:
        if info is not None and isinstance(info.type, ScalarType):
            return info.type.elem
        return dtypes.INT

    def _logic(self, e: ast.Binary) -> Any:
        """``&&`` / ``||`` short-circuit; with lanes the right side runs on the lanes
        that still need it."""
        lhs = arith.truth(self.eval(e.lhs))
        if not isinstance(lhs, torch.Tensor):
            if lhs == (e.op == "||"):
                return lhs
            return arith.truth(self.eval(e.rhs))
        need = lhs if e.op == "&&" else ~lhs
        rhs = self.masked(need, lambda: arith.truth(self.eval(e.rhs)), False)
        return lhs & rhs if e.op == "&&" else lhs | rhs

    def masked(self, cond: torch.Tensor, compute: Callable[[], Any], default: Any) -> Any:
        """``compute()`` on the active lanes where ``cond`` holds (``default`` when none)."""
        mask = cond if self.mask is None else self.mask & cond
        if not bool(mask.any()):
            return default
        saved = self.mask
        self.mask = mask
        try:
            return compute()
        finally:
            self.mask = saved

    def _shape_arith(self, e: ast.Binary, typ: ShapeType | TupleType) -> tuple[arith.Value, ...]:
        if isinstance(typ, ShapeType):
            return tuple(self.sym_value(d) for d in typ.dims)
        if all(v is not None for v in typ.values):
            return tuple(self.sym_value(v) for v in typ.values if v is not None)
        lhs, rhs = self.eval(e.lhs), self.eval(e.rhs)
        left = list(lhs) if isinstance(lhs, tuple) else [lhs]
        right = list(rhs) if isinstance(rhs, tuple) else [rhs]
        if len(left) == 1:
            left = left * len(right)
        if len(right) == 1:
            right = right * len(left)
        return tuple(arith.binary(e.op, a, b, dtypes.INT, self.mask) for a, b in zip(left, right))

    def _e_Unary(self, e: ast.Unary) -> Any:
        if e.op in ("++", "--"):
            return self._increment(e.operand, e.op, prefix=True)
        if e.op == "&":
            raise not_implemented("taking an address ('&') outside an atomic built-in")
        value = self.eval(e.operand)
        if e.op == "!":
            return arith.logical_not(value)
        if e.op == "~":
            return arith.bit_not(value, self.elem_of(e.operand))
        if e.op == "-":  # (a device helper's C expression)
            return arith.binary("-", 0, value, self.elem_of(e.operand), self.mask)
        raise not_implemented(f"the operator '{e.op}'")

    def _e_Postfix(self, e: ast.Postfix) -> Any:
        return self._increment(e.operand, e.op, prefix=False)

    def _increment(self, operand: ast.Expr, op: str, prefix: bool) -> Any:
        if not isinstance(operand, ast.Ident):
            raise not_implemented(f"'{op}' on '{_text(operand)}'")
        sym = self.fn.refs[id(operand)]
        old = self.lookup(sym, operand.name)
        elem = sym.elem or dtypes.INT
        new = arith.convert(arith.binary("+" if op == "++" else "-", old, 1, elem), elem)
        self.assign(sym, operand.name, new)
        return new if prefix else old

    def _e_Ternary(self, e: ast.Ternary) -> Any:
        cond = arith.truth(self.eval(e.cond))
        info = self.info(e)
        elem = info.type.elem if info is not None and isinstance(info.type, ScalarType) else None

        def conv(v: Any) -> Any:
            return arith.convert(v, elem) if elem is not None else v

        if not isinstance(cond, torch.Tensor):
            return conv(self.eval(e.then if cond else e.other))
        then = self.masked(cond, lambda: conv(self.eval(e.then)), None)
        other = self.masked(~cond, lambda: conv(self.eval(e.other)), None)
        if then is None:
            return other
        if other is None:
            return then
        return torch.where(cond, arith.as_tensor(then, elem or dtypes.F64),
                           arith.as_tensor(other, elem or dtypes.F64))

    # ------------------------------------------------------------------ tuples, shapes
    def _e_TupleLit(self, e: ast.TupleLit) -> tuple:
        out: list[Any] = []
        for item in e.items:
            value = self.eval(item)
            out.extend(value if isinstance(value, tuple) else (value,))
        return tuple(out)

    def _e_ShapeLit(self, e: ast.ShapeLit) -> tuple[int, ...]:
        info = self.info(e)
        if info is not None and isinstance(info.type, ShapeType):
            return tuple(self.sym_value(d) for d in info.type.dims)
        return self._e_TupleLit(ast.TupleLit(e.span, e.items))

    def _e_Derive(self, e: ast.Derive) -> tuple[int, ...]:
        info = self.info(e)
        if info is not None and isinstance(info.type, ShapeType):
            return tuple(self.sym_value(d) for d in info.type.dims)
        base = self.eval(e.base)
        base = base if isinstance(base, tuple) else (base,)
        return tuple(self._derive_item(item, base) for item in e.items)

    def _derive_item(self, item: ast.Expr, base: tuple) -> Any:
        if isinstance(item, ast.DimRef):
            return base[item.index]
        if isinstance(item, ast.Binary):
            return arith.binary(item.op, self._derive_item(item.lhs, base),
                                self._derive_item(item.rhs, base), dtypes.INT)
        return self.eval(item)

    def _e_SizeOf(self, e: ast.SizeOf) -> arith.Value:
        if e.operand is None:
            raise not_implemented("this '|...|' expression")
        value: DataView | tuple[Any, ...] | arith.Value = self.eval(e.operand)
        if not isinstance(value, (DataView, tuple)):
            return value  # `|n|` of an integer is n (one per lane when it varies)
        total = 1
        for d in (value.shape if isinstance(value, DataView) else value):
            total *= int(d)
        return total

    # ------------------------------------------------------------------ calls, casts
    def _e_CallExpr(self, e: ast.CallExpr) -> Any:
        if e.name.startswith("__atomic"):
            from .atomics import atomic

            return atomic(self, e)
        if e.name in _FRAGMENT_CALLS:
            return self._fragment_call(e)
        if id(e) in self.fn.lanes:  # (instances run one at a time: no lane sees another)
            raise not_implemented(f"warp shuffles ('{e.name}')")
        args = [self.eval(a) for a in e.args]
        if e.name in BIT_BUILTINS:
            return arith.bits(e.name, args[0])
        if e.name == "cdiv":
            num, den = args
            return arith.binary("/", arith.binary("-", arith.binary("+", num, den, dtypes.INT),
                                                  1, dtypes.INT), den, dtypes.INT, self.mask)
        return arith.builtin(e.name, args, self._result_elem(self.info(e)))

    def _fragment_call(self, e: ast.CallExpr) -> None:
        """``copy(dst, src)``; ``reduce_max/reduce_sum(dst, src, dim)``: ``dst`` gets the
        maximum / sum of ``src`` along ``dim`` (computed in f64, rounded once)."""
        dst, src = self.data_of(e.args[0]), self.data_of(e.args[1])
        value = src.read(None)
        if e.name != "copy":
            dim = _int(self.eval(e.args[2]), "a reduction dimension")
            wide = value.to(torch.float64)
            value = wide.amax(dim) if e.name == "reduce_max" else wide.sum(dim)
        if tuple(value.shape) != dst.shape:
            raise InterpretError(f"'{e.name}' of a {list(value.shape)} value into "
                                 f"'{dst.name}' of shape {list(dst.shape)}")
        dst.write(arith.as_tensor(value, dst.elem))

    def _e_Cast(self, e: ast.Cast) -> Any:
        elem = dtypes.cast_target(e.target, e.quoted)
        if elem is None:
            raise not_implemented(f"casts to the C++ type \"{e.target}\"")
        return arith.convert(self.eval(e.operand), elem)

    def _e_SelectExpr(self, e: ast.SelectExpr) -> Any:
        """``select(k, v0, v1, ...)`` is ``v_k``, 0-based (spec 12.6)."""
        k = _int(self.eval(e.index), "a select index")
        if not 0 <= k < len(e.options):
            raise InterpretError(f"select index {k} is not in [0, {len(e.options)})")
        return self.eval(e.options[k])

    def _e_ExternCall(self, e: ast.ExternCall) -> Any:
        if e.inlined is not None:  # a device helper of this file
            return self.eval(e.inlined)
        raise not_implemented(f"external calls ('call {'::'.join(e.path)}')")

    def _e_NullLit(self, e: ast.NullLit) -> Any:
        raise not_implemented("'nullptr'")

    # ------------------------------------------------------------------ views (5.4)
    def _e_View(self, e: ast.View) -> DataView:
        return self.view(e)

    def view(self, e: ast.View) -> DataView:
        info = self.fn.views.get(id(e))
        data = self.data_of(e.base)
        if info is None:
            if e.ops:
                raise InterpretError(f"the view '{_text(e)}' was not checked")
            return data
        # the steps of a view alias come first; `e.base` already evaluates to the alias
        for op, step in zip(e.ops, info.steps[len(info.steps) - len(e.ops):]):
            data = self._view_step(data, op, step)
        return data

    def _view_step(self, data: DataView, op: ast.ViewOp, step: ViewStep) -> DataView:
        extents = [self.sym_value(x) for x in step.extents]
        if step.kind == "span_as":
            return data.reshaped(extents)
        if step.kind == "sqz":
            return data.squeezed()
        if step.kind == "modspan":
            raise not_implemented("'.modspan'")
        if op.strides is not None:
            # element strides replace the parent's; the origin (view.from offsets, or
            # subspan tile coordinates times the spacing) is counted in those strides
            strides = [_int(self.eval(s), "a stride") for s in op.strides]
            origin = [self._index_item(item) * self.sym_value(scale)
                      for item, scale in zip(step.indices, step.scales)]
            return data.restrided(extents, strides, origin)
        # offset o_d = index_d * scale_d (chunkat: index * extent; subspan: index * step;
        # view.from: the element offset itself), extents from the checker
        offsets = [self._index_item(item) * self.sym_value(scale)
                   for item, scale in zip(step.indices, step.scales)]
        tile = data.tiled(offsets, extents)
        if any(d is not None for d in step.dynamic):
            # runtime extents (`view(1, X, _)`): the tile has the static bound's shape and
            # holds data only up to X -- the rest is like a tail (spec 5.6)
            valid = [v if d is None else max(0, min(v, int(self.eval(d))))
                     for v, d in zip(tile.valid, step.dynamic)]
            tile = replace(tile, valid=tuple(valid))
        return tile

    def _index_item(self, item: IndexItem) -> int:
        if item.expr is None:
            return 0
        value = self.eval(item.expr)
        if item.member is not None:
            value = value[item.member]
        return _int(value, "a tile index")


# ---------------------------------------------------------------------- helpers


def _int_typed(info: ExprInfo) -> bool:
    t = info.type
    return isinstance(t, ScalarType) and (t.elem.is_int or t.elem.name == "bool")


def _int(value: Any, what: str) -> int:
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise not_implemented(f"{what} that differs between the lanes of a vectorised level")
        return int(value.item())
    return int(value)


def _index(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        return int(value.item())
    return value


def _merge(mask: torch.Tensor, new: Any, old: Any) -> Any:
    """``new`` on the active lanes, ``old`` elsewhere."""
    if isinstance(new, tuple):
        return new
    dtype = new.dtype if isinstance(new, torch.Tensor) else (
        old.dtype if isinstance(old, torch.Tensor) else None)
    if dtype is None:
        dtype = torch.float64 if isinstance(new, float) else torch.int32 if not isinstance(
            new, bool) else torch.bool
    new_t = new if isinstance(new, torch.Tensor) else torch.tensor(new, dtype=dtype)
    old_t = old.to(dtype) if isinstance(old, torch.Tensor) else torch.tensor(old, dtype=dtype)
    return torch.where(mask, new_t, old_t)


def _text(e: ast.Expr) -> str:
    try:
        from ...frontend.printer import format_expr

        return format_expr(e)
    except Exception:  # messages only
        return type(e).__name__


_FRAGMENT_CALLS = frozenset({"copy", "reduce_max", "reduce_sum"})


def _frag_elements(frag: Frag, name: str) -> DataView:
    """An accumulator's elements (``acc.at(i, j)`` in ``apply``): a view of its tile that
    reads and writes it in place."""
    if frag.value is None:
        raise InterpretError(f"the accumulator '{name}' holds no tile yet")
    if not frag.value.is_contiguous():
        frag.value = frag.value.contiguous()
    return DataView.whole(frag.value, frag.elem, "local", name)
