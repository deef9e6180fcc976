"""A Pygments lexer for Croqtile: C's lexer, with Croqtile's reserved words as keywords or
types, and its operators C lacks (``p # t``, ``#+``, ``@``) as operators."""

from __future__ import annotations

from typing import Iterator

from pygments.lexers.c_cpp import CLexer
from pygments.token import Error, Keyword, Name, Operator, Whitespace, _TokenType

from croqtile.frontend.tokens import CALL_BUILTINS, ELEM_TYPES, KEYWORDS, LIB_CALL_PREFIX

_TYPES = ELEM_TYPES | {"int", "bool", "void", "auto", "mdspan", "ituple", "event", "stream",
                       "frag"}


class CroqtileLexer(CLexer):
    """Croqtile source (``.co`` files and ``__co__`` functions)."""

    name = "Croqtile"
    aliases = ["croqtile"]
    filenames = ["*.co"]

    def get_tokens_unprocessed(self, text: str, stack: tuple[str, ...] = ("root",)
                               ) -> Iterator[tuple[int, _TokenType, str]]:
        for index, token, value in super().get_tokens_unprocessed(text, stack):
            if token in Name or token in Keyword:
                if value in _TYPES:
                    token = Keyword.Type
                elif value in CALL_BUILTINS or value.startswith(LIB_CALL_PREFIX):
                    token = Name.Builtin
                elif value in KEYWORDS:
                    token = Keyword
            elif token is Error:
                # C has no `a # b`, `#+`, `??` or `@` mid-line, and loses its way after a
                # `[[...]]` attribute: such text is an operator or white space, not an error
                token = Whitespace if value.isspace() else Operator
            yield index, token, value
