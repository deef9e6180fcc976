"""Every sweep of ``croqtile bench`` together: the case lists, the kernel loader and the
input builder of each sweep, and the whole run (check, time, write the files, summarise).

The project's own bench kernels (square, llm, fp8, memory: ``harness``) compile
with the bench's tuning spaces when ``--autotune`` is given. The user-style kernels
(attention, epilogue, decode: ``attention``, ``linear``; sparse: ``sparse``) compile as a user
would: ``--autotune`` with the compiler's own search space, and the decode sweep always
tuned (``"quick"`` unless ``--autotune full``), since that is what it measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from . import attention as attention_sweep
from . import harness, linear, report, sparse
from .harness import KERNEL_ORIGIN, Case, KernelLoader, Prepared, Program, Row, Timer

USER_SWEEPS = ("attention", "epilogue", "decode")
ROTATED_INPUTS = (f"every side timed over copies of its inputs in turn, together at least "
                  f"{harness.L2_SPAN}x the L2 cache (the input_sets column): weights come from "
                  "device memory, as in a model's step")
SWEEPS = harness.SWEEPS + USER_SWEEPS
# user-style sweeps that run only when named (``croqtile bench sparse``): not in "all"
NAMED_SWEEPS = ("sparse",)


# ----------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------


def tiny_cases(sweeps: Sequence[str], dtypes: Sequence[str] = ("f16", "bf16"),
               attention_kernels: Sequence[str] = (attention_sweep.OURS.name,)) -> list[Case]:
    """Small shapes with ragged edges for the CPU interpreter: correctness only."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "attention":
            cases += attention_sweep.tiny_attention_cases(attention_kernels, dtypes)
        elif sweep in ("epilogue", "decode"):
            cases += linear.tiny_cases(sweep, dtypes)
        elif sweep == "sparse":
            cases += sparse.tiny_cases(dtypes)
        else:
            cases += harness.tiny_cases([sweep], dtypes)
    return cases


def quick_cases(sweeps: Sequence[str], dtypes: Sequence[str] = ("f16", "bf16"),
                attention_kernels: Sequence[str] = (attention_sweep.OURS.name,)) -> list[Case]:
    """A few GPU shapes per sweep: a smoke run (decode: the three token counts the issue
    sets targets at)."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "attention":
            cases += attention_sweep.attention_cases(attention_kernels, dtypes,
                                                     attention_sweep.QUICK_SEQUENCES)
        elif sweep == "epilogue":
            cases += linear.epilogue_cases(dtypes, (16, 4096), ("silu",))
        elif sweep == "decode":
            cases += linear.decode_cases(dtypes, linear.QUICK_DECODE_MS)
        elif sweep == "sparse":
            cases += sparse.quick_cases(dtypes)
        else:
            cases += harness.quick_cases([sweep], dtypes)
    return cases


def full_cases(sweeps: Sequence[str], dtypes: Sequence[str] = ("f16", "bf16"),
               sizes: Sequence[int] | None = None,
               attention_kernels: Sequence[str] = (attention_sweep.OURS.name,)) -> list[Case]:
    """Every case of the named sweeps. ``sizes`` replaces the square, fp8 and memory sizes,
    the attention sequence lengths and the epilogue and decode token counts (M)."""
    cases: list[Case] = []
    for sweep in sweeps:
        if sweep == "attention":
            cases += attention_sweep.attention_cases(attention_kernels, dtypes,
                                                     sizes or attention_sweep.SEQUENCES)
        elif sweep == "epilogue":
            cases += linear.epilogue_cases(dtypes, sizes or linear.EPILOGUE_MS)
        elif sweep == "decode":
            cases += linear.decode_cases(dtypes, sizes or linear.DECODE_MS)
        elif sweep == "sparse":
            cases += sparse.sparse_cases(dtypes, sizes or sparse.SQUARE_SIZES)
        else:
            cases += harness.full_cases([sweep], dtypes, sizes)
    return cases


# ----------------------------------------------------------------------------------------
# kernels and inputs
# ----------------------------------------------------------------------------------------


def sweep_autotune(sweep: str, autotune: str) -> str:
    """The tuning a user-style sweep runs with: the decode sweep measures tuning itself."""
    return "quick" if sweep == "decode" and autotune == "none" else autotune


def _program(case: Case, attention: Mapping[str, Program]) -> tuple[Program, str]:
    """A user-style case's source and the function to call."""
    if case.sweep == "attention":
        if case.kernel not in attention:
            raise LookupError(f"no source for the attention kernel {case.kernel!r} (its "
                              "checkout was not given)")
        return attention[case.kernel], attention_sweep.KERNELS[case.kernel].function
    name = (sparse.KERNEL_FILE if case.sweep == "sparse"
            else linear.kernel_file(case))
    return harness.kernel_program(name), name.removesuffix(".co")


def kernel_file(case: Case) -> str | None:
    """The file of the package's kernels a case compiles (None: a published attention
    kernel, read from a checkout)."""
    if case.sweep == "attention":
        return attention_sweep.OURS_FILE if case.kernel == attention_sweep.OURS.name else None
    if case.sweep == "sparse":
        return sparse.KERNEL_FILE
    if case.sweep in USER_SWEEPS:
        return linear.kernel_file(case)
    return harness.KERNEL_FILES[case.kernel]


def check_kernel_files(cases: Sequence[Case]) -> None:
    """Read every kernel the cases need before anything runs: a file missing from the
    installed package raises ``harness.KernelFileError`` (a message, not a traceback)."""
    for name in dict.fromkeys(kernel_file(c) for c in cases):
        if name is not None:
            harness.kernel_program(name)


def _defines(case: Case) -> dict[str, Any]:
    if case.sweep == "attention":
        return attention_sweep.defines(case)
    if case.sweep == "sparse":
        return sparse.defines(case)
    return linear.defines(case)


def kernel_loader(autotune: str = "none", defines: Mapping[str, Any] | None = None,
                  attention: Mapping[str, Program] | None = None) -> KernelLoader:
    """The bench kernels through ``harness.kernel_loader``; the user-style kernels compiled
    once per set of ``#define``s: the case's (type, head size, activation) over
    ``defines`` (the command line's ``-D``)."""
    import croqtile

    attention = attention if attention is not None else attention_sweep.programs()
    load_bench = harness.kernel_loader(autotune, defines)
    cache: dict[tuple[Any, ...], Any] = {}

    def load(case: Case) -> Any:
        if case.sweep not in USER_SWEEPS + NAMED_SWEEPS:
            return load_bench(case)
        fixed = {**(defines or {}), **_defines(case)}
        key = (case.sweep, case.kernel, tuple(sorted(fixed.items())))
        if key not in cache:
            program, function = _program(case, attention)
            mode = sweep_autotune(case.sweep, autotune)
            options: dict[str, Any] = {} if mode == "none" else {"autotune": mode}
            if case.sweep == "sparse":
                options.update(sparse.options())
            # a relative name, not a path, in diagnostics (and so in the notes column)
            module = croqtile.compile(program.text, defines=fixed, filename=program.name,
                                      **options)
            cache[key] = getattr(module, function)
        return cache[key]

    return load


def prepare(case: Case, fn: Any, device: str) -> Prepared:
    """The inputs, calls and reference of a case of any sweep."""
    if case.sweep == "attention":
        return attention_sweep.prepare_attention(case, fn, device)
    if case.sweep == "epilogue":
        return linear.prepare_epilogue(case, fn, device)
    if case.sweep == "decode":
        return harness.prepare_gemm(case, fn, device, harness.input_sets(case, device))
    if case.sweep == "sparse":
        return sparse.prepare_sparse(case, fn, device)
    return harness.prepare(case, fn, device)


# ----------------------------------------------------------------------------------------
# the whole run
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchResult:
    rows: list[Row]
    files: list[Path]
    messages: list[str]
    table: str

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.rows)


def sweep_metadata(autotune: str, attention: Mapping[str, Program]
                   ) -> dict[str, dict[str, Any]]:
    """What each user-style sweep's JSON records beside the common metadata."""
    return {
        "attention": {
            "sources": {name: program.origin for name, program in attention.items()},
            "baseline": "torch.nn.functional.scaled_dot_product_attention, default scale",
            "causal_only": [k.name for k in attention_sweep.KERNELS.values()
                            if k.causal_modes == (True,)]},
        "epilogue": {
            "baseline": "act(torch.nn.functional.linear(x, w, bias))",
            "compiled": "torch.compile of the baseline (dynamic=False, default mode), "
                        "compiled and warmed up before timing",
            "inputs": ROTATED_INPUTS},
        "decode": {"autotune": sweep_autotune("decode", autotune),
                   "baseline": "torch.matmul(x, w.T)", "inputs": ROTATED_INPUTS},
        "sparse": {"kernel": f"{KERNEL_ORIGIN}/{sparse.KERNEL_FILE} with backend='cuda'",
                   "baseline": "torch.matmul(a, b.T), a the decompressed 2:4 matrix (cuBLAS)",
                   "compiled": "torch.mm(to_sparse_semi_structured(a), b.T): torch's "
                               "semi-structured sparse GEMM (the compiled_* columns)",
                   "shapes": "LLM rows: the weight is the sparse operand, M = N_proj, "
                             f"N = {sparse.TOKENS} tokens"},
    }


def run_bench(cases: Sequence[Case], out_dir: Path, *, device: str = "cuda", reps: int = 3,
              autotune: str = "none", timer: Timer | None = None,
              load: KernelLoader | None = None, defines: Mapping[str, Any] | None = None,
              progress: TextIO | None = None, plot: bool = True,
              host_timer: Timer | None = None,
              attention: Mapping[str, Program] | None = None) -> BenchResult:
    """Run, write the files, and build the summary table; ``progress`` is the stream for
    the progress line (the command line passes stderr); ``attention`` the attention
    kernels' sources (default: ours only). The CSV and JSON files are rewritten after
    every case, so a run stopped by a time limit leaves the rows it finished."""
    attention = attention if attention is not None else attention_sweep.programs()
    meta = report.metadata(device, reps, autotune,
                                 timed=timer is not None or device != "cpu")
    meta["defines"] = dict(defines or {})
    if device == "cuda":  # (which timer: "events", do_bench, unless one was passed)
        meta["timer"] = next((name for name, t in harness.TIMERS.items() if t is timer),
                             "events" if timer is None else "custom")
    extra = sweep_metadata(autotune, attention)

    def save(rows: Sequence[Row], plot: bool = False) -> tuple[list[Path], list[str]]:
        return report.write_results(rows, out_dir, meta, plot=plot, sweep_meta=extra)

    rows = harness.run_cases(cases, device=device, reps=reps, timer=timer,
                           load=load or kernel_loader(autotune, defines, attention),
                           progress=progress, host_timer=host_timer, prepare=prepare,
                           after_case=save)
    files, messages = save(rows, plot)
    return BenchResult(rows, files, messages, report.summary_table(rows))
