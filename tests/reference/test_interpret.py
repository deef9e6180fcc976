"""The reference interpreter as the oracle: every seed kernel (``tests/data/*.co``) and
every program of ``tests/e2e/test_constructs.py`` runs through the interpreter and
through the Triton path (Triton's CPU interpreter) on the same fresh random inputs. Both
must match a float64 torch reference, and each other -- integers exactly, floats within
the tolerances of ``tests/e2e/checks.py``."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch

import croqtile
from croqtile.backends.reference import InterpretError, Options, interpret_source

from ..e2e import test_constructs as constructs
from ..e2e.checks import DATA, assert_close, poison, random
from ..e2e.test_seed_kernels import gemm_source

Inputs = Callable[[], list[Any]]
Reference = Callable[[list[Any]], torch.Tensor]


@dataclass(frozen=True)
class Case:
    """One program, how to make its inputs and what it must compute."""

    id: str
    source: str
    inputs: Inputs
    reference: Reference
    dtype: torch.dtype
    output: int | None = None  # index of the argument written in place; None: returned
    tolerance: float | None = None
    defines: dict[str, int] = field(default_factory=dict)
    options: Options = Options()
    function: str | None = None  # which function of a source with several


def run_both(case: Case) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
    """The outputs of the interpreter and of the Triton path, and the inputs."""
    args = case.inputs()
    mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    got = interpret_source(case.source, mine, case.defines, options=case.options,
                           function=case.function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        module = croqtile.compile(case.source, defines=case.defines)
    function = getattr(module, case.function) if case.function else module
    triton = function(*theirs)
    if case.output is not None:
        assert got is None and triton is None
        got, triton = mine[case.output], theirs[case.output]
    return got, triton, args


def check(case: Case) -> None:
    got, triton, args = run_both(case)
    expected = case.reference(args)
    for out, ref in ((got, expected), (triton, expected), (got, triton.double())):
        close(out, ref, case.dtype, case.tolerance)


def close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype,
          tolerance: float | None) -> None:
    """``assert_close``; NaN in the reference marks elements that must stay unwritten
    (still NaN from the poisoning)."""
    unwritten = torch.isnan(ref)
    if not unwritten.any():
        assert_close(out, ref, dtype, tolerance)
        return
    assert torch.equal(torch.isnan(out.double()), unwritten), "written elements differ"
    assert_close(out[~unwritten], ref[~unwritten], dtype, tolerance)


# --------------------------------------------------------------------------- seed kernels


def shrink(text: str, replacements: list[tuple[str, str]]) -> str:
    """The seed with smaller fixed sizes (each pattern must occur: the seed changed
    otherwise and the reduced variant needs a look)."""
    for old, new in replacements:
        assert old in text, f"{old!r} not in the seed any more"
        text = text.replace(old, new)
    return text


SCALAR_MATMUL = (DATA / "seed004_scalar_matmul.co").read_text()
DMA_MATMUL = (DATA / "seed004_dma_matmul.co").read_text()
# the seed004 kernels have fixed shapes (128x256 @ 256x256); instance by instance they
# take seconds, so the cross-check with Triton runs them at a quarter of each size
SMALL_SCALAR_MATMUL = shrink(SCALAR_MATMUL, [
    ("[128, 256]", "[32, 64]"), ("[256, 256]", "[64, 64]"), ("by 16, q by 64", "by 4, q by 16"),
    ("[128 / #p, 256 / #q, 256]", "[32 / #p, 64 / #q, 64]")])
SMALL_DMA_MATMUL = shrink(DMA_MATMUL, [
    ("[128, 256]", "[32, 64]"), ("[256, 256]", "[64, 64]"), ("by [8, 16] : block", "by [4, 4] : block"),
    ("foreach {tile_k} in [16]", "foreach {tile_k} in [8]"),
    ("by [16, 16] : thread", "by [8, 16] : thread"), ("[256 / #tile_k]", "[64 / #tile_k]")])


def _matmul_inputs(m: int, k: int, n: int) -> Inputs:
    return lambda: [random((m, k), torch.int32), random((k, n), torch.int32)]


def _matmul(args: list[Any]) -> torch.Tensor:
    return args[0].double() @ args[1].double()


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
GEMM_TOLERANCE = {"f16": 1e-2, "bf16": 2e-2, "f32": 2e-3}  # f32 operands run as tf32


def _gemm_inputs(shape: tuple[int, int, int], dtype: torch.dtype) -> Inputs:
    m, n, k = shape
    return lambda: [random((m, k), dtype), random((n, k), dtype),
                    poison(torch.empty((m, n), dtype=dtype))]


def _gemm(args: list[Any]) -> torch.Tensor:
    return args[0].double() @ args[1].double().T


def _gemm_case(name: str, elem: str, shape: tuple[int, int, int]) -> Case:
    dtype = DTYPES[elem]
    return Case(f"{name[:-3]}-{elem}-{'x'.join(map(str, shape))}", gemm_source(name, elem),
                _gemm_inputs(shape, dtype), _gemm, dtype, output=2,
                tolerance=GEMM_TOLERANCE[elem])


GEMMS = ["seed000_sm86_gemm.co", "seed000_sm90_gemm.co", "seed000_sm90_gemm_direct.co",
         "seed000_sm90_gemm_2wg.co"]

SEED_CASES = [
    Case("seed002_tiled_add", (DATA / "seed002_tiled_add.co").read_text(),
         lambda: [random((64, 128), torch.int32), random((64, 128), torch.int32)],
         lambda a: a[0].double() + a[1].double(), torch.int32),
    Case("seed004_scalar_matmul-small", SMALL_SCALAR_MATMUL, _matmul_inputs(32, 64, 64), _matmul,
         torch.int32),
    Case("seed004_dma_matmul-small", SMALL_DMA_MATMUL, _matmul_inputs(32, 64, 64), _matmul,
         torch.int32),
    *[_gemm_case(name, elem, shape) for name in GEMMS
      for elem, shape in (("f16", (100, 72, 90)), ("bf16", (128, 256, 128)), ("f32", (100, 72, 90)))],
    Case("seed000_sm86_gemm-multi-warp", (DATA / "seed000_sm86_gemm.co").read_text(),
         _gemm_inputs((70, 90, 48), torch.float16), _gemm, torch.float16, output=2,
         defines={"MATMUL_TILE_M": 32, "MATMUL_TILE_N": 64, "MATMUL_TILE_K": 32}),
]


@pytest.mark.parametrize("case", SEED_CASES, ids=lambda c: c.id)
def test_seed_kernel(case: Case) -> None:
    check(case)


@pytest.mark.slow
@pytest.mark.parametrize("text", [SCALAR_MATMUL, DMA_MATMUL], ids=["scalar", "dma"])
def test_seed004_matmul_full_size(text: str) -> None:
    """The seed004 kernels as written (128x256 @ 256x256), interpreter only."""
    lhs, rhs = random((128, 256), torch.int32), random((256, 256), torch.int32)
    assert_close(interpret_source(text, [lhs, rhs]), lhs.double() @ rhs.double(), torch.int32)


def test_every_seed_kernel_has_a_case() -> None:
    covered = {c.source for c in SEED_CASES} | {SCALAR_MATMUL, DMA_MATMUL}
    for path in sorted(DATA.glob("*.co")):
        names = {c.id.split("-")[0] for c in SEED_CASES}
        assert path.stem in names or path.read_text() in covered, f"no case for {path.name}"


# --------------------------------------------------------------------------- constructs


def _scale_add(n: int) -> Case:
    return Case(f"scale_add-{n}", constructs.SCALE_ADD,
                lambda: [random((n,), torch.float32), random((n,), torch.float32),
                         poison(torch.empty(n))],
                lambda a: a[0].double() * 2 + a[1].double(), torch.float32, output=2,
                options=Options(out_of_bounds="mask"))


def _with_if(k: int) -> Case:
    return Case(f"with_if-{k}", constructs.WITH_IF, lambda: [random((16,), torch.int32), k],
                lambda a: a[0].double() * 2 + k if k > 0 else -a[0].double(), torch.int32)


def _tma_copy(shape: tuple[int, int]) -> Case:
    return Case(f"tma_copy-{shape[0]}x{shape[1]}", constructs.TMA_COPY,
                lambda: [random(shape, torch.float16),
                         poison(torch.empty(shape, dtype=torch.float16))],
                lambda a: a[0].double(), torch.float16, output=1, tolerance=0.0)


CONSTRUCT_CASES = [
    *[_scale_add(n) for n in (64, 200, 1)],
    *[_with_if(k) for k in (3, -1)],
    *[_tma_copy(shape) for shape in ((64, 128), (50, 100))],
    Case("zfill", constructs.ZFILL,
         lambda: [random((3, 64), torch.int32), poison(torch.empty((4, 64), dtype=torch.int32))],
         lambda a: torch.cat([a[0], torch.zeros((1, 64), dtype=torch.int32)]).double(),
         torch.int32, output=1),
    Case("auto_bias", constructs.AUTO_BIAS, lambda: [random((5, 32), torch.float16), 0.5],
         lambda a: a[0].double() + 0.5, torch.float16),
    Case("tuple_copy", constructs.TUPLE_COPY, lambda: [random((6, 17), torch.int32)],
         lambda a: a[0].double(), torch.int32),
    Case("two_launches", constructs.TWO_LAUNCHES, lambda: [random((64,), torch.int32)],
         lambda a: (a[0].double() + 1) * 3, torch.int32),
    Case("mixed", constructs.MIXED, lambda: [random((8, 8), torch.float16)],
         lambda a: a[0].double() * 0.5 + 1.0, torch.float16),
    Case("unqualified_write", constructs.UNQUALIFIED_WRITE, lambda: [random((4,), torch.int32)],
         lambda a: a[0].double(), torch.int32, output=0),
    Case("transp", constructs.TRANSP_PAD, lambda: [random((6, 10), torch.float32)],
         lambda a: a[0].double().T, torch.float32, tolerance=0.0, function="tp"),
    Case("transp3", constructs.TRANSP_PAD, lambda: [random((4, 3, 5), torch.float32)],
         lambda a: a[0].double().permute(0, 2, 1), torch.float32, tolerance=0.0,
         function="tp3"),
    Case("pad", constructs.TRANSP_PAD, lambda: [random((5, 7), torch.int32)],
         lambda a: torch.nn.functional.pad(a[0].double(), (2, 3, 1, 2), value=9), torch.int32,
         function="pad"),
    Case("mma_row_col", constructs.MMA_FORMS,
         lambda: [random((128, 256), torch.float16), random((256, 256), torch.float16)],
         lambda a: a[0].double() @ a[1].double(), torch.float16, function="matmul_group_rc"),
    Case("mma_s8", constructs.MMA_FORMS,
         lambda: [random((32, 16), torch.int8), random((16, 32), torch.int8)],
         lambda a: a[0].double() @ a[1].double(), torch.int32, function="mma_s8"),
    Case("mma_m8n8k4", constructs.MMA_FORMS,
         lambda: [random((16, 8), torch.float16), random((8, 16), torch.float16)],
         lambda a: a[0].double() @ a[1].double(), torch.float32, tolerance=1e-2,
         function="m8n8k4"),
    Case("mma_store_mask", constructs.MMA_FORMS,
         lambda: [random((20, 16), torch.float16), random((16, 16), torch.float16),
                  poison(torch.empty((20, 16)))],
         lambda a: _masked_rows(a[0].double() @ a[1].double()), torch.float32, tolerance=1e-2,
         output=2, function="masked"),
    Case("atomic_hist", constructs.ATOMICS,
         lambda: [torch.randint(0, 100, (64,), dtype=torch.int32),
                  torch.zeros(16, dtype=torch.int32)],
         lambda a: torch.bincount(a[0] % 16, minlength=16).double(), torch.int32, output=1,
         function="hist"),
    Case("atomic_max", constructs.ATOMICS,
         lambda: [torch.randint(0, 100, (64,), dtype=torch.int32),
                  torch.full((1,), -1, dtype=torch.int32)],
         lambda a: a[0].max().reshape(1).double(), torch.int32, output=1, function="largest"),
    Case("if_per_thread", constructs.PREDICATES,
         lambda: [random((64,), torch.int32)],
         lambda a: a[0].double().clamp(min=0), torch.int32, function="clamp"),
    Case("inthreads", constructs.PREDICATES,
         lambda: [random((64,), torch.int32)],
         lambda a: a[0][::16].double(), torch.int32, function="firsts"),
    Case("persistent", constructs.PERSISTENT,
         lambda: [random((40, 48), torch.float16), random((56, 48), torch.float16),
                  poison(torch.empty((40, 56), dtype=torch.float16))],
         lambda a: a[0].double() @ a[1].double().T, torch.float16, output=2,
         function="persistent"),
    Case("scheduled", constructs.PERSISTENT,
         lambda: [random((40, 48), torch.float16), random((56, 48), torch.float16),
                  poison(torch.empty((40, 56), dtype=torch.float16)),
                  torch.arange(12, dtype=torch.int32).flip(0) // 4,
                  torch.arange(12, dtype=torch.int32).flip(0) % 4],
         lambda a: a[0].double() @ a[1].double().T, torch.float16, output=2,
         function="scheduled"),
    Case("pipelined", constructs.PIPELINES,
         lambda: [random((40, 64), torch.float16), random((24, 64), torch.float16),
                  poison(torch.empty((40, 24), dtype=torch.float16))],
         lambda a: a[0].double() @ a[1].double().T, torch.float16, output=2,
         function="pipelined"),
    Case("whole_double_buffer", constructs.PIPELINES,
         lambda: [random((64, 32), torch.float16), random((32, 32), torch.float16)],
         lambda a: a[0].double() @ a[1].double(), torch.float16, function="whole"),
    Case("select_double_buffer", constructs.PIPELINES,
         lambda: [random((4, 8, 16), torch.int32)],
         lambda a: a[0].double() * 2, torch.int32, function="twobufs"),
    Case("mutable_per_thread", constructs.PREDICATES,
         lambda: [random((16, 8), torch.int32)],
         lambda a: a[0].double().sum(1).clamp(min=0), torch.int32, function="rowsum"),
]


def _masked_rows(full: torch.Tensor) -> torch.Tensor:
    """Rows < 5 and columns < 8 of each 16-row tile; NaN (unwritten) elsewhere."""
    out = torch.full_like(full, float("nan"))
    for start in range(0, full.shape[0], 16):
        out[start:start + 5, :8] = full[start:start + 5, :8]
    return out


@pytest.mark.parametrize("case", CONSTRUCT_CASES, ids=lambda c: c.id)
def test_construct(case: Case) -> None:
    check(case)


def test_every_construct_program_has_a_case() -> None:
    """Each ``__co__`` function of each program in test_constructs has a case here."""
    covered = {(c.source, c.function) for c in CONSTRUCT_CASES}
    missing = []
    for name, text in vars(constructs).items():
        if not isinstance(text, str) or "__co__" not in text:
            continue
        functions = re.findall(r"__co__\s+[^(]*?(\w+)\s*\(", text)
        for function in functions:
            key = (text, function if len(functions) > 1 else None)
            if key not in covered:
                missing.append(f"{name}.{function}")
    assert not missing, missing


def test_element_writes_past_the_data_are_errors_by_default() -> None:
    """SCALE_ADD's tail block writes ``out.at(p # t)`` past N: the spec masks copies, not
    element accesses, so the interpreter reports it unless told to mask like Triton."""
    n = 200
    args = [random((n,), torch.float32), random((n,), torch.float32), torch.zeros(n)]
    with pytest.raises(InterpretError, match=r"index 200 is out of bounds .* 'out'"):
        interpret_source(constructs.SCALE_ADD, args)


def test_unqualified_parameter_stays_private_and_seed_sources_are_unchanged() -> None:
    a = random((4,), torch.int32)
    before = a.clone()
    assert interpret_source(constructs.UNQUALIFIED_WRITE, [a]) is None
    assert torch.equal(a, before)
    assert re.search(r"parallel \{qx, qy\} by \[16, 16\] : thread", DMA_MATMUL)
