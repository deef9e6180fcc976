"""``fill_buffers``: a function-scope buffer without an initialiser is zero-filled unless
the kernel provably writes all of it first (the default); ``fill_buffers=False`` makes it
uninitialised (``torch.empty``), as the language allows, and with ``debug`` its
floating-point elements start as NaN, so that an element left unwritten shows."""

from __future__ import annotations

import pytest
import torch

import croqtile

from .checks import random

# writes the first half of y only (the second half is undefined by the language)
FIRST_HALF = """
__co__ auto first_half(f32 [N] x, s32 [N] n) {
  f32 [N] y;
  s32 [N] m;
  parallel p by 1 : block {
    foreach i in [N / 2] {
      y.at(i) = x.at(i) * 2.0f;
      m.at(i) = n.at(i) + 1;
    }
  }
  return y;
}
"""


def _host(module: croqtile.Module) -> str:
    return module.first_half.triton_source.split("def host_")[1]


def test_by_default_unwritten_elements_are_zero() -> None:
    module = croqtile.compile(FIRST_HALF)
    x, n = random((10,), torch.float32), random((10,), torch.int32)
    assert "y = torch.zeros(" in _host(module)
    y = module.first_half(x, n)
    assert torch.equal(y[:5], x[:5] * 2) and torch.equal(y[5:], torch.zeros(5))


def test_without_the_fill_the_buffer_is_made_uninitialised() -> None:
    module = croqtile.compile(FIRST_HALF, fill_buffers=False)
    host = _host(module)
    assert "y = torch.empty(" in host and "m = torch.empty(" in host
    assert "torch.zeros(" not in host
    x, n = random((10,), torch.float32), random((10,), torch.int32)
    assert torch.equal(module.first_half(x, n)[:5], x[:5] * 2)


def test_under_debug_unwritten_floats_are_nan() -> None:
    module = croqtile.compile(FIRST_HALF, fill_buffers=False, debug=True)
    host = _host(module)
    assert "y = torch.full(" in host and "float('nan')" in host
    assert "m = torch.zeros(" in host  # (no NaN for integers: kept zero)
    x, n = random((10,), torch.float32), random((10,), torch.int32)
    y = module.first_half(x, n)
    assert torch.equal(y[:5], x[:5] * 2) and bool(torch.isnan(y[5:]).all())


TILED_COPY = """
__co__ auto tiled(f32 [M, N] x) {
  f32 [M, N] y;
  parallel {b, c} by [cdiv(M, 16), cdiv(N, 16)] : block {
    t = dma.copy.zfill x.subspan(16, 16).at(b, c) => shared;
    dma.copy t => y.subspan(16, 16).at(b, c);
  }
  return y;
}
"""


def test_a_buffer_the_kernel_provably_writes_is_never_filled() -> None:
    for options in ({}, {"fill_buffers": False}, {"fill_buffers": False, "debug": True}):
        module = croqtile.compile(TILED_COPY, **options)
        assert "y = torch.empty(" in module.tiled.triton_source.split("def host_")[1]
        x = random((40, 24), torch.float32)
        assert torch.equal(module.tiled(x), x)


def test_the_option_takes_a_bool() -> None:
    with pytest.raises(ValueError, match="fill_buffers=0: expected True or False"):
        croqtile.compile(FIRST_HALF, fill_buffers=0)
