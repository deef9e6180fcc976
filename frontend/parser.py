"""Recursive-descent parser for Croqtile ``__co__`` functions (spec section 4).

Each parse method carries the EBNF production it implements (spec 4.1 - 4.9) as a comment.
Syntax errors are reported (CQ0110 / CQ0111 / CQ0114 / CQ0116) at the offending token; the
parser then skips to the end of the statement and goes on, so one run reports several
errors. Nesting deeper than ``MAX_DEPTH`` is reported once (CQ0115) and abandons the
function instead of overflowing Python's stack.

``_Parser`` holds the parse state and the dispatch on a statement's first token and on a
primary's; the grammar lives in one mixin per part of the spec: ``parse_decls``
(functions, parameters, declarations, assignment), ``parse_stmts`` (blocks, recovery, the
other statements), ``parse_parallel`` (parallel constructs and control flow),
``parse_dma`` (DMA / TMA), ``parse_mma`` (MMA) and ``parse_exprs`` (expressions).
``parse_common`` holds the token cursor and what the parts share.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from .device_helpers import Helper, find_helpers
from .diagnostics import Reporter
from .lexer import gc_paused, lex
from .parse_common import (
    EOF, FLOAT, INT, KEYWORD, MAX_DEPTH, NAME, PUNCT, ParseError, SEPARATOR_WORDS, STRING,
    TooDeep, int_suffix,
)
from .parse_decls import DeclarationParsing
from .parse_dma import DmaParsing
from .parse_exprs import ExpressionParsing
from .parse_mma import MmaParsing
from .parse_parallel import ParallelParsing
from .parse_stmts import StatementParsing
from .source import Span
from .syntax import (
    BoolLit, CallExpr, Empty, Expr, FloatLit, Function, Ident, InfLit, IntLit, NullLit, Program,
    Stmt, StrLit,
)
from .tokens import (
    CALL_BUILTINS, COMPOUND_OPERATORS, LIB_CALL_PREFIX, SCALAR_TYPES, STORAGES, Token,
)

if TYPE_CHECKING:
    from .regions import Region


__all__ = [
    "MAX_DEPTH", "parse_expr_text", "parse_function", "parse_program", "parse_stmt_text",
    "recursion_headroom",
]

# Size limits (CQ0117), so that every source is checked and lowered in bounded time (about
# 10 us per token in all): one function (the seeds have under 1,000 tokens; a Triton kernel
# of 100,000 would not compile anyway) and all functions of a source together.
MAX_FUNCTION_TOKENS = 100_000
MAX_PROGRAM_TOKENS = 250_000


@contextlib.contextmanager
def recursion_headroom(limit: int = 25_000) -> Iterator[None]:
    """Raise Python's recursion limit while walking trees up to ``MAX_DEPTH`` deep (each
    nesting level costs several Python frames in the parser, printer and checker)."""
    # (the limit is the process's: threads compiling at once share one raise, undone
    # when the last of them leaves, not while another is still deep in a tree)
    with _HEADROOM_LOCK:
        if _HEADROOM["holders"] == 0:
            _HEADROOM["restore"] = sys.getrecursionlimit()
            if _HEADROOM["restore"] < limit:
                sys.setrecursionlimit(limit)
        _HEADROOM["holders"] += 1
    try:
        yield
    finally:
        with _HEADROOM_LOCK:
            _HEADROOM["holders"] -= 1
            if _HEADROOM["holders"] == 0 and _HEADROOM["restore"] < limit:
                sys.setrecursionlimit(_HEADROOM["restore"])


# threads inside recursion_headroom, and the limit to restore when none is
_HEADROOM = {"holders": 0, "restore": 0}
_HEADROOM_LOCK = threading.Lock()


# ----------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------


def parse_function(text: str, start: int, end: int, reporter: Reporter) -> Function | None:
    """Parse the ``__co__`` function in ``text[start:end]`` (offsets of preprocessed text).

    Returns None when no function could be recovered (the errors are reported), also when
    it has more than MAX_FUNCTION_TOKENS tokens (CQ0117)."""
    return _parse_region(text, start, end, reporter, MAX_FUNCTION_TOKENS, "this __co__ function",
                         MAX_FUNCTION_TOKENS)[0]


def parse_program(text: str, regions: Sequence[Region | tuple[int, int]],
                  reporter: Reporter) -> Program:
    """Parse every ``__co__`` function; ``regions`` are ``(start, end)`` pairs or objects
    with ``start`` / ``end`` attributes (``regions.Region``). Past MAX_PROGRAM_TOKENS in
    all, the function that overflows is reported (CQ0117) and the rest is not parsed."""
    functions = []
    budget = MAX_PROGRAM_TOKENS
    helpers = _helpers(text, [_region_bounds(r) for r in regions], reporter)
    for region in regions:
        start, end = _region_bounds(region)
        if budget < MAX_FUNCTION_TOKENS:
            limit, what, shown = budget, "the __co__ code of this source", MAX_PROGRAM_TOKENS
        else:
            name = getattr(region, "name", "")
            what = f"the __co__ function '{name}'" if name else "this __co__ function"
            limit, shown = MAX_FUNCTION_TOKENS, MAX_FUNCTION_TOKENS
        function, count = _parse_region(text, start, end, reporter, limit, what, shown,
                                        helpers)
        if count > limit:
            if limit == budget:
                break
            continue
        budget -= count
        if function is not None:
            functions.append(function)
    return Program(Span(0, len(text)), tuple(functions))


def _helpers(text: str, regions: list[tuple[int, int]],
             reporter: Reporter) -> dict[str, Helper]:
    """The file's device helpers, their returned expressions parsed as C expressions
    (one that does not parse is a helper that cannot be inlined; no error is kept)."""
    helpers: dict[str, Helper] = {}
    for found in find_helpers(text, regions):
        body = None
        problem = found.problem
        if not problem:
            mark = reporter.checkpoint()
            with recursion_headroom():
                parser = _Parser(text, lex(text, found.start, found.end, reporter), reporter)
                parser.c_expressions = True
                try:
                    body = parser.expression()
                    parser.finish("after the expression")
                except (ParseError, TooDeep):
                    body = None
            if reporter.checkpoint() != mark or body is None:
                body, problem = None, "its returned expression is not one Croqtile can read"
            reporter.rollback(mark)
        helpers[found.name] = Helper(found.name, found.span, found.params, body, problem)
    return helpers


def _parse_region(text: str, start: int, end: int, reporter: Reporter, limit: int,
                  what: str, shown: int,
                  helpers: dict[str, Helper] | None = None) -> tuple[Function | None, int]:
    """The function of ``text[start:end]`` and its token count; a function of more than
    ``limit`` tokens is reported (``what`` is over ``shown`` tokens) and not parsed."""
    with recursion_headroom(), gc_paused():
        tokens = lex(text, start, end, reporter, limit)
        count = len(tokens)
        if not tokens or tokens[-1].kind is not EOF:  # more than `limit` tokens
            count = limit + 1
            reporter.report("CQ0117", Span(start, min(end, start + 6)), what=what,
                            limit=f"{shown:,}")
            return None, count
        parser = _Parser(text, tokens, reporter)
        parser.helpers = helpers or {}
        try:
            return parser.function(), count
        except TooDeep:
            return None, count


def parse_stmt_text(text: str, reporter: Reporter) -> Stmt:
    """Parse one statement (tests); an unparsable statement comes back as ``Empty``."""
    with recursion_headroom():
        parser = _Parser(text, lex(text, 0, len(text), reporter), reporter)
        try:
            stmt = parser.statement()
        except (ParseError, TooDeep):
            return Empty(Span(0, len(text)))
        parser.finish("after the statement")
        return stmt


def parse_expr_text(text: str, reporter: Reporter) -> Expr:
    """Parse one expression (tests); an unparsable one comes back as ``Ident("")``."""
    with recursion_headroom():
        parser = _Parser(text, lex(text, 0, len(text), reporter), reporter)
        try:
            expr = parser.expression()
        except (ParseError, TooDeep):
            return Ident(Span(0, len(text)), "")
        parser.finish("after the expression")
        return expr


def _region_bounds(region: Region | tuple[int, int]) -> tuple[int, int]:
    if isinstance(region, tuple):
        return region[0], region[1]
    return region.start, region.end


# ----------------------------------------------------------------------------------------
# The parser
# ----------------------------------------------------------------------------------------


class _Parser(DeclarationParsing, StatementParsing, ParallelParsing, DmaParsing, MmaParsing,
              ExpressionParsing):
    def __init__(self, text: str, tokens: list[Token], reporter: Reporter) -> None:
        self.text = text
        self.toks = tokens  # owned: `_split` rewrites entries in place
        self.pos = 0
        self.reporter = reporter
        self.prev_end = tokens[0].span.start  # end offset of the last consumed token
        self.depth = 0
        self.too_deep_reported = False
        self.eof_reported = False
        self.no_pipe = False    # inside `|...|`: a `|` closes the sizeof
        self.dimref_ok = False  # inside derivation brackets: `(0)` is a DimRef
        self.dimrefs = 0        # DimRefs made directly in the current brackets

    # stmt := decl ';' | assign {',' assign} ';' | dma_stmt ';' | mma_stmt ';'
    #       | [mma_sched] mma_exec ';' | wait_stmt ';' | trigger_stmt ';' | swap_stmt ';'
    #       | call_stmt ';' | 'return' [expr] ';' | sync_stmt ';' | 'break' ';'
    #       | 'continue' ';' | 'yield' ';' | '__cpp__' '(' STRING ')' ';' | parallel_stmt
    #       | with_stmt | foreach_stmt | while_stmt | if_stmt | inthreads_stmt | apply_stmt
    #       | frag_reduce ';' | asm_stmt ';' | buffer_map ';' | ';'
    def statement(self) -> Stmt:
        self._enter()
        try:
            tok = self.toks[self.pos]
            kind = tok.kind
            if kind is NAME:
                return self._name_statement()
            if kind is KEYWORD and self._keyword_as_name(tok):
                # `u2 = 4;`, `block.at(0) = 1;`: a reserved word used as a variable
                self.reporter.report("CQ0116", tok.span, name=tok.text)
                self.toks[self.pos] = Token(NAME, tok.text, tok.span)
                return self._name_statement()
            if kind is KEYWORD or kind is PUNCT:
                handler = _STATEMENTS.get(tok.text)
                if handler is not None:
                    return handler(self)
                if tok.text.startswith(LIB_CALL_PREFIX):
                    return self._expr_stmt()
            self._unexpected("at the start of a statement")
        finally:
            self.depth -= 1

    def _keyword_as_name(self, tok: Token) -> bool:
        """Whether a statement-initial keyword can only be meant as a variable name."""
        if tok.text in SEPARATOR_WORDS:
            return False
        follower = self._peek().text
        if follower in ("=", ":") or (
                follower in COMPOUND_OPERATORS and self._peek(2).text == "="):
            return True  # no statement starts with a keyword followed by these
        # other followers (`[`, `.`, `(`) continue real statements: `f16 [4] x;`, `sync.shared;`
        return tok.text not in _STATEMENTS and follower in ("[", ".", "(") and \
            not tok.text.startswith(LIB_CALL_PREFIX)

    # primary := literal | IDENT | '(' expr ')' | '{' list '}' | '[' list ']' | '#' IDENT
    #          | '|' sizeof_e '|' | '|' elem_type '|' | 'cdiv' '(' expr ',' expr ')'
    #          | builtin '(' list ')' | '__to' '<' (elem_type | STRING) '>' '(' expr ')'
    #          | '&' (IDENT | elem_access) | ('++' | '--') IDENT | select_expr | call_stmt
    #          | IDENT '::' IDENT {'::' IDENT} [['<' tmpl {',' tmpl} '>'] '(' list ')']
    def _primary(self) -> Expr:
        tok = self.toks[self.pos]
        kind = tok.kind
        if kind is NAME:
            if self._peek().text == "::":
                return self._qualified_primary()
            self._advance()
            return Ident(tok.span, tok.text)
        if kind is INT:
            self._advance()
            return IntLit(tok.span, tok.int_value, tok.text, int_suffix(tok.text))
        if kind is FLOAT:
            self._advance()
            return FloatLit(tok.span, tok.float_value, tok.text, tok.text[-1] in "fF")
        if kind is STRING:
            value, text = self._strings()
            return StrLit(self._span(tok.span.start), value, text)
        if kind is KEYWORD:
            return self._keyword_primary(tok)
        if kind is PUNCT:
            handler = _PUNCT_PRIMARIES.get(tok.text)
            if handler is not None:
                return handler(self)
        self._fail("an expression")

    def _keyword_primary(self, tok: Token) -> Expr:
        text = tok.text
        if text in ("true", "false"):
            self._advance()
            return BoolLit(tok.span, text == "true")
        if text == "inf":
            self._advance()
            return InfLit(tok.span)
        if text == "nullptr":
            self._advance()
            return NullLit(tok.span)
        if text in CALL_BUILTINS or text.startswith(LIB_CALL_PREFIX):
            self._advance()
            args = self._paren_list(allow_empty=True)
            return CallExpr(self._span(tok.span.start), text, args)
        if text == "__to":
            return self._cast()
        if text == "select":
            return self._select_expr()
        if text == "call":
            return self._extern_call()
        if text not in SEPARATOR_WORDS and text not in _STATEMENTS:
            self.reporter.report("CQ0116", tok.span, name=text)  # `x = block + 1;`
            self._advance()
            return Ident(tok.span, text)
        self._fail("an expression")

_Handler = Callable[[_Parser], Stmt]

# Statements by their first token (keyword or punctuation); names go to _name_statement.
_STATEMENTS: dict[str, _Handler] = {
    ";": _Parser._empty_stmt,
    "[[": _Parser._attributed_stmt,
    "++": _Parser._expr_stmt,
    "--": _Parser._expr_stmt,
    "parallel": _Parser._parallel_stmt,
    "with": _Parser._with_stmt,
    "foreach": _Parser._foreach_stmt,
    "while": _Parser._while_stmt,
    "if": _Parser._if_stmt,
    "inthreads": _Parser._inthreads_stmt,
    "apply": _Parser._apply_stmt,
    "return": _Parser._return_stmt,
    "break": _Parser._jump_stmt,
    "continue": _Parser._jump_stmt,
    "yield": _Parser._jump_stmt,
    "__cpp__": _Parser._cpp_stmt,
    "__asm__": _Parser._asm_stmt,
    "asm": _Parser._asm_stmt,
    "wait": _Parser._wait_stmt,
    "trigger": _Parser._trigger_stmt,
    "swap": _Parser._swap_stmt,
    "rotate": _Parser._swap_stmt,
    "sync": _Parser._sync_stmt,
    "dma": _Parser._dma_stmt,
    "tma": _Parser._dma_stmt,
    "mma": _Parser._mma_stmt,
    "frag": _Parser._frag_stmt,
    "event": _Parser._event_decl,
    "mutable": _Parser._mutable_decl,
    "mdspan": _Parser._mdspan_decl,
    "ituple": _Parser._ituple_decl,
    "call": _Parser._expr_stmt,
    "assert": _Parser._assert_stmt,
    "print": _Parser._print_stmt,
    "println": _Parser._print_stmt,
    **{storage: _Parser._storage_decl for storage in STORAGES},
    **{type_name: _Parser._typed_decl for type_name in SCALAR_TYPES},
    **{builtin: _Parser._expr_stmt for builtin in CALL_BUILTINS},
}

_PUNCT_PRIMARIES: dict[str, Callable[[_Parser], Expr]] = {
    "(": _Parser._paren_primary,
    "{": _Parser._tuple_primary,
    "[": _Parser._shape_primary,
    "[[": _Parser._shape_primary,
    "#": _Parser._bound_primary,
    "|": _Parser._sizeof_primary,
    "&": _Parser._address_primary,
    "++": _Parser._increment_primary,
    "--": _Parser._increment_primary,
    "-": _Parser._negative_primary,
}
