"""``#if`` expressions of the preprocessor: C integer arithmetic on 64 bits, over tokens
already macro-expanded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .pp_macros import Macro, Tok, defined_operand

# A value is (number, unsigned). An evaluation error is a str "poison" value instead, so
# that `0 && 1/0` is fine, as in C: the right operand of `&&` is never looked at.
_Value = tuple[int, bool]

_MASK = (1 << 64) - 1
_INT_RE = re.compile(r"(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)([uUlLzZ]*)")
_INT_SUFFIXES = frozenset({"", "u", "l", "ul", "lu", "ll", "ull", "llu", "z", "uz", "zu"})
_ESCAPES = {"n": 10, "t": 9, "r": 13, "0": 0, "a": 7, "b": 8, "f": 12, "v": 11,
            "\\": 92, "'": 39, '"': 34, "?": 63, "e": 27}
_BINARY_PRECEDENCE = {
    "*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "==": 6, "!=": 6,
    "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1,
}
_MAX_EXPR_DEPTH = 64  # parentheses and nested `?:`; deeper expressions are refused


class _ExprError(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _wrap(value: int, unsigned: bool) -> _Value:
    value &= _MASK
    if not unsigned and value >= 1 << 63:
        value -= 1 << 64
    return value, unsigned


class IfParser:
    """Precedence climbing over macro-expanded tokens; unknown names are 0."""

    def __init__(self, tokens: list[Tok], macros: Mapping[str, Macro]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0
        self.macros = macros

    def parse(self) -> _Value | str:
        try:
            value = self._comma()
            if self.pos < len(self.tokens):
                raise _ExprError(f"missing binary operator before '{self._text()}'")
            return value
        except _ExprError as err:
            return err.detail

    def _text(self) -> str:
        return self.tokens[self.pos].text[:20] if self.pos < len(self.tokens) else "end of line"

    def _accept(self, text: str) -> bool:
        if self.pos < len(self.tokens) and self.tokens[self.pos].text == text \
                and self.tokens[self.pos].kind == "punct":
            self.pos += 1
            return True
        return False

    def _comma(self) -> _Value | str:
        value = self._ternary()
        while self._accept(","):
            right = self._ternary()
            value = value if isinstance(value, str) else right
        return value

    def _ternary(self) -> _Value | str:
        self.depth += 1
        if self.depth > _MAX_EXPR_DEPTH:
            raise _ExprError("expression is nested too deeply")
        cond = self._binary()
        if self._accept("?"):
            yes = self._comma()
            if not self._accept(":"):
                raise _ExprError(f"expected ':' in '?:' expression, found '{self._text()}'")
            no = self._ternary()
            cond = cond if isinstance(cond, str) else (yes if cond[0] else no)
        self.depth -= 1
        return cond

    def _binary(self) -> _Value | str:
        # An explicit operator stack keeps Python's recursion to one level per parenthesis.
        values = [self._unary()]
        ops: list[str] = []
        while self.pos < len(self.tokens):
            tok = self.tokens[self.pos]
            prec = _BINARY_PRECEDENCE.get(tok.text) if tok.kind == "punct" else None
            if prec is None:
                break
            self.pos += 1
            while ops and _BINARY_PRECEDENCE[ops[-1]] >= prec:
                right = values.pop()
                values.append(_binary(ops.pop(), values.pop(), right))
            ops.append(tok.text)
            values.append(self._unary())
        while ops:
            right = values.pop()
            values.append(_binary(ops.pop(), values.pop(), right))
        return values[0]

    def _unary(self) -> _Value | str:
        prefix: list[str] = []
        while self.pos < len(self.tokens) and self.tokens[self.pos].kind == "punct" \
                and self.tokens[self.pos].text in ("+", "-", "!", "~"):
            prefix.append(self.tokens[self.pos].text)
            self.pos += 1
        value = self._primary()
        for op in reversed(prefix):
            value = _unary(op, value)
        return value

    def _primary(self) -> _Value | str:
        if self.pos >= len(self.tokens):
            raise _ExprError("missing operand at end of expression")
        tok = self.tokens[self.pos]
        self.pos += 1
        if tok.kind == "num":
            return _parse_int(tok.text)
        if tok.kind == "chr":
            return _parse_char(tok.text)
        if tok.kind == "id":
            return self._name(tok)
        if tok.kind == "punct" and tok.text == "(":
            value = self._comma()
            if not self._accept(")"):
                raise _ExprError(f"missing ')' in expression, found '{self._text()}'")
            return value
        raise _ExprError(f"token '{tok.text[:20]}' is not valid in preprocessor expressions")

    def _name(self, tok: Tok) -> _Value | str:
        if tok.text == "defined":  # produced by a macro expansion
            name, self.pos = defined_operand(self.tokens, self.pos)
            if name is None:
                raise _ExprError("operator 'defined' requires a macro name")
            return int(name in self.macros), False
        if tok.text.startswith("__has_") and self._accept("("):
            self._skip_group()  # __has_include(<x>) and friends: nothing is available
            return 0, False
        return (1 if tok.text == "true" else 0), False  # C++ `true`; other names are 0

    def _skip_group(self) -> None:
        level = 1
        while self.pos < len(self.tokens) and level:
            text = self.tokens[self.pos].text
            level += (text == "(") - (text == ")")
            self.pos += 1
        if level:
            raise _ExprError("missing ')' in expression")


def _unary(op: str, value: _Value | str) -> _Value | str:
    if isinstance(value, str):
        return value
    number, unsigned = value
    if op == "-":
        return _wrap(-number, unsigned)
    if op == "~":
        return _wrap(~number, unsigned)
    if op == "!":
        return int(number == 0), False
    return value


def _binary(op: str, left: _Value | str,
            right: _Value | str) -> _Value | str:
    if isinstance(left, str):
        return left
    if op in ("&&", "||"):
        if (left[0] != 0) == (op == "||"):
            return int(op == "||"), False  # decided by the left operand alone
        return right if isinstance(right, str) else (int(right[0] != 0), False)
    if isinstance(right, str):
        return right
    if op in ("<<", ">>"):
        return _shift(op, left, right[0])
    unsigned = left[1] or right[1]  # the usual arithmetic conversions, on 64 bits
    a = left[0] & _MASK if unsigned else left[0]
    b = right[0] & _MASK if unsigned else right[0]
    if op in ("/", "%"):
        if b == 0:
            return "division by zero in #if"
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates
        return _wrap(quotient if op == "/" else a - b * quotient, unsigned)
    arithmetic = {"*": a * b, "+": a + b, "-": a - b, "&": a & b, "^": a ^ b, "|": a | b}
    if op in arithmetic:
        return _wrap(arithmetic[op], unsigned)
    comparison = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
    return int(comparison[op]), False


def _shift(op: str, left: _Value, count: int) -> _Value:
    number, unsigned = left
    if unsigned:
        number &= _MASK
    if count < 0 or count >= 64:  # undefined in C; never build a huge Python integer
        return (-1 if op == ">>" and number < 0 else 0), unsigned
    return _wrap(number << count if op == "<<" else number >> count, unsigned)


def _parse_int(text: str) -> _Value | str:
    match = _INT_RE.fullmatch(text.replace("'", ""))
    if match is None:
        return f"'{text[:20]}' is not an integer constant"
    digits, suffix = match.groups()
    if suffix.lower() not in _INT_SUFFIXES:
        return f"invalid suffix '{suffix}' on integer constant"
    if len(digits) > 70:
        return "integer constant is too large"
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits[:2] in ("0b", "0B"):
        value = int(digits[2:], 2)
    elif digits.startswith("0") and len(digits) > 1:
        if not set(digits) <= set("01234567"):
            return f"invalid digit in octal constant '{text[:20]}'"
        value = int(digits, 8)
    else:
        value = int(digits)
    if value > _MASK:
        return "integer constant is too large"
    return value, "u" in suffix.lower() or value >= 1 << 63


def _parse_char(text: str) -> _Value | str:
    body = text[text.index("'") + 1:]
    if len(body) < 2 or not body.endswith("'"):
        return "unterminated character constant"
    body = body[:-1]
    codes: list[int] = []
    pos = 0
    while pos < len(body):
        if body[pos] == "\\" and pos + 1 < len(body):
            code, pos = _escape(body, pos + 1)
        else:
            code, pos = ord(body[pos]), pos + 1
        codes.append(code)
    if len(codes) == 1:
        return codes[0], False
    value = 0
    for code in codes:  # a multi-character constant, as GCC computes it
        value = (value << 8 | (code & 0xFF)) & 0xFFFFFFFF
    return value, False


def _escape(body: str, pos: int) -> tuple[int, int]:
    """Value of the escape sequence whose letter is at ``pos``, and the offset after it."""
    char = body[pos]
    if char == "x":
        end = pos + 1
        while end < len(body) and end < pos + 9 and body[end] in "0123456789abcdefABCDEF":
            end += 1
        return (int(body[pos + 1:end], 16) if end > pos + 1 else 0), end
    if char in "01234567":
        end = pos
        while end < len(body) and end < pos + 3 and body[end] in "01234567":
            end += 1
        return int(body[pos:end], 8), end
    return _ESCAPES.get(char, ord(char)), pos + 1
