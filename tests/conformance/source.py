"""A light reading of a Croqtile source file, enough to place expected diagnostics.

* which physical lines survive the preprocessor's conditionals for a set of ``-D`` defines;
* where ``#line`` / ``#inline`` directives move the reported file and line;
* the physical line span of every ``__co__`` function;
* which lines are code (not blank, not comment-only, not a directive).

It is deliberately approximate: a line is active or not as a whole, and ``#if`` expressions
are evaluated over integers, ``defined`` and macro names only.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

_DIRECTIVE_RE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_LINE_RE = re.compile(r"^\s*#\s*(?:line|inline)\s+(\d+)(?:\s+\"([^\"]*)\")?")


@dataclass
class SourceFile:
    """The physical lines of one file and what the harness needs to know about them."""

    lines: list[str]
    defines: Mapping[str, str] = field(default_factory=dict)
    active: set[int] = field(init=False)
    functions: list[tuple[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.active = active_lines(self.lines, self.defines)
        self.functions = function_spans(self.lines)

    def code(self, number: int) -> str:
        """Line ``number`` without its ``//`` comment ('' for directives and inactive lines)."""
        if number not in self.active or not 1 <= number <= len(self.lines):
            return ""
        text = self.lines[number - 1]
        if _DIRECTIVE_RE.match(text):
            return ""
        return strip_comment(text).strip()

    def comment(self, number: int) -> str:
        text = self.lines[number - 1] if 1 <= number <= len(self.lines) else ""
        index = _comment_start(text)
        return text[index + 2:].strip() if index >= 0 else ""

    def is_code(self, number: int) -> bool:
        return bool(self.code(number))

    def function_at(self, number: int) -> tuple[int, int] | None:
        for start, end in self.functions:
            if start <= number <= end:
                return start, end
        return None


# ----------------------------------------------------------------------------- comments


def _comment_start(text: str) -> int:
    """Index of a ``//`` that is not inside a string literal, or -1."""
    quote = ""
    i = 0
    while i < len(text) - 1:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif text.startswith("//", i):
            return i
        i += 1
    return -1


def strip_comment(text: str) -> str:
    index = _comment_start(text)
    return text if index < 0 else text[:index]


# ----------------------------------------------------------------------------- conditionals


def active_lines(lines: list[str], defines: Mapping[str, str]) -> set[int]:
    """Physical lines (1-based) that the preprocessor keeps for these ``defines``."""
    macros: dict[str, str] = dict(defines)
    stack: list[tuple[bool, bool]] = []  # (this branch is taken, some branch was taken)
    active: set[int] = set()
    for number, text in enumerate(lines, 1):
        outer = all(taken for taken, _ in stack)
        match = _DIRECTIVE_RE.match(text)
        if not match:
            if outer:
                active.add(number)
            continue
        name, rest = match.group(1), strip_comment(match.group(2)).strip()
        if name in ("if", "ifdef", "ifndef"):
            value = outer and _condition(name, rest, macros)
            stack.append((value, value))
        elif name == "elif" and stack:
            _, done = stack.pop()
            outer = all(taken for taken, _ in stack)
            value = outer and not done and _condition("if", rest, macros)
            stack.append((value, done or value))
        elif name == "else" and stack:
            _, done = stack.pop()
            stack.append((not done, True))
        elif name == "endif" and stack:
            stack.pop()
        elif outer:
            _track_macro(name, rest, macros)
            active.add(number)
    return active


def _track_macro(name: str, rest: str, macros: dict[str, str]) -> None:
    if name == "define" and rest:
        key = re.match(r"\w+", rest)
        if key:
            macros[key.group(0)] = rest[key.end():].strip() or "1"
    elif name == "undef":
        macros.pop(rest.split()[0] if rest else "", None)


def _condition(kind: str, expr: str, macros: Mapping[str, str]) -> bool:
    if kind == "ifdef":
        return expr.split()[0] in macros if expr else False
    if kind == "ifndef":
        return expr.split()[0] not in macros if expr else True
    return bool(evaluate_condition(expr, macros))


def evaluate_condition(expr: str, macros: Mapping[str, str]) -> int:
    """Value of a ``#if`` expression; unknown names are 0, unparsable expressions are 0."""
    text = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", expr)
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", text)
    text = re.sub(r"\b[A-Za-z_]\w*\b",
                  lambda m: m.group(0) if m.group(0) in ("and", "or", "not")
                  else _macro_number(macros.get(m.group(0), "0")), text)
    try:
        return int(_eval(ast.parse(text.strip() or "0", mode="eval").body))
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, KeyError):
        return 0


def _macro_number(value: str) -> str:
    return value.strip() if re.fullmatch(r"\s*-?\d+\s*", value) else "0"


_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}


def _eval(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand)
        return {ast.Not: lambda v: int(not v), ast.USub: operator.neg,
                ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](value)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare):
        left = _eval(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    raise ValueError("unsupported #if expression")


# ----------------------------------------------------------------------------- #line


def line_origin(lines: list[str]) -> dict[int, tuple[str | None, int]]:
    """For every physical line after a ``#line``/``#inline`` directive: the (file, line)
    it is reported as. Lines before the first directive are absent (they are themselves)."""
    origin: dict[int, tuple[str | None, int]] = {}
    current: tuple[str | None, int] | None = None
    for number, text in enumerate(lines, 1):
        match = _LINE_RE.match(text)
        if match:
            name = match.group(2) if match.group(2) is not None else (current[0] if current else None)
            current = (name, int(match.group(1)) - 1)
            continue
        if current is not None:
            current = (current[0], current[1] + 1)
            origin[number] = current
    return origin


def physical_line(lines: list[str], filename: str | None, line: int) -> int | None:
    """The physical line reported as ``filename:line`` (``filename`` None: any file)."""
    origin = line_origin(lines)
    for number, (name, reported) in origin.items():
        if reported == line and (filename is None or name is None or _same_file(name, filename)):
            return number
    if filename is None and 1 <= line <= len(lines) and line not in origin:
        return line
    return None


def _same_file(a: str, b: str) -> bool:
    return a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


# ----------------------------------------------------------------------------- functions


def function_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) physical lines of each top-level ``__co__`` function definition."""
    spans: list[tuple[int, int]] = []
    number = 1
    while number <= len(lines):
        if re.search(r"\b__co__\b", strip_comment(lines[number - 1])):
            end = _closing_line(lines, number)
            spans.append((number, end))
            number = end + 1
        else:
            number += 1
    return spans


def _closing_line(lines: list[str], start: int) -> int:
    """The line holding the brace that closes the first ``{`` at or after ``start``."""
    depth = 0
    opened = False
    for number in range(start, len(lines) + 1):
        text = strip_comment(lines[number - 1])
        if _DIRECTIVE_RE.match(text):
            continue
        for ch in _without_strings(text):
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return number
        if not opened and ";" in text and number > start:
            return number  # a declaration without a body
    return len(lines)


def _without_strings(text: str) -> str:
    return re.sub(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", "", text)
