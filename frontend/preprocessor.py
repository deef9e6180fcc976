"""The C-like preprocessor of Croqtile files (spec 2.2), with a map back to the user's text.

``_Preprocessor`` holds the state, the main loop, the emitting of original text and the
macro expander with its token streams; ``pp_directives`` holds the directive handling
(a mixin), ``pp_ifexpr`` the evaluation of ``#if`` expressions, ``pp_macros`` the macro
model, ``pp_scanner`` the scanner (shared with the region finder) and ``pp_output`` the
result and its construction.
"""

from __future__ import annotations

from collections.abc import Mapping

from .diagnostics import Reporter
from .pp_directives import Cond, DirectiveHandling
from .pp_ifexpr import IfParser
from .pp_macros import Macro, Tok, defined_operand, elides_comma, glue, joins, render, tok_span
from .pp_output import IntrinsicPragma, Output, Preprocessed
from .pp_scanner import BLANK_KINDS, Scanner, first_name_in, last_name_in, line_state
from .source import Source, SourceMap, Span

__all__ = [
    "BLANK_KINDS", "IntrinsicPragma", "Preprocessed", "Scanner", "first_name_in",
    "last_name_in", "line_state", "preprocess",
]


def preprocess(source: Source, reporter: Reporter,
               defines: Mapping[str, int | float | str | None] | None = None) -> Preprocessed:
    """Expand macros and conditionals of ``source``; problems go to ``reporter``, never raised.

    Every original line gives exactly one output line: directive lines and skipped
    ``#if`` groups become empty lines and text removed by line continuations or by
    multi-line macro calls is made up with newlines, so line numbers stay stable.
    """
    try:
        return _Preprocessor(source, reporter).run(defines or {})
    except Exception as exc:  # noqa: BLE001 - last line of defence, the stage must not crash
        detail = f"preprocessor failed with {type(exc).__name__}: {exc}"[:300]
        reporter.report("CQ0901", Span(0, 0), detail=detail)
        return Preprocessed(source.text, SourceMap.identity(source))


_DIRECTIVES = frozenset({
    "define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else",
    "endif", "include", "include_next", "import", "pragma", "error", "warning", "line",
    "ident", "sccs", "assert", "unassert",
})

_MAX_NESTING = 100  # nested argument pre-expansions before CQ0007
_BUDGET_BASE = 500_000  # tokens the expander may produce for a whole file ...
_BUDGET_PER_CHAR = 8  # ... plus this many per input character
_LOOKAHEAD_BASE = 100_000  # tokens that failing argument scans may read ...
_LOOKAHEAD_PER_CHAR = 1  # ... plus this many per input character


class _BudgetExceeded(Exception):
    """Macro expansion produced (or scanned) more than the file's budget."""


class _SessionFailed(Exception):
    """A top-level macro call cannot be expanded; its name stays as plain text."""


class _Session:
    """One top-level expansion: the macros being expanded and where errors point."""

    __slots__ = ("span", "disabled", "deep_reported")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.disabled: set[str] = set()  # macros whose expansion is being rescanned
        self.deep_reported = False


# ----------------------------------------------------------------------------------------
# Token streams for the expander
# ----------------------------------------------------------------------------------------


class _SourceReader:
    """Reads tokens of the original text after a top-level macro name.

    A macro's expansion may end in a function-like macro name whose arguments follow in
    the source, so argument collection continues here. It never crosses a directive line.
    """

    def __init__(self, pp: _Preprocessor, pos: int) -> None:
        self.pp = pp
        self.pos = pos
        self.read = 0  # tokens taken, charged to the lookahead budget if the call fails
        self._first = True

    def peek_lparen(self) -> bool:
        tok, _ = self._scan(self.pos)
        return tok is not None and tok.kind == "punct" and tok.text == "("

    def take(self) -> Tok | None:
        tok, end = self._scan(self.pos)
        if tok is not None:
            self.pos = end
            self.read += 1
        return tok

    def _scan(self, pos: int) -> tuple[Tok | None, int]:
        pp, text = self.pp, self.pp.text
        space = at_bol = False
        while pos < len(text):
            kind, end = pp.scanner.token(pos)
            if kind in BLANK_KINDS:
                space = True
                at_bol = at_bol or kind == "nl"
                if kind == "bcom":
                    pp.check_comment(pos, end)
                pos = end
                continue
            if at_bol and text[pos] == "#" and pp.is_directive(pos + 1):
                return None, pos
            # The first token read follows macro output: it must not fuse with it.
            tok = Tok(kind, text[pos:end], space, pos, False, self._first)
            self._first = False
            return tok, end
        return None, pos


class _Stream:
    """Tokens waiting to be rescanned (a stack, top = next), optionally backed by the source."""

    __slots__ = ("stack", "session", "source")

    def __init__(self, tokens: list[Tok], session: _Session,
                 source: _SourceReader | None = None) -> None:
        self.stack = tokens[::-1]
        self.session = session
        self.source = source

    def pop(self) -> Tok | None:
        """The next token, context end markers included."""
        return self.stack.pop() if self.stack else None

    def push_expansion(self, name: str, tokens: list[Tok]) -> None:
        """Stack a macro's expansion; the macro stays disabled until its end marker pops."""
        self.session.disabled.add(name)
        self.stack.append(Tok("end", name))
        self.stack.extend(reversed(tokens))

    def push_back(self, tokens: list[Tok]) -> None:
        self.stack.extend(reversed(tokens))

    def next_is_lparen(self) -> bool:
        self._end_contexts()
        if self.stack:
            top = self.stack[-1]
            return top.kind == "punct" and top.text == "("
        return self.source is not None and self.source.peek_lparen()

    def take(self) -> Tok | None:
        """Next token for an argument list, read on into the source when needed."""
        self._end_contexts()
        if not self.stack:
            return self.source.take() if self.source is not None else None
        tok = self.stack.pop()
        if tok.kind == "id" and not tok.painted and tok.text in self.session.disabled:
            tok = Tok(tok.kind, tok.text, tok.space, tok.origin, True, tok.seam)
        return tok

    def _end_contexts(self) -> None:
        # Looking past the end of an expansion (for a `(` or an argument) ends it.
        while self.stack and self.stack[-1].kind == "end":
            self.session.disabled.discard(self.stack.pop().text)


# ----------------------------------------------------------------------------------------
# The preprocessor
# ----------------------------------------------------------------------------------------


class _Preprocessor(DirectiveHandling):
    def __init__(self, source: Source, reporter: Reporter) -> None:
        self.source = source
        self.text = source.text
        self.scanner = Scanner(self.text)
        self.reporter = reporter
        self.macros: dict[str, Macro] = {}
        self.pinned: set[str] = set()  # names given in `defines`: the source cannot change them
        self.pushed: dict[str, list[Macro | None]] = {}  # #pragma push_macro stacks
        self.conds: list[Cond] = []
        self.active = True
        self.out = Output()
        self.copied = 0  # original text before this offset has been emitted
        self.budget = _BUDGET_BASE + _BUDGET_PER_CHAR * len(self.text)
        self.lookahead = _LOOKAHEAD_BASE + _LOOKAHEAD_PER_CHAR * len(self.text)
        self.expanding = True  # cleared when a budget runs out (CQ0010)
        self._bad_comments: set[int] = set()

    # --- main loop ---------------------------------------------------------------------

    def run(self, defines: Mapping[str, int | float | str | None]) -> Preprocessed:
        self._apply_defines(defines)
        text, token = self.text, self.scanner.token
        pos, line_start, at_bol = 0, 0, True
        name_next = False  # a quiet run stopped at a macro name: read it as a token
        while pos < len(text):
            quiet = pos if name_next else self.scanner.quiet_end(pos)
            name_next = False
            if quiet > pos and self.active and self.expanding and self.macros:
                hit = first_name_in(text, pos, quiet, self.macros.keys())
                if hit is not None:
                    quiet, name_next = hit, True
                    self.scanner.quiet_cut()
            if quiet > pos:
                at_bol, line_start = line_state(text, pos, quiet, at_bol, line_start)
                pos = quiet
                continue
            kind, end = token(pos)
            if kind == "nl":
                at_bol, line_start = True, end
            elif kind in BLANK_KINDS:
                self._blank(kind, pos, end)
            elif at_bol and text[pos] == "#" and self.is_directive(pos + 1):
                end = self._directive(line_start, pos)
            else:
                at_bol = False
                if kind == "id" and self.active and self.expanding and text[pos:end] in self.macros:
                    end = self._expand_call(pos, end)
            pos = end
        self._flush(len(text))
        for cond in self.conds:
            self.reporter.report("CQ0001", cond.span)
        return self.out.result(self.source)

    def _blank(self, kind: str, pos: int, end: int) -> None:
        if kind == "bcom":
            self.check_comment(pos, end)
        elif not self.active:
            return
        elif kind == "cont":
            # Outside directives a continuation joins lines; the backslash becomes the
            # blank it amounts to and the newline stays, so lines do not move.
            self._flush(pos)
            self.out.mapped(" ", pos)
            self.copied = pos + 1
        elif kind == "lcom" and self.text.find("\n", pos, end) >= 0:
            # A `//` comment continued by backslashes covers the next lines too; blank
            # them so that later stages, which end comments at newlines, agree.
            first_nl = self.text.index("\n", pos)
            self._flush(first_nl)
            self._drop(first_nl, end)

    def check_comment(self, start: int, end: int) -> None:
        """Report an unterminated block comment once, whoever scans it first."""
        if (end - start < 4 or not self.text.startswith("*/", end - 2)) \
                and start not in self._bad_comments:
            self._bad_comments.add(start)
            self.reporter.report("CQ0009", Span(start, start + 2))

    def is_directive(self, pos: int) -> bool:
        """Whether the text after a line-initial `#` at ``pos - 1`` is a directive.

        Only known directive names count (plus the null directive and `# 12` line
        markers): a Croqtile line may well start with the upper-bound operator `#tile_k`.
        """
        text = self.text
        while pos < len(text):
            kind, end = self.scanner.token(pos)
            if kind in ("nl", "lcom"):
                return True
            if kind not in BLANK_KINDS:
                return kind == "num" or (kind == "id" and text[pos:end] in _DIRECTIVES)
            pos = end
        return True

    # --- emitting ------------------------------------------------------------------------

    def _flush(self, upto: int) -> None:
        """Emit original text up to ``upto``: as is when active, else only its newlines."""
        if upto <= self.copied:
            return
        if self.active:
            self.out.verbatim(self.text, self.copied, upto)
        else:
            self._newlines(self.copied, upto)
        self.copied = upto

    def _drop(self, start: int, end: int) -> None:
        """Replace original text by its newlines only."""
        self._newlines(max(start, self.copied), end)
        self.copied = max(self.copied, end)

    def _newlines(self, start: int, end: int) -> None:
        pos = self.text.find("\n", start, end)
        while pos >= 0:
            self.out.mapped("\n", pos)
            pos = self.text.find("\n", pos + 1, end)

    # --- #if expressions ---------------------------------------------------------------------

    def _condition(self, args: list[Tok], span: Span) -> bool:
        if not args:
            self.reporter.report("CQ0004", span, detail="#if with no expression")
            return False
        where = Span(args[0].origin, args[-1].origin + len(args[-1].text))
        tokens = self._replace_defined(args)
        if tokens is None:
            self.reporter.report("CQ0004", where,
                                 detail="operator 'defined' requires a macro name")
            return False
        if self.expanding:
            try:
                session = _Session(where)
                tokens = self._expand(_Stream(tokens, session), 0, session)
            except _BudgetExceeded:
                self._stop_expanding("#if", where)
                return False
        value = IfParser(tokens, self.macros).parse()
        if isinstance(value, str):
            self.reporter.report("CQ0004", where, detail=value)
            return False
        return value[0] != 0

    def _replace_defined(self, tokens: list[Tok]) -> list[Tok] | None:
        """``defined X`` / ``defined(X)`` become 1 or 0 before any macro is expanded."""
        out: list[Tok] = []
        pos = 0
        while pos < len(tokens):
            tok = tokens[pos]
            if tok.kind == "id" and tok.text == "defined":
                name, pos = defined_operand(tokens, pos + 1)
                if name is None:
                    return None
                out.append(Tok("num", "1" if name in self.macros else "0", tok.space, tok.origin))
            else:
                out.append(tok)
                pos += 1
        return out

    # --- macro expansion -----------------------------------------------------------------------

    def _expand_call(self, start: int, end: int) -> int:
        """Expand the macro named at ``[start, end)``; return where the main loop goes on."""
        name = self.text[start:end]
        macro = self.macros[name]
        reader = _SourceReader(self, end)
        if macro.params is not None and not reader.peek_lparen():
            return end  # a function-like macro name without arguments is plain text
        session = _Session(Span(start, end))
        stream = _Stream([Tok("id", name, False, start)], session, reader)
        try:
            tokens = self._expand(stream, 0, session)
        except _SessionFailed:
            self._charge_lookahead(reader.read, name, session.span)
            return end
        except _BudgetExceeded:
            self._stop_expanding(name, session.span)
            return end
        self._emit_expansion(tokens, start, reader.pos)
        return reader.pos

    def _emit_expansion(self, tokens: list[Tok], start: int, stop: int) -> None:
        self._flush(start)
        chars = render(tokens)
        if chars:
            # Keep the expansion from fusing with the text around it (`-NEG` -> `- -1`).
            before = self.out.last_char()
            after = self.text[stop] if stop < len(self.text) else " "
            if not before.isspace() and joins(before, tokens[0].text):
                chars = " " + chars
            if not after.isspace() and joins(tokens[-1].text, after):
                chars += " "
        # The newlines of a multi-line call come right after its expansion, so the text
        # after the call stays on its line; they belong to the expansion's segment, so
        # that the end of the expansion maps to the end of the call.
        self.out.expansion(chars + "\n" * self.text.count("\n", start, stop), start, stop)
        self.copied = stop

    def _stop_expanding(self, name: str, span: Span) -> None:
        self.expanding = False
        self.reporter.report("CQ0010", span, name=name)

    def _charge(self, count: int) -> None:
        self.budget -= count
        if self.budget < 0:
            raise _BudgetExceeded

    def _charge_lookahead(self, count: int, name: str, span: Span) -> None:
        # Failed argument scans do not advance the main loop, so many of them could read
        # the same text again and again; a budget keeps the whole run linear.
        self.lookahead -= count
        if self.lookahead < 0:
            self._stop_expanding(name, span)

    def _expand(self, stream: _Stream, depth: int, session: _Session) -> list[Tok]:
        """Rescan ``stream`` until it is empty, expanding macros.

        C's rule that a macro is not re-expanded inside its own expansion: a macro is
        disabled while the tokens of its expansion are rescanned, and a token naming a
        disabled macro is painted, so it stays unexpanded even when rescanned later.
        """
        out: list[Tok] = []
        macros, disabled = self.macros, session.disabled
        seam = False  # an expansion ended: the next token must not fuse with it
        while True:
            tok = stream.pop()
            if tok is None:
                break
            if tok.kind == "end":
                disabled.discard(tok.text)
                seam = True
                continue
            macro = macros.get(tok.text) if tok.kind == "id" and not tok.painted else None
            if macro is not None and tok.text in disabled:
                tok, macro = Tok(tok.kind, tok.text, tok.space, tok.origin, True, tok.seam), None
            args: list[list[Tok]] | None = None
            if macro is not None and macro.params is not None and stream.next_is_lparen():
                args = self._collect_args(stream, macro, tok, session)
            if macro is None or (macro.params is not None and args is None):
                out.append(tok.with_seam() if seam else tok)
                seam = False
                continue
            stream.push_expansion(macro.name, self._subst(macro, args, tok, depth, session))
        self._charge(len(out))  # every rescan pass counts: nested calls rescan arguments
        return out

    def _collect_args(self, stream: _Stream, macro: Macro, name: Tok,
                      session: _Session) -> list[list[Tok]] | None:
        """Read ``( args )``; None (tokens given back) when the call is malformed."""
        params = macro.params or ()
        consumed = [stream.take()]  # the `(`
        args: list[list[Tok]] = [[]]
        fixed = len(params) - macro.variadic
        level = 0
        while True:
            tok = stream.take()
            if tok is None:
                self.reporter.report("CQ0006", tok_span(name, session.span), name=macro.name)
                if stream.source is not None:
                    raise _SessionFailed
                stream.push_back([t for t in consumed if t is not None])
                return None
            consumed.append(tok)
            if tok.kind == "punct":
                if tok.text == "(":
                    level += 1
                elif tok.text == ")":
                    if level == 0:
                        break
                    level -= 1
                elif tok.text == "," and level == 0 and not (macro.variadic and len(args) > fixed):
                    args.append([])
                    continue
            args[-1].append(tok)
        if not params and args == [[]]:
            args = []  # F() for a macro without parameters
        if macro.variadic and len(args) == fixed:
            args.append([])  # the variadic part may be left out entirely
        if len(args) != len(params):
            expected = f"at least {fixed}" if macro.variadic else str(len(params))
            self.reporter.report("CQ0005", tok_span(name, session.span), name=macro.name,
                                 expected=expected, actual=len(args))
            stream.push_back([t for t in consumed if t is not None])
            return None
        return args

    def _subst(self, macro: Macro, args: list[list[Tok]] | None, name: Tok, depth: int,
               session: _Session) -> list[Tok]:
        """The body of ``macro`` with arguments substituted and ``##`` applied."""
        body, actuals = macro.body, args or []
        expanded: dict[int, list[Tok]] = {}
        out: list[Tok] = []
        paste = False  # a `##` waits for its right operand
        left_empty = False  # the last operand was an empty argument (a "placemarker")
        after_arg = False
        for i, tok in enumerate(body):
            if tok.kind == "punct" and tok.text == "##":
                paste = True
                continue
            slot = macro.index.get(tok.text, -1) if args is not None and tok.kind == "id" else -1
            if slot < 0:
                piece = [Tok(tok.kind, tok.text, tok.space, -1, False, after_arg)]
                after_arg = False
            else:
                # Operands of `##` take the argument as written; others fully expanded.
                if paste or (i + 1 < len(body) and body[i + 1].text == "##"):
                    piece = actuals[slot]
                else:
                    piece = self._expanded_arg(macro, actuals, slot, expanded, depth, session)
                if paste and not piece and elides_comma(macro, slot, out):
                    out.pop()  # GNU `, ## __VA_ARGS__` with no variadic arguments
                    paste = False
                    continue
                if piece:
                    first = piece[0]
                    piece = [Tok(first.kind, first.text, tok.space, first.origin, first.painted,
                                  True), *piece[1:]]
                after_arg = True
            empty = not piece
            if paste:
                paste = False
                if empty:
                    continue  # pasting an empty argument leaves the left operand as it is
                if out and not left_empty:
                    out[-1:] = glue(out[-1], piece[0])
                    piece = piece[1:]
            out.extend(piece)
            left_empty = empty
        self._charge(len(out) + 1)
        if out:
            first = out[0]
            out[0] = Tok(first.kind, first.text, name.space, first.origin, first.painted, True)
        return out

    def _expanded_arg(self, macro: Macro, args: list[list[Tok]], slot: int,
                      cache: dict[int, list[Tok]], depth: int, session: _Session) -> list[Tok]:
        """An argument fully macro-expanded on its own, as C does before substitution."""
        if slot not in cache:
            if depth >= _MAX_NESTING:
                if not session.deep_reported:
                    session.deep_reported = True
                    self.reporter.report("CQ0007", session.span, name=macro.name)
                cache[slot] = args[slot]
            else:
                cache[slot] = self._expand(_Stream(args[slot], session), depth + 1, session)
        return cache[slot]
