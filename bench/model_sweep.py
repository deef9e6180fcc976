"""Tokens per second of a Llama model (Llama-3-8B widths, a few layers, random weights
built from a config: nothing downloaded) in eight forms, in one run on the GPU:

* ``eager``: the model as ``transformers`` builds it (torch's SDPA attention);
* ``compile``: ``torch.compile`` of it;
* ``croqtile``: its linear layers converted (``croqtile.nn.convert``) and its attention
  through croqtile's kernel (``attn_implementation="croqtile"``);
* ``croqtile_fused``: that, with each MLP's SiLU in its gate projection's GEMM epilogue
  (``croqtile.nn.transformers.fuse_activations``);
* ``croqtile_mlp``: ``croqtile`` with each MLP's gate and up projections as one GEMM
  whose epilogue applies the SiLU and the product (``croqtile.nn.transformers.fuse_mlps``);
* ``croqtile_qkv``: that, with each attention layer's query, key and value projections
  as one GEMM too (``croqtile.nn.transformers.fuse_qkv``);
* ``croqtile_norm``: that, with the RMS norms on croqtile's kernel too
  (``croqtile.nn.transformers.convert_norms``): every croqtile.nn rewrite at once;
* ``croqtile_compile``: ``torch.compile`` of that, with its graph breaks counted.

    python3 bench/model_sweep.py [--layers 4] [--seq 2048] [--decode 32] [--reps 3]
        [--out bench/results/h200]

Prefill: one forward of ``--seq`` tokens (batch 1); decode: ``--decode`` tokens one at a
time through a key/value cache after a prefill of 512 (the time per token, the cache
kept). Every form's prefill logits are checked against eager's first (relative error
over all logits, bf16 tolerance). The forms are timed in turns (eager, compile,
croqtile, croqtile_fused, croqtile_mlp, croqtile_qkv, croqtile_norm, croqtile_compile,
eager, ...), ``--reps``
rounds: times are each form's median, and a ratio to eager is the median over the rounds
of eager's time over the form's in the same round (a GPU's clocks drift between rounds;
a form timed long after another would carry that drift into their ratio). Writes
``model.csv``, ``model.json`` and ``model.png``.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rows import write_csv  # noqa: E402

FORMS = ("eager", "compile", "croqtile", "croqtile_fused", "croqtile_mlp", "croqtile_qkv",
         "croqtile_norm", "croqtile_compile")
# Llama-3-8B's widths (its 32 layers cut to --layers)
WIDTHS = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
              num_key_value_heads=8, head_dim=128, vocab_size=128256)
TOLERANCE = 3e-2  # bf16 weights and activations through several layers


def build(layers: int, device: str, dtype: torch.dtype, widths: dict[str, int]) -> Any:
    import transformers

    config = transformers.LlamaConfig(num_hidden_layers=layers, max_position_embeddings=8192,
                                      attn_implementation="sdpa", **widths)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def forms(model: Any) -> dict[str, Any]:
    import croqtile.nn
    from croqtile.nn import transformers as integration

    integration.register()
    ours = copy.deepcopy(model)
    ours.set_attn_implementation(integration.NAME)
    croqtile.nn.convert(ours)
    fused, mlp = copy.deepcopy(ours), copy.deepcopy(ours)
    if integration.fuse_activations(fused) == 0 or integration.fuse_mlps(mlp) == 0:
        raise RuntimeError("no gated MLP found in the model to fuse")
    qkv = copy.deepcopy(mlp)
    if integration.fuse_qkv(qkv) == 0:
        raise RuntimeError("no attention projections found in the model to fuse")
    normed = copy.deepcopy(qkv)
    if integration.convert_norms(normed) == 0:
        raise RuntimeError("no RMS norms found in the model to convert")
    return {"eager": model, "compile": torch.compile(model), "croqtile": ours,
            "croqtile_fused": fused, "croqtile_mlp": mlp, "croqtile_qkv": qkv,
            "croqtile_norm": normed, "croqtile_compile": torch.compile(ours)}


def interleaved_times(runs: dict[str, Callable[[], Any]], reps: int,
                      sync: Callable[[], None],
                      clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds of each of ``reps`` calls of every function, the functions taking turns
    (a, b, c, a, b, c, ...) so that all see the same clocks and temperature."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            sync()
            start = clock()
            run()
            sync()
            times[name].append(clock() - start)
    return times


def paired_ratio(base: list[float], other: list[float]) -> float:
    """How many times faster ``other`` ran than ``base``: the median over rounds of their
    times' ratio in the same round."""
    return statistics.median(b / o for b, o in zip(base, other, strict=True))


def decode_steps(model: Any, prompt: torch.Tensor, steps: int) -> Callable[[], Any]:
    """A function running ``steps`` single-token forwards after a prefill of ``prompt``
    (the prefill done once, outside the timed function; each call starts from a copy of
    the cache)."""
    with torch.no_grad():
        out = model(prompt, use_cache=True)
    cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)

    def run() -> None:
        kv = copy.deepcopy(cache)
        nxt = token
        with torch.no_grad():
            for _ in range(steps):
                step = model(nxt, past_key_values=kv, use_cache=True)
                kv, nxt = step.past_key_values, step.logits[:, -1:].argmax(-1)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--decode", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true",
                        help="small widths (a check of the script on the CPU)")
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS),
                        help="the forms to run (eager always runs: ratios are to it)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/h200"))
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    widths = WIDTHS if not args.tiny else dict(
        hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, vocab_size=96)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    model = build(args.layers, args.device, dtype, widths)
    ids = torch.randint(0, widths["vocab_size"], (1, args.seq), device=args.device,
                        generator=torch.Generator(args.device).manual_seed(1))
    prompt = ids[:, :min(512, args.seq)]
    from torch._dynamo.utils import counters

    rows, reference = [], None
    built = {name: form for name, form in forms(model).items()
             if name == "eager" or name in args.forms}
    prefills, decodes = {}, {}
    for name, form in built.items():
        counters.clear()
        with torch.no_grad():
            logits = form(ids).logits.float()  # (also the compile's warm-up)
        if reference is None:
            reference = logits
        error = ((logits - reference).norm() / reference.norm()).item()
        breaks = sum(counters["graph_break"].values())
        rows.append({"form": name, "layers": args.layers, "seq": args.seq, "rel_error": error,
                     "ok": error <= TOLERANCE, "graph_breaks": breaks})

        def prefill(f: Any = form) -> None:
            with torch.no_grad():
                f(ids)

        prefills[name] = prefill
        decodes[name] = decode_steps(form, prompt, args.decode)
        decodes[name]()  # (warm-up: the decode shapes compile here)
    prefill_times = interleaved_times(prefills, args.reps, sync)
    decode_times = interleaved_times(decodes, args.reps, sync)
    for row in rows:
        name = row["form"]
        prefill_s = statistics.median(prefill_times[name])
        decode_s = statistics.median(decode_times[name])
        row.update({"prefill_ms": prefill_s * 1e3, "prefill_tok_s": args.seq / prefill_s,
                    "decode_ms_per_token": decode_s / args.decode * 1e3,
                    "decode_tok_s": args.decode / decode_s,
                    "prefill_ratio": paired_ratio(prefill_times["eager"], prefill_times[name]),
                    "decode_ratio": paired_ratio(decode_times["eager"], decode_times[name])})
        print(f"{name:18s} prefill {row['prefill_tok_s']:10.0f} tok/s "
              f"({row['prefill_ratio']:.3f})  decode {row['decode_tok_s']:8.1f} tok/s "
              f"({row['decode_ratio']:.3f})  error {row['rel_error']:.2e}  "
              f"breaks {row['graph_breaks']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out / "model.csv")
    (args.out / "model.json").write_text(json.dumps(rows, indent=1))
    plot(rows, args.out / "model.png")
    return 0 if all(r["ok"] for r in rows) else 1


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    names = [r["form"] for r in rows]
    for ax, key, title in ((axes[0], "prefill_ratio", "prefill (tokens/s vs eager)"),
                           (axes[1], "decode_ratio", "decode (tokens/s vs eager)")):
        ax.bar(names, [r[key] for r in rows])
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
