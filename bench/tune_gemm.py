"""Time every configuration of a GEMM search on the GPU and keep all the figures.

    python bench/tune_gemm.py --json OUT.json [--space NAME] (names: SPACES below)
        [--dtype f16 bf16]
        [--shapes M,N,K ...] [--kernel PATH.co]

For each shape and dtype it runs croqtile's autotuner (``autotune="full"`` with an
explicit ``tunables`` grid) and records the time of every candidate, with ``torch.matmul``
(cuBLAS) timed in the same run; the figures choose the compiler's defaults and the grids
of the benchmark sweeps. The kernel is the bench's gemm.co (croqtile/bench/kernels/),
C[M, N] = A[M, K] @ B[N, K]^T with an f32 accumulator (``--kernel`` picks another ``.co``
with the same parameters and defines ``DT``, ``TILE_M``, ``TILE_N``, ``TILE_K``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import croqtile
from croqtile.bench.harness import KERNEL_DIR

KERNEL = KERNEL_DIR / "gemm.co"

SPACES = {
    "large": {"TILE_M": [128, 256], "TILE_N": [256, 128], "num_warps": [8, 4],
              "num_stages": [3, 4], "persistent": [False, True], "flatten": [False, True]},
    "decode": {"TILE_M": [64, 16], "TILE_N": [64, 32, 128], "TILE_K": [128, 256],
               "num_stages": [4, 6], "num_warps": [4], "descriptors": [True, False]},
    "small": {"TILE_M": [64, 128], "TILE_N": [64, 128], "TILE_K": [64, 128],
              "num_stages": [3, 5], "num_warps": [4], "descriptors": [True, False],
              "persistent": [False, True]},
    # stream-K and the split epilogue beside the best plain forms (a list: these only)
    "streamk": [
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True},
        *[{"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
           "stream_k": parts} for parts in (2, 3, 4, True)],
        {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True},
        *[{"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True,
           "stream_k": parts} for parts in (2, 3)],
        *[{"TILE_M": 128, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 4,
           "persistent": True, "stream_k": parts} for parts in (4, True)],
        *[{"TILE_M": 64, "TILE_N": 128, "TILE_K": 128, "num_warps": 4, "num_stages": 3,
           "persistent": True, "descriptors": False, "stream_k": parts} for parts in (4, True)],
    ],
    # descriptors made in the kernel, by the host, or none, for the forms of short kernels
    # and of 4096^3 (a list: these only)
    "hostdesc": [
        {**base, "descriptors": descriptors}
        for base in (
            {"TILE_M": 64, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": False},
            {"TILE_M": 64, "TILE_N": 128, "TILE_K": 128, "num_warps": 4, "num_stages": 3,
             "persistent": False},
            {"TILE_M": 128, "TILE_N": 64, "num_warps": 4, "num_stages": 8, "persistent": False},
            {"TILE_M": 128, "TILE_N": 64, "num_warps": 4, "num_stages": 6, "persistent": False},
            {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 3, "persistent": False},
            {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True},
            {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True,
             "stream_k": 2},
            {"TILE_M": 64, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 6,
             "persistent": False},
            {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True},
            {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
             "stream_k": 4},
        )
        for descriptors in (True, "host", False)
    ],
    # tiles of 192 in power-of-two pieces (split_tiles) beside the power-of-two forms
    "split": [
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True},
        {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True},
        *[{"TILE_M": m, "TILE_N": n, "num_warps": 8, "num_stages": s, "persistent": True,
           "split_tiles": True}
          for m, n, s in ((128, 192, 3), (128, 192, 4), (192, 128, 4), (192, 192, 3))],
        {"TILE_M": 128, "TILE_N": 192, "num_warps": 8, "num_stages": 4, "persistent": True,
         "split_tiles": True, "stream_k": 2},
    ],
    # 3072^3 in 192 x 192 tiles: stage counts, K steps, group widths, warp counts
    "split3072": [
        {"TILE_M": 192, "TILE_N": 192, "num_warps": 8, "num_stages": 3, "persistent": True,
         "split_tiles": True, **extra}
        for extra in ({}, {"group_m": 4}, {"group_m": 16}, {"flatten": True},
                      {"num_stages": 2}, {"TILE_K": 32, "num_stages": 6},
                      {"num_warps": 4}, {"persistent": False}, {"stream_k": True})
    ],
    # 4096^3 (256 tiles of 128 x 256 on 132 SMs): L2 group widths, the split epilogue,
    # warp specialisation and stream-K beside the plain persistent form (a list: these only)
    "wide": [
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True},
        *[{"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
           "group_m": g} for g in (4, 16, 32)],
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
         "epilogue_split": 2},
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": False},
        {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
         "stream_k": True},
        {"TILE_M": 256, "TILE_N": 128, "num_warps": 8, "num_stages": 3, "persistent": True,
         "warp_specialize": True},
        {"TILE_M": 256, "TILE_N": 128, "num_warps": 8, "num_stages": 4, "persistent": True,
         "group_m": 16},
    ],
}
SHAPES = {
    "large": [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048)],
    "decode": [(16, 4096, 4096), (16, 28672, 4096), (64, 4096, 14336), (64, 6144, 4096)],
    "small": [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072)],
    "streamk": [(3072, 3072, 3072), (4096, 4096, 4096), (1024, 1024, 1024), (2048, 2048, 2048),
                (128, 4096, 4096), (512, 4096, 4096), (128, 4096, 14336), (512, 6144, 4096)],
    "wide": [(4096, 4096, 4096)],
    "split3072": [(3072, 3072, 3072)],
    "split": [(3072, 3072, 3072), (512, 6144, 4096), (4096, 4096, 4096), (6144, 6144, 6144),
              (2048, 2048, 2048)],
    "hostdesc": [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072),
                 (4096, 4096, 4096), (128, 4096, 4096), (512, 4096, 4096), (128, 4096, 14336)],
}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def time_ms(fn) -> float:  # type: ignore[no-untyped-def]
    from triton.testing import do_bench

    return statistics.median(do_bench(fn, return_mode="median") for _ in range(3))


def run(space: str, dtypes: list[str], shapes: list[tuple[int, int, int]],
        source: str, save) -> list[dict]:  # type: ignore[no-untyped-def]
    """Search and time each shape; ``save(rows)`` after each (a run cut short keeps them)."""
    rows: list[dict] = []
    for dt in dtypes:
        mod = croqtile.compile(source, defines={"DT": dt}, autotune="full",
                               tunables=SPACES[space], tune_budget_s=600.0)
        fn = mod.gemm
        fn.cache = False  # search afresh: every candidate timed
        for m, n, k in shapes:
            gen = torch.Generator(device="cuda").manual_seed(0)
            a = torch.randn(m, k, device="cuda", generator=gen).to(DTYPES[dt])
            b = torch.randn(n, k, device="cuda", generator=gen).to(DTYPES[dt])
            c = torch.full((m, n), float("nan"), device="cuda", dtype=DTYPES[dt])
            start = time.perf_counter()
            fn(a, b, c)
            ref = a.double() @ b.double().T
            error = ((c.double() - ref).norm() / ref.norm()).item()
            ours = time_ms(lambda fn=fn, a=a, b=b, c=c: fn(a, b, c))
            base = time_ms(lambda a=a, b=b: torch.matmul(a, b.T))
            report = fn.reports[-1] if fn.reports else None
            flops = 2.0 * m * n * k
            row = {"dtype": dt, "M": m, "N": n, "K": k, "rel_error": error,
                   "croqtile_ms": ours, "torch_ms": base, "ratio": base / ours,
                   "croqtile_tflops": flops / ours * 1e-9, "torch_tflops": flops / base * 1e-9,
                   "config": fn.tuned_config, "search_s": time.perf_counter() - start,
                   "timings": report.timings if report else [],
                   "pruned": report.pruned if report else []}
            rows.append(row)
            save(rows)
            print(f"{dt} {m}x{n}x{k}: ratio {row['ratio']:.3f} "
                  f"({row['croqtile_tflops']:.0f} vs {row['torch_tflops']:.0f} TFLOP/s) "
                  f"err {error:.1e} config {fn.tuned_config}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--space", choices=sorted(SPACES), default="large")
    parser.add_argument("--dtype", nargs="+", choices=sorted(DTYPES), default=["f16"])
    parser.add_argument("--shapes", nargs="+", default=None, help="M,N,K ...")
    parser.add_argument("--kernel", type=Path, help="a .co file instead of the bench gemm.co")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("tune_gemm.py times kernels on a CUDA device; none is available")
    shapes = ([tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes
              else SHAPES[args.space])
    source = (args.kernel or KERNEL).read_text()
    args.json.parent.mkdir(parents=True, exist_ok=True)

    def save(rows: list[dict]) -> None:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                         "space": args.space, "tunables": SPACES[args.space],
                                         "rows": rows}, indent=1, default=str))

    run(args.space, args.dtype, shapes, source, save)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
