"""``croqtile bench moe``: one mixture-of-experts layer in four forms, checked against a
float64 reference and then timed beside each other in the same run.

The widths (``WIDTHS``) are those of published MoE models: Qwen3-30B-A3B (hidden 2048,
expert width 768, 128 experts, top-8) and Mixtral-8x7B (hidden 4096, expert width 14336, 8
experts, top-2), in bf16; ``--tiny`` gives small float32 layers of the same families, for
the CPU. Every form computes the same layer from the same random weights, hidden states
and router logits, at each token count of ``--tokens``; every routed form routes in its
timed call (softmax in float32, the top ``k``, renormalised: ``croqtile.nn.moe_ops.route``).
The forms (``FORMS``):

* ``croqtile``: ``croqtile.nn.functional.fused_moe`` (its grouped GEMMs and combine are
  Croqtile kernels);
* ``grouped_mm``: torch's grouped GEMM, as ``transformers``' ``grouped_mm`` experts
  implementation runs it: the rows sorted by expert, ``torch._grouped_mm`` for the gate
  and up products, SiLU times up, ``torch._grouped_mm`` for the down projection, the
  rows weighted and summed back with ``index_add_``. Skipped, its row saying why, where
  this torch has no ``torch._grouped_mm`` or it refuses the device or dtype (bf16 needs
  CUDA sm90);
* ``eager_loop``: a loop over the experts the tokens hit, two ``F.linear`` each (the
  eager experts of ``transformers``);
* ``dense``: one dense GEMM pair of the same FLOPs, ``[T*k, H] @ [H, 2I]`` then
  ``[T*k, I] @ [I, H]``, without routing: what cuBLAS does with as much work.

Correctness comes first: the routed forms' outputs are compared with a float64 layer
computed from the same routing, the dense form's with its float64 GEMMs (relative error at
most ``TOLERANCES``). A wrong row is not timed and makes the command fail. The forms are
then timed in turns, ``--reps`` rounds, with the kernel sweeps' timer on the GPU (one
call timed alone on the CPU); a time is the median of the rounds and a ratio the median
over the rounds of the baseline's time over the form's in the same round. The FLOPs of a
layer are ``2*T*k*H*2I`` (gate and up) plus ``2*T*k*I*H`` (down); the weight bytes are
those of the experts the routing hits, ``3*I*H`` elements each. The rows go to
``moe.csv`` and ``moe.json``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

import torch
import torch.nn.functional as F

from . import report
from .harness import Timer, describe_error, relative_error
from .models import paired_ratio

FORMS = ("croqtile", "grouped_mm", "eager_loop", "dense")
ROUTED = ("croqtile", "grouped_mm", "eager_loop")
CSV_NAME = "moe.csv"
CPU_REPS = 1  # timing rounds on the CPU by default: the interpreter's times, not a GPU's
TOLERANCES: Mapping[torch.dtype, float] = {torch.bfloat16: 3e-2, torch.float16: 3e-2,
                                           torch.float32: 1e-4}
TOKENS = (1, 16, 128, 2048, 8192)
TINY_TOKENS = (4, 32)


@dataclass(frozen=True)
class Widths:
    """One MoE layer's sizes: hidden ``hidden``, expert width ``inter`` (each expert's
    gate and up projections are [inter, hidden]), ``experts`` experts, ``top_k`` per
    token."""

    hidden: int
    inter: int
    experts: int
    top_k: int


@dataclass(frozen=True)
class MoeSpec:
    name: str
    widths: Widths
    tiny: Widths


WIDTHS: Mapping[str, MoeSpec] = {spec.name: spec for spec in (
    MoeSpec("qwen3-30b-a3b", Widths(2048, 768, 128, 8), Widths(64, 32, 16, 4)),
    MoeSpec("mixtral-8x7b", Widths(4096, 14336, 8, 2), Widths(64, 32, 8, 2)),
)}


@dataclass(frozen=True)
class Settings:
    widths: tuple[str, ...] = tuple(WIDTHS)
    tokens: tuple[int, ...] = TOKENS
    reps: int = 3
    device: str = "cuda"
    tiny: bool = False

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32 if self.tiny else torch.bfloat16


def settings(device: str, tiny: bool = False, **given: Any) -> Settings:
    """The settings of a run: the defaults (``TINY_TOKENS`` with ``tiny``; ``CPU_REPS``
    rounds on the CPU), then every ``given`` value that is not None. Raises ValueError for
    an unknown width set or a value out of range."""
    base = Settings(device=device, tiny=tiny, reps=CPU_REPS if device == "cpu" else 3,
                    tokens=TINY_TOKENS if tiny else TOKENS)
    chosen: dict[str, Any] = {k: tuple(v) if isinstance(v, (list, tuple)) else v
                              for k, v in given.items() if v is not None}
    unknown = [n for n in chosen.get("widths", ()) if n not in WIDTHS]
    if unknown:
        raise ValueError(f"unknown width set {unknown[0]!r}; choose from {', '.join(WIDTHS)}")
    run = dataclasses.replace(base, **chosen)
    if min((run.reps, *run.tokens)) < 1:
        raise ValueError("token counts and --reps must be at least 1")
    return run


# ----------------------------------------------------------------------------------------
# the layer and its forms
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """The inputs of one layer: hidden [T, H], router logits [T, E], gate_up [E, 2I, H],
    down [E, H, I] (``transformers``' layout) and the dense form's weights [H, 2I] and
    [I, H]."""

    hidden: torch.Tensor
    logits: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor
    dense_up: torch.Tensor
    dense_down: torch.Tensor
    top_k: int


def weights(w: Widths, device: str, dtype: torch.dtype, seed: int = 0
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random expert and dense weights, scaled so that the outputs are of order one."""
    g = torch.Generator(device).manual_seed(seed)

    def rand(*shape: int, fan_in: int) -> torch.Tensor:
        t = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return t.mul_(fan_in ** -0.5).to(dtype)

    return (rand(w.experts, 2 * w.inter, w.hidden, fan_in=w.hidden),
            rand(w.experts, w.hidden, w.inter, fan_in=w.inter),
            rand(w.hidden, 2 * w.inter, fan_in=w.hidden), rand(w.inter, w.hidden, fan_in=w.inter))


def layer(w: Widths, tokens: int,
          parameters: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
          device: str, dtype: torch.dtype, seed: int) -> Layer:
    g = torch.Generator(device).manual_seed(seed)
    hidden = torch.randn(tokens, w.hidden, generator=g, device=device).to(dtype)
    logits = torch.randn(tokens, w.experts, generator=g, device=device).to(dtype)
    gate_up, down, dense_up, dense_down = parameters
    return Layer(hidden, logits, gate_up, down, dense_up, dense_down, top_k=w.top_k)


def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What every routed form does first (``fused_moe``'s own routing)."""
    from ..nn.moe_ops import route as moe_route

    return moe_route(logits, top_k)


def croqtile_form(L: Layer) -> torch.Tensor:
    from ..nn import functional

    out: torch.Tensor = functional.fused_moe(L.hidden, L.logits, L.gate_up, L.down, L.top_k)
    return out


def grouped_mm_form(L: Layer) -> torch.Tensor:
    """``transformers``' ``grouped_mm`` experts, routing included."""
    weights_, ids = route(L.logits, L.top_k)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    experts = L.gate_up.shape[0]
    # (histc, as transformers counts: bincount's output size waits for the device)
    counts = torch.histc(flat.float(), bins=experts, min=0, max=experts - 1)
    ends = torch.cumsum(counts, 0).to(torch.int32)
    token = torch.div(order, L.top_k, rounding_mode="floor")
    x = L.hidden.index_select(0, token)
    gate_up = torch._grouped_mm(x, L.gate_up.transpose(1, 2), offs=ends)
    gate, up = gate_up.chunk(2, dim=-1)
    y = torch._grouped_mm(F.silu(gate) * up, L.down.transpose(1, 2), offs=ends)
    y = y * weights_.reshape(-1)[order, None].to(y.dtype)
    return torch.zeros_like(L.hidden).index_add_(0, token, y.to(L.hidden.dtype))


def eager_loop_form(L: Layer) -> torch.Tensor:
    """The loop over the experts the tokens hit (``transformers``' eager experts)."""
    weights_, ids = route(L.logits, L.top_k)
    out = torch.zeros_like(L.hidden)
    half = L.gate_up.shape[1] // 2
    for e in torch.unique(ids).tolist():
        token, slot = torch.where(ids == e)
        gate, up = F.linear(L.hidden[token], L.gate_up[e]).split(half, dim=-1)
        y = F.linear(F.silu(gate) * up, L.down[e])
        out.index_add_(0, token, (y * weights_[token, slot, None].to(y.dtype)).to(out.dtype))
    return out


def dense_input(L: Layer) -> torch.Tensor:
    """The dense form's rows: each token ``top_k`` times (as many rows as the routed
    forms compute)."""
    return L.hidden.repeat_interleave(L.top_k, dim=0)


def dense_form(L: Layer, x: torch.Tensor) -> torch.Tensor:
    """The dense GEMM pair of the routed forms' FLOPs: no routing, no activation."""
    inter = L.dense_down.shape[0]
    return torch.mm(torch.mm(x, L.dense_up)[:, :inter], L.dense_down)


def reference(L: Layer) -> torch.Tensor:
    """The layer in float64 from the same routing (``route``), expert by expert."""
    weights_, ids = route(L.logits, L.top_k)
    x = L.hidden.double()
    out = torch.zeros_like(x)
    half = L.gate_up.shape[1] // 2
    for e in torch.unique(ids).tolist():
        token, slot = torch.where(ids == e)
        gate, up = F.linear(x[token], L.gate_up[e].double()).split(half, dim=-1)
        y = F.linear(F.silu(gate) * up, L.down[e].double())
        out.index_add_(0, token, y * weights_[token, slot, None].double())
    return out


def dense_reference(L: Layer, x: torch.Tensor) -> torch.Tensor:
    inter = L.dense_down.shape[0]
    return (x.double() @ L.dense_up.double())[:, :inter] @ L.dense_down.double()


def grouped_mm_missing(device: str, dtype: torch.dtype) -> str | None:
    """Why ``torch._grouped_mm`` cannot run here (None: it can), from a small call with
    the layouts of ``grouped_mm_form`` (the weights [G, N, K] transposed)."""
    if not hasattr(torch, "_grouped_mm"):
        return f"skipped: torch {torch.__version__} has no torch._grouped_mm"
    try:
        x = torch.ones(32, 16, device=device, dtype=dtype)
        w = torch.ones(2, 16, 16, device=device, dtype=dtype).transpose(1, 2)
        torch._grouped_mm(x, w, offs=torch.tensor([16, 32], device=device,
                                                  dtype=torch.int32))
    except Exception as exc:  # (missing kernels raise RuntimeError or NotImplementedError)
        dtype_name = str(dtype).removeprefix("torch.")
        return f"skipped: torch._grouped_mm refuses {dtype_name} on {device}: " \
               f"{describe_error(exc)}"
    return None


# ----------------------------------------------------------------------------------------
# rows
# ----------------------------------------------------------------------------------------


@dataclass
class MoeRow:
    """One form of one layer at one token count. ``ms`` the median time of a call;
    ``tflops`` the layer's FLOPs over it; ``weight_gbps`` the bytes of the experts hit
    over it (routed forms); ``ratio_grouped_mm`` and ``ratio_dense`` the median over the
    rounds of that form's time over this one's; ``ok`` None for a skipped form."""

    widths: str
    form: str
    dtype: str
    hidden: int
    inter: int
    experts: int
    top_k: int
    tokens: int
    experts_hit: int | None = None
    ms: float | None = None
    tflops: float | None = None
    weight_gbps: float | None = None
    ratio_grouped_mm: float | None = None
    ratio_dense: float | None = None
    rel_error: float | None = None
    ok: bool | None = None
    note: str = ""

    def describe(self) -> str:
        return f"{self.widths} T={self.tokens} {self.form}"


COLUMNS = tuple(f.name for f in dataclasses.fields(MoeRow))
_INTEGER_COLUMNS = frozenset(("hidden", "inter", "experts", "top_k", "tokens", "experts_hit"))
_DIGITS = {"ms": 6, "rel_error": 3}


def flops(w: Widths, tokens: int) -> int:
    """Gate and up (``2*rows*H*2I``) plus down (``2*rows*I*H``), ``rows = T*k``."""
    rows = tokens * w.top_k
    return 2 * rows * w.hidden * 2 * w.inter + 2 * rows * w.inter * w.hidden


def weight_bytes(w: Widths, experts_hit: int, dtype: torch.dtype) -> int:
    """The expert weights a routed call reads at least once: ``3*I*H`` elements per
    expert hit."""
    return experts_hit * 3 * w.inter * w.hidden * torch.empty((), dtype=dtype).element_size()


def cpu_timer(sync: Callable[[], None]) -> Timer:
    """Milliseconds of one call, timed alone (the CPU's interpreter: no repetitions)."""
    def timer(fn: Callable[[], object]) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - start) * 1e3

    return timer


def measure(spec: MoeSpec, L: Layer, run: Settings, timer: Timer, grouped_skip: str | None,
            say: Callable[[str], None]) -> list[MoeRow]:
    """Check every form, then time the correct ones in ``run.reps`` rounds, in turns."""
    w = spec.tiny if run.tiny else spec.widths
    tokens = L.hidden.shape[0]
    dtype_name = str(run.dtype).removeprefix("torch.")
    tolerance = TOLERANCES[run.dtype]
    _, ids = route(L.logits, L.top_k)
    hit = int(torch.unique(ids).numel())
    x = dense_input(L)
    calls: dict[str, Callable[[], torch.Tensor]] = {
        "croqtile": lambda: croqtile_form(L), "grouped_mm": lambda: grouped_mm_form(L),
        "eager_loop": lambda: eager_loop_form(L), "dense": lambda: dense_form(L, x)}
    label = f"{spec.name} T={tokens}"
    rows: dict[str, MoeRow] = {}
    runs: dict[str, Callable[[], object]] = {}
    routed_ref = dense_ref = None
    for name in FORMS:
        row = rows[name] = MoeRow(spec.name, name, dtype_name, w.hidden, w.inter, w.experts,
                                  w.top_k, tokens, experts_hit=hit if name in ROUTED else None)
        if name == "grouped_mm" and grouped_skip:
            row.note = grouped_skip
            continue
        say(f"{label}: {name}: checking")
        try:
            out = calls[name]()
            if name == "dense":
                dense_ref = dense_reference(L, x) if dense_ref is None else dense_ref
                ref = dense_ref
            else:
                routed_ref = reference(L) if routed_ref is None else routed_ref
                ref = routed_ref
            if tuple(out.shape) != tuple(ref.shape):
                row.ok, row.note = False, f"output {tuple(out.shape)}, expected " \
                                          f"{tuple(ref.shape)}"
                continue
            row.rel_error = relative_error(out, ref)
            row.ok = row.rel_error <= tolerance  # False for NaN
            if row.ok:
                runs[name] = calls[name]
            else:
                row.note = "wrong result: differs from the float64 reference"
        except Exception as exc:  # a form that fails is a failed row, not a crash
            row.ok, row.note = False, describe_error(exc)
    del routed_ref, dense_ref
    say(f"{label}: timing {', '.join(runs)} in {run.reps} rounds")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(run.reps):
        for name in list(runs):
            try:
                times[name].append(timer(runs[name]))
            except Exception as exc:  # checked, but not timed: the row keeps its check
                rows[name].note = "timing: " + describe_error(exc)
                del runs[name], times[name]
    layer_flops, layer_bytes = flops(w, tokens), weight_bytes(w, hit, run.dtype)
    for name, mine in times.items():
        row = rows[name]
        row.ms = statistics.median(mine)
        row.tflops = layer_flops / (row.ms * 1e-3) / 1e12
        if name in ROUTED:
            row.weight_gbps = layer_bytes / (row.ms * 1e-3) / 1e9
        for base in ("grouped_mm", "dense"):
            if base in times:
                setattr(row, f"ratio_{base}", paired_ratio(times[base], mine))
    return list(rows.values())


# ----------------------------------------------------------------------------------------
# files and what is printed
# ----------------------------------------------------------------------------------------


def _number(value: float | None, spec: str, width: int = 0) -> str:
    return ("-" if value is None else format(value, spec)).rjust(width)


def row_line(row: MoeRow) -> str:
    """One row in a line: what it is, its time, rates and ratios, what its check found."""
    status = {True: "ok", False: "FAILED", None: "skipped"}[row.ok]
    parts = [f"{row.describe():<32}", f"{_number(row.ms, '.3f', 10)} ms",
             f"{_number(row.tflops, '.3g', 8)} TFLOP/s",
             f"{_number(row.weight_gbps, '.4g', 8)} GB/s",
             f"vs grouped_mm {_number(row.ratio_grouped_mm, '.3f', 6)}",
             f"vs dense {_number(row.ratio_dense, '.3f', 6)}", status]
    if row.rel_error is not None:
        parts.append(f"error {row.rel_error:.2e}")
    return "  ".join(parts) + (f"  ({row.note})" if row.note else "")


def geomeans(rows: Sequence[MoeRow]) -> dict[str, dict[str, float | None]]:
    """Per width set and form (``"mixtral-8x7b/croqtile"``), the geometric means of the
    ratios to grouped_mm and to dense over the token counts."""
    keys = dict.fromkeys(f"{r.widths}/{r.form}" for r in rows)
    return {key: {base: report.geomean(getattr(r, f"ratio_{base}") or 0.0 for r in rows
                                       if f"{r.widths}/{r.form}" == key)
                  for base in ("grouped_mm", "dense")} for key in keys}


def summary_table(rows: Sequence[MoeRow]) -> str:
    header = (f"{'widths':<14} {'form':<11} {'rows':>4} {'failed':>6} {'vs grouped_mm':>13} "
              f"{'vs dense':>9}")
    lines = [header, "-" * len(header)]
    for key, ratio in geomeans(rows).items():
        widths, form = key.split("/", 1)
        mine = [r for r in rows if (r.widths, r.form) == (widths, form)]
        lines.append(f"{widths:<14} {form:<11} {len(mine):>4} "
                     f"{sum(r.ok is False for r in mine):>6} "
                     f"{_number(ratio['grouped_mm'], '.3f', 13)} "
                     f"{_number(ratio['dense'], '.3f', 9)}")
    return "\n".join(lines)


def csv_record(row: MoeRow) -> dict[str, str]:
    return {name: report.cell(value, _DIGITS.get(name, 4), name in _INTEGER_COLUMNS)
            for name, value in dataclasses.asdict(row).items()}


def is_moe_csv(path: Path) -> bool:
    """Whether ``path`` is a CSV this sweep wrote."""
    with path.open(newline="") as f:
        return {"form", "ratio_grouped_mm"} <= set(next(csv.reader(f), ()))


def write_files(rows: Sequence[MoeRow], out_dir: Path, meta: Mapping[str, Any]) -> list[Path]:
    """``moe.csv`` and ``moe.json`` in ``out_dir`` (no plot)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / CSV_NAME
    report.write_csv([csv_record(r) for r in rows], csv_path, COLUMNS)
    json_path = csv_path.with_suffix(".json")
    doc = {"metadata": {**meta, "geomean_ratio": geomeans(rows)},
           "rows": [dataclasses.asdict(r) for r in rows]}
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return [csv_path, json_path]


@dataclass(frozen=True)
class MoeResult:
    rows: list[MoeRow]
    files: list[Path]
    table: str

    @property
    def failed(self) -> int:
        return sum(r.ok is False for r in self.rows)


def metadata(run: Settings, timer: str) -> dict[str, Any]:
    meta = report.metadata(run.device, run.reps, "none")
    meta.update({
        "sweep": "moe", "settings": dataclasses.asdict(run),
        "dtype": str(run.dtype).removeprefix("torch."), "tolerance": TOLERANCES[run.dtype],
        "widths": {name: dataclasses.asdict(WIDTHS[name].tiny if run.tiny
                                            else WIDTHS[name].widths) for name in run.widths},
        "timing": f"{run.reps} rounds, the forms in turns, each call timed by {timer}; "
                  "medians; a ratio is the median over the rounds of the baseline's time "
                  "over the form's in that round",
        "flops": "2*T*k*H*2I (gate and up) + 2*T*k*I*H (down)",
        "weight_bytes": "distinct experts hit x 3*I*H x element size (routed forms)",
        "forms": {
            "croqtile": "croqtile.nn.functional.fused_moe(hidden, logits, gate_up, down, k)",
            "grouped_mm": "route; rows sorted by expert; torch._grouped_mm(x, gate_up.mT, "
                          "offs); silu(gate) * up; torch._grouped_mm(h, down.mT, offs); "
                          "weighted index_add_",
            "eager_loop": "route; for each expert hit: F.linear, silu(gate) * up, F.linear, "
                          "weighted index_add_",
            "dense": "mm([T*k, H], [H, 2I]), then mm of its first I columns with [I, H]; "
                     "no routing"},
    })
    return meta


def run_moe(run: Settings, out_dir: Path, timer: Timer | None = None, timer_name: str = "",
            progress: TextIO | None = None) -> MoeResult:
    """Every width set and token count of ``run``: check, time, and write the files
    (rewritten after every layer, so that a run stopped by a time limit keeps its rows).
    ``timer`` (milliseconds of a callable) defaults to one call timed alone."""
    sync = torch.cuda.synchronize if run.device.startswith("cuda") else (lambda: None)
    if timer is None:
        timer, timer_name = cpu_timer(sync), "one call, the host clock"
    meta = metadata(run, timer_name)
    rows: list[MoeRow] = []

    def say(text: str) -> None:
        if progress is not None:
            progress.write(f"moe: {text}\n")
            progress.flush()

    grouped_skip = grouped_mm_missing(run.device, run.dtype)
    if grouped_skip:
        say(f"grouped_mm {grouped_skip}")
    files: list[Path] = []
    for name in run.widths:
        spec = WIDTHS[name]
        w = spec.tiny if run.tiny else spec.widths
        say(f"{name}: hidden {w.hidden}, expert width {w.inter}, {w.experts} experts, "
            f"top-{w.top_k}, {meta['dtype']} on {run.device}")
        parameters = weights(w, run.device, run.dtype)
        for i, tokens in enumerate(run.tokens):
            L = layer(w, tokens, parameters, run.device, run.dtype, seed=1 + i)
            mine = measure(spec, L, run, timer, grouped_skip, say)
            rows.extend(mine)
            for r in mine:
                say(row_line(r))
            files = write_files(rows, out_dir, meta)
            del L
        del parameters
        if run.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return MoeResult(rows, files, summary_table(rows))
