"""Smaller language forms the Triton backend supports: strided and squeezed views,
``select`` as a value, futures rotated in loops, ordered copies, device assertions and
printing, scalar updates and casts, loop exits, buffer-array elements.

Each program runs through the Triton path (Triton's CPU interpreter) and through the
reference interpreter on fresh random inputs; both must match a float64 torch reference
(integers exactly) in every element of a poisoned output. Every program also compiles
to sm_90 machine code."""

from __future__ import annotations

import pytest
import torch

import croqtile
from croqtile.backends.reference import interpret_source
from croqtile.backends.reference.errors import AssertionFailed
from croqtile.backends.triton.launcher import KernelError

from ..backends.sm90 import HAVE_CUDA_BACKEND, assert_compiles_for_sm90
from .checks import Case, check, poison, random

# --------------------------------------------------------------------------- strided views

# `view(E : T).from(o)` and `subspan(E : T).at(i)` walk the underlying buffer with
# explicit element strides; a strided view of a tile starts at the tile's first element,
# and later steps tile the strided view itself
STRIDED_VIEWS = """
__co__ void strided(f32 [8, 16] a, global f32 [12, 8] out) {
  parallel p by 4 : block {
    dma.copy a.view(1, 8 : 16, 2).from(2 * p, p) => out.chunk(12, 1).at(p, 0);
    dma.copy a.subspan(1, 8 : 16, 2).at(p, 1) => out.chunk(12, 1).at(4 + p, 0);
    dma.copy a.chunk(1, 2).at(0, 1).view(4, 8 : 16, 1).chunkat(p, _)
      => out.chunk(12, 1).at(8 + p, 0);
  }
}
"""


def strided_views_reference(args: list) -> torch.Tensor:
    flat = args[0].double().flatten()
    p = torch.arange(4)[:, None]
    i = torch.arange(8)
    return torch.cat([flat[34 * p + 2 * i], flat[16 * p + 16 + 2 * i], flat[8 + 16 * p + i]])


# an element read through a strided view: the transpose of a tile by its strides
STRIDED_ELEMENTS = """
__co__ void transposed(s32 [6, 10] a, global s32 [10, 6] out) {
  parallel r by 10 : block
    parallel c by 6 : thread
      out.at(r, c) = a.view(10, 6 : 1, 10).at(r, c) + 1;
}
"""


# --------------------------------------------------------------------------- select

# `select` as a value: futures chosen by a constant and by a runtime index, and scalars;
# a copy into the buffer chosen by a constant, read by the buffer's name
SELECT_VALUES = """
__co__ void pick(f32 [4, 16] x, f32 [4, 16] z, global f32 [4, 64] out) {
  parallel p by 4 : block {
    shared f32 [1, 16] first, second;
    dma.copy z.chunkat(p, _) => select(1, first, second);
    dma.copy second => out.chunk(4, 4).at(p, 3);
    a = dma.copy x.chunkat(p, _) => shared;
    b = dma.copy z.chunkat(p, _) => shared;
    fixed = select(1, a, b);
    varying = select(p % 2, a, b);
    dma.copy fixed => out.chunk(4, 4).at(p, 0);
    dma.copy varying => out.chunk(4, 4).at(p, 1);
    parallel t by 16 : thread
      out.at(p, 32 + t) = select(t % 3, x.at(p, t), z.at(p, t), 2.0f * x.at(p, t));
  }
}
"""


# `select` of shared buffers as a value: a runtime choice copied out whole, a constant
# one read element by element
SELECT_BUFFERS = """
__co__ void pickbuf(f32 [2, 16] a, f32 [2, 16] z, global f32 [4, 16] out) {
  parallel p by 2 : block {
    shared f32 [1, 16] s0, s1;
    dma.copy a.chunkat(p, _) => s0;
    dma.copy z.chunkat(p, _) => s1;
    varying = select(p % 2, s0, s1);
    fixed = select(1, s0, s1);
    dma.copy varying => out.chunk(4, 1).at(p, 0);
    parallel t by 16 : thread
      out.at(2 + p, t) = fixed.at(0, t) * 2.0f;
  }
}
"""


# a runtime choice between two views of one tensor, read element by element
SELECT_ROWS = """
__co__ void pickrow(f32 [4, 16] a, global f32 [4, 16] out) {
  parallel p by 4 : block {
    shared f32 [1, 16] here, next;
    dma.copy a.chunkat(p, _) => here;
    dma.copy a.chunkat((p + 1) % 4, _) => next;
    c = select(p % 2, here, next);
    parallel t by 16 : thread
      out.at(p, t) = c.at(0, t) * 2.0f;
  }
}
"""


def _select_buffers_reference(args: list) -> torch.Tensor:
    a, z = args[0].double(), args[1].double()
    return torch.stack([a[0], z[1], 2 * z[0], 2 * z[1]])


def _select_reference(args: list) -> torch.Tensor:
    x, z = args[0].double(), args[1].double()
    out = torch.empty(4, 4, 16, dtype=torch.float64)
    out[:, 3] = z
    out[:, 0] = z
    out[:, 1] = torch.where((torch.arange(4) % 2 == 0)[:, None], x, z)
    t = torch.arange(16) % 3
    out[:, 2] = torch.where(t == 0, x, torch.where(t == 1, z, 2 * x))
    return out.reshape(4, 64)


# --------------------------------------------------------------------------- rotate

# triple buffering: two copies before the loop, one per trip, three futures rotated at
# the end of every trip; after the loop the first two hold the last tiles copied
TRIPLE_BUFFERING = """
__co__ void triple(f32 [48] a, global f32 [48] out) {
  parallel p by 1 : block {
    f0 = dma.copy a.subspan(8).at(0) => shared;
    f1 = dma.copy a.subspan(8).at(1) => shared;
    f2 = dma.any;
    foreach k in [4] {
      f2 = dma.copy a.subspan(8).at(k + 2) => shared;
      parallel t by 8 : thread
        out.at(k * 8 + t) = f0.data.at(t) + f1.data.at(t) * 2.0f - f2.data.at(t);
      rotate(f0, f1, f2);
    }
    parallel t by 8 : thread {
      out.at(32 + t) = f0.data.at(t);
      out.at(40 + t) = f1.data.at(t);
    }
  }
}
"""


def _triple_reference(args: list) -> torch.Tensor:
    tiles = args[0].double().reshape(6, 8)
    trips = [tiles[k] + 2 * tiles[k + 1] - tiles[k + 2] for k in range(4)]
    return torch.cat(trips + [tiles[4], tiles[5]])


# --------------------------------------------------------------------------- after

# `after g` orders a copy after copy g: the second half of the output is copied from the
# first half once g has written it
ORDERED_COPIES = """
__co__ void ordered(f32 [4, 16] a, global f32 [8, 16] out) {
  parallel p by 4 : block {
    f = dma.copy.async a.chunkat(p, _) => shared;
    g = dma.copy.async f.data => out.chunk(8, 1).at(p, 0) after f;
    wait f, g;
    dma.copy out.chunk(8, 1).at(p, 0) => out.chunk(8, 1).at(4 + p, 0) after g;
  }
}
"""


# --------------------------------------------------------------------------- assert, print

# a device assertion inside the threads, and a block-level one under a per-lane branch
DEVICE_ASSERT = """
__co__ void checked(s32 [24] a, global s32 [24] out) {
  parallel p by 2 : block
    parallel t by 12 : thread {
      assert(a.at(p * 12 + t) < 100, "values stay below 100");
      if (t % 2 == 0) {
        assert(a.at(p * 12 + t) > -100, "values stay above -100");
      }
      out.at(p * 12 + t) = a.at(p * 12 + t) * 3;
    }
}
"""

# printing on the host, in a block and in its threads, and at compile time
PRINTS = """
__co__ void shown(s32 [16] a, global s32 [16] out) {
  print("host", 3);
  println!("compile time");
  parallel p by 1 : block {
    println("block", p);
    parallel t by 16 : thread {
      print("value", a.at(t));
      println(a.at(t), "and", t);
      out.at(t) = a.at(t) - t;
    }
  }
}
"""


# --------------------------------------------------------------------------- scalars

# `++`/`--` on a mutable scalar (both spellings), a C cast (truncates toward zero), the
# element count `|x.span|` and a copy into a fresh global buffer read through its future
SCALARS = """
__co__ void updates(s32 [16] a, f32 [16] x, global s32 [2, 16] out) {
  parallel p by 1 : block {
    f = dma.copy a => global;
    parallel t by 16 : thread {
      mutable int k = t;
      k++;
      ++k;
      k--;
      --k;
      --k;
      out.at(0, t) = f.data.at(t) + k + |a.span|;
      out.at(1, t) = __to<"int">(x.at(t) * 4.0f) + __to<"unsigned char">(t + 250);
    }
  }
}
"""


# `++x` / `x--` inside expressions (the new value and the one before), and `|n|` of an
# integer that varies per thread
STEPS_IN_EXPRESSIONS = """
__co__ void steps(s32 [16] a, global s32 [3, 16] out) {
  parallel p by 1 : block
    parallel t by 16 : thread {
      mutable int s = a.at(t);
      out.at(0, t) = ++s * 2;
      out.at(1, t) = s-- + |3 * t + 1|;
      out.at(2, t) = s;
    }
}
"""


def _steps_reference(args: list) -> torch.Tensor:
    a, t = args[0].double(), torch.arange(16)
    return torch.stack([(a + 1) * 2, a + 1 + 3 * t + 1, a])


# A local holds the value it was given: later updates of the variable it was copied from
# (a mutable scalar, at block and at thread level) leave it unchanged. (The lowering once
# let `int b = a;` name `a` itself, so `a += 1` changed `b` too.)
SCALAR_COPIES = """
__co__ void copies(s32 [16] a, global s32 [4, 16] out, int n) {
  parallel p by 1 : block {
    mutable int base = n;
    int first = base;
    base = base * 2;
    parallel t by 16 : thread {
      mutable int s = a.at(t);
      int before = s;
      s += 7;
      later = s;
      s++;
      out.at(0, t) = first;
      out.at(1, t) = before;
      out.at(2, t) = later;
      out.at(3, t) = s + base;
    }
  }
}
"""


def _copies_reference(args: list) -> torch.Tensor:
    a, n = args[0].double(), args[2]
    return torch.stack([torch.full((16,), float(n), dtype=torch.float64), a, a + 7,
                        a + 8 + 2 * n])


# Products of symbolic dimensions on the right of `/`, `%` and `-` (the generated text
# of `2 * N * 4` lacked parentheses, so `x / (2 * N * 4)` ran as `(x / 8) * N`)
SYMBOLIC_PRODUCTS = """
__co__ void products(s32 [N] a, global s32 [4, N] out) {
  parallel p by 1 : block {
    foreach t in [N] {
      out.at(0, t) = 1000000 / (2 * N * 4) + a.at(t);
      out.at(1, t) = 1000003 % (3 * N) - a.at(t);
      out.at(2, t) = a.at(t) - 2 * N * N;
      out.at(3, t) = (a.at(t) + 7000) / (N * N);
    }
  }
}
"""


def _products_reference(args: list) -> torch.Tensor:
    a = args[0].double()
    n = a.numel()
    return torch.stack([1000000 // (8 * n) + a, 1000003 % (3 * n) - a, a - 2 * n * n,
                        torch.div(a + 7000, n * n, rounding_mode="trunc")])


# An `apply` temporary read from an accumulator element keeps that value after the
# element is rewritten in the same body (the gated MLP's backward writes one accumulator
# from the other's old value)
APPLY_TEMPORARIES = """
__co__ auto temps(f16 [16, 32] a, f16 [16, 32] b) {
  f32 [2, 16, 16] out;
  first = out.subspan(1, 16, 16).at(0, 0, 0).sqz();
  second = out.subspan(1, 16, 16).at(1, 0, 0).sqz();
  parallel p by 1 : block {
    acc = mma.fill.f32 0.0f;
    other = mma.fill.f32 0.0f;
    as = dma.copy a => shared;
    bs = dma.copy b => shared;
    parallel q by 1 : group-4 {
      ma = mma.load as.data;
      mb = mma.load bs.data;
      mma.row.row acc, ma, mb;
      mma.row.row other, ma, mb;
    }
    apply {i, j} in acc.span {
      t = acc.at(i, j);
      acc.at(i, j) = t * 2.0f;
      other.at(i, j) = t + 1.0f;
    }
    mma.store acc, first;
    mma.store other, second;
  }
  return out;
}
"""


def _temporaries_reference(args: list) -> torch.Tensor:
    product = args[0].double() @ args[1].double().T
    return torch.stack([2 * product, product + 1])


# `#+` / `#-` keep a bounded value and change its bound: `p #+ 4` tiles by 8, not 4
BOUND_ADJUSTMENTS = """
__co__ void widen(f32 [8, 16] a, global f32 [8, 16] out) {
  parallel p by 4 : block
    parallel t by 16 : thread {
      out.at(p #- 0, t) = a.at(p, t) + __to<f32>((t #+ 4) + (t #- 1));
      out.at(4 + p, t) = a.chunkat(p #+ 4, _).at(0, t);
    }
}
"""


def _bounds_reference(args: list) -> torch.Tensor:
    a = args[0].double()
    return torch.cat([a[:4] + 2 * torch.arange(16), a[:4]])


# `break` and `continue` in `foreach` loops: the same for every lane (block level), per
# lane on data, and `continue` in an inner loop of two
LOOP_EXITS = """
__co__ void scan(s32 [16, 8] a, global s32 [3, 16] out) {
  parallel p by 1 : block {
    mutable int total = 0;
    foreach k in [8] {
      if (k == 5) break;
      total += k;
    }
    parallel t by 16 : thread {
      mutable int s = 0;
      mutable int odd = 0;
      foreach k in [8] {
        if (a.at(t, k) < 0) break;
        s += a.at(t, k);
      }
      foreach j in [2] {
        foreach k in [8] {
          if (a.at(t, k) % 2 == 0) continue;
          odd += j + 1;
        }
      }
      out.at(0, t) = s;
      out.at(1, t) = odd;
      out.at(2, t) = total;
    }
  }
}
"""


def _exits_reference(args: list) -> torch.Tensor:
    a = args[0].double()
    negative = (a < 0).double()
    before = torch.cumsum(negative, dim=1) == 0  # elements before the first negative one
    summed = (a * before).sum(dim=1)
    odd = (torch.remainder(a, 2) != 0).sum(dim=1) * 3.0
    return torch.stack([summed, odd, torch.full((16,), 10.0)])


def _scalars_reference(args: list) -> torch.Tensor:
    a, x, t = args[0].double(), args[1].double(), torch.arange(16)
    return torch.stack([a + t - 1 + 16, torch.trunc(x * 4) + (t + 250) % 256])


# --------------------------------------------------------------------------- atomics

# compare-and-swap under a per-lane branch, with padding lanes (12 threads): lanes that do
# not run must not swap
MASKED_CAS = """
__co__ void claim(s32 [12] a, s32 [12] start, global s32 [12] out) {
  parallel p by 1 : block
    parallel t by 12 : thread {
      out.at(t) = start.at(t);
      if (t % 3 != 1) {
        old = __atomic_cas(&out.at(t), a.at(t), t * 5);
        out.at(t) = out.at(t) + old;
      }
    }
}
"""


def _cas_reference(args: list) -> torch.Tensor:
    a, start = args[0].double(), args[1].double()
    t = torch.arange(12)
    swapped = torch.where(start == a, t * 5.0, start)
    return torch.where(t % 3 != 1, swapped + start, start)


def _small(shape: tuple[int, ...]) -> torch.Tensor:
    """Integers from a small range, so that compare-and-swap finds some equal."""
    return torch.randint(0, 3, shape, dtype=torch.int32)


# `.sqz()` drops the dimensions of size 1: of a row tile and of a column tile, copied and
# read element by element (after a `.subspan`: a `.chunkat` alone does not name the extents
# `.sqz()` works on, CQ0317)
SQUEEZED = """
__co__ void squeeze(f32 [4, 1, 16] a, f32 [16, 4, 1] b, global f32 [8, 16] out) {
  parallel p by 4 : block {
    f = dma.copy a.subspan(1, 1, 16).at(p, 0, 0).sqz() => shared;
    g = dma.copy b.subspan(16, 1, 1).at(0, p, 0).sqz() => shared;
    parallel t by 16 : thread {
      out.at(p, t) = f.data.at(t);
      out.at(4 + p, t) = g.data.at(t) + b.subspan(16, 1, 1).at(0, p, 0).sqz().at(t);
    }
  }
}
"""

# a stride that depends on the data's size: the diagonal of a square matrix
STRIDED_DIAGONAL = """
__co__ void diagonal(f32 [N, N] a, global f32 [N] out) {
  parallel p by 1 : block
    dma.copy a.span_as([N * N]).view(8 : N + 1).from(0) => out;
}
"""


# --------------------------------------------------------------------------- buffer arrays

# elements of a buffer array read by index: a ring of two slots indexed like the copies
# into it, then a constant slot
RING_ELEMENTS = """
__co__ void ring(f32 [4, 16] a, global f32 [5, 16] out) {
  parallel p by 1 : block {
    shared f32 [1, 16] slots[2];
    foreach k in [4] {
      dma.copy a.chunkat(k, _) => slots[k % 2];
      parallel t by 16 : thread
        out.at(k, t) = slots[k % 2].at(0, t) + 1.0f;
    }
    dma.copy a.chunk(4, 1).at(0, 0) => slots[1];
    parallel t by 16 : thread
      out.at(4, t) = slots[1].at(0, t) * 2.0f;
  }
}
"""


def _outputs(*shapes: tuple[int, ...], dtype: torch.dtype = torch.float32) -> list:
    return [poison(torch.empty(shape, dtype=dtype)) for shape in shapes]


CASES = [
    Case("select_rows", SELECT_ROWS,
         lambda: [random((4, 16), torch.float32), *_outputs((4, 16))],
         lambda args: 2 * args[0].double()[[0, 2, 2, 0]], torch.float32, output=1),
    Case("squeezed", SQUEEZED,
         lambda: [random((4, 1, 16), torch.float32), random((16, 4, 1), torch.float32),
                  *_outputs((8, 16))],
         lambda args: torch.cat([args[0].double()[:, 0], 2 * args[1].double()[:, :, 0].T]),
         torch.float32, output=2),
    Case("ring_elements", RING_ELEMENTS,
         lambda: [random((4, 16), torch.float32), *_outputs((5, 16))],
         lambda args: torch.cat([args[0].double() + 1, 2 * args[0].double()[:1]]),
         torch.float32, output=1),
    Case("loop_exits", LOOP_EXITS,
         lambda: [torch.randint(-3, 10, (16, 8), dtype=torch.int32),
                  *_outputs((3, 16), dtype=torch.int32)], _exits_reference, torch.int32,
         output=1),
    Case("select_buffers", SELECT_BUFFERS,
         lambda: [random((2, 16), torch.float32), random((2, 16), torch.float32),
                  *_outputs((4, 16))], _select_buffers_reference, torch.float32, output=2),
    Case("strided_diagonal", STRIDED_DIAGONAL,
         lambda: [random((8, 8), torch.float32), *_outputs((8,))],
         lambda args: args[0].double().diagonal(), torch.float32, output=1),
    Case("bound_adjustments", BOUND_ADJUSTMENTS,
         lambda: [random((8, 16), torch.float32), *_outputs((8, 16))], _bounds_reference,
         torch.float32, output=1),
    Case("steps_in_expressions", STEPS_IN_EXPRESSIONS,
         lambda: [random((16,), torch.int32), *_outputs((3, 16), dtype=torch.int32)],
         _steps_reference, torch.int32, output=1),
    Case("masked_cas", MASKED_CAS,
         lambda: [_small((12,)), _small((12,)), *_outputs((12,), dtype=torch.int32)],
         _cas_reference, torch.int32, output=2),
    Case("scalar_copies", SCALAR_COPIES,
         lambda: [random((16,), torch.int32), *_outputs((4, 16), dtype=torch.int32), 9],
         _copies_reference, torch.int32, output=1),
    Case("symbolic_products", SYMBOLIC_PRODUCTS,
         lambda: [random((12,), torch.int32), *_outputs((4, 12), dtype=torch.int32)],
         _products_reference, torch.int32, output=1),
    Case("apply_temporaries", APPLY_TEMPORARIES,
         lambda: [random((16, 32), torch.float16), random((16, 32), torch.float16)],
         _temporaries_reference, torch.float32),
    Case("scalars", SCALARS,
         lambda: [random((16,), torch.int32), random((16,), torch.float32),
                  *_outputs((2, 16), dtype=torch.int32)], _scalars_reference, torch.int32,
         output=2),
    Case("device_assert", DEVICE_ASSERT,
         lambda: [random((24,), torch.int32), *_outputs((24,), dtype=torch.int32)],
         lambda args: args[0].double() * 3, torch.int32, output=1),
    Case("prints", PRINTS,
         lambda: [random((16,), torch.int32), *_outputs((16,), dtype=torch.int32)],
         lambda args: args[0].double() - torch.arange(16), torch.int32, output=1),
    Case("ordered_copies", ORDERED_COPIES,
         lambda: [random((4, 16), torch.float32), *_outputs((8, 16))],
         lambda args: args[0].double().repeat(2, 1), torch.float32, output=1),
    Case("triple_buffering", TRIPLE_BUFFERING,
         lambda: [random((48,), torch.float32), *_outputs((48,))], _triple_reference,
         torch.float32, output=1),
    Case("select_values", SELECT_VALUES,
         lambda: [random((4, 16), torch.float32), random((4, 16), torch.float32),
                  *_outputs((4, 64))], _select_reference, torch.float32, output=2),
    Case("strided_views", STRIDED_VIEWS,
         lambda: [random((8, 16), torch.float32), *_outputs((12, 8))],
         strided_views_reference, torch.float32, output=1),
    Case("strided_elements", STRIDED_ELEMENTS,
         lambda: [random((6, 10), torch.int32), *_outputs((10, 6), dtype=torch.int32)],
         lambda args: args[0].double().t() + 1, torch.int32, output=1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_results(case: Case) -> None:
    check(case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_results_on_the_gpu(case: Case) -> None:
    check(case, "cuda")


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_compiles_for_sm90(case: Case) -> None:
    assert_compiles_for_sm90(case.source, case.id)


@pytest.mark.parametrize("bad", [5, 18])
def test_device_assert_fires(bad: int) -> None:
    """A failing assertion stops both the reference interpreter and the kernel."""
    a = random((24,), torch.int32)
    a[bad] = 100 if bad % 2 else -100  # (odd lanes only check the upper bound)
    with pytest.raises(AssertionFailed, match="values stay"):
        interpret_source(DEVICE_ASSERT, [a, torch.empty(24, dtype=torch.int32)])
    with pytest.raises(KernelError, match="values stay"):
        croqtile.compile(DEVICE_ASSERT)(a, torch.empty(24, dtype=torch.int32))


def test_prints_show_the_values(capfd: pytest.CaptureFixture[str]) -> None:
    a = random((16,), torch.int32)
    croqtile.compile(PRINTS)(a, torch.empty(16, dtype=torch.int32))
    printed = capfd.readouterr().out
    assert "host" in printed and "block" in printed and "compile time" not in printed
    assert str(a.tolist()[:3]).strip("[]").replace(",", "") in " ".join(printed.split())
