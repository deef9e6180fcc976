"""``debug=True`` checks every element index it cannot prove in range, not only those read
from data: a lane index plus a run-time offset (``x.at(p # t + off)``), a local holding
one, and views whose origin comes from a scalar argument (``x.subspan(16).at(p + off)``,
``x.view(16).from(off)``). Out of range, a read raises ``DeviceAssertionError`` naming the
Croqtile line instead of silently reading 0.0; in range (tail blocks included), the
program runs and gives the right values."""

from __future__ import annotations

import pytest
import torch

import croqtile

# y = x shifted by a run-time offset; M outputs, so that a tail block (M % 16) is covered
SHIFT = """\
__co__ void shift(global f32 [N] x, global f32 [M] y, int off) {
  parallel p by cdiv(M, 16) : block {
    parallel t by 16 : thread {
      y.at(p # t) = READ;
    }
  }
}
"""
# the read, and how many elements each unit of `off` shifts it by
READS = {
    "offset": ("x.at(p # t + off)", 1),
    "offset first": ("x.at(off + p # t)", 1),
    "subspan": ("x.subspan(16).at(p + off).at(t)", 16),
    "view": ("x.view(16).from(p # t + off).at(0)", 1),
}
LINE = 4


def _shift(read: str) -> croqtile.Module:
    return croqtile.compile(SHIFT.replace("READ", read), filename="shift.co", debug=True)


def _run(module: croqtile.Module, n: int, m: int, off: int) -> tuple[torch.Tensor,
                                                                             torch.Tensor]:
    x = torch.arange(n, dtype=torch.float32)
    y = torch.full((m,), -1.0)
    module.shift(x, y, off)
    return x, y


@pytest.mark.parametrize("name", READS)
def test_reading_past_the_end_with_a_runtime_offset_raises(name: str) -> None:
    read, _ = READS[name]
    module = _shift(read)
    assert "tl.device_assert" in module.shift.triton_source
    with pytest.raises(croqtile.DeviceAssertionError) as info:
        _run(module, 128, 128, 5)  # the last reads run past the end
    message = str(info.value)
    assert message.startswith(f"shift.co:{LINE}: index out of range in {read}")
    assert "not in [0, N)" in message
    assert "offending value(s): 128, 129, 130, 131, 132" in message


@pytest.mark.parametrize("name", READS)
@pytest.mark.parametrize("n, m, off", [(128, 128, 0), (208, 123, 5), (213, 128, 5), (37, 37, 0)])
def test_in_range_reads_run_and_are_right(name: str, n: int, m: int, off: int) -> None:
    # (123 and 37 outputs: a tail block whose lanes past M read past x and are masked)
    read, scale = READS[name]
    x, y = _run(_shift(read), n, m, off)
    assert torch.equal(y, x[off * scale:off * scale + m])


def test_a_negative_offset_is_caught() -> None:
    with pytest.raises(croqtile.DeviceAssertionError, match=r"offending value\(s\): -2, -1$"):
        _run(_shift(READS["offset"][0]), 128, 128, -2)


def test_a_local_holding_an_offset_index_is_checked() -> None:
    module = croqtile.compile(SHIFT.replace("y.at(p # t) = READ;",
                                            "j = p # t + off;\n      y.at(p # t) = x.at(j);"),
                              filename="shift.co", debug=True)
    with pytest.raises(croqtile.DeviceAssertionError,
                       match=r"^shift\.co:5: index out of range in x\.at\(j\)"):
        _run(module, 128, 128, 3)
    x, y = _run(module, 128, 125, 3)
    assert torch.equal(y, x[3:])


def test_a_lane_index_past_the_end_by_one_is_caught() -> None:
    # no data at all: `p # t + 1` keeps the bound of `p # t` in the checker's types, but
    # not its range
    with pytest.raises(croqtile.DeviceAssertionError, match=r"offending value\(s\): 64$"):
        _run(_shift("x.at(p # t + 1)"), 64, 64, 0)


def test_without_debug_nothing_is_checked() -> None:
    module = croqtile.compile(SHIFT.replace("READ", READS["offset"][0]), filename="shift.co")
    assert "device_assert" not in module.shift.triton_source
    x = torch.arange(128, dtype=torch.float32)
    y = torch.full((128,), -1.0)
    module.shift(x, y, 5)  # the masked reads past the end give 0.0, as before
    assert torch.equal(y[-5:], torch.zeros(5)) and torch.equal(y[:-5], x[5:])


def test_a_checked_read_under_a_condition_on_rows_and_columns() -> None:
    """The additive mask of attention.co is read at `first_row + r` under `if (first_row +
    r < L && ...)` inside `apply {r, c}`: the check (over rows) and the condition (over
    rows and columns, 64 x 32 here) broadcast lane by lane, so the rows past L that the
    condition leaves out are not checked."""
    from croqtile.nn import attention_ops, kernels

    defines = dict(attention_ops.attention_defines("f32", 32, True, (
        ("ROWS", 64), ("COLS", 32), ("WG_ROWS", 64))))
    module = croqtile.compile((kernels.KERNELS / "attention.co").read_text(),
                              defines={**defines, "NAME": "masked"}, debug=True)
    source = module.masked.triton_source
    assert "index out of range in m_head.at(first_row + r, kt * 32 + c)" in source
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 32) for n in (40, 45, 45))
    mask = torch.randn(1, 2, 40, 45)
    scale = torch.full((1,), 32 ** -0.5 * attention_ops.LOG2E)
    out = module.masked(q, k, v, mask, False, scale)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask.double())
    assert torch.allclose(out.transpose(1, 2).double(), expected, atol=1e-4)


ROWS = """\
__co__ void rows(global f32 [R, C] x, global f32 [R, 8] y, int off, int live) {
  parallel p by 1 : block {
    parallel {i, j} by [16, 8] : thread {
      if (i < live)
        y.at(i, j) = x.at(i, j + off);
    }
  }
}
"""


def test_an_offset_column_under_a_condition_on_rows() -> None:
    module = croqtile.compile(ROWS, filename="rows.co", debug=True)
    x = torch.arange(16 * 12, dtype=torch.float32).reshape(16, 12)
    y = torch.full((16, 8), -1.0)
    module.rows(x, y, 4, 10)  # columns 4..11 of the first 10 rows: in range
    assert torch.equal(y[:10], x[:10, 4:]) and torch.equal(y[10:], torch.full((6, 8), -1.0))
    with pytest.raises(croqtile.DeviceAssertionError,
                       match=r"^rows\.co:5: index out of range in x\.at\(i, j \+ off\): index 1 "
                             r"\(j \+ off\) not in \[0, C\); offending value\(s\): 12$"):
        module.rows(x, y, 5, 10)
