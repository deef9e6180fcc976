"""Warp-specialised kernels (spec 5.9): producer and consumer roles exchanging events.

The Triton backend serialises a ring pipeline into one loop; the reference interpreter runs
the roles' instances interleaved at their waits. Both are checked against float64 torch
references, and irregular protocols against their diagnostics (or, in the interpreter,
the deadlock they cause)."""

from __future__ import annotations

import re

import pytest
import torch

from croqtile.backends.reference import InterpretError, interpret_source

from ..backends.sm90 import HAVE_CUDA_BACKEND, assert_compiles_for_sm90
from .checks import DEVICES, assert_close, compile_clean, line_of, only_error, poison, random

# One producer warpgroup fills a ring of STAGES tile pairs with TMA; one consumer
# warpgroup multiplies them. The ring is freed up front, then each side waits for the
# other's event before touching a slot.
ONE_CONSUMER = """\
#define STAGES 2
#define BM 64
#define BN 64
#define BK 32

__co__ void ws_gemm(global f16 [M, K] lhs, global f16 [N, K] rhs, global f32 [M, N] out) {
  parallel {bm, bn} by [cdiv(M, BM), cdiv(N, BN)] : block {
    shared event filled[STAGES], drained[STAGES];
    shared f16 [BM, BK] a_ring[STAGES];
    shared f16 [BN, BK] b_ring[STAGES];
    parallel role by 2 : group-4 {
      inthreads.async (role == 0) {
        foreach {k} in [cdiv(K, BK)] {
          wait drained.at(k);
          fa = tma.copy.async lhs.subspan(BM, BK).at(bm, k) => a_ring[k % STAGES];
          fb = tma.copy.async rhs.subspan(BN, BK).at(bn, k) => b_ring[k % STAGES];
          trigger filled.at(k) after fa, fb;
        }
      }
      inthreads.async (role == 1) {
        acc = mma.fill.f32 0.0f;
        foreach {s} in [STAGES] { trigger drained.at(s); }
        foreach {k} in [cdiv(K, BK)] {
          slot = k % STAGES;
          wait filled.at(k);
          mma.row.row acc, a_ring[slot], b_ring[slot];
          trigger drained.at(k);
        }
        mma.store acc, out.subspan(BM, BN).at(bm, bn);
      }
    }
  }
}
"""

# Two consumer warpgroups share one role: each multiplies its half of the A tile (rows
# selected by `role - 1`), the producer's copies serve both. Event slots use `e[k % S]`.
TWO_CONSUMERS = """\
#define STAGES 3
#define BM 128
#define BN 64
#define BK 32

__co__ void ws_gemm(global f16 [M, K] lhs, global f16 [N, K] rhs, global f32 [M, N] out) {
  parallel {bm, bn} by [cdiv(M, BM), cdiv(N, BN)] : block {
    shared event filled[STAGES], drained[STAGES];
    shared f16 [BM, BK] a_ring[STAGES];
    shared f16 [BN, BK] b_ring[STAGES];
    parallel role by 3 : group-4 {
      inthreads.async (role == 0) {
        foreach {k} in [cdiv(K, BK)] {
          stage = k % STAGES;
          wait drained[stage];
          fa = tma.copy.async lhs.subspan(BM, BK).at(bm, k) => a_ring[stage];
          fb = tma.copy.async rhs.subspan(BN, BK).at(bn, k) => b_ring[stage];
          trigger filled[stage] after fa, fb;
        }
      }
      inthreads.async (role > 0) {
        acc = mma.fill.f32 0.0f;
        foreach {s} in [STAGES] { trigger drained[s]; }
        foreach {k} in [cdiv(K, BK)] {
          stage = k % STAGES;
          wait filled[stage];
          mma.row.row acc, a_ring[stage].subspan(64, BK).at(role - 1, 0), b_ring[stage];
          trigger drained[stage];
        }
        mma.store acc, out.subspan(64, BN).at(bm * 2 + role - 1, bn);
      }
    }
  }
}
"""

# The same split written as two roles with an accumulator each; the producer waits until
# both consumers drained a slot.
SPLIT_CONSUMERS = """\
#define STAGES 4
#define BK 32

__co__ void ws_gemm(global f16 [M, K] lhs, global f16 [N, K] rhs, global f32 [M, N] out) {
  parallel {bm, bn} by [cdiv(M, 128), cdiv(N, 64)] : block {
    shared event filled[STAGES], drained[STAGES];
    shared f16 [128, BK] a_ring[STAGES];
    shared f16 [64, BK] b_ring[STAGES];
    parallel role by 3 : group-4 {
      inthreads.async (role == 0) {
        foreach {k} in [cdiv(K, BK)] {
          wait drained.at(k);
          fa = tma.copy.async lhs.subspan(128, BK).at(bm, k) => a_ring[k % STAGES];
          fb = tma.copy.async rhs.subspan(64, BK).at(bn, k) => b_ring[k % STAGES];
          trigger filled.at(k) after fa, fb;
        }
      }
      inthreads.async (role == 1) {
        top = mma.fill.f32 0.0f;
        foreach {s} in [STAGES] { trigger drained.at(s); }
        foreach {k} in [cdiv(K, BK)] {
          wait filled.at(k);
          mma.row.row top, a_ring[k % STAGES].subspan(64, BK).at(0, 0), b_ring[k % STAGES];
          trigger drained.at(k);
        }
        mma.store top, out.subspan(64, 64).at(bm * 2, bn);
      }
      inthreads.async (role == 2) {
        bottom = mma.fill.f32 0.0f;
        foreach {s} in [STAGES] { trigger drained.at(s); }
        foreach {k} in [cdiv(K, BK)] {
          wait filled.at(k);
          mma.row.row bottom, a_ring[k % STAGES].subspan(64, BK).at(1, 0), b_ring[k % STAGES];
          trigger drained.at(k);
        }
        mma.store bottom, out.subspan(64, 64).at(bm * 2 + 1, bn);
      }
    }
  }
}
"""

# Straight-line roles: half the threads announce that the shared buffer is written, the
# other half wait for it.
HANDOFF = """\
__co__ void handoff(global s32 [128] a, global s32 [128] out) {
  parallel p by 128 : thread {
    shared s32 [128] staged;
    shared event ready;
    staged.at(p) = a.at(p) * 3;
    writer = p < 64;
    inthreads.async (writer) { trigger ready; }
    inthreads.async (!writer) { wait ready; }
    out.at(p) = staged.at(p) + 1;
  }
}
"""

# Roles chosen by a range of the thread index that read a per-thread value computed
# before them.
BEFORE_ROLES = """\
__co__ void halves(global s32 [128] a, global s32 [128] out) {
  parallel p by 128 : thread {
    twice = a.at(p) * 2;
    shared event done;
    inthreads.async (p < 64) { out.at(p) = twice; trigger done; }
    inthreads.async (p >= 64) { wait done; out.at(p) = twice + 1; }
  }
}
"""

# Straight-line roles that count their event orders in mutable variables (`.at(n++)`),
# around a ring of two slots that starts free (`= ready`).
RELAY = """\
__co__ void relay(global f32 [2, 64] x, global f32 [2, 64] y) {
  parallel p by 1 : block {
    shared event full[2], empty[2] = ready;
    shared f32 [1, 64] ring[2];
    parallel g by 2 : group-4 {
      inthreads.async (g == 0) {
        mutable int sent = 0;
        wait empty.at(sent);
        dma.copy x.subspan(1, 64).at(0, 0) => ring[0];
        trigger full.at(sent++);
        wait empty.at(sent);
        dma.copy x.subspan(1, 64).at(1, 0) => ring[1];
        trigger full.at(sent++);
      }
      inthreads.async (g == 1) {
        mutable int got = 0;
        wait full.at(got);
        dma.copy ring[0] => y.subspan(1, 64).at(0, 0);
        trigger empty.at(got++);
        wait full.at(got);
        dma.copy ring[1] => y.subspan(1, 64).at(1, 0);
        trigger empty.at(got++);
      }
    }
  }
}
"""

# A role updates a per-thread variable declared before the roles: only its threads see it.
PER_ROLE_UPDATE = """\
__co__ void bump(global s32 [4] a, global s32 [4] out) {
  parallel p by 1 : block {
    parallel g by 4 : group {
      mutable int n = 1;
      shared event e;
      inthreads.async (g == 0) { n = 5; trigger e; }
      inthreads.async (g > 0) { wait e; }
      out.at(g) = a.at(g) + n;
    }
  }
}
"""

# Double buffering with TMA futures: the first copy is made under `with k`, the loop
# `foreach k(1:)` copies the next chunk while the current one is added, and `swap`
# exchanges the names; the sum goes through a shared buffer written element by element.
PING_PONG = """\
__co__ auto ping_pong(f32 [4, 8, 64] x, f32 [4, 8, 64] y) {
  f32 [x.span] total;
  parallel p by 8 : block {
    with k in [4] {
      x0 = tma.copy.async x.chunkat(_, k, p) => shared;
      y0 = tma.copy.async y.chunkat(_, k, p) => shared;
      x1 = tma.any;
      y1 = tma.any;
      shared f32 [x0.span] sum;
      foreach k(1:) {
        x1 = tma.copy.async x.chunkat(_, k, p) => shared;
        y1 = tma.copy.async y.chunkat(_, k, p) => shared;
        wait x0, y0;
        foreach i in [x0.span]
          sum.at(i) = x0.data.at(i) + y0.data.at(i);
        tma.copy sum => total.chunkat(_, k - 1, p);
        swap x0, x1;
        swap y0, y1;
      }
      wait x0, y0;
      foreach i in [x0.span]
        sum.at(i) = x0.data.at(i) + y0.data.at(i);
      tma.copy sum => total.chunkat(_, k(-1), p);
    }
  }
  return total;
}
"""

GEMMS = {"one_consumer": ONE_CONSUMER, "two_consumers": TWO_CONSUMERS,
         "split_consumers": SPLIT_CONSUMERS}
SHAPES = {"tiles": (128, 128, 256), "tails": (100, 72, 200)}


def _operands(shape: tuple[int, int, int], device: str = "cpu"):
    m, n, k = shape
    lhs = random((m, k), torch.float16, device)
    rhs = random((n, k), torch.float16, device)
    out = poison(torch.empty((m, n), dtype=torch.float32, device=device))
    return lhs, rhs, out


def _reference(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    return lhs.double() @ rhs.double().T


# --------------------------------------------------------------------------- Triton path


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("name", GEMMS)
def test_warp_specialised_gemm(device: str, name: str, shape: tuple[int, int, int]) -> None:
    lhs, rhs, out = _operands(shape, device)
    assert compile_clean(GEMMS[name]).ws_gemm(lhs, rhs, out) is None
    assert_close(out, _reference(lhs, rhs), torch.float32, 1e-5)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_ring_depth_is_the_pipeline_depth(stages: int) -> None:
    """The roles become one loop with the ring's depth as its software-pipeline depth;
    the events are gone and the copies are loads inside that loop."""
    mod = compile_clean(ONE_CONSUMER, STAGES=stages)
    source = mod.ws_gemm.triton_source
    loops = re.findall(r"for \w+ in tl\.range\(.*, num_stages=(\d+)\):", source)
    assert loops == [str(stages)]
    assert source.count("tl.dot(") == 1
    lhs, rhs, out = _operands((64, 64, 96))
    mod.ws_gemm(lhs, rhs, out)
    assert_close(out, _reference(lhs, rhs), torch.float32, 1e-5)


def test_two_consumer_warpgroups_fuse_into_one_dot() -> None:
    """`role > 0` selects warpgroups 1 and 2: their A rows sit side by side, so the two
    consumers' MMAs are one 128-row dot and nothing is computed for the producer."""
    source = compile_clean(TWO_CONSUMERS).ws_gemm.triton_source
    assert source.count("tl.dot(") == 1
    assert re.search(r"ax_m = tl\.arange\(0, 128\)", source)


@pytest.mark.parametrize("device", DEVICES)
def test_straight_line_roles(device: str) -> None:
    a = random((128,), torch.int32, device)
    out = poison(torch.empty(128, dtype=torch.int32, device=device))
    compile_clean(HANDOFF).handoff(a, out)
    assert_close(out, a.double() * 3 + 1, torch.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_double_buffering_first_copy_under_with(device: str) -> None:
    x = random((4, 8, 64), torch.float32, device)
    y = random((4, 8, 64), torch.float32, device)
    out = compile_clean(PING_PONG).ping_pong(x, y)
    assert_close(out, x.double() + y.double(), torch.float32)
    assert_close(interpret_source(PING_PONG, [x.cpu(), y.cpu()]), x.double() + y.double(),
                 torch.float32)


def test_roles_read_values_computed_before_them() -> None:
    a = random((128,), torch.int32)
    expected = a.double() * 2 + (torch.arange(128) >= 64).double()
    for run in (lambda out: compile_clean(BEFORE_ROLES).halves(a, out),
                lambda out: interpret_source(BEFORE_ROLES, [a, out])):
        out = poison(torch.empty(128, dtype=torch.int32))
        run(out)
        assert_close(out, expected, torch.int32)


def test_event_orders_counted_in_mutable_variables() -> None:
    x = random((2, 64), torch.float32)
    for run in (lambda out: compile_clean(RELAY).relay(x, out),
                lambda out: interpret_source(RELAY, [x, out])):
        out = poison(torch.empty(2, 64))
        run(out)
        assert_close(out, x.double(), torch.float32, 0.0)


def test_a_role_updates_only_its_own_threads() -> None:
    a = random((4,), torch.int32)
    expected = a.double() + torch.tensor([5.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    for run in (lambda out: compile_clean(PER_ROLE_UPDATE).bump(a, out),
                lambda out: interpret_source(PER_ROLE_UPDATE, [a, out])):
        out = poison(torch.empty(4, dtype=torch.int32))
        run(out)
        assert_close(out, expected, torch.int32)


# --------------------------------------------------------------------------- the reference


@pytest.mark.parametrize("name", GEMMS)
def test_reference_interpreter_runs_the_roles(name: str) -> None:
    lhs, rhs, out = _operands(SHAPES["tails"])
    interpret_source(GEMMS[name], [lhs, rhs, out])
    assert_close(out, _reference(lhs, rhs), torch.float32, 1e-5)


def test_reference_interpreter_straight_line_roles() -> None:
    a = random((128,), torch.int32)
    out = poison(torch.empty(128, dtype=torch.int32))
    interpret_source(HANDOFF, [a, out])
    assert_close(out, a.double() * 3 + 1, torch.int32)


def test_reference_interpreter_reports_a_deadlock() -> None:
    """Without the up-front release the producer waits for a free slot forever."""
    text = ONE_CONSUMER.replace("foreach {s} in [STAGES] { trigger drained.at(s); }", "")
    lhs, rhs, out = _operands((64, 64, 64))
    with pytest.raises(InterpretError, match=r"deadlock: .* waits for 'drained\[0\]'"):
        interpret_source(text, [lhs, rhs, out])


def test_reference_interpreter_reports_a_straight_line_deadlock() -> None:
    text = HANDOFF.replace("{ trigger ready; }", "{ wait ready; }")
    with pytest.raises(InterpretError, match="deadlock"):
        interpret_source(text, [random((128,), torch.int32), torch.empty(128, dtype=torch.int32)])


# --------------------------------------------------------------------------- sm_90


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("name", [*GEMMS, "handoff", "relay", "ping_pong"])
def test_compiles_for_sm90(name: str) -> None:
    programs = {**GEMMS, "handoff": HANDOFF, "relay": RELAY, "ping_pong": PING_PONG}
    assert_compiles_for_sm90(programs[name], name)


# --------------------------------------------------------------------------- irregular


IRREGULAR = {
    "no_release": (
        ("foreach {s} in [STAGES] { trigger drained.at(s); }", ""),
        "CQ0755", "foreach {k} in [cdiv(K, BK)] {", "no role can start"),
    "double_release": (
        ("foreach {s} in [STAGES] {", "foreach {s} in [2 * STAGES] {"),
        "CQ0755", "wait drained.at(k);", "slot 0 of 'drained' is released 2 times"),
    "order_ahead": (
        ("trigger filled.at(k) after", "trigger filled.at(k + 1) after"),
        "CQ0755", "trigger filled.at(k + 1)",
        "the order of 'filled.at(...)' must be the loop variable itself"),
    "release_before_use": (
        ("mma.row.row acc, a_ring[slot], b_ring[slot];\n          trigger drained.at(k);",
         "trigger drained.at(k);\n          mma.row.row acc, a_ring[slot], b_ring[slot];"),
        "CQ0755", "mma.row.row acc", "must trigger its events after the statements"),
    "copy_before_wait": (
        ("wait drained.at(k);\n          fa = tma.copy.async lhs.subspan(BM, BK).at(bm, k) "
         "=> a_ring[k % STAGES];",
         "fa = tma.copy.async lhs.subspan(BM, BK).at(bm, k) => a_ring[k % STAGES];\n"
         "          wait drained.at(k);"),
        "CQ0755", "wait drained.at(k);", "must wait for a free slot before it copies"),
    "stale_slot": (
        ("mma.row.row acc, a_ring[slot]", "mma.row.row acc, a_ring[(k + 1) % STAGES]"),
        "CQ0701", "a_ring[(k + 1) % STAGES]", "cannot be matched with the copy"),
    "event_in_branch": (
        ("          wait filled.at(k);\n", "          if (k >= 0) { wait filled.at(k); }\n"),
        "CQ0755", "if (k >= 0)", "events inside nested control flow of a role"),
}


@pytest.mark.parametrize("case", IRREGULAR)
def test_irregular_protocol_is_rejected(case: str) -> None:
    (old, new), code, line, message = IRREGULAR[case]
    assert old in ONE_CONSUMER
    text = ONE_CONSUMER.replace(old, new)
    diag = only_error(text)
    assert (diag.code, diag.line) == (code, line_of(text, line)), diag.render()
    assert message in diag.message
    if code == "CQ0755":
        assert "supported: " in (diag.hint or "")


def test_loops_over_different_ranges_are_rejected() -> None:
    text = ONE_CONSUMER.replace("foreach {k} in [cdiv(K, BK)] {\n          slot",
                                "foreach {k} in [cdiv(K, 2 * BK)] {\n          slot")
    diag = only_error(text)
    assert diag.code == "CQ0755" and "the same iteration space" in diag.message


def test_roles_that_wait_for_each_other_are_rejected() -> None:
    text = HANDOFF.replace("{ trigger ready; }", "{ wait ready; }")
    diag = only_error(text)
    assert (diag.code, diag.line) == ("CQ0756", line_of(text, "inthreads.async (writer)"))
    assert diag.message.startswith("'wait' on 'ready' would never return")
