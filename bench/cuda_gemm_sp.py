"""Check and time the hand-written 2:4 sparse Hopper GEMM (backends/cuda/gemm_sp_sm90.cu)
on its own, build variant by build variant.

    python3 bench/cuda_gemm_sp.py [--shapes M,N,K ...] [--reps 5] [--json OUT]
        [--variant "CROQ_SP_STAGES=3 CROQ_SP_GROUP_M=16"] [--clusters 64]

Each build is checked first on fresh random inputs (A pruned to 2:4 and packed with
croqtile.sparse.compress_2_4, the output poisoned with NaN, the relative error over every
element against a float64 product), then timed against dense cuBLAS on the decompressed
A (torch.matmul) and torch's semi-structured sparse GEMM (to_sparse_semi_structured),
interleaved medians.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

CHECK_SHAPES = [(256, 256, 64), (1000, 1032, 528), (130, 4096, 4096), (4096, 4096, 4096),
                (16, 512, 1024), (333, 264, 16), (8192, 1024, 2048)]
# 4096^3, 8192^3, and the Llama-3-8B projections at 4096 tokens with the weight sparse
# (M = the projection's output features)
TIME_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (6144, 4096, 4096),
               (28672, 4096, 4096), (4096, 4096, 14336)]


def main() -> None:
    from croqtile.backends.cuda.gemm_sp import SparseHopperGemm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=None)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--variant", action="append", default=None,
                        help="space-separated NAME=VALUE macros of one build (repeatable)")
    parser.add_argument("--clusters", type=int, default=None,
                        help="persistent clusters to launch at most (default: as many as fit)")
    args = parser.parse_args()
    shapes = ([tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes
              else TIME_SHAPES)
    records = []
    for variant in args.variant or [""]:
        gemm = SparseHopperGemm(Path(tempfile.mkdtemp()), variant.split())
        fit = gemm.clusters
        gemm.clusters = min(fit, args.clusters or fit)
        variant = f"{variant} clusters={gemm.clusters}".strip()
        print(f"variant [{variant}] ({fit} clusters fit at once)", flush=True)
        records += run_variant(gemm, variant, shapes, args.reps)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


def operands(m: int, n: int, k: int, dtype):
    import torch

    from croqtile.sparse import compress_2_4, prune_2_4

    a = prune_2_4(torch.randn(m, k, device="cuda", dtype=dtype))
    packed, meta = compress_2_4(a)
    b = torch.randn(n, k, device="cuda", dtype=dtype)
    return a, packed, meta, b, torch.empty(m, n, device="cuda", dtype=dtype)


def calls(gemm, a, packed, meta, b, out) -> tuple:
    """Ours on (packed, meta), dense cuBLAS on a, torch's semi-structured GEMM on a."""
    import torch
    from torch.sparse import to_sparse_semi_structured

    semi = to_sparse_semi_structured(a)
    return (lambda: gemm(packed, meta, b, out), lambda: torch.matmul(a, b.T),
            lambda: torch.mm(semi, b.T))


def run_variant(gemm, variant: str, shapes, reps: int) -> list[dict]:
    import torch

    from croqtile.bench import harness
    from croqtile.backends.cuda.gemm_sp import unsupported_sparse

    records = []
    for dtype in (torch.float16, torch.bfloat16):
        for m, n, k in CHECK_SHAPES:
            a, packed, meta, b, out = operands(m, n, k, dtype)
            assert unsupported_sparse(packed, meta, b, out) is None
            harness.poison(out)
            gemm(packed, meta, b, out)
            err = harness.relative_error(out, a.double() @ b.double().T)
            ok = err <= harness.TOLERANCES["gemm"]  # False for NaN
            print(f"check {dtype} {m}x{n}x{k}: rel err {err:.2e} {'ok' if ok else 'WRONG'}",
                  flush=True)
            records.append({"check": [m, n, k], "dtype": str(dtype), "err": err, "ok": ok})
        for m, n, k in shapes:
            a, packed, meta, b, out = operands(m, n, k, dtype)
            gemm(packed, meta, b, out)  # (the metadata is reordered once, on the first call)
            mine, dense, sparse = harness.time_interleaved(
                calls(gemm, a, packed, meta, b, out), harness.default_timer, reps)
            tflops = 2 * m * n * k / mine / 1e9
            print(f"time {dtype} {m}x{n}x{k}: ours {mine * 1e3:.1f} us ({tflops:.0f} dense-"
                  f"equivalent TFLOP/s), cuBLAS {dense * 1e3:.1f} us (x{dense / mine:.3f}), "
                  f"semi-structured {sparse * 1e3:.1f} us (x{sparse / mine:.3f})", flush=True)
            records.append({"variant": variant, "time": [m, n, k], "dtype": str(dtype),
                            "ours_ms": mine, "cublas_ms": dense, "ratio": dense / mine,
                            "semi_ms": sparse, "semi_ratio": sparse / mine})
    return records


if __name__ == "__main__":
    main()
