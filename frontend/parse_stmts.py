"""Statements of the parser (spec 4.2) other than declarations and the constructs of
their own modules: blocks and error recovery, name-initial statements, jumps,
``__cpp__`` / ``asm``, attributes, and synchronisation, calls and misc (spec 4.7).
"""

from __future__ import annotations

from .parse_common import EOF, KEYWORD, NAME, PUNCT, ParseError, ParserBase
from .syntax import (
    AsmStmt, AssertStmt, Attribute, Block, BreakStmt, CallExpr, ContinueStmt, CppStmt, ElemAccess,
    Empty, Expr, ExprStmt, Ident, Index, Postfix, PrintStmt, ReturnStmt, Stmt, SwapStmt, SyncStmt,
    TriggerStmt, WaitStmt, YieldStmt,
)
from .tokens import ADDITIVE_LEVEL, SCALAR_TYPES, STORAGES, Token, canonical_elem, describe


class StatementParsing(ParserBase):
    """Mixin of ``_Parser``: blocks, recovery and the statements outside declarations,
    parallel constructs, DMA and MMA."""

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
                if tok.kind is EOF:
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
        except ParseError:
            self.no_pipe, self.dimref_ok, self.dimrefs = saved
            self._synchronize()
            return None

    def _synchronize(self) -> None:
        """Skip to the end of the broken statement: past the next ';' at this level, or past
        a block the statement opened, or up to the '}' that closes the enclosing block."""
        depth = 0
        while True:
            tok = self.toks[self.pos]
            if tok.kind is EOF:
                return
            if tok.kind is PUNCT:
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
            if tok.kind is EOF:
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
            if self.toks[self.pos].kind is NAME and self._peek().text == "=" and \
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
        if name.kind is not NAME and name.kind is not KEYWORD:
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
            raise ParseError
        self._expect_pair("]]")
        return Attribute(self._span(start), name.text, args)

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

