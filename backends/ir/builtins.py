"""Math built-ins (spec 4.9) as tile IR: one rule per built-in.

Three kinds of rule:

- ``tl.math`` functions Triton has everywhere (``exp``, ``sqrt``, ``sin``, ...);
- formulas of those that are exact enough on every device (``__sign``, ``__gelu``, ...);
- functions only libdevice has (``sinh``, ``atan2``, ``pow``, ...). On the GPU they call
  libdevice; Triton's CPU interpreter has no libdevice, so a constexpr branch computes
  them there from ``tl.math`` in float64 (accurate to far below the f32 rounding) and
  rounds once to the result type.

16-bit floats are computed in f32 and rounded once, as the reference does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from ..ir import build as b
from ..ir import nodes as ir

if TYPE_CHECKING:
    from ...frontend.source import Span
    from .state import KernelState

F64 = ir.DType.F64
Let = Callable[[ir.Expr], ir.Expr]  # names a value of a formula (see libdevice)

# built-in -> tl.math function
TL_MATH = {
    "__exp": "exp", "__exp2f": "exp2", "__log": "log", "__sqrt": "sqrt", "__rsqrt": "rsqrt",
    "__fabs": "abs", "__sin": "sin", "__cos": "cos", "__floor": "floor", "__ceil": "ceil",
    "__fmaf": "fma", "__sigmoid": "sigmoid",
}

# built-in -> libdevice function (GPU); the CPU computes the formula in LIBDEVICE_CPU
LIBDEVICE = {
    "__sinh": "sinh", "__cosh": "cosh", "__tanh": "tanh", "__tan": "tan", "__asin": "asin",
    "__acos": "acos", "__atan": "atan", "__atan2": "atan2", "__expm1": "expm1",
    "__log1p": "log1p", "__pow": "pow", "__round": "round",
}

# built-ins written as formulas of other rules on every device
FORMULAS = ("__sign", "__isfinite", "__frcp_rn", "__gelu", "__softplus", "__alignup",
            "__aligndown", "__max", "__min")

SUPPORTED = frozenset(TL_MATH) | frozenset(LIBDEVICE) | frozenset(FORMULAS)


def lower_builtin(kl: KernelState, name: str, args: list[ir.Expr], dtype: ir.DType,
                  span: Span | None) -> ir.Expr:
    """The value of ``name(args)`` in ``dtype`` (the checker's result type)."""
    if name in ("__max", "__min"):
        args = [b.cast(a, dtype) for a in args]
        return _call("maximum" if name == "__max" else "minimum", *args)
    if name in ("__alignup", "__aligndown"):
        value, align = (b.cast(a, b.I32) for a in args)
        if name == "__alignup":  # (value + align - 1) / align * align
            value = b.binary("-", b.add(value, align), b.const(1))
        return b.cast(b.mul(b.binary("//", value, align), align), dtype)
    if name == "__isfinite":
        x = args[0]
        if not x.dtype.is_float:
            return b.cast(b.const(1), dtype)
        x = kl.let("x", x)
        finite = b.binary("&", b.binary("==", x, x, b.I1),
                          b.binary("!=", _call("abs", x), b.const(math.inf, x.dtype), b.I1),
                          b.I1)
        return b.cast(finite, dtype)
    wide = _math_dtype(dtype)
    args = [b.cast(a, wide) for a in args]
    if name in TL_MATH:
        return b.cast(_call(TL_MATH[name], *args), dtype)
    if name == "__sign":
        x = kl.let("x", args[0])
        one = b.const(1, wide)
        zero = b.const(0, wide)
        pos = ir.Where(x.axes, wide, b.binary(">", x, zero, b.I1), one, zero)
        neg = ir.Where(x.axes, wide, b.binary("<", x, zero, b.I1), one, zero)
        return b.cast(b.binary("-", pos, neg, wide), dtype)
    if name == "__frcp_rn":
        return b.cast(b.binary("/", b.const(1.0, wide), args[0], wide), dtype)
    if name == "__gelu":
        # the tanh approximation (as the reference compiler): 0.5 x (1 + tanh(u)) is
        # x * sigmoid(2u), which needs no libdevice and does not overflow
        x = kl.let("x", args[0])
        cube = b.binary("*", b.binary("*", x, x, wide), x, wide)
        inner = b.binary("+", x, b.binary("*", b.const(0.044715, wide), cube, wide), wide)
        u = b.binary("*", b.const(2 * 0.7978845608028654, wide), inner, wide)
        return b.cast(b.binary("*", x, _call("sigmoid", u), wide), dtype)
    if name == "__softplus":  # log1p(exp(x))
        return b.cast(libdevice(kl, "log1p", [_call("exp", args[0])], wide, span), dtype)
    return b.cast(libdevice(kl, LIBDEVICE[name], args, wide, span), dtype)


def libdevice(kl: KernelState, fn: str, args: list[ir.Expr], dtype: ir.DType,
              span: Span | None) -> ir.Var:
    """``libdevice.fn(args)`` on the GPU, the float64 formula on the CPU."""
    args = [kl.let("x", a) for a in args]
    axes = b.merged(*args)
    name = kl.fresh(fn)
    gpu = ir.Call(axes, dtype, f"libdevice.{fn}", tuple(args))
    steps: list[ir.Stmt] = []

    def let(value: ir.Expr) -> ir.Expr:
        """Name an intermediate value (formulas use some several times)."""
        if isinstance(value, (ir.Const, ir.Var)):
            return value
        var = kl.fresh("t")
        steps.append(ir.Let(span, var, value))
        return ir.Var(value.axes, value.dtype, var)

    wide = [let(b.cast(a, F64)) for a in args]
    cpu = b.cast(_CPU[fn](let, *wide), dtype)
    kl.emit(ir.Branch(span, kl.cpu_flag(), steps + [ir.Let(span, name, cpu)],
                      [ir.Let(span, name, gpu)]))
    return ir.Var(axes, dtype, name)


def _math_dtype(dtype: ir.DType) -> ir.DType:
    """The type a math function computes in: f32 for 16-bit floats and integers."""
    return dtype if dtype in (ir.DType.F32, ir.DType.F64) else ir.DType.F32


# ------------------------------------------------------------------ float64 formulas (CPU)


def _call(fn: str, *args: ir.Expr) -> ir.Expr:
    return ir.Call(b.merged(*args), args[0].dtype, fn, tuple(args))


def _c(value: float) -> ir.Expr:
    return b.const(value, F64)


def _op(op: str, lhs: ir.Expr, rhs: ir.Expr) -> ir.Expr:
    return b.binary(op, lhs, rhs, F64)


def _cmp(op: str, lhs: ir.Expr, rhs: ir.Expr) -> ir.Expr:
    return b.binary(op, lhs, rhs, b.I1)


def _where(cond: ir.Expr, then: ir.Expr, other: ir.Expr) -> ir.Expr:
    return ir.Where(b.merged(cond, then, other), F64, cond, then, other)


def _neg(x: ir.Expr) -> ir.Expr:
    return _op("-", _c(0.0), x)


def _sinh(let: Let, x: ir.Expr) -> ir.Expr:
    return _op("*", _op("-", _call("exp", x), _call("exp", _neg(x))), _c(0.5))


def _cosh(let: Let, x: ir.Expr) -> ir.Expr:
    return _op("*", _op("+", _call("exp", x), _call("exp", _neg(x))), _c(0.5))


def _tanh(let: Let, x: ir.Expr) -> ir.Expr:
    t = _call("exp", _op("*", _c(-2.0), _call("abs", x)))
    t = let(t)
    r = let(_op("/", _op("-", _c(1.0), t), _op("+", _c(1.0), t)))
    return _where(_cmp("<", x, _c(0.0)), _neg(r), r)


def _tan(let: Let, x: ir.Expr) -> ir.Expr:
    return _op("/", _call("sin", x), _call("cos", x))


def _atan(let: Let, x: ir.Expr) -> ir.Expr:
    """|x| > 1 folds to pi/2 - atan(1/|x|); two half-angle steps bring the argument below
    tan(pi/16), where 13 terms of the series are exact in float64."""
    a = let(_call("abs", x))
    inverted = let(_cmp(">", a, _c(1.0)))
    z = let(_where(inverted, _op("/", _c(1.0), _where(inverted, a, _c(1.0))), a))
    for _ in range(2):
        z = let(_op("/", z, _op("+", _c(1.0), _call("sqrt", _op("+", _c(1.0), _op("*", z, z))))))
    z2 = let(_op("*", z, z))
    series = _c(1.0 / 25)  # sum of (-1)^k z^2k / (2k + 1), k = 0..12, by Horner
    for k in range(11, -1, -1):
        series = _op("+", _c((-1) ** k / (2 * k + 1)), _op("*", z2, series))
    r = let(_op("*", _c(4.0), _op("*", z, series)))
    r = let(_where(inverted, _op("-", _c(math.pi / 2), r), r))
    return _where(_cmp("<", x, _c(0.0)), _neg(r), r)


def _atan2(let: Let, y: ir.Expr, x: ir.Expr) -> ir.Expr:
    safe = _where(_cmp("==", x, _c(0.0)), _c(1.0), x)
    base = let(_atan(let, _op("/", y, safe)))
    left = _where(_cmp("<", y, _c(0.0)), _op("-", base, _c(math.pi)),
                  _op("+", base, _c(math.pi)))
    axis = _where(_cmp(">", y, _c(0.0)), _c(math.pi / 2),
                  _where(_cmp("<", y, _c(0.0)), _c(-math.pi / 2), _c(0.0)))
    return _where(_cmp(">", x, _c(0.0)), base,
                  _where(_cmp("<", x, _c(0.0)), left,
                         _where(_cmp("==", x, x), axis, x)))


def _asin(let: Let, x: ir.Expr) -> ir.Expr:
    return _atan2(let, x, let(_call("sqrt", _op("-", _c(1.0), _op("*", x, x)))))


def _acos(let: Let, x: ir.Expr) -> ir.Expr:
    return _atan2(let, let(_call("sqrt", _op("-", _c(1.0), _op("*", x, x)))), x)


def _expm1(let: Let, x: ir.Expr) -> ir.Expr:
    small = _op("+", x, _op("*", _op("*", x, x), _op("+", _c(0.5), _op("/", x, _c(6.0)))))
    return _where(_cmp("<", _call("abs", x), _c(1e-5)), small,
                  _op("-", _call("exp", x), _c(1.0)))


def _log1p(let: Let, x: ir.Expr) -> ir.Expr:
    """log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (Goldberg)."""
    u = let(_op("+", _c(1.0), x))
    exact = let(_cmp("==", u, _c(1.0)))
    den = _where(exact, _c(1.0), _op("-", u, _c(1.0)))
    positive = _where(_cmp(">", u, _c(0.0)), u, _c(1.0))
    scaled = _op("/", _op("*", _call("log", positive), x), den)
    result = _where(exact, x, scaled)
    return _where(_cmp(">", u, _c(0.0)), result,
                  _where(_cmp("==", u, _c(0.0)), _c(-math.inf), _c(math.nan)))


def _pow(let: Let, x: ir.Expr, y: ir.Expr) -> ir.Expr:
    """C's pow: |x|^y with the sign of x for odd integral y; NaN for a negative base and
    a fractional exponent; x^0 = 1."""
    a = let(_call("abs", x))
    zero = let(_cmp("==", a, _c(0.0)))
    magnitude = let(_call("exp", _op("*", y, _call("log", _where(zero, _c(1.0), a)))))
    magnitude = let(_where(zero, _where(_cmp(">", y, _c(0.0)), _c(0.0), _c(math.inf)),
                           magnitude))
    integral = let(_cmp("==", _call("floor", y), y))
    half = let(_op("*", y, _c(0.5)))
    odd = b.binary("&", integral, _cmp("!=", _call("floor", half), half), b.I1)
    signed = _where(odd, _neg(magnitude), magnitude)
    negative = _where(integral, signed, _c(math.nan))
    result = _where(_cmp("<", x, _c(0.0)), negative, magnitude)
    return _where(_cmp("==", y, _c(0.0)), _c(1.0), result)


def _round(let: Let, x: ir.Expr) -> ir.Expr:
    """Halfway cases away from zero (C's round)."""
    r = let(_call("floor", _op("+", _call("abs", x), _c(0.5))))
    return _where(_cmp("<", x, _c(0.0)), _neg(r), r)


_CPU: dict[str, Callable[..., ir.Expr]] = {
    "sinh": _sinh, "cosh": _cosh, "tanh": _tanh, "tan": _tan, "asin": _asin, "acos": _acos,
    "atan": _atan, "atan2": _atan2, "expm1": _expm1, "log1p": _log1p, "pow": _pow,
    "round": _round,
}
