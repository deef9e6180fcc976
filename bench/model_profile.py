"""Where a Llama prefill's GPU time goes, eager torch against croqtile ops (also with the
MLP activations fused, ``fuse_activations``, and with the gated MLPs as one GEMM,
``fuse_mlps``, of ``croqtile.nn.transformers``): one profiled forward of each
(``torch.profiler``), after three warm ones, on the Llama model of ``croqtile bench models``
(``croqtile.bench.models``: Llama-3-8B widths, random weights).

Prints, per form, the GPU time of its kernels grouped as GEMMs (cuBLAS's ``nvjet``/
``sm90``/``gemm`` kernels, croqtile's ``linear``), attention (cuDNN's or Triton's flash
kernels, croqtile's ``attention``) and the rest, then the ``--top`` kernels by GPU time,
and the forward's wall time against its summed GPU time (the difference is where the
GPU waited for the host). Needs a CUDA device and ``transformers``.

    python bench/model_profile.py [--layers 4] [--seq 2048] [--top 12]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from typing import Any

import torch

from croqtile.bench.models import MODELS, build

LLAMA = MODELS["llama3-8b"]

GROUPS = (("gemm", ("nvjet", "gemm", "sm90_xmma", "cutlass", "linear", "matmul", "gated")),
          ("attention", ("flash", "fmha", "attention", "sdpa")))


def group_of(kernel: str) -> str:
    """The group a kernel's name falls in (GROUPS, first match), else "other"."""
    name = kernel.lower()
    for group, words in GROUPS:
        if any(word in name for word in words):
            return group
    return "other"


def kernel_times(model: Any, ids: torch.Tensor) -> tuple[dict[str, float], float]:
    """GPU microseconds per kernel name of one forward, and the forward's wall time."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(3):
            model(ids)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            model(ids)
            torch.cuda.synchronize()
            wall = time.perf_counter() - start
    times: dict[str, float] = {}
    for event in prof.key_averages():
        gpu_us = getattr(event, "device_time_total", None)
        if gpu_us is None:
            gpu_us = event.cuda_time_total
        if gpu_us and event.key and not event.key.startswith(("aten::", "croqtile::")):
            times[event.key] = times.get(event.key, 0.0) + gpu_us
    return times, wall * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("model_profile.py needs a CUDA device", file=sys.stderr)
        return 2
    import croqtile.nn
    from croqtile.nn import transformers as integration

    model = build(LLAMA, args.layers, "cuda", torch.bfloat16)
    integration.register()
    ours = copy.deepcopy(model)
    ours.set_attn_implementation(integration.NAME)
    croqtile.nn.convert(ours)
    ids = torch.randint(0, LLAMA.widths["vocab_size"], (1, args.seq), device="cuda",
                        generator=torch.Generator("cuda").manual_seed(1))
    fused, mlp = copy.deepcopy(ours), copy.deepcopy(ours)
    integration.fuse_activations(fused)
    integration.fuse_mlps(mlp)
    for name, form in (("eager", model), ("croqtile", ours), ("croqtile_fused", fused),
                       ("croqtile_mlp", mlp)):
        times, wall = kernel_times(form, ids)
        total = sum(times.values())
        groups: dict[str, float] = {}
        for kernel, us in times.items():
            groups[group_of(kernel)] = groups.get(group_of(kernel), 0.0) + us
        print(f"== {name}: wall {wall:.0f} us, GPU {total:.0f} us ("
              + ", ".join(f"{g} {us:.0f}" for g, us in sorted(groups.items())) + ")")
        for kernel, us in sorted(times.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"  {us:9.1f} us  {group_of(kernel):9s} {kernel[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
