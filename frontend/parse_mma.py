"""MMA statements of the parser (spec 4.6): fill, load, store, scale, exec and
``frag`` declarations.
"""

from __future__ import annotations

from .parse_common import ParserBase
from .syntax import (
    Attribute, Expr, FragDecl, Ident, Index, MmaCommit, MmaExec, MmaFill, MmaLoad, MmaScale,
    MmaStore, Stmt,
)
from .tokens import ADDITIVE_LEVEL, ELEM_TYPES, canonical_elem, describe


class MmaParsing(ParserBase):
    """Mixin of ``_Parser``: the ``mma`` statements and fragments."""

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

