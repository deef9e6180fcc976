"""How much of a decode GEMM's time replaying one set of inputs hides in the L2 cache.

The decode sweep's kernels stream a weight of 33-235 MB; the H200's L2 holds 60 MB. Timed
from a CUDA graph that replays one set of inputs, part of a 4096 x 4096 weight is still in
L2 from the previous call, for croqtile and cuBLAS alike but not by the same amount. A
model's decode step reads each layer's weights once. For each shape this times the user
kernel (``bench/kernels/matmul.co`` with ``autotune="quick"``) and ``torch.matmul`` both
ways, interleaved: one input set replayed, and ``bench.input_sets`` copies in turn (what
the decode and epilogue sweeps now do).

    python bench/l2_residency.py [--dtype f16 bf16] [--rounds 5]

Results of a run on the H200: bench/results/h200/2026-12-03h/probe_rotation.txt.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from triton.testing import do_bench_cudagraph

import croqtile
from croqtile import bench

SHAPES = (("o", 4096, 4096, (16, 64, 512)), ("qkv", 6144, 4096, (64, 512)),
          ("down", 4096, 14336, (64,)))


def median_us(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", nargs="+", default=["f16", "bf16"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    text = (bench.KERNEL_DIR / "matmul.co").read_text()
    print(f"L2: {torch.cuda.get_device_properties(0).L2_cache_size} bytes")
    for dt in args.dtype:
        for name, n, k, ms in SHAPES:
            for m in ms:
                case = bench.Case("decode", "matmul", dt, m, n, k, f"llama3-8b {name}")
                fn = croqtile.compile(text, defines={"DT": dt}, autotune="quick").matmul
                one = bench.prepare_gemm(case, fn, "cuda")
                turn = bench.prepare_gemm(case, fn, "cuda", bench.input_sets(case, "cuda"))
                assert bench.check(case, one)[0], f"{case.describe()}: wrong result"
                rotation = turn.rotation or turn  # (a weight over 4x the L2: one copy)
                calls = {"cublas one": one.baseline, "ours one": one.ours,
                         "cublas turn": rotation.baseline, "ours turn": rotation.ours}
                times: dict[str, list[float]] = {key: [] for key in calls}
                for _ in range(args.rounds):
                    for key, call in calls.items():
                        times[key].append(do_bench_cudagraph(call, rep=20,
                                                             return_mode="median"))
                us = {key: median_us(t) for key, t in times.items()}
                sets = turn.rotation.sets if turn.rotation else 1
                print(f"{dt} {name} M={m} one set: cuBLAS {us['cublas one']:.2f} us, ours "
                      f"{us['ours one']:.2f} us, ratio {us['cublas one'] / us['ours one']:.3f}"
                      f" | {sets} sets in turn: cuBLAS {us['cublas turn']:.2f} us, ours "
                      f"{us['ours turn']:.2f} us, ratio "
                      f"{us['cublas turn'] / us['ours turn']:.3f} | {fn.tuned_config}",
                      flush=True)


if __name__ == "__main__":
    main()
