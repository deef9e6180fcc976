"""Attention the way block-level kernels are written (arch 3.2, 3.3): warpgroups that each
own a slice of the query rows become one block-wide computation, a query tile staged once
before the key loop is loaded once, and a causal mask runs only on the blocks the
diagonal crosses. Each program is checked against a float64 reference on the CPU (and on
the GPU, marked), and its generated Triton is checked for those three properties."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import croqtile
from croqtile.backends.reference import interpret_source

from .checks import assert_close, poison, random

# Two warpgroups, each owning WG rows of a 2*WG-row query tile of [B, S, H, D] tensors;
# keys in KB-row blocks; the row maximum and sum are per-row `frag` vectors; P stays in
# registers as the A operand of the PV product. CAUSAL selects the mask.
TWO_WARPGROUPS = """
#define WG 16
#define BM 32
#define KB 32
#define D 32
#define CAUSAL 1

__co__ void attend(global bf16 [B, S, H, D] q, global bf16 [B, S, H, D] k,
                   global bf16 [B, S, H, D] v, global bf16 [B, S, H, D] o, float scale) {
  parallel {qb, h, z} by [cdiv(S, BM), H, B] : block {
    qz = q.subspan(1, S, 1, D).at(z, 0, h, 0).sqz();
    kz = k.subspan(1, S, 1, D).at(z, 0, h, 0).sqz();
    vz = v.subspan(1, S, 1, D).at(z, 0, h, 0).sqz();
    oz = o.subspan(1, S, 1, D).at(z, 0, h, 0).sqz();
    qt = dma.copy qz.subspan(BM, D).at(qb, 0) => shared;
    parallel g by [BM / WG] : group-4 {
      frag f32[WG] top {-inf};
      frag f32[WG] last;
      frag f32[WG] shrink;
      frag f32[WG] part;
      frag f32[WG] total {0.0f};
      frag bf16[WG, KB] p;
      acc = mma.fill.f32 0.0f;
      blocks = CAUSAL ? __min(cdiv((qb + 1) * BM, KB), cdiv(S, KB)) : cdiv(S, KB);
      foreach {kb} in [blocks] {
        s = mma.fill.f32 0.0f;
        kt = dma.copy kz.subspan(KB, D).at(kb, 0) => shared;
        mma.row.row s, qt.chunkat(g, _), kt;
        apply {i, j} in s.span {
          if (kb * KB + j >= S || (CAUSAL && kb * KB + j > qb * BM + g * WG + i))
            s.at(i, j) = -inf;
        }
        copy(last, top);
        reduce_max(top, s, 1);
        apply {i} in top.span {
          top.at(i) = __max(top.at(i), last.at(i));
          shrink.at(i) = __exp2f((last.at(i) - top.at(i)) * scale);
        }
        apply {i, j} in s.span
          s.at(i, j) = __exp2f((s.at(i, j) - top.at(i)) * scale);
        reduce_sum(part, s, 1);
        apply {i} in total.span
          total.at(i) = total.at(i) * shrink.at(i) + part.at(i);
        apply {i, j} in acc.span
          acc.at(i, j) = acc.at(i, j) * shrink.at(i);
        apply {i, j} in p.span
          p.at(i, j) = __to<bf16>(s.at(i, j));
        vt = dma.copy vz.subspan(KB, D).at(kb, 0) => shared;
        mma.row.col acc, p, vt;
      }
      apply {i, j} in acc.span
        acc.at(i, j) = acc.at(i, j) / total.at(i);
      mma.store acc, oz.subspan(WG, D).at(qb # g, 0);
    }
  }
}
"""

LOG2E = 1.4426950408889634


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
              scale: float) -> torch.Tensor:
    """softmax(q kᵀ · scale / log2 e) v over [B, S, H, D] tensors, in float64."""
    q64, k64, v64 = (t.double().transpose(1, 2) for t in (q, k, v))
    scores = q64 @ k64.transpose(-1, -2) * (scale / LOG2E)
    if causal:
        s = q.shape[1]
        scores = scores.masked_fill(torch.arange(s)[None, :] > torch.arange(s)[:, None],
                                    float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v64).transpose(1, 2)


def _run(source: str, causal: bool, shape: tuple[int, int, int], device: str = "cpu",
         **options: Any) -> tuple[croqtile.Module, float]:
    mod = croqtile.compile(source, defines={"CAUSAL": int(causal)}, **options)
    b, s, h = shape
    q, k, v = (random((b, s, h, 32), torch.bfloat16, device) for _ in range(3))
    out = poison(torch.empty((b, s, h, 32), dtype=torch.bfloat16, device=device))
    scale = LOG2E / 32 ** 0.5
    mod.attend(q, k, v, out, scale)
    return mod, assert_close(out, reference(q.cpu(), k.cpu(), v.cpu(), causal, scale),
                             torch.bfloat16)


def _kernel(mod: croqtile.Module) -> str:
    text = mod.attend.triton_source
    return text[text.index("def attend_k0"):text.index("def host_attend")]


SHAPES = [(1, 96, 2), (2, 70, 1)]  # several key blocks, a tail block


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_two_warpgroup_attention(causal: bool, shape: tuple[int, int, int]) -> None:
    _run(TWO_WARPGROUPS, causal, shape)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", SHAPES + [(2, 1000, 3)])
def test_two_warpgroup_attention_gpu(causal: bool, shape: tuple[int, int, int]) -> None:
    _run(TWO_WARPGROUPS, causal, shape, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("descriptors", [True, "kernel", False])
def test_hopper_sized_heads_of_sequence_major_tensors_gpu(descriptors: Any) -> None:
    """128-row query tiles and 128-key blocks of [B, S, H, 128] heads, pipelined: Triton 3.6
    read such heads wrongly (up to 0.015 off) through descriptors whose block had a unit
    dimension between the kept ones (tests/e2e/test_squeezed_descriptors.py). The error
    bound is far below that and above bf16's rounding of P (about 1.4e-3)."""
    defines = {"WG": 64, "BM": 128, "KB": 128, "D": 128, "CAUSAL": 1}
    mod = croqtile.compile(TWO_WARPGROUPS, defines=defines, descriptors=descriptors)
    for b, s, h in ((1, 256, 2), (2, 1024, 4)):
        gen = torch.Generator(device="cuda").manual_seed(s + h)
        q, k, v = (torch.rand((b, s, h, 128), generator=gen, device="cuda").sub(0.5)
                   .to(torch.bfloat16) for _ in range(3))
        out = poison(torch.empty((b, s, h, 128), dtype=torch.bfloat16, device="cuda"))
        scale = LOG2E / 128 ** 0.5
        mod.attend(q, k, v, out, scale)
        want = reference(q.cpu(), k.cpu(), v.cpu(), True, scale)
        assert (out.cpu().double() - want).abs().max().item() < 5e-3, (b, s, h)


def test_the_warpgroups_are_one_block_wide_computation() -> None:
    """No loop over the warpgroups: one 32-row QK dot and one 32-row PV dot per key
    block, the row vectors 32 long."""
    kernel = _kernel(croqtile.compile(TWO_WARPGROUPS))
    assert "for g in range" not in kernel
    assert "ax_rows = tl.arange(0, 32)" in kernel
    loop = kernel[kernel.index("for kb in"):]
    assert loop.count("tl.dot(") == 2
    assert "tl.full([32], float('-inf')" in kernel  # the running maximum of every row


def test_the_query_tile_is_loaded_once_before_the_key_loop() -> None:
    kernel = _kernel(croqtile.compile(TWO_WARPGROUPS))
    before, loop = kernel.split("for kb in", 1)
    assert before.count("tl.load(q_ptr") == 1
    assert "q_ptr" not in loop
    assert loop.count("tl.load(k_ptr") == 1 and loop.count("tl.load(v_ptr") == 1


def test_the_causal_mask_runs_only_where_the_diagonal_may_cross() -> None:
    """The mask's statements sit under a uniform `if` on the block's last key against the
    tile's first query row; off the diagonal they are skipped."""
    kernel = _kernel(croqtile.compile(TWO_WARPGROUPS))
    loop = kernel[kernel.index("for kb in"):]
    guard = next(line.strip() for line in loop.splitlines()
                 if line.strip().startswith("if ") and "kb" in line)
    where = loop.index("tl.where(")
    assert loop.index(guard) < where
    assert "31" in guard  # (the block's last key: kb * 32 + 31)


# Each warpgroup sums the columns of its own rows: a reduction along the rows, which
# would mix the warpgroups if they were one computation; they run in turn instead.
COLUMN_SUMS = """
__co__ void colsums(global f16 [32, 16] a, global f16 [16, 16] b, global f32 [2, 16] sums) {
  parallel one by 1 : block {
    at = dma.copy a => shared;
    parallel g by [2] : group-4 {
      frag f32[16] col;
      c = mma.fill.f32 0.0f;
      mma.row.row c, at.chunkat(g, _), b;
      apply {i, j} in c.span
        c.at(i, j) = c.at(i, j) * 2.0f;
      reduce_sum(col, c, 0);
      apply {j} in col.span
        sums.at(g, j) = col.at(j);
    }
  }
}
"""


def test_warpgroups_whose_code_mixes_their_rows_run_in_turn() -> None:
    mod = croqtile.compile(COLUMN_SUMS)
    g, m, n, k = 2, 32, 16, 16
    a, b = random((m, k), torch.float16), random((n, k), torch.float16)
    sums = poison(torch.empty((g, n)))
    mod.colsums(a, b, sums)
    expected = torch.stack([(2 * a.double() @ b.double().T)[i * 16:(i + 1) * 16].sum(0)
                            for i in range(g)])
    assert_close(sums, expected, torch.float32)
    assert "for g in range(0, 2)" in _kernel_of(mod.colsums)


def _kernel_of(fn: Any) -> str:
    text = fn.triton_source
    return text[text.index("@triton.jit\ndef colsums_k0"):]


# A tile staged before a loop whose trips store into the staged tensor: the copy holds
# what the tensor held before the loop, so every trip multiplies by that (the reference
# interpreter's reading); the tile is loaded once before the loop, as the copy is made.
STAGED_THEN_WRITTEN = """
__co__ void grow(global f32 [16, 16] w, global f32 [16, 16] x) {
  parallel one by 1 : block {
    ws = dma.copy w => shared;
    parallel g by 1 : group {
      foreach {t} in [3] {
        c = mma.fill.f32 0.0f;
        mma.row.row c, ws, x;
        mma.store c, w;
      }
    }
  }
}
"""


def test_a_staged_tile_is_what_the_copy_read_though_the_loop_stores_into_its_tensor() -> None:
    mod = croqtile.compile(STAGED_THEN_WRITTEN, f32_precision="ieee")
    w, x = random((16, 16), torch.float32), random((16, 16), torch.float32)
    ours, theirs = w.clone(), w.clone()
    mod.grow(ours, x)
    interpret_source(STAGED_THEN_WRITTEN, [theirs, x], {})
    assert_close(ours, theirs.double(), torch.float32, 1e-3)  # (the interpreter: tf32)
    assert_close(ours, w.double() @ x.double().T, torch.float32)
    text = mod.grow.triton_source
    before, loop = text.split("for t in", 1)
    assert "tl.load(w_ptr" in before and "w_ptr" in loop  # (loop: the store only)
    assert "tl.load(w_ptr" not in loop and "w_desc.load" not in loop


# A store into the tensor between the copy and the loop: the load stays in the loop
# (it must not read the stored value).
STORED_BEFORE_THE_LOOP = STAGED_THEN_WRITTEN.replace(
    "    parallel g by 1 : group {", "    w.at(0, 0) = 1.0f;\n    parallel g by 1 : group {")


def test_a_staged_tile_is_not_moved_past_a_store_into_its_tensor() -> None:
    text = croqtile.compile(STORED_BEFORE_THE_LOOP, f32_precision="ieee").grow.triton_source
    loop = text.split("for t in", 1)[1]
    assert "tl.load(w_ptr" in loop or "w_desc.load" in loop


# One warpgroup per 32-row query tile, the mask under a runtime flag, [H, S, D] tensors.
FLAGGED = """
__co__ void attend(global f16 [H, S, 32] q, global f16 [H, S, 32] k, global f16 [H, S, 32] v,
                   global f16 [H, S, 32] o, bool causal, float scale) {
  parallel {qb, h} by [cdiv(S, 32), H] : block {
    qh = q.subspan(1, S, 32).at(h, 0, 0).sqz();
    kh = k.subspan(1, S, 32).at(h, 0, 0).sqz();
    vh = v.subspan(1, S, 32).at(h, 0, 0).sqz();
    oh = o.subspan(1, S, 32).at(h, 0, 0).sqz();
    qt = dma.copy.zfill qh.subspan(32, 32).at(qb, 0) => shared;
    parallel g by 1 : group-4 {
      frag f32[32] top {-inf};
      frag f32[32] last;
      frag f32[32] total {0.0f};
      frag f32[32] part;
      frag f16[32, 32] p;
      acc = mma.fill.f32 0.0f;
      blocks = causal ? __min(cdiv((qb + 1) * 32, 32), cdiv(S, 32)) : cdiv(S, 32);
      foreach {kb} in [blocks] {
        s = mma.fill.f32 0.0f;
        kt = dma.copy.zfill kh.subspan(32, 32).at(kb, 0) => shared;
        mma.row.row s, qt, kt;
        apply {i, j} in s.span {
          if (kb * 32 + j >= S)
            s.at(i, j) = -inf;
        }
        if (causal) {
          apply {i, j} in s.span {
            if (kb * 32 + j > qb * 32 + i)
              s.at(i, j) = -inf;
          }
        }
        copy(last, top);
        reduce_max(top, s, 1);
        apply {i} in top.span
          top.at(i) = __max(top.at(i), last.at(i));
        apply {i, j} in s.span
          s.at(i, j) = __exp2f((s.at(i, j) - top.at(i)) * scale);
        reduce_sum(part, s, 1);
        apply {i} in total.span
          total.at(i) = total.at(i) * __exp2f((last.at(i) - top.at(i)) * scale) + part.at(i);
        apply {i, j} in acc.span
          acc.at(i, j) = acc.at(i, j) * __exp2f((last.at(i) - top.at(i)) * scale);
        apply {i, j} in p.span
          p.at(i, j) = __to<f16>(s.at(i, j));
        vt = dma.copy.zfill vh.subspan(32, 32).at(kb, 0) => shared;
        mma.row.col acc, p, vt;
      }
      apply {i, j} in acc.span
        acc.at(i, j) = acc.at(i, j) / total.at(i);
      mma.store acc, oh.subspan(32, 32).at(qb, 0);
    }
  }
}
"""


@pytest.mark.parametrize("causal", [True, False])
def test_a_mask_under_a_runtime_flag_is_one_branch_of_the_key_loop(causal: bool) -> None:
    """``if (causal) { ... if (mask) ... }``: one uniform `if` on both conditions in the
    loop (nested, Triton kept the scores in two layouts and ran 20 % slower)."""
    mod = croqtile.compile(FLAGGED)
    h, s = 2, 80
    q, k, v = (random((h, s, 32), torch.float16) for _ in range(3))
    out = poison(torch.empty((h, s, 32), dtype=torch.float16))
    scale = LOG2E / 32 ** 0.5
    mod.attend(q, k, v, out, causal, scale)
    expected = reference(q[None].transpose(1, 2), k[None].transpose(1, 2),
                         v[None].transpose(1, 2), causal, scale)[0].transpose(0, 1)
    assert_close(out, expected, torch.float16)
    loop = _kernel(mod)[_kernel(mod).index("for kb in"):]
    branches = [line.strip() for line in loop.splitlines() if line.strip().startswith("if ")
                and "ON_CPU" not in line and not line.strip().startswith("if TMA_")]
    flagged = [line for line in branches if "causal" in line]
    assert len(flagged) == 1 and " & " in flagged[0]  # (not `if causal:` around `if mask:`)
    assert len(branches) == 2  # (and the tail block's mask: `kb * 32 + 31 >= S`)


def test_chained_products_launch_a_program_per_tile_and_fill_shared_memory() -> None:
    """Attention (a product of a computed tile) is not persistent by default and its loop
    gets three stages where they fit beside the resident query tile (128-row tiles of
    D = 128: 64 KiB a stage); a GEMM stays persistent."""
    mod = croqtile.compile(TWO_WARPGROUPS, defines={"WG": 64, "BM": 128, "KB": 128, "D": 128})
    text = mod.attend.triton_source
    assert "n_programs" not in text and "num_stages=3" in text
    gemm = croqtile.load(Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co")
    assert "n_programs" in gemm.gemm.triton_source


def test_warp_specialisation_without_a_tile_loop_goes_on_the_key_loop() -> None:
    mod = croqtile.compile(TWO_WARPGROUPS, warp_specialize=True)
    assert "tl.range(0, blocks, warp_specialize=True)" in _kernel(mod).replace("  ", " ")
