"""What a benchmark run leaves behind: per sweep a CSV, a JSON with the run's metadata and
geometric means, and a PNG when matplotlib is importable (``plot_csv`` draws one later from
the CSV on any machine); and the summary table printed at the end of a run.

Every sweep shares the common columns; the shape columns depend on the sweep (attention:
``B, H, S, D, causal, layout``; the others ``M, N, K``), and the epilogue sweep adds its
second baseline (``torch.compile`` of torch's unfused code).
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import platform
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch

from .harness import Case, Row

NO_MATPLOTLIB = ("matplotlib is not importable here: no plot drawn; the CSV can be plotted "
                 "later (on any machine) with `croqtile bench --plot CSV`")

CSV_COLUMNS = ("sweep", "kernel", "dtype", "M", "N", "K", "label", "croqtile_tflops",
               "baseline_tflops", "ratio", "croqtile_ms", "baseline_ms", "croqtile_gbps",
               "baseline_gbps", "copy_fraction", "ok", "rel_error", "config",
               "croqtile_host_us", "baseline_host_us", "note")
ATTENTION_COLUMNS = ("sweep", "kernel", "dtype", "B", "H", "S", "D", "causal", "layout",
                     "label", "croqtile_tflops", "baseline_tflops", "ratio", "croqtile_ms",
                     "baseline_ms", "ok", "rel_error", "config", "croqtile_host_us",
                     "baseline_host_us", "note")
EPILOGUE_COLUMNS = ("sweep", "kernel", "dtype", "M", "N", "K", "label", "croqtile_tflops",
                    "baseline_tflops", "ratio", "compiled_tflops", "compiled_ratio",
                    "croqtile_ms", "baseline_ms", "compiled_ms", "ok", "rel_error", "config",
                    "croqtile_host_us", "baseline_host_us", "input_sets", "note")
DECODE_COLUMNS = ("sweep", "kernel", "dtype", "M", "N", "K", "label", "croqtile_tflops",
                  "baseline_tflops", "ratio", "croqtile_ms", "baseline_ms", "ok", "rel_error",
                  "config", "croqtile_host_us", "baseline_host_us", "input_sets", "note")
# the sparse sweep's second baseline (torch's semi-structured GEMM) fills the compiled_*
# columns
COLUMNS: Mapping[str, tuple[str, ...]] = {"attention": ATTENTION_COLUMNS,
                                          "epilogue": EPILOGUE_COLUMNS,
                                          "decode": DECODE_COLUMNS,
                                          "sparse": EPILOGUE_COLUMNS}
# The attention bar of the issue is a geometric mean over the longer sequences only (short
# ones are launch-bound on both sides): those rows get a mean of their own.
LONG_SEQUENCE = 2048
LONG_SEQUENCE_KEY = f"S>={LONG_SEQUENCE}"
# Shape fields are written as integers; every other number with these significant digits.
_INTEGERS = frozenset((*"MNKBHSD", "input_sets"))
_DIGITS = {"croqtile_ms": 6, "baseline_ms": 6, "compiled_ms": 6, "rel_error": 3}


def columns(sweep: str) -> tuple[str, ...]:
    return COLUMNS.get(sweep, CSV_COLUMNS)


# ----------------------------------------------------------------------------------------
# summaries
# ----------------------------------------------------------------------------------------


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def copy_fractions(rows: Sequence[Row]) -> dict[Case, float]:
    """Each timed memory case's GB/s over torch's device-to-device copy GB/s at the same
    shape and type (the copy case's baseline): how much of the practical bandwidth it got."""
    copy_bw = {(r.case.dtype, r.case.M, r.case.N): r.gbps(r.baseline_ms)
               for r in rows if r.case.kernel == "copy" and r.baseline_ms}
    fractions: dict[Case, float] = {}
    for r in rows:
        peak = copy_bw.get((r.case.dtype, r.case.M, r.case.N))
        ours = r.gbps(r.croqtile_ms)
        if r.case.sweep == "memory" and peak and ours:
            fractions[r.case] = ours / peak
    return fractions


def _ratio_groups(rows: Sequence[Row]) -> dict[str, list[float]]:
    """The ratios per sweep, per ``sweep/kernel/dtype``, per ``sweep/kernel/dtype/S>=2048``
    (attention) and per ``sweep/kernel/dtype/vs_compiled`` (the compiled baseline's
    ratios); a group of untimed rows is an empty list."""
    groups: dict[str, list[float]] = {}

    def add(key: str, value: float | None) -> None:
        groups.setdefault(key, [])
        if value is not None:
            groups[key].append(value)

    for r in rows:
        group = f"{r.case.sweep}/{r.case.kernel}/{r.case.dtype}"
        add(r.case.sweep, r.ratio)
        add(group, r.ratio)
        if r.case.S >= LONG_SEQUENCE:
            add(f"{group}/{LONG_SEQUENCE_KEY}", r.ratio)
        if r.compiled_ratio is not None:
            add(f"{group}/vs_compiled", r.compiled_ratio)
    return groups


def geomeans(rows: Sequence[Row]) -> dict[str, float | None]:
    """Geometric-mean ratio per group of ``_ratio_groups``."""
    return {key: geomean(vals) for key, vals in _ratio_groups(rows).items()}


def summary_table(rows: Sequence[Row]) -> str:
    """Fixed-width: per sweep, kernel and type, the cases, failures, geomean and lowest
    ratio; for attention also over the long sequences alone (sweep column ``S>=2048``);
    then one line per sweep."""
    groups = _ratio_groups(rows)
    header = (f"{'sweep':<9} {'kernel':<16} {'dtype':<5} {'cases':>5} {'failed':>6} "
              f"{'geomean ratio':>13} {'worst':>6}")
    lines = [header, "-" * len(header)]

    def line(sweep: str, kernel: str, dtype: str, mine: Sequence[Row], key: str) -> str:
        ratios = groups.get(key, [])
        mean = geomean(ratios)
        worst = min(ratios) if ratios else None
        return (f"{sweep:<9} {kernel:<16} {dtype:<5} {len(mine):>5} "
                f"{sum(not r.ok for r in mine):>6} "
                f"{'-' if mean is None else f'{mean:.3f}':>13} "
                f"{'-' if worst is None else f'{worst:.3f}':>6}")

    for sweep, kernel, dtype in dict.fromkeys((r.case.sweep, r.case.kernel, r.case.dtype)
                                              for r in rows):
        mine = [r for r in rows
                if (r.case.sweep, r.case.kernel, r.case.dtype) == (sweep, kernel, dtype)]
        lines.append(line(sweep, kernel, dtype, mine, f"{sweep}/{kernel}/{dtype}"))
        long = [r for r in mine if r.case.S >= LONG_SEQUENCE]
        if long:
            lines.append(line(LONG_SEQUENCE_KEY, kernel, dtype, long,
                              f"{sweep}/{kernel}/{dtype}/{LONG_SEQUENCE_KEY}"))
    for sweep in dict.fromkeys(r.case.sweep for r in rows):
        lines.append(line(sweep, "all", "", [r for r in rows if r.case.sweep == sweep], sweep))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# records and files
# ----------------------------------------------------------------------------------------


def record(row: Row, fraction: float | None = None) -> dict[str, Any]:
    """Every field any sweep writes, numbers as numbers and ``None`` for what was not
    measured or does not apply."""
    c = row.case
    bandwidth = not (c.is_gemm or c.is_attention)  # GB/s is the figure of memory kernels
    return {
        "sweep": c.sweep, "kernel": c.kernel, "dtype": c.dtype, "M": c.M, "N": c.N,
        "K": c.K if c.is_gemm else None, "B": c.B, "H": c.H, "S": c.S, "D": c.D,
        "causal": c.causal, "layout": c.layout, "label": c.label,
        "croqtile_tflops": row.tflops(row.croqtile_ms),
        "baseline_tflops": row.tflops(row.baseline_ms), "ratio": row.ratio,
        "compiled_tflops": row.tflops(row.compiled_ms), "compiled_ratio": row.compiled_ratio,
        "croqtile_ms": row.croqtile_ms, "baseline_ms": row.baseline_ms,
        "compiled_ms": row.compiled_ms,
        "croqtile_gbps": row.gbps(row.croqtile_ms) if bandwidth else None,
        "baseline_gbps": row.gbps(row.baseline_ms) if bandwidth else None,
        "copy_fraction": fraction, "ok": row.ok, "rel_error": row.rel_error,
        "config": row.config, "croqtile_host_us": row.croqtile_host_us,
        "baseline_host_us": row.baseline_host_us, "input_sets": row.input_sets,
        "note": row.note,
    }


def json_record(row: Row, fraction: float | None = None) -> dict[str, Any]:
    """The sweep's CSV columns with numbers as numbers and ``null`` for what was not
    measured."""
    full = record(row, fraction)
    return {name: full[name] for name in columns(row.case.sweep)}


def csv_record(row: Row, fraction: float | None = None) -> dict[str, str]:
    return {name: _cell(name, value) for name, value in json_record(row, fraction).items()}


def _cell(name: str, value: Any) -> str:
    return cell(value, _DIGITS.get(name, 4), integer=name in _INTEGERS)


def cell(value: Any, digits: int = 4, integer: bool = False) -> str:
    """One CSV cell: empty for None, booleans, strings and integers as written, any other
    number with ``digits`` significant digits."""
    if value is None:
        return ""
    if isinstance(value, (bool, str)) or integer:
        return str(value)
    return f"{value:.{digits}g}"


OUT_ROOT = Path("bench-results")  # the default --out's parent, in the current directory


def gpu_slug(name: str) -> str:
    """A folder name for a device: its model ("NVIDIA H200" -> ``h200``, "NVIDIA H100 80GB
    HBM3" -> ``h100``), else the whole name in lower case with dashes."""
    words = re.split(r"[\s_-]+", name.lower().replace("nvidia", " "))
    model = next((w for w in words if re.fullmatch(r"[a-z]+\d+[a-z]*", w)), None)
    return model or re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def default_out_dir(device: str) -> Path:
    """Where a run writes when ``--out`` is not given: ``bench-results/<gpu>`` in the
    current directory (``cpu`` for interpreter runs), never inside the package."""
    if device == "cpu":
        return OUT_ROOT / "cpu"
    return OUT_ROOT / gpu_slug(torch.cuda.get_device_name(device))


def metadata(device: str, reps: int, autotune: str, timed: bool = True) -> dict[str, Any]:
    """Where and with what the figures were measured."""
    import triton

    import croqtile

    gpu = torch.cuda.get_device_name() if device == "cuda" else "none (CPU interpreter)"
    return {
        "gpu": gpu, "device": device, "torch": torch.__version__,
        "triton": triton.__version__, "croqtile": croqtile.__version__,
        "python": platform.python_version(), "reps": reps, "autotune": autotune,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "timing": "median of reps medians, croqtile and baseline interleaved"
                  if timed else "none (correctness only)",
    }


def write_results(rows: Sequence[Row], out_dir: Path, meta: Mapping[str, Any],
                  plot: bool = True, sweep_meta: Mapping[str, Mapping[str, Any]] | None = None
                  ) -> tuple[list[Path], list[str]]:
    """``<sweep>.csv`` and ``<sweep>.json`` per sweep (and ``<sweep>.png``); returns the
    files written and messages for the user (a plot that could not be drawn).
    ``sweep_meta`` adds metadata to one sweep's JSON (where its kernels came from)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fractions = copy_fractions(rows)
    written: list[Path] = []
    messages: list[str] = []
    for sweep in dict.fromkeys(r.case.sweep for r in rows):
        mine = [r for r in rows if r.case.sweep == sweep]
        csv_path = out_dir / f"{sweep}.csv"
        write_csv([csv_record(r, fractions.get(r.case)) for r in mine], csv_path,
                  columns(sweep))
        json_path = out_dir / f"{sweep}.json"
        doc = {"metadata": {**meta, **(sweep_meta or {}).get(sweep, {}), "sweep": sweep,
                            "geomean_ratio": geomeans(mine)},
               "rows": [json_record(r, fractions.get(r.case)) for r in mine]}
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
        written += [csv_path, json_path]
        if plot and any(r.ratio is not None for r in mine):
            png, message = plot_csv(csv_path)
            written += [png] if png else []
            messages += [message] if message and message not in messages else []
    return written, messages


def write_csv(records: Sequence[Mapping[str, str]], path: Path,
              fieldnames: Sequence[str] = CSV_COLUMNS) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(records)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------------------
# plots
# ----------------------------------------------------------------------------------------


def plot_csv(csv_path: Path, png_path: Path | None = None) -> tuple[Path | None, str]:
    """Draw throughput (TFLOP/s, or GB/s for memory kernels) of croqtile and baseline (and
    of the compiled baseline where there is one), and their ratio, against the case;
    returns (PNG path, "") or (None, why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, NO_MATPLOTLIB
    records = read_csv(csv_path)
    png_path = png_path or csv_path.with_suffix(".png")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    labels = list(dict.fromkeys(_x_label(r) for r in records))
    for series in dict.fromkeys(_series(r) for r in records):
        mine = [r for r in records if _series(r) == series]
        xs = [labels.index(_x_label(r)) for r in mine]
        unit = "gbps" if mine[0].get("K") == "" else "tflops"
        name = " ".join(series)
        top.plot(xs, [_num(r[f"croqtile_{unit}"]) for r in mine], "o-", label=f"croqtile {name}")
        top.plot(xs, [_num(r[f"baseline_{unit}"]) for r in mine], "x--", label=f"torch {name}")
        bottom.plot(xs, [_num(r["ratio"]) for r in mine], "o-", label=name)
        if "compiled_tflops" in mine[0]:
            top.plot(xs, [_num(r["compiled_tflops"]) for r in mine], "+:",
                     label=f"torch.compile {name}")
            bottom.plot(xs, [_num(r["compiled_ratio"]) for r in mine], "+:",
                        label=f"{name} vs torch.compile")
    top.set_ylabel("TFLOP/s (GEMM, attention) or GB/s (memory)")
    top.legend(fontsize=7)
    bottom.axhline(1.0, color="grey", linewidth=0.8)
    bottom.legend(fontsize=7)
    bottom.set_ylabel("torch time / croqtile time")  # (or torch.compile's, dotted)
    bottom.set_xticks(range(len(labels)))
    bottom.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    sweeps = ", ".join(dict.fromkeys(r["sweep"] for r in records))
    top.set_title(f"croqtile vs torch: {sweeps}")
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path, ""


def _series(record: Mapping[str, str]) -> tuple[str, ...]:
    # causal and full attention of one kernel are separate lines
    mask = ("causal",) if record.get("causal") == "True" else ()
    return (record["kernel"], record["dtype"], *mask)


def _x_label(record: Mapping[str, str]) -> str:
    if record.get("S"):
        dims = f"B{record['B']} H{record['H']} S{record['S']} D{record['D']}"
    else:
        dims = "x".join(record[d] for d in ("M", "N", "K") if record[d])
    return f"{record['label']} {dims}".strip()


def _num(text: str) -> float:
    return float(text) if text else math.nan
