"""Which parameters a function writes in place (``frontend.sema.effects``): what becomes
``Tensor(a!)`` in a registered operator's schema."""

from __future__ import annotations

import pytest

from croqtile.runtime.driver import run_pipeline
from croqtile.frontend.sema.effects import written_parameters
from croqtile.frontend.source import Source


def _written(text: str) -> set[str]:
    (function,) = run_pipeline(Source(text, "<test>"), None, None).functions
    return set(written_parameters(function.checked))


CASES = {
    # an element write through a view alias of the parameter
    "alias": ("""
__co__ void f(global f32 [B, N] x, global f32 [B, N] y) {
  parallel b by B : block {
    yb = y.subspan(1, N).at(b, 0).sqz();
    parallel i by N : thread
      yb.at(i) = x.at(b, i);
  }
}""", {"y"}),
    # an atomic whose index reads another parameter: only its target is written
    "atomic": ("""
__co__ void f(global s32 [N] x, global s32 [8] h) {
  parallel p by N : block
    __atomic_add(&h.at(x.at(p)), 1);
}""", {"h"}),
    # a copy into a shared buffer and writes of registers are not the caller's
    "local": ("""
__co__ void f(global f32 [64] x, global f32 [64] y) {
  parallel p by 1 : block {
    xs = dma.copy x => shared;
    parallel t by 64 : thread
      y.at(t) = xs.data.at(t) + 1.0f;
  }
}""", {"y"}),
    # a parameter without `global` is copied before it is written: the caller sees nothing;
    # a by-reference one is written back
    "copied": ("""
__co__ void f(f32 [8] a, f32 [8]& b) {
  parallel t by 8 : block {
    a.at(t) = 1.0f;
    b.at(t) = a.at(t);
  }
}""", {"b"}),
    # an mma.store into a view of the output
    "mma": ("""
__co__ void f(global f16 [32, 16] a, global f16 [16, 16] b, global f32 [32, 16] c) {
  parallel one by 1 : block {
    parallel g by 1 : group {
      acc = mma.fill.f32 0.0f;
      ma = mma.load a.subspan(16, 16).at(0, 0);
      mb = mma.load b;
      mma.row.row acc, ma, mb;
      mma.store acc, c.subspan(16, 16).at(1, 0);
    }
  }
}""", {"c"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_written_parameters(name: str) -> None:
    text, expected = CASES[name]
    assert _written(text) == expected
