"""Declarations of the parser: the ``__co__`` function and its parameters (spec 4.1),
declarations and assignment (spec 4.3).
"""

from __future__ import annotations

from .parse_common import EOF, NAME, ParseError, ParserBase
from .source import Span
from .syntax import (
    AnonDim, Assign, AssignStmt, Binary, BufferMap, DeclVar, Derive, ElemAccess, EventDecl,
    EventVar, Expr, Function, Ident, Index, IntLit, ItupleDecl, MdspanDecl, Param, ScalarDecl,
    ScalarItem, ShapeSpec, SpannedDecl, Stmt, TypeSpec,
)
from .tokens import (
    COMPOUND_OPERATORS, ELEM_TYPES, SCALAR_TYPES, STORAGES, Token, canonical_elem, describe,
)


class DeclarationParsing(ParserBase):
    """Mixin of ``_Parser``: functions, parameters, declarations and assignment."""

    # ------------------------------------------------------------------------------------
    # Functions and parameters (spec 4.1)
    # ------------------------------------------------------------------------------------

    # co_function := '__co__' ret_type IDENT '(' [param {',' param}] ')' '{' {stmt} '}'
    def function(self) -> Function | None:
        first = self.toks[self.pos]
        if first.kind is EOF:
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
        except ParseError:
            # a broken header: skip to the body and still check it
            while not self._at("{") and self.toks[self.pos].kind is not EOF:
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
        if self.toks[self.pos].kind is NAME and self._peek().text == "{":
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


def _is_int_const(expr: Expr) -> bool:
    if isinstance(expr, IntLit):
        return True
    return isinstance(expr, Binary) and expr.op in ("+", "-", "*", "/", "%") and \
        _is_int_const(expr.lhs) and _is_int_const(expr.rhs)

