"""What the checker's parts share: the ``ERROR`` type, the scalar types of ints and bools,
small functions over symbols, types and expressions, the walk's context and
``CheckerBase``, the typed base of every part of the checker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import syntax as ast
from ..diagnostics import Reporter
from ..source import Span
from . import dtypes
from .dtypes import ElemType
from .model import (BoundedType, CheckedFunction, DataType, ExprInfo, Level, LevelInfo,
                    ScalarType, Symbol, SymKind, Type)
from .symbolic import Sym

if TYPE_CHECKING:
    from .rules_s5000 import EngineRules
    from .targets import Target


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


@dataclass
class WalkContext:
    """Where the walk is: host or device, enclosing parallel levels and loops."""

    levels: list[LevelInfo] = field(default_factory=list)
    loops: int = 0
    level_of: dict[int, Level] = field(default_factory=dict)

    @property
    def on_device(self) -> bool:
        return bool(self.levels)


class CheckerBase:
    """The base of every part of the checker (``check_stmts``, ``check_exprs``, ...): the
    walk's state, and the helpers and rules one part calls in another. ``Checker`` sets the
    state and combines the parts, which (with ``Checker`` itself) define these methods; the
    declarations here exist for the type checker only."""

    reporter: Reporter
    target: Target
    engine: EngineRules | None  # a target with tensor-engine tables (the S5000)
    specialize: dict[str, int]  # parameter dimensions bound to one call's values
    scopes: list[dict[str, Symbol]]
    fn: CheckedFunction | None
    ctx: WalkContext
    helper_calls: list[ast.ExternCall]  # the device helper calls being checked, innermost last
    # async futures: where each was made asynchronous, which were waited or bound
    async_defs: dict[Symbol, Span]
    waited: set[Symbol]
    waited_in_block: list[set[Symbol]]
    placeholders: dict[Symbol, bool]  # dma.any -> used
    swizzles: dict[Symbol, int]  # buffer -> swizzle of the copy that filled it
    kernel_shared: list[tuple[str, int, Span]]  # shared buffers of a kernel
    inner_parallels: int
    _in_tma: bool
    swap_groups: list[set[Symbol]]
    kernel_threads: tuple[int, Span] | None
    scalar_bounds: dict[Symbol, int]  # runtime ints with a static upper bound
    apply_depth: int  # inside `apply` blocks: accumulators are read element-wise
    # ranges of bounded variables narrowed by enclosing `if` / `inthreads` conditions
    known: dict[Symbol, tuple[int | None, int | None]]
    acc_shapes: dict[Span, tuple[Sym, ...]]  # accumulator shapes known from a first walk
    shapes_pending: bool  # an `apply` spanned an accumulator before its shape was known

    if TYPE_CHECKING:
        # checker.py
        def _error(self, code: str, span: Span, **fields: Any) -> None: ...
        def _not_static(self, expr: ast.Expr, what: str, info: ExprInfo) -> None: ...
        def _declare(self, sym: Symbol) -> Symbol: ...
        def _declare_poisoned(self, name: str, span: Span) -> None: ...
        def _lookup(self, name: str) -> Symbol | None: ...
        def _resolve(self, ident: ast.Ident) -> Symbol | None: ...
        def _scope_depth(self, name: str) -> int: ...
        def _fn(self) -> CheckedFunction: ...
        def _note_decl(self, stmt: ast.Node, sym: Symbol) -> None: ...
        def _runtime_check(self, lhs: Sym, op: str, rhs: Sym, what: str, span: Span) -> None: ...
        def _specialisable(self, value: Sym) -> bool: ...
        def _elem(self, name: str, span: Span) -> ElemType: ...
        def _block(self, block: ast.Block, new_scope: bool = True) -> None: ...
        def _expr(self, expr: ast.Expr) -> ExprInfo: ...

        # check_stmts.py
        def _shape_items(self, items: tuple[ast.Expr, ...], span: Span,
                         nonpositive: str = "CQ0306") -> tuple[Sym, ...] | None: ...
        def _static_int(self, expr: ast.Expr, what: str) -> Sym: ...
        def _index_range(self, expr: ast.Expr) -> tuple[int | None, int | None]: ...

        # check_parallel.py
        def _note_shared(self, name: str, elem: ElemType, shape: tuple[Sym, ...], span: Span,
                         count: int = 1) -> None: ...

        # check_views.py
        def _view_operand(self, expr: ast.Expr) -> DataType | None: ...
        def _check_array_index(self, sym: Symbol, indices: list[ast.Expr]) -> None: ...
        def _static_bound(self, expr: ast.Expr) -> int | None: ...
        def _runtime_trips(self, shape: ast.Expr) -> ast.Expr | None: ...
        def _loop_bound(self, expr: ast.Expr, depth: int) -> Sym | None: ...

        # check_helpers.py
        def _is_helper_call(self, e: ast.CallExpr) -> bool: ...
        def _shuffle(self, e: ast.CallExpr) -> ExprInfo: ...
        def _bits(self, e: ast.CallExpr) -> ExprInfo: ...

        # check_mma.py
        def _frag_ref(self, expr: ast.Expr) -> Symbol | None: ...
