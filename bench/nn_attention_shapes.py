"""croqtile.nn's attention (croqtile/kernels/attention.co) against torch's
``scaled_dot_product_attention`` (cuDNN's flash kernel on the H200) at a language model's
shapes, in one run: the function a model calls, and the kernel alone under a few launch
options (what the choice of tiles and options in croqtile/nn/kernels.py rests on).

Shapes: Llama-3-8B's prefill (32 query heads, 8 key/value heads, head dimension 128,
batch 1, q/k/v as a model makes them: ``[B, L, H, D]`` projections viewed as
``[B, H, L, D]``) at 2048, 4096 and 8192 tokens, causal; and batch 4 of 32 heads over
contiguous ``[B, H, S, D]`` tensors at 2048 and 4096, causal and not; and decode steps
(``DECODE_SHAPES``: 1 or 4 queries over a cache of 544 to 8192 positions, with the boolean
mask of a static cache whose last positions are still empty, or none), where croqtile.nn
runs attention_decode.co: timed under CUDA graphs (a compiled decode step's replay), the
prefill kernel called directly beside it. On a Hopper GPU the hand-written CUDA forward
(croqtile.nn.attention_cuda, whatever CROQTILE_ATTENTION_CUDA says) is timed beside the
Triton kernel. Every form is
checked against SDPA first (relative error 2e-2, bf16), then all are timed interleaved,
``--reps`` rounds of ``do_bench``; the medians go into a CSV, one row per (shape, form),
with the ratio to SDPA (above 1: faster). Needs a CUDA device.

    python bench/nn_attention_shapes.py [--reps 3] [--out OUT.csv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rows import write_csv  # noqa: E402
import torch.nn.functional as F

# (label, B, H, HKV, S, causal, sequence-major projections)
SHAPES = [
    ("llama 2048", 1, 32, 8, 2048, True, True),
    ("llama 4096", 1, 32, 8, 4096, True, True),
    ("llama 8192", 1, 32, 8, 8192, True, True),
    ("b4 2048", 4, 32, 32, 2048, True, False),
    ("b4 4096", 4, 32, 32, 4096, True, False),
    ("b4 4096 full", 4, 32, 32, 4096, False, False),
]
# (label, B, H, HKV, L, S, positions filled: the rest masked off as a static cache's
# empty slots; None: no mask)
DECODE_SHAPES = [
    ("decode 544", 1, 32, 8, 1, 544, None),
    ("decode 4096", 1, 32, 8, 1, 4096, None),
    ("decode static 8192", 1, 32, 8, 1, 8192, 544),
    ("decode b8 static 8192", 8, 32, 8, 1, 8192, 2048),
    ("decode 4q static 8192", 1, 32, 8, 4, 8192, 548),
]
# attention_decode.co beside croqtile.nn's choice: (COLS, pieces of how many COLS steps,
# num_stages); fewer keys a step and fewer stages fit more blocks on an SM
DECODE_VARIANTS = [(64, 8, 3), (64, 4, 2), (64, 8, 2), (128, 2, 2), (64, 16, 3), (32, 16, 3)]
# the kernel compiled as croqtile.nn compiles it (attention_ops.attention_variant), under these
# launch options ("kernel": croqtile.nn's own; its blocks already start with the longest
# causal row tiles, see attention.co; "ws": not an option but the warp-specialised form)
OPTIONS: dict[str, dict[str, Any]] = {
    "kernel": {},
    "stages2": {"num_stages": 2},
    "stages4": {"num_stages": 4},
    "ws": {"ws": True},  # the warp-specialised form (CROQTILE_ATTENTION_WS)
}
HEAD_DIM = 128
LOG2E = 1.4426950408889634


def compile_options(dtype: str = "bf16") -> dict[str, Any]:
    """The unmasked attention kernel of croqtile.nn's GPU variant under each of OPTIONS."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    source = (kernels.KERNELS / "attention.co").read_text()
    compiled = {}
    for name, options in OPTIONS.items():
        options = dict(options)
        variant = attention_ops.attention_variant(dtype, HEAD_DIM, False, "gpu",
                                            options.pop("ws", False))
        defines = {**dict(variant.defines), "NAME": "attention"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            compiled[name] = croqtile.compile(source, defines=defines, **{
                **dict(variant.options), **options}).attention
    return compiled


def heads(b: int, h: int, s: int, sequence_major: bool) -> torch.Tensor:
    if sequence_major:
        return torch.randn(b, s, h, HEAD_DIM, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    return torch.randn(b, h, s, HEAD_DIM, device="cuda", dtype=torch.bfloat16)


def forms(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
          kernels: dict[str, Any]) -> dict[str, Callable[[], torch.Tensor]]:
    """What is timed for one shape: SDPA, croqtile.nn's function, the kernel variants
    (their outputs as [B, H, L, D], as SDPA's)."""
    import croqtile.nn.functional as cf

    gqa = q.shape[1] != k.shape[1]
    scale = torch.full((1,), HEAD_DIM ** -0.5 * LOG2E, device="cuda")
    made: dict[str, Callable[[], torch.Tensor]] = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                       enable_gqa=gqa),
        "croqtile.nn": lambda: cf.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                               enable_gqa=gqa),
    }
    for name, fn in kernels.items():
        made[name] = lambda fn=fn: fn(q, k, v, causal, scale).transpose(1, 2)
    from croqtile.nn import attention_cuda

    if torch.cuda.get_device_capability()[0] == 9:  # the hand-written Hopper forward
        made["cuda kernel"] = lambda: attention_cuda.run(q, k, v, causal, HEAD_DIM ** -0.5)
    return made


def decode_kernels(masked: bool) -> dict[tuple[int, int, int], Any]:
    """attention_decode.co compiled under each of DECODE_VARIANTS (bf16, HEAD_DIM)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    source = (kernels.KERNELS / "attention_decode.co").read_text()
    compiled = {}
    for cols, tiles, stages in DECODE_VARIANTS:
        defines = dict(attention_ops.attention_defines("bf16", HEAD_DIM, masked, (
            ("ROWS", attention_ops.DECODE_ROWS), ("COLS", cols), ("CHUNK", cols * tiles))))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            compiled[cols, tiles, stages] = croqtile.compile(
                source, defines={**defines, "NAME": "decode"}, fill_buffers=False,
                num_stages=stages).decode
    return compiled


def decode_rows(reps: int) -> list[dict[str, Any]]:
    """DECODE_SHAPES: SDPA, croqtile.nn (the decode kernel) and the prefill kernel
    (attention.co, masked where the shape has a mask) under CUDA graphs."""
    import croqtile.nn.functional as cf
    from croqtile.nn import attention_ops, kernels
    from triton.testing import do_bench_cudagraph

    rows = []
    for label, b, h, hkv, length, s, filled in DECODE_SHAPES:
        q = heads(b, h, length, True)
        k, v = heads(b, hkv, s, True), heads(b, hkv, s, True)
        mask = None
        if filled is not None:
            mask = torch.zeros(b, 1, length, s, dtype=torch.bool, device="cuda")
            mask[..., :filled] = True
        additive = None if mask is None else torch.zeros(
            mask.shape, device="cuda").masked_fill(~mask, float("-inf"))
        prefill = kernels.operator(attention_ops.attention_name(
            "bf16", HEAD_DIM, mask is not None, "gpu"))
        scale = torch.full((1,), HEAD_DIM ** -0.5 * LOG2E, device="cuda")
        extra = () if additive is None else (additive,)
        timed: dict[str, Callable[[], torch.Tensor]] = {
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                           enable_gqa=True),
            **{f"decode c{c} x{t} s{st}": (lambda fn=fn: fn(q, k, v, *extra, False, scale)
                                            .transpose(1, 2))
               for (c, t, st), fn in decode_kernels(mask is not None).items()},
            "croqtile.nn": lambda: cf.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                   enable_gqa=True),
            "prefill kernel": lambda: prefill(q, k, v, *extra, False, scale).transpose(1, 2),
        }
        reference = timed["sdpa"]().float()
        for name, fn in timed.items():
            error = ((fn().float() - reference).norm() / reference.norm()).item()
            if error > 2e-2:
                raise SystemExit(f"{name} wrong at {label}: rel error {error:.3g}")
        times: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(reps):
            for name, fn in timed.items():
                times[name].append(do_bench_cudagraph(fn, rep=50))
        base = statistics.median(times["sdpa"])
        for name in timed:
            median = statistics.median(times[name])
            rows.append({"shape": label, "B": b, "H": h, "HKV": hkv, "S": s, "causal": False,
                         "form": name, "ms": median, "tflops": 0.0, "sdpa_ms": base,
                         "ratio": base / median})
        print(f"{label:22s} sdpa {base * 1e3:7.1f} us  " + "  ".join(
            f"{r['form']} {r['ratio']:.3f} ({r['ms'] * 1e3:.1f} us)"
            for r in rows[-len(timed):] if r["form"] != "sdpa"), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("nn_attention_shapes.csv"))
    parser.add_argument("--decode-only", action="store_true", help="the decode shapes alone")
    parser.add_argument("--prefill-only", action="store_true", help="the prefill shapes alone")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("nn_attention_shapes.py needs a CUDA device", file=sys.stderr)
        return 2
    from triton.testing import do_bench

    rows = [] if args.prefill_only else decode_rows(args.reps)
    kernels = {} if args.decode_only else compile_options()
    for label, b, h, hkv, s, causal, sequence_major in [] if args.decode_only else SHAPES:
        q, k, v = heads(b, h, s, sequence_major), heads(b, hkv, s, sequence_major), \
            heads(b, hkv, s, sequence_major)
        timed = forms(q, k, v, causal, kernels)
        reference = timed["sdpa"]().float()
        for name, fn in timed.items():
            error = ((fn().float() - reference).norm() / reference.norm()).item()
            if error > 2e-2:
                print(f"{name} wrong at {label}: rel error {error:.3g}")
                return 1
        times: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(args.reps):
            for name, fn in timed.items():
                times[name].append(do_bench(fn, warmup=25, rep=100))
        base = statistics.median(times["sdpa"])
        flops = 4 * b * h * s * s * HEAD_DIM / (2 if causal else 1)
        for name in timed:
            median = statistics.median(times[name])
            rows.append({"shape": label, "B": b, "H": h, "HKV": hkv, "S": s, "causal": causal,
                         "form": name, "ms": median, "tflops": flops / median / 1e9,
                         "sdpa_ms": base, "ratio": base / median})
        print(f"{label:13s} sdpa {base * 1e3:7.1f} us  " + "  ".join(
            f"{r['form']} {r['ratio']:.3f}" for r in rows[-len(timed):] if r["form"] != "sdpa"),
            flush=True)
    write_csv(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
