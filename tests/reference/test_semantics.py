"""The reference interpreter construct by construct (spec 5): each program against a
torch computation of what the spec says, and against the Triton path where it lowers the
construct. The oracle's own choices are tested too: undefined elements, bounds, races,
lanes against one instance at a time."""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest
import torch

import croqtile
from croqtile.backends.reference import (ArgumentError, AssertionFailed, InterpretError,
                                         Semantics, check_text, interpret_source)

from ..e2e.checks import DATA, assert_close, poison, random
from ..e2e.test_seed_kernels import gemm_source

SERIAL = Semantics(vectorize=False)


def both_modes(text: str, args: list[Any], **kw: Any) -> Any:
    """The result with lanes and one instance at a time; they must agree."""
    first = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    fast = interpret_source(text, first, **kw)
    slow = interpret_source(text, args, semantics=SERIAL, **kw)
    if isinstance(fast, torch.Tensor):
        assert torch.equal(fast, slow) or torch.allclose(fast, slow, equal_nan=True)
    for a, b in zip(first, args):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b) or torch.allclose(a, b, equal_nan=True)
    return fast


def triton(text: str, args: list[Any], function: str | None = None) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", croqtile.CompileWarning)
        module = croqtile.compile(text)
    return (getattr(module, function) if function else module)(*args)


# --------------------------------------------------------------------------- views (5.4)

VIEWS = """
__co__ s32 [8, 12] step(s32 [16, 24] a) {
  s32 [8, 12] out;
  parallel p by 1 {
    t = dma.copy a.subspan(8, 12).step(4, 6).at(1, 2) => shared;
    foreach {i, j} in [8, 12]
      out.at(i, j) = t.data.at(i, j);
  }
  return out;
}
__co__ s32 [4, 6] from(s32 [16, 24] a) {
  s32 [4, 6] out;
  parallel p by 1 {
    t = dma.copy a.view(4, 6).from(3, 5) => shared;
    foreach {i, j} in [4, 6]
      out.at(i, j) = t.data.at(i, j);
  }
  return out;
}
"""


@pytest.mark.parametrize("function, expected", [
    ("step", lambda a: a[4:12, 12:24]),   # tile (1, 2) starts at (1*4, 2*6)
    ("from", lambda a: a[3:7, 5:11]),     # element offsets
])
def test_subspan_step_and_view_from(function: str, expected: Any) -> None:
    a = random((16, 24), torch.int32)
    want = expected(a)
    assert torch.equal(interpret_source(VIEWS, [a], function=function), want)
    assert torch.equal(triton(VIEWS, [a], function), want)


SPAN_AS_AND_CHAINS = """
__co__ s32 [4, 96] reshape(s32 [16, 24] a) {
  s32 [4, 96] out;
  parallel p by 1 {
    t = dma.copy a.span_as([4, 96]) => shared;
    foreach {i, j} in [4, 96]
      out.at(i, j) = t.data.at(i, j);
  }
  return out;
}
__co__ s32 [8, 6] chain(s32 [16, 24] a) {
  s32 [8, 6] out;
  parallel {p, q} by [2, 2] : block {
    t = dma.copy a.subspan(8, 12).at(p, q).chunkat(_, q).chunkat(p # q, _) => shared;
    foreach {i, j} in [2, 6]
      out.at(p # q # i, j) = t.data.at(i, j);
  }
  return out;
}
__co__ s32 [6, 12] strided(s32 [16, 24] a) {
  s32 [6, 12] out;
  parallel p by 1 {
    t = dma.copy a.view(6, 12 : 48, 2).from(1, 3) => shared;
    foreach {i, j} in [6, 12]
      out.at(i, j) = t.data.at(i, j);
  }
  return out;
}
"""


def test_span_as_chains_and_explicit_strides() -> None:
    a = random((16, 24), torch.int32)
    reshape = interpret_source(SPAN_AS_AND_CHAINS, [a], function="reshape")
    assert torch.equal(reshape, a.reshape(4, 96))
    chain = interpret_source(SPAN_AS_AND_CHAINS, [a], function="chain")
    expected = torch.empty(8, 6, dtype=torch.int32)
    for p in range(2):
        for q in range(2):
            block = a[8 * p:8 * p + 8, 12 * q:12 * q + 12][:, 6 * q:6 * q + 6]
            row = (p * 2 + q) * 2
            expected[row:row + 2] = block[row:row + 2]
    assert torch.equal(chain, expected)
    # view(E : T).from(o): strides into the buffer, base o . T = 1*48 + 3*2
    flat = a.reshape(-1)
    want = torch.stack([flat[54 + 48 * i: 54 + 48 * i + 24: 2] for i in range(6)])
    assert torch.equal(interpret_source(SPAN_AS_AND_CHAINS, [a], function="strided"), want)


# --------------------------------------------------------------------------- loops (5.1, 5.3)

RANGES = """
__co__ s32 [10] ranges(s32 [10] a) {
  s32 [10] out{0};
  parallel p by 1 {
    with y in 10 {
      foreach y(1:-1)
        out.at(y) = a.at(y) + 1;
      foreach c = y(:1:3)
        out.at(c) = 100;
    }
  }
  return out;
}
"""


def _ranges_expected(a: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(10, dtype=torch.int32)
    out[1:9] = a[1:9] + 1           # y from 1 while y < 10 - 1
    out[0:10:3] = 100                # c from 0 while c < 10 + 1, step 3 (spec 12.4)
    return out


def test_foreach_ranges_offset_the_bound_and_honour_the_step() -> None:
    a = random((10,), torch.int32)
    assert torch.equal(both_modes(RANGES, [a]), _ranges_expected(a))


def test_foreach_step_in_the_triton_path() -> None:
    a = random((10,), torch.int32)
    assert torch.equal(triton(RANGES, [a]), _ranges_expected(a))


CONTROL = """
__co__ s32 [8] control(s32 [8] a) {
  s32 [8] out;
  parallel t by 8 {
    mutable int s = 0;
    mutable int i = 0;
    while (i < 20) {
      i = i + 1;
      if (i > t + 5) break;
      if (i % 2 == 0) continue;
      s += i;
    }
    out.at(t) = s * 10 + (a.at(t) > 0 ? 1 : 0) + ((t & 1) == 1 && t > 2 ? 1000 : 0);
  }
  return out;
}
"""


def test_while_break_continue_ternary_and_logic() -> None:
    a = random((8,), torch.int32)
    expected = []
    for t in range(8):
        s = i = 0
        while i < 20:
            i += 1
            if i > t + 5:
                break
            if i % 2 == 0:
                continue
            s += i
        expected.append(s * 10 + int(a[t] > 0) + (1000 if t & 1 and t > 2 else 0))
    assert interpret_source(CONTROL, [a]).tolist() == expected


BRANCHES = """
__co__ s32 [32] branches(s32 [32] a, int n) {
  s32 [32] out{-1};
  parallel p by 2 : block {
    parallel t by 16 : thread {
      int i = p # t;
      if (i < n && a.at(i) > 0)
        out.at(i) = a.at(i);
      else if (i < n)
        out.at(i) = 0 - a.at(i);
      inthreads (t < 3)
        out.at(i) = out.at(i) + 1000;
    }
  }
  return out;
}
"""


def test_divergent_if_and_inthreads_in_both_modes() -> None:
    a = random((32,), torch.int32)
    got = both_modes(BRANCHES, [a, 20])
    expected = torch.full((32,), -1, dtype=torch.int32)
    expected[:20] = a[:20].abs()
    expected[[0, 1, 2, 16, 17, 18]] += 1000
    assert torch.equal(got, expected)


# --------------------------------------------------------------------------- arithmetic (3.6)

ARITH = """
__co__ s32 [8] cdivision(s32 [8] a, s32 [8] b) {
  s32 [8] out;
  parallel t by 8
    out.at(t) = a.at(t) / b.at(t) * 1000 + a.at(t) % b.at(t) + (a.at(t) << 2) - (a.at(t) >> 1);
  return out;
}
__co__ f16 [64] compound(f16 [64] a) {
  f16 [64] out{1.0f};
  parallel t by 64
    out.at(t) += a.at(t) * 0.1f;
  return out;
}
__co__ s8 [8] narrow(s32 [8] a, f32 [8] f) {
  s8 [8] out;
  parallel t by 8
    out.at(t) = __to<s8>(a.at(t)) + __to<s8>(f.at(t));
  return out;
}
"""


def test_c_integer_division_and_shifts() -> None:
    a = torch.tensor([-7, 7, -7, 7, 0, 13, -13, 100], dtype=torch.int32)
    b = torch.tensor([2, -2, -2, 2, 3, 5, 5, -7], dtype=torch.int32)
    expected = (torch.div(a, b, rounding_mode="trunc") * 1000 + torch.fmod(a, b) + (a << 2)
                - (a >> 1))
    assert torch.equal(both_modes(ARITH, [a, b], function="cdivision"), expected)
    assert torch.equal(triton(ARITH, [a, b], "cdivision"), expected)


REMAINDER = """
__co__ s32 [8] ints(s32 [8] a) {
  s32 [8] out;
  parallel t by 8
    out.at(t) = 7 % a.at(t);
  return out;
}
__co__ f32 [8] floats(f32 [8] a) {
  f32 [8] out;
  parallel t by 8
    out.at(t) = -7.5f % a.at(t);
  return out;
}
"""


def test_remainder_of_a_constant_by_an_element() -> None:
    """``7 % x``: a number on the left of ``%`` truncates like C's ``%`` / ``fmod`` too."""
    a = torch.tensor([2, -2, 3, 4, 5, 6, 7, 9], dtype=torch.int32)
    expected = torch.fmod(torch.full((8,), 7, dtype=torch.int32), a)
    assert torch.equal(both_modes(REMAINDER, [a], function="ints"), expected)
    f = a.float()
    expected = torch.fmod(torch.full((8,), -7.5), f)
    assert torch.equal(both_modes(REMAINDER, [f], function="floats"), expected)


def test_compound_assignment_computes_in_the_promoted_type() -> None:
    """``out.at(t) += a * 0.1f`` with f16 ``out``: f16 + f32 -> f32, one rounding to f16
    at the store (spec 3.6)."""
    a = random((64,), torch.float16)
    expected = (1.0 + a.float() * torch.tensor(0.1, dtype=torch.float32)).half()
    assert torch.equal(interpret_source(ARITH, [a], function="compound"), expected)


def test_compound_assignment_in_the_triton_path() -> None:
    a = random((256,), torch.float16)
    text = ARITH.replace("f16 [64]", "f16 [256]").replace("by 64", "by 256")
    assert torch.equal(triton(text, [a], "compound"),
                       interpret_source(text, [a], function="compound"))


def test_conversions_truncate_and_wrap() -> None:
    a = torch.tensor([300, -300, 127, 128, 0, 5, -1, 1000], dtype=torch.int32)
    f = torch.tensor([1.9, -1.9, 0.5, 100.7, -0.2, 3.0, 2.5, -7.5])
    expected = (a.to(torch.int8) + f.to(torch.int8)).to(torch.int8)
    assert torch.equal(interpret_source(ARITH, [a, f], function="narrow"), expected)


BF16 = """
__co__ bf16 [64] square(bf16 [64] a) {
  bf16 [64] out;
  parallel t by 64
    out.at(t) = a.at(t) * a.at(t) - a.at(t) / 3;
  return out;
}
"""


def test_bf16_arithmetic() -> None:
    a = random((64,), torch.bfloat16)
    assert torch.equal(interpret_source(BF16, [a]), a * a - a / 3)


def test_bf16_arithmetic_in_the_triton_cpu_path() -> None:
    a = random((64,), torch.bfloat16)
    assert_close(triton(BF16, [a]), (a * a - a / 3).double(), torch.bfloat16)


# --------------------------------------------------------------------------- futures (5.6)

PIPELINE = """
__co__ s32 [64] pipeline(s32 [64] a) {
  s32 [64] out;
  parallel p by 1 : block {
    shared s32 [16] b0, b1;
    cur = dma.copy.async a.subspan(16).at(0) => b0;
    nxt = dma.any;
    with k in [4] {
      foreach k(1:) {
        nxt = dma.copy.async a.subspan(16).at(k) => select(k % 2, b0, b1);
        wait cur;
        parallel t by 16 : thread
          out.at((k - 1) # t) = cur.data.at(t) * 2;
        swap(cur, nxt);
      }
    }
    wait cur;
    parallel t by 16 : thread
      out.at(48 + t) = cur.data.at(t) * 2;
  }
  return out;
}
"""


def test_double_buffering_with_dma_any_async_select_wait_and_swap() -> None:
    a = random((64,), torch.int32)
    assert torch.equal(both_modes(PIPELINE, [a]), a * 2)


FUTURES = """
__co__ s32 [32] selected(s32 [32] a) {
  s32 [32] out;
  parallel p by 1 : block {
    shared s32 [16] b0, b1;
    f0 = dma.copy a.subspan(16).at(0) => b0;
    f1 = dma.copy a.subspan(16).at(1) => b1;
    foreach k in [2] {
      x = select(k, f0, f1);
      parallel t by 16 : thread
        out.at(k # t) = x.data.at(t) + k;
    }
  }
  return out;
}
__co__ s32 [48] rotated(s32 [48] a) {
  s32 [48] out;
  parallel p by 1 : block {
    f0 = dma.copy a.subspan(16).at(0) => shared;
    f1 = dma.copy a.subspan(16).at(1) => shared;
    f2 = dma.copy a.subspan(16).at(2) => shared;
    rotate(f0, f1, f2);
    parallel t by 16 : thread {
      out.at(t) = f0.data.at(t);
      out.at(16 + t) = f1.data.at(t);
      out.at(32 + t) = f2.data.at(t);
    }
  }
  return out;
}
"""


def test_select_is_zero_based_and_rotate_moves_names_left() -> None:
    a = random((32,), torch.int32)
    expected = a.clone()
    expected[16:] += 1
    assert torch.equal(both_modes(FUTURES, [a], function="selected"), expected)
    b = random((48,), torch.int32)
    rotated = both_modes(FUTURES, [b], function="rotated")  # f0 <- f1 <- f2 <- f0
    assert torch.equal(rotated, torch.cat([b[16:32], b[32:], b[:16]]))


# --------------------------------------------------------------------------- tails (5.6)

TAIL = """
__co__ void tail(global s32 [N] a, global s32 [N] out) {
  parallel p by cdiv(N, 16) : block {
    shared s32 [16] buf{5};
    dma.copy a.subspan(16).at(p) => buf;
    parallel t by 16 : thread
      out.at(p # t) = buf.at(t) + 1;
  }
}
"""


@pytest.mark.parametrize("undefined, fill", [("zero", 0), ("keep", 5), ("poison", -123456789)])
def test_elements_a_tail_copy_does_not_write(undefined: str, fill: int) -> None:
    """Spec 5.6: past the source nothing is copied; what the buffer then holds is the
    ``undefined`` option's choice (zero like Triton, unchanged, or poison)."""
    n = 20
    a = random((n,), torch.int32)
    out = torch.zeros(32, dtype=torch.int32)
    interpret_source(TAIL.replace("global s32 [N] out", "global s32 [M] out"),
                     [a, out], semantics=Semantics(undefined=undefined))
    assert torch.equal(out[:n], a + 1)
    assert (out[n:] == fill + 1).all()


def test_zfill_zeroes_even_when_poisoning() -> None:
    a = random((20,), torch.int32)
    out = torch.zeros(32, dtype=torch.int32)
    text = TAIL.replace("global s32 [N] out", "global s32 [M] out").replace(
        "dma.copy a", "dma.copy.zfill a")
    interpret_source(text, [a, out], semantics=Semantics(undefined="poison"))
    assert (out[20:] == 1).all()


def test_seed_gemm_tails_rely_on_zero_filled_copies() -> None:
    """seed000_sm90's K tail copies without .zfill into a reused shared buffer: per spec
    5.6 the tile's tail is undefined; poisoning it shows the result depends on it."""
    lhs, rhs = random((64, 72), torch.float16), random((64, 72), torch.float16)
    out = poison(torch.empty((64, 64), dtype=torch.float16))
    text = gemm_source("seed000_sm90_gemm.co", "f16")
    interpret_source(text, [lhs, rhs, out], semantics=Semantics(undefined="poison"))
    assert torch.isnan(out).all()
    interpret_source(text, [lhs, rhs, out])
    assert_close(out, lhs.double() @ rhs.double().T, torch.float16)


def test_seed004_relies_on_zeroed_outputs() -> None:
    """``s32 [..] output;`` has undefined contents (spec 6) and the seed accumulates into
    it with ``+=``; the Triton path and the default here allocate zeros."""
    text = (DATA / "seed004_scalar_matmul.co").read_text()
    text = text.replace("[128, 256]", "[16, 32]").replace("[256, 256]", "[32, 32]").replace(
        "by 16, q by 64", "by 2, q by 4").replace("[128 / #p, 256 / #q, 256]",
                                                  "[16 / #p, 32 / #q, 32]")
    lhs, rhs = random((16, 32), torch.int32), random((32, 32), torch.int32)
    poisoned = interpret_source(text, [lhs, rhs], semantics=Semantics(undefined="poison"))
    assert not torch.equal(poisoned, lhs @ rhs)
    assert torch.equal(interpret_source(text, [lhs, rhs]), lhs @ rhs)


# --------------------------------------------------------------------------- instances (5.2)

def test_instances_writing_one_element_are_a_race() -> None:
    text = """
__co__ s32 [1] race(s32 [1] a) {
  s32 [1] out;
  parallel t by 8
    out.at(0) = t;
  return out;
}"""
    with pytest.raises(InterpretError, match="data race"):
        interpret_source(text, [torch.zeros(1, dtype=torch.int32)])
    same = text.replace("out.at(0) = t;", "out.at(0) = 7;")  # all write the same value
    assert interpret_source(same, [torch.zeros(1, dtype=torch.int32)]).item() == 7


SYNC = """
__co__ s32 [64] reverse(s32 [64] a) {
  s32 [64] out;
  parallel p by 1 : block {
    shared s32 [64] buf;
    parallel t by 64 : thread {
      buf.at(t) = a.at(t) * 3;
      sync.shared;
      out.at(t) = buf.at(63 - t);
    }
  }
  return out;
}
"""


def test_barriers_order_the_phases_of_a_parallel_body() -> None:
    a = random((64,), torch.int32)
    assert torch.equal(both_modes(SYNC, [a]), (a * 3).flip(0))


def test_a_barrier_in_control_flow_needs_lanes() -> None:
    text = SYNC.replace("      sync.shared;\n", "      foreach k in [1] { sync.shared; }\n")
    a = random((64,), torch.int32)
    assert torch.equal(interpret_source(text, [a]), (a * 3).flip(0))
    with pytest.raises(NotImplementedError, match="barrier inside control flow"):
        interpret_source(text, [a], semantics=SERIAL)


PRIVATE = """
__co__ f32 [16] private(f32 [16, 4] a) {
  f32 [16] out;
  parallel p by 2 : block {
    local f32 [4] acc{0.0f};
    parallel t by 8 : thread {
      foreach k in [4]
        acc.at(k) = a.at(p # t, k) * 2.0f;
      mutable f32 s = 0.0f;
      foreach k in [4]
        s += acc.at(k);
      out.at(p # t) = s;
    }
  }
  return out;
}
"""


def test_local_buffers_declared_outside_are_private_to_each_thread() -> None:
    a = random((16, 4), torch.float32)
    assert_close(both_modes(PRIVATE, [a]), (a.double() * 2).sum(1), torch.float32)


TWO_WARPGROUPS = """
__co__ void halves(global f16 [128, 32] a, global f16 [32, 32] b, global f32 [128, 32] out) {
  parallel p by 1 : block {
    mc = mma.fill.f32 0.0f;
    parallel g by 2 : group-4 {
      mma.row.col mc, a.subspan(64, 32).at(g, 0), b;
    }
    parallel g by 2 : group-4 {
      mma.store mc, out.subspan(64, 32).at(g, 0);
    }
  }
}
"""


def test_block_level_accumulators_are_private_to_each_warpgroup() -> None:
    a, b = random((128, 32), torch.float16), random((32, 32), torch.float16)
    out = poison(torch.empty(128, 32))
    interpret_source(TWO_WARPGROUPS, [a, b, out])
    assert_close(out, a.double() @ b.double(), torch.float32, 1e-2)
    ambiguous = TWO_WARPGROUPS.replace("""    parallel g by 2 : group-4 {
      mma.store mc, out.subspan(64, 32).at(g, 0);
    }""", "    mma.store mc, out.subspan(64, 32).at(0, 0);")
    with pytest.raises(InterpretError, match="private to each of 2"):
        interpret_source(ambiguous, [a, b, out])


# --------------------------------------------------------------------------- MMA (5.8)

def _mma(la: str, lb: str, a_shape: list[int], b_shape: list[int], acc: str = "f32",
         body: str = "mma.store mc, out;", out_shape: str = "[16, 8]", out_elem: str = "f32") -> str:
    return f"""
__co__ void mm(global f16 {a_shape} a, global f16 {b_shape} b, global {out_elem} {out_shape} out,
               f32 bias) {{
  parallel p by 1 : block {{
    parallel w by 1 : group {{
      mc = mma.fill.{acc} 0.0f;
      ma = mma.load a;
      mb = mma.load b;
      mma.{la}.{lb} mc, ma, mb;
      {body}
    }}
  }}
}}"""


@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
def test_mma_layout_table(la: str, lb: str) -> None:
    """row: M (N) is the first dimension of the tile; col: K is (spec 5.8 table)."""
    a, b = random((16, 32), torch.float16), random((32, 8), torch.float16)
    a_tile = a if la == "row" else a.T.contiguous()
    b_tile = b.T.contiguous() if lb == "row" else b
    text = _mma(la, lb, list(a_tile.shape), list(b_tile.shape))
    args = [a_tile, b_tile, poison(torch.empty(16, 8)), 0.0]
    interpret_source(text, args)
    assert_close(args[2], a.double() @ b.double(), torch.float32, 1e-5)
    theirs = [a_tile, b_tile, poison(torch.empty(16, 8)), 0.0]
    triton(text, theirs)
    assert_close(args[2], theirs[2].double(), torch.float32, 1e-5)


@pytest.mark.parametrize("body, out_shape, expected", [
    ("mma.store.transp mc, out;", "[8, 16]", lambda c: c.T),
    ("mc += bias; mma.store mc, out;", "[16, 8]", lambda c: c + 1.5),
])
def test_mma_store_transp_and_fragment_arithmetic(body: str, out_shape: str, expected: Any) -> None:
    a, b = random((16, 32), torch.float16), random((32, 8), torch.float16)
    rows, cols = (8, 16) if "transp" in body else (16, 8)
    out = poison(torch.empty(rows, cols))
    interpret_source(_mma("row", "col", [16, 32], [32, 8], body=body, out_shape=out_shape),
                     [a, b, out, 1.5])
    assert_close(out, expected(a.double() @ b.double()), torch.float32, 1e-5)


def test_f16_accumulator_rounds_per_mma() -> None:
    a, b = random((16, 64), torch.float16), random((64, 8), torch.float16)
    out = poison(torch.empty(16, 8, dtype=torch.float16))
    interpret_source(_mma("row", "col", [16, 64], [64, 8], acc="f16", out_elem="f16"),
                     [a, b, out, 0.0])
    assert torch.equal(out, (a.float() @ b.float()).half())


def test_f32_operands_round_to_tf32_unless_ieee() -> None:
    text = """
__co__ void mm(global f32 [16, 16] a, global f32 [16, 16] b, global f32 [16, 16] out) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.col mc, a, b;
      mma.store mc, out;
    }
  }
}"""
    a = torch.full((16, 16), 1.0 + 2.0 ** -20)
    b = torch.eye(16)
    out = torch.empty(16, 16)
    interpret_source(text, [a, b, out])
    assert (out == 1.0).all()  # the last mantissa bits are dropped
    interpret_source(text, [a, b, out], options=croqtile.Options(f32_precision="ieee"))
    assert (out == a).all()


def test_int8_mma_and_sparse_2_4() -> None:
    text = """
__co__ void sparse(global f16 [16, 16] a, global f16 [8, 32] b, global u8 [16, 4] meta,
                   global f32 [16, 8] out) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, a, b, meta;
      mma.store mc, out;
    }
  }
}"""
    generator = torch.Generator().manual_seed(0)
    packed = random((16, 16), torch.float16)
    dense = torch.zeros(16, 32, dtype=torch.float16)
    meta = torch.zeros(16, 4, dtype=torch.uint8)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for m in range(16):
        for g in range(8):
            i0, i1 = pairs[int(torch.randint(0, 6, (1,), generator=generator))]
            dense[m, 4 * g + i0], dense[m, 4 * g + i1] = packed[m, 2 * g], packed[m, 2 * g + 1]
            meta[m, g // 2] |= (i0 | i1 << 2) << (4 * (g % 2))
    b = random((8, 32), torch.float16)
    out = poison(torch.empty(16, 8))
    interpret_source(text, [packed, b, meta, out])
    assert_close(out, dense.double() @ b.double().T, torch.float32, 1e-5)


SCALED = """
__co__ void scaled(global f16 [64, 256] a, global f16 [32, 256] b, global f32 [64, 2] sa,
                   global f32 [2] sb, global f32 [64, 32] out) {
  parallel p by 1 : block {
    mc = mma.fill.f32 0.0f;
    foreach k in [2] {
      foreach w in [2] {
        parallel g by 1 : group-4 {
          mma.row.row mc, a.subspan(64, 64).at(0, k # w), b.subspan(32, 64).at(0, k # w);
        }
      }
      parallel g by 1 : group-4 {
        mma.scale mc, sa.subspan(64, 1).at(0, k), sb.at(k);
      }
    }
    parallel g by 1 : group-4 {
      mma.store mc, out;
    }
  }
}
"""
FUSED = SCALED.replace(
    "mma.row.row mc, a.subspan(64, 64).at(0, k # w), b.subspan(32, 64).at(0, k # w);",
    "mma.row.row.scale mc, a.subspan(64, 64).at(0, k # w), b.subspan(32, 64).at(0, k # w), "
    "sa.subspan(64, 1).at(0, k), sb.at(k);").replace(
    "mma.scale mc, sa.subspan(64, 1).at(0, k), sb.at(k);", "")


@pytest.mark.parametrize("text", [SCALED, FUSED], ids=["standalone", "fused"])
def test_block_scaled_mma(text: str) -> None:
    """Per K block: acc += (A_k . B_k^T) * sa[:, k] * sb[k] (spec 5.8, 8d)."""
    a, b = random((64, 256), torch.float16), random((32, 256), torch.float16)
    sa, sb = random((64, 2), torch.float32), random((2,), torch.float32)
    out = poison(torch.empty(64, 32))
    interpret_source(text, [a, b, sa, sb, out])
    expected = sum((a[:, 128 * k:128 * (k + 1)].double() @ b[:, 128 * k:128 * (k + 1)].double().T)
                   * sa[:, k:k + 1].double() * sb[k].double() for k in range(2))
    assert_close(out, expected, torch.float32, 1e-5)


def test_unscaled_products_at_a_store_are_an_error() -> None:
    text = SCALED.replace("mma.scale mc, sa.subspan(64, 1).at(0, k), sb.at(k);",
                          "if (k == 0) { mma.scale mc, sa.subspan(64, 1).at(0, k), sb.at(k); }")
    args = [random((64, 256), torch.float16), random((32, 256), torch.float16),
            random((64, 2), torch.float32), random((2,), torch.float32), torch.empty(64, 32)]
    with pytest.raises(InterpretError, match="not yet scaled"):
        interpret_source(text, args)


# --------------------------------------------------------------------------- built-ins (5.10)

MISC = """
__co__ s32 [8] histogram(s32 [64] a) {
  s32 [8] out{0};
  parallel t by 64
    __atomic_add(&out.at(a.at(t)), 1);
  return out;
}
__co__ s32 [8] checked(s32 [8] a) {
  s32 [8] out;
  parallel t by 8 {
    assert(a.at(t) >= 0, "negative input");
    out.at(t) = a.at(t);
  }
  return out;
}
__co__ s32 [8] early(s32 [8] a) {
  s32 [8] out{5};
  parallel t by 8 {
    if (t > 3) yield;
    out.at(t) = a.at(t);
  }
  return out;
}
__co__ int scalar(s32 [8] a, int k) {
  int x = a.span(0) * k + 1;
  return x;
}
__co__ void show(s32 [4] a) {
  parallel t by 2 : block
    println("v", t, a.at(t));
}
__co__ s32 [32] arrays(s32 [32] a) {
  s32 [32] out;
  parallel p by 1 : block {
    shared s32 [16] tiles[2];
    foreach s in [2]
      dma.copy a.subspan(16).at(s) => tiles[s];
    parallel t by 16 : thread {
      out.at(t) = tiles[1].at(t);
      out.at(16 + t) = tiles[0].at(t);
    }
  }
  return out;
}
"""


def test_atomics_assert_yield_scalar_returns_print_and_buffer_arrays() -> None:
    a = torch.randint(0, 8, (64,), dtype=torch.int32)
    histogram = interpret_source(MISC, [a], function="histogram")
    assert torch.equal(histogram, torch.bincount(a, minlength=8).int())
    ok = torch.arange(8, dtype=torch.int32)
    assert torch.equal(both_modes(MISC, [ok], function="checked"), ok)
    with pytest.raises(AssertionFailed, match="negative input"):
        interpret_source(MISC, [ok - 3], function="checked")
    early = interpret_source(MISC, [ok], function="early")
    assert early.tolist() == [0, 1, 2, 3, 5, 5, 5, 5]
    assert interpret_source(MISC, [ok, 3], function="scalar") == 25
    printed = io.StringIO()
    interpret_source(MISC, [ok[:4].contiguous()], function="show", semantics=Semantics(out=printed))
    assert printed.getvalue() == "v 0 0\nv 1 1\n"
    b = random((32,), torch.int32)
    assert torch.equal(interpret_source(MISC, [b], function="arrays"),
                       torch.cat([b[16:], b[:16]]))


# --------------------------------------------------------------------------- host contract (6)

def test_argument_errors() -> None:
    text = "__co__ void f(global s32 [M, 4] a, global s32 [M] b) { parallel p by 1 {} }"
    with pytest.raises(ArgumentError, match="expects s32"):
        interpret_source(text, [torch.zeros(2, 4), torch.zeros(2, dtype=torch.int32)])
    with pytest.raises(ArgumentError, match=r"dimension 1: expected 4, got 5"):
        interpret_source(text, [torch.zeros(2, 5, dtype=torch.int32),
                                torch.zeros(2, dtype=torch.int32)])
    with pytest.raises(ArgumentError, match=r"\(M\): expected 2, got 3"):
        interpret_source(text, [torch.zeros(2, 4, dtype=torch.int32),
                                torch.zeros(3, dtype=torch.int32)])


@pytest.mark.parametrize("text, construct", [
    ("__co__ void f(global s32 [4] a) { parallel p by 1 { call foo(a); } }", "external calls"),
])
def test_constructs_not_implemented_yet_are_named(text: str, construct: str) -> None:
    with pytest.raises(NotImplementedError, match=construct):
        interpret_source(text, [torch.zeros(4, dtype=torch.int32)])


def test_check_text_returns_every_function() -> None:
    functions, _ = check_text(MISC)
    assert [f.node.name for f in functions] == ["histogram", "checked", "early", "scalar",
                                                 "show", "arrays"]


def test_shared_buffers_declared_by_threads_are_one_per_block() -> None:
    text = SYNC.replace("    shared s32 [64] buf;\n", "").replace(
        "      buf.at(t) = a.at(t) * 3;", "      shared s32 [64] buf;\n      buf.at(t) = a.at(t) * 3;")
    a = random((64,), torch.int32)
    assert torch.equal(interpret_source(text, [a], semantics=SERIAL), (a * 3).flip(0))


MASKED = """
__co__ s32 [32] masked(s32 [32] a) {
  s32 [32] out;
  parallel t by 32 {
    mutable int s = 1;
    if (t % 3 == 0) s = a.at(t);
    else if (t % 3 == 1) s += 100;
    foreach k in [2]
      s = s * 2;
    out.at(t) = s;
  }
  return out;
}
"""


def test_assignments_on_some_lanes_keep_the_others() -> None:
    a = random((32,), torch.int32)
    expected = torch.tensor([int(a[t]) if t % 3 == 0 else 101 if t % 3 == 1 else 1
                             for t in range(32)], dtype=torch.int32) * 4
    assert torch.equal(both_modes(MASKED, [a]), expected)


GRID_BARRIER = """
__co__ s32 [64] rotate_blocks(s32 [64] a) {
  s32 [64] tmp;
  s32 [64] out;
  parallel p by 4 : block<cooperative> {
    parallel t by 16 : thread
      tmp.at(p # t) = a.at(p # t) + 1;
    sync.barrier : device;
    parallel t by 16 : thread
      out.at(p # t) = tmp.at(((p + 1) % 4) # t);
  }
  return out;
}
"""


def test_grid_barrier_between_phases_of_the_blocks() -> None:
    a = random((64,), torch.int32)
    assert torch.equal(both_modes(GRID_BARRIER, [a]), torch.roll(a + 1, -16))


def test_element_reads_are_values_not_views() -> None:
    """A scalar read from data keeps its value when the element is written later; an
    atomic returns the old value."""
    text = """
__co__ s32 [3] f(s32 [3] a) {
  s32 [3] out;
  parallel p by 1 {
    s32 x = a.at(0);
    a.at(0) = 99;
    out.at(0) = x;
    out.at(1) = __atomic_add(&a.at(1), 5);
    out.at(2) = a.at(1);
  }
  return out;
}"""
    a = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert interpret_source(text, [a]).tolist() == [1, 2, 7]


def test_accumulator_loaded_from_memory() -> None:
    """``mc = mma.load c`` starts an accumulator from memory (C input, spec 5.8)."""
    text = """
__co__ void gemm_c(global f16 [16, 16] a, global f16 [16, 8] b, global f32 [16, 8] c,
                   global f32 [16, 8] out) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mc = mma.load c;
      mma.row.col mc, a, b;
      mma.store mc, out;
    }
  }
}"""
    a, b, c = random((16, 16), torch.float16), random((16, 8), torch.float16), random((16, 8),
                                                                                       torch.float32)
    out = poison(torch.empty(16, 8))
    interpret_source(text, [a, b, c, out])
    assert_close(out, a.double() @ b.double() + c.double(), torch.float32)
