"""DMA / TMA statements of the parser (spec 4.5): copies, their configuration,
modifiers and attributes, destinations and views.
"""

from __future__ import annotations

from .parse_common import ParserBase
from .syntax import (
    DmaAny, DmaAttr, DmaStmt, ElemAccess, Expr, Ident, Index, Member, PadConfig, Stmt,
    StorageDest, View,
)
from .tokens import ADDITIVE_LEVEL, STORAGES

_DMA_OPS = frozenset({".copy", ".load", ".pad", ".transp"})
_DMA_ATTRS = frozenset({
    ".swiz", ".swizzle", ".zfill", ".sp", ".multicast", ".promote", ".evict_first", ".evict_last",
})


class DmaParsing(ParserBase):
    """Mixin of ``_Parser``: the ``dma`` / ``tma`` statements."""

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

