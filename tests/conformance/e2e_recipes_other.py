"""Recipes for the upstream ``cpu/end2end`` and ``amdgpu/end2end`` kernels.

The AMD GPU programs do not depend on their target apart from the inline-assembly file and the
cooperative grid barrier, so they are run like the NVIDIA ones. The CPU programs are compiled
upstream for a host C++ target, where an unqualified parameter is passed by pointer and a
kernel's writes to it reach the caller. Under the GPU contract this backend follows, such a
parameter is copied in and the writes are discarded, so the kernels whose only result is such a
write have no observable result here.

Elements that upstream leaves unspecified (never written, or written by racing blocks) are NaN in
a reference: they are not compared.
"""

from __future__ import annotations

from typing import Any

import torch

from .e2e_recipe import Recipe
from .e2e_helpers import excluded, f64, rand_int
from .e2e_recipes_gpu_b import F64, padded, pattern, tile_copy, transposed


def arange(n: int, dtype: str = "s32", scale: int = 1, offset: int = 0) -> torch.Tensor:
    """``scale * i + offset`` for ``i`` in ``[0, n)``."""
    return pattern((n,), dtype, lambda i: i * scale + offset)


def unchecked(expected: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``expected`` with the elements where ``mask`` holds left out of the comparison."""
    return torch.where(mask, torch.full_like(expected, float("nan")), expected)


def fixed(*inputs: torch.Tensor, expect: Any, **options: Any) -> Recipe:
    """A kernel whose host fills its inputs deterministically."""
    return Recipe(args=lambda gen: [t.clone() for t in inputs], reference=expect, **options)


def random_copy(shape: tuple[int, ...], expect: Any = f64) -> Recipe:
    """A copy of an s32 input filled with random values in [-10, 10]."""
    return Recipe(args=lambda gen: [rand_int(gen, shape, -10, 10)], reference=expect)


def counted_copy(shape: tuple[int, ...], scale: int = 1, offset: int = 0) -> Recipe:
    """A copy of the s32 input ``scale * (flat index) + offset``."""
    count = 1
    for n in shape:
        count *= n
    return fixed(arange(count, scale=scale, offset=offset).reshape(shape), expect=f64)


def residue_s32(shape: tuple[int, int]) -> torch.Tensor:
    return pattern(shape, "s32", lambda i, j: (i * 17 + j * 5) % 41 - 20)


def _while_sum(x: torch.Tensor) -> torch.Tensor:
    """Add ``x`` up to 10 times, stopping as soon as the total exceeds 50."""
    out = torch.zeros_like(x, dtype=F64)
    for index, value in enumerate(x.tolist()):
        total = 0
        for _ in range(10):
            total += value
            if total > 50:
                break
        out[index] = total
    return out


def _first_rows(rows: int):  # type: ignore[no-untyped-def]
    """The input, with every row from ``rows`` on unspecified (never written)."""
    def expect(x: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(x.shape, dtype=torch.bool)
        mask[rows:] = True
        return unchecked(f64(x), mask)
    return expect


def _pad_border(x: torch.Tensor) -> torch.Tensor:
    """Two blocks pad their own 32-row chunk into the same [37, 35] output: the -1 border is
    the same in both, the interior depends on which block writes last."""
    out = padded((2, 1), (3, 2), -1)(f64(x[:32]))
    mask = torch.zeros(out.shape, dtype=torch.bool)
    mask[2:34, 1:33] = True
    return unchecked(out, mask)


_X86_ASM = "x86 inline assembly in the kernel (host C++ target only)"
_AMD_ASM = "AMD GCN/RDNA inline assembly"
_CPU_WRITES = ("its only result is a write to an unqualified parameter, which reaches the caller "
               "on the CPU target only; under the GPU contract the write is discarded")

_CPU = "cpu/end2end/"
_AMD = "amdgpu/end2end/"

RECIPES: dict[tuple[str, str], Recipe] = {
    # cpu/end2end
    (_CPU + "add.co", "ele_add"): excluded("OUT", _CPU_WRITES),
    (_CPU + "asm_basic.co", "test_volatile_asm"): excluded("OUT", _X86_ASM),
    (_CPU + "asm_basic.co", "test_basic_asm"): excluded("OUT", _X86_ASM),
    (_CPU + "asm_basic.co", "test_operand_copy"): excluded("OUT", _X86_ASM),
    (_CPU + "asm_basic.co", "test_named_copy"): excluded("OUT", _X86_ASM),
    (_CPU + "device_target.co", "parallel_add"): excluded(
        "OUT", "concurrent host regions (parallel.async : device(cpu)) joined by sync.global"),
    (_CPU + "dma_copy.co", "dma_copy_sync_1d"): counted_copy((128,), 7, 3),
    (_CPU + "dma_copy.co", "dma_copy_async"): counted_copy((128,), 3, 1),
    (_CPU + "dma_copy.co", "dma_copy_2d"): counted_copy((32, 64)),
    (_CPU + "dma_copy.co", "dma_copy_3d"): counted_copy((4, 8, 16)),
    (_CPU + "expr_index_2d.co", "expr_index_test"): excluded(
        "OUT", "element writes in host code (a foreach outside any parallel-by), and "
               + _CPU_WRITES),
    (_CPU + "parallel_add.co", "ele_add_2d"): excluded("OUT", _CPU_WRITES),
    (_CPU + "parallel_add.co", "dma_add"): fixed(
        arange(64, scale=5), arange(64, scale=3, offset=2), expect=lambda a, b: f64(a) + f64(b)),
    # amdgpu/end2end
    (_AMD + "add.co", "ele_add"): fixed(
        arange(384).reshape(6, 64), torch.ones(6, 64, dtype=torch.int32),
        expect=lambda a, b: f64(a) + f64(b)),
    (_AMD + "add.co", "ele_sub"): fixed(
        arange(128, scale=3), arange(128), expect=lambda a, b: f64(a) - f64(b)),
    (_AMD + "arith_builtins.co", "sqrt_test"): fixed(
        pattern((64,), "f32", lambda i: (i + 1) * (i + 1)), expect=lambda a: torch.sqrt(f64(a)),
        atol=0.01, note="the host's |d| <= 0.01 (square roots of perfect squares)"),
    (_AMD + "arith_builtins.co", "yield_test"): fixed(
        pattern((128,), "s32", lambda i: torch.where(i < 64, i, -1)),
        expect=lambda a: torch.where(a < 0, 0, 2 * f64(a))),
    (_AMD + "asm_basic.co", "test_volatile_nop"): excluded("OUT", _AMD_ASM),
    (_AMD + "asm_basic.co", "test_basic_nop"): excluded("OUT", _AMD_ASM),
    (_AMD + "asm_basic.co", "test_operand_copy"): excluded("OUT", _AMD_ASM),
    (_AMD + "asm_basic.co", "test_named_copy"): excluded("OUT", _AMD_ASM),
    (_AMD + "atomic_ops.co", "histogram"): fixed(
        arange(256), expect=lambda a: f64(torch.bincount(a.long() % 16, minlength=16))),
    (_AMD + "atomic_ops.co", "reduce_minmax"): fixed(
        arange(128, scale=7, offset=-50),
        expect=lambda a: torch.stack([f64(a).min(), f64(a).max()])),
    (_AMD + "atomic_ops.co", "atomic_swap"): fixed(arange(64, offset=100), expect=f64),
    (_AMD + "control_blocks.co", "test_foreach"): fixed(arange(64), expect=lambda a: 2 * f64(a)),
    (_AMD + "control_blocks.co", "test_ifelse"): fixed(
        arange(64, scale=10),
        expect=lambda a: f64(a) + torch.where(torch.arange(64) < 32, 1.0, -1.0).to(F64)),
    (_AMD + "control_blocks.co", "test_inthreads"): fixed(
        arange(128, offset=1),
        expect=lambda a: f64(a) * torch.where(torch.arange(128) < 64, 3.0, 1.0).to(F64)),
    (_AMD + "control_blocks.co", "test_while"): fixed(arange(64, offset=1), expect=_while_sum),
    (_AMD + "control_blocks.co", "test_unroll"): fixed(
        torch.ones(64, dtype=torch.int32), expect=lambda a: f64(a).sum().expand(64)),
    (_AMD + "cooperative_grid_sync.co", "coop_grid_sync"): excluded(
        "ESC", "grid-wide barrier under a cooperative launch; Triton programs cannot wait for "
               "each other"),
    (_AMD + "dma_copy.co", "dma_copy_sync"): random_copy((6, 17, 64)),
    (_AMD + "dma_copy.co", "dma_copy_future"): random_copy((6, 17, 64)),
    (_AMD + "dma_copy.co", "dma_copy_2d"): counted_copy((32, 64)),
    (_AMD + "dma_copy.co", "dma_copy_1d"): counted_copy((128,), 7, 3),
    (_AMD + "dma_pad.co", "pad_s2g"): tile_copy((32, 64), "s32", padded((2, 4), (2, 4), 99)),
    (_AMD + "dma_pad.co", "pad_g2s"): tile_copy((32, 64), "s32", padded((2, 4), (2, 4), 99)),
    (_AMD + "dma_tiled.co", "tiled_copy_chunkat"): random_copy((128, 64)),
    (_AMD + "dma_tiled.co", "tiled_copy_subspan"): random_copy((32, 64), _first_rows(16)),
    (_AMD + "dma_tiled.co", "tiled_copy_subspan_at"): random_copy((64, 64)),
    (_AMD + "dma_tiled.co", "tiled_copy_view_from"): random_copy((64, 32)),
    (_AMD + "dma_tiled.co", "tiled_copy_mixed"): random_copy((64, 32)),
    (_AMD + "dma_tiled.co", "tiled_pad_chunkat"): random_copy((64, 32), _pad_border),
    (_AMD + "dma_tiled.co", "tiled_transp_chunkat"): fixed(
        pattern((16, 16), "s32", lambda i, j: i * 100 + j), expect=lambda a: f64(a).T),
    (_AMD + "dma_transpose.co", "transp_2d"): tile_copy((64, 128), "s32", transposed),
    (_AMD + "event.co", "event_cross_wf"): fixed(arange(256), expect=lambda a: f64(a) + 10),
    (_AMD + "group_parallel.co", "group_add"): fixed(
        arange(128), torch.ones(128, dtype=torch.int32), expect=lambda a, b: f64(a) + f64(b)),
    (_AMD + "identity.co", "identity"): counted_copy((128,), 3),
    (_AMD + "nil.co", "nil"): Recipe(args=lambda gen: [], reference=lambda: {},
                                     note="an empty kernel: it must compile and run"),
    (_AMD + "span_as.co", "ele_add_span_as"): fixed(
        arange(384).reshape(2, 3, 64), arange(384, scale=-1, offset=384).reshape(2, 3, 64),
        expect=lambda a, b: (f64(a) + f64(b)).reshape(6, 64)),
    (_AMD + "span_as.co", "span_as_flatten"): fixed(
        arange(32, offset=5).reshape(4, 8), expect=lambda a: 2 * f64(a).reshape(32)),
    (_AMD + "sync_local.co", "sync_local_test"): fixed(
        arange(64, scale=10), expect=lambda a: f64(a) + 1),
}
