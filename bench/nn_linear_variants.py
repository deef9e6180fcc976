"""croqtile.nn's linear kernel (croqtile/kernels/linear.co) in several tile shapes and
launch options against ``F.linear`` (cuBLAS), at a language model's shapes, in one run:
what the choice of ``GEMM_TILES`` and ``LINEAR_OPTIONS`` in croqtile/nn/kernels.py rests on.

Every variant is checked against ``F.linear`` first (relative error 1e-2 for bf16), then
all forms are timed interleaved, ``--reps`` rounds of ``do_bench``; the medians go into a
CSV with one row per (shape, variant) and the ratio to ``F.linear`` (above 1: faster).
Shapes: Llama-3-8B's projections (q and o 4096 x 4096, k and v 1024 x 4096, gate and up
14336 x 4096, down 4096 x 14336, lm_head 128256 x 4096) at ``--tokens`` rows each.
Needs a CUDA device.

    python bench/nn_linear_variants.py [--tokens 2048 16] [--reps 3] [--out OUT.csv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rows import write_csv  # noqa: E402

# (N, K) of the projections
SHAPES = {"q/o": (4096, 4096), "k/v": (1024, 4096), "gate/up": (14336, 4096),
          "down": (4096, 14336), "lm_head": (128256, 4096)}
# name -> (BM, BN, BK), compile options
VARIANTS: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {
    "128x256 g16": ((128, 256, 64), {"group_m": 16}),
    "128x256 s4 g16": ((128, 256, 64), {"group_m": 16, "num_stages": 4}),
    "128x128 g16": ((128, 128, 64), {"group_m": 16}),
    "128x128 w8 s4": ((128, 128, 64), {"group_m": 16, "num_warps": 8, "num_stages": 4}),
    "128x256 s4 sk": ((128, 256, 64), {"group_m": 16, "num_stages": 4, "persistent": True,
                                       "stream_k": True}),
    "128x256 s4 sk2": ((128, 256, 64), {"group_m": 16, "num_stages": 4, "persistent": True,
                                        "stream_k": 2}),
}


def compile_variants(dtype: str) -> dict[str, Any]:
    import croqtile
    from croqtile.nn import kernels

    source = (kernels.KERNELS / "linear.co").read_text()
    compiled = {}
    for name, ((bm, bn, bk), options) in VARIANTS.items():
        defines = {"DT": dtype, "ACC": "f32", "ACT": "NONE", "BIAS": 0,
                   "BM": bm, "BN": bn, "BK": bk}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            compiled[name] = croqtile.compile(source, defines=defines, **options).linear
    return compiled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 16])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    parser.add_argument("--out", type=Path, default=Path("nn_linear_variants.csv"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("nn_linear_variants.py needs a CUDA device", file=sys.stderr)
        return 2
    from triton.testing import do_bench

    torch_dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    variants = compile_variants(args.dtype)
    rows = []
    for tokens in args.tokens:
        for label, (n, k) in SHAPES.items():
            x = torch.randn(tokens, k, device="cuda", dtype=torch_dtype)
            w = torch.randn(n, k, device="cuda", dtype=torch_dtype)
            reference = torch.nn.functional.linear(x, w).float()
            for name, fn in variants.items():
                got = fn(x, w).float()
                error = ((got - reference).norm() / reference.norm()).item()
                if error > 1e-2:
                    print(f"{name} wrong at {tokens}x{n}x{k}: rel error {error:.3g}")
                    return 1
            times: dict[str, list[float]] = {}
            for _ in range(args.reps):
                times.setdefault("F.linear", []).append(
                    do_bench(lambda x=x, w=w: torch.nn.functional.linear(x, w), warmup=20,
                             rep=60))
                for name, fn in variants.items():
                    times.setdefault(name, []).append(
                        do_bench(lambda fn=fn, x=x, w=w: fn(x, w), warmup=20, rep=60))
            base = statistics.median(times["F.linear"])
            for name in variants:
                median = statistics.median(times[name])
                rows.append({"M": tokens, "N": n, "K": k, "shape": label, "variant": name,
                             "ms": median, "torch_ms": base, "ratio": base / median})
            print(f"M={tokens} {label:8s} F.linear {base * 1e3:8.1f} us  " + "  ".join(
                f"{name} {r['ratio']:.3f}" for name, r in zip(variants, rows[-len(variants):])),
                flush=True)
    write_csv(rows, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
