"""Tokens of Croqtile and the tables of lexical facts (spec 2.4 - 2.6, 3.1, 4.9)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .source import Span


class TokenKind(enum.Enum):
    NAME = "identifier"
    KEYWORD = "keyword"
    INT = "integer literal"
    FLOAT = "float literal"
    STRING = "string literal"
    DOT_WORD = "dotted word"  # `.copy`, `.span_as`: the dot belongs to the token
    PUNCT = "punctuation"
    EOF = "end of input"


@dataclass(frozen=True, slots=True)
class Token:
    """One token; ``value`` is the int / float / decoded string of a literal, else None."""

    kind: TokenKind
    text: str
    span: Span
    value: int | float | str | None = None

    @property
    def int_value(self) -> int:
        """The value of an INT token."""
        assert isinstance(self.value, int), self
        return self.value

    @property
    def float_value(self) -> float:
        """The value of a FLOAT token."""
        assert isinstance(self.value, float), self
        return self.value

    @property
    def str_value(self) -> str:
        """The decoded text of a STRING token."""
        assert isinstance(self.value, str), self
        return self.value


def describe(token: Token) -> str:
    """How a token reads in 'expected X, found Y' messages."""
    kind = token.kind
    if kind is TokenKind.EOF:
        return "end of input"
    if kind is TokenKind.NAME:
        return f"identifier '{token.text}'"
    if kind is TokenKind.KEYWORD:
        return f"keyword '{token.text}'"
    if kind is TokenKind.STRING:
        return "a string literal"
    if kind in (TokenKind.INT, TokenKind.FLOAT):
        return f"number '{token.text}'"
    return f"'{token.text}'"


# ----------------------------------------------------------------------------------------
# Element types (spec 3.1). Aliases are canonicalised by the parser.
# ----------------------------------------------------------------------------------------

ELEM_ALIASES: dict[str, str] = {
    "half": "f16",
    "bfp16": "bf16",
    "float": "f32",
    "double": "f64",
    "f8": "f8_e4m3",
}

CANONICAL_ELEM_TYPES: frozenset[str] = frozenset({
    "f64", "f32", "tf32", "f16", "bf16",
    "f8_e4m3", "f8_e5m2", "f8_ue4m3", "f8_ue8m0", "f6_e2m3", "f6_e3m2", "f4_e2m1",
    "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64",
    "u1", "bin1", "s2", "u2", "s4", "u4", "s6", "u6",
})

ELEM_TYPES: frozenset[str] = CANONICAL_ELEM_TYPES | frozenset(ELEM_ALIASES)

# Types a scalar declaration may name (spec 4.3 `scalar_t`).
SCALAR_TYPES: frozenset[str] = ELEM_TYPES | {"int", "bool"}


def canonical_elem(name: str) -> str:
    """``half`` -> ``f16`` etc.; other names are returned unchanged."""
    return ELEM_ALIASES.get(name, name)


# ----------------------------------------------------------------------------------------
# Keywords (spec 2.4): every word here is reserved inside a __co__ function.
# ----------------------------------------------------------------------------------------

STORAGES: tuple[str, ...] = ("global", "shared", "local")

# Level words of `parallel ... : level` and `sync.barrier : level`, outermost first.
LEVELS: tuple[str, ...] = ("device", "cluster", "block", "group-4", "group", "thread")

MATH_BUILTINS: frozenset[str] = frozenset({
    "__exp", "__exp2f", "__expm1", "__log", "__log1p", "__pow", "__sqrt", "__rsqrt",
    "__frcp_rn", "__fabs", "__fmaf", "__sin", "__cos", "__tan", "__asin", "__acos", "__atan",
    "__atan2", "__sinh", "__cosh", "__tanh", "__ceil", "__floor", "__round", "__sign",
    "__isfinite", "__max", "__min", "__gelu", "__sigmoid", "__softplus",
    "__alignup", "__aligndown",
})

ATOMIC_BUILTINS: frozenset[str] = frozenset({
    "__atomic_add", "__atomic_sub", "__atomic_exch", "__atomic_min", "__atomic_max",
    "__atomic_and", "__atomic_or", "__atomic_xor", "__atomic_cas",
})

# Built-ins written `name(args)` that yield a CallExpr (math, atomics, barriers, fragment
# reductions). `__lib_*` names belong here too, matched by prefix.
CALL_BUILTINS: frozenset[str] = MATH_BUILTINS | ATOMIC_BUILTINS | {
    "__bar_sync", "__bar_arrive", "cdiv",
    "reduce_sum", "reduce_max", "all_reduce_sum", "copy",
}
LIB_CALL_PREFIX = "__lib_"

KEYWORDS: frozenset[str] = ELEM_TYPES | CALL_BUILTINS | frozenset({
    # types
    "int", "bool", "void", "auto", "mdspan", "ituple", "event", "stream", "frag",
    # storage and levels
    *STORAGES, *LEVELS, "term",
    # statements
    "parallel", "by", "with", "in", "foreach", "apply", "while", "if", "else", "inthreads",
    "return", "break", "continue", "yield", "wait", "trigger", "after", "call", "select",
    "swap", "rotate", "sync", "barrier", "fence", "assert", "print", "println",
    "where", "unroll", "vectorize", "mutable", "cooperative", "dma", "tma", "mma",
    "asm", "__asm__", "volatile", "goto", "__cpp__", "__to", "__co__",
    # literals
    "true", "false", "inf", "nullptr",
})


def is_keyword(word: str) -> bool:
    return word in KEYWORDS or word.startswith(LIB_CALL_PREFIX)


# ----------------------------------------------------------------------------------------
# Dotted tokens (spec 2.6): `.` + word lexed as one token; longest match wins.
# ----------------------------------------------------------------------------------------

DOTTED_WORDS: tuple[str, ...] = (
    ".copy", ".load", ".pad", ".transp", ".any", ".async", ".swiz", ".swizzle", ".zfill",
    ".sp", ".promote", ".multicast", ".evict_first", ".evict_last",
    ".fill", ".store", ".row", ".col", ".scale", ".mask",
    ".span", ".span_as", ".data", ".mdata", ".view", ".from", ".chunkat", ".chunk",
    ".subspan", ".modspan", ".step", ".stride", ".sqz", ".at", ".map", ".remap",
)

# Plain punctuation (spec 2.6). The lexer tries longer spellings first.
PUNCTUATION: tuple[str, ...] = (
    "<->", "=>", "::", "[[", "]]", "++", "--", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
    "#+", "#-", "#*", "#/", "#%", "??",
    "=", "+", "-", "*", "/", "%", "<", ">", "!", "&", "|", "^", "~", "?", ":", ",", ";",
    "(", ")", "[", "]", "{", "}", "#", ".",
)


# ----------------------------------------------------------------------------------------
# Operator precedence (spec 4.9), lowest level first. The parser and the printer both use
# these numbers; a higher level binds tighter. All binary operators are left-associative.
# ----------------------------------------------------------------------------------------

TERNARY_LEVEL = 1
BINARY_PRECEDENCE: dict[str, int] = {
    "||": 2,
    "&&": 3,
    "==": 4, "!=": 4,
    "<": 5, "<=": 5, ">": 5, ">=": 5,
    "<<": 6, ">>": 6,
    "+": 7, "-": 7,
    "*": 8, "/": 8, "%": 8,
    "#+": 9, "#-": 9,
    "#*": 10, "#/": 10, "#%": 10,
    # `& ^ |` share one level that binds tighter than arithmetic and comparison (unlike C)
    "&": 12, "^": 12, "|": 12,
    "#": 13,
}
NOT_LEVEL = 11      # prefix `!` (its operand extends over levels > 11: `!a & b` = `!(a & b)`)
TILDE_LEVEL = 14    # prefix `~`
POSTFIX_LEVEL = 15  # `a(i)`, `.at(...)`, `.span`, `[i]`
ATOM_LEVEL = 16     # literals, names, bracketed forms, calls

# `shape_e` / template arguments / `<...>` configs are parsed from this level up, so that a
# closing `>` is never read as a comparison.
ADDITIVE_LEVEL = BINARY_PRECEDENCE["+"]

# Compound assignment operators (spec 4.3): lexed as the operator followed by `=`.
COMPOUND_OPERATORS: frozenset[str] = frozenset({"+", "-", "*", "/", "%"})
