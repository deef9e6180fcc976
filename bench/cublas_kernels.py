"""Which kernel cuBLAS runs for ``torch.matmul`` per shape (its tile sizes, cluster shape
and split-K are in the name), and the generated GEMM launched with ``num_ctas=2``:

    python bench/cublas_kernels.py OUT.json

Results of a run on the H200: bench/results/h200/2026-12-01/cublas_kernels.json.
"""
# ruff: noqa: B023 (each closure is called within the loop iteration that makes it)
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from triton.testing import do_bench

import croqtile
from croqtile.backends.triton.launcher import load_module, sm_count


def main() -> None:
    out = Path(sys.argv[1])
    res = {"cublas": {}, "ctas": []}
    shapes = [(1024,) * 3, (2048,) * 3, (3072,) * 3, (4096,) * 3, (8192,) * 3, (128, 4096, 4096),
              (512, 4096, 4096), (128, 4096, 14336)]
    for dt in (torch.float16, torch.bfloat16):
        for m, n, k in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            torch.matmul(a, b.T)
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                torch.matmul(a, b.T)
                torch.cuda.synchronize()
            names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            res["cublas"][f"{dt} {m}x{n}x{k}"] = names
            print(dt, m, n, k, names, flush=True)

    src = (Path(__file__).resolve().parent / "kernels" / "gemm.co").read_text()
    for dtn, dt in (("f16", torch.float16),):
        mod = croqtile.compile(src, defines={"DT": dtn}, num_warps=8, num_stages=3)
        fn = mod.gemm
        for m, n, k in [(4096,) * 3, (3072,) * 3]:
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(n, k, device="cuda", dtype=dt)
            c = torch.empty(m, n, device="cuda", dtype=dt)
            fn(a, b, c)
            art = fn.artifact_for(a, b, c)
            module = load_module(art, Path(tempfile.mkdtemp()))
            host = getattr(module, art.function)
            for ctas in (1, 2):
                class L:  # the generated host function's `launch`, with num_ctas added
                    def sm_count(self, d):  # type: ignore[no-untyped-def]
                        return sm_count(d)

                    def __call__(self, k_, grid, args, num_warps, num_stages, device):  # type: ignore[no-untyped-def]
                        k_[grid](*args, num_warps=num_warps, num_stages=num_stages, num_ctas=ctas)
                try:
                    def run() -> None:
                        host(L(), a.device, a, b, c, k, m, n)
                    run()
                    torch.cuda.synchronize()
                    ref = a.float() @ b.float().T
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    t = statistics.median(do_bench(run, return_mode="median") for _ in range(3))
                    tb = statistics.median(do_bench(lambda: torch.matmul(a, b.T), return_mode="median")
                                           for _ in range(3))
                    row = {"shape": [m, n, k], "num_ctas": ctas, "ms": t, "torch_ms": tb,
                           "ratio": tb / t, "err": err}
                except Exception as exc:
                    row = {"shape": [m, n, k], "num_ctas": ctas,
                           "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                res["ctas"].append(row)
                print(row, flush=True)
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
