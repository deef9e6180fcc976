"""What the checker knows about a program: symbols, types of expressions, view steps and
parallel levels. The lowering reads these annotations instead of re-deriving them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .. import syntax as ast
from ..source import Span
from .dtypes import ElemType
from .symbolic import Sym


class SymKind(enum.Enum):
    DATA = "spanned data"  # parameters and declared buffers
    SCALAR = "scalar"  # int, bool and element-typed scalars (parameters included)
    DIM = "symbolic dimension"  # a name in a parameter shape, e.g. M
    BOUNDED = "bounded variable"  # parallel / foreach / with variables
    BOUNDED_TUPLE = "bounded ituple"
    MDSPAN = "mdspan"
    ITUPLE = "ituple"
    FUTURE = "future"
    FRAG = "MMA fragment"
    VIEW = "view alias"
    EVENT = "event"


class Level(enum.Enum):
    """Where a bounded variable comes from; parallel levels in hierarchy order."""

    BLOCK = "block"
    GROUP4 = "group-4"
    GROUP = "group"
    THREAD = "thread"
    LOOP = "foreach"
    WITH = "with"

    @property
    def depth(self) -> int:
        return _DEPTH[self]

    @property
    def is_parallel(self) -> bool:
        return self in _DEPTH and self.depth < 4


_DEPTH = {Level.BLOCK: 0, Level.GROUP4: 1, Level.GROUP: 2, Level.THREAD: 3}


@dataclass(eq=False)
class Symbol:
    """One declared name. Identity matters (two ``p1`` of two parallels differ)."""

    name: str
    kind: SymKind
    span: Span
    elem: ElemType | None = None
    shape: tuple[Sym, ...] | None = None  # DATA, MDSPAN, FUTURE (its .data), VIEW
    storage: str | None = None  # "global" | "shared" | "local" for DATA / FUTURE
    mutable: bool = False
    bound: Sym | None = None  # BOUNDED
    members: tuple[Symbol, ...] = ()  # BOUNDED_TUPLE elements
    level: Level | None = None  # BOUNDED: which construct made it
    value: Sym | None = None  # compile-time value of a scalar/DIM
    values: tuple[Sym | None, ...] = ()  # ITUPLE elements
    is_async: bool = False  # FUTURE
    is_param: bool = False
    is_stream: bool = False  # a `stream` parameter (binds parallel<s>)
    assigned_depth: int = -1  # FUTURE: scope depth of the copy that last filled it
    decl_depth: int = -1  # FUTURE: scope depth of its declaration (dma.any or first copy)
    poisoned: bool = False  # declared by a statement that had an error: uses stay quiet
    by_ref: bool = False
    array_dims: tuple[Sym, ...] = ()
    # FRAG: filled by the checker as uses are seen
    frag_role: str = ""  # "acc" (mma.fill / accumulator load) or "operand" (mma.load)
    frag_executed: bool = False
    frag_as_operand: bool = False  # read as an MMA operand (so it cannot become an accumulator)
    view: ViewInfo | None = None  # VIEW alias / FRAG operand source
    decl_node: ast.Node | None = None

    def __repr__(self) -> str:
        return f"<{self.kind.name} {self.name}>"


# --- types of expressions ------------------------------------------------------------------


@dataclass(frozen=True)
class Type:
    def describe(self) -> str:
        return "value"


@dataclass(frozen=True)
class ScalarType(Type):
    elem: ElemType

    def describe(self) -> str:
        return f"a scalar of type '{self.elem.name}'"


@dataclass(frozen=True)
class BoundedType(Type):
    """A bounded integer: runtime value in ``[0, bound)`` (arithmetic keeps the bound)."""

    bound: Sym

    def describe(self) -> str:
        return f"a bounded integer (bound {self.bound})"


@dataclass(frozen=True)
class BoundedTupleType(Type):
    symbol: Symbol

    @property
    def bounds(self) -> tuple[Sym, ...]:
        return tuple(m.bound or Sym(1) for m in self.symbol.members)

    def describe(self) -> str:
        return "a bounded ituple"


@dataclass(frozen=True)
class ShapeType(Type):
    dims: tuple[Sym, ...]

    def describe(self) -> str:
        return f"an mdspan of rank {len(self.dims)}"


@dataclass(frozen=True)
class TupleType(Type):
    values: tuple[Sym | None, ...]

    def describe(self) -> str:
        return f"an ituple of rank {len(self.values)}"


@dataclass(frozen=True)
class DataType(Type):
    elem: ElemType
    shape: tuple[Sym, ...]
    storage: str

    def describe(self) -> str:
        from .symbolic import shape_text

        return f"{self.storage} {self.elem.name} {shape_text(self.shape)} data"


@dataclass(frozen=True)
class FutureType(Type):
    symbol: Symbol

    def describe(self) -> str:
        return "a DMA future"


@dataclass(frozen=True)
class FragType(Type):
    symbol: Symbol

    def describe(self) -> str:
        return "an MMA fragment"


@dataclass(frozen=True)
class EventType(Type):
    """An event, an array of events (``array`` > 0 dimensions left), or ``e.at(k)``."""

    symbol: Symbol
    array: int = 0

    def describe(self) -> str:
        return "an event array" if self.array else "an event"


@dataclass(frozen=True)
class StringType(Type):
    def describe(self) -> str:
        return "a string"


@dataclass(frozen=True)
class ExprInfo:
    type: Type
    static: Sym | None = None  # compile-time integer value (constants, #x, dims)


# --- views ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexItem:
    """One tile/offset index of a view step: the value of ``expr`` (element ``member`` of
    a bounded ituple when set); ``expr is None`` means ``_`` or an absent index (0)."""

    expr: ast.Expr | None
    member: int | None = None


@dataclass(frozen=True)
class ViewStep:
    """One tiling step: per dimension, ``offset += index * scale`` and the new extent.

    ``ceil`` marks dims tiled by ``chunkat`` over a ``cdiv(D, T)`` bound: extent ``T``,
    tails masked, instead of the literal ``D / cdiv(D, T)``.
    """

    kind: str
    extents: tuple[Sym, ...]
    indices: tuple[IndexItem, ...]
    scales: tuple[Sym, ...]
    span: Span
    ceil: tuple[bool, ...] = ()
    factors: tuple[Sym | None, ...] = ()  # chunkat: the tiling factor of each dimension
    # per dimension, an extent known only at run time (``view(1, X, _)``, ``X`` a scalar
    # with a static bound): ``extents`` holds the bound, elements past the value are masked
    dynamic: tuple[ast.Expr | None, ...] = ()
    # ``view(E : T)`` / ``subspan(E : T)``: element strides into the underlying buffer,
    # replacing the parent's (spec 5.4); the origin is then ``sum(index_d * scale_d * T_d)``
    strides: tuple[Sym, ...] | None = None


@dataclass(frozen=True)
class ViewInfo:
    """A view resolved against its root: the root symbol (parameter, buffer or future),
    whether it reads the future's ``.data``, the steps, and the resulting data type."""

    root: Symbol
    steps: tuple[ViewStep, ...]
    type: DataType
    array_index: tuple[ast.Expr, ...] = ()


# --- parallel levels ------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelInfo:
    level: Level
    vars: tuple[Symbol, ...]
    bounds: tuple[Sym, ...]
    implicit: bool  # level inferred (not written by the user)
    node: ast.ParallelLevel | None = None
    tuple_symbol: Symbol | None = None


@dataclass(frozen=True)
class LoopInfo:
    """A foreach/with item: its variables (in nesting order) and bounds."""

    vars: tuple[Symbol, ...]
    bounds: tuple[Sym, ...]
    tuple_symbol: Symbol | None = None
    lower: tuple[ast.Expr | None, ...] = ()  # foreach ranges: lb expressions
    upper: tuple[ast.Expr | None, ...] = ()  # foreach ranges: ub offsets
    step: tuple[ast.Expr | None, ...] = ()  # foreach ranges: strides
    # per variable, a trip count known only at run time (``foreach y in X``, ``X`` a scalar
    # with a static bound, which ``bounds`` holds)
    dynamic: tuple[ast.Expr | None, ...] = ()


# The bound of a loop whose trip count is known only at run time and has no provable
# bound (``foreach y in [n]``, ``n`` read from a tensor): an opaque name that the kernel
# binds to ``n`` before the loop. ``__`` names are reserved, so it names nothing else.
RUNTIME_TRIPS_PREFIX = "__trips"


def runtime_trips(item: ast.Within) -> Sym:
    """The opaque bound of ``item``'s runtime trip count (see RUNTIME_TRIPS_PREFIX)."""
    return Sym.var(f"{RUNTIME_TRIPS_PREFIX}{item.span.start}_{item.vars[0]}")


def is_runtime_trips(name: str) -> bool:
    return name.startswith(RUNTIME_TRIPS_PREFIX)


@dataclass(frozen=True)
class RuntimeCheck:
    """A condition on parameter dimensions the checker could not prove; the runtime tests
    it after binding the arguments and raises ``ArgumentError`` with ``what``."""

    lhs: Sym
    op: str  # a comparison: == != < <= > >=
    rhs: Sym
    what: str  # e.g. "the copy at k.co:7 needs 'x' dimension 0 <= 'buf' dimension 0"

    def holds(self, env: dict[str, int]) -> bool | None:
        """None when a dimension is not bound (an anonymous '?' dimension)."""
        try:
            a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        except (KeyError, ZeroDivisionError):
            return None
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[self.op]

    def message(self, env: dict[str, int]) -> str:
        values = [f"{side} = {side.evaluate(env)}" for side in (self.lhs, self.rhs)
                  if not side.is_const]
        return f"{self.what}: needs {self.lhs} {self.op} {self.rhs}, but {' and '.join(values)}"


@dataclass
class CheckedFunction:
    node: ast.Function
    params: list[Symbol]
    dims: dict[str, Symbol]  # symbolic dimensions by name
    returns: str  # "void" | "data" | "scalar"
    ret_type: DataType | ScalarType | None
    exprs: dict[int, ExprInfo] = field(default_factory=dict)  # id(expr) -> info
    refs: dict[int, Symbol] = field(default_factory=dict)  # id(Ident/name site) -> symbol
    decls: dict[int, list[Symbol]] = field(default_factory=dict)  # id(stmt) -> declared
    views: dict[int, ViewInfo] = field(default_factory=dict)  # id(View) -> info
    parallels: dict[int, tuple[LevelInfo, ...]] = field(default_factory=dict)
    loops: dict[int, tuple[LoopInfo, ...]] = field(default_factory=dict)  # id(Foreach/With)
    frags: dict[int, Symbol] = field(default_factory=dict)  # id(MMA stmt) -> accumulator
    swaps: dict[int, list[Symbol]] = field(default_factory=dict)  # id(swap/rotate) -> names
    returned: Symbol | None = None
    runtime_checks: list[RuntimeCheck] = field(default_factory=list)
    host_asserts: set[int] = field(default_factory=set)  # id(assert) decided before launch
    # dimensions that must be constants where they are used (a shared buffer's shape, a
    # group bound): the function is compiled per call, with their values from the
    # arguments (see ``Checker.specialize``); empty when one compile serves every call
    specialize_on: set[str] = field(default_factory=set)
    # id(warp shuffle of an inlined device helper) -> the `: thread` level variable whose
    # lanes it permutes
    lanes: dict[int, Symbol] = field(default_factory=dict)

    def info(self, expr: ast.Expr) -> ExprInfo:
        return self.exprs[id(expr)]

    def event_named(self, target: ast.Expr) -> tuple[Symbol, ast.Ident] | None:
        """The event a ``wait``/``trigger`` target names (``full``, ``full[s]``,
        ``full.at(k)``) and the name site; None when the target is a future."""
        base = target.base if isinstance(target, (ast.ElemAccess, ast.Index)) else target
        if not isinstance(base, ast.Ident):
            return None
        sym = self.refs.get(id(base))
        if sym is None or sym.kind is not SymKind.EVENT:
            return None
        return sym, base


@dataclass
class CheckedProgram:
    functions: list[CheckedFunction]
    text: str = ""
