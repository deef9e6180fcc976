"""Fragment programming for attention-style kernels (spec 5.8 [ext]): ``.sqz`` views,
``frag`` vectors, ``apply`` blocks over accumulator spans, ``copy``, ``reduce_max`` and
``reduce_sum``, an accumulator as the A operand of the next MMA, and a loop whose trip
count is computed when the kernel runs (a causal bound).

Each program runs through the reference interpreter and the Triton path on the CPU
against a float64 torch reference (``check``), and compiles for sm_90 without a GPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import croqtile
from croqtile.backends.reference import interpret_source

from ..backends.sm90 import HAVE_CUDA_BACKEND, assert_compiles_for_sm90
from .checks import Case, assert_close, check, poison, random

# Attention over [heads, rows, 32] tensors, 32-row query tiles, 32-row key tiles. Keys
# past the end of the sequence (the zero-filled tail of the last tile) and, when causal,
# keys after the query row are masked to -inf before the running maximum is taken.
ATTENTION = """
__co__ void attention(f16 [NH, SQ, 32] q, f16 [NH, SK, 32] k, f16 [NH, SK, 32] v,
                      global f16 [NH, SQ, 32] o, bool causal, float scale) {
  parallel {qt, h} by [cdiv(SQ, 32), NH] : block {
    qh = q.subspan(1, SQ, 32).at(h, 0, 0).sqz();
    kh = k.subspan(1, SK, 32).at(h, 0, 0).sqz();
    vh = v.subspan(1, SK, 32).at(h, 0, 0).sqz();
    oh = o.subspan(1, SQ, 32).at(h, 0, 0).sqz();
    qs = dma.copy.zfill qh.subspan(32, 32).at(qt, 0) => shared;
    parallel w by 1 : group {
      frag f32[32] best {-inf};
      frag f32[32] previous;
      frag f32[32] rescale;
      frag f32[32] row_sum;
      frag f32[32] total {0.0f};
      frag f16[32, 32] p;
      out = mma.fill.f32 0.0f;
      last = (qt + 1) * 32 + SK - SQ;
      tiles = causal ? __min(cdiv(last, 32), cdiv(SK, 32)) : cdiv(SK, 32);
      foreach {kt} in [tiles] {
        ks = dma.copy.zfill kh.subspan(32, 32).at(kt, 0) => shared;
        s = mma.fill.f32 0.0f;
        mma.row.row s, qs, ks;
        apply {r, c} in s.span {
          key = kt * 32 + c;
          if (key >= SK || (causal && key > qt * 32 + r + SK - SQ))
            s.at(r, c) = -inf;
        }
        copy(previous, best);
        reduce_max(best, s, 1);
        apply {r} in best.span {
          best.at(r) = __max(best.at(r), previous.at(r));
          rescale.at(r) = __exp2f((previous.at(r) - best.at(r)) * scale);
        }
        apply {r, c} in s.span
          s.at(r, c) = __exp2f((s.at(r, c) - best.at(r)) * scale);
        reduce_sum(row_sum, s, 1);
        apply {r} in total.span
          total.at(r) = total.at(r) * rescale.at(r) + row_sum.at(r);
        apply {r, c} in out.span {
          out.at(r, c) *= rescale.at(r);
          p.at(r, c) = __to<f16>(s.at(r, c));
        }
        vs = dma.copy.zfill vh.subspan(32, 32).at(kt, 0) => shared;
        mma.row.col out, p, vs;
      }
      apply {r, c} in out.span
        out.at(r, c) = out.at(r, c) / total.at(r);
      mma.store out, oh.subspan(32, 32).at(qt, 0);
    }
  }
}
"""

LOG2E = 1.4426950408889634


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                        scale: float) -> torch.Tensor:
    """softmax(q kᵀ · scale / log2 e) v in float64; causal rows see keys up to their
    position, counted from the end of the key sequence."""
    scores = q.double() @ k.double().transpose(1, 2) * (scale / LOG2E)
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        rows = torch.arange(sq)[:, None] + (sk - sq)
        scores = scores.masked_fill(torch.arange(sk)[None, :] > rows, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


def _attention_case(heads: int, sq: int, sk: int, causal: bool) -> Case:
    scale = LOG2E / 32 ** 0.5

    def inputs() -> list[Any]:
        return [random((heads, sq, 32), torch.float16), random((heads, sk, 32), torch.float16),
                random((heads, sk, 32), torch.float16),
                poison(torch.empty((heads, sq, 32), dtype=torch.float16)), causal, scale]

    return Case(f"attention-{heads}x{sq}x{sk}-{'causal' if causal else 'full'}", ATTENTION,
                inputs, lambda x: attention_reference(x[0], x[1], x[2], causal, scale),
                torch.float16, output=3, tolerance=2e-2)


# softmax(A·B) along each row of the accumulator, one 32x32 tile per block
ROW_SOFTMAX = """
__co__ auto row_softmax(f16 [M, K] a, f16 [K, N] b) {
  f32 [M, N] y;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel w by 1 : group {
      frag f32[32] peak;
      frag f32[32] mass;
      acc = mma.fill.f32 0.0f;
      foreach {kb} in [K / 16] {
        ta = dma.copy a.subspan(32, 16).at(bm, kb) => shared;
        tb = dma.copy b.subspan(16, 32).at(kb, bn) => shared;
        mma.row.col acc, ta, tb;
      }
      reduce_max(peak, acc, 1);
      apply {i, j} in acc.span
        acc.at(i, j) = __exp(acc.at(i, j) - peak.at(i));
      reduce_sum(mass, acc, 1);
      apply {i, j} in acc.span
        acc.at(i, j) /= mass.at(i);
      mma.store acc, y.subspan(32, 32).at(bm, bn);
    }
  }
  return y;
}
"""


# the same with two warps per block, 16 rows each: each warp keeps its own row vectors
ROW_SOFTMAX_SPLIT = """
__co__ auto row_softmax(f16 [M, K] a, f16 [K, N] b) {
  f32 [M, N] y;
  parallel {bm, bn} by [M / 32, N / 32] : block {
    parallel w by 2 : group {
      frag f32[16] peak;
      frag f32[16] mass;
      acc = mma.fill.f32 0.0f;
      foreach {kb} in [K / 16] {
        ta = dma.copy a.subspan(32, 16).at(bm, kb) => shared;
        tb = dma.copy b.subspan(16, 32).at(kb, bn) => shared;
        mma.row.col acc, ta.chunkat(w, _), tb;
      }
      reduce_max(peak, acc, 1);
      apply {i, j} in acc.span
        acc.at(i, j) = __exp(acc.at(i, j) - peak.at(i));
      reduce_sum(mass, acc, 1);
      apply {i, j} in acc.span
        acc.at(i, j) /= mass.at(i);
      mma.store acc, y.subspan(16, 32).at(bm # w, bn);
    }
  }
  return y;
}
"""


def _row_softmax_case(m: int, n: int, k: int, source: str = ROW_SOFTMAX,
                      name: str = "row_softmax") -> Case:
    def inputs() -> list[Any]:
        return [random((m, k), torch.float16) * 0.25, random((k, n), torch.float16)]

    def reference(x: list[Any]) -> torch.Tensor:
        product = x[0].double() @ x[1].double()
        return torch.cat([torch.softmax(part, dim=1) for part in product.split(32, dim=1)], 1)

    return Case(f"{name}-{m}x{n}x{k}", source, inputs, reference, torch.float32,
                tolerance=1e-5)


# state <- decay · state + xᵀ y for every 16-row chunk of x and y: the state is stored
# after each chunk and read back element by element by the next one
RECURRENCE = """
__co__ void recurrence(global f16 [T, 32] x, global f16 [T, 32] y, global f32 [32, 32] st,
                       float decay) {
  chunks = T / 16;
  parallel one by 1 : block {
    parallel w by 1 : group {
      foreach {c} in [chunks] {
        xs = dma.copy x.subspan(16, 32).at(c, 0) => shared;
        ys = dma.copy y.subspan(16, 32).at(c, 0) => shared;
        upd = mma.fill.f32 0.0f;
        mma.col.col upd, xs, ys;
        apply {i, j} in upd.span
          upd.at(i, j) += decay * st.at(i, j);
        mma.store upd, st;
      }
    }
  }
}
"""


def recurrence_reference(x: torch.Tensor, y: torch.Tensor, state: torch.Tensor,
                         decay: float) -> torch.Tensor:
    out = state.double()
    for xc, yc in zip(x.double().split(16), y.double().split(16)):
        out = decay * out + xc.T @ yc
    return out


def _recurrence_case(t: int) -> Case:
    def inputs() -> list[Any]:
        return [random((t, 32), torch.float16), random((t, 32), torch.float16),
                random((32, 32), torch.float32), 0.75]

    return Case(f"recurrence-{t}", RECURRENCE, inputs,
                lambda x: recurrence_reference(x[0], x[1], x[2], x[3]), torch.float32,
                output=2, tolerance=1e-5)


CASES = [
    _attention_case(2, 64, 64, causal=False),
    _attention_case(2, 64, 64, causal=True),
    _attention_case(1, 40, 72, causal=False),
    _attention_case(1, 40, 72, causal=True),
    _row_softmax_case(64, 64, 32),
    _row_softmax_case(64, 32, 48, ROW_SOFTMAX_SPLIT, "row_softmax_two_warps"),
    _recurrence_case(48),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_against_torch_and_the_reference_interpreter(case: Case) -> None:
    check(case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_program_on_the_gpu(case: Case) -> None:
    check(case, "cuda")


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("source,name", [(ATTENTION, "attention.co"),
                                         (ROW_SOFTMAX, "row_softmax.co"),
                                         (ROW_SOFTMAX_SPLIT, "row_softmax_two_warps.co"),
                                         (RECURRENCE, "recurrence.co")])
def test_compiles_for_sm90(source: str, name: str) -> None:
    assert_compiles_for_sm90(source, name)


def test_apply_over_global_data_is_a_vectorised_loop() -> None:
    """``apply`` may span any static-shaped data: the indices are broadcast index tensors."""
    source = """
__co__ void shift(global f32 [8, 16] x, global f32 [8, 16] y) {
  parallel p by 1 : block
    apply {i, j} in x.span
      y.at(i, j) = x.at(i, j) + i * 100 + j;
}
"""
    x = random((8, 16), torch.float32)
    ours, theirs = poison(torch.empty(8, 16)), poison(torch.empty(8, 16))
    expected = x.double() + torch.arange(8)[:, None] * 100.0 + torch.arange(16)[None, :]
    interpret_source(source, [x, ours], {})
    croqtile.compile(source)(x, theirs)
    for out in (ours, theirs):
        assert_close(out, expected, torch.float32)


def test_a_row_vector_written_with_a_column_dependent_value_is_reported() -> None:
    """Each row of a ``frag`` vector holds one value; a value that varies along the
    columns cannot be stored there (the diagnostic points at the value)."""
    source = ROW_SOFTMAX.replace("reduce_max(peak, acc, 1);",
                                 "apply {i, j} in acc.span peak.at(i) = acc.at(i, j);")
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(source)
    diagnostic = err.value.diagnostics[0]
    assert diagnostic.code == "CQ0701" and "reduce it first" in str(diagnostic)
    assert diagnostic.location.line == source[:source.index("peak.at(i) =")].count("\n") + 1


@pytest.mark.parametrize("sq,sk", [(64, 64), (40, 72)])
def test_heavy_first_walks_the_query_tiles_backwards(sq: int, sk: int) -> None:
    """``heavy_first``: the first block axis runs from its last index (the longest causal
    rows start first); the blocks are independent, so the result is unchanged."""
    case = _attention_case(2, sq, sk, causal=True)
    module = croqtile.compile(case.source, heavy_first=True)
    assert "_walked" in module.attention.triton_source
    args = case.inputs()
    module.attention(*args)
    assert_close(args[3], case.reference(args), case.dtype, case.tolerance)
