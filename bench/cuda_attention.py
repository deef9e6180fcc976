"""Check and time the hand-written flash-attention forward (backends/cuda/attention_sm90.cu)
beside torch's SDPA (cuDNN's flash kernel on a Hopper GPU).

    python3 bench/cuda_attention.py [--seqs 2048 4096 8192] [--reps 3] [--check-only]
        [--variant "CROQ_ATTN_PINGPONG=0"] [--json OUT]

Llama-3-8B's attention: B = 1, 32 query heads over 8 kv heads, D = 128, bf16, q, k and v
the [B, S, H, D] projections read transposed (as a model passes them), causal and not.
Each build is checked first (the output and log-sum-exp poisoned with NaN; against float64
at short lengths, against SDPA at the timed ones), then timed against SDPA: medians of
`--reps` interleaved rounds of triton.testing.do_bench, the ratio SDPA time / ours (above
1: ours is faster) and TFLOP/s (causal counts half the square). CUDA_ATTENTION_CHECK_ONLY=1
does what --check-only does. GPU only; about a minute on an H100.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path

B, H, HKV, D = 1, 32, 8, 128
CHECK_SHAPES = [(128, 128), (1000, 1000), (2048, 2048), (1000, 2048)]  # (L, S) in float64


def inputs(l: int, s: int, dtype):
    import torch

    q = torch.randn(B, l, H, D, device="cuda", dtype=dtype).transpose(1, 2)
    k = torch.randn(B, s, HKV, D, device="cuda", dtype=dtype).transpose(1, 2)
    v = torch.randn(B, s, HKV, D, device="cuda", dtype=dtype).transpose(1, 2)
    return q, k, v


def run(attention, q, k, v, causal: bool):
    """Our output as [B, H, L, D] and the log-sum-exp, from NaN-poisoned buffers."""
    import torch

    b, h, l, d = q.shape
    out = torch.full((b, l, h, d), float("nan"), device="cuda", dtype=q.dtype)
    lse = torch.full((b, h, l), float("nan"), device="cuda", dtype=torch.float32)
    attention(q, k, v, out, lse, causal=causal, scale=1 / math.sqrt(d))
    return out.transpose(1, 2), lse


def float64_reference(q, k, v, causal: bool):
    import torch
    import torch.nn.functional as F

    q64, k64, v64 = (t.double() for t in (q, k, v))
    k64, v64 = (t.repeat_interleave(H // HKV, dim=1) for t in (k64, v64))
    scores = q64 @ k64.transpose(-1, -2) / math.sqrt(D)
    if causal:
        l, s = scores.shape[-2:]
        keep = torch.ones(l, s, dtype=torch.bool, device="cuda").tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    return out, torch.logsumexp(scores, dim=-1)


def relative_error(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())  # NaN fails


def check(attention, seqs: list[int]) -> bool:
    import torch
    import torch.nn.functional as F

    ok = True
    for causal in (True, False):
        for l, s in CHECK_SHAPES:
            q, k, v = inputs(l, s, torch.bfloat16)
            out, lse = run(attention, q, k, v, causal)
            ref, ref_lse = float64_reference(q, k, v, causal)
            err, lse_err = relative_error(out, ref), float((lse.double() - ref_lse).abs().max())
            good = err <= 2e-2 and lse_err <= 1e-3
            ok &= good
            print(f"check causal={causal} L={l} S={s} vs float64: rel err {err:.2e}, "
                  f"lse err {lse_err:.1e} {'ok' if good else 'WRONG'}", flush=True)
        for s in seqs:
            q, k, v = inputs(s, s, torch.bfloat16)
            out, _ = run(attention, q, k, v, causal)
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            err = relative_error(out, ref)
            good = err <= 2e-2
            ok &= good
            print(f"check causal={causal} S={s} vs SDPA: rel err {err:.2e} "
                  f"{'ok' if good else 'WRONG'}", flush=True)
    return ok


def time_variant(attention, variant: str, seqs: list[int], reps: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from croqtile.bench import harness

    records = []
    for causal in (True, False):
        for s in seqs:
            q, k, v = inputs(s, s, torch.bfloat16)
            out = torch.empty(B, s, H, D, device="cuda", dtype=torch.bfloat16)
            mine, base = harness.time_pair(
                lambda: attention(q, k, v, out, causal=causal),
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                       enable_gqa=True),
                harness.default_timer, reps)
            flops = 4 * B * H * s * s * D / (2 if causal else 1)
            print(f"time [{variant}] causal={causal} S={s}: ours {mine * 1e3:.0f} us "
                  f"({flops / mine / 1e9:.0f} TFLOP/s), SDPA {base * 1e3:.0f} us "
                  f"({flops / base / 1e9:.0f} TFLOP/s), ratio SDPA/ours {base / mine:.3f}",
                  flush=True)
            records.append({"variant": variant, "causal": causal, "s": s, "ours_ms": mine,
                            "sdpa_ms": base, "ratio": base / mine,
                            "tflops": flops / mine / 1e9})
    return records


def main() -> None:
    from croqtile import settings
    from croqtile.backends.cuda.attention import HopperAttention

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", nargs="*", type=int, default=[2048, 4096, 8192])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--check-only", action="store_true")
    parser.add_argument("--variant", action="append", default=None,
                        help="space-separated NAME=VALUE macros of one build (repeatable)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    check_only = args.check_only or os.environ.get("CUDA_ATTENTION_CHECK_ONLY") == "1"
    records, all_ok = [], True
    for variant in args.variant or [""]:
        attention = HopperAttention(Path(tempfile.mkdtemp()), variant.split(), settings.nvcc())
        print(f"variant [{variant}]", flush=True)
        ok = check(attention, args.seqs)
        all_ok &= ok
        if ok and not check_only:
            records += time_variant(attention, variant, args.seqs, args.reps)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    if not all_ok:
        raise SystemExit("a check failed: not timed")


if __name__ == "__main__":
    main()
