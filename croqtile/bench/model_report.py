"""What ``croqtile bench models`` leaves behind and prints: its rows (``ModelRow``, one per
model, workload, shape and form), ``models.csv``, ``models.json`` (the rows, the run's
metadata and the geometric-mean ratio per workload and form) and ``models.png`` (each
row's ratio to eager, by workload), the line printed per row and the summary table.
``croqtile.bench.models`` runs the sweep; the kernel sweeps' files are ``report``'s.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import report

CSV_NAME = "models.csv"


@dataclass
class ModelRow:
    """One form at one workload of one model. ``seq`` is the tokens per sequence (the
    prompt's for decode); ``ms`` the time of a forward (prefill), of a decode step
    (decode) or of a training step (train); ``ratio_eager`` and ``ratio_compile`` the
    median over the rounds of eager's (compile's) time over this form's; ``ok`` None for
    a skipped form."""

    model: str
    workload: str
    form: str
    dtype: str
    layers: int
    hidden: int
    batch: int
    seq: int
    new_tokens: int | None = None
    ms: float | None = None
    tokens_per_s: float | None = None
    ratio_eager: float | None = None
    ratio_compile: float | None = None
    rel_error: float | None = None
    ok: bool | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    tokens_equal: int | None = None
    grad_min_cos: float | None = None
    note: str = ""

    def describe(self) -> str:
        extra = f" +{self.new_tokens}" if self.new_tokens else ""
        return f"{self.model} {self.workload} B={self.batch} S={self.seq}{extra} {self.form}"


COLUMNS = tuple(f.name for f in dataclasses.fields(ModelRow))
_INTEGER_COLUMNS = frozenset(("layers", "hidden", "batch", "seq", "new_tokens", "graphs",
                              "graph_breaks", "tokens_equal"))
_DIGITS = {"ms": 6, "rel_error": 3, "grad_min_cos": 6}


# ----------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------


def geomeans(rows: Sequence[ModelRow]) -> dict[str, dict[str, float | None]]:
    """Per workload and form (``"prefill/croqtile"``), the geometric means of the ratios
    to eager and to compile over the models and shapes."""
    keys = dict.fromkeys(f"{r.workload}/{r.form}" for r in rows)
    return {key: {base: report.geomean(getattr(r, f"ratio_{base}") or 0.0 for r in rows
                                       if f"{r.workload}/{r.form}" == key)
                  for base in ("eager", "compile")} for key in keys}


def csv_record(row: ModelRow) -> dict[str, str]:
    return {name: report.cell(value, _DIGITS.get(name, 4), name in _INTEGER_COLUMNS)
            for name, value in dataclasses.asdict(row).items()}


def write_files(rows: Sequence[ModelRow], out_dir: Path, meta: Mapping[str, Any],
                plot: bool = True) -> tuple[list[Path], list[str]]:
    """``models.csv`` and ``models.json`` (and ``models.png``) in ``out_dir``; returns the
    files written and messages for the user (a plot that could not be drawn)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / CSV_NAME
    report.write_csv([csv_record(r) for r in rows], csv_path, COLUMNS)
    json_path = csv_path.with_suffix(".json")
    doc = {"metadata": {**meta, "geomean_ratio": geomeans(rows)},
           "rows": [dataclasses.asdict(r) for r in rows]}
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    written, messages = [csv_path, json_path], []
    if plot and any(r.ratio_eager is not None for r in rows):
        png, message = plot_csv(csv_path)
        written += [png] if png else []
        messages += [message] if message else []
    return written, messages


# ----------------------------------------------------------------------------------------
# what is printed
# ----------------------------------------------------------------------------------------


def _number(value: float | None, spec: str, width: int = 0) -> str:
    """``value`` formatted by ``spec`` ("-" for None), right-aligned in ``width``."""
    return ("-" if value is None else format(value, spec)).rjust(width)


def row_line(row: ModelRow) -> str:
    """One row in a line: what it is, its time and ratios, what its check found."""
    status = {True: "ok", False: "FAILED", None: "skipped"}[row.ok]
    parts = [f"{row.describe():<50}", f"{_number(row.ms, '.3f', 10)} ms",
             f"{_number(row.tokens_per_s, '.0f', 9)} tok/s",
             f"vs eager {_number(row.ratio_eager, '.3f', 6)}",
             f"vs compile {_number(row.ratio_compile, '.3f', 6)}", status]
    if row.rel_error is not None:
        parts.append(f"error {row.rel_error:.2e}")
    if row.tokens_equal is not None and row.new_tokens:
        parts.append(f"tokens {row.tokens_equal}/{row.batch * row.new_tokens}")
    if row.grad_min_cos is not None:
        parts.append(f"grad cos {row.grad_min_cos:.5f}")
    if row.graph_breaks is not None:
        parts.append(f"graphs {row.graphs}, breaks {row.graph_breaks}")
    return "  ".join(parts) + (f"  ({row.note})" if row.note else "")


def summary_table(rows: Sequence[ModelRow]) -> str:
    """Fixed width: per workload and form, the rows, failures and the geometric-mean
    ratios to eager and to compile."""
    header = (f"{'workload':<9} {'form':<17} {'rows':>4} {'failed':>6} {'vs eager':>9} "
              f"{'vs compile':>10}")
    lines = [header, "-" * len(header)]
    means = geomeans(rows)
    for key, ratio in means.items():
        workload, form = key.split("/", 1)
        mine = [r for r in rows if (r.workload, r.form) == (workload, form)]
        lines.append(f"{workload:<9} {form:<17} {len(mine):>4} "
                     f"{sum(r.ok is False for r in mine):>6} "
                     f"{_number(ratio['eager'], '.3f', 9)} {_number(ratio['compile'], '.3f', 10)}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# plot
# ----------------------------------------------------------------------------------------


def is_models_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV this sweep wrote (its header names the workload and the
    ratios of ``ModelRow``)."""
    with path.open(newline="") as f:
        return {"workload", "form", "ratio_eager"} <= set(next(csv.reader(f), ()))


def plot_csv(csv_path: Path, png_path: Path | None = None) -> tuple[Path | None, str]:
    """Per workload, a bar per form and shape: its ratio to eager (above 1: faster than
    eager); returns (PNG path, "") or (None, why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, report.NO_MATPLOTLIB
    records = [r for r in report.read_csv(csv_path) if r["ratio_eager"]]
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    png_path = png_path or csv_path.with_suffix(".png")
    fig, axes = plt.subplots(len(workloads), 1, figsize=(11, 3.2 * len(workloads)),
                             squeeze=False)
    for ax, workload in zip(axes[:, 0], workloads):
        mine = [r for r in records if r["workload"] == workload]
        shapes = list(dict.fromkeys(_shape(r) for r in mine))
        forms = list(dict.fromkeys(r["form"] for r in mine))
        width = 0.8 / len(forms)
        for i, form in enumerate(forms):
            bars = {_shape(r): float(r["ratio_eager"]) for r in mine if r["form"] == form}
            xs = [j + i * width for j, s in enumerate(shapes) if s in bars]
            ax.bar(xs, [bars[s] for s in shapes if s in bars], width, label=form)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
        ax.set_xticklabels(shapes, fontsize=7)
        ax.set_ylabel("eager time / form time")
        ax.set_title(workload)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    plt.close(fig)
    return png_path, ""


def _shape(record: Mapping[str, str]) -> str:
    extra = f" +{record['new_tokens']}" if record["new_tokens"] else ""
    return f"{record['model']} B={record['batch']} S={record['seq']}{extra}"
