"""Where tensor descriptors come from, and what it costs a short GEMM (1024^3, f16).

For a few tile shapes of bench/kernels/gemm.co and each ``descriptors`` mode (``"host"``:
made by the host, the default; ``"kernel"``: made by every program; ``False``: pointer
loads) it prints the host time of a warm call (a tight loop of calls, no waiting), how
many launches took the direct path (``Launcher``'s cache of compiled kernels), the
``do_bench`` median, and the kernel's own time from a CUDA graph of 20 calls (no launch
gaps). Needs a CUDA device.

    python bench/descriptor_modes.py
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from triton.testing import do_bench

import croqtile
from croqtile.backends.triton import launcher

GEMM = (Path(__file__).resolve().parent / "kernels" / "gemm.co").read_text()
FORMS = [dict(TILE_M=64, TILE_N=128, num_stages=5, persistent=False),
         dict(TILE_M=128, TILE_N=64, num_stages=8, persistent=False),
         dict(TILE_M=128, TILE_N=128, num_stages=5, persistent=True)]


def main() -> None:
    direct = [0]
    launch_compiled = launcher._launch_compiled

    def counting(*args: object) -> None:
        direct[0] += 1
        launch_compiled(*args)  # type: ignore[arg-type]

    launcher._launch_compiled = counting  # type: ignore[assignment]
    a, b = (torch.randn(1024, 1024, device="cuda").half() for _ in range(2))
    c = torch.empty(1024, 1024, device="cuda", dtype=torch.half)
    for form in FORMS:
        defines = {k: v for k, v in form.items() if k.isupper()}
        options = {k: v for k, v in form.items() if not k.isupper()}
        for mode in ("host", "kernel", False):
            fn = croqtile.compile(GEMM, defines=defines, descriptors=mode, num_warps=4,
                                  **options).gemm
            fn(a, b, c)
            torch.cuda.synchronize()
            direct[0], calls = 0, 2000
            start = time.perf_counter()
            for _ in range(calls):
                fn(a, b, c)
            host_us = (time.perf_counter() - start) / calls * 1e6
            torch.cuda.synchronize()
            hits = direct[0]
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(20):
                    fn(a, b, c)
            graph_us = do_bench(graph.replay, return_mode="median") * 1000 / 20
            bench_us = do_bench(lambda fn=fn: fn(a, b, c), return_mode="median") * 1000
            print(f"{form} descriptors={mode!s:6}: host {host_us:5.1f} us/call, direct "
                  f"{hits}/{calls}, do_bench {bench_us:5.1f} us, graph {graph_us:5.1f} us",
                  flush=True)


if __name__ == "__main__":
    main()
