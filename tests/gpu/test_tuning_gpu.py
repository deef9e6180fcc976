"""On the GPU, a search over a short kernel times its candidates replayed from CUDA graphs
(croqtile.tuning.tuner.SearchTimer), the hand-written CUDA GEMM among them, and the chosen
configuration computes the product."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import croqtile
from croqtile.tuning import tuner as tuning
from ..e2e.checks import assert_close, poison, random

GEMM = (Path(__file__).resolve().parents[2] / "croqtile/bench/kernels/gemm.co").read_text()


@pytest.mark.gpu
def test_a_short_search_times_in_cuda_graphs(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROQTILE_CACHE_DIR", str(tmp_path))
    candidates = [{"num_warps": 4}, {"num_warps": 8, "persistent": True}]
    hopper = torch.cuda.get_device_capability() == (9, 0) and shutil.which("nvcc")
    if hopper:
        candidates.append({"backend": "cuda", "num_warps": 8, "persistent": True})
    captured: list[float] = []
    failed: list[BaseException] = []

    def graph_timer(run):  # the real one, watched: every candidate must be captured
        try:
            captured.append(real(run))
        except BaseException as exc:
            failed.append(exc)
            raise
        return captured[-1]

    real = tuning.graph_timer
    monkeypatch.setattr(tuning, "graph_timer", graph_timer)
    fn = croqtile.compile(GEMM, autotune="quick", tunables=candidates).gemm
    a, b = random((512, 512), torch.float16, "cuda"), random((512, 512), torch.float16, "cuda")
    out = poison(torch.empty(512, 512, dtype=torch.float16, device="cuda"))
    fn(a, b, out)
    assert_close(out, a.double() @ b.double().T, torch.float16)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "tuning").glob("*.json")]
    assert record["timing"] == "cuda graph"
    # every candidate and the default configuration (timed first, the reference)
    assert len(record["timings"]) == len(candidates) + 1 and not record["pruned"]
    assert not failed and len(captured) >= len(candidates)
    assert all(0 < ms < 0.1 for _, ms in record["timings"])
    # the chosen configuration runs from now on, outside any graph
    out2 = poison(torch.empty_like(out))
    fn(a, b, out2)
    assert_close(out2, a.double() @ b.double().T, torch.float16)
