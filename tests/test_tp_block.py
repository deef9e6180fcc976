"""bench/tp_block.py on the CPU: the tensor-parallel block's sharding gives the
single-device result (ranks simulated in one process), and one rank of a real process
group (gloo, world size 1) runs the script's checked path. The NCCL run on two GPUs is
the script itself (torchrun)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tp() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tp_block", ROOT / "bench" / "tp_block.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tp_block"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_shards_partition_the_weights(tp: ModuleType) -> None:
    cfg = tp.TINY
    weights = tp.make_weights(cfg, "cpu")
    parts = [tp.shard(weights, rank, 2) for rank in range(2)]
    for name in ("q", "k", "v", "gate", "up"):
        assert torch.equal(torch.cat([p[name] for p in parts], dim=0), weights[name])
    for name in ("o", "down"):
        assert torch.equal(torch.cat([p[name] for p in parts], dim=1), weights[name])
    assert parts[0]["q"].shape == (cfg.hidden // 2, cfg.hidden)


@pytest.mark.parametrize("ops_name", ["torch", "croqtile"])
def test_two_simulated_ranks_give_the_single_device_block(tp: ModuleType,
                                                          ops_name: str) -> None:
    cfg = tp.TINY
    ops = tp.torch_ops() if ops_name == "torch" else tp.croqtile_ops()
    weights = tp.make_weights(cfg, "cpu", seed=3)
    x = tp.make_input(cfg, "cpu", seed=4)
    if ops_name == "croqtile":  # the croqtile kernels take these calls (no fallback)
        from croqtile.nn import functional as cf

        heads = x.view(cfg.batch, cfg.seq, cfg.heads, cfg.head_dim).transpose(1, 2)[:, :1]
        assert cf.uncovered_linear(x, weights["q"][: cfg.hidden // 2], None, "silu") is None
        assert cf.uncovered_attention(heads, heads, heads, None, 0.0, True, False) is None
        assert cf.uncovered_rms_norm(x, (cfg.hidden,), weights["norm1"]) is None
    want = tp.reference(x, weights, cfg)
    parallel = tp.simulate(x, weights, cfg, ops, world=2)
    alone = tp.single(x, weights, cfg, ops)
    assert parallel.shape == x.shape and bool(torch.isfinite(parallel).all())
    assert tp.relative_error(parallel, want) <= 1e-4
    assert tp.relative_error(alone, want) <= 1e-4
    assert tp.relative_error(parallel, alone) <= 1e-4


def test_one_rank_of_a_gloo_process_group(tp: ModuleType, tmp_path: Path) -> None:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}",
                            rank=0, world_size=1)
    try:
        report = tp.run_rank(tp.TINY, torch.device("cpu"), reps=1, warmup=0)
    finally:
        dist.destroy_process_group()
    assert report["ok"] and report["world"] == 1
    for name in ("croqtile", "torch"):
        result = report["results"][name]
        assert result["error_vs_float64"] <= 1e-4
        assert result["error_vs_single_gpu"] <= 1e-4
        assert result["ms"] > 0 and result["tokens_per_s"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_torchrun_two_gpus(tmp_path: Path) -> None:
    import os
    import subprocess

    out = tmp_path / "tp.json"
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    str(ROOT / "bench" / "tp_block.py"), "--hidden", "1024", "--heads", "8",
                    "--ffn", "2816", "--batch", "2", "--seq", "256", "--reps", "3",
                    "--out", str(out)], check=True, env=env, cwd=ROOT, timeout=600)
    import json

    reports = json.loads(out.read_text())
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["ok"] and r["device"] == f"cuda:{r['rank']}" for r in reports)
