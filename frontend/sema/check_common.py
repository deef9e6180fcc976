"""What the checker's parts share: the ``ERROR`` type, the scalar types of ints and bools,
and small functions over symbols, types and expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import syntax as ast
from . import dtypes
from .dtypes import ElemType
from .model import BoundedType, ExprInfo, ScalarType, Symbol, SymKind, Type
from .symbolic import Sym


@dataclass(frozen=True)
class ErrorType(Type):
    """The type of an expression that already produced a diagnostic."""

    def describe(self) -> str:
        return "an invalid expression"


ERROR = ExprInfo(ErrorType())
COMPARE = {"==", "!=", "<", "<=", ">", ">="}


def with_article(noun: str) -> str:
    """``noun`` with its indefinite article ("an MMA fragment", "a future")."""
    return ("an " if noun[:1].lower() in "aeio" or noun.startswith("MMA") else "a ") + noun


def type_word(sym: Symbol) -> str:
    """How a declaration of ``sym`` spells its type, for hints."""
    if sym.kind in (SymKind.SCALAR, SymKind.DIM):
        return sym.elem.name if sym.elem is not None else "int"
    return {SymKind.ITUPLE: "ituple", SymKind.MDSPAN: "mdspan"}.get(sym.kind, "int")


def scalar_elem(info: ExprInfo) -> ElemType | None:
    if isinstance(info.type, ScalarType):
        return info.type.elem
    if isinstance(info.type, BoundedType):
        return dtypes.INT
    return None


def is_intlike(info: ExprInfo) -> bool:
    elem = scalar_elem(info)
    return elem is not None and elem.is_int


def element_count(shape: tuple[Sym, ...]) -> int | None:
    total = 1
    for d in shape:
        if d.value is None:
            return None
        total *= d.value
    return total
def initialiser(sym: Symbol) -> ast.Expr | None:
    """The value an immutable scalar was declared with (None when it may change)."""
    node = sym.decl_node
    if sym.kind not in (SymKind.SCALAR, SymKind.BOUNDED) or sym.mutable:
        return None
    if isinstance(node, ast.ScalarDecl):
        return next((i.init for i in node.items if i.name == sym.name), None)
    if isinstance(node, ast.AssignStmt):
        return next((i.value for i in node.items if isinstance(i.target, ast.Ident)
                     and i.target.name == sym.name and i.op == "="), None)
    return None


def idents(node: ast.Node) -> list[ast.Ident]:
    """Every identifier under ``node``."""
    from dataclasses import fields

    found: list[ast.Ident] = []
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Ident):
            found.append(item)
        elif isinstance(item, ast.Node):
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif isinstance(item, tuple):
            stack.extend(item)
    return found


def expr_text(expr: ast.Expr) -> str:
    """Short source-like text of an expression for messages."""
    try:
        from ..printer import format_expr

        return format_expr(expr)
    except Exception:  # the printer is best effort inside messages
        return type(expr).__name__
