"""The last, partial wave of a compute-bound GEMM: the user kernel's forms against cuBLAS.

512 x 28672 x 4096 (gate_up of Llama-3 8B at 512 tokens) in the user kernel's 128 x 256
tiles is 448 tiles: three full waves on the H200's 132 SMs and 52 tiles, which leave 80
SMs idle for a whole tile's time. This times ``bench/kernels/matmul.co`` untuned, with
``halve_last_wave=True`` (those 52 tiles in halves, one program each), with
``stream_k=True`` (their K iterations shared by every SM) and with both forms at fewer
columns (25344: exactly three waves; 26400: 20 tiles in the last wave), interleaved with
``torch.matmul`` for ``--rounds`` rounds; every form is first checked against float64 on
a NaN-poisoned output.

    python bench/last_wave.py [--dtype bf16 f16] [--rounds 7]

Results of a run on the H200: bench/results/h200/2026-12-03i/probe_gate_up512_halves.txt.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from triton.testing import do_bench

import croqtile
from croqtile import bench

M, K = 512, 4096
COLUMNS = (28672, 26400, 25344)
FORMS = {"untuned": {}, "halve_last_wave": {"halve_last_wave": True},
         "stream_k": {"persistent": True, "stream_k": True}}
TYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def time_forms(text: str, dt: str, n: int, rounds: int) -> dict[str, float]:
    """Median milliseconds of each form and of cuBLAS at M x n x K, interleaved."""
    dtype = TYPES[dt]
    x = torch.randn(M, K, device="cuda", dtype=dtype)
    w = torch.randn(n, K, device="cuda", dtype=dtype)
    ref = x.double() @ w.double().T
    calls = {}
    for name, options in FORMS.items():
        fn = croqtile.compile(text, defines={"DT": dt}, **options).matmul
        y = torch.full((M, n), float("nan"), device="cuda", dtype=dtype)
        fn(x, w, y)
        error = ((y.double() - ref).abs() / (ref.abs() + 1)).max().item()
        assert error < 2e-2, f"{dt} N={n} {name}: wrong result (error {error:.3g})"
        calls[name] = lambda fn=fn, y=y: fn(x, w, y)
    calls["cuBLAS"] = lambda: torch.matmul(x, w.T)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(do_bench(call, warmup=50, rep=100, return_mode="median"))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", nargs="+", default=["bf16", "f16"], choices=list(TYPES))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    text = (bench.KERNEL_DIR / "matmul.co").read_text()
    for dt in args.dtype:
        for n in COLUMNS:
            medians = time_forms(text, dt, n, args.rounds)
            tiles = -(-M // 128) * -(-n // 256)
            for name, ms in medians.items():
                print(f"{dt} {M}x{n}x{K} ({tiles} tiles) {name:16s} {ms * 1e3:7.1f} us  "
                      f"ratio {medians['cuBLAS'] / ms:.3f}", flush=True)


if __name__ == "__main__":
    main()
