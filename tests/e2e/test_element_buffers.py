"""Element-level semantics: shared/local buffers written element by element (register
tiles and per-program scratch memory, atomics, barriers), element-typed scalars as
variables, and every math built-in of the spec.

Each program runs through the Triton path (Triton's CPU interpreter) and through the
reference interpreter on fresh random inputs; both must match a float64 torch reference
(integers exactly) in every element of a poisoned output."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch

import croqtile

from ..reference.test_interpret import Case, check
from .checks import poison, random

# --------------------------------------------------------------------------- programs

# a local buffer filled by a vectorised loop (a register tile), copied out whole
LOCAL_TILE = """
__co__ void scale_rows(f32 [4, 24] a, f32 [4, 24] b, global f32 [4, 24] out) {
  parallel r by 4 : block {
    ra = dma.copy a.chunkat(r, _) => local;
    rb = dma.copy b.chunkat(r, _) => local;
    local f32 [ra.span] acc;
    foreach x in ra.span
      acc.at(x) = ra.data.at(x) * 3.0f - rb.data.at(x);
    dma.copy acc => out.chunkat(r, _);
  }
}
"""

# a shared buffer written by every thread and read back at another thread's position
SHARED_REVERSE = """
__co__ void reverse(s32 [3, 40] a, global s32 [3, 40] out) {
  parallel g by 3 : block
    parallel t by 40 : thread {
      shared s32 [40] s;
      s.at(t) = a.at(g, t) + g;
      sync.barrier : block;
      out.at(g, t) = s.at(39 - t) * 2;
    }
}
"""

# a histogram in shared memory: zeroed under a condition, updated with atomics
SHARED_HISTOGRAM = """
__co__ void weighted_bins(s32 [2, 96] keys, s32 [2, 96] weights, global s32 [2, 8] out) {
  parallel g by 2 : block
    parallel t by 96 : thread {
      shared s32 [8] bins;
      if (t < 8) {
        bins.at(t) = 100;
      }
      sync.barrier : block;
      s32 k = keys.at(g, t) % 8;
      __atomic_add(bins.at(k), weights.at(g, t));
      sync.barrier : block;
      if (t < 8) {
        out.at(g, t) = bins.at(t);
      }
    }
}
"""

# minimum and maximum of each block through shared atomics on two elements
SHARED_MINMAX = """
__co__ void minmax(s32 [4, 50] a, global s32 [4, 2] out) {
  parallel g by 4 : block
    parallel t by 50 : thread {
      shared s32 [2] m;
      if (t == 0) {
        m.at(0) = 1000000;
        m.at(1) = -1000000;
      }
      sync.barrier : block;
      __atomic_min(m.at(0), a.at(g, t));
      __atomic_max(m.at(1), a.at(g, t));
      sync.barrier : block;
      if (t < 2) {
        out.at(g, t) = m.at(t);
      }
    }
}
"""

# an initialised local buffer updated piecewise in a sequential loop, one per thread
LOCAL_SCRATCH = """
__co__ void prefix(f32 [16, 6] a, global f32 [16, 6] out) {
  parallel t by 16 : thread {
    local f32 [6] run {1.0f};
    foreach k in 5
      run.at(k + 1) = run.at(k) + a.at(t, k);
    foreach j in 6
      out.at(t, j) = run.at(j) * 2.0f;
  }
}
"""

# a staged copy whose first half is rewritten in place: the input stays untouched
STAGED_UPDATE = """
__co__ void half_triple(global s32 [64] a, global s32 [64] out) {
  parallel g by 1 : block {
    shared s32 [64] buf;
    dma.copy a => buf;
    parallel t by 64 : thread {
      inthreads (t < 32) {
        buf.at(t) = buf.at(t) * 3;
      }
    }
    dma.copy buf => out;
  }
}
"""

# the same with the copies written inside the thread level: a copy into shared memory
# that every thread issues alike is one copy of the block
STAGED_IN_THREADS = """
__co__ void half_negate(global s32 [2, 64] a, global s32 [2, 64] out) {
  parallel g by 2 : block
    parallel t by 64 : thread {
      shared s32 [1, 64] buf;
      dma.copy a.chunkat(g, _) => buf;
      inthreads (t >= 40) {
        buf.at(0, t) = 0 - buf.at(0, t) - g;
      }
      dma.copy buf => out.chunkat(g, _);
    }
}
"""

# elements of a copy's future rewritten in place, then read at other positions
FUTURE_UPDATE = """
__co__ void bump(global f32 [4, 16] a, global f32 [4, 16] out) {
  parallel r by 4 : block {
    f = dma.copy a.chunkat(r, _) => shared;
    parallel t by 16 : thread {
      f.data.at(0, t) = f.data.at(0, t) * 2.0f + 1.0f;
      sync.barrier : block;
      out.at(r, t) = f.data.at(0, 15 - t);
    }
  }
}
"""

# a buffer in scratch memory refilled by a copy, then updated again
SCRATCH_REFILL = """
__co__ void refill(global f32 [2, 32] a, global f32 [2, 32] b, global f32 [2, 32] out) {
  parallel g by 2 : block
    parallel t by 32 : thread {
      shared f32 [1, 32] s;
      s.at(0, t) = a.at(g, t);
      sync.barrier : block;
      out.at(g, t) = s.at(0, 31 - t);
      sync.barrier : block;
      dma.copy b.chunkat(g, _) => s;
      s.at(0, t) = s.at(0, t) + 1.0f;
      sync.barrier : block;
      out.at(g, t) = out.at(g, t) * s.at(0, 31 - t);
    }
}
"""

# element-typed scalars are variables (control scalars need `mutable`)
SCALAR_VARIABLES = """
__co__ void running(s32 [32, 5] a, global s32 [32] out) {
  parallel t by 32 : thread {
    s32 acc = 7;
    foreach k in 5
      acc = acc * 2 + a.at(t, k);
    out.at(t) = acc;
  }
}
"""

# host scalars computed from scalar parameters
HOST_SCALARS = """
__co__ void rotate_scale(f32 [64] a, int k, f32 scale, global f32 [64] out) {
  int off = k % 64;
  f32 twice = scale * 2.0f + __fabs(scale);
  parallel p by 64
    out.at(p) = a.at((p + off) % 64) * twice;
}
"""

# views computed on the host between blocks: span_as reshapes a whole tensor
HOST_SPAN_AS = """
__co__ void regroup(s32 [4, 3, 16] a, s32 [12, 16] b, global s32 [12, 16] out) {
  flat = a.span_as(12, 16);
  rows = out.span_as([6, 32]);
  parallel r by 12, c by 16
    out.at(r, c) = flat.at(r, c) - b.at(r, c);
  parallel h by 6 : block {
    tile = dma.copy rows.chunkat(h, _) => shared;
    parallel t by 32 : thread
      rows.at(h, t) = tile.data.at(0, t) * 2;
  }
}
"""

# span_as inside a kernel, and of a staged copy
KERNEL_SPAN_AS = """
__co__ void flatten(f32 [8, 8] a, global f32 [64] out) {
  parallel g by 1 : block {
    s = dma.copy a => shared;
    parallel t by 64 : thread
      out.at(t) = a.span_as(64).at(t) + s.data.span_as([64]).at(63 - t);
  }
}
"""

# `yield` ends a thread: lanes whose condition held skip the rest of the body
YIELD_LANES = """
__co__ void clip(s32 [2, 48] a, int limit, global s32 [2, 48] out) {
  parallel g by 2 : block
    parallel t by 48 : thread {
      s32 v = a.at(g, t);
      out.at(g, t) = 1;
      if (v > limit) {
        out.at(g, t) = 2;
        yield;
      } else {
        v = v * 3;
      }
      if (g == 1) {
        yield;
      }
      out.at(g, t) = v + t;
    }
}
"""

# a `while` whose condition differs between threads, with `break` and `continue`
WHILE_LANES = """
__co__ void collatz(s32 [2, 40] a, global s32 [2, 40, 2] out) {
  parallel g by 2 : block
    parallel t by 40 : thread {
      s32 x = a.at(g, t);
      s32 n = 0;
      while (x != 1) {
        n = n + 1;
        if (n > 12)
          break;
        if (x % 2 == 0) {
          x = x / 2;
          continue;
        }
        x = 3 * x + 1;
      }
      out.at(g, t, 0) = n;
      out.at(g, t, 1) = x;
    }
}
"""

# a `while` on a value every thread of a program shares
WHILE_UNIFORM = """
__co__ void halving(s32 [8] a, int start, global s32 [8] out) {
  parallel g by 8 : block {
    mutable int k = start + g;
    s32 acc = a.at(g);
    while (k > 1) {
      acc = acc * 2 + k;
      k = k / 2;
    }
    out.at(g) = acc;
  }
}
"""

# host statements that touch data run in order as a one-thread program between blocks
HOST_ELEMENTS = """
__co__ void table(s32 [6] a, int bias, global s32 [5, 6] out) {
  s32 [5, 6] grid;
  foreach i in 5
    foreach j in 6
      grid.at(i, j) = i * 10 + j + a.at(j);
  if (bias > 0) {
    grid.at(0, 0) = grid.at(4, 5) + bias;
  }
  parallel r by 5 : block
    parallel c by 6 : thread
      out.at(r, c) = grid.at(r, 5 - c) * 2;
  foreach k in 6
    out.at(4, k) += out.at(3, k);
}
"""

UNARY = ["__sinh", "__cosh", "__tanh", "__tan", "__asin", "__acos", "__atan", "__expm1",
         "__log1p", "__round", "__sign", "__gelu", "__softplus", "__frcp_rn", "__exp",
         "__sqrt"]
# the argument each built-in receives (x is in [-1, 1); a few exact halves and zeros)
UNARY_ARGS = {"__sqrt": "x + 1.5f", "__frcp_rn": "x + 1.5f", "__round": "x * 4.0f"}

BUILTINS_UNARY = "__co__ void unary(f32 [64] a, global f32 [{n}, 64] out) {{\n" \
    "  parallel p by 64 {{\n    x = a.at(p);\n{lines}  }}\n}}\n".format(
        n=len(UNARY),
        lines="".join(f"    out.at({i}, p) = {name}({UNARY_ARGS.get(name, 'x')});\n"
                      for i, name in enumerate(UNARY)))

BUILTINS_BINARY = """
__co__ void binary(f32 [128] x, f32 [128] y, global f32 [3, 128] out) {
  parallel p by 128 {
    out.at(0, p) = __pow(x.at(p), y.at(p));
    out.at(1, p) = __atan2(x.at(p), y.at(p));
    out.at(2, p) = __pow(__fabs(x.at(p)) + 0.5f, y.at(p) * 0.5f);
  }
}
"""

BUILTINS_INT = """
__co__ void ints(f32 [64] x, s32 [64] n, global s32 [3, 64] out) {
  parallel p by 64 {
    out.at(0, p) = __isfinite(x.at(p));
    out.at(1, p) = __alignup(n.at(p), 8);
    out.at(2, p) = __aligndown(n.at(p), 8);
  }
}
"""


# --------------------------------------------------------------------------- cases


def _poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return poison(torch.empty(shape, dtype=dtype))


def _ints(*shape: int, low: int = -50, high: int = 50) -> torch.Tensor:
    return torch.randint(low, high, shape, dtype=torch.int32)


def _histogram(args: list[Any]) -> torch.Tensor:
    keys, weights = args[0].long(), args[1].long()
    out = torch.full((2, 8), 100, dtype=torch.int64)
    for g in range(2):
        bins = keys[g] % 8
        out[g].index_add_(0, bins, weights[g])
    return out


def _prefix(args: list[Any]) -> torch.Tensor:
    a = args[0].double()
    run = torch.ones(16, 6, dtype=torch.float64)
    run[:, 1:] = 1.0 + torch.cumsum(a[:, :5], dim=1)
    return run * 2


def _running(args: list[Any]) -> torch.Tensor:
    acc = torch.full((32,), 7, dtype=torch.int64)
    for k in range(5):
        acc = acc * 2 + args[0][:, k].long()
    return acc


def _collatz(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty(*a.shape, 2, dtype=torch.int64)
    for index in itertools.product(*(range(d) for d in a.shape)):
        x, n = int(a[index]), 0
        while x != 1:
            n += 1
            if n > 12:
                break
            x = x // 2 if x % 2 == 0 else 3 * x + 1
        out[index] = torch.tensor([n, x])
    return out


def _halving(a: torch.Tensor, start: int) -> torch.Tensor:
    out = []
    for g, value in enumerate(a.tolist()):
        k, acc = start + g, value
        while k > 1:
            acc, k = acc * 2 + k, k // 2
        out.append(acc)
    return torch.tensor(out)


def _host_table(a: torch.Tensor, bias: int) -> torch.Tensor:
    grid = torch.arange(5).view(5, 1) * 10 + torch.arange(6) + a.long()
    if bias > 0:
        grid[0, 0] = grid[4, 5] + bias
    out = grid.flip(1) * 2
    out[4] += out[3]
    return out


def _c_round(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


_TORCH_UNARY = {
    "__sinh": torch.sinh, "__cosh": torch.cosh, "__tanh": torch.tanh, "__tan": torch.tan,
    "__asin": torch.asin, "__acos": torch.acos, "__atan": torch.atan, "__expm1": torch.expm1,
    "__log1p": torch.log1p, "__round": _c_round, "__sign": torch.sign,
    "__gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "__softplus": lambda x: torch.log1p(torch.exp(x)), "__frcp_rn": torch.reciprocal,
    "__exp": torch.exp, "__sqrt": torch.sqrt,
}


def _unary_inputs() -> list[Any]:
    x = torch.rand(64) * 2 - 1
    x[:6] = torch.tensor([0.0, 0.125, -0.125, 0.375, -0.375, 1e-6])  # halves after * 4
    return [x, _poisoned((len(UNARY), 64), torch.float32)]


def _unary(args: list[Any]) -> torch.Tensor:
    x = args[0].double()
    rows = []
    for name in UNARY:
        arg = {"__sqrt": x + 1.5, "__frcp_rn": x + 1.5, "__round": x * 4}.get(name, x)
        rows.append(_TORCH_UNARY[name](arg))
    return torch.stack(rows)


def _binary_inputs() -> list[Any]:
    x = torch.rand(128) * 4 - 2
    y = torch.rand(128) * 4 - 2
    y[:16] = torch.arange(-8, 8, dtype=torch.float32).roll(3)  # integral exponents
    x[16:20] = 0.0  # a zero base (positive exponents), atan2 on an axis
    y[16:20] = y[16:20].abs() + 0.5
    y[20:24] = 0.0  # x^0, atan2 on the other axis
    return [x, y, _poisoned((3, 128), torch.float32)]


def _binary(args: list[Any]) -> torch.Tensor:
    """NaN where a negative base meets a fractional exponent: the kernel writes NaN."""
    x, y = args[0].double(), args[1].double()
    return torch.stack([torch.pow(x, y), torch.atan2(x, y), torch.pow(x.abs() + 0.5, y * 0.5)])


def _ints_inputs() -> list[Any]:
    x = torch.randn(64)
    x[::7] = torch.inf
    x[3::11] = -torch.inf
    x[5::13] = torch.nan
    return [x, _ints(64, low=0, high=200), _poisoned((3, 64), torch.int32)]


def _ints_reference(args: list[Any]) -> torch.Tensor:
    x, n = args[0], args[1].long()
    return torch.stack([torch.isfinite(x).long(), (n + 7) // 8 * 8, n // 8 * 8])


CASES = [
    Case("local_tile", LOCAL_TILE,
         lambda: [random((4, 24), torch.float32), random((4, 24), torch.float32),
                  _poisoned((4, 24), torch.float32)],
         lambda a: a[0].double() * 3 - a[1].double(), torch.float32, output=2),
    Case("shared_reverse", SHARED_REVERSE,
         lambda: [_ints(3, 40), _poisoned((3, 40), torch.int32)],
         lambda a: (a[0].long() + torch.arange(3).view(3, 1)).flip(1) * 2,
         torch.int32, output=1),
    Case("shared_histogram", SHARED_HISTOGRAM,
         lambda: [_ints(2, 96, low=0, high=1000), _ints(2, 96), _poisoned((2, 8), torch.int32)],
         _histogram, torch.int32, output=2),
    Case("shared_minmax", SHARED_MINMAX,
         lambda: [_ints(4, 50, low=-5000, high=5000), _poisoned((4, 2), torch.int32)],
         lambda a: torch.stack([a[0].long().amin(1), a[0].long().amax(1)], 1),
         torch.int32, output=1),
    Case("local_scratch", LOCAL_SCRATCH,
         lambda: [random((16, 6), torch.float32), _poisoned((16, 6), torch.float32)],
         _prefix, torch.float32, output=1),
    Case("staged_update", STAGED_UPDATE,
         lambda: [_ints(64), _poisoned((64,), torch.int32)],
         lambda a: torch.cat([a[0][:32].long() * 3, a[0][32:].long()]),
         torch.int32, output=1),
    Case("staged_in_threads", STAGED_IN_THREADS,
         lambda: [_ints(2, 64), _poisoned((2, 64), torch.int32)],
         lambda a: torch.cat([a[0][:, :40].long(),
                              -a[0][:, 40:].long() - torch.arange(2).view(2, 1)], 1),
         torch.int32, output=1),
    Case("future_update", FUTURE_UPDATE,
         lambda: [random((4, 16), torch.float32), _poisoned((4, 16), torch.float32)],
         lambda a: (a[0].double() * 2 + 1).flip(1), torch.float32, output=1),
    Case("scratch_refill", SCRATCH_REFILL,
         lambda: [random((2, 32), torch.float32), random((2, 32), torch.float32),
                  _poisoned((2, 32), torch.float32)],
         lambda a: a[0].double().flip(1) * (a[1].double() + 1).flip(1), torch.float32,
         output=2),
    Case("scalar_variables", SCALAR_VARIABLES,
         lambda: [_ints(32, 5), _poisoned((32,), torch.int32)],
         _running, torch.int32, output=1),
    Case("host_scalars", HOST_SCALARS,
         lambda: [random((64,), torch.float32), 37, -0.75, _poisoned((64,), torch.float32)],
         lambda a: a[0].double().roll(-37) * (-0.75 * 2 + 0.75), torch.float32, output=3),
    Case("host_span_as", HOST_SPAN_AS,
         lambda: [_ints(4, 3, 16), _ints(12, 16), _poisoned((12, 16), torch.int32)],
         lambda a: (a[0].reshape(12, 16).long() - a[1].long()) * 2, torch.int32, output=2),
    Case("kernel_span_as", KERNEL_SPAN_AS,
         lambda: [random((8, 8), torch.float32), _poisoned((64,), torch.float32)],
         lambda a: a[0].double().reshape(64) + a[0].double().reshape(64).flip(0),
         torch.float32, output=1),
    Case("yield_lanes", YIELD_LANES,
         lambda: [_ints(2, 48), 5, _poisoned((2, 48), torch.int32)],
         lambda a: torch.stack([
             torch.where(a[0][0] > 5, 2, a[0][0].long() * 3 + torch.arange(48)),
             torch.where(a[0][1] > 5, 2, 1)]), torch.int32, output=2),
    Case("while_lanes", WHILE_LANES,
         lambda: [_ints(2, 40, low=1, high=60), _poisoned((2, 40, 2), torch.int32)],
         lambda a: _collatz(a[0]), torch.int32, output=1),
    Case("while_uniform", WHILE_UNIFORM,
         lambda: [_ints(8), 37, _poisoned((8,), torch.int32)],
         lambda a: _halving(a[0], a[1]), torch.int32, output=2),
    Case("host_elements", HOST_ELEMENTS,
         lambda: [_ints(6), 3, _poisoned((5, 6), torch.int32)],
         lambda a: _host_table(a[0], a[1]), torch.int32, output=2),
    Case("builtins_unary", BUILTINS_UNARY, _unary_inputs, _unary, torch.float32, output=1),
    Case("builtins_binary", BUILTINS_BINARY, _binary_inputs, _binary, torch.float32,
         output=2),
    Case("builtins_int", BUILTINS_INT, _ints_inputs, _ints_reference, torch.int32, output=2),
]


def _triton_source(text: str) -> str:
    (function,) = croqtile.compile(text).functions.values()
    return function.triton_source


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_program(case: Case) -> None:
    check(case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_program_on_the_gpu(case: Case) -> None:
    check(case, "cuda")


def test_staged_update_leaves_the_source_alone() -> None:
    """Writing elements of a buffer that a copy filled writes the buffer, not the source
    the copy forwards to."""
    a = _ints(64)
    before = a.clone()
    out = _poisoned((64,), torch.int32)
    croqtile.compile(STAGED_UPDATE)(a, out)
    assert torch.equal(a, before)
    assert torch.equal(out.long(), torch.cat([before[:32].long() * 3, before[32:].long()]))


def test_register_tile_needs_no_scratch() -> None:
    """A buffer written whole stays in registers: no scratch memory, no barriers."""
    for text in (LOCAL_TILE, SCALAR_VARIABLES):
        source = _triton_source(text)
        assert "scratch" not in source and "debug_barrier" not in source


def test_scratch_is_per_program_and_fenced() -> None:
    source = _triton_source(SHARED_REVERSE)
    assert "s_scratch = torch.zeros((3, 40)" in source
    assert "tl.debug_barrier()" in source
    assert "# 's' lives in per-program scratch memory" in source


def test_libdevice_on_the_gpu_float64_formulas_on_the_cpu() -> None:
    source = _triton_source(BUILTINS_BINARY)
    assert "libdevice.pow(" in source and "libdevice.atan2(" in source
    assert "if ON_CPU:" in source


PIECEWISE_IN_A_LOOP = """__co__ void f(f32 [8] a, global f32 [8] out) {
  parallel t by 1 : block {
    buf = dma.copy a => shared;
    foreach k in 8
      buf.data.at(k) = buf.data.at(k) * 2.0f + 1.0f;
    dma.copy buf.data => out;
  }
}
"""


def test_piecewise_write_in_a_loop_after_a_copy() -> None:
    """The copy's buffer moves to scratch where the copy fills it, so element writes in a
    loop after it see the copied values (and the source stays as it was)."""
    check(Case("piecewise_in_a_loop", PIECEWISE_IN_A_LOOP,
               lambda: [random((8,), torch.float32), poison(torch.empty(8))],
               lambda args: args[0].double() * 2 + 1, torch.float32, output=1))


def test_control_scalars_stay_immutable() -> None:
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile("__co__ void f(global s32 [4] o) {\n  parallel p by 4 {\n"
                         "    int n = 1;\n    n = 2;\n    o.at(p) = n;\n  }\n}\n")
    assert [(d.code, d.line) for d in err.value.diagnostics] == [("CQ0203", 4)]


def test_fractional_power_of_a_negative_base_is_nan() -> None:
    x = torch.tensor([-2.0, -2.0, 2.0, 0.0, 0.0, -0.5])
    y = torch.tensor([0.5, 3.0, -1.0, 2.0, -1.0, 2.0])
    out = _poisoned((3, 6), torch.float32)
    croqtile.compile(BUILTINS_BINARY.replace("128", "6"))(x, y, out)
    expected = [math.nan, -8.0, 0.5, 0.0, math.inf, 0.25]
    got = out[0].tolist()
    for g, e in zip(got, expected):
        assert (math.isnan(g) and math.isnan(e)) or g == e, (got, expected)


def test_span_as_of_part_of_a_tensor_is_rejected_at_the_view() -> None:
    text = """__co__ void f(f32 [8, 8] a, global f32 [32] out) {
  parallel p by 2 : block
    parallel t by 32 : thread
      out.at(t) = a.chunkat(p, _).span_as(32).at(t);
}
"""
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(text)
    diag = err.value.diagnostics[0]
    assert diag.code == "CQ0701" and diag.line == 4
    assert "'span_as' of part of a tensor" in diag.message


def test_yield_inside_a_loop_is_rejected_at_the_yield() -> None:
    text = """__co__ void f(s32 [8, 4] a, global s32 [8] out) {
  parallel t by 8 : thread {
    out.at(t) = 0;
    foreach k in 4 {
      if (a.at(t, k) < 0) {
        yield;
      }
    }
  }
}
"""
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(text)
    diag = err.value.diagnostics[0]
    assert diag.code == "CQ0701" and diag.line == 5
    assert "'yield' inside a loop" in diag.message


def test_break_nested_in_a_loop_body_block_is_rejected() -> None:
    text = """__co__ void f(s32 [8] a, global s32 [8] out) {
  parallel t by 8 : thread {
    s32 x = a.at(t);
    while (x > 0) {
      x = x - 1;
      if (x > 3) {
        if (x < 5)
          break;
      }
    }
    out.at(t) = x;
  }
}
"""
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(text)
    diag = err.value.diagnostics[0]
    assert diag.code == "CQ0701" and diag.line == 7
    assert "'break'/'continue' nested deeper" in diag.message


def test_host_scalar_read_from_data_is_rejected_with_the_reason() -> None:
    text = """__co__ void f(s32 [8] a, global s32 [8] out) {
  int first = a.at(0);
  parallel p by 8
    out.at(p) = a.at(p) + first;
}
"""
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(text)
    diag = err.value.diagnostics[0]
    assert diag.code == "CQ0701" and diag.line == 2
    assert "a host scalar computed at run time" in diag.message
    assert "read data inside a parallel block" in (diag.hint or "")
