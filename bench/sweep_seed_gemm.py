"""Sweep tile constants and launch options of the seed 000 Hopper GEMM against
`torch.matmul` (cuBLAS) in the same run; correctness is checked before timing.

    python bench/sweep_seed_gemm.py --shape 4096 4096 4096 --out bench/results/h200/seed_gemm_sweep.csv
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import torch

import croqtile

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"

# (MATMUL_WARP_M, MATMUL_WARP_N, MATMUL_TILE_K, num_warps, num_stages)
CONFIGS = [
    (128, 256, 64, 4, 3),
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 8, 4),
    (256, 128, 64, 8, 3),
    (128, 256, 32, 8, 5),
    (64, 256, 64, 4, 4),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", type=int, nargs=3, default=[4096, 4096, 4096])
    parser.add_argument("--source", default="seed000_sm90_gemm.co")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from triton.testing import do_bench

    m, n, k = args.shape
    gen = torch.Generator().manual_seed(1)
    lhs = torch.randn((m, k), generator=gen).to(torch.float16).cuda()
    rhs = torch.randn((n, k), generator=gen).to(torch.float16).cuda()
    ref = (lhs.double() @ rhs.double().T)
    flops = 2.0 * m * n * k
    text = (DATA / args.source).read_text()
    rows = []
    for wm, wn, tk, warps, stages in CONFIGS:
        defines = {"MATMUL_WARP_M": wm, "MATMUL_WARP_N": wn, "MATMUL_TILE_K": tk}
        mod = croqtile.compile(text, defines=defines, filename=args.source, num_warps=warps,
                               num_stages=stages)
        out = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
        try:
            mod.matmul(lhs, rhs, out)
        except Exception as exc:  # a config the GPU cannot run: report and go on
            print(f"{wm:4d}x{wn:<4d} k{tk:<3d} w{warps} s{stages}: {type(exc).__name__}: "
                  f"{str(exc)[:120]}", flush=True)
            continue
        err = ((out.double() - ref).norm() / ref.norm()).item()
        def ours_call(mod=mod, out=out) -> None:
            mod.matmul(lhs, rhs, out)

        ours = statistics.median(do_bench(ours_call, return_mode="median")
                                 for _ in range(args.reps))
        base = statistics.median(do_bench(lambda: torch.matmul(lhs, rhs.T), return_mode="median")
                                 for _ in range(args.reps))
        row = {"source": args.source, "M": m, "N": n, "K": k, "warp_m": wm, "warp_n": wn,
               "tile_k": tk, "num_warps": warps, "num_stages": stages, "rel_error": err,
               "croqtile_ms": ours, "torch_ms": base,
               "croqtile_tflops": flops / ours * 1e-9, "torch_tflops": flops / base * 1e-9,
               "ratio": base / ours}
        rows.append(row)
        print(f"{wm:4d}x{wn:<4d} k{tk:<3d} w{warps} s{stages}: err {err:.1e}  "
              f"{row['croqtile_tflops']:6.1f} vs {row['torch_tflops']:6.1f} TFLOP/s  "
              f"ratio {row['ratio']:.3f}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
