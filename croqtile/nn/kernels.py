"""The Croqtile programs behind ``croqtile.nn`` (``croqtile/kernels/*.co``), compiled on
first use into ``torch.ops.croqtile.<name>`` operators, one per variant, with autograd.

A variant is a program and its ``#define`` values: the element type, the activation, the
head dimension, whether a bias, weight or mask is passed, and the tile sizes of the device
kind. Every variant has its own operator names (the programs take them as defines), so
that variants never re-point each other's operators. Compiled modules are cached per
variant; a lock makes the first use from several threads compile once.

What the backward of each operator runs:

- linear: ``LINEAR_GRAD`` (a Croqtile kernel: the product recomputed, times the
  activation's slope, in the epilogue) gives ``g = dL/d(pre-activation)``; then
  ``dx = g w`` and ``dw = g^T x`` are the Croqtile GEMMs of ``matmul.co``; ``dbias`` is
  torch's ``g.sum(0)``; a residual added in the epilogue gets ``dy`` itself.
- attention: see ``croqtile.nn.attention_ops`` (its variants and autograd).
- gated linear: ``GATED_GRAD`` (gated_linear.co: both products recomputed) gives the
  gradients of the gate's and the up projection's outputs; then the Croqtile GEMMs of
  ``matmul.co`` as for linear.
- rms_norm: the Croqtile kernels of ``rms_norm_backward.co``: each row's reciprocal RMS,
  then ``dx`` per block of rows and ``dweight`` per block of columns.
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch._C import _functorch
from torch.autograd import forward_ad as _forward_ad

from ..api import compile as compile_source
from ..backends.bounded import LRU, TableInfo
from ..errors import CompileWarning
from ..ops.library import retrace
from ..ops.traced import takes_host_descriptors, traced_call
from ..runtime.module import Function, Module, ModuleFunction, Plan

NAMESPACE = "croqtile"
KERNELS = Path(__file__).resolve().parent.parent / "kernels"

# element types the kernels take, by torch dtype: (Croqtile type, accumulator type)
ELEMENTS: dict[torch.dtype, tuple[str, str]] = {
    torch.float16: ("f16", "f32"),
    torch.bfloat16: ("bf16", "f32"),
    torch.float32: ("f32", "f32"),
    torch.float64: ("f64", "f64"),
}
ELEMENTS_ACC = {element: acc for element, acc in ELEMENTS.values()}
ACC_DTYPE = {"f32": torch.float32, "f64": torch.float64}

ACTIVATIONS = {None: "NONE", "relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELU_TANH",
               "silu": "SILU"}
HEAD_DIMS = (16, 32, 64, 128, 256)

# Tile sizes by (program, device kind, element type or head dimension). The GPU tiles are
# sized for Hopper (128-row tiles, 128 x 256 GEMM tiles for 16-bit types, 64-key blocks
# at head dimension 256 to keep the accumulator and scores in registers); the CPU runs
# Triton's interpreter, where small tiles keep the tests' small shapes crossing several
# tiles and tails.
GEMM_TILES = {
    ("cpu", "f16"): (32, 32, 32), ("cpu", "bf16"): (32, 32, 32),
    ("cpu", "f32"): (32, 32, 32), ("cpu", "f64"): (32, 32, 32),
    ("gpu", "f16"): (128, 256, 64), ("gpu", "bf16"): (128, 256, 64),
    ("gpu", "f32"): (128, 128, 32), ("gpu", "f64"): (64, 64, 16),
}
# The forward linear kernel's tiles and launch options by the shape of the call: "wide"
# (GEMM_TILES), "narrow" where the wide grid would leave streaming multiprocessors idle
# (fewer tiles than SMs: Llama-3-8B's k and v projections, N = 1024, at M = 2048 make 64
# tiles of 128 x 256 on the H200's 132 SMs) and "skinny" for at most SKINNY_ROWS rows (a
# decode step). See ``linear_tiles``.
NARROW_GEMM_TILES = {("gpu", "f16"): (128, 128, 64), ("gpu", "bf16"): (128, 128, 64)}
SKINNY_GEMM_TILES = {("gpu", "f16"): (16, 256, 64), ("gpu", "bf16"): (16, 256, 64)}
SKINNY_ROWS = 16
# Measured on the H200 at Llama-3-8B's prefill shapes (M = 2048, bf16, against F.linear in
# the same run, bench/nn_linear_variants.py): wide tiles walked 16 rows of tiles at a time
# (the default is 8) with 4 stages: 0.976-1.044 over q/o, gate/up, down and lm_head (8 rows
# and 3 stages: 0.955-1.023); the k/v projection on 128 x 128 tiles with 8 warps and 4
# stages 0.834 (128 x 256: 0.61; 128 x 128 with 4 warps: 0.66; stream-K over 128 x 256
# tiles: 0.52-0.69). The skinny options are what the quick search of the decode sweep
# (a user's GEMM, M = 16, 2026-12-02f/g) chose most often for these projections: 16-row
# tiles, 8 warps, 4 stages, persistent with stream-K, pointer loads (0.85-1.0 of cuBLAS);
# croqtile.nn has not been timed with them yet.
LINEAR_OPTIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "cpu": (), "gpu": (("group_m", 16), ("num_stages", 4))}
NARROW_LINEAR_OPTIONS = (("group_m", 16), ("num_warps", 8), ("num_stages", 4))
SKINNY_LINEAR_OPTIONS = (("num_warps", 8), ("num_stages", 4), ("persistent", True),
                         ("stream_k", True), ("descriptors", False))
# The backward GEMMs (matmul.co) take the forward's wide tiles and launch options: on
# 128 x 128 tiles a Llama-3-8B training step's backward GEMMs ran 1.4 times as long as
# cuBLAS's (H100, 2,048 tokens).
BACKWARD_GEMM_TILES = {
    **{("cpu", t): (32, 32, 32) for t in ("f16", "bf16", "f32", "f64")},
    ("gpu", "f16"): (128, 256, 64), ("gpu", "bf16"): (128, 256, 64),
    ("gpu", "f32"): (128, 128, 32), ("gpu", "f64"): (64, 64, 16),
}


RMS_TILES = {"cpu": (16, 32), "gpu": (16, 256)}  # (ROWS, COLS)
# (DW_ROWS, DW_COLS) of the weight gradient: a block per DW_COLS columns walks every row,
# so narrow blocks (128 of them for 4,096 features) keep the SMs busy; with the rows'
# 256-column blocks a Llama norm's gradient took 190 us on an H100 (16 blocks)
RMS_DW_TILES = {"cpu": (16, 16), "gpu": (64, 32)}


def device_kind(t: torch.Tensor) -> str:
    return "gpu" if t.is_cuda else "cpu"


@dataclass(frozen=True)
class Variant:
    """A program and its defines; ``names`` maps each function's macro to its name."""

    program: str
    defines: tuple[tuple[str, int | str], ...]
    names: tuple[tuple[str, str], ...]
    options: tuple[tuple[str, Any], ...] = ()  # compile options (launch choices)


_LOCK = threading.Lock()
_MODULES: dict[Variant, Module] = {}
_FUNCTIONS: dict[str, Function] = {}  # every loaded function, by its operator's name


def load(variant: Variant, autograd: Callable[[Module], None] | None = None,
         kind: str = "cpu") -> Module:
    """The compiled module of ``variant`` (compiled and registered on first use, with its
    autograd attached by ``autograd``: each variant is loaded by its ``*_name`` function
    only, which always passes the same one). A GPU ``kind``'s operators get their traced
    stand-ins (``_traced_stand_ins``)."""
    module = _MODULES.get(variant)
    if module is not None:
        return module
    with _LOCK:
        module = _MODULES.get(variant)
        if module is None:
            module = _compile(variant, library=NAMESPACE)
            if kind == "gpu":  # (only CUDA calls decompose under tracing)
                _traced_stand_ins(variant, module)
            if autograd is not None:
                autograd(module)
            _FUNCTIONS.update({name: _plain(f) for name, f in module.functions.items()})
            _MODULES[variant] = module
    return module


_PLAIN_MODULES: dict[Variant, Module] = {}


def load_plain(variant: Variant) -> Module:
    """The compiled module of ``variant`` with no operators registered: for functions
    that eager calls launch themselves only (ones that write into tensors they are
    given, which an operator's schema would have to declare; under torch.compile their
    callers take torch's path)."""
    module = _PLAIN_MODULES.get(variant)
    if module is None:
        with _LOCK:
            module = _PLAIN_MODULES.get(variant)
            if module is None:
                module = _PLAIN_MODULES[variant] = _compile(variant)
    return module


def _compile(variant: Variant, **options: Any) -> Module:
    source = (KERNELS / f"{variant.program}.co").read_text()
    with warnings.catch_warnings():
        # (the kernels' implicit conversions are deliberate: f32 results rounded to the
        # element type at the store)
        warnings.simplefilter("ignore", CompileWarning)
        return compile_source(source, defines=dict(variant.defines + variant.names),
                              filename=f"croqtile/kernels/{variant.program}.co",
                              **{**dict(variant.options), **options})


def _plain(function: ModuleFunction) -> Function:
    """A function of a module compiled here: never autotuned, so a plain ``Function``."""
    assert isinstance(function, Function)
    return function


def _traced_stand_ins(variant: Variant, module: Module) -> None:
    """Under torch.compile, an operator whose kernels take tensor descriptors made on the
    host would stay one opaque call (tracing cannot capture those descriptors): the
    compiled graph would reach the kernels through torch's dispatch and croqtile's launch
    path on every call. It decomposes instead into the same program compiled with
    descriptors made in the kernel, which Inductor launches as it does the model's own
    kernels (and CUDA graphs capture). Eager calls keep the host's descriptors."""
    opaque = [name for name, fn in module.functions.items() if takes_host_descriptors(_plain(fn))]
    if not opaque:
        return
    stand_ins = _compile(variant, descriptors="kernel")
    for name in opaque:
        retrace(NAMESPACE, name, traced_call(stand_ins.functions[name],
                                             _eager_stages(_plain(module.functions[name]))))


def _eager_stages(eager: Function) -> Callable[[Any, int], int]:
    """A stand-in kernel's stage count: what the eager function's kernel of the same name
    settled on (fewer than the codegen's when its pipeline ran out of shared memory,
    which descriptors made in the kernel do not change)."""
    _, host = eager.host()
    scope = host.__globals__

    def stages(kernel: Any, num_stages: int) -> int:
        original = scope.get(getattr(getattr(kernel, "fn", None), "__name__", ""))
        return eager.launcher.stages(original, num_stages) if original is not None \
            else num_stages

    return stages


def loaded_operators() -> list[Any]:
    """Every operator compiled so far (for checks such as ``torch.library.opcheck``)."""
    with _LOCK:
        return [f.op for m in _MODULES.values() for f in m.functions.values()]


def operator(name: str) -> Any:
    """``torch.ops.croqtile.<name>`` (registered by one of the ``*_name`` functions)."""
    return getattr(getattr(torch.ops, NAMESPACE), name)


def function(name: str) -> Function:
    """The compiled function behind operator ``name`` (loaded by a ``*_name`` function)."""
    return _FUNCTIONS[name]


def run(name: str, *args: Any) -> torch.Tensor:
    """``operator(name)(*args)``. An eager call that nothing needs to see as an operator
    calls the compiled function itself: torch's dispatch of a custom operator (its
    autograd wrapper, the redispatch to the device's implementation) costs more host time
    than croqtile's own launch path (on the H200's host: 68 us a call of a decode-size
    linear through the operator, against 22 us for ``F.linear``), and a model in eager
    mode waits for its host. The operator is called when torch.compile traces, when a
    gradient is wanted, under a torch dispatch mode, a functorch transform or forward-mode
    AD, and for tensor subclasses (fake and functional tensors)."""
    result: torch.Tensor  # (every function of croqtile.nn returns a tensor)
    if torch.compiler.is_compiling() or not _direct(args):
        result = operator(name)(*args)
    else:
        result = _FUNCTIONS[name].call(*args)
    return result


class Plans:
    """Warm calls of croqtile.nn's kernels kept by their caller (``croqtile.runtime``'s
    ``Plan``), for the hot path of a function called again and again with the same kind
    of arguments (a model's layers): the caller builds a key of everything its checks and
    its choice of kernel read (``tensor_key`` of each tensor, its options) and, on a hit,
    launches the plan with none of that work. A miss takes the checked path, and its
    warm call then leaves a plan for the next call (``remember``), with whatever else the
    caller needs to call it (``extra``: the arguments of a one-element scalar tensor)."""

    def __init__(self, size: int = 256) -> None:
        self._plans: LRU[tuple[Any, ...], tuple[Plan, Any]] = LRU(size)

    def get(self, key: tuple[Any, ...] | None) -> tuple[Plan, Any] | None:
        """The plan kept under ``key`` and its extra (None for no plan, or no key)."""
        return None if key is None else self._plans.get(key)

    def info(self) -> TableInfo:
        """Hits, misses and entries of the table (``croqtile.runtime.lru``)."""
        return self._plans.info()

    def remember(self, key: tuple[Any, ...] | None, name: str, args: tuple[Any, ...],
                 extra: Any = None) -> None:
        """Keep the plan of operator ``name``'s warm call with ``args`` under ``key``
        (nothing when there is none yet: the first call of a signature)."""
        if key is not None and _direct(args) and not torch.compiler.is_compiling():
            plan = _FUNCTIONS[name].plan(*args)
            if plan is not None:
                self._plans[key] = (plan, extra)


def tensor_key(t: torch.Tensor | None) -> tuple[Any, ...] | None:
    """What a plan's key holds of a tensor argument: its type, shape, dtype, device and
    16-byte alignment; None for a tensor that is not contiguous (no plan is kept then)."""
    if t is None:
        return ()
    if not t.is_contiguous():
        return None
    return (type(t), t.shape, t.dtype, t.device, t.data_ptr() % 16 == 0)


def strided_key(t: torch.Tensor) -> tuple[Any, ...]:
    """``tensor_key`` of a tensor read in place whatever its strides: they are in it."""
    return (type(t), t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0)


def direct(*args: Any) -> bool:
    """Whether an eager call with ``args`` may launch its kernel itself (see ``run``)."""
    return not torch.compiler.is_compiling() and _direct(args)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _direct(args: tuple[Any, ...]) -> bool:
    """Whether a call with ``args`` may skip the operator (see ``run``)."""
    if torch._C._len_torch_dispatch_stack() or _functorch.peek_interpreter_stack() is not None \
            or _forward_ad._current_level >= 0 or torch.jit.is_tracing():
        return False
    grad = torch.is_grad_enabled()
    for arg in args:
        if isinstance(arg, torch.Tensor) and (type(arg) not in _PLAIN
                                              or grad and arg.requires_grad):
            return False
    return True


# one-element tensors of a scalar argument (an attention's scale, an RMS norm's epsilon)
# by (value, dtype, device), kept for eager calls
_SCALARS: LRU[tuple[float, torch.dtype, torch.device], torch.Tensor] = LRU(64)


def scalar_tensor(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.full((1,), value)`` of ``dtype`` on ``device``. An eager call reuses the
    one made before for the same value (the kernels only read it): making it is a
    launch and an allocation per call. Made anew while torch.compile traces (the graph
    makes it) and while a CUDA graph is captured (the graph's memory pool must not hold
    a tensor that later calls keep using)."""
    if torch.compiler.is_compiling() or (device.type == "cuda"
                                         and torch.cuda.is_current_stream_capturing()):
        return torch.full((1,), value, dtype=dtype, device=device)
    key = (value, dtype, device)
    made = _SCALARS.get(key)
    if made is None:
        with torch.inference_mode(False):  # (usable later by calls that record gradients)
            made = _SCALARS[key] = torch.full((1,), value, dtype=dtype, device=device)
    return made


def constant_result(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``*_name`` functions compile a variant on first use and return its operator's
    name. torch.compile runs them when tracing rather than tracing into them (the
    compiler and the lock are not traceable): their result is constant for given
    arguments, and the traced graph calls the operator by that name. The result is
    remembered per arguments, so that an eager call does not rebuild the variant."""
    remembered = functools.cache(fn)

    @functools.wraps(fn)
    def constant(*args: Any) -> Any:
        return remembered(*args)

    wrapped: Callable[..., Any] = torch.compiler.assume_constant_result(constant)
    return wrapped


# ---------------------------------------------------------------- linear


def _gemm_defines(tiles: tuple[int, int, int], element: str) -> tuple[tuple[str, int | str], ...]:
    bm, bn, bk = tiles
    return (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("BM", bm), ("BN", bn), ("BK", bk))


def matmul_ops(element: str, kind: str) -> tuple[Any, Any]:
    """The backward GEMMs ``(nn, tn)``: ``a [M, J] @ b [J, K]`` and ``a[J, M]^T @ b[J, N]``."""
    return operator(matmul_name(element, kind, "nn")), operator(matmul_name(element, kind, "tn"))


@constant_result
def matmul_name(element: str, kind: str, form: str) -> str:
    suffix = f"{element}_{kind}"
    names = (("MATMUL_NN", f"matmul_nn_{suffix}"), ("MATMUL_TN", f"matmul_tn_{suffix}"))
    load(Variant("matmul", _gemm_defines(BACKWARD_GEMM_TILES[kind, element], element), names,
                 LINEAR_OPTIONS[kind]), kind=kind)
    return f"matmul_{form}_{suffix}"


@constant_result
def sm_count(device_index: int) -> int:
    """The number of streaming multiprocessors of CUDA device ``device_index``."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def linear_tiles(rows: int | torch.SymInt, out_features: int, element: str, kind: str,
                 device: torch.device) -> str:
    """The tile shape of a linear of ``rows`` x ``out_features`` outputs: "skinny" for at
    most SKINNY_ROWS rows, "narrow" when its GEMM_TILES grid has fewer tiles than the
    device has SMs, else "wide" (``rows`` may be a symbolic size under
    ``torch.compile``: the comparisons are then guards)."""
    if (kind, element) not in NARROW_GEMM_TILES:
        return "wide"
    # (branches, not bool(): torch.compile evaluates a branch's condition and guards on
    # it, while bool() of a symbolic comparison stays symbolic)
    if rows <= SKINNY_ROWS:
        return "skinny"
    bm, bn, _ = GEMM_TILES[kind, element]
    tiles = ((rows + bm - 1) // bm) * ((out_features + bn - 1) // bn)
    if tiles < sm_count(device.index):
        return "narrow"
    return "wide"


def linear_ops(element: str, activation: str, bias: bool, kind: str,
               tiles: str = "wide", residual: bool = False, row_scale: bool = False) -> Any:
    """The forward operator ``(x [M, K], w [N, K][, bias [N]][, residual [M, N]][, rstd
    [M]]) -> [M, N]`` of a variant, with its autograd (none with ``row_scale``: an
    inference variant) (``tiles``: see ``linear_tiles``)."""
    return operator(linear_name(element, activation, bias, kind, tiles, residual, row_scale))


def linear_grad_op(element: str, activation: str, bias: bool, kind: str,
                   tiles: str = "wide", residual: bool = False) -> Any:
    """The first step of that variant's backward: ``(x, w[, bias], dy) -> dy * act'(x w^T
    + bias)`` (its other functions are ``matmul_ops``; the residual is not an argument)."""
    return operator(linear_name(element, activation, bias, kind, tiles, residual).replace(
        "linear_", "linear_grad_", 1))


_SHAPES: dict[str, tuple[dict[tuple[str, str], tuple[int, int, int]],
                         dict[str, tuple[tuple[str, Any], ...]]]] = {
    "wide": (GEMM_TILES, LINEAR_OPTIONS),
    "narrow": (NARROW_GEMM_TILES, {"gpu": NARROW_LINEAR_OPTIONS}),
    "skinny": (SKINNY_GEMM_TILES, {"gpu": SKINNY_LINEAR_OPTIONS}),
}


@constant_result
def linear_name(element: str, activation: str, bias: bool, kind: str,
                tiles: str = "wide", residual: bool = False, row_scale: bool = False) -> str:
    """The forward operator's name of a linear variant (compiled and registered on first
    use): ``linear_<element>_<activation>[_bias][_residual][_rowscale]_<kind>[_<tiles>]``."""
    activation = activation.upper()  # (one variant, and one registration, per spelling)
    suffix = (f"{element}_{activation.lower()}{'_bias' if bias else ''}"
              f"{'_residual' if residual else ''}{'_rowscale' if row_scale else ''}_{kind}"
              f"{'' if tiles == 'wide' else '_' + tiles}")
    forward, grad = f"linear_{suffix}", f"linear_grad_{suffix}"
    table, options = _SHAPES[tiles]
    variant = Variant("linear", _gemm_defines(table[kind, element], element)
                      + (("ACT", activation), ("BIAS", int(bias)), ("RESIDUAL", int(residual)),
                         ("ROW_SCALE", int(row_scale))),
                      (("LINEAR", forward), ("LINEAR_GRAD", grad)), options[kind])
    operands = 3 if bias else 2  # (x, w[, bias]: what the backward keeps)

    def autograd(module: Module) -> None:
        grad_op = operator(grad)

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs[:operands])

        def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            saved = ctx.saved_tensors
            x, w = saved[0], saved[1]
            dy = dy.contiguous()
            g = dy if activation == "NONE" else grad_op(*saved, dy)
            nn, tn = matmul_ops(element, kind)
            dx = nn(g, w) if ctx.needs_input_grad[0] else None
            dw = tn(g, x) if ctx.needs_input_grad[1] else None
            grads: tuple[torch.Tensor | None, ...] = (dx, dw)
            if bias:
                grads += (g.sum(0) if ctx.needs_input_grad[2] else None,)
            if residual:
                grads += (dy if ctx.needs_input_grad[operands] else None,)
            return grads

        torch.library.register_autograd(f"{NAMESPACE}::{forward}", backward,
                                        setup_context=setup_context)

    load(variant, None if row_scale else autograd, kind)
    return forward


# ---------------------------------------------------------------- gated linear

# Tiles of the gated linear kernel (two accumulators a block: gate and up), by device
# kind and element type; its GPU launch options.
GATED_TILES = {
    **{("cpu", t): (32, 32, 32) for t in ("f16", "bf16", "f32", "f64")},
    ("gpu", "f16"): (128, 128, 64), ("gpu", "bf16"): (128, 128, 64),
    ("gpu", "f32"): (64, 64, 32), ("gpu", "f64"): (32, 32, 16),
}
GATED_OPTIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "cpu": (), "gpu": (("group_m", 16), ("num_warps", 8), ("num_stages", 3))}
# a decode step's few rows (at most SKINNY_ROWS): 16-row tiles, the weights streamed
# through 4 stages (128-row tiles took 100 us a call at Llama-3-8B's widths on an H100)
SKINNY_GATED_TILES = {("gpu", "f16"): (16, 128, 64), ("gpu", "bf16"): (16, 128, 64)}
SKINNY_GATED_OPTIONS = (("num_warps", 4), ("num_stages", 4))
GATED_ACTIVATIONS = {"silu": "SILU", "gelu_tanh": "GELU_TANH", "relu": "RELU"}


def gated_tiles(rows: int | torch.SymInt, element: str, kind: str) -> str:
    """"skinny" for at most SKINNY_ROWS rows where SKINNY_GATED_TILES has tiles, else
    "wide" (``rows`` may be symbolic under ``torch.compile``: the comparison is a guard)."""
    if (kind, element) not in SKINNY_GATED_TILES:
        return "wide"
    if rows <= SKINNY_ROWS:
        return "skinny"
    return "wide"


def gated_op(element: str, activation: str, kind: str, row_scale: bool = False) -> Any:
    """``(x [M, K], wg [N, K], wu [N, K][, rstd [M]]) -> act(x wg^T) * (x wu^T)`` [M, N]
    (each product's rows scaled by rstd first), with its autograd (none with
    ``row_scale``: an inference variant) (``activation`` a key of GATED_ACTIVATIONS)."""
    return operator(gated_name(element, activation, kind, row_scale))


@constant_result
def gated_name(element: str, activation: str, kind: str, row_scale: bool = False,
               tiles: str = "wide") -> str:
    """The forward operator's name of a gated linear variant (compiled and registered on
    first use): ``gated_<element>_<activation>[_rowscale]_<kind>[_skinny]`` (``tiles``:
    "skinny" for at most SKINNY_ROWS rows on the GPU, see ``gated_tiles``)."""
    suffix = f"{element}_{activation}{'_rowscale' if row_scale else ''}_{kind}" \
        f"{'' if tiles == 'wide' else '_' + tiles}"
    forward, grad = f"gated_{suffix}", f"gated_grad_{suffix}"
    table, options = (SKINNY_GATED_TILES, SKINNY_GATED_OPTIONS) if tiles == "skinny" else \
        (GATED_TILES, GATED_OPTIONS[kind])
    variant = Variant("gated_linear", _gemm_defines(table[kind, element], element)
                      + (("ACT", GATED_ACTIVATIONS[activation]), ("ROW_SCALE", int(row_scale))),
                      (("GATED", forward), ("GATED_GRAD", grad)), options)

    def autograd(module: Module) -> None:
        grad_op = operator(grad)

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            x, wg, wu = ctx.saved_tensors
            grads = grad_op(x, wg, wu, dy.contiguous())  # [d gate, d up]
            dg, du = grads[0], grads[1]
            nn, tn = matmul_ops(element, kind)
            dx = nn(dg, wg) + nn(du, wu) if ctx.needs_input_grad[0] else None
            dwg = tn(dg, x) if ctx.needs_input_grad[1] else None
            dwu = tn(du, x) if ctx.needs_input_grad[2] else None
            return dx, dwg, dwu

        torch.library.register_autograd(f"{NAMESPACE}::{forward}", backward,
                                        setup_context=setup_context)

    load(variant, None if row_scale else autograd, kind)
    return forward


# ---------------------------------------------------------------- rms_norm


def rms_norm_op(element: str, weighted: bool, kind: str) -> Any:
    """``(x [R, N][, weight [N]], eps [1]) -> [R, N]``, with autograd."""
    return operator(rms_norm_name(element, weighted, kind))


@constant_result
def rms_norm_name(element: str, weighted: bool, kind: str) -> str:
    rows, cols = RMS_TILES[kind]
    name = f"rms_norm_{element}{'_weight' if weighted else ''}_{kind}"
    defines = (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("WEIGHT", int(weighted)),
               ("ROWS", rows), ("COLS", cols))
    variant = Variant("rms_norm", defines, (("NAME", name),))

    def autograd(module: Module) -> None:
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            x, *weight, eps = ctx.saved_tensors
            rstd_op, dx_op, dw_op = rms_norm_backward_ops(element, weighted, kind)
            dy = dy.contiguous()
            rstd = rstd_op(x, eps)
            dx = dx_op(x, *weight, dy, rstd)
            if not weighted:
                return dx, None
            return dx, dw_op(x, dy, rstd) if ctx.needs_input_grad[1] else None, None

        torch.library.register_autograd(f"{NAMESPACE}::{name}", backward,
                                        setup_context=setup_context)

    load(variant, autograd, kind)
    return name


def rms_norm_backward_ops(element: str, weighted: bool, kind: str) -> tuple[Any, Any, Any]:
    """The backward's operators (rms_norm_backward.co): ``rstd`` (each row's reciprocal
    RMS), ``dx`` and ``dw``."""
    rstd, dx, dw = (operator(name) for _, name in _rms_norm_backward(element, weighted, kind))
    return rstd, dx, dw


@constant_result
def rms_rstd_name(element: str, kind: str) -> str:
    """The name of the operator ``(x [R, N], eps [1]) -> rstd`` (ACC [R]), each row's
    reciprocal RMS: the RMS norm backward's first kernel, also the row scale of an RMS
    norm folded into the GEMM after it (``linear(..., row_scale=)``)."""
    return _rms_norm_backward(element, False, kind)[0][1]


def _rms_norm_backward(element: str, weighted: bool,
                       kind: str) -> tuple[tuple[str, str], ...]:
    """The names of the rms_norm_backward.co variant's functions by macro (loaded)."""
    rows, cols = RMS_TILES[kind]
    suffix = f"{element}{'_weight' if weighted else ''}_{kind}"
    names = (("NAME_RSTD", f"rms_norm_rstd_{suffix}"), ("NAME_DX", f"rms_norm_dx_{suffix}"),
             ("NAME_DW", f"rms_norm_dw_{suffix}"))
    dw_rows, dw_cols = RMS_DW_TILES[kind]
    load(Variant("rms_norm_backward", (("DT", element), ("ACC", ELEMENTS_ACC[element]),
                                       ("WEIGHT", int(weighted)), ("ROWS", rows),
                                       ("COLS", cols), ("DW_ROWS", dw_rows),
                                       ("DW_COLS", dw_cols)), names), kind=kind)
    return names


# ---------------------------------------------------------------- rotary embedding

# positions per block of the rotary kernel, by device kind
ROTARY_ROWS = {"cpu": 16, "gpu": 64}


@constant_result
def rotary_name(element: str, head_dim: int, kind: str) -> str:
    """``(x [B, H, L, D], cos [CB, L, D], sin [CB, L, D]) -> [B, L, H, D]`` (rotary.co),
    with autograd: the gradient of ``x`` is the inverse rotation of the output's (the
    same kernel with ``-sin``); cos and sin get none."""
    name = f"rotary_{element}_d{head_dim}_{kind}"
    defines = (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("HEAD_DIM", head_dim),
               ("HALF", head_dim // 2), ("ROWS", ROTARY_ROWS[kind]))
    variant = Variant("rotary", defines, (("NAME", name),))

    def autograd(module: Module) -> None:
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(inputs[1], inputs[2])

        def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            cos, sin = ctx.saved_tensors
            # (dy is [B, L, H, D] as the output; its rotation back, [B, L, H, D] in
            # memory, is x's gradient viewed as [B, H, L, D])
            dx = operator(name)(dy.transpose(1, 2), cos, -sin).transpose(1, 2)
            return dx, None, None

        torch.library.register_autograd(f"{NAMESPACE}::{name}", backward,
                                        setup_context=setup_context)

    load(variant, autograd, kind)
    return name
