"""The Croqtile tutorial's fused-MoE FP8 pipeline (``optimization/fused-moe-fp8.md``) run as
its own host code runs it: ``croqtile bench moe --tutorial PATH``.

The tutorial builds one FP8 mixture-of-experts layer for Qwen3.5-35B-A3B routing (256
experts, top-8, soft-capped softmax, renormalised; 128 tokens, N = 512, K = 2048,
128 x 128 block scales) in six versions, ``00_baseline.co`` to ``05_cuda_optimized.co``.
Each file is several kernels and a ``main`` that fills the inputs with index patterns,
launches the kernels in a fixed order, checks the result against a CPU reference and
times the launches end to end. This module does the same from Python:

* ``inputs``: the host code's patterns (``reference`` computes its check in float64);
* ``PROGRAMS``: for ``00``, ``01`` and ``02``, the steps of the host code's end-to-end
  launch: its memsets, the kernels with the buffers it passes them, and, in ``02``, the
  host code's prefix sum (done here by torch on the device; the file copies the counts to
  the host and back);
* ``run_program``: compiles the file with ``croqtile.compile``, poisons every buffer the
  host code leaves uninitialised, runs the steps, checks the host code's own way (top-k ids
  exactly, top-k weights within 2e-5, each output element within 4e-2 + 1.2e-1 relative)
  and times the whole launch sequence: end-to-end TFLOPS are ``2 * M * top_k * N * K``
  over its time, the figure the files print (their H800 PCIe figure is in each file's
  header and on the page's roadmap);
* the later files (``03`` to ``05``) put raw CUDA (``__cpp__``) inside their kernels: their
  rows record the located error at which compilation stops.

``TINY`` sizes (4 tokens, 64 experts, N = 128, K = 256, set through the files' own
``#define`` values) run on the CPU through Triton's interpreter.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from . import report
from .harness import Timer, describe_error

FOLDER = Path("optimization/assets/fused-moe-fp8")
FP8_MAX, SOFTCAP = 448.0, 2.5
WEIGHT_TOLERANCE = 2e-5  # the host code's check of the top-k weights (absolute and relative)
OUTPUT_ATOL, OUTPUT_RTOL = 4e-2, 1.2e-1  # its check of the output (nearlyEqual's defaults)
CSV_NAME = "moe_tutorial.csv"
PAGE = Path("optimization/fused-moe-fp8.md")
_HEADER_FIGURE = re.compile(r"End-to-end TFLOPS:\s*~?([0-9.]+)\s*\(H800 PCIe\)")
# a row of the page's roadmap table: | stage | [`05_cuda_optimized.co`](...) | **13.18** | ...
_TABLE_FIGURE = re.compile(r"\[`(\w+)\.co`\]\([^)]*\)\s*\|\s*\**([0-9.]+)\**\s*\|")


@dataclass(frozen=True)
class Sizes:
    """The pipeline's sizes: ``tokens`` (the host code's M), ``experts``, the GEMM's ``n``
    and ``k``, ``top_k``, the quantisation ``block``; ``max_m`` and ``routes`` size the
    buffers the host code allocates for the largest M (``QWEN35_MAX_M``,
    ``QWEN35_MAX_SORTED_ROUTES``)."""

    tokens: int
    experts: int
    n: int
    k: int
    max_m: int
    routes: int
    top_k: int = 8
    block: int = 128

    @property
    def k_blocks(self) -> int:
        return self.k // self.block

    @property
    def n_blocks(self) -> int:
        return self.n // self.block

    @property
    def flops(self) -> int:
        """What the files count: ``2 * M * top_k * N * K``."""
        return 2 * self.tokens * self.top_k * self.n * self.k


FILE = Sizes(tokens=128, experts=256, n=512, k=2048, max_m=1024, routes=8192)
TINY = Sizes(tokens=4, experts=64, n=128, k=256, max_m=4, routes=64)


def defines(sizes: Sizes) -> dict[str, str]:
    """The ``#define`` values that set ``sizes`` (none for the files' own sizes)."""
    if sizes == dataclasses.replace(FILE, tokens=sizes.tokens):
        return {}
    return {"QWEN35_DEFAULT_NUM_EXPERTS": str(sizes.experts),
            "QWEN35_ROUTE_VALUES_PER_THREAD": str(sizes.experts // 32),
            "QWEN35_DEFAULT_N": str(sizes.n), "QWEN35_DEFAULT_K": str(sizes.k),
            "QWEN35_K_BLOCKS": str(sizes.k_blocks), "QWEN35_N_BLOCKS": str(sizes.n_blocks),
            "QWEN35_MAX_SORTED_ROUTES": str(sizes.routes), "QWEN35_MAX_M": str(sizes.max_m)}


# ----------------------------------------------------------------------------------------
# the host code's inputs and its reference, in float64
# ----------------------------------------------------------------------------------------


def inputs(sizes: Sizes, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The host code's inputs: ``input`` bf16 [M, K], ``gating`` f32 [M, E], the expert
    weights quantised to FP8 per 128 x 128 block, ``expert_weights`` [E*N, K] with
    ``expert_scales`` f32 [E*NB, KB] (``initExpertWeightsQwenFp8``)."""
    s = sizes
    tok, kk = torch.arange(s.tokens)[:, None], torch.arange(s.k)[None, :]
    inp = (0.0625 * ((((tok + 1) * 17 + (kk + 3) * 11) % 41) - 20).float()).bfloat16()
    ex = torch.arange(s.experts)[None, :]
    gating = 0.125 * ((((tok + 3) * 19 + (ex + 5) * 7) % 43) - 21).float()
    e3, n3, k3 = (torch.arange(n).view(*([1] * d), n, *([1] * (2 - d)))
                  for d, n in enumerate((s.experts, s.n, s.k)))
    wv = 0.0625 * ((((e3 + 1) * 13 + (n3 + 1) * 7 + (k3 + 1) * 5) % 23) - 11).float()
    blocks = wv.abs().view(s.experts, s.n_blocks, s.block, s.k_blocks, s.block)
    wscale = torch.clamp(blocks.amax(dim=(2, 4)) / FP8_MAX, min=1e-6)
    wide = wscale.repeat_interleave(s.block, 1).repeat_interleave(s.block, 2)
    wq = (wv / wide).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    found = {"input": inp, "gating": gating, "expert_weights": wq.view(s.experts * s.n, s.k),
             "expert_scales": wscale.view(s.experts * s.n_blocks, s.k_blocks)}
    return {name: t.to(device) for name, t in found.items()}


def routing(gating: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ids (s32) and renormalised weights (float64) of the soft-capped softmax, the
    host code's way: repeated argmax, ties to the lower expert."""
    p = torch.softmax(torch.tanh(gating.double() / SOFTCAP) * SOFTCAP, dim=1)
    ids = torch.empty(p.shape[0], top_k, dtype=torch.int64, device=p.device)
    weights = torch.empty(p.shape[0], top_k, dtype=torch.float64, device=p.device)
    left = p.clone()
    for slot in range(top_k):
        best = torch.argmax(left, dim=1)  # (the first of equal values: the lower expert)
        ids[:, slot], weights[:, slot] = best, left.gather(1, best[:, None])[:, 0]
        left.scatter_(1, best[:, None], -1.0)
    return ids.to(torch.int32), weights / weights.sum(1, keepdim=True)


def quantize_rows(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-``block`` FP8 E4M3 quantisation of the rows of ``x``: (values, f64 scales)."""
    t, k = x.shape
    blocks = x.double().view(t, k // block, block)
    scales = torch.clamp(blocks.abs().amax(2) / FP8_MAX, min=1e-6)
    q = (blocks / scales[..., None]).clamp(-FP8_MAX, FP8_MAX).float()
    return q.to(torch.float8_e4m3fn).view(t, k), scales


def reference(given: Mapping[str, torch.Tensor], sizes: Sizes) -> dict[str, torch.Tensor]:
    """The host code's reference in float64 and every intermediate buffer as the kernels
    leave it when their atomics run one at a time: ``ids``, ``weights`` [M, k]; ``xq``,
    ``xs``: the quantised input; ``counts``, ``offsets`` [E + 1]; ``sorted_ids``
    [routes] (each expert's routes in route order, ``token * k + slot``, then -1);
    ``rep_q``, ``rep_scales``: the gathered rows; ``rows`` [routes, N]: the grouped GEMM's
    rows; ``out`` [M, N]; ``n_routes``."""
    s = sizes
    ids, weights = routing(given["gating"], s.top_k)
    xq, xs = quantize_rows(given["input"], s.block)
    flat = ids.flatten().long()
    counts = torch.bincount(flat, minlength=s.experts).to(torch.int32)
    offsets = torch.zeros(s.experts + 1, dtype=torch.int32, device=flat.device)
    offsets[1:] = torch.cumsum(counts, 0)
    order = torch.argsort(flat, stable=True)  # (stable: route order within an expert)
    n_routes = order.numel()
    sorted_ids = torch.full((s.routes,), -1, dtype=torch.int32, device=flat.device)
    sorted_ids[:n_routes] = order.to(torch.int32)
    token = order // s.top_k
    rep_q = torch.zeros(s.routes, s.k, dtype=torch.float8_e4m3fn, device=flat.device)
    rep_scales = torch.zeros(s.routes, s.k_blocks, device=flat.device)
    rep_q[:n_routes], rep_scales[:n_routes] = xq[token], xs[token].float()
    x = xq.double() * xs.repeat_interleave(s.block, 1)
    w_scales = given["expert_scales"].double().view(s.experts, s.n_blocks, s.k_blocks)
    rows = torch.zeros(s.routes, s.n, dtype=torch.float64, device=flat.device)
    for e in torch.unique(flat).tolist():  # (one expert's weights in float64 at a time)
        w = given["expert_weights"][e * s.n:(e + 1) * s.n].double()
        w = w * w_scales[e].repeat_interleave(s.block, 0).repeat_interleave(s.block, 1)
        slots = torch.nonzero(flat[order] == e)[:, 0]
        rows[slots] = x[token[slots]] @ w.T
    out = torch.zeros(s.tokens, s.n, dtype=torch.float64, device=flat.device)
    out.index_add_(0, token, weights.flatten()[order, None] * rows[:n_routes])
    return {"ids": ids, "weights": weights, "xq": xq, "xs": xs, "counts": counts,
            "offsets": offsets, "sorted_ids": sorted_ids, "rep_q": rep_q,
            "rep_scales": rep_scales, "rows": rows, "out": out,
            "n_routes": torch.tensor(n_routes)}


# ----------------------------------------------------------------------------------------
# the programs: the host code's launches
# ----------------------------------------------------------------------------------------

# the prefix sum that 02's host code does between two kernels (offsets [E + 1] and the
# write offsets [E] from the counts)
HOST_LAYOUT = "<host: prefix sum of expert_counts>"


@dataclass(frozen=True)
class Program:
    """One file's end-to-end launch: the buffers the host code memsets (to 0, or -1 for
    ``sorted_route_ids``), then each step: a kernel and the buffers it is passed, in
    order (or ``HOST_LAYOUT``)."""

    memsets: tuple[str, ...]
    steps: tuple[tuple[str, tuple[str, ...]], ...]


_ROUTE = ("fused_moe_route", ("gating", "topk_ids", "topk_weights"))
_COUNT = ("fused_moe_count_experts", ("topk_ids", "expert_counts"))
_LAYOUT = ("fused_moe_build_layout", ("expert_counts", "expert_offsets", "expert_write_offsets"))
_QUANTIZE = ("fused_moe_quantize_input", ("input", "input_q", "input_scales"))
_SORT_GATHER = ("fused_moe_sort_and_gather_quant_input",
                ("input_q", "input_scales", "topk_ids", "expert_write_offsets",
                 "sorted_route_ids", "rep_a_q", "rep_a_scales"))
_GEMM_OPERANDS = ("rep_a_q", "rep_a_scales", "expert_weights", "expert_scales",
                  "expert_offsets")
_GEMM_SCATTER = ("fused_moe_grouped_wgmma_fp8",
                 (*_GEMM_OPERANDS, "sorted_route_ids", "topk_weights_wide", "output_wide"))

PROGRAMS: Mapping[str, Program] = {
    "00_baseline": Program(
        ("expert_counts", "sorted_route_ids", "output"),
        (_ROUTE, _COUNT, _LAYOUT, _QUANTIZE, _SORT_GATHER,
         ("fused_moe_grouped_wgmma_fp8", (*_GEMM_OPERANDS, "rep_out")),
         ("fused_moe_scatter_rows_to_output",
          ("rep_out", "sorted_route_ids", "topk_weights", "output")))),
    "01_scatter_fusion": Program(
        ("expert_counts", "output"),
        (_ROUTE, _COUNT, _LAYOUT, _QUANTIZE, _SORT_GATHER, _GEMM_SCATTER)),
    "02_qsg_fusion": Program(
        ("expert_counts", "output"),
        (_ROUTE, _COUNT, (HOST_LAYOUT, ()),
         ("fused_moe_quant_sort_gather",
          ("input", "topk_ids", "expert_write_offsets", "sorted_route_ids", "rep_a_q",
           "rep_a_scales")),
         _GEMM_SCATTER)),
}
# the later versions, which put raw CUDA inside their kernels: compiled to find where
# compilation stops
LATER = ("03_all_fusions", "04_host_micro", "05_cuda_optimized")


def buffers(given: Mapping[str, torch.Tensor], sizes: Sizes, device: str
            ) -> dict[str, torch.Tensor]:
    """The host code's device buffers: its inputs copied, every other buffer poisoned
    (NaN, or a large integer) as ``cudaMalloc`` leaves it unset. ``topk_weights`` and
    ``output`` are the first M rows of ``*_wide`` [max_m, ...], the views the fused
    kernels of 01 and 02 are passed."""
    s = sizes
    nan, poison = float("nan"), 0x3FFFFFFF

    def fill(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        value = nan if dtype.is_floating_point else poison
        return torch.full(shape, value, dtype=dtype, device=device)

    f32, s32, f8 = torch.float32, torch.int32, torch.float8_e4m3fn
    b = {name: t.to(device).clone() for name, t in given.items()}
    b.update(topk_ids=fill((s.tokens, s.top_k), s32),
             topk_weights_wide=fill((s.max_m, s.top_k), f32),
             expert_counts=fill((s.experts,), s32), expert_offsets=fill((s.experts + 1,), s32),
             expert_write_offsets=fill((s.experts,), s32),
             input_q=fill((s.tokens, s.k), f8), input_scales=fill((s.tokens, s.k_blocks), f32),
             sorted_route_ids=fill((s.routes,), s32), rep_a_q=fill((s.routes, s.k), f8),
             rep_a_scales=fill((s.routes, s.k_blocks), f32),
             rep_out=fill((s.routes, s.n), torch.bfloat16),
             output_wide=fill((s.max_m, s.n), f32))
    b["topk_weights"] = b["topk_weights_wide"][:s.tokens]
    b["output"] = b["output_wide"][:s.tokens]
    return b


def host_layout(b: Mapping[str, torch.Tensor]) -> None:
    """02's host step: offsets[0] = 0, offsets[i + 1] = counts[0..i] summed, and the write
    offsets the offsets' first E."""
    offsets = b["expert_offsets"]
    offsets[0] = 0
    torch.cumsum(b["expert_counts"], 0, dtype=torch.int32, out=offsets[1:])
    b["expert_write_offsets"].copy_(offsets[:-1])


def launcher(program: Program, module: Any, b: Mapping[str, torch.Tensor]
             ) -> Callable[[], None]:
    """The host code's ``launch_end_to_end`` over the buffers ``b``: routing, then its
    memsets and steps."""
    calls: list[Callable[[], Any]] = []
    for name, args in program.steps:
        if name == HOST_LAYOUT:
            calls.append(lambda: host_layout(b))
        else:
            calls.append(functools.partial(getattr(module, name), *(b[n] for n in args)))
    memsets = [(b[name], -1 if name == "sorted_route_ids" else 0) for name in program.memsets]

    def launch() -> None:
        calls[0]()  # (routing, before the serving path's memsets)
        for t, value in memsets:
            t.fill_(value)
        for call in calls[1:]:
            call()

    return launch


def nearly_equal(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float
                 ) -> torch.Tensor:
    """The host code's ``nearlyEqual``, element by element (NaN is never equal)."""
    got, want = got.double(), want.double().to(got.device)
    return (got - want).abs() <= atol + rtol * torch.maximum(got.abs(), want.abs())


def check(b: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor]) -> tuple[bool, str]:
    """The host code's checks of what the launch left in ``b``: (passed, what was found)."""
    ids, ref_ids = b["topk_ids"].cpu(), ref["ids"].cpu()
    if not torch.equal(ids, ref_ids):
        wrong = int((ids != ref_ids).sum())
        return False, f"top-k ids: {wrong} of {ids.numel()} differ"
    w_ok = nearly_equal(b["topk_weights"], ref["weights"], WEIGHT_TOLERANCE, WEIGHT_TOLERANCE)
    if not bool(w_ok.all()):
        return False, f"top-k weights: {int((~w_ok).sum())} of {w_ok.numel()} off by more " \
                      f"than {WEIGHT_TOLERANCE:g}"
    out, want = b["output"], ref["out"]
    ok = nearly_equal(out, want, OUTPUT_ATOL, OUTPUT_RTOL)
    err = float((out.double() - want.to(out.device)).abs().nan_to_num(float("inf")).max())
    if not bool(ok.all()):
        return False, f"output: {int((~ok).sum())} of {ok.numel()} elements outside " \
                      f"{OUTPUT_ATOL:g} + {OUTPUT_RTOL:g} relative (max abs error {err:.3g})"
    return True, f"ids exact, weights within {WEIGHT_TOLERANCE:g}, output max abs error " \
                 f"{err:.3g}"


# ----------------------------------------------------------------------------------------
# rows
# ----------------------------------------------------------------------------------------


@dataclass
class TutorialRow:
    """One file of the pipeline: ``ok`` True/False for a checked program (None: it stops
    at a compile error, in ``note``); ``ms`` the median time of the end-to-end launch,
    ``tflops`` the files' figure from it; ``h800_tflops`` the tutorial's figure on an
    H800 PCIe (``h800_tflops``: the chapter's roadmap, else the file's header)."""

    program: str
    device: str
    tokens: int
    experts: int
    n: int
    k: int
    ok: bool | None = None
    ms: float | None = None
    tflops: float | None = None
    h800_tflops: float | None = None
    note: str = ""

    def line(self) -> str:
        status = {True: "ok", False: "FAILED", None: "stops"}[self.ok]
        rate = "-" if self.tflops is None else f"{self.tflops:.2f}"
        h800 = "-" if self.h800_tflops is None else f"{self.h800_tflops:.2f}"
        ms = "-" if self.ms is None else f"{self.ms:.4f}"
        return (f"{self.program:<18} {ms:>9} ms  {rate:>6} TFLOPS (tutorial, H800 PCIe: "
                f"{h800:>5})  {status}  {self.note}")


def h800_tflops(checkout: Path, program: str, text: str) -> float | None:
    """The tutorial's end-to-end figure on the H800 PCIe for ``program``: its row in the
    page's roadmap table, else the file's header (``End-to-end TFLOPS: ~8.09 (H800
    PCIe)``), else None."""
    page = checkout / PAGE
    if page.is_file():
        for name, figure in _TABLE_FIGURE.findall(page.read_text()):
            if name == program:
                return float(figure)
    found = _HEADER_FIGURE.search(text)
    return float(found.group(1)) if found else None


def where_it_stops(exc: BaseException) -> str:
    """A compile error in one line: its message and the location it names."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return describe_error(exc)
    located = next((line.removeprefix("--> ") for line in lines if line.startswith("-->")),
                   "")
    return f"{lines[0]} (at {located})" if located else lines[0]


def source(checkout: Path, program: str) -> Path:
    """The file of ``program`` in a tutorial checkout (``FileNotFoundError`` naming the
    path looked for)."""
    path = checkout / FOLDER / f"{program}.co"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (is {checkout} a checkout of the "
                                "Croqtile tutorial?)")
    return path


def run_program(checkout: Path, program: str, sizes: Sizes, device: str, timer: Timer,
                reps: int) -> TutorialRow:
    """Compile one file, run its end-to-end launch once and check it, then time it
    ``reps`` times (the median is kept). A file without steps (``LATER``) is compiled
    only: its row says where compilation stops, or that it compiled."""
    import croqtile

    path = source(checkout, program)
    text = path.read_text()
    row = TutorialRow(program, device, sizes.tokens, sizes.experts, sizes.n, sizes.k,
                      h800_tflops=h800_tflops(checkout, program, text))
    try:
        with warnings.catch_warnings():  # (the files' implicit f32 -> f8 conversions)
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(text, defines=defines(sizes), filename=path.name)
    except Exception as exc:  # (the located error at which compilation stops)
        row.ok = None if program in LATER else False
        row.note = where_it_stops(exc)
        return row
    if program not in PROGRAMS:
        row.note = "compiled (no host steps to run for this file)"
        return row
    given = inputs(sizes)
    b = buffers(given, sizes, device)
    launch = launcher(PROGRAMS[program], module, b)
    try:
        launch()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as exc:
        row.ok, row.note = False, describe_error(exc).splitlines()[0]
        return row
    row.ok, row.note = check(b, reference(given, sizes))
    if row.ok:
        row.ms = statistics.median(timer(launch) for _ in range(reps))
        row.tflops = sizes.flops / (row.ms * 1e-3) / 1e12
    return row


def run_tutorial(checkout: Path, sizes: Sizes, device: str, timer: Timer, reps: int,
                 out_dir: Path, say: Callable[[str], None]) -> list[TutorialRow]:
    """Every file (``PROGRAMS``, then ``LATER``): rows, written to ``moe_tutorial.csv`` and
    ``.json`` in ``out_dir``."""
    rows = []
    for program in (*PROGRAMS, *LATER):
        say(f"tutorial {program}: M={sizes.tokens}, {sizes.experts} experts, "
            f"N={sizes.n}, K={sizes.k}")
        row = run_program(checkout, program, sizes, device, timer, reps)
        say(row.line())
        rows.append(row)
    write_files(rows, out_dir, sizes, reps)
    return rows


def write_files(rows: Sequence[TutorialRow], out_dir: Path, sizes: Sizes, reps: int
                ) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / CSV_NAME
    columns = tuple(f.name for f in dataclasses.fields(TutorialRow))
    report.write_csv([{name: report.cell(value, 4, isinstance(value, int)
                                         and not isinstance(value, bool))
                       for name, value in dataclasses.asdict(r).items()} for r in rows],
                     csv_path, columns)
    meta = {"sweep": "moe tutorial", "sizes": dataclasses.asdict(sizes), "reps": reps,
            "flops": "2 * M * top_k * N * K (the files' count)",
            "timing": "the host code's end-to-end launch (routing, memsets, kernels), "
                      "the median of the reps"}
    json_path = csv_path.with_suffix(".json")
    json_path.write_text(json.dumps({"metadata": meta,
                                     "rows": [dataclasses.asdict(r) for r in rows]},
                                    indent=2) + "\n")
    return [csv_path, json_path]
