"""What the parser's parts share: the nesting limit, the token kinds, the two errors that
unwind a parse, ``TokenCursor``, the mixin that moves over tokens and reports syntax
errors, and ``ParserBase``, the typed base of every part of the grammar.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from .device_helpers import Helper
from .diagnostics import Reporter
from .source import Span
from .syntax import Attribute, Block, Expr, Ident, MdspanDecl, Node, Parallel, SelectExpr, \
    SpannedDecl, Stmt, View
from .tokens import ELEM_TYPES, Token, TokenKind, canonical_elem, describe

# Nesting limit for expressions and blocks. Deeper input is reported (CQ0115), not parsed:
# a 10,000-deep program must end with a diagnostic, never a RecursionError.
MAX_DEPTH = 400

NAME, KEYWORD, INT, FLOAT, STRING, DOT, PUNCT, EOF = (
    TokenKind.NAME, TokenKind.KEYWORD, TokenKind.INT, TokenKind.FLOAT, TokenKind.STRING,
    TokenKind.DOT_WORD, TokenKind.PUNCT, TokenKind.EOF,
)

# Punctuation the parser may split when it needs only its first character: `a[b[i]]` lexes
# `]]`, `call f<g<1>>(x)` lexes `>>`, `y(::-1)` lexes `::`, `[[1, 2], 3]` lexes `[[`.
_SPLITTABLE = frozenset({"[", "]", ">", ":"})
# Keywords that never stand for a name, even by mistake (they separate the parts of a
# statement); any other keyword found where a name belongs is reported as CQ0116.
SEPARATOR_WORDS = frozenset({"in", "by", "where", "after", "else", "__co__"})


class ParseError(Exception):
    """A syntax error that has been reported; unwinds to the enclosing statement."""


class TooDeep(Exception):
    """Nesting beyond MAX_DEPTH (reported once); unwinds the whole function."""


class TokenCursor:
    """Mixin of ``_Parser``: the token cursor, syntax-error reporting and the small
    pieces (names, integer constants, strings) that every part of the grammar reads."""

    # The parse state (``_Parser.__init__`` sets it).
    text: str            # the preprocessed source the token spans point into
    toks: list[Token]    # owned: `_split` rewrites entries in place
    pos: int             # index of the current token
    reporter: Reporter
    prev_end: int        # end offset of the last consumed token
    depth: int           # nesting of expressions and blocks (MAX_DEPTH)
    too_deep_reported: bool
    eof_reported: bool
    no_pipe: bool        # inside `|...|`: a `|` closes the sizeof
    dimref_ok: bool      # inside derivation brackets: `(0)` is a DimRef
    dimrefs: int         # DimRefs made directly in the current brackets

    # --- tokens -----------------------------------------------------------------------

    def _peek(self, k: int = 1) -> Token:
        index = self.pos + k
        return self.toks[index] if index < len(self.toks) else self.toks[-1]

    def _at(self, text: str) -> bool:
        # The texts of names and literals never equal a keyword or punctuation spelling
        # (strings keep their quotes), so comparing texts alone is exact.
        return self.toks[self.pos].text == text

    def _advance(self) -> Token:
        tok = self.toks[self.pos]
        if tok.kind is not EOF:
            self.pos += 1
            self.prev_end = tok.span.end
        return tok

    def _accept(self, text: str) -> Token | None:
        if self.toks[self.pos].text == text:
            return self._advance()
        return None

    def _expect(self, text: str, expected: str | None = None) -> Token:
        tok = self.toks[self.pos]
        if tok.text == text:
            return self._advance()
        if text in _SPLITTABLE and tok.kind is PUNCT and tok.text.startswith(text):
            return self._split(len(text))
        self._fail(expected or f"'{text}'")

    def _expect_pair(self, text: str) -> None:
        """``[[`` / ``]]``, also written as two separate brackets."""
        if self._accept(text) is None:
            self._expect(text[0], f"'{text}'")
            self._expect(text[0], f"'{text}'")

    def _split(self, n: int) -> Token:
        """Consume the first ``n`` characters of the current punctuation token."""
        tok = self.toks[self.pos]
        cut = tok.span.start + n
        self.toks[self.pos] = Token(PUNCT, tok.text[n:], Span(cut, tok.span.end))
        self.prev_end = cut
        return Token(PUNCT, tok.text[:n], Span(tok.span.start, cut))

    def _span(self, start: int) -> Span:
        return Span(start, self.prev_end)

    def _start(self) -> int:
        return self.toks[self.pos].span.start

    def _end_stmt(self) -> None:
        self._expect(";")

    # --- diagnostics ------------------------------------------------------------------

    def _fail(self, expected: str) -> NoReturn:
        tok = self.toks[self.pos]
        self.reporter.report("CQ0110", tok.span, expected=expected, found=describe(tok))
        raise ParseError

    def _fail_node(self, node: Node, expected: str) -> NoReturn:
        self.reporter.report("CQ0110", node.span, expected=expected, found=self._quote(node))
        raise ParseError

    def _unexpected(self, context: str) -> NoReturn:
        tok = self.toks[self.pos]
        self.reporter.report("CQ0111", tok.span, found=describe(tok), context=context)
        raise ParseError

    def _quote(self, node: Node) -> str:
        snippet = " ".join(self.text[node.span.start:node.span.end].split())
        return f"'{snippet[:37]}...'" if len(snippet) > 40 else f"'{snippet}'"

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self._too_deep()

    def _too_deep(self) -> NoReturn:
        if not self.too_deep_reported:
            self.too_deep_reported = True
            self.reporter.report("CQ0115", self.toks[self.pos].span, depth=MAX_DEPTH)
        raise TooDeep

    def finish(self, context: str) -> None:
        """Report tokens left over after a complete statement or expression."""
        tok = self.toks[self.pos]
        if tok.kind is not EOF:
            self.reporter.report("CQ0111", tok.span, found=describe(tok), context=context)

    # --- names and small pieces -------------------------------------------------------

    def _name(self, expected: str = "a name") -> Token:
        tok = self.toks[self.pos]
        if tok.kind is NAME:
            return self._advance()
        if tok.kind is KEYWORD and tok.text not in SEPARATOR_WORDS:
            self.reporter.report("CQ0116", tok.span, name=tok.text)
            return self._advance()  # recover: read the keyword as the name it was meant to be
        self._fail(expected)

    def _int_const(self, expected: str) -> int:
        tok = self.toks[self.pos]
        if tok.kind is not INT:
            self._fail(expected)
        self._advance()
        return tok.int_value

    # names := '{' IDENT {',' IDENT} '}'
    def _braced_names(self) -> tuple[str, ...]:
        self._expect("{")
        names = [self._name().text]
        while self._accept(","):
            names.append(self._name().text)
        self._expect("}")
        return tuple(names)

    # qualified := IDENT {'::' IDENT}
    def _qualified_name(self) -> str:
        name = self._name().text
        while self._accept("::"):
            name += "::" + self._scoped_name()
        return name

    def _scoped_name(self) -> str:
        """A name after `::`: C++ namespaces may hold Croqtile keywords (`mylib::fence`)."""
        tok = self.toks[self.pos]
        if tok.kind is KEYWORD:
            return self._advance().text
        return self._name().text

    # strings := STRING {STRING}                  // adjacent literals concatenate
    def _strings(self) -> tuple[str, str]:
        if self.toks[self.pos].kind is not STRING:
            self._fail("a string literal")
        values: list[str] = []
        texts: list[str] = []
        while self.toks[self.pos].kind is STRING:
            tok = self._advance()
            values.append(tok.str_value)
            texts.append(tok.text)
        return "".join(values), " ".join(texts)

    # dot_elem := ['.' elem_type]
    def _dot_elem_type(self) -> str | None:
        if not self._at("."):
            return None
        self._advance()
        tok = self.toks[self.pos]
        if tok.text not in ELEM_TYPES:
            self._fail("an element type")
        self._advance()
        return canonical_elem(tok.text)


class ParserBase(TokenCursor):
    """The base of every part of the grammar (``parse_decls``, ``parse_stmts``, ...): the
    token cursor, and the rules one part calls in another. ``_Parser`` combines the parts,
    whose methods come first in its method order and define these rules; the declarations
    here exist for the type checker only."""

    # the file's device helpers by name (``call`` inlines them) and whether expressions are
    # C, as in a helper's body (a unary minus negates); set by ``_Parser``
    helpers: Mapping[str, Helper] = {}
    c_expressions = False

    if TYPE_CHECKING:
        # parser.py
        def statement(self) -> Stmt: ...
        def _primary(self) -> Expr: ...

        # parse_decls.py
        def _spanned_decl_rest(self, start: int, storage: str | None, elem: str,
                               frag: bool = False) -> SpannedDecl: ...
        def _array_dims(self) -> tuple[Expr, ...]: ...
        def _mdspan_body(self, start: int, rank: int | None, keyword: bool) -> MdspanDecl: ...
        def _assignments(self, start: int, target: Expr) -> Stmt: ...

        # parse_stmts.py
        def _body(self) -> Block: ...
        def _block(self) -> Block: ...
        def _template_args(self) -> tuple[Expr, ...]: ...

        # parse_parallel.py
        def _parallel_stmt(self, start: int | None = None,
                           attrs: tuple[Attribute, ...] = ()) -> Parallel: ...
        def _level_word(self) -> tuple[str, str | None]: ...
        def _paren_expr(self) -> Expr: ...
        def _inner_expression(self) -> Expr: ...

        # parse_dma.py
        def _dma(self, start: int, future: str | None) -> Stmt: ...
        def _view(self) -> View: ...

        # parse_mma.py
        def _mma(self, start: int, target: Ident | None,
                 schedule: Attribute | None = None) -> Stmt: ...

        # parse_exprs.py
        def expression(self) -> Expr: ...
        def _binary(self, min_level: int) -> Expr: ...
        def _postfix(self) -> Expr: ...
        def _derivation_items(self, open_: str, close: str) -> tuple[tuple[Expr, ...], int]: ...
        def _select_expr(self) -> SelectExpr: ...
        def _expr_list(self) -> tuple[Expr, ...]: ...
        def _paren_list(self, allow_empty: bool = False) -> tuple[Expr, ...]: ...
        def _braced_list(self) -> tuple[Expr, ...]: ...


def int_suffix(text: str) -> str:
    return text[len(text.rstrip("uUlL")):].lower()
