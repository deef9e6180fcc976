"""croqtile's attention forward (croqtile/kernels/attention.co as croqtile.nn compiles it)
against torch SDPA (cuDNN on Hopper), beside hand-edited Triton variants of the generated
kernel (each applying one technique of Triton 3.6's 06-fused-attention tutorial or of
FlashAttention-3), combinations of them, croqtile's new warp-specialised form, and the
tutorial's kernel adapted to the same inputs (the upper reference for Triton 3.6); a few
not-causal forms against SDPA not causal. Also the backward: croqtile.nn's (autograd
through cf.scaled_dot_product_attention: attention_backward.co's three kernels) against
SDPA's. Every form is checked against SDPA first (rel error < 2e-2); timings are medians
of PROBE_REPS interleaved do_bench rounds; the table gives SDPA time / form time.

Two files: this harness and attention_probe_kernels.py beside it (the hand-written
Triton kernels, their launchers and the table of forms, VARIANTS and EXCLUDED); it
imports the installed croqtile. On a CUDA machine:

    python bench/attention_probe.py      # everything: about 3-4 min on an H200

Environment flags:
    PROBE_VARIANTS=a,b,...   forward forms to run (default: all of VARIANTS; the ones in
                             EXCLUDED may be named too; sdpa is always timed)
    PROBE_SKIP=a,b,...       forms to leave out
    PROBE_NC=0               leave out the not-causal forms
    PROBE_S=2048,4096,8192   sequence lengths (L = S)
    PROBE_B=1 PROBE_H=32 PROBE_HKV=8 PROBE_D=128
    PROBE_REPS=3             interleaved rounds of do_bench (medians)
    PROBE_FWD=0 / PROBE_BWD=0   leave out the forward / the backward
    PROBE_BWD_TILES=a;b;...  backward tiles to time beside the library's, each
                             DQ_ROWS,DQ_COLS,DKV_ROWS,DKV_COLS,WG_ROWS[,STAGES]
                             (croqtile.nn.attention_ops.BackwardTiles; STAGES: num_stages),
                             e.g. "128,64,64,128,64;128,64,32,64,64;64,64,32,128,64,3"
                             (their three kernels timed, the forward's lse made once;
                             dk/dv in the form croqtile.nn's rule picks for these tiles)
    PROBE_BWD_FORMS=grouped,split  also time croqtile.nn's backward (and each tile set)
                             with dk/dv forced into these forms (attention_ops.
                             BACKWARD_SPLIT_BLOCKS: grouped, a block per key tile of a
                             key/value head; split, one per key tile of a query head, the
                             partials summed after), named "nn[grouped]", "bwd[...]/split"
    PROBE_CHECK_ONLY=1       check every form against SDPA, time nothing
    PROBE_SASS=1             print registers / spills / shared memory / warps of the hand
                             and tutorial forms (Triton's records)
    PROBE_CSV=path           also write the table as CSV
    PROBE_PREFLIGHT=0        skip the pre-flight (default: each warp-specialised form runs
                             once first in a child process, PROBE_PREFLIGHT_LIMIT=90 s
                             each, so that one that hangs costs itself only)
    PROBE_DEADLINE=345       seconds after which a watchdog prints where the run is and
                             exits (what was timed is printed as it goes)
    PROBE_TRACE=1            print the traceback of a form that fails
    PROBE_CUDAGRAPH=1        time with triton.testing.do_bench_cudagraph (no host time in
                             the figures, no L2 flush) instead of do_bench

Without a GPU, TRITON_INTERPRET=1 runs every form in Triton's interpreter at a tiny shape
(PROBE_S=128 PROBE_H=4 PROBE_HKV=2 PROBE_D=64 by default there; tiles of 32) and checks it
against a float64 reference (the hand and tutorial forms write f32 there: 1e-4), about 30 s:

    TRITON_INTERPRET=1 python bench/attention_probe.py
    TRITON_INTERPRET=1 PROBE_FAKE_BENCH=1 ... also runs the timing code (one wall-clock call)

(PROBE_SASS=1 prints each form's registers, spills and shared memory on the GPU.)

Every form takes q [B, H, L, D] (strided views of [B, L, H, D] projections), k, v
[B, HKV, S, D] (grouped-query: query head h reads key/value head h // (H // HKV)), causal,
and writes o as [B, L, H, D] (viewed as [B, H, L, D] for the check, like croqtile.nn).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_probe_kernels import (  # noqa: E402
    ALL_VARIANTS, VARIANTS, attn_hand, attn_tut, is_causal, make_variant)

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
LOG2E = 1.4426950408889634
ELEMENTS = {torch.bfloat16: "bf16", torch.float16: "f16"}  # croqtile's element types

# --------------------------------------------------------------------------- harness


def env_list(name, default):
    value = os.environ.get(name)
    return [x.strip() for x in value.split(",") if x.strip()] if value else default


def make_inputs(b, h, hkv, s, d, device, dtype, requires_grad=False):
    """q, k, v as a model makes them: [B, S, H, D] projections viewed as [B, H, S, D]."""
    g = torch.Generator(device="cpu").manual_seed(1234)
    leaves = [torch.randn(b, s, n, d, generator=g, dtype=torch.float32).to(device, dtype)
              for n in (h, hkv, hkv)]
    if requires_grad:
        for t in leaves:
            t.requires_grad_(True)
    return leaves, [t.transpose(1, 2) for t in leaves]


def rel_error(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


def main() -> int:
    device = "cpu" if INTERPRET or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not INTERPRET:
        print("no CUDA device: run with TRITON_INTERPRET=1 for the CPU check", file=sys.stderr)
        return 2
    small = device == "cpu"
    seqs = [int(x) for x in env_list("PROBE_S", ["128"] if small else ["2048", "4096", "8192"])]
    b = int(os.environ.get("PROBE_B", "1"))
    h = int(os.environ.get("PROBE_H", "4" if small else "32"))
    hkv = int(os.environ.get("PROBE_HKV", "2" if small else "8"))
    d = int(os.environ.get("PROBE_D", "64" if small else "128"))
    reps = int(os.environ.get("PROBE_REPS", "3"))
    do_fwd = os.environ.get("PROBE_FWD", "1") == "1"
    do_bwd = os.environ.get("PROBE_BWD", "1") == "1"
    fake = os.environ.get("PROBE_FAKE_BENCH") == "1"  # (the harness on the CPU: wall time)
    check_only = os.environ.get("PROBE_CHECK_ONLY", "0") == "1" or (small and not fake)
    dtype = torch.bfloat16
    names = env_list("PROBE_VARIANTS", list(VARIANTS))
    skip = set(env_list("PROBE_SKIP", []))
    unknown = [n for n in names if n not in ALL_VARIANTS]
    if unknown:
        print(f"unknown variants {unknown}; known: {list(ALL_VARIANTS)}", file=sys.stderr)
        return 2
    names = [n for n in names if n not in skip]
    if os.environ.get("PROBE_NC", "1") == "0":
        names = [n for n in names if is_causal(n)]
    import croqtile
    try:
        from croqtile.nn import attention_ops
    except ImportError:  # (an older croqtile)
        attention_ops = None
    if not hasattr(attention_ops, "attention_variant"):
        print(f"croqtile at {croqtile.__file__} has no "
              "croqtile.nn.attention_ops.attention_variant: install this checkout (pip "
              "install -e .)",
              file=sys.stderr)
        return 2
    t_start = time.time()
    print(f"croqtile {os.path.dirname(croqtile.__file__)}")
    print(f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (interpreter)'}, "
          f"torch {torch.__version__}, triton {triton.__version__}; B={b} H={h} HKV={hkv} "
          f"D={d} S={seqs} bf16 causal, reps {reps}", flush=True)
    failed: dict[str, str] = {}
    flight = os.environ.get("PROBE_PREFLIGHT", "1")
    if (device == "cuda" and flight == "1") or flight == "force":
        failed.update(preflight([n for n in names if ALL_VARIANTS[n][2].get("ws")], seqs[0],
                                b, h, hkv, d))
    for name in names:
        print(f"  {name:16s} {ALL_VARIANTS[name][0]}")
    makers = {name: make_variant(name, small) for name in names}
    rows = []
    for s in seqs:
        (q0, k0, v0), (q, k, v) = make_inputs(b, h, hkv, s, d, device, dtype)
        scale = torch.full((1,), d ** -0.5 * LOG2E, device=device)
        groups = [("sdpa", True)] + ([("sdpa_nc", False)] if any(
            not is_causal(n) for n in makers) else [])
        forms: dict[str, Any] = {}
        baseline: dict[str, str] = {}  # form -> the SDPA form it is compared with
        for base_name, causal in groups:
            if small:
                reference = F.scaled_dot_product_attention(
                    q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
            else:
                reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                           enable_gqa=True)
            forms[base_name] = (lambda q=q, k=k, v=v, causal=causal:
                                F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                               enable_gqa=True))
            baseline[base_name] = base_name
            if not do_fwd:
                continue
            for name, fn in makers.items():
                if name in failed or is_causal(name) != causal:
                    continue
                call = (lambda fn=fn, q=q, k=k, v=v, scale=scale, causal=causal:
                        fn(q, k, v, causal, scale).transpose(1, 2))
                t0 = time.time()
                try:
                    out = call()
                    if device == "cuda":
                        torch.cuda.synchronize()
                    error = rel_error(out, reference)
                except Exception as exc:  # a variant that does not compile or run
                    failed[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
                    print(f"  {name:16s} FAILED at S={s}: {failed[name]}", flush=True)
                    if os.environ.get("PROBE_TRACE"):
                        traceback.print_exc()
                    continue
                ok = error < (2e-2 if not small or ALL_VARIANTS[name][1] in ("croq", "nn")
                              else 1e-4)
                print(f"  S={s} {name:16s} rel error {error:.2e} {'ok' if ok else 'WRONG'} "
                      f"({time.time() - t0:.1f} s first call)", flush=True)
                if not ok:
                    failed[name] = f"rel error {error:.3g}"
                    continue
                forms[name] = call
                baseline[name] = base_name
                if os.environ.get("PROBE_SASS") == "1" and device == "cuda" and s == seqs[0]:
                    _print_resources(name)
        if check_only or not do_fwd:
            continue
        do_bench = _bench()

        times: dict[str, list[float]] = {n: [] for n in forms}
        for _ in range(reps):
            for name, fn in forms.items():
                times[name].append(do_bench(fn, warmup=25, rep=100))
        medians = {n: statistics.median(t) for n, t in times.items()}
        for base_name, causal in groups:
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            base = medians[base_name]
            print(f"S={s}: fwd {base_name} {base * 1e3:.1f} us "
                  f"({flops / base / 1e9:.0f} TFLOP/s)", flush=True)
            for name in forms:
                if baseline[name] != base_name:
                    continue
                median = medians[name]
                rows.append({"pass": "fwd" if causal else "fwd_nc", "S": s, "form": name,
                             "ms": median, "tflops": flops / median / 1e9,
                             "ratio": base / median})
                print(f"    {name:16s} {median * 1e3:9.1f} us {flops / median / 1e9:6.0f} "
                      f"TFLOP/s  ratio {base / median:.3f}", flush=True)
    if do_bwd:
        rows += backward(seqs, b, h, hkv, d, device, dtype, reps, check_only)
    if rows:
        print_table(rows)
        out = os.environ.get("PROBE_CSV")
        if out:
            import csv
            with open(out, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    if failed:
        print("failed variants:")
        for name, why in failed.items():
            print(f"  {name}: {why}")
    print(f"total {time.time() - t_start:.0f} s")
    return 0


def _bench():
    """triton.testing.do_bench, or with PROBE_FAKE_BENCH=1 (a CPU check of the harness)
    one call's wall time in ms."""
    if os.environ.get("PROBE_FAKE_BENCH") == "1":
        def wall(fn, warmup=0, rep=0):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        return wall
    if os.environ.get("PROBE_CUDAGRAPH") == "1":  # (no host time, no L2 flush)
        from triton.testing import do_bench_cudagraph

        def graphed(fn, warmup=0, rep=100):
            return do_bench_cudagraph(fn, rep=rep)
        return graphed
    from triton.testing import do_bench
    return do_bench


def preflight(names, s, b, h, hkv, d):
    """Run each warp-specialised variant once at the first shape in a child process, each
    with a time limit (PROBE_PREFLIGHT_LIMIT seconds, 90 by default: its compile and one
    call), so that a kernel that hangs (or breaks the CUDA context) costs its variant, not
    the run: name -> why, for the ones that did not come back right. The child's
    compiles stay in Triton's cache for this process."""
    import selectors
    import subprocess

    limit = float(os.environ.get("PROBE_PREFLIGHT_LIMIT", "90"))
    failed = {}
    todo = list(names)
    while todo:
        env = {**os.environ, "PROBE_PREFLIGHT_CHILD": ",".join(todo), "PROBE_S": str(s),
               "PROBE_B": str(b), "PROBE_H": str(h), "PROBE_HKV": str(hkv),
               "PROBE_D": str(d)}
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None
        watch = selectors.DefaultSelector()
        watch.register(child.stdout, selectors.EVENT_READ)
        reported = []
        stalled = False
        t0 = time.time()
        while len(reported) < len(todo):
            if not watch.select(timeout=limit):  # nothing for `limit` seconds: hung
                stalled = True
                break
            line = child.stdout.readline()
            if not line:  # the child ended
                break
            if line.startswith("PREFLIGHT "):
                _, verdict, name, why = line.rstrip("\n").split(" ", 3)
                reported.append(name)
                print(f"  preflight {name:16s} {verdict} {why} "
                      f"({time.time() - t0:.0f} s)", flush=True)
                if verdict != "ok":
                    failed[name] = why
                t0 = time.time()
        if stalled or child.poll() is None:
            child.kill()
        child.wait()
        rest = [n for n in todo if n not in reported]
        if rest:  # the first one not reported hung or ended the child
            tail = (child.stderr.read().strip().splitlines() or [""])[-1][:200] \
                if child.stderr else ""
            why = (f"no answer within {limit:.0f} s (hung?)" if stalled
                   else f"the child exited {child.returncode}: {tail}")
            failed[rest[0]] = why
            print(f"  preflight {rest[0]:16s} FAILED {why}", flush=True)
            rest = rest[1:]
        todo = rest
    return failed


def preflight_child(names):
    device = "cuda" if torch.cuda.is_available() and not INTERPRET else "cpu"
    b, h, hkv, d = (int(os.environ[k]) for k in ("PROBE_B", "PROBE_H", "PROBE_HKV", "PROBE_D"))
    s = int(os.environ["PROBE_S"])
    _, (q, k, v) = make_inputs(b, h, hkv, s, d, device, torch.bfloat16)
    scale = torch.full((1,), d ** -0.5 * LOG2E, device=device)
    for name in names:
        causal = is_causal(name)
        try:
            out = make_variant(name, device == "cpu")(q, k, v, causal, scale).transpose(1, 2)
            if device == "cuda":
                torch.cuda.synchronize()
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            error = rel_error(out, ref)
            verdict = "ok" if error < 2e-2 else "WRONG"
            if os.environ.get("PROBE_PREFLIGHT_HANG") == name:  # (a test of the time limit)
                time.sleep(10 ** 6)
            why = f"rel error {error:.2e}"
        except Exception as exc:
            verdict, why = "FAILED", f"{type(exc).__name__}: " + (
                str(exc).strip().splitlines() or [""])[-1][:200]
        print(f"PREFLIGHT {verdict} {name} {why}", flush=True)
    return 0


def _print_resources(name):
    """Registers, spills and shared memory of the kernel a hand or tutorial variant last
    compiled (Triton's own records)."""
    kind = ALL_VARIANTS[name][1]
    if kind not in ("hand", "tut"):
        return
    kernel = attn_tut if kind == "tut" else attn_hand
    try:
        for device_cache in kernel.device_caches.values():
            for compiled in list(device_cache[0].values())[-1:]:
                print(f"      {name}: {compiled.n_regs} registers, {compiled.n_spills} "
                      f"spills, {compiled.metadata.shared} B shared, "
                      f"{compiled.metadata.num_warps} warps", flush=True)
    except Exception as exc:  # (Triton's internals may differ)
        print(f"      {name}: no resource record ({exc})", flush=True)


def backward_tiles():
    """The backward tile sets of PROBE_BWD_TILES: name -> (BackwardTiles, stages)."""
    from croqtile.nn import attention_ops

    sets = {}
    for spec in filter(None, os.environ.get("PROBE_BWD_TILES", "").split(";")):
        numbers = [int(x) for x in spec.split(",")]
        tiles = attention_ops.BackwardTiles(*numbers[:5], delta_rows=64)
        sets[f"bwd[{spec}]"] = (tiles, numbers[5] if len(numbers) > 5 else None)
    return sets


def backward_forms():
    """The dk/dv forms of PROBE_BWD_FORMS ("grouped", "split"): name -> split."""
    names = list(filter(None, os.environ.get("PROBE_BWD_FORMS", "").split(",")))
    assert all(n in ("grouped", "split") for n in names), names
    return {n: n == "split" for n in names}


def forced_form(split, fn):
    """``fn`` run with croqtile.nn's rule set to choose the split form of dk/dv for every
    shape (``split``) or for none."""
    from croqtile.nn import attention_ops

    def run():
        saved = dict(attention_ops.BACKWARD_SPLIT_BLOCKS)
        attention_ops.BACKWARD_SPLIT_BLOCKS.update(
            {kind: (1 << 62) if split else 0 for kind in saved})
        try:
            return fn()
        finally:
            attention_ops.BACKWARD_SPLIT_BLOCKS.update(saved)
    return run


def tiled_backward(tiles, stages, q, k, v, causal, dout, split=None):
    """A function computing (dq, dk, dv) as croqtile.nn's backward does (its training
    form's output and lse, then delta, dq and dk/dv of attention_backward.co), with the
    backward compiled on ``tiles`` and ``stages``, outside croqtile.nn's operators; dk/dv
    in the split form if ``split``, the grouped one if not, the rule's for ``tiles`` if
    None (attention_ops.backward_split)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    element = ELEMENTS[q.dtype]
    d = q.shape[-1]
    kind = "gpu" if q.is_cuda else "cpu"
    options = dict(attention_ops.BACKWARD_OPTIONS[kind])
    if stages is not None:
        options["num_stages"] = stages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = croqtile.compile(
            (kernels.KERNELS / "attention_backward.co").read_text(),
            defines=dict(attention_ops.attention_defines(element, d, False, tiles.defines())),
            **options)
    scale = torch.full((1,), d ** -0.5 * LOG2E, device=q.device)
    train = kernels.operator(attention_ops.training_name(element, d, False, kind))
    with torch.no_grad():
        out, lse = train(q, k, v, None, causal, scale)
    out = out.transpose(1, 2)
    b, h, _, _ = q.shape
    hkv, keys = k.shape[1], k.shape[2]
    if split is None:
        blocks = -(-keys // tiles.dkv_cols) * hkv * b
        split = h > hkv and blocks < attention_ops.BACKWARD_SPLIT_BLOCKS[kind]

    def run():
        delta = module.attention_delta(out, dout)
        dq = module.attention_dq(q, k, v, dout, lse, delta, causal, scale)
        if split:
            dkv = module.attention_dkv_split(q, k, v, dout, lse, delta, causal, scale)
            dkv = dkv.view(2, b, hkv, h // hkv, keys, d).sum(3).to(k.dtype)
        else:
            dkv = module.attention_dkv(q, k, v, dout, lse, delta, causal, scale)
        return dq, dkv[0], dkv[1]
    return run


def backward(seqs, b, h, hkv, d, device, dtype, reps, check_only):
    """croqtile.nn's backward (autograd through cf.scaled_dot_product_attention: the
    forward's training form writes each row's log-sum-exp; then attention_backward.co's
    three kernels, delta, dq and dk/dv) against SDPA's, on the same output gradient; also
    on the tiles of PROBE_BWD_TILES, and in the dk/dv forms of PROBE_BWD_FORMS."""
    import croqtile.nn.functional as cf
    from croqtile.nn import attention_ops

    tile_sets = backward_tiles()
    forms = backward_forms()
    rows = []
    for s in seqs:
        leaves, (q, k, v) = make_inputs(b, h, hkv, s, d, device, dtype, requires_grad=True)
        g = torch.Generator(device="cpu").manual_seed(99)
        dout = torch.randn(b, h, s, d, generator=g).to(device, dtype)
        outs = {
            "sdpa": F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
            "croqtile.nn": cf.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                           enable_gqa=True),
        }
        # (each a function of no arguments giving the gradients of q, k and v)
        runs = {name: (lambda o=o: torch.autograd.grad(o, leaves, dout, retain_graph=True))
                for name, o in outs.items()}
        kind, element = "gpu" if q.is_cuda else "cpu", ELEMENTS[q.dtype]
        blocks = -(-s // attention_ops.attention_backward_tiles(kind, element, d).dkv_cols) \
            * hkv * b
        split = attention_ops.backward_split(kind, element, d, b, h, hkv, s)
        if forms:
            print(f"  S={s} bwd croqtile.nn: dk/dv {'split' if split else 'grouped'} "
                  f"({blocks} grouped blocks)", flush=True)
        for form, form_split in forms.items():
            runs[f"nn[{form}]"] = forced_form(form_split, runs["croqtile.nn"])
        for name, (tiles, stages) in tile_sets.items():
            for form, form_split in {"": None, **{f"/{f}": x for f, x in forms.items()}}.items():
                run = tiled_backward(tiles, stages, *(t.detach() for t in (q, k, v)), True,
                                     dout, form_split)
                # (the gradients of the [B, L, H, D] leaves: the kernels' [B, H, L, D] back)
                runs[name + form] = lambda run=run: tuple(t.transpose(1, 2) for t in run())
        grads = {name: fn() for name, fn in runs.items()}
        if device == "cpu":
            ql, kl, vl = (t.detach().double().requires_grad_(True) for t in leaves)
            ref_o = F.scaled_dot_product_attention(ql.transpose(1, 2), kl.transpose(1, 2),
                                                   vl.transpose(1, 2), is_causal=True,
                                                   enable_gqa=True)
            reference = torch.autograd.grad(ref_o, (ql, kl, vl), dout.double())
        else:
            reference = grads["sdpa"]
        checked = [name for name in runs if name != "sdpa"]
        for name in checked + (["sdpa"] if device == "cpu" else []):
            errors = [rel_error(x, r) for x, r in zip(grads[name], reference)]
            print(f"  S={s} bwd {name:12s} rel error dq {errors[0]:.2e} dk {errors[1]:.2e} "
                  f"dv {errors[2]:.2e} {'ok' if max(errors) < 2e-2 else 'WRONG'}", flush=True)
        if check_only:
            continue
        do_bench = _bench()

        times: dict[str, list[float]] = {n: [] for n in runs}
        for _ in range(reps):
            for name, fn in runs.items():
                times[name].append(do_bench(fn, warmup=25, rep=100))
        base = statistics.median(times["sdpa"])
        flops = 2.5 * 4 * b * h * s * s * d / 2  # (the usual 2.5x the forward's)
        for name in runs:
            median = statistics.median(times[name])
            rows.append({"pass": "bwd", "S": s, "form": name, "ms": median,
                         "tflops": flops / median / 1e9, "ratio": base / median})
        print(f"S={s}: bwd sdpa {base * 1e3:.1f} us, croqtile.nn "
              f"{statistics.median(times['croqtile.nn']) * 1e3:.1f} us "
              f"(ratio {base / statistics.median(times['croqtile.nn']):.3f})", flush=True)
        for name in checked[1:]:
            print(f"S={s}: bwd {name} {statistics.median(times[name]) * 1e3:.1f} us (ratio "
                  f"{base / statistics.median(times[name]):.3f}"
                  f"{'' if name.startswith('nn[') else '; kernels only'})", flush=True)
    return rows


def print_table(rows):
    """Ratio = SDPA time / the form's time (above 1: faster than SDPA), by S."""
    seqs = sorted({r["S"] for r in rows})
    titles = {"fwd": "forward, causal", "fwd_nc": "forward, NOT causal", "bwd":
              "backward, causal"}
    for kind in ("fwd", "fwd_nc", "bwd"):
        sel = [r for r in rows if r["pass"] == kind]
        if not sel:
            continue
        forms = list(dict.fromkeys(r["form"] for r in sel))
        print(f"\n{titles[kind]}: SDPA time / variant time (TFLOP/s in brackets)")
        print(f"{'variant':14s}" + "".join(f"{'S=' + str(s):>18s}" for s in seqs) + "   gm")
        for form in forms:
            cells, ratios = [], []
            for s in seqs:
                r = next((r for r in sel if r["S"] == s and r["form"] == form), None)
                if r is None:
                    cells.append(f"{'-':>18s}")
                else:
                    ratios.append(r["ratio"])
                    cells.append(f"{r['ratio']:>10.3f} ({r['tflops']:4.0f})")
            gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
            print(f"{form:14s}" + "".join(cells) + f"   {gm:.3f}")


if __name__ == "__main__":
    if os.environ.get("PROBE_PREFLIGHT_CHILD"):
        sys.exit(preflight_child(os.environ["PROBE_PREFLIGHT_CHILD"].split(",")))
    if torch.cuda.is_available() and not INTERPRET:
        # a watchdog: past the deadline, print where it is and exit (what was timed is
        # already printed, a line per variant and shape)
        import faulthandler
        faulthandler.dump_traceback_later(float(os.environ.get("PROBE_DEADLINE", "345")),
                                          exit=True)
    sys.exit(main())
