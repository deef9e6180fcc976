"""Check and time the hand-written Hopper GEMM (backends/cuda/gemm_sm90.cu) on its own.

    python3 bench/cuda_gemm.py [--shapes M,N,K ...] [--reps 5] [--json OUT]
        [--widths 256 192] [--variant "CROQ_GROUP_M=16"] [--order hilbert] [--clusters 64]

Each shape is checked first against a float64 product on fresh random inputs with the
checks of `croqtile bench` (the output poisoned with NaN, the relative error over every
element), then timed against torch.matmul (cuBLAS) with its interleaved medians.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path

CHECK_SHAPES = [(256, 256, 64), (1000, 1032, 520), (130, 4096, 4096), (4096, 4096, 4096),
                (16, 512, 1024), (333, 264, 8), (8192, 1024, 2048)]
TIME_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048), (6144, 6144, 6144),
               (4096, 14336, 4096), (4096, 4096, 14336), (512, 6144, 4096)]


def main() -> None:
    from croqtile.backends.cuda.gemm import HopperGemm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=None)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--widths", nargs="*", type=int, default=[0],
                        help="tile widths to time (0: the one the kernel picks)")
    parser.add_argument("--variant", action="append", default=None,
                        help="space-separated NAME=VALUE macros of one build (repeatable)")
    parser.add_argument("--order", choices=("grouped", "hilbert"), default="grouped",
                        help="the order the clusters walk the tiles in")
    parser.add_argument("--clusters", type=int, default=None,
                        help="persistent clusters to launch at most (default: as many as fit; "
                             "64 leaves 4 SMs idle, with no more waves at 4096^2 or 8192^2)")
    args = parser.parse_args()
    shapes = ([tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes
              else TIME_SHAPES)
    records = []
    for variant in args.variant or [""]:
        gemm = HopperGemm(Path(tempfile.mkdtemp()), variant.split())
        fit = gemm.clusters
        gemm.clusters = min(fit, args.clusters or fit)
        gemm.order = args.order
        variant = f"{variant} clusters={gemm.clusters} order={gemm.order}".strip()
        print(f"variant [{variant}] ({fit} clusters fit at once)", flush=True)
        records += run_variant(gemm, variant, shapes, args.reps, args.widths)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


def run_variant(gemm, variant: str, shapes, reps: int, widths: list[int]) -> list[dict]:
    import torch

    from croqtile.bench import harness
    from croqtile.backends.cuda.gemm import WIDTHS, unsupported

    records = []
    for dtype in (torch.float16, torch.bfloat16):
        for (m, n, k), width in itertools.product(CHECK_SHAPES, WIDTHS):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(n, k, device="cuda", dtype=dtype)
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            assert unsupported(a, b, out) is None, unsupported(a, b, out)
            harness.poison(out)
            gemm(a, b, out, width)
            err = harness.relative_error(out, a.double() @ b.double().T)
            ok = err <= harness.TOLERANCES["gemm"]  # False for NaN
            print(f"check {dtype} {m}x{n}x{k} width {width}: rel err {err:.2e} "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
            records.append({"check": [m, n, k], "width": width, "dtype": str(dtype),
                            "err": err, "ok": ok})
        for (m, n, k), width in itertools.product(shapes, widths):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(n, k, device="cuda", dtype=dtype)
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            mine, base = harness.time_pair(lambda a=a, b=b, out=out, w=width: gemm(a, b, out, w or None),
                                         lambda a=a, b=b: torch.matmul(a, b.T),
                                         harness.default_timer, reps)
            tflops = 2 * m * n * k / mine / 1e9
            print(f"time {dtype} {m}x{n}x{k} width {width or 'auto'}: ours {mine * 1e3:.1f} us "
                  f"({tflops:.0f} TFLOP/s), cuBLAS {base * 1e3:.1f} us, ratio {base / mine:.3f}",
                  flush=True)
            records.append({"variant": variant, "time": [m, n, k], "width": width,
                            "dtype": str(dtype), "ours_ms": mine, "cublas_ms": base,
                            "ratio": base / mine})
    return records


if __name__ == "__main__":
    main()
