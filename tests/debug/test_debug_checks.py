"""``debug=True``: bounds checks on computed indices and tile copies, run on CPU tensors
(Triton's interpreter), where a failed check raises ``croqtile.DeviceAssertionError``
naming the Croqtile line and the offending value."""

from __future__ import annotations

import warnings

import pytest
import torch

import croqtile

from ..e2e.checks import DATA, poison, random

GATHER = """\
// y = x[idx]: the index comes from data
__co__ void gather(global f32 [N] x, global s32 [M] idx, global f32 [M] y) {
  parallel p by cdiv(M, 16) : block {
    parallel t by 16 : thread {
      y.at(p # t) = x.at(idx.at(p # t));
    }
  }
}
"""
GATHER_LINE = 5


def _gather_inputs(n: int, m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = random((n,), torch.float32)
    idx = torch.randint(0, n, (m,), dtype=torch.int32)
    return x, idx, poison(torch.empty(m))


def test_out_of_range_gather_names_the_line_and_value() -> None:
    mod = croqtile.compile(GATHER, filename="gather.co", debug=True)
    x, idx, y = _gather_inputs(32, 48)
    idx[17] = 40
    with pytest.raises(croqtile.DeviceAssertionError) as info:
        mod.gather(x, idx, y)
    message = str(info.value)
    assert message.startswith(f"gather.co:{GATHER_LINE}: index out of range in x.at(idx.at(p # t))")
    assert "not in [0, N)" in message
    assert message.endswith("offending value(s): 40")
    assert "Traceback" not in message and "InterpreterError" not in message
    assert isinstance(info.value, croqtile.KernelError)


def test_negative_index_is_caught() -> None:
    mod = croqtile.compile(GATHER, filename="gather.co", debug=True)
    x, idx, y = _gather_inputs(32, 16)
    idx[3] = -2
    with pytest.raises(croqtile.DeviceAssertionError, match=r"offending value\(s\): -2$"):
        mod.gather(x, idx, y)


@pytest.mark.parametrize("m", [48, 37])  # (37: a tail block whose lanes past M are masked)
def test_in_range_gather_runs_unchanged_in_debug_mode(m: int) -> None:
    mod = croqtile.compile(GATHER, filename="gather.co", debug=True)
    assert "tl.device_assert" in mod.gather.triton_source
    x, idx, y = _gather_inputs(29, m)
    mod.gather(x, idx, y)
    expected = x.double()[idx.long()]
    assert torch.equal(y.double(), expected)


def _schedule(m: int, n: int, t: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    tiles = [(i, j) for i in range(m // t) for j in range(n // t)]
    return (torch.tensor([i for i, _ in tiles], dtype=torch.int32),
            torch.tensor([j for _, j in tiles], dtype=torch.int32))


def test_schedule_table_out_of_range_is_caught_at_the_copy() -> None:
    name = "tests/data/persistent_schedule.co"
    mod = croqtile.compile((DATA / "persistent_schedule.co").read_text(), filename=name,
                           debug=True)
    a, b = random((48, 32), torch.float16), random((32, 32), torch.float16)
    order_m, order_n = _schedule(48, 32)
    c = poison(torch.empty(48, 32, dtype=torch.float16))
    mod.scheduled(a, b, c, order_m, order_n)  # in range: the GEMM, checked
    expected = a.double() @ b.double().T
    assert torch.linalg.norm(c.double() - expected) / torch.linalg.norm(expected) < 1e-2
    order_n[3] = 7  # tile column 7 of a 2-column grid
    with pytest.raises(croqtile.DeviceAssertionError) as info:
        mod.scheduled(a, b, c, order_m, order_n)
    message = str(info.value)
    # line 16: the MMA whose operand reads the copied tile of b
    assert message.startswith(f"{name}:16: a tile read of 'b' out of range: its origin in "
                              "dimension 0 not in [0, N)")
    assert message.endswith("offending value(s): 112")


def test_environment_variable_turns_debug_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROQTILE_DEBUG", "1")
    on = croqtile.compile(GATHER, filename="gather.co").gather.triton_source
    assert "tl.device_assert" in on and "gather.co:5: index out of range" in on
    off = croqtile.compile(GATHER, filename="gather.co", debug=False).gather.triton_source
    assert "tl.device_assert" not in off
    monkeypatch.setenv("CROQTILE_DEBUG", "0")
    assert croqtile.compile(GATHER, filename="gather.co").gather.triton_source == off


def test_load_takes_the_option(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROQTILE_DEBUG", raising=False)
    path = tmp_path / "gather.co"
    path.write_text(GATHER)
    assert "tl.device_assert" in croqtile.load(path, debug=True).gather.triton_source
    assert "tl.device_assert" not in croqtile.load(path).gather.triton_source


def test_debug_off_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROQTILE_DEBUG", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = croqtile.compile(GATHER).gather.triton_source
        assert croqtile.compile(GATHER, debug=False).gather.triton_source == default
    assert "CROQTILE_CHECKED_VALUES" not in default


def test_debug_takes_a_bool() -> None:
    with pytest.raises(ValueError, match="debug='yes': expected True or False"):
        croqtile.Options(debug="yes")  # type: ignore[arg-type]


def _double_buffer(extra_wait: bool) -> str:
    src = (DATA / "double_buffer_select.co").read_text()
    tail = "      wait cur;\n      parallel t by 16 : thread\n        out.at(p, 7, t)"
    assert tail in src
    return src.replace(tail, tail.replace("wait cur;\n", "wait cur;\n      wait nxt;\n"))\
        if extra_wait else src


def test_futures_protocol_holds_in_a_double_buffered_loop() -> None:
    mod = croqtile.compile(_double_buffer(False), filename="db.co", debug=True)
    source = mod.twobufs.triton_source
    assert "cur_in_flight" in source and "nxt_in_flight" in source
    x = random((4, 8, 16), torch.int32)
    assert torch.equal(mod.twobufs(x), x * 2)


def test_wait_on_a_future_not_in_flight_is_caught_at_run_time() -> None:
    # after the loop's last swap, `nxt` names the copy the loop already waited: the
    # checker cannot tell (the names change at run time), the debug check can
    mod = croqtile.compile(_double_buffer(True), filename="db.co", debug=True)
    with pytest.raises(croqtile.DeviceAssertionError,
                       match=r"^db\.co:18: wait on future 'nxt', which is not in flight"):
        mod.twobufs(random((4, 8, 16), torch.int32))
