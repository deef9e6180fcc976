"""Tile IR: what one Triton program instance computes, as whole-tile expressions.

Every tensor value lives over a set of named *axes*. An axis is either a vectorised
parallel level or loop variable (``: thread``, ``: group``, ``: group-4``, a vectorised
``foreach``) or a tile dimension (an MMA M/N/K dimension, a staged tile's dimension).
Each axis has a position in the kernel's canonical order; a value's Triton tensor has one
dimension per axis it depends on, in that order. Combining values with different axes
broadcasts by name (the code generator inserts ``[:, None]``-style expansions).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ...frontend.sema.model import RuntimeCheck
from ...frontend.source import Span
from ...frontend.sema.symbolic import Sym


@dataclass(eq=False)
class Axis:
    """A tensor axis: ``size`` is the power-of-two extent of ``tl.arange``; indices at or
    beyond ``extent`` are padding and are masked off."""

    name: str
    size: int
    extent: int
    order: int

    @property
    def padded(self) -> bool:
        return self.size != self.extent

    def __repr__(self) -> str:
        return f"Axis({self.name}:{self.extent}/{self.size}@{self.order})"


def dim_var_name(name: str) -> str:
    """Name of the kernel/host variable that carries the symbolic dimension ``name``."""
    return "d_" + name


def host_var_name(name: str) -> str:
    """A Python-safe host variable name for a Croqtile name."""
    import keyword

    # the host function's own names: modules, arguments, locals (stream-K scratch, the
    # flags of host descriptors) and dimension variables
    reserved = {"tl", "triton", "torch", "math", "launch", "device", "programs", "workspace",
                "counters"}
    own = keyword.iskeyword(name) or name in reserved or name.startswith(
        ("TMA_", "d_", "caller_"))
    return name + "_" if own else name


def caller_var_name(name: str) -> str:
    """The host variable holding the caller's tensor of parameter ``name`` while the
    kernels work on a contiguous copy of it (``Layout.copied``)."""
    return "caller_" + name


def stride_var_name(param: str, dim: int) -> str:
    """The symbolic name of the element stride of dimension ``dim`` of a tensor parameter
    lowered for strided arguments (``Layout.strided``). It is a host local and a kernel
    argument like a dimension (``dim_var_name``); the ``__`` prefix keeps it apart from
    the program's own names."""
    return f"__stride_{param}_{dim}"


def sort_axes(axes: set[Axis] | list[Axis] | tuple[Axis, ...]) -> tuple[Axis, ...]:
    return tuple(sorted(set(axes), key=lambda a: a.order))


class DType(enum.Enum):
    """Triton element types used by the IR (value = ``triton.language`` attribute)."""

    I1 = "int1"
    I8 = "int8"
    I16 = "int16"
    I32 = "int32"
    I64 = "int64"
    U8 = "uint8"
    U16 = "uint16"
    U32 = "uint32"
    U64 = "uint64"
    F16 = "float16"
    BF16 = "bfloat16"
    F32 = "float32"
    F64 = "float64"
    F8E4 = "float8e4nv"
    F8E5 = "float8e5"

    @property
    def is_float(self) -> bool:
        return self.value.startswith(("float", "bfloat"))


# ------------------------------------------------------------------------------ expressions


@dataclass(frozen=True, eq=False)
class Expr:
    axes: tuple[Axis, ...]
    dtype: DType


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float | bool


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A Python variable of the kernel: argument, program id, loop counter, let-binding.
    ``high`` is the largest value it can take when known (program ids, loop counters)."""

    name: str
    high: int | None = None


@dataclass(frozen=True, eq=False)
class AxisIndex(Expr):
    """``tl.arange(0, axis.size)`` laid out along its axis."""

    axis: Axis


@dataclass(frozen=True, eq=False)
class Collapsed(Expr):
    """The index of a sequential MMA K-slice loop that is merged into one wide dot.
    Only the MMA lowering may consume it (it must disappear before codegen)."""

    name: str
    extent: int


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    """Arithmetic (``+ - * // % / ``), comparison, logical (``&``/``|`` on int1)."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True, eq=False)
class Unary(Expr):
    op: str  # "-", "not", "~"
    operand: Expr


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    operand: Expr


@dataclass(frozen=True, eq=False)
class Where(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A ``triton.language`` function applied element-wise (``exp``, ``maximum``...)."""

    fn: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Pointer(Expr):
    """``base + offset``: ``base`` is a pointer argument; ``dtype`` is the element type."""

    base: str
    offset: Expr


@dataclass(frozen=True, eq=False)
class Load(Expr):
    pointer: Pointer
    mask: Expr | None
    other: int | float = 0
    eviction: str | None = None
    cache: str | None = None  # tl.load(cache_modifier=...): ".cg" reads past the L1 cache


@dataclass(frozen=True, eq=False)
class DescLoad(Expr):
    """``desc.load([o0, o1])``: ``dims`` are the axes of the block in memory order.
    ``squeezed``: the descriptor's block has more dimensions, of size 1 (a ``.sqz()`` view
    of a higher-rank tensor), which the loaded tile drops."""

    desc: str
    offsets: tuple[Expr, ...]
    dims: tuple[Axis, ...]
    squeezed: tuple[int, ...] = ()  # the descriptor's block shape, when squeezed


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """``tl.sum``/``tl.max``/``tl.min`` of ``operand`` along ``axis`` (dropped from the axes)."""

    op: str
    operand: Expr
    axis: Axis


@dataclass(frozen=True, eq=False)
class Gather(Expr):
    """``tl.gather(operand, index, axis)``: along ``axis``, lane ``i`` takes the operand's
    value at lane ``index[i]`` (both laid out over ``axes``). A warp shuffle becomes one."""

    operand: Expr
    index: Expr
    axis: Axis


@dataclass(frozen=True, eq=False)
class Relabel(Expr):
    """``operand`` with its axes renamed: the i-th axis of the operand becomes ``axes[i]``
    (same sizes; the tensor is unchanged). A register tile enters a dot this way."""

    operand: Expr


@dataclass(frozen=True, eq=False)
class Full(Expr):
    value: int | float


@dataclass(frozen=True, eq=False)
class Dot(Expr):
    """``acc + a @ b`` with a over (m, k), b over (k, n); result over (m, n)."""

    a: Expr
    b: Expr
    acc: Expr
    m: Axis
    n: Axis
    k: Axis
    input_precision: str | None = None


# ------------------------------------------------------------------------------ statements


@dataclass(frozen=True, eq=False)
class Stmt:
    span: Span | None


@dataclass(frozen=True, eq=False)
class Let(Stmt):
    name: str
    value: Expr


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    pointer: Pointer
    value: Expr
    mask: Expr | None


@dataclass(frozen=True, eq=False)
class Atomic(Stmt):
    """``tl.atomic_<op>(pointer, value, mask=mask)`` (``cmp`` for compare-and-swap);
    the old value is bound to ``result`` when it is used."""

    op: str
    pointer: Pointer
    value: Expr
    mask: Expr | None
    cmp: Expr | None = None
    result: str | None = None
    sem: str | None = None  # memory ordering (Triton's default: "acq_rel")


@dataclass(frozen=True, eq=False)
class DescStore(Stmt):
    desc: str
    offsets: tuple[Expr, ...]
    value: Expr
    dims: tuple[Axis, ...]
    squeezed: tuple[int, ...] = ()  # as DescLoad's: the block shape the value takes


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    body: list[Stmt]
    pipelined: bool = False
    step: Expr | None = None
    stages: int | None = None  # a pipelined loop's own software-pipeline depth
    flatten: bool = False  # tl.range(flatten=True): one pipelined loop with the inner ones
    warp_specialize: bool = False  # tl.range(warp_specialize=True)


@dataclass(frozen=True, eq=False)
class While(Stmt):
    """``while cond: body`` (``cond`` is evaluated before every iteration)."""

    cond: Expr
    body: list[Stmt]


@dataclass(frozen=True, eq=False)
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    other: list[Stmt]


@dataclass(frozen=True, eq=False)
class Branch(Stmt):
    """``if FLAG: ... else: ...`` on a constexpr flag (both variants are generated)."""

    flag: str
    then: list[Stmt]
    other: list[Stmt]


@dataclass(frozen=True, eq=False)
class DefineDesc(Stmt):
    """``name = tl.make_tensor_descriptor(base [+ offset], shape, strides, block_shape)``
    (``offset``: elements past the tensor's first, the start of a view it describes)."""

    name: str
    base: str
    shape: tuple[Sym, ...]
    strides: tuple[Sym, ...]
    block: tuple[int, ...]
    offset: Expr | None = None


@dataclass(frozen=True, eq=False)
class Print(Stmt):
    """``tl.device_print(label, values...)``."""

    label: str
    values: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Assert(Stmt):
    """``tl.device_assert(cond, message)``: lanes outside ``mask`` (when given) pass."""

    cond: Expr
    message: str
    mask: Expr | None = None
    # a check of the debug compile option (checks.py): the message is prefixed with the
    # Croqtile file:line of ``span``, and on the CPU the error reports the values of these
    # let-bound variables at the failing lanes
    located: bool = False
    values: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Barrier(Stmt):
    """``tl.debug_barrier()``: the threads of the program wait for each other, so that
    what one wrote to global scratch memory (or a tile stored and read back by a later
    iteration) is what another reads."""


@dataclass(frozen=True, eq=False)
class Comment(Stmt):
    text: str


# ------------------------------------------------------------------------------ kernels


# The source of the kernel parameter that holds a persistent launch's program count.
PROGRAMS = "@programs"
# The sources of a stream-K launch's scratch: partial tiles (f32) and per-tile counters.
WORKSPACE = "@workspace"
COUNTERS = "@counters"


class ParamKind(enum.Enum):
    POINTER = "pointer"
    DESC = "tensor descriptor"  # made on the host (compile option descriptors="host")
    INT = "int"
    FLOAT = "float"
    FLAG = "constexpr flag"


@dataclass(frozen=True)
class HostDesc:
    """A tensor descriptor the host makes for a launch when ``flag`` holds (None
    otherwise): ``TensorDescriptor(tensor, shape, strides, block)``."""

    tensor: str  # the Croqtile name of the tensor
    shape: tuple[Sym, ...]
    strides: tuple[Sym, ...]
    block: tuple[int, ...]
    flag: str


@dataclass(frozen=True)
class KernelParam:
    name: str
    kind: ParamKind
    dtype: DType | None = None
    # host-side source of the value: a tensor/scalar name, a Sym to evaluate or a
    # descriptor to make
    source: str | Sym | HostDesc | None = None


@dataclass
class Kernel:
    name: str
    params: list[KernelParam]
    grid: tuple[Sym, ...]
    axes: list[Axis]
    body: list[Stmt]
    num_warps: int
    num_stages: int
    span: Span | None = None
    # constexpr flags decided on the host before launch: name -> host condition text
    flags: dict[str, str] = field(default_factory=dict)
    # a persistent launch: min(this many tiles, the SM count) programs loop over the tiles
    persistent_tiles: Sym | None = None
    epilogue_split: int = 1  # descriptor stores of 2-D tiles in this many column slices
    # stream-K: floats of workspace per program (0: none); the launch then uses every SM
    stream_k_floats: int = 0


# ------------------------------------------------------------------------------ host code


@dataclass(frozen=True)
class HostAlloc:
    name: str
    shape: tuple[Sym, ...]
    dtype: str  # torch dtype attribute name
    fill: float | int | None  # None: zeros, unless ``written_first``
    span: Span | None = None
    # the first kernel writes every element before anything reads it (coverage.py): the
    # buffer is made without a fill
    written_first: bool = False


@dataclass(frozen=True)
class HostLaunch:
    kernel: Kernel


@dataclass(frozen=True)
class HostReturn:
    name: str | None
    value: Sym | None = None  # a scalar result known from constants and sizes


HostStmt = HostAlloc | HostLaunch | HostReturn


@dataclass(frozen=True)
class HostParam:
    name: str
    kind: str  # "tensor" | "scalar"
    elem: str  # Croqtile element type name
    dims: tuple[Sym, ...] = ()
    written: bool = False  # the kernel writes it (clone unqualified non-reference params)
    by_ref: bool = False
    storage: str = "global"


@dataclass(frozen=True)
class Layout:
    """How the tensor parameters of one compiled variant lie in memory. A parameter in
    ``strided`` is lowered with one stride argument per dimension, which the host reads
    off the tensor it launches with; one in ``copied`` is made contiguous by the host
    first (a construct that reinterprets its memory row-major, ``span_as``), and copied
    back into the caller's tensor after the launches when the function writes it in place.
    Every other parameter is contiguous (row-major strides from its dimensions)."""

    strided: frozenset[str] = frozenset()
    copied: frozenset[str] = frozenset()


@dataclass
class Function:
    """A lowered ``__co__`` function: parameters, host program and its kernels."""

    name: str
    params: list[HostParam]
    body: list[HostStmt]
    returns: str  # "void" | "data"
    dims: list[str]  # symbolic dimension names in binding order
    kernels: list[Kernel]
    clone_inputs: list[str] = field(default_factory=list)
    checks: list[RuntimeCheck] = field(default_factory=list)  # tested before the launches
    layout: Layout = Layout()
    # ``layout.copied`` parameters the function writes in place: copied back after it ran
    copy_back: list[str] = field(default_factory=list)


FP8 = (DType.F8E4, DType.F8E5)
# narrowed to by conversions the interpreter truncates (bf16) or rounds ties wrongly (fp8)
CPU_ROUNDED = (DType.BF16, *FP8)


def nodes_of(body: Sequence[Stmt | Expr], into_loops: bool = True) -> Iterator[object]:
    """Every IR node under ``body`` (statements, expressions and what they hold); with
    ``into_loops=False``, a loop but nothing it holds."""
    stack: list[object] = list(body)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (list, tuple)):
            stack.extend(node)
            continue
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            yield node
            if into_loops or not isinstance(node, (For, While)):
                stack.extend(getattr(node, f.name) for f in dataclasses.fields(node))


def stored_to(body: list[Stmt]) -> set[str]:
    """The pointer arguments and tensor descriptors that ``body`` stores through."""
    found: set[str] = set()
    for node in nodes_of(body):
        if isinstance(node, (Store, Atomic)):
            found.add(node.pointer.base)
        elif isinstance(node, DescStore):
            found.add(node.desc)
    return found


def rounds_on_cpu(body: list[Stmt]) -> bool:
    """Whether some expression of ``body`` narrows a float tensor to bf16 or an fp8 type,
    conversions Triton 3.6's interpreter gets wrong (codegen rounds them itself there)."""
    return any(isinstance(node, Cast) and node.dtype in CPU_ROUNDED
               and node.operand.dtype.is_float and node.operand.dtype not in FP8
               and node.operand.dtype != node.dtype and not isinstance(node.operand, Const)
               for node in nodes_of(body))


def reads_back(body: list[Stmt]) -> bool:
    """Whether a loop of ``body`` loads from a tensor it also stores to. Triton's software
    pipeliner would issue a later iteration's load before this iteration's store, so such
    a kernel must not be pipelined (a read after the loop, as in an epilogue, is fine).
    A loop's loads and stores include those of the loops it holds, so the outermost loops
    decide (each node is visited once, not once per enclosing loop)."""
    for loop in nodes_of(body, into_loops=False):
        if not isinstance(loop, (For, While)):
            continue
        loaded: set[str] = set()
        stored: set[str] = set()
        for node in nodes_of(loop.body):
            if isinstance(node, Load) and node.cache is None:
                # (an L2 load is the stream-K workspace read, ordered by its counter atomics)
                loaded.add(node.pointer.base)
            elif isinstance(node, (Store, Atomic)):
                stored.add(node.pointer.base)
        if loaded & stored:
            return True
    return False
