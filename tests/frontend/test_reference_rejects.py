"""Programs the reference compiler rejects and this one used to accept (issue 19, item 4):
unknown device targets, signed integer literals past s64, `.sqz()` without a shaping step
before it, and TMA boxes sized by values computed in the kernel. Each is reported on the
line that holds the mistake; the nearby correct programs still compile."""

from __future__ import annotations

import pytest

from croqtile.runtime.driver import check_source

DEVICE = """\
__co__ void twice(global f32 [64] x, global f32 [64] y) {
  parallel by 1 : device(DEV) {
    parallel p by 64 : thread
      y.at(p) = x.at(p) * 2.0f;
  }
}
"""

LITERAL = """\
__co__ void mask(global s64 [64] x, global s64 [64] y) {
  parallel p by 64
    y.at(p) = x.at(p) & LIT;
}
"""

SQUEEZE = """\
__co__ void rows(global f32 [8, 16] x, global f32 [8, 16] y) {
  parallel p by 8 : block {
    t = dma.copy x.TILE.sqz() => shared;
    dma.copy t => y.subspan(1, 16).at(p, 0).sqz();
  }
}
"""

# The box's first extent is at most 64 (a bound the checker derives) but its value is only
# known inside the kernel: a DMA masks the rest, a TMA descriptor cannot be encoded.
RAGGED = """\
__co__ void ragged(global f16 [M, 64] x, global f16 [M, 64] y) {
  parallel b by cdiv(M, 64) : block {
    shared f16 [64, 64] s;
    n = (64 < M - b * 64) ? 64 : M - b * 64;
    COPY x.view(n, 64).from(b * 64, 0) => s;
    dma.copy s.view(n, 64).from(0, 0) => y.view(n, 64).from(b * 64, 0);
  }
}
"""


def found(text: str) -> list[tuple[str, str, int]]:
    return [(d.code, d.severity, d.line) for d in check_source(text, filename="t.co")]


def errors(text: str) -> list[tuple[str, int]]:
    return [(code, line) for code, severity, line in found(text) if severity == "error"]


def test_unknown_device_target_is_rejected_on_its_level() -> None:
    [diag] = check_source(DEVICE.replace("DEV", "unknown_target"), filename="t.co")
    assert (diag.code, diag.line) == ("CQ0623", 2)
    assert "'unknown_target'" in diag.message and diag.hint


def test_known_device_targets_are_accepted() -> None:
    # (one test, not parametrized: a test id naming "gpu" is taken for a GPU-only test)
    for name in ("cpu", "gpu", "hetero"):
        assert errors(DEVICE.replace("DEV", name)) == [], name


@pytest.mark.parametrize("literal", ["9223372036854775808", "-9223372036854775808",
                                     "0x8000000000000000", "18446744073709551615"])
def test_signed_literal_past_s64_is_rejected(literal: str) -> None:
    [diag] = check_source(LITERAL.replace("LIT", literal), filename="t.co")
    assert (diag.code, diag.line) == ("CQ0104", 3)
    assert "signed 64-bit" in diag.message and "`u` suffix" in (diag.hint or "")


@pytest.mark.parametrize("literal", ["9223372036854775807", "-9223372036854775807",
                                     "0x7fffffffffffffff", "9223372036854775808u",
                                     "18446744073709551615u", "0xffffffffffffffffu"])
def test_literals_that_fit_their_type_are_accepted(literal: str) -> None:
    assert errors(LITERAL.replace("LIT", literal)) == []


def test_sqz_after_chunkat_alone_is_rejected() -> None:
    assert errors(SQUEEZE.replace("TILE", "chunkat(p, _)")) == [("CQ0317", 3)]
    assert errors(SQUEEZE.replace("TILE", "subspan(1, 16).at(p, 0).chunkat(_, _)")) == []


@pytest.mark.parametrize("tile", ["subspan(1, 16).at(p, 0)", "view(1, 16).from(p, 0)",
                                  "span_as([8, 16]).subspan(1, 16).at(p, 0)"])
def test_sqz_after_a_shaping_step_is_accepted(tile: str) -> None:
    assert errors(SQUEEZE.replace("TILE", tile)) == []


def test_tma_box_from_a_kernel_value_is_rejected_on_the_copy() -> None:
    assert errors(RAGGED.replace("COPY", "tma.copy")) == [("CQ0415", 5)]


def test_dma_of_a_bounded_runtime_extent_still_compiles() -> None:
    assert errors(RAGGED.replace("COPY", "dma.copy")) == []
