"""Parallel constructs and control flow of the parser: ``parallel``, ``with``,
``foreach``, ``while``, ``if``, ``inthreads`` and ``apply`` (spec 4.4).
"""

from __future__ import annotations

from .parse_common import ParserBase
from .syntax import (
    Apply, Attribute, Expr, Foreach, Ident, If, InThreads, LoopSuffix, Parallel, ParallelLevel,
    RangeItem, While, With, Within,
)
from .tokens import LEVELS


class ParallelParsing(ParserBase):
    """Mixin of ``_Parser``: parallel levels, loops and conditionals."""

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

