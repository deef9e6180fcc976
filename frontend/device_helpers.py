"""Device helpers: the file's own ``__device__`` functions that ``call`` names.

Real programs write warp reductions and atomics as small CUDA helpers defined in the same
file (``template <typename T> __device__ T SHFL_XOR(T v, int m, int w) { return
__shfl_xor_sync(~0u, v, m, w); }``) and ``call`` them from a kernel. A helper whose body is
one ``return`` of an expression over the CUDA intrinsics of ``INTRINSICS`` is inlined at
each call: its parameters are replaced by the call's arguments and each intrinsic by the
Croqtile built-in it means (``atomicAdd`` -> ``__atomic_add``, ``fabsf`` -> ``__fabs``), or,
for a warp shuffle, by the shuffle kept under its CUDA name (the checker and the backend
know the four shuffles). Anything else -- a loop in the body, a C cast, an intrinsic with no
equivalent -- leaves the call with the reason it cannot be inlined; the checker reports it
at the call (CQ0627).

Finding a helper is the region finder's job for host code: a token scan of the text
outside the ``__co__`` functions, aware of comments and strings. The parser reads the
returned expression (a helper body is C: a unary minus reads as one, see
``ExpressionParsing``) and ``inline`` substitutes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from . import syntax as ast
from .builtin_names import BIT_BUILTINS, cuda_builtin
from .pp_scanner import BLANK_KINDS, Scanner
from .source import Span

__all__ = ["HelperText", "Helper", "SHUFFLES", "ATOMIC_INTRINSICS", "find_helpers", "inline"]

_KEYWORD = "__device__"

# CUDA warp shuffles: name -> (kind, number of arguments). The first argument (the member
# mask) is not used: every lane of the `: thread` level takes part.
SHUFFLES: dict[str, tuple[str, int]] = {
    "__shfl_xor_sync": ("xor", 4), "__shfl_down_sync": ("down", 4),
    "__shfl_up_sync": ("up", 4), "__shfl_sync": ("idx", 4),
}

# CUDA atomics -> Croqtile atomic built-ins (spec 4.9)
ATOMIC_INTRINSICS: dict[str, str] = {
    "atomicAdd": "__atomic_add", "atomicSub": "__atomic_sub", "atomicMax": "__atomic_max",
    "atomicMin": "__atomic_min", "atomicExch": "__atomic_exch", "atomicCAS": "__atomic_cas",
    "atomicAnd": "__atomic_and", "atomicOr": "__atomic_or", "atomicXor": "__atomic_xor",
}


# words that may precede a helper's name and are not its name
_QUALIFIERS = frozenset({"__device__", "__forceinline__", "__noinline__", "__host__",
                         "inline", "static", "constexpr", "const", "unsigned", "signed"})


@dataclass(frozen=True)
class HelperText:
    """Where a ``__device__`` function's parts are: its name, parameter names, and the
    returned expression ``[start, end)`` (``problem`` says why there is none)."""

    name: str
    span: Span  # the name
    params: tuple[str, ...]
    start: int = 0
    end: int = 0
    problem: str = ""


@dataclass(frozen=True)
class Helper:
    """A helper ready to inline: ``body`` is its returned expression, or None with the
    reason in ``problem``."""

    name: str
    span: Span
    params: tuple[str, ...]
    body: ast.Expr | None
    problem: str = ""


def find_helpers(text: str, regions: Sequence[tuple[int, int]]) -> list[HelperText]:
    """The ``__device__`` function definitions of ``text`` outside ``regions``."""
    if _KEYWORD not in text:
        return []
    found: list[HelperText] = []
    pos = 0
    for start, end in [*sorted(regions), (len(text), len(text))]:
        if _KEYWORD in text[pos:start]:
            found += _scan(text, pos, start)
        pos = max(pos, end)
    return found


def _tokens(text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    scanner = Scanner(text)
    out: list[tuple[str, int, int]] = []
    pos = start
    while pos < end:
        kind, stop = scanner.token(pos)
        if kind not in BLANK_KINDS:
            out.append((kind, pos, stop))
        pos = stop
    return out


def _scan(text: str, start: int, end: int) -> list[HelperText]:
    toks = _tokens(text, start, end)
    words = [text[s:e] for _, s, e in toks]
    found: list[HelperText] = []
    i = 0
    while i < len(toks):
        if words[i] != _KEYWORD:
            i += 1
            continue
        j = i + 1
        while j < len(toks) and words[j] not in ("(", ";", "{", "}"):
            j += 1
        if j >= len(toks) or words[j] != "(" or toks[j - 1][0] != "id" \
                or words[j - 1] in _QUALIFIERS:
            i = j
            continue
        name, name_at = words[j - 1], toks[j - 1]
        close = _matching(words, j, "(", ")")
        if close is None:
            break
        params = _param_names(toks, words, j + 1, close)
        k = close + 1
        while k < len(toks) and toks[k][0] == "id":  # `const`, `noexcept`
            k += 1
        if k >= len(toks) or words[k] != "{":
            i = k  # a declaration
            continue
        body_end = _matching(words, k, "{", "}")
        if body_end is None:
            break
        span = Span(name_at[1], name_at[2])
        found.append(_body(text, toks, words, name, span, params, k + 1, body_end))
        i = body_end + 1
    return found


def _matching(words: list[str], at: int, opening: str, closing: str) -> int | None:
    depth = 0
    for k in range(at, len(words)):
        if words[k] == opening:
            depth += 1
        elif words[k] == closing:
            depth -= 1
            if depth == 0:
                return k
    return None


def _param_names(toks: list[tuple[str, int, int]], words: list[str], start: int,
                 end: int) -> tuple[str, ...]:
    names: list[str] = []
    last = ""
    depth = 0
    for k in range(start, end):
        w = words[k]
        if w in "(<[":
            depth += 1
        elif w in ")>]":
            depth -= 1
        elif w == "," and depth == 0:
            names.append(last)
            last = ""
        elif toks[k][0] == "id" and depth == 0:
            last = w
    if last and last != "void":
        names.append(last)
    return tuple(names)


def _body(text: str, toks: list[tuple[str, int, int]], words: list[str], name: str,
          span: Span, params: tuple[str, ...], start: int, end: int) -> HelperText:
    """The helper whose body is tokens ``[start, end)``: one ``return expr;``."""
    if end - start < 3 or words[start] != "return" or words[end - 1] != ";" \
            or ";" in words[start:end - 1]:
        return HelperText(name, span, params, problem="its body is not one 'return' of an "
                                                      "expression")
    return HelperText(name, span, params, toks[start + 1][1], toks[end - 1][1])


def inline(helper: Helper, call: ast.ExternCall) -> tuple[ast.Expr | None, str]:
    """``call``'s inlined expression, or None and why it cannot be inlined."""
    if helper.body is None:
        return None, helper.problem
    if len(call.args) != len(helper.params):
        return None, (f"it takes {len(helper.params)} argument(s), the call passes "
                      f"{len(call.args)}")
    args = dict(zip(helper.params, call.args))
    problem: list[str] = []
    expr = _substitute(helper.body, args, problem)
    if problem or not isinstance(expr, ast.Expr):
        return None, problem[0] if problem else "its body is not an expression"
    return expr, ""


def _substitute(node: ast.Node, args: dict[str, ast.Expr], problem: list[str]) -> ast.Node:
    """A fresh copy of ``node`` (every node new: the checker keys facts by node) with the
    parameters replaced and the intrinsics renamed."""
    if isinstance(node, ast.Ident) and node.name in args:
        return args[node.name]
    if isinstance(node, ast.Select) and isinstance(node.base, ast.Ident) and \
            node.base.name not in args:  # `f(x)` reads as a selection in Croqtile: a call here
        node = ast.CallExpr(node.span, node.base.name, (node.index,))
    if isinstance(node, ast.CallExpr):
        mapped = _intrinsic(node.name)
        if mapped is None:
            problem.append(f"it calls '{node.name}', which has no Triton equivalent")
            return node
        given = node.args[1:] if node.name in SHUFFLES else node.args  # (no member mask)
        new_args = tuple(_substitute(a, args, problem) for a in given)
        return dataclasses.replace(node, name=mapped, args=new_args)  # type: ignore[arg-type]  # a Call
    changes: dict[str, object] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ast.Node):
            changes[f.name] = _substitute(value, args, problem)
        elif isinstance(value, tuple) and any(isinstance(v, ast.Node) for v in value):
            changes[f.name] = tuple(_substitute(v, args, problem) if isinstance(v, ast.Node)
                                    else v for v in value)
    return dataclasses.replace(node, **changes)  # type: ignore[arg-type]  # per-field types


def _intrinsic(name: str) -> str | None:
    """The name a helper's call of ``name`` takes in Croqtile (None: no equivalent)."""
    if name in SHUFFLES:
        return name
    if name in BIT_BUILTINS:
        return name
    return ATOMIC_INTRINSICS.get(name) or cuda_builtin(name)
