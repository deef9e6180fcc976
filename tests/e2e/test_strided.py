"""Strided tensors (arch 4.1): every spanned parameter takes transposed views, slices with
offsets, permuted dimensions, stepped views and (read-only) expanded tensors; outputs that
are strided views are written in place, and nothing outside them. Each case runs on fresh
random inputs through the Triton path and the reference interpreter, both against a
float64 torch reference, with every output element poisoned first."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.backends.reference import ArgumentError as ReferenceArgumentError
from croqtile.backends.reference import interpret_source
from croqtile.backends.triton.launcher import Launcher

from .checks import DATA, DEVICES, assert_close
from .test_element_buffers import HOST_SPAN_AS, KERNEL_SPAN_AS
from .test_language_gaps import STRIDED_VIEWS, strided_views_reference

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()
SMALL = {"TILE_M": 64, "TILE_N": 64, "TILE_K": 32}

# ------------------------------------------------------------------------------ layouts
# A layout turns the shape a parameter declares into the shape of the memory it is cut
# from and the view of that memory the kernel gets.

View = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Layout:
    name: str
    storage: Callable[[tuple[int, ...]], tuple[int, ...]]
    view: Callable[[tuple[int, ...]], View]
    readonly: bool = False  # elements share memory: an input only


def _swap_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[:-2] + (shape[-1], shape[-2])


LAYOUTS = {layout.name: layout for layout in [
    Layout("contiguous", lambda s: s, lambda s: lambda t: t),
    # the last two dimensions swapped in memory: W.T of a row-major W
    Layout("transposed", _swap_last, lambda s: lambda t: t.transpose(-1, -2)),
    # a window of a bigger tensor 16 elements wider, 8 in: 16-byte aligned start and rows
    # for 16-bit elements and widths that are multiples of 8 (tensor descriptors apply)
    Layout("slice_aligned", lambda s: s[:-1] + (s[-1] + 16,),
           lambda s: lambda t: t[..., 8:8 + s[-1]]),
    # a window one row down and three elements in: misaligned, pointer loads only (at
    # least 2-D: a window of a 1-D tensor is contiguous)
    Layout("slice_odd", lambda s: (s[0] + 2,) + s[1:-1] + (s[-1] + 5,),
           lambda s: lambda t: t[1:1 + s[0], ..., 3:3 + s[-1]]),
    # every other element of the last dimension (its stride is 2)
    Layout("stepped", lambda s: s[:-1] + (2 * s[-1],), lambda s: lambda t: t[..., ::2]),
    # [B, S, H, D] memory seen as [B, H, S, D] (attention heads)
    Layout("permuted", lambda s: (s[0], s[2], s[1], s[3]),
           lambda s: lambda t: t.permute(0, 2, 1, 3)),
    # one row repeated (stride 0 along the first dimension): readable, not writable
    Layout("expanded", lambda s: (1,) + s[1:], lambda s: lambda t: t.expand(s), readonly=True),
]}


@dataclass
class Placed:
    """A parameter's view and the memory it was cut from."""

    view: torch.Tensor
    storage: torch.Tensor
    inside: torch.Tensor  # True where the view's elements lie in ``storage``


def place(shape: tuple[int, ...], layout: str, dtype: torch.dtype, device: str,
          gen: torch.Generator, output: bool) -> Placed:
    """An input (random memory) or a poisoned output (NaN in the view, a sentinel in the
    memory around it) of ``shape`` laid out as ``layout``."""
    lay = LAYOUTS[layout]
    memory = lay.storage(shape)
    cut = lay.view(shape)
    if output:
        storage = torch.full(memory, 7, dtype=dtype)
    elif dtype.is_floating_point:
        storage = torch.randn(memory, generator=gen).to(dtype)
    else:
        storage = torch.randint(-9, 10, memory, generator=gen, dtype=dtype)
    inside = torch.zeros(memory, dtype=torch.bool)
    if lay.readonly:  # (an expanded view covers its memory, and cannot be filled)
        inside.fill_(True)
    else:
        cut(inside).fill_(True)
    storage = storage.to(device)
    view = cut(storage)
    assert tuple(view.shape) == shape and (layout == "contiguous") == view.is_contiguous()
    if output:
        view.fill_(float("nan") if dtype.is_floating_point else -123456)
    return Placed(view, storage, inside.to(device))


# ------------------------------------------------------------------------------ programs


@dataclass(frozen=True)
class Program:
    """A corpus-style function: the shapes and element type of its tensor parameters (a
    scalar as a Python value), which of them it writes in place, and its float64
    reference (of the arguments: the outputs' poisoned views included)."""

    id: str
    source: str
    params: tuple[tuple[int, ...] | float | int, ...]
    dtype: torch.dtype
    reference: Callable[[list[Any]], torch.Tensor]
    output: int | None  # the parameter written in place; None: a returned tensor
    defines: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    tolerance: float | None = None


def _gemm_reference(a: list[Any]) -> torch.Tensor:
    return a[0].double() @ a[1].double().T


PROGRAMS = {p.id: p for p in [
    Program("gemm", GEMM, ((100, 96), (72, 96), (100, 72)), torch.float16, _gemm_reference,
            2, SMALL),
    Program("gemm_kernel_descriptors", GEMM, ((100, 96), (72, 96), (100, 72)), torch.float16,
            _gemm_reference, 2, SMALL, {"descriptors": "kernel"}),
    Program("scale_add", (DATA / "scale_add.co").read_text(), ((256,), (256,), (256,)),
            torch.float32, lambda a: a[0].double() * 2 + a[1].double(), 2),
    Program("by_reference", (DATA / "by_reference.co").read_text(), ((24, 8), (24, 8)),
            torch.float32, lambda a: a[0].double() * 3, 1),
    Program("returned_4d", (DATA / "dma_copy_4d.co").read_text(), ((2, 4, 6, 8),),
            torch.float16, lambda a: a[0].double() * 2, None),
    Program("returned_with_scalar", (DATA / "auto_bias.co").read_text(), ((40, 32), 0.5),
            torch.float16, lambda a: a[0].double() + 0.5, None),
    Program("tma_load_4d", (DATA / "tma_load_4d.co").read_text(),
            ((2, 4, 4, 8), (2, 4, 4, 8)), torch.int32, lambda a: a[0].double(), 1),
    # span_as of an input and of a written output: they are copied contiguous (and the
    # output copied back)
    Program("host_span_as", HOST_SPAN_AS, ((4, 3, 16), (12, 16), (12, 16)), torch.int32,
            lambda a: (a[0].reshape(12, 16).double() - a[1].double()) * 2, 2),
    Program("kernel_span_as", KERNEL_SPAN_AS, ((8, 8), (64,)), torch.float32,
            lambda a: a[0].double().reshape(64) + a[0].double().reshape(64).flip(0), 1),
    # explicit element strides over a parameter's memory
    Program("strided_views", STRIDED_VIEWS, ((8, 16), (12, 8)), torch.float32,
            strided_views_reference, 1),
]}

# (program, the layout of each tensor parameter in order)
CASES = [
    ("gemm", ("contiguous", "transposed", "contiguous")),  # out = x @ W: rhs = W.T
    ("gemm", ("slice_aligned", "slice_aligned", "slice_aligned")),
    ("gemm", ("slice_odd", "stepped", "transposed")),
    ("gemm", ("transposed", "transposed", "slice_odd")),
    ("gemm", ("expanded", "contiguous", "stepped")),
    ("gemm_kernel_descriptors", ("slice_aligned", "transposed", "slice_aligned")),
    ("scale_add", ("stepped", "stepped", "stepped")),
    ("scale_add", ("contiguous", "expanded", "stepped")),
    ("by_reference", ("transposed", "slice_odd")),
    ("by_reference", ("slice_odd", "transposed")),
    ("returned_4d", ("permuted",)),
    ("returned_4d", ("stepped",)),
    ("returned_with_scalar", ("transposed",)),
    ("returned_with_scalar", ("slice_odd",)),
    ("tma_load_4d", ("permuted", "slice_aligned")),
    ("tma_load_4d", ("contiguous", "permuted")),
    ("tma_load_4d", ("slice_aligned", "stepped")),
    ("host_span_as", ("transposed", "slice_odd", "transposed")),
    ("kernel_span_as", ("transposed", "stepped")),
    ("strided_views", ("transposed", "slice_odd")),
]


def _compile(program: Program) -> croqtile.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        return croqtile.compile(program.source, defines=program.defines, **program.options)


def _arguments(program: Program, layouts: tuple[str, ...], device: str,
               seed: int) -> tuple[list[Any], list[Placed]]:
    gen = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    placed: list[Placed] = []
    tensors = iter(layouts)
    for index, param in enumerate(program.params):
        if not isinstance(param, tuple):
            args.append(param)
            continue
        where = place(param, next(tensors), program.dtype, device, gen,
                      output=index == program.output)
        args.append(where.view)
        placed.append(where)
    return args, placed


def _check_outputs(program: Program, args: list[Any], placed: list[Placed],
                   result: Any, before: list[torch.Tensor]) -> None:
    """The result against the reference; the caller's output view written in place and
    nothing around it; every input unchanged."""
    expected = program.reference([a.cpu() if isinstance(a, torch.Tensor) else a
                                  for a in args])
    got = result if program.output is None else args[program.output]
    assert isinstance(got, torch.Tensor)
    assert_close(got.cpu(), expected, program.dtype, program.tolerance)
    tensor_args = [a for a in args if isinstance(a, torch.Tensor)]
    for where, arg, old in zip(placed, tensor_args, before):
        outside = ~where.inside
        assert torch.equal(where.storage[outside], old[outside]), "memory outside a view changed"
        if arg is not got:
            assert torch.equal(where.storage, old), "an input changed"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program, layouts", CASES, ids=[f"{p}-{'-'.join(ls)}" for p, ls in CASES])
def test_strided_arguments(program: str, layouts: tuple[str, ...], device: str) -> None:
    prog = PROGRAMS[program]
    fn = next(iter(_compile(prog).functions.values()))
    for seed in (1, 2):  # the second call is warm: the same variant, fresh data
        args, placed = _arguments(prog, layouts, device, seed)
        before = [p.storage.clone() for p in placed]
        result = fn(*args)
        _check_outputs(prog, args, placed, result, before)
        # the strided variant ran: its host reads strides or makes contiguous copies
        assert ".stride()" in fn.triton_source or ".contiguous()" in fn.triton_source
    assert fn.warm_calls == 1


@pytest.mark.parametrize("program, layouts", CASES, ids=[f"{p}-{'-'.join(ls)}" for p, ls in CASES])
def test_the_reference_interpreter_takes_strided_arguments(program: str,
                                                           layouts: tuple[str, ...]) -> None:
    prog = PROGRAMS[program]
    args, placed = _arguments(prog, layouts, "cpu", seed=3)
    before = [p.storage.clone() for p in placed]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        result = interpret_source(prog.source, args, prog.defines)
    _check_outputs(prog, args, placed, result, before)


# ------------------------------------------------------------------------------ descriptors


class Descriptors:
    """Records the strides of the tensor descriptors the host makes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.strides: list[tuple[int, ...]] = []
        made = Launcher.descriptor

        def descriptor(launcher: Launcher, tensor, shape, strides, block):  # type: ignore[no-untyped-def]
            self.strides.append(tuple(strides))
            return made(launcher, tensor, shape, strides, block)

        monkeypatch.setattr(Launcher, "descriptor", descriptor)


@pytest.mark.parametrize("device", DEVICES)
def test_descriptors_take_aligned_strides_and_pointer_loads_the_rest(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A window of aligned rows gets a descriptor with its real row stride; a transposed
    view (last stride not 1) and a misaligned window get none: pointer loads read them."""
    made = Descriptors(monkeypatch)
    prog = PROGRAMS["gemm"]
    fn = _compile(prog).gemm
    args, placed = _arguments(prog, ("slice_aligned", "transposed", "slice_odd"), device, 5)
    before = [p.storage.clone() for p in placed]
    fn(*args)
    _check_outputs(prog, args, placed, None, before)
    assert made.strides == [(96 + 16, 1)]  # lhs only, with its window's row stride
    assert "rhs.stride()" in fn.triton_source and "lhs.stride()" in fn.triton_source


# ------------------------------------------------------------------------------ signatures


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("first", ["contiguous", "transposed"])
def test_contiguous_and_strided_calls_of_one_shape_are_not_confused(first: str,
                                                                    device: str) -> None:
    """Calls alternate between contiguous and strided arguments of the same shapes and
    dtypes (both orders): each runs the variant for its layout, warm or not, and a second
    strided layout of the same parameters shares the strided variant."""
    prog = PROGRAMS["gemm"]
    fn = _compile(prog).gemm
    second = "contiguous" if first == "transposed" else "transposed"
    order = [first, second, first, second, "slice_odd"]
    for seed, layout in enumerate(order):
        args, placed = _arguments(prog, (layout, layout, layout), device, 10 + seed)
        before = [p.storage.clone() for p in placed]
        fn(*args)
        _check_outputs(prog, args, placed, None, before)
        strided = layout != "contiguous"
        assert ("lhs.stride()" in fn.triton_source) == strided
    assert fn.warm_calls == 2  # the repeats of the first two layouts
    assert fn.loads == 2  # the contiguous module and one strided variant


def test_the_contiguous_kernel_is_unchanged() -> None:
    """Contiguous arguments run the artifact compiled with the function: no strides."""
    mod = _compile(PROGRAMS["gemm"])
    compiled = mod.gemm.compiled.artifact
    assert compiled is not None and ".stride()" not in compiled.source
    args, _ = _arguments(PROGRAMS["gemm"], ("contiguous",) * 3, "cpu", 0)
    assert mod.gemm.artifact_for(*args) is compiled


def test_a_function_compiled_per_shape_takes_strided_arguments() -> None:
    """The per-shape compile takes the layout too: the strided variant of one shape."""
    from .test_symbolic_extents import WHOLE_TILE

    fn = croqtile.compile(WHOLE_TILE).stage3
    assert fn.specialize_on
    gen = torch.Generator().manual_seed(4)
    for shape in [(3, 5, 7), (3, 5, 7)]:
        x = torch.randn(shape[0], shape[2], shape[1], generator=gen).transpose(1, 2)
        wide = torch.full((shape[0], shape[1], shape[2] + 4), 7.0)
        y = wide[..., 2:2 + shape[2]].fill_(float("nan"))
        fn(x, y)
        assert torch.equal(y, x)
        assert (wide[..., :2] == 7).all() and (wide[..., -2:] == 7).all()
    assert fn.warm_calls == 1 and ".stride()" in fn.triton_source


def test_the_registered_operator_takes_strided_arguments() -> None:
    """Through ``torch.ops`` (``library=``): the strided call writes the caller's view,
    and torch's operator checks pass for strided arguments."""
    prog = PROGRAMS["gemm"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        mod = croqtile.compile(GEMM, defines=SMALL, library="croqtile_strided")
    args, placed = _arguments(prog, ("contiguous", "transposed", "slice_aligned"), "cpu", 6)
    before = [p.storage.clone() for p in placed]
    mod.gemm(*args)
    _check_outputs(prog, args, placed, None, before)
    torch.library.opcheck(mod.gemm.op, tuple(args))


# ------------------------------------------------------------------------------ written views


def test_span_as_of_strided_parameters_copies_them_and_writes_back() -> None:
    """``span_as`` reads a parameter's memory as row-major: a strided input is copied
    contiguous for the kernels, a strided output too, and copied back into the caller's
    view after the launches; the parameter without ``span_as`` keeps its strides."""
    prog = PROGRAMS["host_span_as"]
    fn = _compile(prog).regroup
    args, placed = _arguments(prog, ("transposed", "slice_odd", "transposed"), "cpu", 8)
    before = [p.storage.clone() for p in placed]
    fn(*args)
    _check_outputs(prog, args, placed, None, before)
    source = fn.triton_source
    assert "a = a.contiguous()" in source and "b.stride()" in source
    assert "out = out.contiguous()" in source and "caller_out.copy_(out)" in source
    assert "b = b.contiguous()" not in source and "a.stride()" not in source


def test_unqualified_parameters_written_by_the_kernel_stay_unchanged_when_strided() -> None:
    """A parameter that is neither global nor by reference is copied in (spec 6): the
    kernel's writes never reach the caller's strided view; the compiler warns of it."""
    with pytest.warns(croqtile.CompileWarning, match=r"CQ0230.*'\w+' is written, but it is "
                      "neither 'global' nor passed by reference"):
        mod = croqtile.load(DATA / "unqualified_write.co")
    storage = torch.arange(8, dtype=torch.int32)
    view = storage[::2]
    assert mod.clobber(view) is None
    assert torch.equal(storage, torch.arange(8, dtype=torch.int32))


RETURNS_ITS_PARAMETER = """
__co__ auto bump(s32 [R, 8] a) {
  parallel r by R : block
    parallel c by 8 : thread
      a.at(r, c) = a.at(r, c) + 1;
  return a;
}
"""


def test_a_returned_copy_of_a_strided_parameter_is_contiguous() -> None:
    """A parameter the function writes and returns is copied in: from a strided one the
    copy is contiguous (the shape the operator's fake result has), the caller's unchanged."""
    fn = croqtile.compile(RETURNS_ITS_PARAMETER).bump
    storage = torch.randint(-9, 10, (8, 12), dtype=torch.int32)
    kept = storage.clone()
    a = storage.T  # [12, 8], strides (1, 12)
    out = fn(a)
    assert out.is_contiguous() and torch.equal(out, kept.T + 1)
    assert torch.equal(storage, kept)


@pytest.mark.parametrize("path", ["triton", "reference"])
def test_an_expanded_output_is_an_error_naming_the_parameter(path: str) -> None:
    """An output whose elements share memory (stride 0) cannot be written in place: the
    error names the parameter and the dimension, as torch's in-place operations refuse it."""
    prog = PROGRAMS["scale_add"]
    x, y = torch.randn(256), torch.randn(256)
    row = torch.full((1,), float("nan"))
    out = row.expand(256)
    message = r"parameter 'out' is written in place, but its elements share memory \(stride " \
              r"0 along dimension 0 of size 256"
    if path == "triton":
        with pytest.raises(croqtile.ArgumentError, match=message):
            _compile(prog).scale_add(x, y, out)
    else:
        with pytest.raises(ReferenceArgumentError, match=message):
            interpret_source(prog.source, [x, y, out])
    assert row.isnan().all()
