"""Directives of the preprocessor: reading a directive line and applying it, conditional
groups, ``#define`` / ``#undef`` (and the ``defines`` given by the caller), ``#pragma``
and ``#line``.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .diagnostics import Reporter
from .pp_macros import Macro, Tok, make_macro, tok_span
from .pp_output import IntrinsicPragma, Output
from .pp_scanner import BLANK_KINDS, Scanner
from .source import LineDirective, Source, Span

# `#line N`: ASCII digits that fit C's limit (2147483647); isdigit() would take '²' and
# int() refuses more than 4300 digits.
_LINE_NUMBER_RE = re.compile(r"[0-9]{1,10}")


@dataclass(frozen=True, slots=True)
class Cond:
    """One open ``#if`` group."""

    span: Span  # the `#if` keyword, for CQ0001
    parent_active: bool  # the text around the group is kept
    taken: bool  # some branch of the group was chosen already
    active: bool  # the current branch is kept
    seen_else: bool


class DirectiveHandling:
    """Mixin of ``_Preprocessor``: directive lines, ``#if`` groups, ``#define`` /
    ``#undef``, ``#pragma`` and ``#line``."""

    # The preprocessor's state (``_Preprocessor.__init__`` sets it).
    source: Source
    text: str
    scanner: Scanner
    reporter: Reporter
    macros: dict[str, Macro]
    pinned: set[str]  # names given in `defines`: the source cannot change them
    pushed: dict[str, list[Macro | None]]  # #pragma push_macro stacks
    conds: list[Cond]
    active: bool
    out: Output

    if TYPE_CHECKING:
        # defined by ``_Preprocessor`` (preprocessor.py)
        def check_comment(self, start: int, end: int) -> None: ...
        def _flush(self, upto: int) -> None: ...
        def _drop(self, start: int, end: int) -> None: ...
        def _condition(self, args: list[Tok], span: Span) -> bool: ...

    # --- directives ------------------------------------------------------------------------

    def _directive(self, line_start: int, hash_pos: int) -> int:
        tokens, end = self._logical_line(hash_pos + 1)
        self._flush(line_start)
        self._apply_directive(hash_pos, tokens)
        self._drop(line_start, end)
        return end

    def _logical_line(self, pos: int) -> tuple[list[Tok], int]:
        """Tokens up to the end of the line, continuations and comments being blanks."""
        text, tokens, space = self.text, [], False
        while pos < len(text):
            kind, end = self.scanner.token(pos)
            if kind == "nl":
                break
            if kind in BLANK_KINDS:
                if kind == "bcom":
                    self.check_comment(pos, end)
                space = True
            else:
                tokens.append(Tok(kind, text[pos:end], space, pos))
                space = False
            pos = end
        return tokens, pos

    def _apply_directive(self, hash_pos: int, tokens: list[Tok]) -> None:
        if not tokens or tokens[0].kind != "id":
            return  # the null directive `#`, or a `# 12 "file"` line marker
        head, args = tokens[0], tokens[1:]
        name = head.text
        span = Span(hash_pos, head.origin + len(name))
        if name in ("if", "ifdef", "ifndef"):
            self._open_group(span, lambda: self._test(name, args, span))
        elif name in ("elif", "elifdef", "elifndef"):
            self._elif(span, name, lambda: self._test(name[2:], args, span))
        elif name == "else":
            self._else(span)
        elif name == "endif":
            self._endif(span)
        elif not self.active:
            return
        elif name == "define":
            self._define(args, span)
        elif name == "undef":
            self._undef(args, span)
        elif name == "pragma":
            self._pragma(args)
        elif name == "line":
            self._line(hash_pos, args)
        # #include, #error, #warning and the others are left to the C++ compiler.

    def _line(self, hash_pos: int, args: list[Tok]) -> None:
        """``#line N ["file"]``: the next line is line N (of "file") in diagnostics."""
        if not args or not _LINE_NUMBER_RE.fullmatch(args[0].text):
            return  # a malformed #line is left alone, as the C++ compiler would see it
        filename = None
        if len(args) > 1 and args[1].text.startswith('"') and args[1].text.endswith('"'):
            filename = args[1].text[1:-1]
        this_line = self.source.line_col(hash_pos)[0] - self.source.line_offset  # (no rescan)
        self.out.line_directives.append(LineDirective(this_line + 1, int(args[0].text), filename))

    def _test(self, kind: str, args: list[Tok], span: Span) -> bool:
        if kind == "if":
            return self._condition(args, span)
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail=f"#{kind} expects a macro name")
            return False
        return (args[0].text in self.macros) == (kind == "ifdef")

    # --- conditional groups ----------------------------------------------------------------

    def _open_group(self, span: Span, test: Callable[[], bool]) -> None:
        # Conditions inside a skipped group are not evaluated (and report nothing).
        value = test() if self.active else False
        self.conds.append(Cond(span, self.active, value, self.active and value, False))
        self.active = self.active and value

    def _elif(self, span: Span, name: str, test: Callable[[], bool]) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive=name)
            return
        top = self.conds[-1]
        if top.seen_else:
            self.reporter.report("CQ0003", span, detail=f"#{name} after #else")
        # Once a branch was taken, later #elif conditions are not even evaluated.
        value = test() if top.parent_active and not top.taken and not top.seen_else else False
        self.conds[-1] = replace(top, taken=top.taken or value, active=value)
        self.active = value

    def _else(self, span: Span) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive="else")
            return
        top = self.conds[-1]
        if top.seen_else:
            self.reporter.report("CQ0003", span, detail="#else after #else")
        active = top.parent_active and not top.taken
        self.conds[-1] = replace(top, taken=True, active=active, seen_else=True)
        self.active = active

    def _endif(self, span: Span) -> None:
        if not self.conds:
            self.reporter.report("CQ0002", span, directive="endif")
            return
        self.active = self.conds.pop().parent_active

    # --- #define, #undef, #pragma ------------------------------------------------------------

    def _apply_defines(self, defines: Mapping[str, int | float | str | None]) -> None:
        """``defines`` come first and are pinned: the source cannot redefine or undefine them."""
        for name, value in defines.items():
            name = str(name)
            if not re.fullmatch(r"[^\W\d]\w*(?:\([^()]*\))?", name):
                self.reporter.report("CQ0003", Span(0, 0),
                                     detail=f"{name!r} in defines is not a macro name")
                continue
            body = _define_text(value).replace("\r", " ").replace("\n", " ")
            self._define(_tokens_of(f"{name} {body}"), Span(0, 0), pinned=True)
            self.pinned.add(name.split("(")[0])

    def _define(self, args: list[Tok], span: Span, pinned: bool = False) -> None:
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail="#define expects a macro name")
            return
        name = args[0]
        if name.text == "defined":
            self.reporter.report("CQ0003", span, detail="'defined' cannot be a macro name")
            return
        if name.text in self.pinned and not pinned:
            return  # a `defines` value wins over the source
        params: tuple[str, ...] | None = None
        variadic = False
        rest = args[1:]
        if rest and rest[0].text == "(" and rest[0].kind == "punct" and not rest[0].space:
            parsed = _parse_params(rest)
            if isinstance(parsed, str):
                self.reporter.report("CQ0003", tok_span(name, span), detail=parsed)
                return
            params, variadic, rest = parsed
        if rest and (rest[0].text == "##" or rest[-1].text == "##"):
            self.reporter.report("CQ0003", tok_span(name, span),
                                 detail="'##' cannot appear at either end of a macro body")
            return
        macro = make_macro(name.text, params, variadic, rest)
        old = self.macros.get(name.text)
        if old is not None and not old.same_as(macro):
            self.reporter.report("CQ0008", tok_span(name, span), name=name.text)
        self.macros[name.text] = macro

    def _undef(self, args: list[Tok], span: Span) -> None:
        if not args or args[0].kind != "id":
            self.reporter.report("CQ0003", span, detail="#undef expects a macro name")
        elif args[0].text not in self.pinned:
            self.macros.pop(args[0].text, None)

    def _pragma(self, args: list[Tok]) -> None:
        """``push_macro("M")`` saves M's definition (or its absence); ``pop_macro`` restores it.
        ``croq intrinsic prefix|namespace NAME`` (``choreo`` is the older spelling) is
        recorded with where it is in the output."""
        words = [a.text for a in args]
        if len(words) == 4 and words[0] in ("croq", "choreo") and words[1] == "intrinsic" \
                and words[2] in ("prefix", "namespace") and args[3].kind == "id":
            self.out.intrinsics.append(IntrinsicPragma(words[2], words[3], self.out.length))
            return
        if (len(args) < 4 or args[0].text not in ("push_macro", "pop_macro")
                or args[1].text != "(" or args[2].kind != "str" or args[3].text != ")"):
            return
        name = args[2].text[args[2].text.index('"') + 1:].rstrip('"')
        stack = self.pushed.setdefault(name, [])
        if args[0].text == "push_macro":
            stack.append(self.macros.get(name))
        elif stack:
            saved = stack.pop()
            if name in self.pinned:
                return
            if saved is None:
                self.macros.pop(name, None)
            else:
                self.macros[name] = saved


def _tokens_of(text: str) -> list[Tok]:
    """All non-blank tokens of a short synthetic text (pasting, ``defines`` values)."""
    scanner = Scanner(text)
    tokens: list[Tok] = []
    pos, space = 0, False
    while pos < len(text):
        kind, end = scanner.token(pos)
        if kind in BLANK_KINDS:
            space = True
        else:
            tokens.append(Tok(kind, text[pos:end], space))
            space = False
        pos = end
    return tokens


def _define_text(value: int | float | str | None) -> str:
    """Body text of a ``defines`` value: None and "" are empty, numbers as Croqtile literals
    (the lexer reports those out of range)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        number = int(value)
        # str() refuses more than 4300 digits; hex() has no limit (and is far too big anyway)
        return str(number) if number.bit_length() < 1000 else hex(number)
    if isinstance(value, float):
        text = repr(float(value))  # also `inf`, `-inf` and `nan`, which Croqtile spells so
        if "e" in text and text.lstrip("-") not in ("inf", "nan"):
            text = format(decimal.Decimal(text), "f")  # Croqtile has no exponent notation
            text = text if "." in text else text + ".0"
        return text
    return str(value)


def _parse_params(rest: list[Tok]) -> tuple[tuple[str, ...], bool, list[Tok]] | str:
    """Parameters of ``#define F(a, b, ...)``: (names, variadic, body) or an error message."""
    names: list[str] = []
    pos = 1
    while True:
        if pos >= len(rest):
            return "missing ')' in macro parameter list"
        tok = rest[pos]
        if tok.text == ")" and not names:
            return tuple(names), False, rest[pos + 1:]
        if tok.text == "...":
            names.append("__VA_ARGS__")
            if pos + 1 < len(rest) and rest[pos + 1].text == ")":
                return tuple(names), True, rest[pos + 2:]
            return "'...' must be the last macro parameter"
        if tok.kind != "id" or tok.text == "__VA_ARGS__":
            return f"'{tok.text[:20]}' cannot be a macro parameter"
        if tok.text in names:
            return f"duplicate macro parameter '{tok.text}'"
        names.append(tok.text)
        if pos + 1 >= len(rest):
            return "missing ')' in macro parameter list"
        sep = rest[pos + 1].text
        if sep == ")":
            return tuple(names), False, rest[pos + 2:]
        if sep != ",":
            return f"expected ',' or ')' in macro parameter list, found '{sep[:20]}'"
        pos += 2
