"""Names of the math built-ins (spec 4.9), and the built-in to suggest for a name that is
none of them: a CUDA spelling (``__expf``, ``sqrtf``, ``fmaxf``) maps to its Croqtile
equivalent, any other name to the nearest built-in by spelling.

The checker types calls of ``FLOAT_BUILTINS``; a backend says which built-ins it lowers
and passes that set to ``suggest_builtin`` so that it only suggests what it can compile.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Built-ins whose result has the float type of their first argument (f32 otherwise).
FLOAT_BUILTINS = frozenset({
    "__exp", "__exp2f", "__expm1", "__log", "__log1p", "__pow", "__sqrt", "__rsqrt",
    "__frcp_rn", "__fabs", "__fmaf", "__sin", "__cos", "__tan", "__asin", "__acos", "__atan",
    "__atan2", "__sinh", "__cosh", "__tanh", "__ceil", "__floor", "__round", "__sign",
    "__gelu", "__sigmoid", "__softplus",
})

# Every math built-in the checker knows.
MATH_BUILTINS = FLOAT_BUILTINS | {"__max", "__min", "__isfinite", "__alignup", "__aligndown"}

# Integer bit built-ins (32-bit): population count and leading zeros; the result is an int.
BIT_BUILTINS = frozenset({"__popc", "__clz"})

# CUDA and C spellings whose Croqtile name is not just the name without its `f` suffix
# and with a `__` prefix (those are found by rule: `__expf`, `sqrtf`, `tanhf`, ...).
CUDA_EQUIVALENTS: dict[str, str] = {
    "fmaxf": "__max", "fmax": "__max", "max": "__max", "__fmaxf": "__max",
    "fminf": "__min", "fmin": "__min", "min": "__min", "__fminf": "__min",
    "abs": "__fabs", "fabsf": "__fabs", "exp2f": "__exp2f", "exp2": "__exp2f",
    "__exp2": "__exp2f", "__fmaf_rn": "__fmaf", "fma": "__fmaf", "__fsqrt_rn": "__sqrt",
    "__frsqrt_rn": "__rsqrt", "__frcp": "__frcp_rn", "isfinite": "__isfinite",
    "__isfinitef": "__isfinite", "rintf": "__round", "roundf": "__round",
}

# C math functions with no built-in: no near spelling is suggested for them (`log2f` is
# not `__log`).
NO_EQUIVALENT = frozenset({
    "log2", "log10", "exp10", "cbrt", "erf", "erfc", "erfinv", "hypot", "fmod", "trunc",
    "copysign", "sincos", "fdivide", "saturate", "lgamma", "tgamma", "remainder",
})


def cuda_builtin(name: str) -> str | None:
    """The built-in a CUDA or C math function means exactly (``__expf`` -> ``__exp``,
    ``fmaxf`` -> ``__max``, ``rsqrtf`` -> ``__rsqrt``); None when there is none."""
    if name in MATH_BUILTINS:
        return name
    mapped = CUDA_EQUIVALENTS.get(name)
    if mapped is not None:
        return mapped
    stem = name.lstrip("_")
    for candidate in (f"__{stem}", f"__{stem[:-1]}" if stem.endswith("f") else ""):
        if candidate in MATH_BUILTINS:
            return candidate
    return None


def suggest_builtin(name: str, known: Iterable[str] = MATH_BUILTINS) -> str | None:
    """The built-in of ``known`` that ``name`` most likely means, or None."""
    names = frozenset(known)
    if name in names:
        return None
    mapped = CUDA_EQUIVALENTS.get(name)
    if mapped in names:
        return mapped
    stem = name.lstrip("_")
    if stem in NO_EQUIVALENT or stem[:-1] in NO_EQUIVALENT and stem.endswith("f"):
        return None
    for candidate in (f"__{stem}", f"__{stem[:-1]}" if stem.endswith("f") else ""):
        if candidate in names:
            return candidate
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
    return close[0] if close else None


def builtin_hint(name: str, known: Iterable[str] = MATH_BUILTINS) -> str | None:
    """``did you mean the built-in `__exp`?`` for ``__expf``; None when nothing is close."""
    suggestion = suggest_builtin(name, known)
    if suggestion is None:
        return None
    return f"did you mean the built-in `{suggestion}`?"
