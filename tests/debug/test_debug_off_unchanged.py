"""``debug`` off costs nothing: the generated Triton of representative kernels is
byte-identical to what the compiler produced before the debug option existed (SHA-256
prefixes taken from that compiler). A change here that is meant must update the hashes;
one that is not means debug instrumentation leaked into ordinary kernels."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import pytest

import croqtile

DATA = Path(__file__).resolve().parents[1] / "data"

PINNED = {
    "atomic_hist.co:hist": "e05bbd6667abe4c3",
    "persistent_schedule.co:scheduled": "7b3be4f3b000ad2d",
    "chunk_at.co:swap_chunks": "bd5e2ff56e1bb16f",
    "dma_copy_2d.co:copy2d": "89dd2802642259f7",
    "dma_pad_2d.co:pad": "6f1ae864eafe534f",
    "mma_row_col_groups.co:matmul_group_rc": "50fb38e401decd49",
    "pipelined_gemm.co:pipelined": "339740128a1792e1",
    "row_softmax.co:softmax": "64286606cee1ce34",
    "rotate_futures.co:rotated": "f5873fed5ae1f219",
    "seed000_sm90_gemm.co:matmul": "0258de7f9dc8e975",
    "tma_gemm_warpgroup.co:gemm": "328f6562f9cbe287",
    "assert_holds.co:squares": "dba015dfc1a062f6",
    "subspan_step_at.co:stepped": "9185e0cfe7bc7629",
    "local_buffer.co:local_tiles": "8d87b717709b85a5",
    "double_buffer_select.co:twobufs": "1791d658fc560fc2",
}


def _sources(name: str, **options: object) -> dict[str, str]:
    text = (DATA / name).read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = croqtile.compile(text, filename=f"tests/data/{name}", **options)
    return {f"{name}:{fn}": f.triton_source for fn, f in module.functions.items()}


@pytest.mark.parametrize("name", sorted({key.split(":")[0] for key in PINNED}))
def test_debug_off_source_is_unchanged(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROQTILE_DEBUG", raising=False)
    for key, source in _sources(name).items():
        assert not source.startswith("# '"), "pin a kernel compiled once, not per call"
        assert "device_assert" not in source or name == "assert_holds.co"
        assert hashlib.sha256(source.encode()).hexdigest()[:16] == PINNED[key], key
