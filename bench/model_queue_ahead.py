"""How much of a Llama prefill's time is the GPU's own: each form of
``bench/model_sweep.py`` runs one prefill after a long GPU sleep (``torch.cuda._sleep``),
so that the host queues the whole forward before the GPU starts it. The GPU's span from
the end of the sleep to the end of the forward (CUDA events) is then its execution time
with no wait for the host; the host's time to issue the forward is printed beside it.

A form whose span is shorter than another's but whose plain prefill (model_sweep.py) is
longer loses its time on the host: the GPU waits between its kernels.

    python bench/model_queue_ahead.py [--layers 4] [--seq 2048] [--rounds 12]
        [--sleep-ms 30] [--forms croqtile croqtile_qkv croqtile_norm] [--out model_queue_ahead.csv]

Forms are interleaved per round; medians over rounds. The host time must stay below the
sleep (the script says when it does not: the span then includes host waits).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_sweep import FORMS, WIDTHS, build, forms  # noqa: E402
from rows import write_csv  # noqa: E402

SLEEP_CYCLES_PER_MS = 1_980_000  # the H200's maximum SM clock, 1980 MHz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--sleep-ms", type=float, default=30.0)
    parser.add_argument("--forms", nargs="+", choices=FORMS,
                        default=["croqtile", "croqtile_qkv", "croqtile_norm"],
                        help="the forms beside eager (which always runs)")
    parser.add_argument("--out", type=Path, default=Path("model_queue_ahead.csv"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("model_queue_ahead.py needs a CUDA device", file=sys.stderr)
        return 2
    model = build(args.layers, "cuda", torch.bfloat16, WIDTHS)
    ids = torch.randint(0, WIDTHS["vocab_size"], (1, args.seq), device="cuda")
    built = forms(model)
    runs = {name: built[name] for name in ["eager", *args.forms]}
    with torch.no_grad():
        for run in runs.values():  # (warm: compiles the kernels, fills the caches)
            run(ids)
            run(ids)
    spans: dict[str, list[float]] = {name: [] for name in runs}
    hosts: dict[str, list[float]] = {name: [] for name in runs}
    sleeps: list[float] = []
    for _ in range(args.rounds):
        for name, run in runs.items():
            start, slept, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            torch.cuda.synchronize()
            start.record()
            torch.cuda._sleep(int(args.sleep_ms * SLEEP_CYCLES_PER_MS))
            slept.record()
            began = time.perf_counter()
            with torch.no_grad():
                run(ids)
            hosts[name].append((time.perf_counter() - began) * 1e3)
            end.record()
            torch.cuda.synchronize()
            spans[name].append(slept.elapsed_time(end))
            sleeps.append(start.elapsed_time(slept))
    sleep = statistics.median(sleeps)
    rows = []
    for name in runs:
        span, host = statistics.median(spans[name]), statistics.median(hosts[name])
        rows.append({"form": name, "layers": args.layers, "seq": args.seq, "gpu_span_ms": span,
                     "host_ms": host, "sleep_ms": sleep,
                     "span_ratio": statistics.median(spans["eager"]) / span})
        note = "" if host < sleep else "  (host longer than the sleep: span includes waits)"
        print(f"{name:18s} GPU span {span:7.3f} ms ({rows[-1]['span_ratio']:.3f} of eager's "
              f"speed)  host {host:7.3f} ms  sleep {sleep:.1f} ms{note}", flush=True)
    write_csv(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
