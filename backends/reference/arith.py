"""Scalar arithmetic in the declared element types (spec 3.1, 3.6).

Values are Python numbers for the control types ``int`` and ``bool`` (loop indices,
sizes, tile indices) and torch tensors for element-typed values: 0-d inside one
instance, 1-d when the instances of a parallel level run side by side as lanes (see
``lanes.py``). Every operation converts both operands to the result type the checker
computed with the promotion rules of spec 3.6 and computes in that type, so an f16
expression rounds like f16 arithmetic on the device. Integer ``/`` and ``%`` truncate
toward zero as in C.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Union

import torch

from ...frontend.sema import dtypes
from ...frontend.sema.dtypes import ElemType
from .errors import InterpretError, not_implemented

Value = Union[int, float, bool, torch.Tensor]

# element types torch cannot compute in on the CPU: compute in a wider type, convert back
# (u64 computes in int64: + - * and bit operations wrap alike; operations whose result
# depends on the sign bit are refused for values >= 2**63, see _unsigned_ok)
_WIDE = {
    "f8_e4m3": torch.float32, "f8_e5m2": torch.float32,
    "u16": torch.int64, "u32": torch.int64, "u64": torch.int64,
}


def _unsigned_ok(elem: ElemType, op: str, *operands: Any) -> None:
    if elem.name != "u64" or op not in ("/", "%", ">>", "<", "<=", ">", ">="):
        return
    for x in operands:
        if (x < 0).any() if isinstance(x, torch.Tensor) else x < 0:
            raise not_implemented(f"'{op}' on u64 values of 2**63 or more")


def torch_dtype(elem: ElemType) -> torch.dtype:
    if elem.torch is None:
        raise not_implemented(f"the element type '{elem.name}' (torch has no such dtype)")
    dtype: torch.dtype = getattr(torch, elem.torch)
    return dtype


_DTYPE_ELEM: dict[torch.dtype, ElemType] = {}


def elem_of_dtype(dtype: torch.dtype) -> ElemType:
    """The element type stored in a torch dtype."""
    if not _DTYPE_ELEM:
        for elem in dtypes.ELEM_TYPES.values():
            if elem.torch and elem.name != "int":
                _DTYPE_ELEM.setdefault(getattr(torch, elem.torch), elem)
    return _DTYPE_ELEM[dtype]


def promote(a: ElemType, b: ElemType) -> ElemType:
    """The common type of a binary operation (spec 3.6); two control ints stay ``int``
    (Python numbers). Types with no common type (f16 with bf16, rejected by the checker)
    compute in f64."""
    if is_control(a) and is_control(b):
        return dtypes.INT
    return dtypes.promote(a, b) or dtypes.F64


def is_control(elem: ElemType) -> bool:
    """``int`` and ``bool`` are control scalars, kept as Python numbers (spec 3.2)."""
    return elem.name in ("int", "bool")


def wrap32(value: int) -> int:
    """``int`` is 32-bit signed: wrap like the device does."""
    return (value + 2**31) % 2**32 - 2**31


def is_lanes(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 1


def convert(value: Value, elem: ElemType) -> Value:
    """``value`` converted to ``elem`` (assignment conversion, spec 3.6): floats to
    integers truncate toward zero, integers wrap."""
    if elem.name == "bool":
        if isinstance(value, torch.Tensor):
            return bool(value.item()) if value.dim() == 0 else value != 0
        return bool(value)
    if elem.name == "int":
        if isinstance(value, torch.Tensor):
            if value.dim() == 0:
                return wrap32(int(value.item()))
            return _to(value, torch.int32)
        return wrap32(int(value))
    dtype = torch_dtype(elem)
    if isinstance(value, torch.Tensor):
        return _to(value, dtype)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return torch.tensor(_int64(value), dtype=torch.int64).to(dtype)
    return torch.tensor(value, dtype=torch.float64).to(dtype)


def _int64(value: int) -> int:
    """``value`` wrapped to 64 bits (two's complement), as the int64 torch computes in."""
    return (value + 2**63) % 2**64 - 2**63


def _to(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if value.dtype == dtype:
        return value
    if value.dtype.is_floating_point and not dtype.is_floating_point and dtype != torch.bool:
        value = torch.trunc(value.to(torch.float64)).to(torch.int64)
    return value.to(dtype)


def as_tensor(value: Value, elem: ElemType) -> torch.Tensor:
    """``value`` as a tensor of ``elem`` (control types become int32 / bool tensors)."""
    if elem.name == "int":
        return _to(value, torch.int32) if isinstance(value, torch.Tensor) else \
            torch.tensor(wrap32(int(value)), dtype=torch.int32)
    if elem.name == "bool":
        return value != 0 if isinstance(value, torch.Tensor) else torch.tensor(bool(value))
    out = convert(value, elem)
    assert isinstance(out, torch.Tensor)
    return out


# ------------------------------------------------------------------------- operators

_TORCH_OPS: dict[str, Callable[[Any, Any], torch.Tensor]] = {
    "+": torch.add, "-": torch.sub, "*": torch.mul,
    "&": torch.bitwise_and, "|": torch.bitwise_or, "^": torch.bitwise_xor,
    "<<": torch.bitwise_left_shift, ">>": torch.bitwise_right_shift,
}


def binary(op: str, a: Value, b: Value, elem: ElemType,
           mask: torch.Tensor | None = None) -> Value:
    """``a op b`` computed in ``elem`` (the checker's promoted type of the expression)."""
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        if is_control(elem):
            return _python_int(op, int(a), int(b))
        a = as_tensor(a, elem)
    dtype = torch_dtype(elem) if elem.name != "int" else torch.int32
    wide = _WIDE.get(elem.name)
    ta, tb = _operand(a, elem, dtype, wide), _operand(b, elem, dtype, wide)
    _unsigned_ok(elem, op, ta, tb)
    integer = not dtype.is_floating_point
    if op == "%" and not isinstance(ta, torch.Tensor):  # (then b is one: see above)
        ta = torch.tensor(ta, dtype=tb.dtype)  # torch.fmod takes no number as the dividend
    if op in ("/", "%") and integer:
        tb = _nonzero_divisor(tb, mask)
        out = torch.div(ta, tb, rounding_mode="trunc") if op == "/" else torch.fmod(ta, tb)
    elif op == "/":
        out = torch.div(ta, tb)
    elif op == "%":
        out = torch.fmod(ta, tb)
    elif op in _TORCH_OPS:
        if op in ("&", "|", "^", "<<", ">>") and not integer:
            raise InterpretError(f"the operator '{op}' needs integer operands")
        out = _TORCH_OPS[op](ta, tb)
    else:
        raise not_implemented(f"the operator '{op}'")
    return out if out.dtype == dtype else out.to(dtype)


def _operand(value: Value, elem: ElemType, dtype: torch.dtype,
             wide: torch.dtype | None) -> Any:
    """A tensor converted to the computation type, or a Python number already rounded to
    ``elem`` (torch keeps a tensor's dtype in operations with Python numbers)."""
    if isinstance(value, torch.Tensor):
        if value.dtype != dtype:
            value = _to(value, dtype)
        return value.to(wide) if wide is not None else value
    return scalar_in(value, elem)


_SCALARS: dict[tuple[object, str], int | float] = {}


def scalar_in(value: int | float | bool, elem: ElemType) -> int | float:
    """A Python number rounded (or wrapped) to ``elem``, as a Python number."""
    key = (value, elem.name)
    known = _SCALARS.get(key)
    if known is None:
        known = as_tensor(value, elem).item()
        if isinstance(known, bool):
            known = int(known)
        if elem.name in _WIDE and isinstance(known, int):
            known = _int64(known)  # unsigned types compute in int64
        if len(_SCALARS) < 4096:
            _SCALARS[key] = known
    return known


def _nonzero_divisor(divisor: Any, mask: torch.Tensor | None) -> Any:
    if not isinstance(divisor, torch.Tensor):
        if divisor == 0:
            raise InterpretError("integer division by zero")
        return divisor
    zero = divisor == 0
    if mask is not None and divisor.dim() > 0:
        if bool((zero & mask).any()):
            raise InterpretError("integer division by zero")
        return torch.where(zero, torch.ones_like(divisor), divisor)
    if bool(zero.any()):
        raise InterpretError("integer division by zero")
    return divisor


def _python_int(op: str, a: int, b: int) -> int:
    if op == "+":
        return wrap32(a + b)
    if op == "-":
        return wrap32(a - b)
    if op == "*":
        return wrap32(a * b)
    if op in ("/", "%"):
        if b == 0:
            raise InterpretError("integer division by zero")
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C: toward zero
        return quotient if op == "/" else a - b * quotient
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "<<":
        return wrap32(a << b)
    if op == ">>":
        return a >> b
    raise not_implemented(f"the operator '{op}'")


_COMPARE = {"==": torch.eq, "!=": torch.ne, "<": torch.lt, "<=": torch.le, ">": torch.gt,
            ">=": torch.ge}


_SWAPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def compare(op: str, a: Value, b: Value, elem: ElemType) -> bool | torch.Tensor:
    """A comparison in the common type of both operands."""
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        x, y = (int(a), int(b)) if is_control(elem) else (a, b)
        return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
                ">=": x >= y}[op]
    dtype = torch_dtype(elem) if elem.name != "int" else torch.int32
    wide = _WIDE.get(elem.name)
    if not isinstance(a, torch.Tensor):
        a, b, op = b, a, _SWAPPED[op]
    ta, tb = _operand(a, elem, dtype, wide), _operand(b, elem, dtype, wide)
    _unsigned_ok(elem, op, ta, tb)
    out = _COMPARE[op](ta, tb)
    return bool(out.item()) if out.dim() == 0 else out


def truth(value: Value) -> bool | torch.Tensor:
    """A condition: a Python bool for one instance, a bool tensor for lanes."""
    if isinstance(value, torch.Tensor):
        return bool(value.item() != 0) if value.dim() == 0 else value != 0
    return bool(value)


def logical_not(value: Value) -> bool | torch.Tensor:
    t = truth(value)
    return ~t if isinstance(t, torch.Tensor) else not t


def bits(name: str, value: Value) -> Value:
    """``__popc`` (set bits) / ``__clz`` (leading zero bits) of the low 32 bits."""
    if isinstance(value, torch.Tensor):
        return torch.tensor([bits(name, int(v)) for v in value.flatten().tolist()],
                            dtype=torch.int32).view(value.shape)
    word = int(value) & 0xFFFFFFFF
    return bin(word).count("1") if name == "__popc" else 32 - word.bit_length()


def bit_not(value: Value, elem: ElemType) -> Value:
    if isinstance(value, torch.Tensor):
        return torch.bitwise_not(value)
    return wrap32(~int(value)) if elem.name == "int" else ~int(value)


def poison(elem: ElemType) -> float | int:
    """The value of undefined elements in ``undefined="poison"`` mode (spec 5.6)."""
    if elem.is_float:
        return math.nan
    if elem.name == "bool":
        return 1
    if elem.kind is dtypes.Kind.UINT:
        return 77
    return -123456789 if elem.bits >= 32 else -77


# ------------------------------------------------------------------------- built-ins

_UNARY_MATH = {
    "__exp": torch.exp, "__exp2f": torch.exp2, "__expm1": torch.expm1, "__log": torch.log,
    "__log1p": torch.log1p, "__sqrt": torch.sqrt, "__rsqrt": torch.rsqrt,
    "__frcp_rn": torch.reciprocal, "__fabs": torch.abs, "__sin": torch.sin, "__cos": torch.cos,
    "__tan": torch.tan, "__asin": torch.asin, "__acos": torch.acos, "__atan": torch.atan,
    "__sinh": torch.sinh, "__cosh": torch.cosh, "__tanh": torch.tanh, "__ceil": torch.ceil,
    # C's round: halfway cases away from zero
    "__floor": torch.floor, "__round": lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5),
    "__sign": torch.sign, "__sigmoid": torch.sigmoid,
    # the reference compiler's GELU is the tanh approximation; softplus is log1p(exp(x))
    "__gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "__softplus": lambda x: torch.log1p(torch.exp(x)),
}


def builtin(name: str, args: list[Value], elem: ElemType) -> Value:
    """Math built-ins (spec 4.9) computed in ``elem``, the checker's result type."""
    if name in ("__max", "__min"):
        if is_control(elem) and not any(isinstance(a, torch.Tensor) for a in args):
            return (max if name == "__max" else min)(int(args[0]), int(args[1]))
        fn = torch.maximum if name == "__max" else torch.minimum
        return fn(as_tensor(args[0], elem), as_tensor(args[1], elem))
    if name in ("__alignup", "__aligndown"):
        value, align = args
        if not any(isinstance(a, torch.Tensor) for a in args):
            value, align = int(value), int(align)
        down = value // align * align
        if name == "__aligndown":
            return down
        return (value + align - 1) // align * align
    if name == "__isfinite":  # of the argument as it is (the result type is int)
        value = args[0]
        return truth(torch.isfinite(value if isinstance(value, torch.Tensor)
                                    else torch.tensor(float(value))))
    if name not in _UNARY_MATH and name not in ("__pow", "__atan2", "__fmaf"):
        raise not_implemented(f"the built-in '{name}'")
    tensors = [as_tensor(a, elem) for a in args]
    dtype = tensors[0].dtype
    wide = _WIDE.get(elem.name, dtype)
    tensors = [t.to(wide) for t in tensors]
    if name in _UNARY_MATH and len(tensors) == 1:
        out = _UNARY_MATH[name](tensors[0])
    elif name == "__pow":
        out = torch.pow(tensors[0], tensors[1])
    elif name == "__atan2":
        out = torch.atan2(tensors[0], tensors[1])
    elif name == "__fmaf":  # one rounding of the exact a * b + c (f64 holds the product)
        out = tensors[0].double() * tensors[1].double() + tensors[2].double()
    else:
        raise not_implemented(f"the built-in '{name}'")
    return out.to(dtype)
