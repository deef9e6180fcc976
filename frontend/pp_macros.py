"""The macro model of the preprocessor: ``Tok`` (a token inside the expander), ``Macro``
and the helpers over them: pasting, comma elision, ``defined`` operands, rendering an
expansion back to text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .pp_scanner import BLANK_KINDS, Scanner
from .source import Span


@dataclass(frozen=True, slots=True)
class Tok:
    """A token inside the macro expander.

    Kind "end" is a marker the expander stacks below each macro expansion: popping it
    ends the macro's context and makes the macro expandable again.
    """

    kind: str
    text: str
    space: bool = False  # whitespace came before it
    origin: int = -1  # offset in the original text; -1 when a macro body produced it
    painted: bool = False  # met inside its own macro's expansion: never expanded again
    seam: bool = False  # it follows text of another origin, so it must not fuse with that

    def with_seam(self) -> Tok:
        return Tok(self.kind, self.text, self.space, self.origin, self.painted, True)


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like; `...` is the last name, __VA_ARGS__
    variadic: bool
    body: tuple[Tok, ...]
    index: dict[str, int]  # parameter name -> position

    def same_as(self, other: Macro) -> bool:
        """C's rule for a harmless redefinition: same parameters, same body spelling."""
        return (self.params == other.params and self.variadic == other.variadic
                and [(t.text, t.space) for t in self.body]
                == [(t.text, t.space) for t in other.body])


def make_macro(name: str, params: tuple[str, ...] | None, variadic: bool,
                body: list[Tok]) -> Macro:
    # Bodies forget their origin: errors inside an expansion point at the invocation.
    cleaned = tuple(Tok(t.kind, t.text, t.space and i > 0) for i, t in enumerate(body))
    index = {p: i for i, p in enumerate(params or ())}
    return Macro(name, params, variadic, cleaned, index)


def elides_comma(macro: Macro, slot: int, out: list[Tok]) -> bool:
    return (macro.variadic and macro.params is not None and slot == len(macro.params) - 1
            and bool(out) and out[-1].text == ",")


def glue(left: Tok, right: Tok) -> list[Tok]:
    """``left ## right``: one token if the spellings join into one, else both unchanged."""
    text = left.text + right.text
    kind, end = Scanner(text).token(0)
    if end == len(text) and kind not in BLANK_KINDS:
        return [Tok(kind, text, left.space, left.origin, False, left.seam)]
    return [left, Tok(right.kind, right.text, False, right.origin, right.painted, True)]


def defined_operand(tokens: list[Tok], pos: int) -> tuple[str | None, int]:
    if pos < len(tokens) and tokens[pos].kind == "id":
        return tokens[pos].text, pos + 1
    if (pos + 2 < len(tokens) and tokens[pos].text == "(" and tokens[pos + 1].kind == "id"
            and tokens[pos + 2].text == ")"):
        return tokens[pos + 1].text, pos + 3
    return None, pos


def tok_span(tok: Tok, fallback: Span) -> Span:
    return Span(tok.origin, tok.origin + len(tok.text)) if tok.origin >= 0 else fallback


# Pairs of characters that lex as one token: a space must separate them when they come
# from different texts. `[[`/`]]` are Croqtile attribute brackets, `#+` etc. its operators.
_FUSING_PAIRS = frozenset({
    "//", "/*", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "::",
    "##", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "..", "=>", "<-", "#+", "#-",
    "#*", "#/", "#%", "[[", "]]",
})


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def joins(left: str, right: str) -> bool:
    """Whether ``left`` written right before ``right`` would lex differently."""
    x, y = left[-1], right[0]
    if _is_word_char(x):
        if _is_word_char(y) or y in "'\"":
            return True  # names and numbers run together; `L"x"` would become a literal
        return left[0].isdigit() and (y == "." or (x in "eEpP" and y in "+-"))
    if x == "." and y.isdigit():
        return True
    return x + y in _FUSING_PAIRS


_CONTINUATION_RE = re.compile(r"\\\r?\n")


def render(tokens: list[Tok]) -> str:
    """Spell expanded tokens on one line: spaces where the source had them or lexing needs them."""
    parts: list[str] = []
    prev = ""
    for tok in tokens:
        text = tok.text
        if "\n" in text:  # a continued string or a raw string: an expansion is one line
            text = _CONTINUATION_RE.sub("", text).replace("\n", " ")
        if parts and (tok.space or (tok.seam and prev and text and joins(prev, text))):
            parts.append(" ")
        parts.append(text)
        prev = text
    return "".join(parts)
