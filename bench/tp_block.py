"""A tensor-parallel Llama-style block with croqtile ops, against the same block with
torch's ops and against the single-GPU result.

The block (pre-norm, no rotary embedding, no KV cache):

    h   = x + o_proj(attention(q_proj(n), k_proj(n), v_proj(n)))     n = rms_norm(x)
    out = h + down_proj(silu(gate_proj(m)) * up_proj(m))              m = rms_norm(h)

Tensor parallelism over ``world`` ranks (Megatron style): q/k/v and gate/up are
column-parallel (each rank holds ``heads / world`` heads and ``ffn / world`` hidden
features), o_proj and down_proj row-parallel (each rank multiplies its slice of the inner
dimension); their partial outputs are summed with one all-reduce each. The norms and the
residual stream are replicated.

One process per GPU, started with torchrun (NCCL; NVLink multicast kept off):

    NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 bench/tp_block.py \\
        --out bench/results/h200/tp_block.json

Every rank checks both tensor-parallel blocks (croqtile ops, torch ops) against the block
computed on its own GPU with the full weights (the single-GPU result, croqtile ops) and
against float64; rank 0 times them (CUDA events, median of ``--reps``) and writes the JSON.
Without CUDA it runs on the CPU with gloo (tiny shapes through Triton's interpreter), as
``tests/test_tp_block.py`` does with world size 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F

AllReduce = Callable[[torch.Tensor], torch.Tensor]
Weights = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Config:
    hidden: int = 4096
    heads: int = 32
    ffn: int = 14336
    batch: int = 4
    seq: int = 1024
    dtype: str = "bfloat16"
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def check(self, world: int) -> None:
        if self.hidden % self.heads or self.heads % world or self.ffn % world:
            raise ValueError(f"{self}: heads and ffn must divide by the world size {world} "
                             "and hidden by heads")


# a tiny block for CPU runs (Triton's interpreter)
TINY = Config(hidden=32, heads=2, ffn=64, batch=1, seq=8, dtype="float32")


@dataclass(frozen=True)
class Ops:
    """The three functions a block calls: torch's or croqtile's (same signatures)."""

    name: str
    linear: Callable[..., torch.Tensor]
    attention: Callable[..., torch.Tensor]
    rms_norm: Callable[..., torch.Tensor]

    def gated(self, x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        """silu(x gate^T) * (x up^T): croqtile fuses the activation into the GEMM."""
        if self.name == "croqtile":
            return self.linear(x, gate, activation="silu") * self.linear(x, up)
        return F.silu(self.linear(x, gate)) * self.linear(x, up)


def torch_ops() -> Ops:
    return Ops("torch", F.linear, F.scaled_dot_product_attention, F.rms_norm)


def croqtile_ops() -> Ops:
    from croqtile.nn import functional as cf

    return Ops("croqtile", cf.linear, cf.scaled_dot_product_attention, cf.rms_norm)


def make_weights(cfg: Config, device: torch.device | str, dtype: torch.dtype | None = None,
                 seed: int = 0) -> Weights:
    """The full block's weights (the same on every rank: one seed), scaled so activations
    stay of order one."""
    gen = torch.Generator().manual_seed(seed)
    dtype = dtype or cfg.torch_dtype
    h, f = cfg.hidden, cfg.ffn

    def matrix(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=gen) / cols ** 0.5).to(device, dtype)

    return {"norm1": (1 + 0.1 * torch.randn(h, generator=gen)).to(device, dtype),
            "norm2": (1 + 0.1 * torch.randn(h, generator=gen)).to(device, dtype),
            "q": matrix(h, h), "k": matrix(h, h), "v": matrix(h, h), "o": matrix(h, h),
            "gate": matrix(f, h), "up": matrix(f, h), "down": matrix(h, f)}


def make_input(cfg: Config, device: torch.device | str, dtype: torch.dtype | None = None,
               seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(cfg.batch, cfg.seq, cfg.hidden, generator=gen)
    return x.to(device, dtype or cfg.torch_dtype)


def shard(weights: Weights, rank: int, world: int) -> Weights:
    """Rank ``rank``'s part: rows of the column-parallel weights (whole heads, since q/k/v
    rows are head-major), columns of the row-parallel ones, the norms whole."""
    def rows(w: torch.Tensor) -> torch.Tensor:
        return w.chunk(world, dim=0)[rank].contiguous()

    def cols(w: torch.Tensor) -> torch.Tensor:
        return w.chunk(world, dim=1)[rank].contiguous()

    return {"norm1": weights["norm1"], "norm2": weights["norm2"],
            **{n: rows(weights[n]) for n in ("q", "k", "v", "gate", "up")},
            **{n: cols(weights[n]) for n in ("o", "down")}}


def attention_partial(x: torch.Tensor, w: Weights, cfg: Config, ops: Ops) -> torch.Tensor:
    """This rank's share of o_proj(attention(...)) for its heads (summed over ranks)."""
    b, s, _ = x.shape
    n = ops.rms_norm(x, (cfg.hidden,), w["norm1"], cfg.eps)
    heads = w["q"].shape[0] // cfg.head_dim

    def split(t: torch.Tensor) -> torch.Tensor:  # [b, s, heads * d] -> [b, heads, s, d]
        return t.view(b, s, heads, cfg.head_dim).transpose(1, 2)

    q, k, v = (split(ops.linear(n, w[name])) for name in ("q", "k", "v"))
    a = ops.attention(q, k, v, is_causal=True)
    return ops.linear(a.transpose(1, 2).reshape(b, s, heads * cfg.head_dim), w["o"])


def mlp_partial(h: torch.Tensor, w: Weights, cfg: Config, ops: Ops) -> torch.Tensor:
    """This rank's share of down_proj(silu(gate) * up) for its features."""
    m = ops.rms_norm(h, (cfg.hidden,), w["norm2"], cfg.eps)
    return ops.linear(ops.gated(m, w["gate"], w["up"]), w["down"])


def block(x: torch.Tensor, w: Weights, cfg: Config, ops: Ops,
          all_reduce: AllReduce) -> torch.Tensor:
    """The block on one rank's weights; ``all_reduce`` sums the partial outputs."""
    h = x + all_reduce(attention_partial(x, w, cfg, ops))
    return h + all_reduce(mlp_partial(h, w, cfg, ops))


def single(x: torch.Tensor, weights: Weights, cfg: Config, ops: Ops) -> torch.Tensor:
    """The block on one device with the full weights."""
    return block(x, weights, cfg, ops, lambda t: t)


def simulate(x: torch.Tensor, weights: Weights, cfg: Config, ops: Ops,
             world: int) -> torch.Tensor:
    """The tensor-parallel block of ``world`` ranks computed in this process (each
    all-reduce a sum of the ranks' partials): the sharding's arithmetic without a
    process group."""
    parts = [shard(weights, rank, world) for rank in range(world)]
    h = x + sum(attention_partial(x, w, cfg, ops) for w in parts)
    return h + sum(mlp_partial(h, w, cfg, ops) for w in parts)


def reference(x: torch.Tensor, weights: Weights, cfg: Config) -> torch.Tensor:
    """The block in float64 on the CPU with torch's ops."""
    wide = {n: w.double().cpu() for n, w in weights.items()}
    return single(x.double().cpu(), wide, cfg, torch_ops())


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float((got - want).norm() / want.norm())


# tolerance (relative norm) against float64, by dtype
TOLERANCE = {torch.float32: 1e-3, torch.float16: 2e-2, torch.bfloat16: 3e-2}


def dist_all_reduce(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    return t


def time_ms(fn: Callable[[], Any], device: torch.device, reps: int) -> float:
    """Median milliseconds of ``fn`` (CUDA events on ``device``; wall clock on the CPU),
    every rank starting each repetition together."""
    times = []
    for _ in range(reps):
        dist.barrier()
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def run_rank(cfg: Config, device: torch.device, reps: int = 10,
             warmup: int = 3) -> dict[str, Any]:
    """One rank of an initialised process group: both tensor-parallel blocks checked
    against the single-device block and float64, then timed. The report of this rank."""
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg.check(world)
    weights = make_weights(cfg, device)
    x = make_input(cfg, device)
    local = shard(weights, rank, world)
    want = reference(x, weights, cfg)
    single_out = single(x, weights, cfg, croqtile_ops())
    results: dict[str, Any] = {}
    for ops in (croqtile_ops(), torch_ops()):
        out = block(x, local, cfg, ops, dist_all_reduce)
        results[ops.name] = {
            "error_vs_float64": relative_error(out, want),
            "error_vs_single_gpu": relative_error(out, single_out),
        }
    tolerance = TOLERANCE[cfg.torch_dtype]
    ok = all(r["error_vs_float64"] <= tolerance and r["error_vs_single_gpu"] <= tolerance
             for r in results.values())
    tokens = cfg.batch * cfg.seq
    for ops in (croqtile_ops(), torch_ops()):
        def step(ops: Ops = ops) -> None:
            block(x, local, cfg, ops, dist_all_reduce)

        for _ in range(warmup):
            step()
        ms = time_ms(step, device, reps)
        results[ops.name].update(ms=ms, tokens_per_s=tokens / ms * 1e3)
    ratio = results["torch"]["ms"] / results["croqtile"]["ms"]
    return {"rank": rank, "world": world, "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "config": asdict(cfg), "tolerance": tolerance, "ok": ok,
            "speed_vs_torch": ratio, "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=Config.hidden)
    parser.add_argument("--heads", type=int, default=Config.heads)
    parser.add_argument("--ffn", type=int, default=Config.ffn)
    parser.add_argument("--batch", type=int, default=Config.batch)
    parser.add_argument("--seq", type=int, default=Config.seq)
    parser.add_argument("--dtype", default=Config.dtype,
                        choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="the CPU-sized block")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    cfg = TINY if args.tiny else Config(args.hidden, args.heads, args.ffn, args.batch,
                                        args.seq, args.dtype)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off
    cuda = torch.cuda.is_available()
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        if "RANK" not in os.environ:  # a plain `python bench/tp_block.py`: one rank
            os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=os.environ.get("MASTER_PORT", "29517"))
        dist.init_process_group("nccl" if cuda else "gloo",
                                device_id=device if cuda else None)
    try:
        report = run_rank(cfg, device, args.reps)
        reports: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(reports, report)
    finally:
        dist.destroy_process_group()
    if report["rank"] == 0:
        for r in reports:
            print(f"rank {r['rank']}/{r['world']} on {r['device']} ({r['gpu']}): "
                  + "; ".join(f"{name} {v['ms']:.3f} ms, {v['tokens_per_s']:.0f} tok/s, "
                              f"error {v['error_vs_float64']:.2e} (vs float64) "
                              f"{v['error_vs_single_gpu']:.2e} (vs single GPU)"
                              for name, v in r["results"].items())
                  + f"; croqtile/torch speed {r['speed_vs_torch']:.3f}"
                  + ("" if r["ok"] else "  FAILED"))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(reports, indent=2))
    return 0 if all(r["ok"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
