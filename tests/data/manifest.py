"""The corpus: every program ``<name>.co`` of this folder (the seed kernels excepted, see
``tests/reference/test_interpret.py``) with the inputs it runs on and the float64 torch
computation it must match. ``tests/e2e/test_corpus.py`` runs each case through the
reference interpreter and the Triton path.

A case names its program, builds fresh inputs (outputs written in place are poisoned),
computes the reference from those inputs, and gives the element type that picks the
tolerance (``tests/e2e/checks.py``). NaN in a reference marks elements that must stay
unwritten. Shapes are small: the whole corpus runs on the CPU in CI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from croqtile.backends.reference import Semantics

from ..e2e.checks import Case, Inputs, Reference, poison, random

DATA = Path(__file__).resolve().parent

F16, BF16, F32, S8, S32 = torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int32

# Triton masks element accesses past the data; the interpreter reports them unless told
MASK = Semantics(out_of_bounds="mask")


def case(name: str, inputs: Inputs, reference: Reference, dtype: torch.dtype,
         variant: str = "", **kw: Any) -> Case:
    """A case of program ``name.co``; ``variant`` tells several cases of one program apart."""
    return Case(f"{name}-{variant}" if variant else name, (DATA / f"{name}.co").read_text(),
                inputs, reference, dtype, **kw)


def rand(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    return random(shape, dtype)


def ints(low: int, high: int, *shape: int) -> torch.Tensor:
    """Integers in [low, high)."""
    return torch.randint(low, high, shape, dtype=torch.int32)


def out(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    """An output written in place, poisoned."""
    return poison(torch.empty(shape, dtype=dtype))


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.double() @ b.double()


def mm_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b.T: the right operand stored [N, K]."""
    return a.double() @ b.double().T


def masked_rows(full: torch.Tensor, rows: int, cols: int, tile: int = 16) -> torch.Tensor:
    """The first ``rows`` rows and ``cols`` columns of each ``tile``-row tile; NaN
    (unwritten) elsewhere."""
    result = torch.full_like(full, float("nan"))
    for start in range(0, full.shape[0], tile):
        result[start:start + rows, :cols] = full[start:start + rows, :cols]
    return result


def schedule_tables(tiles_m: int, tiles_n: int) -> list[torch.Tensor]:
    """Tile coordinates in a random order (any order covers every tile once)."""
    order = torch.randperm(tiles_m * tiles_n)
    return [(order // tiles_n).to(torch.int32), (order % tiles_n).to(torch.int32)]


def foreach_ranges(a: torch.Tensor) -> torch.Tensor:
    result = torch.zeros(3, 8, dtype=torch.float64)
    result[0, 1:] = (a[1:] - a[:-1]).double()
    result[1, :-1] = a[1:].double() + 1
    result[2, 7] = a[7].double() * 3
    return result


def c_div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """C integer division: truncated toward zero."""
    return torch.div(x, y, rounding_mode="trunc")


def builtins(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = x.double(), y.double()
    return torch.stack([
        x.exp() + y.exp2(), (x.abs() + 1).log(), x.abs().sqrt(), x.sin() + y.cos(),
        torch.maximum(x, y) - torch.minimum(x, y), x * y + 1, x.floor() + y.ceil(),
        x.sigmoid(), (y.abs() + 1).rsqrt(), (x - y).abs()])


def conversions(x: torch.Tensor, n: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The products are rounded to f32 (as the program computes them), then truncated."""
    return torch.stack([(x * 10).trunc(), n * 2, (h.float() * 100).trunc()]).double()


def atomic_ops(x: torch.Tensor) -> torch.Tensor:
    bits_or = bits_xor = 0
    for v in x.tolist():
        bits_or, bits_xor = bits_or | v, bits_xor ^ v
    return torch.tensor([min(1000, x.min().item()), -x.sum().item(), bits_or, bits_xor],
                        dtype=torch.float64)


def compound(a: torch.Tensor) -> torch.Tensor:
    s = c_div((a + 3) * 3, torch.tensor(2))
    s = torch.fmod(s, 7)
    return torch.stack([s, (7 + a) * 2 - 1]).double()


def ternary_logic(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    nonzero = torch.where(y == 0, 1, y)
    return torch.stack([torch.maximum(x, y), (((x > 0) & (y > 0)) | (x == y)).int(),
                        c_div(x, nonzero), torch.fmod(x, nonzero)]).double()


def foreach_step(a: torch.Tensor) -> torch.Tensor:
    result = torch.zeros(2, 10, dtype=torch.float64)
    result[0, 0::3] = a[0::3].double()
    result[1, 2:] = (a[2:] - a[:-2]).double()
    return result


CORPUS = [
    # ---------------- copies: dma.copy, tma.copy and tma.load of rank 1 to 5, tails, zfill
    case("dma_copy_1d", lambda: [rand(F32, 128), out(F32, 128)], lambda a: a[0].double() + 1,
         F32, output=1),
    case("dma_copy_2d", lambda: [rand(S32, 20, 40), out(S32, 20, 40)], lambda a: a[0].double(),
         S32, output=1),
    case("dma_copy_3d", lambda: [rand(S32, 4, 6, 8), out(S32, 4, 6, 8)], lambda a: a[0].double(),
         S32, output=1),
    case("dma_copy_4d", lambda: [rand(F16, 2, 4, 6, 8)], lambda a: a[0].double() * 2, F16),
    case("dma_copy_5d", lambda: [rand(S32, 2, 3, 2, 4, 5)], lambda a: -a[0].double(), S32),
    *[case("scale_add", lambda n=n: [rand(F32, n), rand(F32, n), out(F32, n)],
           lambda a: a[0].double() * 2 + a[1].double(), F32, variant=str(n), output=2,
           semantics=MASK) for n in (64, 200, 1)],
    case("dma_zfill", lambda: [rand(S32, 3, 64), out(S32, 4, 64)],
         lambda a: torch.cat([a[0], torch.zeros((1, 64), dtype=S32)]).double(), S32, output=1),
    case("tma_copy_1d", lambda: [rand(F32, 150), out(F32, 150)], lambda a: a[0].double(), F32,
         output=1, tolerance=0.0),
    *[case("tma_copy_2d", lambda s=s: [rand(F16, *s), out(F16, *s)], lambda a: a[0].double(),
           F16, variant="x".join(map(str, s)), output=1, tolerance=0.0)
      for s in ((64, 128), (50, 100))],
    case("tma_copy_3d", lambda: [rand(F16, 2, 20, 40), out(F16, 2, 20, 40)],
         lambda a: a[0].double(), F16, output=1, tolerance=0.0),
    case("tma_copy_4d", lambda: [rand(S32, 2, 3, 8, 16), out(S32, 2, 3, 8, 16)],
         lambda a: a[0].double(), S32, output=1),
    case("tma_copy_5d", lambda: [rand(F32, 2, 2, 3, 4, 8), out(F32, 2, 2, 3, 4, 8)],
         lambda a: a[0].double(), F32, output=1, tolerance=0.0),
    case("tma_load_1d", lambda: [rand(F32, 100), out(F32, 100)], lambda a: a[0].double() ** 2,
         F32, output=1, semantics=MASK),
    case("tma_load_2d", lambda: [rand(F16, 40, 50), out(F16, 40, 50)], lambda a: a[0].double(),
         F16, output=1, tolerance=0.0),
    case("tma_load_3d", lambda: [rand(F32, 4, 8, 16), out(F32, 8, 16)],
         lambda a: a[0].double().sum(0), F32, output=1),
    case("tma_load_4d", lambda: [rand(S32, 2, 4, 4, 8), out(S32, 2, 4, 4, 8)],
         lambda a: a[0].double(), S32, output=1),
    case("tma_load_5d", lambda: [rand(S32, 2, 2, 2, 4, 8)], lambda a: a[0].double() * 2, S32),

    # ---------------- transpose and pad
    case("dma_transp_2d", lambda: [rand(F32, 6, 10)], lambda a: a[0].double().T, F32,
         tolerance=0.0),
    case("dma_transp_3d", lambda: [rand(F32, 4, 3, 5)], lambda a: a[0].double().permute(0, 2, 1),
         F32, tolerance=0.0),
    case("transp_tiles", lambda: [rand(F32, 16, 32), out(F32, 32, 16)], lambda a: a[0].double().T,
         F32, output=1, tolerance=0.0),
    case("dma_pad_2d", lambda: [rand(S32, 5, 7)],
         lambda a: F.pad(a[0].double(), (2, 3, 1, 2), value=9), S32),
    case("dma_pad_3d", lambda: [rand(F32, 2, 4, 5)],
         lambda a: F.pad(a[0].double(), (0, 1, 2, 1, 1, 0), value=0.5), F32, tolerance=0.0),

    # ---------------- views and buffers
    case("view_from", lambda: [rand(F32, 16, 24)],
         lambda a: torch.stack([a[0][5 * p:5 * p + 4, 2 * p + 1:2 * p + 7] for p in range(3)])
         .double(), F32, tolerance=0.0),
    case("subspan_step_at", lambda: [rand(S32, 16, 18)],
         lambda a: torch.stack([torch.stack([a[0][8 * p:8 * p + 4, 6 * q:6 * q + 6]
                                             for q in range(3)]) for p in range(2)]).double(),
         S32),
    case("chunk_at", lambda: [rand(F32, 8, 16)], lambda a: a[0].double().reshape(2, 4, 4, 4)
         .flip(0, 2).reshape(8, 16), F32, tolerance=0.0),
    case("chunkat_underscore", lambda: [rand(S32, 4, 6, 8), rand(S32, 4, 6, 8)],
         lambda a: a[0].double() - a[1].double(), S32),
    case("ituple_over_span", lambda: [rand(S32, 6, 17)], lambda a: a[0].double(), S32),
    case("local_buffer", lambda: [rand(F32, 4, 32)],
         lambda a: a[0].double().reshape(4, 16, 2).sum(2), F32),

    # ---------------- futures: async, wait, dma.any, swap, rotate, select
    case("rotate_futures", lambda: [rand(S32, 48)],
         lambda a: torch.cat([a[0][16:], a[0][:16]]).reshape(3, 16).double(), S32),
    case("double_buffer_select", lambda: [rand(S32, 4, 8, 16)], lambda a: a[0].double() * 2, S32),

    # ---------------- functions, host code and scalars
    *[case("with_if", lambda k=k: [rand(S32, 16), k],
           lambda a, k=k: a[0].double() * 2 + k if k > 0 else -a[0].double(), S32,
           variant=str(k)) for k in (3, -1)],
    case("auto_bias", lambda: [rand(F16, 5, 32), 0.5], lambda a: a[0].double() + 0.5, F16),
    case("two_launches", lambda: [rand(S32, 64)], lambda a: (a[0].double() + 1) * 3, S32),
    *[case("host_between", lambda n=n: [rand(S32, n), 3], lambda a: a[0].double() * 3 - 5 - len(a[0]),
           S32, variant=str(n), semantics=MASK) for n in (32, 40)],
    case("scalar_return", lambda: [rand(S32, 3, 5)], lambda a: torch.tensor(19.0), S32),
    case("nested_levels", lambda: [rand(S32, 64)],
         lambda a: a[0].double().reshape(2, 4, 8) + 10 * torch.arange(4).reshape(1, 4, 1), S32),
    case("shapes_and_bounds", lambda: [rand(S32, 4, 6)], lambda a: a[0].double() + 2400 + 40 + 6 + 2,
         S32),
    case("by_reference", lambda: [rand(F32, 5, 8), out(F32, 5, 8)], lambda a: a[0].double() * 3, F32,
         output=1),
    case("unqualified_write", lambda: [rand(S32, 4)], lambda a: a[0].double(), S32, output=0),
    case("mixed_precision", lambda: [rand(F16, 8, 8)], lambda a: a[0].double() * 0.5 + 1.0, F16),

    # ---------------- loops and predicates
    case("foreach_ranges", lambda: [rand(S32, 8)], lambda a: foreach_ranges(a[0]), S32),
    case("foreach_step", lambda: [rand(S32, 10)], lambda a: foreach_step(a[0]), S32),
    case("if_per_thread", lambda: [rand(S32, 64)], lambda a: a[0].double().clamp(min=0), S32),
    case("inthreads_first", lambda: [rand(S32, 64)], lambda a: a[0][::16].double(), S32),
    case("mutable_rowsum", lambda: [rand(S32, 16, 8)],
         lambda a: a[0].double().sum(1).clamp(min=0), S32),

    # ---------------- expressions, built-ins, assert and print
    case("math_builtins", lambda: [rand(F32, 32), rand(F32, 32)],
         lambda a: builtins(a[0], a[1]), F32),
    case("conversions", lambda: [rand(F32, 16), rand(S32, 16), rand(F16, 16)],
         lambda a: conversions(*a), S32),
    case("ternary_logic", lambda: [rand(S32, 32), rand(S32, 32)],
         lambda a: ternary_logic(a[0], a[1]), S32),
    case("bit_ops", lambda: [rand(S32, 32), rand(S32, 32)],
         lambda a: torch.stack([a[0] & a[1], a[0] | a[1], a[0] ^ a[1], ~a[0],
                                (a[0] << 3) + (a[1] >> 1)]).double(), S32),
    case("bf16_arith", lambda: [rand(BF16, 4, 32), rand(BF16, 4, 32), 0.75],
         lambda a: 0.75 * a[0].double() + a[1].double(), BF16),
    case("compound_assign", lambda: [rand(S32, 16)], lambda a: compound(a[0]), S32),
    case("row_softmax", lambda: [rand(F32, 6, 32)], lambda a: a[0].double().softmax(1), F32),
    case("assert_holds", lambda: [rand(S32, 48)], lambda a: a[0].double() ** 2, S32),
    case("print_values", lambda: [rand(S32, 8)], lambda a: a[0].double() + 1, S32),

    # ---------------- atomics
    case("atomic_hist", lambda: [ints(0, 100, 64), torch.zeros(16, dtype=S32)],
         lambda a: torch.bincount(a[0] % 16, minlength=16).double(), S32, output=1),
    case("atomic_max", lambda: [ints(0, 100, 64), torch.full((1,), -1, dtype=S32)],
         lambda a: a[0].max().reshape(1).double(), S32, output=1),
    case("atomic_ops", lambda: [ints(0, 100, 64), torch.tensor([1000, 0, 0, 0], dtype=S32)],
         lambda a: atomic_ops(a[0]), S32, output=1),

    # ---------------- MMA: layouts, accumulators, stores, fragments
    case("mma_row_col_groups", lambda: [rand(F16, 128, 256), rand(F16, 256, 256)],
         lambda a: mm(a[0], a[1]), F16),
    case("mma_row_row", lambda: [rand(F16, 40, 50), rand(F16, 24, 50), out(F32, 40, 24)],
         lambda a: mm_nt(a[0], a[1]), F32, tolerance=1e-2, output=2),
    case("mma_col_col", lambda: [rand(F16, 64, 32), rand(F16, 64, 32)],
         lambda a: mm(a[0].T, a[1]), F32, tolerance=1e-2),
    case("mma_col_row", lambda: [rand(F16, 32, 16), rand(F16, 32, 32)],
         lambda a: mm(a[0].T, a[1].T), F32, tolerance=1e-2),
    case("mma_f16_acc", lambda: [rand(F16, 32, 32), rand(F16, 32, 16)],
         lambda a: mm(a[0], a[1]), F16),
    case("mma_f32_acc_f16_out", lambda: [rand(F16, 16, 48), rand(F16, 48, 32)],
         lambda a: mm(a[0], a[1]), F16),
    case("mma_bf16", lambda: [rand(BF16, 40, 32), rand(BF16, 32, 32), out(BF16, 40, 32)],
         lambda a: mm(a[0], a[1]), BF16, output=2),
    case("mma_s8_s32", lambda: [rand(S8, 32, 16), rand(S8, 16, 32)],
         lambda a: mm(a[0], a[1]), S32),
    case("mma_s8_tail", lambda: [rand(S8, 20, 40), rand(S8, 40, 24), out(S32, 20, 24)],
         lambda a: mm(a[0], a[1]), S32, output=2),
    case("mma_small_tiles", lambda: [rand(F16, 16, 8), rand(F16, 8, 16)],
         lambda a: mm(a[0], a[1]), F32, tolerance=1e-2),
    case("mma_tiny", lambda: [rand(F16, 24, 32), rand(F16, 16, 32)],
         lambda a: mm_nt(a[0], a[1]), F32, tolerance=1e-2),
    case("mma_store_mask", lambda: [rand(F16, 20, 16), rand(F16, 16, 16), out(F32, 20, 16)],
         lambda a: masked_rows(mm(a[0], a[1]), 5, 8), F32, tolerance=1e-2, output=2),
    case("mma_store_transp", lambda: [rand(F16, 16, 32), rand(F16, 32, 32)],
         lambda a: mm(a[0], a[1]).T, F32, tolerance=1e-2),
    case("mma_frag_arith",
         lambda: [rand(F16, 32, 16), rand(F16, 16, 16), out(F32, 32, 16), 0.5, 1.25],
         lambda a: mm(a[0], a[1]) * 0.5 + 1.25, F32, tolerance=1e-2, output=2),
    case("mma_async", lambda: [rand(F16, 40, 64), rand(F16, 64, 32), out(F32, 40, 32)],
         lambda a: mm(a[0], a[1]), F32, tolerance=1e-2, output=2),
    case("tma_gemm_warpgroup", lambda: [rand(F16, 100, 72), rand(F16, 40, 72), out(F16, 100, 40)],
         lambda a: mm_nt(a[0], a[1]), F16, output=2),
    case("swizzled_staging", lambda: [rand(F16, 32, 64), rand(F16, 16, 64)],
         lambda a: mm_nt(a[0], a[1]), F32, tolerance=1e-2),

    # ---------------- persistent and pipelined kernels
    case("persistent_gemm", lambda: [rand(F16, 40, 48), rand(F16, 56, 48), out(F16, 40, 56)],
         lambda a: mm_nt(a[0], a[1]), F16, output=2),
    case("persistent_schedule",
         lambda: [rand(F16, 40, 48), rand(F16, 56, 48), out(F16, 40, 56), *schedule_tables(3, 4)],
         lambda a: mm_nt(a[0], a[1]), F16, output=2),
    case("pipelined_gemm", lambda: [rand(F16, 40, 64), rand(F16, 24, 64), out(F16, 40, 24)],
         lambda a: mm_nt(a[0], a[1]), F16, output=2),
    case("double_buffer_groups", lambda: [rand(F16, 64, 32), rand(F16, 32, 32)],
         lambda a: mm(a[0], a[1]), F16),
]
