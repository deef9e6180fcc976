"""AST nodes of Croqtile (spec section 4). Every node carries the ``Span`` it came from.

Nodes are frozen dataclasses; children are tuples. Names of grammar rules appear in the
class docstrings. Strings that name a fixed set (storage, level, layout) use the
spelling of the source (``"group-4"``, ``"row"``), canonicalised by the parser where the
language has aliases (``half`` -> ``f16``, ``bfp16`` -> ``bf16``, ``float`` -> ``f32``,
``double`` -> ``f64``, ``f8`` -> ``f8_e4m3``, ``.swizzle`` -> ``.swiz``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterator

from .source import Span


@dataclass(frozen=True, slots=True)
class Node:
    span: Span


# ----------------------------------------------------------------------------------------
# Expressions (spec 4.9)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expr(Node):
    pass


@dataclass(frozen=True, slots=True)
class IntLit(Expr):
    """``42``, ``0x1F``, ``7u``, ``3ll``; ``text`` is the spelling, ``suffix`` lower-cased."""

    value: int
    text: str
    suffix: str = ""


@dataclass(frozen=True, slots=True)
class FloatLit(Expr):
    """``1.5f`` (``is_f32``) or ``1.5`` (f64); ``-1.5f`` lexes as one literal."""

    value: float
    text: str
    is_f32: bool


@dataclass(frozen=True, slots=True)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True, slots=True)
class InfLit(Expr):
    pass


@dataclass(frozen=True, slots=True)
class NullLit(Expr):
    pass


@dataclass(frozen=True, slots=True)
class StrLit(Expr):
    """String literal; adjacent literals are concatenated into ``value``."""

    value: str
    text: str


@dataclass(frozen=True, slots=True)
class Ident(Expr):
    """A name; ``_`` is the wildcard of chunkat/subspan argument lists."""

    name: str


@dataclass(frozen=True, slots=True)
class Member(Expr):
    """``x.span``, ``x.data``, ``x.mdata`` (``member`` without the dot)."""

    obj: Expr
    member: str


@dataclass(frozen=True, slots=True)
class ElemAccess(Expr):
    """``x.at(i, j)`` / ``f.data.at(i)``: one element of spanned data (or event ``e.at(k)``)."""

    base: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Index(Expr):
    """``buf[i]`` / ``x[i][j]``: array element selection; one node per bracket."""

    base: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """Postfix ``a(i)``: dimension of a shape, element of an ituple, ``k(-1)``."""

    base: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class BoundOf(Expr):
    """Prefix ``#x``: the upper bound of a bounded variable."""

    name: str


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    """``!e``, ``~e``, ``&e``, ``++x``, ``--x`` (``op`` as spelled)."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Postfix(Expr):
    """``x++`` / ``x--``."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    """Binary operators including ``#`` (composition), ``#+``, ``#-``, ``<<``."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, slots=True)
class Ternary(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, slots=True)
class TupleLit(Expr):
    """``{a, b, c}``: an ituple (or a fill value list)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ShapeLit(Expr):
    """``[a, b, c]``: an mdspan literal; items may themselves be shapes (spliced)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Derive(Expr):
    """Derivation sugar: ``sp [(0) / 2, (1) + 1]`` (``brackets="[]"``) or ``t {(0), 5}``.

    Inside ``items`` a ``DimRef`` stands for ``(i)``, an element of ``base``.
    """

    base: Expr
    items: tuple[Expr, ...]
    brackets: str


@dataclass(frozen=True, slots=True)
class DimRef(Expr):
    """``(i)`` inside derivation sugar."""

    index: int


@dataclass(frozen=True, slots=True)
class SizeOf(Expr):
    """``|e|``: element count of a shape or data; ``|f16|``: byte size of a type."""

    operand: Expr | None
    elem_type: str | None = None


@dataclass(frozen=True, slots=True)
class CallExpr(Expr):
    """Built-in or intrinsic call used as a value: ``cdiv(a, b)``, ``__exp(x)``,
    ``__atomic_add(&x.at(i), v)``, ``__alignup(n, 16)``. ``template`` holds ``<...>``."""

    name: str
    args: tuple[Expr, ...]
    template: tuple[Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """``__to<T>(e)``; ``target`` is an element type or a quoted C++ type."""

    target: str
    quoted: bool
    operand: Expr


@dataclass(frozen=True, slots=True)
class SelectExpr(Expr):
    """``select(k, v0, v1, ...)``: ``v_k`` (0-based)."""

    index: Expr
    options: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ExternCall(Expr):
    """``call f::g<T>(args)``: an external device function. A call of a device helper of
    the same file (``device_helpers``) carries the helper's returned expression with the
    arguments substituted (``inlined``), or why it cannot be inlined (``problem``)."""

    path: tuple[str, ...]
    template: tuple[Expr, ...]
    args: tuple[Expr, ...]
    inlined: Expr | None = field(default=None, compare=False)
    problem: str = field(default="", compare=False)


# ----------------------------------------------------------------------------------------
# Views (spec 4.8): a base followed by tiling operations, applied left to right.
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewOp(Node):
    """One tiling step.

    kind:   "chunkat" | "chunk" | "subspan" | "modspan" | "view" | "span_as" | "sqz"
    args:   chunkat factors / chunk factors / subspan or view extents / span_as shape
    strides: ``subspan(E : S)`` / ``view(E : S)`` explicit element strides
    step:   ``.step(...)`` after subspan/modspan
    at:     ``.at(...)`` after chunk/subspan/modspan, ``.from(...)`` after view
            (``None`` when absent: the tile sits at the origin)
    """

    kind: str
    args: tuple[Expr, ...]
    strides: tuple[Expr, ...] | None = None
    step: tuple[Expr, ...] | None = None
    at: tuple[Expr, ...] | None = None


@dataclass(frozen=True, slots=True)
class View(Expr):
    """``base`` is an Ident, Member(.data/.mdata), Index (``buf[i]``) or ElemAccess
    (``e.at(k)``, event generation); ``ops`` may be empty for a bare name used as a
    DMA/MMA operand."""

    base: Expr
    ops: tuple[ViewOp, ...]


# ----------------------------------------------------------------------------------------
# Types and functions (spec 4.1)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnonDim(Expr):
    """``?`` (``unbounded=False``) or ``??`` in a parameter shape."""

    unbounded: bool


@dataclass(frozen=True, slots=True)
class ShapeSpec(Node):
    """``[d0, d1]`` (``dims``), ``mdspan<2>`` (``rank`` only) or ``mdspan[d0, d1]``."""

    dims: tuple[Expr, ...] | None
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class TypeSpec(Node):
    """``f16 [M, K]`` (spanned), ``f16`` / ``int`` / ``bool`` (scalar), ``stream``."""

    elem: str
    shape: ShapeSpec | None = None


@dataclass(frozen=True, slots=True)
class Param(Node):
    storage: str | None  # "global" | "shared" | "local" | None
    type: TypeSpec
    by_ref: bool
    name: str | None


@dataclass(frozen=True, slots=True)
class Function(Node):
    """``__co__ ret name(params) { body }``; ``ret`` is None for ``void``, ``"auto"``
    is encoded as TypeSpec(elem="auto")."""

    name: str
    ret: TypeSpec | None
    params: tuple[Param, ...]
    body: Block
    name_span: Span


@dataclass(frozen=True, slots=True)
class Program(Node):
    functions: tuple[Function, ...]


# ----------------------------------------------------------------------------------------
# Statements (spec 4.2 - 4.7)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stmt(Node):
    pass


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    """``{ stmts }``; a single-statement body is also wrapped (``braced=False``)."""

    stmts: tuple[Stmt, ...]
    braced: bool = True


@dataclass(frozen=True, slots=True)
class Empty(Stmt):
    """A stray ``;``."""


@dataclass(frozen=True, slots=True)
class DeclVar(Node):
    """``name[a][b]{init}`` in a spanned declaration."""

    name: str
    array_dims: tuple[Expr, ...] = ()
    init: Expr | None = None


@dataclass(frozen=True, slots=True)
class SpannedDecl(Stmt):
    """``[storage] T [dims] a, b{0};``; ``dims is None`` spells ``[auto]``.
    ``frag=True`` for ``frag T [dims] x;``."""

    storage: str | None
    elem: str
    dims: tuple[Expr, ...] | None
    vars: tuple[DeclVar, ...]
    frag: bool = False


@dataclass(frozen=True, slots=True)
class ScalarItem(Node):
    """``name``, ``name = init`` or ``name{init}``."""

    name: str
    init: Expr | None = None
    brace_init: bool = False


@dataclass(frozen=True, slots=True)
class ScalarDecl(Stmt):
    """``[mutable] T a = 1, b;`` with T in int/bool/element types; ``type`` None for
    ``mutable a = 1;``."""

    mutable: bool
    type: str | None
    items: tuple[ScalarItem, ...]


@dataclass(frozen=True, slots=True)
class MdspanDecl(Stmt):
    """``sp : [7, 8];`` / ``mdspan<2> sp : e;`` (``keyword`` tells which spelling)."""

    name: str
    value: Expr
    rank: int | None = None
    keyword: bool = False


@dataclass(frozen=True, slots=True)
class ItupleDecl(Stmt):
    """``ituple<3> t = {1, 2, 3};``"""

    name: str
    value: Expr
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class EventVar(Node):
    name: str
    array_dims: tuple[Expr, ...] = ()
    ready: bool = False


@dataclass(frozen=True, slots=True)
class EventDecl(Stmt):
    """``shared event<N> e, full[2] = ready;``"""

    storage: str | None
    count: int | None
    vars: tuple[EventVar, ...]


@dataclass(frozen=True, slots=True)
class Assign(Node):
    """``target op value``: op is ``=`` or a compound ``+=`` etc. ``target`` is an
    Ident, ElemAccess or Index."""

    target: Expr
    op: str
    value: Expr


@dataclass(frozen=True, slots=True)
class AssignStmt(Stmt):
    """``a = 1, b = 2;`` (one or more assignments)."""

    items: tuple[Assign, ...]


@dataclass(frozen=True, slots=True)
class ExprStmt(Stmt):
    """An expression evaluated for effect: ``x++;``, ``__atomic_add(...)``, ``call f();``,
    ``assert(c, "m");``, ``print(...)``."""

    expr: Expr


@dataclass(frozen=True, slots=True)
class AssertStmt(Stmt):
    cond: Expr
    message: str


@dataclass(frozen=True, slots=True)
class PrintStmt(Stmt):
    """``print(...)`` / ``println(...)``; ``static`` for ``print!``."""

    newline: bool
    static: bool
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class ReturnStmt(Stmt):
    value: Expr | None


@dataclass(frozen=True, slots=True)
class BreakStmt(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class ContinueStmt(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class YieldStmt(Stmt):
    pass


@dataclass(frozen=True, slots=True)
class CppStmt(Stmt):
    """``__cpp__("...");``"""

    code: str


@dataclass(frozen=True, slots=True)
class AsmStmt(Stmt):
    """``__asm__ [volatile] ( ... );``: kept as the raw token text between the parens."""

    volatile: bool
    text: str


@dataclass(frozen=True, slots=True)
class SyncStmt(Stmt):
    """``sync.shared`` (kind="shared"), ``sync.barrier : block`` (kind="barrier"),
    ``sync.fence : level <storage>`` (kind="fence")."""

    kind: str
    level: str | None = None
    storage: str | None = None


# --- parallel, with, foreach, while, if, inthreads, apply (spec 4.4) --------------------


@dataclass(frozen=True, slots=True)
class ParallelLevel(Node):
    """One ``pby [level]`` item.

    ``vars``: the bound names (``()`` for an anonymous ``by E``); ``tuple_name`` for
    ``t = {x, y} by [...]``; ``braced`` when written with ``{}``; ``bounds`` one
    expression per variable (or one shape expression for anonymous/unbraced forms).
    ``level`` is "block" | "group-4" | "group" | "thread" | "cluster" | "device" | None.
    """

    vars: tuple[str, ...]
    bounds: tuple[Expr, ...]
    level: str | None = None
    tuple_name: str | None = None
    braced: bool = False
    cooperative: bool = False
    device_name: str | None = None


@dataclass(frozen=True, slots=True)
class Attribute(Node):
    """``[[name(args)]]``: launch_bounds, maxnreg, schedule(k_tiles(...))."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Parallel(Stmt):
    """``parallel[.async][<stream>] level {, level} body``. ``levels[0]`` is outermost."""

    levels: tuple[ParallelLevel, ...]
    body: Block
    is_async: bool = False
    stream: str | None = None
    attrs: tuple[Attribute, ...] = ()


@dataclass(frozen=True, slots=True)
class Within(Node):
    """``x in shape`` / ``{x, y} in shape`` / ``idx = {x, y} in shape``."""

    vars: tuple[str, ...]
    shape: Expr
    tuple_name: str | None = None
    braced: bool = False


@dataclass(frozen=True, slots=True)
class RangeItem(Node):
    """``[c =] y(lb : ub : step)`` over an existing bounded variable; any part may be
    None; ``has_range`` is False for a plain ``foreach y``."""

    var: str
    name: str | None = None
    lb: Expr | None = None
    ub: Expr | None = None
    step: Expr | None = None
    has_range: bool = False


@dataclass(frozen=True, slots=True)
class LoopSuffix(Node):
    """``unroll(4)`` / ``vectorize(x, 8)``."""

    kind: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class With(Stmt):
    items: tuple[Within, ...]
    body: Block
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Foreach(Stmt):
    items: tuple[Within | RangeItem, ...]
    body: Block
    suffixes: tuple[LoopSuffix, ...] = ()


@dataclass(frozen=True, slots=True)
class While(Stmt):
    cond: Expr
    body: Block


@dataclass(frozen=True, slots=True)
class If(Stmt):
    cond: Expr
    then: Block
    other: Block | None = None


@dataclass(frozen=True, slots=True)
class InThreads(Stmt):
    pred: Expr
    body: Block
    is_async: bool = False


@dataclass(frozen=True, slots=True)
class Apply(Stmt):
    """``apply {i, j} in acc.span body`` [ext]."""

    vars: tuple[str, ...]
    frag: str
    body: Block


# --- DMA / TMA (spec 4.5) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DmaAttr(Node):
    """``.swiz<128>`` (name="swiz"), ``.zfill``, ``.sp<2:4>``, ``.multicast``,
    ``.promote<64>``, ``.evict_first``, ``.evict_last``; ``args`` hold ``<...>`` values."""

    name: str
    args: tuple[Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class PadConfig(Node):
    """``<{lo...}, {hi...}, {mid...}, value>``"""

    low: tuple[Expr, ...]
    high: tuple[Expr, ...]
    mid: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class StorageDest(Expr):
    """``=> shared`` / ``=> local`` / ``=> global``: allocate a fresh buffer."""

    storage: str


@dataclass(frozen=True, slots=True)
class DmaStmt(Stmt):
    """``[f =] engine.op[<cfg>][.async]{attr} src => dst [after g];``

    engine: "dma" | "tma"; op: "copy" | "load" | "pad" | "transp".
    ``pad`` holds the pad config, ``perm`` the transpose permutation.
    ``dst`` is a View, StorageDest or SelectExpr.
    """

    future: str | None
    engine: str
    op: str
    src: Expr
    dst: Expr
    is_async: bool = False
    attrs: tuple[DmaAttr, ...] = ()
    pad: PadConfig | None = None
    perm: tuple[Expr, ...] | None = None
    after: str | None = None


@dataclass(frozen=True, slots=True)
class DmaAny(Stmt):
    """``f = dma.any;`` placeholder future."""

    future: str


@dataclass(frozen=True, slots=True)
class WaitStmt(Stmt):
    """``wait a, b[i], e.at(k);``: targets are Ident, Index or ElemAccess."""

    targets: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class TriggerStmt(Stmt):
    targets: tuple[Expr, ...]
    after: tuple[Expr, ...] = ()
    cluster: bool = False


@dataclass(frozen=True, slots=True)
class SwapStmt(Stmt):
    """``swap(a, b)`` (kind="swap") or ``rotate(a, b, c)`` (kind="rotate")."""

    kind: str
    names: tuple[str, ...]


# --- MMA (spec 4.6) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MmaFill(Stmt):
    """``mc = mma.fill[.T] v;`` (``declares``) or ``mma.fill mc, v;``. ``target`` may be
    an Ident or Index (``acc[i]``)."""

    target: Expr
    value: Expr
    elem: str | None = None
    declares: bool = True


@dataclass(frozen=True, slots=True)
class MmaLoad(Stmt):
    """``ma = mma.load[.frag][.swiz<N>][.async] view;`` or ``mma.load view, frag;``."""

    target: Expr
    src: Expr
    declares: bool = True
    frag: bool = False
    swiz: Expr | None = None
    has_swiz: bool = False
    is_async: bool = False


@dataclass(frozen=True, slots=True)
class MmaStore(Stmt):
    """``mma.store[.async|.transp|.mask] frag, view[, rows[, cols]];``"""

    frag: Expr
    dst: Expr
    modifier: str | None = None
    mask: tuple[Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class MmaScale(Stmt):
    """``mma.scale frag, sa, sb;``"""

    frag: Expr
    scale_a: Expr
    scale_b: Expr


@dataclass(frozen=True, slots=True)
class MmaExec(Stmt):
    """``[f =] mma.LA.LB[.async|.sp|.scale] acc, a, b [, extra...];``

    ``kind`` is "plain", "sp" (extra = (meta,)) or "scale" (extra = (sa, sb)).
    ``schedule`` keeps a ``[[schedule(...)]]`` attribute.
    """

    layout_a: str
    layout_b: str
    acc: Expr
    a: Expr
    b: Expr
    kind: str = "plain"
    extra: tuple[Expr, ...] = ()
    future: str | None = None
    is_async: bool = False
    schedule: Attribute | None = None


@dataclass(frozen=True, slots=True)
class MmaCommit(Stmt):
    """``mma.commit;`` [legacy]: accepted as a no-op (spec 12.7)."""


@dataclass(frozen=True, slots=True)
class FragDecl(Stmt):
    """``frag[.T] name[N]{v};`` [ext]."""

    elem: str | None
    name: str
    array_dims: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class BufferMap(Stmt):
    """``buffer.map ...;`` [ext]: kept as raw text."""

    text: str


def walk(node: object) -> Iterator[Node]:
    """Every AST node under ``node`` (statements and expressions)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (list, tuple)):
            stack.extend(current)
            continue
        if not isinstance(current, Node):
            continue
        yield current
        for f in fields(current):
            value = getattr(current, f.name)
            if isinstance(value, (Node, list, tuple)):
                stack.append(value)
