"""Recursive-descent parser for Croqtile ``__co__`` functions (spec section 4).

Each parse method carries the EBNF production it implements (spec 4.1 - 4.9) as a comment.
Syntax errors are reported (CQ0110 / CQ0111 / CQ0114 / CQ0116) at the offending token; the
parser then skips to the end of the statement and goes on, so one run reports several
errors. Nesting deeper than ``MAX_DEPTH`` is reported once (CQ0115) and abandons the
function instead of overflowing Python's stack.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from .diagnostics import Reporter
from .lexer import gc_paused, lex
from .source import Span
from .syntax import (
    AnonDim, Apply, AsmStmt, Assign, AssertStmt, AssignStmt, Attribute, Binary, Block, BoolLit,
    BoundOf, BreakStmt, BufferMap, CallExpr, Cast, ContinueStmt, CppStmt, DeclVar, Derive,
    DimRef, DmaAny, DmaAttr, DmaStmt, ElemAccess, Empty, EventDecl, EventVar, Expr, ExprStmt,
    ExternCall, FloatLit, Foreach, FragDecl, Function, Ident, If, Index, InfLit, InThreads,
    IntLit, ItupleDecl, LoopSuffix, MdspanDecl, Member, MmaCommit, MmaExec, MmaFill, MmaLoad,
    MmaScale, MmaStore, Node, NullLit, Param, Parallel, ParallelLevel, PadConfig, Postfix,
    PrintStmt, Program, RangeItem, ReturnStmt, ScalarDecl, ScalarItem, Select, SelectExpr,
    ShapeLit, ShapeSpec, SizeOf, SpannedDecl, Stmt, StorageDest, StrLit, SwapStmt, SyncStmt,
    Ternary, TriggerStmt, TupleLit, TypeSpec, Unary, View, ViewOp, WaitStmt, While, With,
    Within, YieldStmt,
)
from .tokens import (
    ADDITIVE_LEVEL, BINARY_PRECEDENCE, CALL_BUILTINS, COMPOUND_OPERATORS, ELEM_TYPES, LEVELS,
    LIB_CALL_PREFIX, NOT_LEVEL, SCALAR_TYPES, STORAGES, TILDE_LEVEL, Token, TokenKind,
    canonical_elem, describe,
)

__all__ = [
    "MAX_DEPTH", "parse_expr_text", "parse_function", "parse_program", "parse_stmt_text",
    "recursion_headroom",
]

# Nesting limit for expressions and blocks. Deeper input is reported (CQ0115), not parsed:
# a 10,000-deep program must end with a diagnostic, never a RecursionError.
MAX_DEPTH = 400

# Size limits (CQ0117), so that every source is checked and lowered in bounded time (about
# 10 us per token in all): one function (the seeds have under 1,000 tokens; a Triton kernel
# of 100,000 would not compile anyway) and all functions of a source together.
MAX_FUNCTION_TOKENS = 100_000
MAX_PROGRAM_TOKENS = 250_000

_NAME, _KEYWORD, _INT, _FLOAT, _STRING, _DOT, _PUNCT, _EOF = (
    TokenKind.NAME, TokenKind.KEYWORD, TokenKind.INT, TokenKind.FLOAT, TokenKind.STRING,
    TokenKind.DOT_WORD, TokenKind.PUNCT, TokenKind.EOF,
)

_VIEW_OPS = frozenset({".chunkat", ".chunk", ".subspan", ".modspan", ".view", ".span_as", ".sqz"})
_MEMBERS = frozenset({".span", ".data", ".mdata"})
_DMA_OPS = frozenset({".copy", ".load", ".pad", ".transp"})
_DMA_ATTRS = frozenset({
    ".swiz", ".swizzle", ".zfill", ".sp", ".multicast", ".promote", ".evict_first", ".evict_last",
})
# Punctuation the parser may split when it needs only its first character: `a[b[i]]` lexes
# `]]`, `call f<g<1>>(x)` lexes `>>`, `y(::-1)` lexes `::`, `[[1, 2], 3]` lexes `[[`.
_SPLITTABLE = frozenset({"[", "]", ">", ":"})
# Keywords that never stand for a name, even by mistake (they separate the parts of a
# statement); any other keyword found where a name belongs is reported as CQ0116.
_SEPARATOR_WORDS = frozenset({"in", "by", "where", "after", "else", "__co__"})


class _ParseError(Exception):
    """A syntax error that has been reported; unwinds to the enclosing statement."""


class _TooDeep(Exception):
    """Nesting beyond MAX_DEPTH (reported once); unwinds the whole function."""


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


def parse_program(text: str, regions: Sequence[object], reporter: Reporter) -> Program:
    """Parse every ``__co__`` function; ``regions`` are ``(start, end)`` pairs or objects
    with ``start`` / ``end`` attributes (``regions.Region``). Past MAX_PROGRAM_TOKENS in
    all, the function that overflows is reported (CQ0117) and the rest is not parsed."""
    functions = []
    budget = MAX_PROGRAM_TOKENS
    for region in regions:
        start, end = _region_bounds(region)
        if budget < MAX_FUNCTION_TOKENS:
            limit, what, shown = budget, "the __co__ code of this source", MAX_PROGRAM_TOKENS
        else:
            name = getattr(region, "name", "")
            what = f"the __co__ function '{name}'" if name else "this __co__ function"
            limit, shown = MAX_FUNCTION_TOKENS, MAX_FUNCTION_TOKENS
        function, count = _parse_region(text, start, end, reporter, limit, what, shown)
        if count > limit:
            if limit == budget:
                break
            continue
        budget -= count
        if function is not None:
            functions.append(function)
    return Program(Span(0, len(text)), tuple(functions))


def _parse_region(text: str, start: int, end: int, reporter: Reporter, limit: int,
                  what: str, shown: int) -> tuple[Function | None, int]:
    """The function of ``text[start:end]`` and its token count; a function of more than
    ``limit`` tokens is reported (``what`` is over ``shown`` tokens) and not parsed."""
    with recursion_headroom(), gc_paused():
        tokens = lex(text, start, end, reporter, limit)
        count = len(tokens)
        if not tokens or tokens[-1].kind is not _EOF:  # more than `limit` tokens
            count = limit + 1
            reporter.report("CQ0117", Span(start, min(end, start + 6)), what=what,
                            limit=f"{shown:,}")
            return None, count
        parser = _Parser(text, tokens, reporter)
        try:
            return parser.function(), count
        except _TooDeep:
            return None, count


def parse_stmt_text(text: str, reporter: Reporter) -> Stmt:
    """Parse one statement (tests); an unparsable statement comes back as ``Empty``."""
    with recursion_headroom():
        parser = _Parser(text, lex(text, 0, len(text), reporter), reporter)
        try:
            stmt = parser.statement()
        except (_ParseError, _TooDeep):
            return Empty(Span(0, len(text)))
        parser.finish("after the statement")
        return stmt


def parse_expr_text(text: str, reporter: Reporter) -> Expr:
    """Parse one expression (tests); an unparsable one comes back as ``Ident("")``."""
    with recursion_headroom():
        parser = _Parser(text, lex(text, 0, len(text), reporter), reporter)
        try:
            expr = parser.expression()
        except (_ParseError, _TooDeep):
            return Ident(Span(0, len(text)), "")
        parser.finish("after the expression")
        return expr


def _region_bounds(region: object) -> tuple[int, int]:
    start = getattr(region, "start", None)
    end = getattr(region, "end", None)
    if isinstance(start, int) and isinstance(end, int):
        return start, end
    first, second = region[0], region[1]  # type: ignore[index]
    return first, second


# ----------------------------------------------------------------------------------------
# The parser
# ----------------------------------------------------------------------------------------


class _Parser:
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
        if tok.kind is not _EOF:
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
        if text in _SPLITTABLE and tok.kind is _PUNCT and tok.text.startswith(text):
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
        self.toks[self.pos] = Token(_PUNCT, tok.text[n:], Span(cut, tok.span.end))
        self.prev_end = cut
        return Token(_PUNCT, tok.text[:n], Span(tok.span.start, cut))

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
        raise _ParseError

    def _fail_node(self, node: Node, expected: str) -> NoReturn:
        self.reporter.report("CQ0110", node.span, expected=expected, found=self._quote(node))
        raise _ParseError

    def _unexpected(self, context: str) -> NoReturn:
        tok = self.toks[self.pos]
        self.reporter.report("CQ0111", tok.span, found=describe(tok), context=context)
        raise _ParseError

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
        raise _TooDeep

    def finish(self, context: str) -> None:
        """Report tokens left over after a complete statement or expression."""
        tok = self.toks[self.pos]
        if tok.kind is not _EOF:
            self.reporter.report("CQ0111", tok.span, found=describe(tok), context=context)

    # --- names and small pieces -------------------------------------------------------

    def _name(self, expected: str = "a name") -> Token:
        tok = self.toks[self.pos]
        if tok.kind is _NAME:
            return self._advance()
        if tok.kind is _KEYWORD and tok.text not in _SEPARATOR_WORDS:
            self.reporter.report("CQ0116", tok.span, name=tok.text)
            return self._advance()  # recover: read the keyword as the name it was meant to be
        self._fail(expected)

    def _int_const(self, expected: str) -> int:
        tok = self.toks[self.pos]
        if tok.kind is not _INT:
            self._fail(expected)
        self._advance()
        return tok.value

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
        if tok.kind is _KEYWORD:
            return self._advance().text
        return self._name().text

    # strings := STRING {STRING}                  // adjacent literals concatenate
    def _strings(self) -> tuple[str, str]:
        if self.toks[self.pos].kind is not _STRING:
            self._fail("a string literal")
        values: list[str] = []
        texts: list[str] = []
        while self.toks[self.pos].kind is _STRING:
            tok = self._advance()
            values.append(tok.value)
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

    # ------------------------------------------------------------------------------------
    # Functions and parameters (spec 4.1)
    # ------------------------------------------------------------------------------------

    # co_function := '__co__' ret_type IDENT '(' [param {',' param}] ')' '{' {stmt} '}'
    def function(self) -> Function | None:
        first = self.toks[self.pos]
        if first.kind is _EOF:
            self.reporter.report("CQ0110", first.span, expected="'__co__'", found=describe(first))
            return None
        self._accept("__co__")
        ret: TypeSpec | None = None
        name_tok: Token | None = None
        params: list[Param] = []
        try:
            ret = self._ret_type()
            name_tok = self._name("the function name")
            self._expect("(")
            if not self._at(")"):
                params.append(self._param())
                while self._accept(","):
                    params.append(self._param())
            self._expect(")")
        except _ParseError:
            # a broken header: skip to the body and still check it
            while not self._at("{") and self.toks[self.pos].kind is not _EOF:
                self._advance()
            if not self._at("{"):
                return None
        if not self._at("{"):  # a header without a body (`__co__ void f();`, end of input)
            tok = self.toks[self.pos]
            self.reporter.report("CQ0110", tok.span, expected="'{' to start the function body",
                                 found=describe(tok))
            return None
        body = self._block()
        self.finish("after the end of the function")
        return Function(
            Span(first.span.start, self.prev_end),
            name_tok.text if name_tok is not None else "",
            ret,
            tuple(params),
            body,
            name_tok.span if name_tok is not None else first.span,
        )

    # ret_type := 'void' | 'auto' | ptype
    def _ret_type(self) -> TypeSpec | None:
        tok = self.toks[self.pos]
        if self._accept("void"):
            return None
        if self._accept("auto"):
            return TypeSpec(tok.span, "auto")
        return self._ptype()

    # param := ['global' | 'shared' | 'local'] ptype ['&'] [IDENT]   // shared/local: checker
    def _param(self) -> Param:
        start = self._start()
        storage = self._advance().text if self.toks[self.pos].text in STORAGES else None
        ptype = self._ptype()
        by_ref = self._accept("&") is not None
        name = None
        if not self._at(",") and not self._at(")"):
            name = self._name("a parameter name").text
        return Param(self._span(start), storage, ptype, by_ref, name)

    # ptype := elem_type pshape | elem_type | 'int' | 'bool' | 'stream'
    def _ptype(self) -> TypeSpec:
        tok = self.toks[self.pos]
        if tok.text in ("int", "bool", "stream"):
            self._advance()
            return TypeSpec(tok.span, tok.text)
        if tok.text not in ELEM_TYPES:
            self._fail("a type")
        self._advance()
        shape = None
        if self.toks[self.pos].text in ("[", "mdspan"):
            shape = self._pshape()
        return TypeSpec(self._span(tok.span.start), canonical_elem(tok.text), shape)

    # pshape := '[' pdim {',' pdim} ']' | 'mdspan' '<' INT '>' | 'mdspan' '[' pdim {',' pdim} ']'
    def _pshape(self) -> ShapeSpec:
        start = self._start()
        if self._accept("mdspan") and self._accept("<"):
            rank = self._int_const("the mdspan rank")
            self._expect(">")
            return ShapeSpec(self._span(start), None, rank)
        self._expect("[")
        dims = [self._pdim()]
        while self._accept(","):
            dims.append(self._pdim())
        self._expect("]")
        return ShapeSpec(self._span(start), tuple(dims))

    # pdim := int_const | IDENT | '?' | '??'
    # int_const := INT | int_const ('+'|'-'|'*'|'/'|'%') int_const | '(' int_const ')'
    def _pdim(self) -> Expr:
        tok = self.toks[self.pos]
        if tok.text in ("?", "??"):
            self._advance()
            return AnonDim(tok.span, tok.text == "??")
        dim = self.expression()
        if not (isinstance(dim, Ident) or _is_int_const(dim)):
            # `[M / 2]` is a syntax error in the reference: parameter shapes bind symbols
            self.reporter.report("CQ0111", dim.span, found=f"expression {self._quote(dim)}",
                                 context="in a parameter shape (write a constant, a name, "
                                         "'?' or '??')")
        return dim

    # ------------------------------------------------------------------------------------
    # Statements (spec 4.2)
    # ------------------------------------------------------------------------------------

    # body := '{' {stmt} '}' | stmt
    def _body(self) -> Block:
        if self._at("{"):
            return self._block()
        start = self._start()
        stmt = self.statement()
        return Block(self._span(start), (stmt,), braced=False)

    # block := '{' {stmt} '}'
    def _block(self) -> Block:
        self._enter()
        try:
            start = self._expect("{").span.start
            stmts: list[Stmt] = []
            while True:
                tok = self.toks[self.pos]
                if tok.text == "}":
                    self._advance()
                    break
                if tok.kind is _EOF:
                    if not self.eof_reported:  # report the missing '}' once, not per level
                        self.eof_reported = True
                        self.reporter.report("CQ0110", tok.span, expected="'}'",
                                             found=describe(tok))
                    break
                stmt = self._recovering_statement()
                if stmt is not None:
                    stmts.append(stmt)
            return Block(self._span(start), tuple(stmts))
        finally:
            self.depth -= 1

    def _recovering_statement(self) -> Stmt | None:
        saved = (self.no_pipe, self.dimref_ok, self.dimrefs)
        try:
            return self.statement()
        except _ParseError:
            self.no_pipe, self.dimref_ok, self.dimrefs = saved
            self._synchronize()
            return None

    def _synchronize(self) -> None:
        """Skip to the end of the broken statement: past the next ';' at this level, or past
        a block the statement opened, or up to the '}' that closes the enclosing block."""
        depth = 0
        while True:
            tok = self.toks[self.pos]
            if tok.kind is _EOF:
                return
            if tok.kind is _PUNCT:
                text = tok.text
                if text == ";" and depth == 0:
                    self._advance()
                    return
                if text == "{":
                    depth += 1
                elif text == "}":
                    if depth == 0:
                        return
                    depth -= 1
                    if depth == 0:
                        self._advance()
                        return
            self._advance()

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
            if kind is _NAME:
                return self._name_statement()
            if kind is _KEYWORD and self._keyword_as_name(tok):
                # `u2 = 4;`, `block.at(0) = 1;`: a reserved word used as a variable
                self.reporter.report("CQ0116", tok.span, name=tok.text)
                self.toks[self.pos] = Token(_NAME, tok.text, tok.span)
                return self._name_statement()
            if kind is _KEYWORD or kind is _PUNCT:
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
        if tok.text in _SEPARATOR_WORDS:
            return False
        follower = self._peek().text
        if follower in ("=", ":") or (
                follower in COMPOUND_OPERATORS and self._peek(2).text == "="):
            return True  # no statement starts with a keyword followed by these
        # other followers (`[`, `.`, `(`) continue real statements: `f16 [4] x;`, `sync.shared;`
        return tok.text not in _STATEMENTS and follower in ("[", ".", "(") and \
            not tok.text.startswith(LIB_CALL_PREFIX)

    # stmt := ';'
    def _empty_stmt(self) -> Empty:
        tok = self._advance()
        return Empty(tok.span)

    # stmt := IDENT ':' expr ';'                                       (mdspan declaration)
    #       | IDENT {'::' IDENT} ['<' tmpl {',' tmpl} '>'] '(' args ')' ';'   (intrinsic call)
    #       | IDENT ('++' | '--') ';'
    #       | assign {',' assign} ';'
    def _name_statement(self) -> Stmt:
        start = self._start()
        follower = self._peek().text
        if follower == ":":
            return self._mdspan_body(start, None, keyword=False)
        if follower in ("(", "::", "<"):
            call = self._intrinsic_call()
            self._end_stmt()
            return ExprStmt(self._span(start), call)
        target = self._postfix()
        if isinstance(target, Postfix) and self._at(";"):
            self._advance()
            return ExprStmt(self._span(start), target)
        return self._assignments(start, target)

    # stmt := call_stmt ';' | atomic / intrinsic / frag_reduce call ';' | ('++'|'--') IDENT ';'
    def _expr_stmt(self) -> ExprStmt:
        start = self._start()
        expr = self.expression()
        self._end_stmt()
        return ExprStmt(self._span(start), expr)

    # stmt := 'return' [expr] ';'
    def _return_stmt(self) -> ReturnStmt:
        start = self._advance().span.start
        value = None if self._at(";") else self.expression()
        self._end_stmt()
        return ReturnStmt(self._span(start), value)

    # stmt := 'break' ';' | 'continue' ';' | 'yield' ';'
    def _jump_stmt(self) -> Stmt:
        tok = self._advance()
        self._end_stmt()
        span = self._span(tok.span.start)
        if tok.text == "break":
            return BreakStmt(span)
        if tok.text == "continue":
            return ContinueStmt(span)
        return YieldStmt(span)

    # stmt := '__cpp__' '(' STRING {STRING} ')' ';'
    def _cpp_stmt(self) -> CppStmt:
        start = self._advance().span.start
        self._expect("(")
        code, _ = self._strings()
        self._expect(")")
        self._end_stmt()
        return CppStmt(self._span(start), code)

    # asm_stmt := ('__asm__' | 'asm') ['volatile'] '(' raw tokens ')' ';'   // kept verbatim
    def _asm_stmt(self) -> AsmStmt:
        start = self._advance().span.start
        volatile = self._accept("volatile") is not None
        if self._at("goto"):
            self._unexpected("(asm goto is not supported)")
        self._expect("(")
        first: Token | None = None
        last: Token | None = None
        depth = 1
        while True:
            tok = self.toks[self.pos]
            if tok.kind is _EOF:
                self._fail("')'")
            if tok.text == "(":
                depth += 1
            elif tok.text == ")":
                depth -= 1
                if depth == 0:
                    break
            first = first or tok
            last = tok
            self._advance()
        self._advance()
        text = "" if first is None or last is None else \
            self.text[first.span.start:last.span.end]
        self._end_stmt()
        return AsmStmt(self._span(start), volatile, text)

    # stmt := {attr} parallel_stmt | mma_sched mma_exec ';'
    # attr := '[[' 'launch_bounds' '(' list ')' ']]' | '[[' 'maxnreg' '(' expr ')' ']]'
    # mma_sched := '[[' 'schedule' '(' 'k_tiles' '(' INT {',' INT} ')' ')' ']]'
    def _attributed_stmt(self) -> Stmt:
        start = self._start()
        attrs = [self._attribute()]
        while self._at("[[") or (self._at("[") and self._peek().text == "["):
            attrs.append(self._attribute())
        schedules = [a for a in attrs if a.name == "schedule"]
        if not schedules and self._at("parallel"):
            return self._parallel_stmt(start, tuple(attrs))
        if len(schedules) == len(attrs) == 1:
            # the MMA statement starts at its own first token: its diagnostics point at
            # the MMA, not at the schedule on the line above
            mma_start = self._start()
            if self._at("mma"):
                return self._mma(mma_start, None, schedules[0])
            if self.toks[self.pos].kind is _NAME and self._peek().text == "=" and \
                    self._peek(2).text == "mma":
                name = self._advance()
                self._advance()
                return self._mma(mma_start, Ident(name.span, name.text), schedules[0])
        self._fail("'parallel' after [[launch_bounds]] / [[maxnreg]], or 'mma' after "
                   "[[schedule]]")

    def _attribute(self) -> Attribute:
        start = self._start()
        self._expect_pair("[[")
        name = self.toks[self.pos]
        if name.kind is not _NAME and name.kind is not _KEYWORD:
            self._fail("an attribute (launch_bounds, maxnreg or schedule)")
        self._advance()
        if name.text == "schedule":
            self._expect("(")
            inner = self._start()
            tiles = self._name("'k_tiles'")
            if tiles.text != "k_tiles":
                self.reporter.report("CQ0110", tiles.span, expected="'k_tiles'",
                                     found=describe(tiles))
            values = self._paren_list()
            args: tuple[Expr, ...] = (CallExpr(self._span(inner), "k_tiles", values),)
            self._expect(")")
        elif name.text in ("launch_bounds", "maxnreg"):
            args = self._paren_list()
        else:
            self.reporter.report("CQ0110", name.span,
                                 expected="an attribute (launch_bounds, maxnreg or schedule)",
                                 found=describe(name))
            raise _ParseError
        self._expect_pair("]]")
        return Attribute(self._span(start), name.text, args)

    # ------------------------------------------------------------------------------------
    # Declarations and assignment (spec 4.3)
    # ------------------------------------------------------------------------------------

    # decl := elem_type '[' dims ']' var {',' var} | scalar_t sdecl {',' sdecl}
    def _typed_decl(self) -> Stmt:
        start = self._start()
        tok = self._advance()
        if tok.text in ELEM_TYPES and self.toks[self.pos].text in ("[", "[["):
            return self._spanned_decl_rest(start, None, canonical_elem(tok.text))
        return self._scalar_decl_rest(start, False, canonical_elem(tok.text))

    # decl := storage elem_type '[' dims ']' var {',' var}
    #       | storage 'event' ['<' INT '>'] evar {',' evar}
    def _storage_decl(self) -> Stmt:
        start = self._start()
        storage = self._advance().text
        if self._at("event"):
            return self._event_decl_rest(start, storage)
        tok = self.toks[self.pos]
        if tok.text not in ELEM_TYPES:
            self._fail("an element type or 'event'")
        self._advance()
        return self._spanned_decl_rest(start, storage, canonical_elem(tok.text))

    # decl := [storage | 'frag'] elem_type '[' dims ']' var {',' var}   (prefix already read)
    # dims := dimval {',' dimval} | 'auto'
    def _spanned_decl_rest(self, start: int, storage: str | None, elem: str,
                           frag: bool = False) -> SpannedDecl:
        self._expect("[", "'[' and the dimensions")
        dims: tuple[Expr, ...] | None
        if self._accept("auto"):
            dims = None
        else:
            dims = self._expr_list()
        self._expect("]")
        decl_vars = [self._decl_var()]
        while self._accept(","):
            decl_vars.append(self._decl_var())
        self._end_stmt()
        return SpannedDecl(self._span(start), storage, elem, dims, tuple(decl_vars), frag)

    # var := IDENT {'[' expr ']'} ['{' expr '}']
    def _decl_var(self) -> DeclVar:
        name = self._name("a variable name")
        array_dims = self._array_dims()
        init = None
        if self._accept("{"):
            init = self.expression()
            self._expect("}")
        return DeclVar(self._span(name.span.start), name.text, array_dims, init)

    # array_dims := {'[' expr ']'}
    def _array_dims(self) -> tuple[Expr, ...]:
        dims: list[Expr] = []
        while self._at("[") or self._at("[["):
            self._expect("[")
            dims.append(self.expression())
            self._expect("]")
        return tuple(dims)

    # decl := 'mutable' [scalar_t] sdecl {',' sdecl}
    def _mutable_decl(self) -> ScalarDecl:
        start = self._advance().span.start
        type_name = None
        if self.toks[self.pos].text in SCALAR_TYPES:
            type_name = canonical_elem(self._advance().text)
        return self._scalar_decl_rest(start, True, type_name)

    # decl := ['mutable'] scalar_t sdecl {',' sdecl}          (prefix already read)
    def _scalar_decl_rest(self, start: int, mutable: bool, type_name: str | None) -> ScalarDecl:
        items = [self._scalar_item()]
        while self._accept(","):
            items.append(self._scalar_item())
        self._end_stmt()
        return ScalarDecl(self._span(start), mutable, type_name, tuple(items))

    # sdecl := IDENT ['=' (expr | call_stmt) | '{' expr '}']
    def _scalar_item(self) -> ScalarItem:
        name = self._name("a variable name")
        if self._accept("="):
            init = self.expression()
            return ScalarItem(self._span(name.span.start), name.text, init)
        if self._accept("{"):
            init = self.expression()
            self._expect("}")
            return ScalarItem(self._span(name.span.start), name.text, init, brace_init=True)
        return ScalarItem(name.span, name.text)

    # decl := 'mdspan' ['<' INT '>'] IDENT ':' expr
    def _mdspan_decl(self) -> MdspanDecl:
        start = self._advance().span.start
        rank = None
        if self._accept("<"):
            rank = self._int_const("the mdspan rank")
            self._expect(">")
        return self._mdspan_body(start, rank, keyword=True)

    # mdspan_body := IDENT ':' expr ';'
    def _mdspan_body(self, start: int, rank: int | None, keyword: bool) -> MdspanDecl:
        name = self._name("a shape name")
        eq = self._accept("=")
        if eq is not None:
            self.reporter.report("CQ0217", eq.span)  # `mdspan s = [2];`: keep going
        else:
            self._expect(":")
        value = self.expression()
        self._end_stmt()
        return MdspanDecl(self._span(start), name.text, value, rank, keyword)

    # decl := 'ituple' ['<' INT '>'] IDENT '=' expr
    def _ituple_decl(self) -> ItupleDecl:
        start = self._advance().span.start
        rank = None
        if self._accept("<"):
            rank = self._int_const("the ituple rank")
            self._expect(">")
        name = self._name("a tuple name")
        self._expect("=")
        value = self._assign_value()
        self._end_stmt()
        return ItupleDecl(self._span(start), name.text, value, rank)

    # decl := 'event' ['<' INT '>'] evar {',' evar}
    def _event_decl(self) -> EventDecl:
        return self._event_decl_rest(self._start(), None)

    # decl := [storage] 'event' ['<' INT '>'] evar {',' evar}   (storage already read)
    def _event_decl_rest(self, start: int, storage: str | None) -> EventDecl:
        self._expect("event")
        count = None
        if self._accept("<"):
            count = self._int_const("the event thread count")
            self._expect(">")
        event_vars = [self._event_var()]
        while self._accept(","):
            event_vars.append(self._event_var())
        self._end_stmt()
        return EventDecl(self._span(start), storage, count, tuple(event_vars))

    # evar := IDENT {'[' expr ']'} ['=' 'ready']
    def _event_var(self) -> EventVar:
        name = self._name("an event name")
        array_dims = self._array_dims()
        ready = False
        if self._accept("="):
            if not self._at("ready"):
                self._fail("'ready'")
            self._advance()
            ready = True
        return EventVar(self._span(name.span.start), name.text, array_dims, ready)

    # assign := IDENT '=' (expr | view | select_expr | call_stmt | IDENT '{' list '}')
    #         | IDENT op '=' expr | elem_access ['=' | op '='] expr        op in + - * / %
    # assigns := assign {',' assign} ';'   (the first target is already parsed)
    def _assignments(self, start: int, target: Expr) -> Stmt:
        items: list[Assign] = []
        while True:
            if not isinstance(target, (Ident, ElemAccess, Index)):
                self._fail_node(target, "an assignment target (a name, x.at(...) or buf[i])")
            op = self._assign_op()
            if op == "=" and not items and isinstance(target, Ident):
                engine = self.toks[self.pos].text
                if engine in ("dma", "tma"):
                    return self._dma(start, target.name)
                if engine == "mma":
                    return self._mma(start, target)
            value = self._assign_value() if op == "=" else self.expression()
            if not items and self.toks[self.pos].text in (".map", ".remap"):
                return self._buffer_map(start)
            items.append(Assign(Span(target.span.start, self.prev_end), target, op, value))
            if not self._accept(","):
                break
            target = self._postfix()
        self._end_stmt()
        return AssignStmt(self._span(start), tuple(items))

    # assign_op := '=' | ('+' | '-' | '*' | '/' | '%') '='
    def _assign_op(self) -> str:
        tok = self.toks[self.pos]
        if tok.text == "=":
            self._advance()
            return "="
        if tok.text in COMPOUND_OPERATORS and self._peek().text == "=":
            self._advance()
            self._advance()
            return tok.text + "="
        self._fail("'=' or a compound assignment")

    # value := IDENT '{' list '}' | expr           // the first is ituple derivation sugar
    def _assign_value(self) -> Expr:
        if self.toks[self.pos].kind is _NAME and self._peek().text == "{":
            name = self._advance()
            items, _ = self._derivation_items("{", "}")
            return Derive(self._span(name.span.start), Ident(name.span, name.text), items, "{}")
        return self.expression()

    # buffer_map := IDENT '=' view ('.map' | '.remap') '<' storage '>' '(' expr ',' expr ')'
    def _buffer_map(self, start: int) -> BufferMap:
        self._advance()
        self._expect("<")
        if self.toks[self.pos].text not in STORAGES:
            self._fail("a storage (global, shared or local)")
        self._advance()
        self._expect(">")
        self._paren_list()
        text = self.text[start:self.prev_end]
        self._end_stmt()
        return BufferMap(self._span(start), text)

    # ------------------------------------------------------------------------------------
    # Parallel, with, foreach, while, if, inthreads, apply (spec 4.4)
    # ------------------------------------------------------------------------------------

    # parallel_stmt := {attr} 'parallel' ['.async'] ['<' IDENT '>'] pby {',' pby} body
    def _parallel_stmt(self, start: int | None = None,
                       attrs: tuple[Attribute, ...] = ()) -> Parallel:
        if start is None:
            start = self._start()
        self._expect("parallel")
        is_async = self._accept(".async") is not None
        stream = None
        if self._accept("<"):
            stream = self._name("a stream name").text
            self._expect(">")
        levels = [self._pby()]
        while self._accept(","):
            levels.append(self._pby())
        body = self._body()
        return Parallel(self._span(start), tuple(levels), body, is_async, stream, attrs)

    # pby := ('by' expr | IDENT 'by' expr
    #        | [IDENT '='] '{' IDENT {',' IDENT} '}' 'by' '[' expr {',' expr} ']') [level]
    # level := ':' level_word ['<' 'cooperative' '>']
    def _pby(self) -> ParallelLevel:
        start = self._start()
        names: tuple[str, ...] = ()
        tuple_name = None
        braced = False
        if self._accept("by"):
            bounds: tuple[Expr, ...] = (self.expression(),)
        elif self._at("{") or self._peek().text == "=":
            if not self._at("{"):
                tuple_name = self._name("a tuple name").text
                self._expect("=")
            names = self._braced_names()
            braced = True
            self._expect("by")
            self._expect("[")
            bounds = self._expr_list()
            self._expect("]")
        else:
            names = (self._name("a parallel variable or 'by'").text,)
            self._expect("by")
            bounds = (self.expression(),)
        level = device_name = None
        cooperative = False
        if self._accept(":"):
            level, device_name = self._level_word()
            if self._accept("<"):
                self._expect("cooperative")
                self._expect(">")
                cooperative = True
        return ParallelLevel(self._span(start), names, bounds, level, tuple_name, braced,
                             cooperative, device_name)

    # level_word := 'block' | 'group-4' | 'group' | 'thread' | 'cluster' | 'device' ['(' IDENT ')']
    def _level_word(self) -> tuple[str, str | None]:
        tok = self.toks[self.pos]
        if tok.text not in LEVELS:
            self._fail("a level (block, group-4, group, thread, cluster or device)")
        self._advance()
        device_name = None
        if tok.text == "device" and self._accept("("):
            device_name = self._name("a device name").text
            self._expect(")")
        return tok.text, device_name

    # with_stmt := 'with' within {',' within} ['where' bind {',' bind}] body
    # bind := IDENT '<->' IDENT
    def _with_stmt(self) -> With:
        start = self._advance().span.start
        items = [self._within()]
        while self._accept(","):
            items.append(self._within())
        where: list[tuple[str, str]] = []
        if self._accept("where"):
            while True:
                left = self._name().text
                self._expect("<->")
                where.append((left, self._name().text))
                if not self._accept(","):
                    break
        body = self._body()
        return With(self._span(start), tuple(items), body, tuple(where))

    # within := IDENT 'in' shape_e | [IDENT '='] '{' IDENT {',' IDENT} '}' 'in' shape_e
    # shape_e := shape_term {('+'|'-'|'*'|'/'|'%') shape_term}      // any expression here
    def _within(self) -> Within:
        start = self._start()
        tuple_name = None
        braced = False
        if not self._at("{") and self._peek().text == "=":
            tuple_name = self._name("a tuple name").text
            self._expect("=")
        if self._at("{"):
            names = self._braced_names()
            braced = True
        else:
            names = (self._name("a loop variable").text,)
        self._expect("in")
        shape = self.expression()
        return Within(self._span(start), names, shape, tuple_name, braced)

    # foreach_stmt := 'foreach' item {',' item} [':' suffix {',' suffix}] body
    # item := within | range
    def _foreach_stmt(self) -> Foreach:
        start = self._advance().span.start
        items = [self._foreach_item()]
        while self._accept(","):
            items.append(self._foreach_item())
        suffixes: list[LoopSuffix] = []
        if self._accept(":"):
            suffixes.append(self._loop_suffix())
            while self._accept(","):
                suffixes.append(self._loop_suffix())
        body = self._body()
        return Foreach(self._span(start), tuple(items), body, tuple(suffixes))

    def _foreach_item(self) -> Within | RangeItem:
        follower = self._peek().text
        if self._at("{") or follower == "in" or (follower == "=" and self._peek(2).text == "{"):
            return self._within()
        return self._range()

    # range := [IDENT '='] IDENT ['(' [expr] ':' [expr] [':' [expr]] ')']
    def _range(self) -> RangeItem:
        start = self._start()
        var = self._name("a loop variable").text
        name = None
        if self._accept("="):
            name, var = var, self._name("a bounded variable").text
        lb = ub = step = None
        has_range = self._accept("(") is not None
        if has_range:
            if not self._at(":") and not self._at("::"):
                lb = self.expression()
            self._expect(":")
            if not self._at(":") and not self._at(")"):
                ub = self.expression()
            if self._accept(":") and not self._at(")"):
                step = self.expression()
            self._expect(")")
        return RangeItem(self._span(start), var, name, lb, ub, step, has_range)

    # suffix := 'unroll' ['(' INT ')'] | 'vectorize' '(' IDENT ',' expr ')'
    def _loop_suffix(self) -> LoopSuffix:
        start = self._start()
        if self._accept("unroll"):
            args: tuple[Expr, ...] = self._paren_list() if self._at("(") else ()
            return LoopSuffix(self._span(start), "unroll", args)
        if self._accept("vectorize"):
            self._expect("(")
            name = self._name("a loop variable")
            self._expect(",")
            width = self.expression()
            self._expect(")")
            return LoopSuffix(self._span(start), "vectorize", (Ident(name.span, name.text), width))
        self._fail("'unroll' or 'vectorize'")

    # while_stmt := 'while' '(' expr ')' body
    def _while_stmt(self) -> While:
        start = self._advance().span.start
        cond = self._paren_expr()
        body = self._body()
        return While(self._span(start), cond, body)

    # if_stmt := 'if' '(' (expr | call_stmt) ')' body ['else' body]
    def _if_stmt(self) -> If:
        start = self._advance().span.start
        cond = self._paren_expr()
        then = self._body()
        other = self._body() if self._accept("else") else None
        return If(self._span(start), cond, then, other)

    # inthreads_stmt := 'inthreads' ['.async'] '(' expr ')' body
    def _inthreads_stmt(self) -> InThreads:
        start = self._advance().span.start
        is_async = self._accept(".async") is not None
        pred = self._paren_expr()
        body = self._body()
        return InThreads(self._span(start), pred, body, is_async)

    # apply_stmt := 'apply' '{' IDENT {',' IDENT} '}' 'in' IDENT '.span' body
    def _apply_stmt(self) -> Apply:
        start = self._advance().span.start
        names = self._braced_names()
        self._expect("in")
        frag = self._name("a fragment name").text
        self._expect(".span")
        body = self._body()
        return Apply(self._span(start), names, frag, body)

    # paren_expr := '(' expr ')'
    def _paren_expr(self) -> Expr:
        self._expect("(")
        expr = self._inner_expression()
        self._expect(")")
        return expr

    def _inner_expression(self) -> Expr:
        """An expression inside brackets: a `|` there never closes an enclosing `|...|`."""
        saved = self.no_pipe
        self.no_pipe = False
        expr = self.expression()
        self.no_pipe = saved
        return expr

    # ------------------------------------------------------------------------------------
    # DMA / TMA (spec 4.5)
    # ------------------------------------------------------------------------------------

    # stmt := dma_stmt ';'           (no future)
    def _dma_stmt(self) -> Stmt:
        return self._dma(self._start(), None)

    # dma_stmt := [IDENT '='] engine op [cfg] ['.async'] {attr} view '=>' dst ['after' IDENT]
    #           | IDENT '=' engine '.any'
    # engine := 'dma' | 'tma';  op := '.copy' | '.load' | '.pad' | '.transp'
    # dst := view | storage | select_expr
    def _dma(self, start: int, future: str | None) -> Stmt:
        engine = self._advance().text
        op_tok = self.toks[self.pos]
        if op_tok.text == ".any":
            if future is None:
                self._unexpected("without a future name (write `f = dma.any;`)")
            self._advance()
            self._end_stmt()
            return DmaAny(self._span(start), future)
        if op_tok.text not in _DMA_OPS:
            self._fail("a DMA operation (.copy, .load, .pad, .transp or .any)")
        self._advance()
        pad = perm = None
        if self._at("<"):
            pad, perm = self._dma_config()
        is_async, attrs = self._dma_modifiers()
        src = self._view()
        while self._at(".zfill"):
            # [legacy] spec 12.9: `src.subspan(...).at(...).zfill => dst` means `.zfill`
            zfill = self._advance()
            if not any(a.name == "zfill" for a in attrs):
                attrs += (DmaAttr(zfill.span, "zfill"),)
        self._expect("=>")
        dst = self._dma_destination()
        after = self._name("a future name").text if self._accept("after") else None
        self._end_stmt()
        return DmaStmt(self._span(start), future, engine, op_tok.text[1:], src, dst, is_async,
                       attrs, pad, perm, after)

    # cfg := '<' '{' list '}' ',' '{' list '}' ',' '{' list '}' ',' (literal | IDENT) '>'   // pad
    #      | '<' INT {',' INT} '>'                                                        // transp
    def _dma_config(self) -> tuple[PadConfig | None, tuple[Expr, ...] | None]:
        start = self._expect("<").span.start
        if self._at("{"):
            low = self._braced_list()
            self._expect(",")
            high = self._braced_list()
            self._expect(",")
            mid = self._braced_list()
            self._expect(",")
            value = self._binary(ADDITIVE_LEVEL)  # from `+` up: the closing `>` is no operator
            self._expect(">")
            return PadConfig(self._span(start), low, high, mid, value), None
        perm = [self._binary(ADDITIVE_LEVEL)]
        while self._accept(","):
            perm.append(self._binary(ADDITIVE_LEVEL))
        self._expect(">")
        return None, tuple(perm)

    # modifiers := ['.async'] {attr}            // a fixed order: CQ0114 when it is broken
    def _dma_modifiers(self) -> tuple[bool, tuple[DmaAttr, ...]]:
        is_async = False
        attrs: list[DmaAttr] = []
        while True:
            tok = self.toks[self.pos]
            if tok.text == ".async":
                self._advance()
                if attrs:
                    self.reporter.report("CQ0114", tok.span, modifier=".async",
                                         order="before the attributes (right after the "
                                               "operation and its config)")
                is_async = True
            elif tok.text in _DMA_ATTRS:
                attr = self._dma_attr()
                if attr.name.startswith("evict") and any(a.name == "swiz" for a in attrs):
                    self.reporter.report("CQ0114", attr.span, modifier=tok.text,
                                         order="before '.swiz'",
                                         hint="write the TMA eviction modifier first, e.g. "
                                              "`tma.load.evict_first.swiz<128>`")
                attrs.append(attr)
            else:
                return is_async, tuple(attrs)

    # attr := ('.swiz' | '.swizzle') ['<' INT '>'] | '.zfill' | '.sp' ['<' INT (':'|',') INT '>']
    #       | '.multicast' | '.promote' '<' INT '>' | '.evict_first' | '.evict_last'
    def _dma_attr(self) -> DmaAttr:
        tok = self._advance()
        name = "swiz" if tok.text == ".swizzle" else tok.text[1:]
        args: tuple[Expr, ...] = ()
        if name in ("swiz", "promote", "sp") and self._accept("<"):
            first = self._binary(ADDITIVE_LEVEL)
            if name == "sp":
                if self._accept(":") is None:
                    self._expect(",", "':' or ','")
                args = (first, self._binary(ADDITIVE_LEVEL))
            else:
                args = (first,)
            self._expect(">")
        return DmaAttr(self._span(tok.span.start), name, args)

    def _dma_destination(self) -> Expr:
        tok = self.toks[self.pos]
        if tok.text in STORAGES:
            self._advance()
            return StorageDest(tok.span, tok.text)
        if tok.text == "select":
            return self._select_expr()
        return self._view()

    # view := base {vop}
    # base := IDENT | IDENT '.data' | IDENT '.mdata' | IDENT '[' expr ']' {'[' expr ']'}
    #       | IDENT '.at' '(' expr ')'                          // event generation
    def _view(self) -> View:
        expr = self._postfix()
        if isinstance(expr, View):
            return expr
        if isinstance(expr, (Ident, Member, Index, ElemAccess)):
            return View(expr.span, expr, ())
        self._fail_node(expr, "a view (a name, buf[i], f.data or a tiled view such as "
                              "x.chunkat(i))")

    # ------------------------------------------------------------------------------------
    # MMA (spec 4.6)
    # ------------------------------------------------------------------------------------

    # stmt := mma_stmt ';' | mma_exec ';'      (no result name)
    def _mma_stmt(self) -> Stmt:
        return self._mma(self._start(), None)

    # mma_stmt := [IDENT '='] 'mma' ('.fill' ... | '.load' ... | '.store' ... | '.scale' ...)
    #           | 'mma' '.' 'commit'                                       [legacy] spec 12.7
    # mma_exec := [IDENT '='] 'mma' lay ...
    def _mma(self, start: int, target: Ident | None, schedule: Attribute | None = None) -> Stmt:
        self._expect("mma")
        tok = self.toks[self.pos]
        text = tok.text
        if text in (".row", ".col"):
            return self._mma_exec(start, target, schedule)
        if schedule is not None:
            self._fail("an MMA layout ('.row' or '.col') after [[schedule(...)]]")
        if text == ".fill":
            return self._mma_fill(start, target)
        if text == ".load":
            return self._mma_load(start, target)
        if text not in (".store", ".scale") and not (text == "." and self._peek().text == "commit"):
            self._fail("an MMA operation (.fill, .load, .store, .scale, .row or .col)")
        if target is not None:
            self._fail_node(target, f"no result name: 'mma{text}' produces no value")
        if text == ".store":
            return self._mma_store(start)
        if text == ".scale":
            return self._mma_scale(start)
        self._advance()
        self._advance()
        self._end_stmt()
        return MmaCommit(self._span(start))

    # mma_fill := IDENT '=' 'mma' '.fill' ['.' elem_type] expr
    #           | 'mma' '.fill' ['.' elem_type] frag ',' expr
    def _mma_fill(self, start: int, target: Ident | None) -> MmaFill:
        self._advance()
        elem = self._dot_elem_type()
        declares = target is not None
        frag: Expr = target if target is not None else self._frag()
        if not declares:
            self._expect(",")
        value = self.expression()
        self._end_stmt()
        return MmaFill(self._span(start), frag, value, elem, declares)

    # mma_load := IDENT '=' 'mma' '.load' ['.' 'frag'] [swz] ['.async'] view
    #           | 'mma' '.load' view ',' frag
    # swz := ('.swiz' | '.swizzle') ['<' INT '>']
    def _mma_load(self, start: int, target: Ident | None) -> MmaLoad:
        self._advance()
        frag = False
        if self._at(".") and self._peek().text == "frag":
            self._advance()
            self._advance()
            frag = True
        has_swiz = False
        swiz = None
        if self._at(".swiz") or self._at(".swizzle"):
            self._advance()
            has_swiz = True
            if self._accept("<"):
                swiz = self._binary(ADDITIVE_LEVEL)
                self._expect(">")
        is_async = self._accept(".async") is not None
        src = self._view()
        declares = target is not None
        dest: Expr
        if target is not None:
            dest = target
        else:
            self._expect(",")
            dest = self._frag()
        self._end_stmt()
        return MmaLoad(self._span(start), dest, src, declares, frag, swiz, has_swiz, is_async)

    # mma_store := 'mma' '.store' ['.async' | '.transp'] frag ',' view
    #            | 'mma' '.store' '.mask' frag ',' view ',' expr [',' expr]
    def _mma_store(self, start: int) -> MmaStore:
        self._advance()
        modifier = None
        if self.toks[self.pos].text in (".async", ".transp", ".mask"):
            modifier = self._advance().text[1:]
        frag = self._frag()
        self._expect(",")
        dst = self._view()
        mask: list[Expr] = []
        if modifier == "mask":
            self._expect(",")
            mask.append(self.expression())
            if self._accept(","):
                mask.append(self.expression())
        self._end_stmt()
        return MmaStore(self._span(start), frag, dst, modifier, tuple(mask))

    # mma_scale := 'mma' '.scale' frag ',' view ',' expr
    def _mma_scale(self, start: int) -> MmaScale:
        self._advance()
        frag = self._frag()
        self._expect(",")
        scale_a = self._view()
        self._expect(",")
        scale_b = self.expression()
        self._end_stmt()
        return MmaScale(self._span(start), frag, scale_a, scale_b)

    # mma_exec := 'mma' lay frag ',' opnd ',' opnd
    #           | IDENT '=' 'mma' lay '.async' frag ',' opnd ',' opnd
    #           | 'mma' lay '.sp' frag ',' opnd ',' opnd [',' opnd]   (the last: metadata)
    #           | 'mma' lay '.scale' frag ',' opnd ',' opnd ',' view ',' expr
    # lay := ('.row' | '.col') ('.row' | '.col');  opnd := frag | view   (always a View here)
    def _mma_exec(self, start: int, target: Ident | None, schedule: Attribute | None) -> MmaExec:
        layout_a = self._layout()
        layout_b = self._layout()
        kind = "plain"
        is_async = False
        tok = self.toks[self.pos]
        if tok.text == ".async":
            is_async = True
        elif tok.text in (".sp", ".scale"):
            kind = tok.text[1:]
        if is_async or kind != "plain":
            self._advance()
        if target is not None and not is_async:
            self.reporter.report("CQ0110", tok.span, found=describe(tok),
                                 expected="'.async' (only an asynchronous MMA yields a future)")
        acc = self._frag()
        self._expect(",")
        a = self._view()
        self._expect(",")
        b = self._view()
        extra: tuple[Expr, ...] = ()
        if kind == "sp" and self._accept(","):
            extra = (self._view(),)  # a fragment (mma.load) or a view of the metadata
        elif kind == "scale":
            self._expect(",")
            scale_a = self._view()
            self._expect(",")
            extra = (scale_a, self.expression())
        self._end_stmt()
        return MmaExec(self._span(start), layout_a, layout_b, acc, a, b, kind, extra,
                       target.name if target is not None else None, is_async, schedule)

    def _layout(self) -> str:
        tok = self.toks[self.pos]
        if tok.text not in (".row", ".col"):
            self._fail("'.row' or '.col'")
        self._advance()
        return tok.text[1:]

    # frag := IDENT {'[' expr ']'}
    def _frag(self) -> Expr:
        name = self._name("a fragment name")
        frag: Expr = Ident(name.span, name.text)
        while self._at("[") or self._at("[["):
            self._expect("[")
            index = self.expression()
            self._expect("]")
            frag = Index(self._span(name.span.start), frag, index)
        return frag

    # decl := 'frag' elem_type '[' dims ']' var {',' var}                   [ext]
    # mma_stmt := 'frag' ['.' elem_type] IDENT {'[' expr ']'} '{' expr '}'  [ext] fill-declare
    def _frag_stmt(self) -> Stmt:
        start = self._advance().span.start
        tok = self.toks[self.pos]
        if tok.text in ELEM_TYPES:
            self._advance()
            return self._spanned_decl_rest(start, None, canonical_elem(tok.text), frag=True)
        elem = self._dot_elem_type()
        name = self._name("a fragment name")
        array_dims = self._array_dims()
        self._expect("{")
        value = self.expression()
        self._expect("}")
        self._end_stmt()
        return FragDecl(self._span(start), elem, name.text, array_dims, value)

    # ------------------------------------------------------------------------------------
    # Synchronisation, calls and misc (spec 4.7)
    # ------------------------------------------------------------------------------------

    # wait_stmt := 'wait' target {',' target}
    def _wait_stmt(self) -> WaitStmt:
        start = self._advance().span.start
        targets = self._targets()
        self._end_stmt()
        return WaitStmt(self._span(start), targets)

    # trigger_stmt := 'trigger' ['.' 'cluster'] target {',' target} ['after' target {',' target}]
    def _trigger_stmt(self) -> TriggerStmt:
        start = self._advance().span.start
        cluster = False
        if self._accept("."):
            self._expect("cluster")
            cluster = True
        targets = self._targets()
        after = self._targets() if self._accept("after") else ()
        self._end_stmt()
        return TriggerStmt(self._span(start), targets, after, cluster)

    # targets := target {',' target}
    # target := IDENT | IDENT '[' expr ']' | IDENT '.at' '(' expr ')'
    def _targets(self) -> tuple[Expr, ...]:
        targets = [self._target()]
        while self._accept(","):
            targets.append(self._target())
        return tuple(targets)

    def _target(self) -> Expr:
        expr = self._postfix()
        if not isinstance(expr, (Ident, Index, ElemAccess)):
            self._fail_node(expr, "a future or an event (f, e[i] or e.at(k))")
        return expr

    # swap_stmt := 'swap' ['('] IDENT ',' IDENT [')'] | 'rotate' ['('] IDENT {',' IDENT} [')']
    def _swap_stmt(self) -> SwapStmt:
        start = self._start()
        kind = self._advance().text
        paren = self._accept("(") is not None
        names = [self._name("a future name").text]
        while self._accept(","):
            names.append(self._name("a future name").text)
        if paren:
            self._expect(")")
        self._end_stmt()
        return SwapStmt(self._span(start), kind, tuple(names))

    # sync_stmt := 'sync' '.' storage | 'sync' '.' 'barrier' ':' level_word
    #            | 'sync' '.' 'fence' ':' level_word ['<' storage '>']
    def _sync_stmt(self) -> SyncStmt:
        start = self._advance().span.start
        self._expect(".")
        tok = self.toks[self.pos]
        if tok.text in STORAGES:
            self._advance()
            stmt_kind, level, storage = tok.text, None, None
        elif tok.text in ("barrier", "fence"):
            self._advance()
            self._expect(":")
            stmt_kind, storage = tok.text, None
            level, _ = self._level_word()
            if tok.text == "fence" and self._accept("<"):
                if self.toks[self.pos].text not in STORAGES:
                    self._fail("a storage (global, shared or local)")
                storage = self._advance().text
                self._expect(">")
        else:
            self._fail("'shared', 'global', 'local', 'barrier' or 'fence'")
        self._end_stmt()
        return SyncStmt(self._span(start), stmt_kind, level, storage)

    # call_stmt := 'assert' '(' expr ',' STRING {STRING} ')'
    def _assert_stmt(self) -> AssertStmt:
        start = self._advance().span.start
        self._expect("(")
        cond = self.expression()
        self._expect(",")
        message, _ = self._strings()
        self._expect(")")
        self._end_stmt()
        return AssertStmt(self._span(start), cond, message)

    # call_stmt := ('print' | 'println') ['!'] '(' list ')'
    def _print_stmt(self) -> PrintStmt:
        start = self._start()
        newline = self._advance().text == "println"
        static = self._accept("!") is not None
        args = self._paren_list(allow_empty=True)
        self._end_stmt()
        return PrintStmt(self._span(start), newline, static, args)

    # intrinsic := IDENT {'::' IDENT} ['<' tmpl {',' tmpl} '>'] '(' [arg {',' arg}] ')'
    def _intrinsic_call(self) -> CallExpr:
        start = self._start()
        name = self._qualified_name()
        template = self._template_args() if self._at("<") else ()
        args = self._paren_list(allow_empty=True)
        return CallExpr(self._span(start), name, args, template)

    # template := '<' [tmpl {',' tmpl}] '>'
    # tmpl := INT | '-' INT | IDENT {'::' IDENT} ['.span'] | scalar_t | '#' IDENT
    #       | tmpl ('+'|'-'|'*'|'/'|'%'|'#') tmpl | 'cdiv' '(' tmpl ',' tmpl ')' | tmpl '(' INT ')'
    def _template_args(self) -> tuple[Expr, ...]:
        self._expect("<")
        args: list[Expr] = []
        if not self._at(">"):
            args.append(self._template_arg())
            while self._accept(","):
                args.append(self._template_arg())
        self._expect(">")
        return tuple(args)

    def _template_arg(self) -> Expr:
        tok = self.toks[self.pos]
        if tok.text in SCALAR_TYPES:  # a type argument reads as a name: `call f<f16>(x)`
            self._advance()
            return Ident(tok.span, canonical_elem(tok.text))
        saved = self.no_pipe
        self.no_pipe = False
        arg = self._binary(ADDITIVE_LEVEL)
        self.no_pipe = saved
        return arg

    # ------------------------------------------------------------------------------------
    # Expressions (spec 4.9)
    # ------------------------------------------------------------------------------------

    # expr := binary(2) ['?' expr ':' expr]                           // right-associative
    def expression(self) -> Expr:
        self._enter()
        try:
            cond = self._binary(2)
            if self.toks[self.pos].text != "?":
                return cond
            self._advance()
            then = self.expression()
            self._expect(":")
            other = self.expression()
            return Ternary(Span(cond.span.start, other.span.end), cond, then, other)
        finally:
            self.depth -= 1

    # binary(n) := operand {binop binary(level(binop) + 1)}  for binops of level >= n
    #                                           // precedence climbing over BINARY_PRECEDENCE
    def _binary(self, min_level: int) -> Expr:
        lhs = self._operand()
        toks = self.toks
        chain = 0
        while True:
            tok = toks[self.pos]
            if tok.kind is not _PUNCT:
                return lhs
            op = tok.text
            level = BINARY_PRECEDENCE.get(op)
            if level is None or level < min_level:
                return lhs
            if op == "|" and self.no_pipe:
                return lhs  # the `|` closes an enclosing `|...|`
            if toks[self.pos + 1].text == "=" and op in COMPOUND_OPERATORS:
                return lhs  # `a + = b` is a compound assignment, not an addition
            self._advance()
            rhs = self._binary(level + 1)
            lhs = Binary(Span(lhs.span.start, rhs.span.end), op, lhs, rhs)
            # a long left-leaning chain is as deep a tree as nested parentheses
            chain += 1
            if self.depth + chain > MAX_DEPTH:
                self._too_deep()

    # operand := '!' binary(12) | '~' binary(15) | postfix
    def _operand(self) -> Expr:
        tok = self.toks[self.pos]
        if tok.kind is _PUNCT and tok.text in ("!", "~"):
            self._advance()
            self._enter()
            try:
                level = NOT_LEVEL if tok.text == "!" else TILDE_LEVEL
                operand = self._binary(level + 1)
            finally:
                self.depth -= 1
            return Unary(Span(tok.span.start, operand.span.end), tok.text, operand)
        return self._postfix()

    # postfix := primary {'(' (INT | '-' INT | IDENT) ')' | '[' expr ']' | '.at' '(' list ')'
    #                    | '.span' | '.data' | '.mdata' | vop | '++' | '--'}
    def _postfix(self) -> Expr:
        expr = self._primary()
        ops: list[ViewOp] = []  # view operations applied to `expr`, not yet wrapped
        toks = self.toks
        nested = 0
        while True:
            tok = toks[self.pos]
            text = tok.text
            kind = tok.kind
            if kind is _DOT:
                if text in _VIEW_OPS:
                    ops.append(self._view_op())
                    continue
                if ops:
                    expr, ops = View(self._span(expr.span.start), expr, tuple(ops)), []
                if text in _MEMBERS:
                    self._advance()
                    expr = Member(self._span(expr.span.start), expr, text[1:])
                elif text == ".at":
                    self._advance()
                    indices = self._paren_list()
                    expr = ElemAccess(self._span(expr.span.start), expr, indices)
                else:
                    break  # `.zfill`, `.map`, ...: read by the statement
            elif kind is not _PUNCT:
                break
            elif text == "(":
                if ops:
                    expr, ops = View(self._span(expr.span.start), expr, tuple(ops)), []
                expr = self._select_or_call(expr)
            elif text == "[" and not ops and (
                    isinstance(expr, (Ident, Index))
                    or (isinstance(expr, Member) and expr.member == "span")):
                expr = self._index_or_derive(expr)
            elif text in ("++", "--") and not ops and isinstance(expr, Ident):
                self._advance()
                expr = Postfix(self._span(expr.span.start), text, expr)
            else:
                break
            nested += 1
            if self.depth + nested > MAX_DEPTH:
                self._too_deep()
        if ops:
            expr = View(self._span(expr.span.start), expr, tuple(ops))
        return expr

    # postfix '(' i ')' selects a dimension or an element (`sp(0)`, `k(-1)`, `t(i)`); on a
    # plain name any other argument list makes an intrinsic call (`foo(a, b)`, `foo()`)
    def _select_or_call(self, base: Expr) -> Expr:
        args = self._paren_list(allow_empty=True)
        span = self._span(base.span.start)
        if isinstance(base, Ident) and not (
                len(args) == 1 and isinstance(args[0], (IntLit, Ident))):
            return CallExpr(span, base.name, args)
        if len(args) != 1:
            self.reporter.report("CQ0110", span, expected="one index inside '(...)'",
                                 found=f"{len(args)} values")
            raise _ParseError
        return Select(span, base, args[0])

    # elem_access := IDENT '[' expr ']' {'[' expr ']'}
    # derivation := (IDENT | IDENT '.span') '[' expr {',' expr} ']'    // `(i)` is base(i)
    def _index_or_derive(self, base: Expr) -> Expr:
        items, dimrefs = self._derivation_items("[", "]")
        span = self._span(base.span.start)
        if len(items) == 1 and dimrefs == 0 and not isinstance(base, Member):
            return Index(span, base, items[0])
        return Derive(span, base, items, "[]")

    def _derivation_items(self, open_: str, close: str) -> tuple[tuple[Expr, ...], int]:
        """Items of derivation brackets and how many ``(i)`` DimRefs they hold directly."""
        self._expect(open_)
        saved = (self.dimref_ok, self.dimrefs)
        self.dimref_ok, self.dimrefs = True, 0
        items = self._expr_list()
        dimrefs = self.dimrefs
        self.dimref_ok, self.dimrefs = saved
        self._expect(close)
        return items, dimrefs

    # vop := '.chunkat' '(' list ')'
    #      | '.chunk' '(' list ')' '.at' '(' list ')'
    #      | ('.subspan' | '.modspan') '(' list [':' list] ')' ['.step' '(' list ')']
    #        ['.at' '(' list ')']
    #      | '.view' '(' list [':' list] ')' ['.from' '(' list ')']
    #      | '.span_as' '(' ('[' list ']' | list) ')'
    #      | '.sqz' '(' ')'
    def _view_op(self) -> ViewOp:
        tok = self._advance()
        start = tok.span.start
        kind = tok.text[1:]
        if kind == "chunkat":
            return ViewOp(self._span(start), kind, self._paren_list())
        if kind == "chunk":
            args = self._paren_list()
            return ViewOp(self._span(start), kind, args, at=self._suffix_list(".at"))
        if kind in ("subspan", "modspan"):
            args, strides = self._extents()
            step = self._suffix_list(".step")
            at = self._suffix_list(".at")
            return ViewOp(self._span(start), kind, args, strides, step, at)
        if kind == "view":
            args, strides = self._extents()
            return ViewOp(self._span(start), kind, args, strides, at=self._suffix_list(".from"))
        if kind == "span_as":
            args = self._paren_list()
            if len(args) == 1 and isinstance(args[0], ShapeLit):
                args = args[0].items  # `span_as([a, b])` and `span_as(a, b)` are one form
            return ViewOp(self._span(start), kind, args)
        self._expect("(")
        self._expect(")")
        return ViewOp(self._span(start), "sqz", ())

    # extents := '(' list [':' list] ')'
    def _extents(self) -> tuple[tuple[Expr, ...], tuple[Expr, ...] | None]:
        self._expect("(")
        args = self._expr_list()
        strides = self._expr_list() if self._accept(":") else None
        self._expect(")")
        return args, strides

    def _suffix_list(self, word: str) -> tuple[Expr, ...] | None:
        if not self._at(word):
            return None
        self._advance()
        return self._paren_list()

    # primary := literal | IDENT | '(' expr ')' | '{' list '}' | '[' list ']' | '#' IDENT
    #          | '|' sizeof_e '|' | '|' elem_type '|' | 'cdiv' '(' expr ',' expr ')'
    #          | builtin '(' list ')' | '__to' '<' (elem_type | STRING) '>' '(' expr ')'
    #          | '&' (IDENT | elem_access) | ('++' | '--') IDENT | select_expr | call_stmt
    #          | IDENT '::' IDENT {'::' IDENT} [['<' tmpl {',' tmpl} '>'] '(' list ')']
    def _primary(self) -> Expr:
        tok = self.toks[self.pos]
        kind = tok.kind
        if kind is _NAME:
            if self._peek().text == "::":
                return self._qualified_primary()
            self._advance()
            return Ident(tok.span, tok.text)
        if kind is _INT:
            self._advance()
            return IntLit(tok.span, tok.value, tok.text, _int_suffix(tok.text))
        if kind is _FLOAT:
            self._advance()
            return FloatLit(tok.span, tok.value, tok.text, tok.text[-1] in "fF")
        if kind is _STRING:
            value, text = self._strings()
            return StrLit(self._span(tok.span.start), value, text)
        if kind is _KEYWORD:
            return self._keyword_primary(tok)
        if kind is _PUNCT:
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
        if text not in _SEPARATOR_WORDS and text not in _STATEMENTS:
            self.reporter.report("CQ0116", tok.span, name=text)  # `x = block + 1;`
            self._advance()
            return Ident(tok.span, text)
        self._fail("an expression")

    # primary := IDENT '::' IDENT {'::' IDENT} [['<' tmpl {',' tmpl} '>'] '(' list ')']
    def _qualified_primary(self) -> Expr:
        start = self._start()
        name = self._qualified_name()
        if not self._at("<") and not self._at("("):
            return Ident(self._span(start), name)  # a qualified template argument
        template = self._template_args() if self._at("<") else ()
        args = self._paren_list(allow_empty=True)
        return CallExpr(self._span(start), name, args, template)

    # primary := '(' expr ')'            // inside derivation brackets `(INT)` is a DimRef
    def _paren_primary(self) -> Expr:
        start = self._advance().span.start
        tok = self.toks[self.pos]
        if self.dimref_ok and tok.kind is _INT and self._peek().text == ")":
            self._advance()
            self._advance()
            self.dimrefs += 1
            return DimRef(self._span(start), tok.value)
        expr = self._inner_expression()
        self._expect(")")
        return expr

    # primary := '{' list '}'
    def _tuple_primary(self) -> TupleLit:
        start = self._advance().span.start
        items = self._expr_list()
        self._expect("}")
        return TupleLit(self._span(start), items)

    # primary := '[' list ']'
    def _shape_primary(self) -> ShapeLit:
        start = self._expect("[").span.start
        items = self._expr_list()
        self._expect("]")
        return ShapeLit(self._span(start), items)

    # primary := '#' IDENT
    def _bound_primary(self) -> BoundOf:
        start = self._advance().span.start
        name = self._name("a bounded variable after '#'")
        return BoundOf(self._span(start), name.text)

    # primary := '|' sizeof_e '|' | '|' elem_type '|'
    def _sizeof_primary(self) -> SizeOf:
        start = self._advance().span.start
        tok = self.toks[self.pos]
        if tok.text in SCALAR_TYPES and self._peek().text == "|":
            self._advance()
            self._advance()
            return SizeOf(self._span(start), None, canonical_elem(tok.text))
        saved = self.no_pipe
        self.no_pipe = True  # any expression parses here; the checker restricts it
        operand = self.expression()
        self.no_pipe = saved
        self._expect("|")
        return SizeOf(self._span(start), operand)

    # primary := '&' (IDENT | elem_access)
    def _address_primary(self) -> Unary:
        start = self._advance().span.start
        operand = self._postfix()
        return Unary(self._span(start), "&", operand)

    # primary := ('++' | '--') IDENT
    def _increment_primary(self) -> Unary:
        op = self._advance()
        name = self._name("a variable after '" + op.text + "'")
        return Unary(self._span(op.span.start), op.text, Ident(name.span, name.text))

    # literal := '-' INT | '-' FLOAT | '-' 'inf'    // only a literal may be negated
    def _negative_primary(self) -> Expr:
        start = self._start()
        number = self._peek()
        if number.text == "inf":  # `-inf` is an f32 literal, like `inf` (spec 2.5)
            self._advance()
            self._advance()
            return FloatLit(self._span(start), float("-inf"), "-inf", True)
        if number.kind in (_INT, _FLOAT) and not number.text.startswith("-"):
            self._advance()
            self._advance()
            text = "-" + number.text
            if number.kind is _INT:
                return IntLit(self._span(start), -number.value, text, _int_suffix(text))
            return FloatLit(self._span(start), -number.value, text, text[-1] in "fF")
        self._fail("an expression (Croqtile has no unary minus: write `0 - x`)")

    # primary := '__to' '<' (elem_type | STRING {STRING}) '>' '(' expr ')'
    def _cast(self) -> Cast:
        start = self._advance().span.start
        self._expect("<")
        tok = self.toks[self.pos]
        if tok.kind is _STRING:
            target, _ = self._strings()
            quoted = True
        elif tok.text in SCALAR_TYPES:
            self._advance()
            target, quoted = canonical_elem(tok.text), False
        else:
            self._fail("an element type or a quoted C++ type")
        self._expect(">")
        operand = self._paren_expr()
        return Cast(self._span(start), target, quoted, operand)

    # select_expr := 'select' '(' expr ',' expr {',' expr} ')'
    def _select_expr(self) -> SelectExpr:
        start = self._advance().span.start
        self._expect("(")
        index = self._inner_expression()
        self._expect(",")
        options = self._expr_list()
        self._expect(")")
        return SelectExpr(self._span(start), index, options)

    # call_stmt := 'call' IDENT {'::' IDENT} ['<' tmpl {',' tmpl} '>'] '(' [arg {',' arg}] ')'
    # arg := expr | view | 'nullptr'
    def _extern_call(self) -> ExternCall:
        start = self._advance().span.start
        path = [self._name("a function name").text]
        while self._accept("::"):
            path.append(self._scoped_name())
        template = self._template_args() if self._at("<") else ()
        args = self._paren_list(allow_empty=True)
        return ExternCall(self._span(start), tuple(path), template, args)

    # --- lists ------------------------------------------------------------------------

    # list := expr {',' expr}
    def _expr_list(self) -> tuple[Expr, ...]:
        items = [self._inner_expression()]
        while self._accept(","):
            items.append(self._inner_expression())
        return tuple(items)

    # paren_list := '(' [list] ')'
    def _paren_list(self, allow_empty: bool = False) -> tuple[Expr, ...]:
        self._expect("(")
        if allow_empty and self._at(")"):
            self._advance()
            return ()
        items = self._expr_list()
        self._expect(")")
        return items

    # braced_list := '{' list '}'
    def _braced_list(self) -> tuple[Expr, ...]:
        self._expect("{")
        items = self._expr_list()
        self._expect("}")
        return items


def _int_suffix(text: str) -> str:
    return text[len(text.rstrip("uUlL")):].lower()


def _is_int_const(expr: Expr) -> bool:
    if isinstance(expr, IntLit):
        return True
    return isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/", "%") and \
        _is_int_const(expr.lhs) and _is_int_const(expr.rhs)


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
