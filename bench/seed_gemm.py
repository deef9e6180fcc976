"""The main job (`make run`): compile the Hopper-style GEMM of seed 000 (one warpgroup,
`parallel p by 1 : group-4`), run it, check it against torch and print a short report.

On a GPU it times the kernel beside `torch.matmul` (cuBLAS) in the same run; without one it
runs a small shape through Triton's interpreter.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import croqtile

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "seed000_sm90_gemm.co"


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out64, ref64 = out.double().cpu(), ref.double().cpu()
    return ((out64 - ref64).norm() / ref64.norm()).item()


def run(m: int, n: int, k: int, device: str, reps: int) -> dict[str, float | str]:
    start = time.perf_counter()
    mod = croqtile.load(SOURCE)
    compile_ms = (time.perf_counter() - start) * 1e3
    gen = torch.Generator().manual_seed(0)
    lhs = torch.randn((m, k), generator=gen).to(torch.float16).to(device)
    rhs = torch.randn((n, k), generator=gen).to(torch.float16).to(device)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    mod.matmul(lhs, rhs, out)
    error = relative_error(out, lhs.double() @ rhs.double().T)
    report: dict[str, float | str] = {"shape": f"{m}x{n}x{k}", "device": device,
                                      "compile_ms": compile_ms, "rel_error": error}
    if device == "cuda":
        from triton.testing import do_bench

        flops = 2.0 * m * n * k
        ours = [do_bench(lambda: mod.matmul(lhs, rhs, out), return_mode="median")
                for _ in range(reps)]
        base = [do_bench(lambda: torch.matmul(lhs, rhs.T), return_mode="median")
                for _ in range(reps)]
        ours_ms, base_ms = statistics.median(ours), statistics.median(base)
        report.update(croqtile_ms=ours_ms, torch_ms=base_ms,
                      croqtile_tflops=flops / ours_ms * 1e-9, torch_tflops=flops / base_ms * 1e-9,
                      ratio=base_ms / ours_ms)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.shape:
        m, n, k = args.shape
    else:
        m, n, k = (4096, 4096, 4096) if device == "cuda" else (200, 300, 160)
    report = run(m, n, k, device, args.reps)
    print(f"croqtile seed 000 Hopper GEMM ({SOURCE.name}), f16, {report['shape']} on {device}")
    where = "GPU" if device == "cuda" else "CPU via Triton's interpreter"
    print(f"  ran on              {where}")
    print(f"  compile (frontend+codegen) {report['compile_ms']:.1f} ms")
    print(f"  relative error      {report['rel_error']:.2e} (vs float64 torch reference)")
    if device == "cuda":
        print(f"  croqtile            {report['croqtile_ms']:.3f} ms  "
              f"{report['croqtile_tflops']:.1f} TFLOP/s")
        print(f"  torch.matmul        {report['torch_ms']:.3f} ms  "
              f"{report['torch_tflops']:.1f} TFLOP/s")
        print(f"  ratio (torch time / croqtile time) {report['ratio']:.3f}")
    if args.json:
        import json

        report["gpu"] = torch.cuda.get_device_name() if device == "cuda" else "none"
        report["torch"], report["triton"] = torch.__version__, __import__("triton").__version__
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    ok = float(report["rel_error"]) < 1e-2
    print("  check               " + ("PASSED" if ok else "FAILED"))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
