"""Scopes of ``#pragma croq intrinsic prefix|namespace NAME``.

A pragma makes calls to names with that prefix (``prefix act_``: ``act_relu(x)``) or in
that namespace (``namespace vendor``: ``vendor::fence()``) intrinsic calls, passed through
to the generated code. It holds from its line to the end of the braces that enclose it:
at file scope for the rest of the file, inside a function for that function, inside a
block for that block. A call that only a pragma of a closed scope covers is an error
(CQ0118), as in the reference compiler, where such a name is no longer an intrinsic and
the call does not parse. Calls that no pragma names keep their usual meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import syntax as ast
from .diagnostics import Reporter
from .preprocessor import IntrinsicPragma, Scanner


@dataclass(frozen=True)
class IntrinsicScope:
    pragma: IntrinsicPragma
    end: int  # offset of the closing brace that ends it (the text's length at file scope)

    def covers(self, name: str) -> bool:
        if self.pragma.kind == "prefix":
            return name.startswith(self.pragma.name)
        return name.startswith(self.pragma.name + "::")

    def holds_at(self, offset: int) -> bool:
        return self.pragma.offset <= offset < self.end


def scopes(text: str, pragmas: tuple[IntrinsicPragma, ...]) -> list[IntrinsicScope]:
    """Each pragma with the end of its enclosing braces."""
    return [IntrinsicScope(p, _scope_end(text, p.offset)) for p in pragmas]


def _scope_end(text: str, start: int) -> int:
    scanner = Scanner(text)
    depth, pos = 0, start
    while pos < len(text):
        kind, end = scanner.token(pos)
        if kind == "punct" and text[pos] == "{":
            depth += 1
        elif kind == "punct" and text[pos] == "}":
            if depth == 0:
                return pos
            depth -= 1
        pos = end
    return len(text)


def check_scopes(program: ast.Program, text: str, pragmas: tuple[IntrinsicPragma, ...],
                 reporter: Reporter) -> None:
    """CQ0118 for each call covered by a pragma only outside that pragma's scope."""
    if not pragmas:
        return
    found = scopes(text, pragmas)
    for node in ast.walk(program):
        if not isinstance(node, ast.CallExpr):
            continue
        covering = [s for s in found if s.covers(node.name)]
        if covering and not any(s.holds_at(node.span.start) for s in covering):
            pragma = covering[-1].pragma
            reporter.report("CQ0118", node.span, name=node.name, kind=pragma.kind,
                            declared=pragma.name)
