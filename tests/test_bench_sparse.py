"""``croqtile bench sparse``: the cases (the issue's shapes), the CPU run of the tiny cases
end to end through the command line (correctness only, the CSV and JSON written), and
the inputs a case prepares (a 2:4 A, its packed form, the float64 reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from croqtile.bench import sparse as sparse_sweep
from croqtile.bench import report
from croqtile.bench.harness import Case
from croqtile.cli import main
from croqtile.sparse import decompress_2_4


def test_the_cases_are_the_issue_shapes() -> None:
    cases = sparse_sweep.sparse_cases()
    shapes = {(c.M, c.N, c.K) for c in cases}
    assert {(4096, 4096, 4096), (8192, 8192, 8192)} <= shapes
    # the Llama-3-8B projections with 4096 tokens, the weight sparse: M = N_proj
    assert {(6144, 4096, 4096), (4096, 4096, 4096), (28672, 4096, 4096),
            (4096, 4096, 14336)} <= shapes
    assert {c.dtype for c in cases} == {"f16", "bf16"} and len(cases) == 12
    assert all(c.sweep == "sparse" and c.kernel == "gemm_sp" for c in cases)
    assert [(c.M, c.N, c.K) for c in sparse_sweep.quick_cases(("f16",))] == [(8192, 8192, 8192)]


def test_a_case_prepares_a_sparse_product() -> None:
    case = Case("sparse", "gemm_sp", "f16", 40, 24, 32)
    calls = []

    def ours(packed: torch.Tensor, meta: torch.Tensor, b: torch.Tensor,
             out: torch.Tensor) -> None:
        calls.append(1)
        out.copy_((decompress_2_4(packed, meta).double() @ b.double().T).half())

    prepared = sparse_sweep.prepare_sparse(case, ours, "cpu")
    assert prepared.compiled is None  # torch's semi-structured tensors need a GPU
    prepared.ours()
    reference = prepared.reference()
    assert calls == [1] and reference.shape == (40, 24)
    assert torch.allclose(prepared.output.double(), reference, rtol=1e-2, atol=1e-2)
    # the baseline: the dense product of the same A (cuBLAS on a GPU)
    assert torch.allclose(prepared.baseline().double(), reference, rtol=1e-2, atol=1e-2)


def test_cli_bench_sparse_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sparse", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sparse.csv", "sparse.json"]
    rows = report.read_csv(tmp_path / "sparse.csv")
    assert len(rows) == 2 and all(r["ok"] == "True" and r["ratio"] == "" for r in rows)
    assert {r["dtype"] for r in rows} == {"f16", "bf16"}
    assert all(0 < float(r["rel_error"]) < 1e-2 for r in rows)
    doc = json.loads((tmp_path / "sparse.json").read_text())
    assert "semi-structured" in json.dumps(doc)
    assert "sparse" in capsys.readouterr().out

