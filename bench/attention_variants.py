"""Time attention kernels written in Croqtile, under several compile options, beside torch's
scaled_dot_product_attention and a plain hand-written Triton flash-attention forward (the
ceiling this Triton reaches with the same algorithm), in one run on the GPU.

    python3 bench/attention_variants.py KERNEL.co [KERNEL.co ...] [--shapes B,H,S ...]
        [--reps 3] [--json OUT]

Each KERNEL.co holds one ``__co__`` attention function of one of the two layouts the
sweep knows (recognised from its parameters): ``void f(q, k, v, o)`` over [B, S, H, D]
tensors, causal, with the scale folded into an exp2 (log2 e / sqrt(D)), or
``auto f(q, k, v, bool causal)`` over [B, H, S, D] returning O. Every variant is checked
against torch's attention in float32 on the first shape (output poisoned with NaN, the
relative error over every element) before it is timed; times are medians of
``do_bench``, interleaved with torch's, ``--reps`` times.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

SHAPES = [(4, 32, 1024), (4, 32, 2048), (4, 32, 4096), (1, 32, 8192), (1, 32, 16384)]
# (label, defines, compile options) tried for every kernel
VARIANTS = [
    ("default", {}, {}),
    ("heavy", {}, {"heavy_first": True}),
    ("stages2", {}, {"num_stages": 2}),
    ("stages4", {}, {"num_stages": 4}),
    ("stages4_heavy", {}, {"num_stages": 4, "heavy_first": True}),
    ("bn64", {"BLOCK_N": 64}, {}),
    ("bm128_w8", {"BLOCK_M": 128}, {"num_warps": 8}),
    ("bm128_w8_heavy", {"BLOCK_M": 128}, {"num_warps": 8, "heavy_first": True}),
]
# the hand-written yardsticks: label -> options of triton_fa (8 warps, 3 stages, 128 x 64
# tiles unless given)
HAND_WRITTEN = [("ptr", {}), ("tma", {"tma": True}), ("ptr_ws", {"ws": True}),
                ("ptr_rot", {"rotate": True}), ("ptr_bn128", {"bn": 128}),
                ("ptr_bn128_rot", {"bn": 128, "rotate": True})]


@triton.jit
def _block(ptr, desc, base, keys, dims, s_s, S, start, TMA: tl.constexpr,
           MASKED: tl.constexpr):
    """Rows ``keys`` (from ``start``) of a [S, D] head: through its descriptor, or pointer
    loads (masked past S where ``MASKED``)."""
    if TMA:
        return desc.load([start, 0])
    pointers = ptr + base + keys[:, None] * s_s + dims[None, :]
    if MASKED:
        return tl.load(pointers, mask=keys[:, None] < S, other=0.0)
    return tl.load(pointers)


@triton.jit
def _softmax_pv(s, v, m_i, l_i, acc):
    """The rest of ``_step`` once the scores ``s`` (scaled) are known."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def _step(q, k, v, m_i, l_i, acc, qk_scale, keep, MASKED: tl.constexpr):
    """One key block of the online softmax in base 2: the running maximum, sum and
    output (scores outside ``keep`` dropped where ``MASKED``)."""
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:
        s = tl.where(keep, s, float("-inf"))
    return _softmax_pv(s, v, m_i, l_i, acc)


@triton.jit
def _triton_fa(q_ptr, k_ptr, v_ptr, o_ptr, s_b, s_s, s_h, S, H, qk_scale,
               CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
               WS: tl.constexpr, TMA: tl.constexpr, ROTATE: tl.constexpr = False):
    """A plain flash-attention forward (online softmax in base 2), strides (s_b, s_s, s_h)
    shared by q, k, v and o; the causal diagonal blocks in a second loop with the mask.
    With ``TMA`` the tiles come through tensor descriptors, one [S, D] descriptor per
    (batch, head) and tensor, made by each program."""
    pid = tl.program_id(0)
    bh = tl.program_id(1)
    base = (bh // H) * s_b + (bh % H) * s_h
    rows = pid * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    dims = tl.arange(0, D)
    q_desc = None
    k_desc = None
    v_desc = None
    if TMA:
        q_desc = tl.make_tensor_descriptor(q_ptr + base, [S, D], [s_s, 1], [BM, D])
        k_desc = tl.make_tensor_descriptor(k_ptr + base, [S, D], [s_s, 1], [BN, D])
        v_desc = tl.make_tensor_descriptor(v_ptr + base, [S, D], [s_s, 1], [BN, D])
    q = _block(q_ptr, q_desc, base, rows, dims, s_s, S, pid * BM, TMA, True)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    hi = tl.minimum((pid + 1) * BM, S) if CAUSAL else S
    full = (pid * BM) // BN * BN if CAUSAL else hi // BN * BN
    if ROTATE and full > 0:
        # the next block's scores issued before this block's softmax (the MMA then runs
        # while the softmax does: FlashAttention-3's overlap within a warpgroup)
        k = _block(k_ptr, k_desc, base, cols, dims, s_s, S, 0, TMA, False)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        for start in tl.range(0, full - BN, BN):
            nxt = start + BN
            k = _block(k_ptr, k_desc, base, nxt + cols, dims, s_s, S, nxt, TMA, False)
            s_next = tl.dot(q, tl.trans(k)) * qk_scale
            v = _block(v_ptr, v_desc, base, start + cols, dims, s_s, S, start, TMA, False)
            m_i, l_i, acc = _softmax_pv(s, v, m_i, l_i, acc)
            s = s_next
        last = full - BN
        v = _block(v_ptr, v_desc, base, last + cols, dims, s_s, S, last, TMA, False)
        m_i, l_i, acc = _softmax_pv(s, v, m_i, l_i, acc)
    if not ROTATE:
        for start in tl.range(0, full, BN, warp_specialize=WS):
            keys = start + cols
            k = _block(k_ptr, k_desc, base, keys, dims, s_s, S, start, TMA, False)
            v = _block(v_ptr, v_desc, base, keys, dims, s_s, S, start, TMA, False)
            m_i, l_i, acc = _step(q, k, v, m_i, l_i, acc, qk_scale, None, False)
    for start in tl.range(full, hi, BN, warp_specialize=WS):
        keys = start + cols
        k = _block(k_ptr, k_desc, base, keys, dims, s_s, S, start, TMA, True)
        v = _block(v_ptr, v_desc, base, keys, dims, s_s, S, start, TMA, True)
        keep = keys[None, :] < S
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        m_i, l_i, acc = _step(q, k, v, m_i, l_i, acc, qk_scale, keep, True)
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * s_s + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < S)


def triton_fa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
              seq_dim: int, causal: bool, bm: int = 128, bn: int = 64,
              tma: bool = False, ws: bool = False, warps: int = 8, stages: int = 3,
              rotate: bool = False) -> None:
    """The hand-written kernel over tensors whose sequence is dimension ``seq_dim``."""
    b, d = q.shape[0], q.shape[-1]
    s = q.shape[seq_dim]
    h = q.shape[2] if seq_dim == 1 else q.shape[1]
    s_b, s_s, s_h = q.stride(0), q.stride(seq_dim), q.stride(2 if seq_dim == 1 else 1)
    grid = (triton.cdiv(s, bm), b * h)
    _triton_fa[grid](q, k, v, o, s_b, s_s, s_h, s, h, 1.4426950408889634 / d ** 0.5,
                     CAUSAL=causal, BM=bm, BN=bn, D=d, WS=ws, TMA=tma, ROTATE=rotate,
                     num_warps=warps, num_stages=stages)


class Kernel:
    """One Croqtile attention kernel file and how to call it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = path.read_text()
        self.name = re.search(r"__co__\s+\w+\s+(\w+)\s*\(", self.text).group(1)
        self.returns = bool(re.search(r"__co__\s+auto\b", self.text))
        self.dim = int(re.search(r"#define\s+DIM\s+(\d+)", self.text).group(1))
        self.dtype = torch.bfloat16 if "bf16" in self.text else torch.float16
        self.seq_dim = 2 if self.returns else 1  # [B, H, S, D] or [B, S, H, D]
        self.causal_modes = (True, False) if self.returns else (True,)

    def tensors(self, b: int, h: int, s: int) -> list[torch.Tensor]:
        shape = (b, h, s, self.dim) if self.seq_dim == 2 else (b, s, h, self.dim)
        gen = torch.Generator(device="cuda").manual_seed(b * 7 + h * 3 + s)
        return [(torch.randn(shape, device="cuda", generator=gen) * 0.5).to(self.dtype)
                for _ in range(3)]

    def runner(self, fn, q, k, v, causal: bool):
        if self.returns:
            return lambda: fn(q, k, v, causal)
        out = torch.empty_like(q)

        def run() -> torch.Tensor:
            fn(q, k, v, out)
            return out
        return run

    def sdpa(self, q, k, v, causal: bool):
        t = (lambda x: x.transpose(1, 2)) if self.seq_dim == 1 else (lambda x: x)
        qt, kt, vt = t(q), t(k), t(v)
        return lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                        is_causal=causal)

    def reference(self, q, k, v, causal: bool) -> torch.Tensor:
        t = (lambda x: x.transpose(1, 2)) if self.seq_dim == 1 else (lambda x: x)
        ref = torch.nn.functional.scaled_dot_product_attention(
            t(q).float(), t(k).float(), t(v).float(), is_causal=causal)
        return t(ref)


def flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    return 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm()).item()


def time_pair(ours, theirs, reps: int) -> tuple[float, float]:
    from triton.testing import do_bench

    a, b = [], []
    for _ in range(reps):
        a.append(do_bench(ours, warmup=50, rep=200, return_mode="median"))
        b.append(do_bench(theirs, warmup=50, rep=200, return_mode="median"))
    return statistics.median(a), statistics.median(b)


def hand_written(kernel: Kernel, shape: tuple[int, int, int], causal: bool,
                 cache: dict) -> dict[str, float]:
    """The hand-written Triton kernels' times at ``shape``, by label (each checked first;
    inf if wrong or failing)."""
    from triton.testing import do_bench

    key = (kernel.path, shape, causal)
    if key not in cache:
        q, k, v = kernel.tensors(*shape)
        out = torch.full_like(q, float("nan"))
        times = {}
        for label, options in HAND_WRITTEN:
            run = functools.partial(triton_fa, q, k, v, out, kernel.seq_dim, causal,
                                    **options)
            try:
                out.fill_(float("nan"))
                run()
                err = relative_error(out, kernel.reference(q, k, v, causal))
            except Exception as exc:  # (reported, not fatal: it is only a yardstick)
                print(f"hand-written {label}: {type(exc).__name__}: {str(exc)[:200]}",
                      file=sys.stderr)
                err = float("inf")
            times[label] = float("inf") if err > 2e-2 else do_bench(
                run, warmup=50, rep=200, return_mode="median")
        cache[key] = times
    return cache[key]


def main() -> int:
    import croqtile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", type=Path)
    parser.add_argument("--shapes", nargs="*", default=None, help="B,H,S ...")
    parser.add_argument("--variants", nargs="*", default=None, help="labels of VARIANTS")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hand", nargs="*", default=None,
                        help="labels of the hand-written yardsticks to time (default all)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--source-dir", type=Path, help="write each variant's Triton here")
    args = parser.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    variants = [v for v in VARIANTS if not args.variants or v[0] in args.variants]
    if args.hand is not None:
        HAND_WRITTEN[:] = [h for h in HAND_WRITTEN if h[0] in args.hand]
    rows = []
    hand: dict = {}
    for path in args.kernels:
        kernel = Kernel(path)
        for label, defines, options in variants:
            if any(name not in kernel.text for name in defines):
                continue
            try:
                mod = croqtile.compile(kernel.text, defines=defines, filename=path.name,
                                       **options)
                fn = getattr(mod, kernel.name)
            except Exception as exc:  # report and go on with the next variant
                print(f"{path.name} {label}: does not compile: {exc}", file=sys.stderr)
                continue
            for causal in kernel.causal_modes:
                checked = False
                for b, h, s in shapes:
                    q, k, v = kernel.tensors(b, h, s)
                    run = kernel.runner(fn, q, k, v, causal)
                    if not checked:
                        out = run()
                        if not kernel.returns:
                            out.fill_(float("nan"))
                            out = run()
                        err = relative_error(out, kernel.reference(q, k, v, causal))
                        checked = True
                        if err > 2e-2:
                            print(f"{path.name} {label} causal={causal}: WRONG, relative "
                                  f"error {err:.3g}", file=sys.stderr)
                            break
                        if args.source_dir:
                            args.source_dir.mkdir(parents=True, exist_ok=True)
                            (args.source_dir / f"{path.stem}_{label}.py").write_text(
                                fn.triton_source)
                    ours, sdpa = time_pair(run, kernel.sdpa(q, k, v, causal), args.reps)
                    hand_times = hand_written(kernel, (b, h, s), causal, hand)
                    f = flops(b, h, s, kernel.dim, causal)
                    row = {"kernel": path.stem, "variant": label, "causal": causal, "B": b,
                           "H": h, "S": s, "D": kernel.dim, "croqtile_ms": ours,
                           "sdpa_ms": sdpa, "ratio": sdpa / ours,
                           **{f"triton_{k}_ratio": sdpa / t for k, t in hand_times.items()},
                           "croqtile_tflops": f / ours / 1e9, "sdpa_tflops": f / sdpa / 1e9}
                    rows.append(row)
                    if args.json:  # (as it goes: a run cut short keeps what it measured)
                        with args.json.with_suffix(".jsonl").open("a") as log:
                            log.write(json.dumps(row) + "\n")
                    print(f"{path.stem:24s} {label:14s} c={int(causal)} B={b} H={h} S={s:6d} "
                          f"ours {row['croqtile_tflops']:6.1f} TF/s sdpa "
                          f"{row['sdpa_tflops']:6.1f} ratio {row['ratio']:.3f} (Triton "
                          + " ".join(f"{k} {sdpa / t:.3f}" for k, t in hand_times.items())
                          + ")", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
