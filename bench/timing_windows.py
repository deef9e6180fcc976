"""One configuration per case timed three ways beside torch.matmul: do_bench with the
tuner's short window (40 ms), with its default window (100 ms), and do_bench_cudagraph
(no launch cost); the SM clock, power and temperature before and after:

    python bench/timing_windows.py OUT.json

Results of a run on the H200: bench/results/h200/2026-12-01/timing_windows.json.
"""
# ruff: noqa: B023 (each closure is called within the loop iteration that makes it)
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch
from triton.testing import do_bench, do_bench_cudagraph

import croqtile


def clocks() -> str:
    query = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
             "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True).stdout.strip()


def main() -> None:
    out = Path(sys.argv[1])
    src = (Path(__file__).resolve().parent / "kernels" / "gemm.co").read_text()
    rows = []
    small = ({"TILE_M": 64, "TILE_N": 128},
             dict(descriptors=False, num_stages=5, num_warps=4, persistent=False))
    large = ({"TILE_M": 128, "TILE_N": 256}, dict(num_stages=3, num_warps=8, persistent=True))
    cases = [("bf16", 1024, *small), ("f16", 1024, *small), ("f16", 4096, *large),
             ("bf16", 4096, *large)]
    for dtn, s, defs, opts in cases:
        dt = torch.float16 if dtn == "f16" else torch.bfloat16
        fn = croqtile.compile(src, defines={"DT": dtn, **defs}, **opts).gemm
        a = torch.randn(s, s, device="cuda", dtype=dt)
        b = torch.randn(s, s, device="cuda", dtype=dt)
        c = torch.empty(s, s, device="cuda", dtype=dt)
        fn(a, b, c)
        torch.cuda.synchronize()

        def ours() -> None:
            fn(a, b, c)

        def base() -> None:
            torch.matmul(a, b.T)

        r: dict = {"case": f"{dtn} {s}", "clocks_before": clocks()}
        for name, kw in (("rep40", dict(warmup=10, rep=40)), ("rep100", {})):
            o, t = [], []
            for _ in range(5):
                o.append(do_bench(ours, return_mode="median", **kw))
                t.append(do_bench(base, return_mode="median", **kw))
            r[name] = {"ours": statistics.median(o), "torch": statistics.median(t),
                       "ratio": statistics.median(t) / statistics.median(o)}
        try:
            o = statistics.median(do_bench_cudagraph(ours, return_mode="median") for _ in range(3))
            t = statistics.median(do_bench_cudagraph(base, return_mode="median") for _ in range(3))
            r["cudagraph"] = {"ours": o, "torch": t, "ratio": t / o}
        except Exception as exc:
            r["cudagraph"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        r["clocks_after"] = clocks()
        rows.append(r)
        print(json.dumps(r), flush=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
