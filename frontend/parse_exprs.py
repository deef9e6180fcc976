"""Expressions of the parser (spec 4.9): precedence climbing, postfix forms (calls,
indexing, derivations, view operations) and the primaries other than the dispatch.
"""

from __future__ import annotations

from .device_helpers import inline
from .parse_common import (
    DOT, FLOAT, INT, MAX_DEPTH, PUNCT, STRING, ParseError, ParserBase, int_suffix,
)
from .source import Span
from .syntax import (
    Binary, BoundOf, CallExpr, Cast, Derive, DimRef, ElemAccess, Expr, ExternCall, FloatLit,
    Ident, Index, IntLit, Member, Postfix, Select, SelectExpr, ShapeLit, SizeOf, Ternary,
    TupleLit, Unary, View, ViewOp,
)
from .tokens import (
    BINARY_PRECEDENCE, COMPOUND_OPERATORS, NOT_LEVEL, SCALAR_TYPES, TILDE_LEVEL, canonical_elem,
)

_VIEW_OPS = frozenset({".chunkat", ".chunk", ".subspan", ".modspan", ".view", ".span_as", ".sqz"})
_MEMBERS = frozenset({".span", ".data", ".mdata"})


class ExpressionParsing(ParserBase):
    """Mixin of ``_Parser``: expressions below the primary dispatch, and expression lists."""

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
            if tok.kind is not PUNCT:
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
        if tok.kind is PUNCT and tok.text in ("!", "~"):
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
            if kind is DOT:
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
            elif kind is not PUNCT:
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
            raise ParseError
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
        if self.dimref_ok and tok.kind is INT and self._peek().text == ")":
            self._advance()
            self._advance()
            self.dimrefs += 1
            return DimRef(self._span(start), tok.int_value)
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
        if number.kind in (INT, FLOAT) and not number.text.startswith("-"):
            self._advance()
            self._advance()
            text = "-" + number.text
            if number.kind is INT:
                return IntLit(self._span(start), -number.int_value, text, int_suffix(text))
            return FloatLit(self._span(start), -number.float_value, text, text[-1] in "fF")
        if self.c_expressions:  # a device helper's C body: `-x` negates
            self._advance()
            operand = self._postfix()
            return Unary(self._span(start), "-", operand)
        self._fail("an expression (Croqtile has no unary minus: write `0 - x`)")

    # primary := '__to' '<' (elem_type | STRING {STRING}) '>' '(' expr ')'
    def _cast(self) -> Cast:
        start = self._advance().span.start
        self._expect("<")
        tok = self.toks[self.pos]
        if tok.kind is STRING:
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
        call = ExternCall(self._span(start), tuple(path), template, args)
        helper = self.helpers.get(path[0]) if len(path) == 1 else None
        if helper is None:
            return call
        inlined, problem = inline(helper, call)  # a device helper of this file
        return ExternCall(call.span, call.path, template, args, inlined, problem)

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

