"""``croqtile bench models``: whole ``transformers`` models in four forms, checked against
eager torch and then timed beside it in the same run.

The models are built from ``transformers`` configs with random weights (nothing is
downloaded): Llama-3-8B's, Qwen2.5-7B's and Qwen3-30B-A3B's (a mixture of experts) widths
(``MODELS``) cut to a few layers, bf16;
``--tiny`` gives small float32 models of the same families, for the CPU. The forms
(``FORMS``):

* ``eager``: the model as ``transformers`` builds it (``attn_implementation="sdpa"``);
* ``compile``: ``torch.compile`` of it;
* ``croqtile``: a copy with ``croqtile.nn.transformers.optimize`` applied (every croqtile
  rewrite: attention, a mixture of experts' experts, linear layers, fused MLPs and q/k/v
  projections, RMS norms);
* ``croqtile+compile``: ``torch.compile`` of that.

The workloads, each a row per form: ``prefill`` (one forward of ``S`` tokens, batch 1),
``decode`` (``generate``, greedy, through a key/value cache after a prompt; the compiled
forms with a static cache and ``torch.compile(mode="reduce-overhead")``, transformers'
own recipe, CUDA graphs on the GPU) and ``train`` (forward and backward of the causal-LM
loss on a model of ``--train-layers`` layers).

Correctness comes first: every form's first call is compared with eager's (prefill:
the relative error over all logits; decode: the generated tokens, of which the first must
be eager's; train: the loss and each parameter's gradient, by cosine similarity). A wrong
row is not timed and makes the command fail. The forms are then timed in turns (eager,
compile, croqtile, croqtile+compile, eager, ...), ``--reps`` rounds; the times are
medians, and a ratio is the median over the rounds of the baseline's time over the
form's in the same round. The rows go to ``models.csv``, ``models.json`` and
``models.png`` (``model_report``).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

import torch

from . import report
from .harness import describe_error
from .model_report import ModelRow, row_line, summary_table, write_files

FORMS = ("eager", "compile", "croqtile", "croqtile+compile")
COMPILED = frozenset(("compile", "croqtile+compile"))
OURS = frozenset(("croqtile", "croqtile+compile"))
WORKLOADS = ("prefill", "decode", "train")
CPU_REPS = 1  # timing rounds on the CPU by default: the interpreter's times, not a GPU's
# relative error of the logits (and of the loss) allowed against eager's, by dtype
TOLERANCES: Mapping[torch.dtype, float] = {torch.bfloat16: 3e-2, torch.float16: 3e-2,
                                           torch.float32: 1e-3}
GRAD_MIN_COS = 0.999  # every parameter's gradient against eager's, cosine similarity
# extra calls of a compiled form before timing (its first call, the check, compiles; these
# let CUDA graphs record: torch's graph trees record on a later call than the first)
COMPILED_WARMUPS = 2
CPU_SKIP = ("skipped: torch.compile on the CPU needs a C compiler and takes minutes; "
            "name the form with --forms to run it")


@dataclass(frozen=True)
class ModelSpec:
    """A model family at one set of widths: its ``transformers`` config and model classes,
    the widths of the published model and small ones for the CPU."""

    name: str
    config_class: str
    model_class: str
    widths: Mapping[str, int]
    tiny: Mapping[str, int]
    # a mixture of experts' experts implementation in the eager and compile forms
    # (transformers 5's registry); the croqtile forms run croqtile's (``optimize``)
    experts: str | None = None


MODELS: Mapping[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec("llama3-8b", "LlamaConfig", "LlamaForCausalLM",
              dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=128, vocab_size=128256),
              dict(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=32, vocab_size=256)),
    # (Qwen2's query, key and value projections have a bias: its attention layers do)
    ModelSpec("qwen2.5-7b", "Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                   num_key_value_heads=4, head_dim=128, vocab_size=152064),
              dict(hidden_size=128, intermediate_size=320, num_attention_heads=4,
                   num_key_value_heads=1, head_dim=32, vocab_size=256)),
    # (a mixture of experts in every layer: 128 experts of width 768, 8 a token; the
    # baseline's experts on torch's grouped GEMM, transformers' fastest in eager mode)
    ModelSpec("qwen3-30b-a3b", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
              dict(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                   num_experts=128, num_experts_per_tok=8, num_attention_heads=32,
                   num_key_value_heads=4, head_dim=128, vocab_size=151936),
              dict(hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                   num_experts=8, num_experts_per_tok=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=32, vocab_size=256),
              experts="grouped_mm"),
)}


@dataclass(frozen=True)
class Settings:
    """What a run measures. ``forms`` are run (eager always, first: every ratio and check
    is against it); ``skipped`` are the forms left out, each with the note its rows say."""

    models: tuple[str, ...] = tuple(MODELS)
    forms: tuple[str, ...] = FORMS
    workloads: tuple[str, ...] = WORKLOADS
    skipped: Mapping[str, str] = field(default_factory=dict)
    layers: int = 4
    seqs: tuple[int, ...] = (512, 2048, 8192)
    decode_batches: tuple[int, ...] = (1, 8)
    prompt: int = 512
    decode_tokens: int = 32
    train_layers: int = 2
    train_seq: int = 2048
    reps: int = 3
    device: str = "cuda"
    tiny: bool = False

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32 if self.tiny else torch.bfloat16


# The tiny configs' sizes: seconds on the CPU, where croqtile's kernels run through
# Triton's interpreter (about 30 ms a kernel launch)
TINY: Mapping[str, Any] = dict(layers=1, seqs=(32,), decode_batches=(1, 2), prompt=8,
                               decode_tokens=4, train_layers=1, train_seq=16)


def settings(device: str, tiny: bool = False, forms: Sequence[str] | None = None,
             **given: Any) -> Settings:
    """The settings of a run: the defaults (``TINY``'s sizes with ``tiny``; ``CPU_REPS``
    rounds on the CPU), then every ``given`` value that is not None. Without ``forms``,
    the CPU runs eager and croqtile only (the compiled forms' rows say why). Raises
    ValueError for a name or a value out of range."""
    base = Settings(device=device, tiny=tiny, **(TINY if tiny else {}))
    if device == "cpu":
        base = dataclasses.replace(base, reps=CPU_REPS)
    chosen: dict[str, Any] = {k: tuple(v) if isinstance(v, (list, tuple)) else v
                              for k, v in given.items() if v is not None}
    skipped: dict[str, str] = {}
    if forms is None:
        forms = FORMS if device != "cpu" else ("eager", "croqtile")
        skipped = {f: CPU_SKIP for f in FORMS if f not in forms}
    names = (*forms, *chosen.get("models", ()), *chosen.get("workloads", ()))
    unknown = [n for n in names if n not in (*FORMS, *MODELS, *WORKLOADS)]
    if unknown:
        raise ValueError(f"unknown model, form or workload {unknown[0]!r}")
    run = dataclasses.replace(base, forms=tuple(f for f in FORMS if f == "eager" or f in forms),
                              skipped=skipped, **chosen)
    sizes = (run.layers, run.prompt, run.train_layers, run.train_seq, run.reps,
             *run.seqs, *run.decode_batches)
    if min(sizes) < 1:
        raise ValueError("layers, sequence lengths, batches and --reps must be at least 1")
    if run.decode_tokens < 2:
        raise ValueError("--decode-tokens must be at least 2 (a decode step is timed "
                         "between the first new token and the last)")
    return run


# ----------------------------------------------------------------------------------------
# models and forms
# ----------------------------------------------------------------------------------------


def build(spec: ModelSpec, layers: int, device: str, dtype: torch.dtype,
          tiny: bool = False, positions: int = 8192) -> Any:
    """A causal LM of ``spec``'s family with ``layers`` layers and random weights (seed
    0), eval mode, torch's SDPA attention (and ``spec.experts``' experts)."""
    import transformers

    config = getattr(transformers, spec.config_class)(
        num_hidden_layers=layers, max_position_embeddings=positions,
        tie_word_embeddings=False, attn_implementation="sdpa",
        **(spec.tiny if tiny else spec.widths))
    torch.manual_seed(0)
    model = getattr(transformers, spec.model_class)(config)
    if spec.experts is not None:
        model.set_experts_implementation(spec.experts)
    return model.to(device=device, dtype=dtype).eval()


@dataclass(frozen=True)
class Form:
    """One form of a model: ``module`` (what ``generate`` runs on, with its compile when
    ``compiled``) and ``call`` (the module or ``torch.compile`` of it: what a prefill or
    a training step calls)."""

    name: str
    module: Any
    call: Callable[..., Any]

    @property
    def compiled(self) -> bool:
        return self.name in COMPILED


def forms_of(model: Any, names: Sequence[str]) -> dict[str, Form]:
    """The forms ``names`` of ``model``, in ``FORMS`` order. The croqtile forms share one
    copy of the model with ``croqtile.nn.transformers.optimize`` applied (every rewrite in
    one call, as a user applies them); the compiled ones are ``torch.compile`` of their
    module (one graph per shape: ``dynamic=False``)."""
    from ..nn.transformers import optimize

    ours = None
    if OURS & set(names):
        ours = copy.deepcopy(model)
        optimize(ours)
    forms: dict[str, Form] = {}
    for name in FORMS:
        if name in names:
            module: Any = ours if name in OURS else model
            call = torch.compile(module, dynamic=False) if name in COMPILED else module
            forms[name] = Form(name, module, call)
    return forms


def compile_counts() -> tuple[int, int]:
    """The graphs torch.compile made and the graph breaks it counted since
    ``torch._dynamo.utils.counters`` was last cleared."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def clear_counters() -> None:
    from torch._dynamo.utils import counters

    counters.clear()


# ----------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------


def synchronizer(device: str) -> Callable[[], None]:
    """Waits for the device's queued work (nothing to wait for on the CPU)."""
    if str(device).startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def timed(fn: Callable[[], object], sync: Callable[[], None],
          clock: Callable[[], float] = time.perf_counter) -> Callable[[], float]:
    """A call of ``fn`` that returns its seconds, the device synchronised before and
    after (so that a call is timed alone)."""
    def run() -> float:
        sync()
        start = clock()
        fn()
        sync()
        return clock() - start

    return run


def interleaved_rounds(runs: Mapping[str, Callable[[], float]], reps: int
                       ) -> dict[str, list[float]]:
    """The seconds of each of ``reps`` calls of every run (each returns its own time), the
    runs taking turns (a, b, c, a, b, c, ...) so that all see the same clocks and
    temperature."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            times[name].append(run())
    return times


def paired_ratio(base: Sequence[float], other: Sequence[float]) -> float:
    """How many times faster ``other`` ran than ``base``: the median over rounds of their
    times' ratio in the same round."""
    return statistics.median(b / o for b, o in zip(base, other, strict=True))


class TokenClock:
    """A logits processor for ``generate`` that returns the scores unchanged and notes
    when each new token's logits arrived (the first after the prompt's prefill, each
    other after one decode step): a CUDA event on the GPU (no synchronisation between
    steps), the host clock on the CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = str(device).startswith("cuda")
        self.marks: list[Any] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())
        return scores

    def seconds_per_token(self) -> float:
        """The mean time of a decode step: from the first token's logits to the last's,
        over the steps between."""
        if len(self.marks) < 2:
            raise RuntimeError("fewer than two new tokens were generated")
        first, last = self.marks[0], self.marks[-1]
        if self.cuda:
            torch.cuda.synchronize()
            seconds = float(first.elapsed_time(last)) / 1e3
        else:
            seconds = float(last - first)
        return seconds / (len(self.marks) - 1)


# ----------------------------------------------------------------------------------------
# workloads
# ----------------------------------------------------------------------------------------


@dataclass
class Check:
    """What a form's first call (its warm-up) found against eager's."""

    ok: bool
    rel_error: float | None = None
    tokens_equal: int | None = None
    grad_min_cos: float | None = None
    note: str = ""


def relative_error(out: torch.Tensor, ref: torch.Tensor, rows: int = 1024) -> float:
    """The relative Frobenius error of logits ``out`` [batch, tokens, vocab] against
    ``ref``, in float32, ``rows`` tokens at a time (a long prefill's logits are
    gigabytes); NaN fails every comparison."""
    diff = scale = 0.0
    for a, b in zip(out.split(rows, dim=1), ref.split(rows, dim=1)):
        diff += float((a.float() - b.float()).square().sum())
        scale += float(b.float().square().sum())
    return math.sqrt(diff / scale) if scale else math.sqrt(diff)


def random_ids(shape: tuple[int, int], vocab: int, device: str, seed: int) -> torch.Tensor:
    """Token ids ``[batch, tokens]`` drawn uniformly from the vocabulary, the same for
    every run with ``seed``."""
    return torch.randint(0, vocab, shape, device=device,
                         generator=torch.Generator(device).manual_seed(seed))


class Workload:
    """One workload at one shape: ``check`` a form's first call against eager's (eager
    first: its call is the reference) and ``runner`` the call that timing repeats,
    returning its seconds. ``units`` is the tokens one timed unit (a forward, a decode
    step, a training step) produces."""

    name = ""

    def __init__(self, batch: int, seq: int, tolerance: float, device: str,
                 new_tokens: int | None = None) -> None:
        self.batch, self.seq, self.new_tokens = batch, seq, new_tokens
        self.tolerance, self.device = tolerance, device
        self.sync = synchronizer(device)

    @property
    def units(self) -> int:
        return self.batch * self.seq

    def describe(self) -> str:
        return f"{self.name} B={self.batch} S={self.seq}"

    def check(self, form: Form) -> Check:
        raise NotImplementedError

    def runner(self, form: Form) -> Callable[[], float]:
        raise NotImplementedError


class Prefill(Workload):
    """One forward of ``seq`` tokens, ``model(ids)`` under ``torch.no_grad()``; checked by
    the relative error of all its logits."""

    name = "prefill"

    def __init__(self, ids: torch.Tensor, tolerance: float, device: str) -> None:
        super().__init__(ids.shape[0], ids.shape[1], tolerance, device)
        self.ids = ids
        self.reference: torch.Tensor | None = None

    def forward(self, form: Form) -> torch.Tensor:
        with torch.no_grad():
            logits: torch.Tensor = form.call(self.ids).logits
        return logits

    def check(self, form: Form) -> Check:
        logits = self.forward(form)
        if self.reference is None:
            self.reference = logits
            return Check(True, 0.0)
        error = relative_error(logits, self.reference)
        ok = error <= self.tolerance
        return Check(ok, error, note="" if ok else "logits differ from eager's")

    def runner(self, form: Form) -> Callable[[], float]:
        return timed(lambda: self.forward(form), self.sync)


class Decode(Workload):
    """``generate``, greedy, ``new_tokens`` tokens after a prompt of ``seq`` (batch
    ``batch``), through a key/value cache: eager's own (dynamic) cache for the eager
    forms; a static cache and ``torch.compile(mode="reduce-overhead")`` of the decode
    step (transformers' recipe) for the compiled ones. Timed per decode step (the prompt's
    prefill left out); checked by the tokens: the first new token of every sequence must
    be eager's, and how many of all equal eager's is reported (greedy decoding on random
    weights may part ways at a near tie)."""

    name = "decode"

    def __init__(self, ids: torch.Tensor, new_tokens: int, tolerance: float,
                 device: str) -> None:
        super().__init__(ids.shape[0], ids.shape[1], tolerance, device, new_tokens)
        self.ids = ids
        self.reference: torch.Tensor | None = None

    @property
    def units(self) -> int:
        return self.batch  # (a decode step makes one token per sequence)

    def describe(self) -> str:
        return f"{super().describe()} +{self.new_tokens}"

    def generate(self, form: Form, clock: TokenClock | None = None) -> torch.Tensor:
        """The new tokens ``form`` generates."""
        import transformers

        compile_config = None
        if form.compiled:
            compile_config = transformers.CompileConfig(mode="reduce-overhead", dynamic=False)
            # (transformers compiles the decode step on GPUs only unless told otherwise)
            compile_config._compile_all_devices = True  # type: ignore[assignment]  # typed None
        config = transformers.GenerationConfig(
            max_new_tokens=self.new_tokens, min_new_tokens=self.new_tokens, do_sample=False,
            pad_token_id=0, disable_compile=not form.compiled, compile_config=compile_config,
            cache_implementation="static" if form.compiled else None)
        processors = transformers.LogitsProcessorList([clock] if clock is not None else [])
        with torch.no_grad():
            out = form.module.generate(self.ids, attention_mask=torch.ones_like(self.ids),
                                       generation_config=config, logits_processor=processors)
        new: torch.Tensor = out[:, self.seq:]
        return new

    def check(self, form: Form) -> Check:
        tokens = self.generate(form)
        if self.reference is None:
            self.reference = tokens
            return Check(True, tokens_equal=tokens.numel())
        if tokens.shape != self.reference.shape:
            return Check(False, note=f"generated {tuple(tokens.shape)} tokens, eager "
                                     f"{tuple(self.reference.shape)}")
        equal = int((tokens == self.reference).sum())
        first = bool((tokens[:, 0] == self.reference[:, 0]).all())
        note = "" if first else "the first new token differs from eager's"
        if first and equal < tokens.numel():
            note = "greedy tokens part from eager's after a near tie (random weights)"
        return Check(first, tokens_equal=equal, note=note)

    def runner(self, form: Form) -> Callable[[], float]:
        def run() -> float:
            clock = TokenClock(self.device)
            self.generate(form, clock)
            return clock.seconds_per_token()

        return run


class Train(Workload):
    """A training step: forward and backward of the causal-LM loss (``labels = ids``),
    the gradients set to None before. Checked by the loss's relative error and the
    cosine similarity of each parameter's gradient with eager's (the lowest is
    reported)."""

    name = "train"

    def __init__(self, ids: torch.Tensor, tolerance: float, device: str) -> None:
        super().__init__(ids.shape[0], ids.shape[1], tolerance, device)
        self.ids = ids
        self.loss: float | None = None
        self.grads: dict[str, torch.Tensor] = {}

    def step(self, form: Form) -> torch.Tensor:
        form.module.zero_grad(set_to_none=True)
        loss: torch.Tensor = form.call(self.ids, labels=self.ids).loss
        loss.backward()
        return loss

    def check(self, form: Form) -> Check:
        loss = float(self.step(form).detach())
        grads = {name: p.grad for name, p in form.module.named_parameters()}
        if self.loss is None:
            self.loss = loss
            self.grads = {n: g.detach().clone() for n, g in grads.items() if g is not None}
            return Check(True, 0.0, grad_min_cos=1.0)
        error = abs(loss - self.loss) / abs(self.loss)
        cosine, worst = min_cosine(self.grads, grads)
        ok = error <= self.tolerance and cosine >= GRAD_MIN_COS
        note = "" if ok else (f"loss differs from eager's" if error > self.tolerance
                              else f"the gradient of {worst} differs from eager's")
        return Check(ok, error, grad_min_cos=cosine, note=note)

    def runner(self, form: Form) -> Callable[[], float]:
        return timed(lambda: self.step(form), self.sync)


def min_cosine(reference: Mapping[str, torch.Tensor],
               grads: Mapping[str, torch.Tensor | None]) -> tuple[float, str]:
    """The lowest cosine similarity of ``grads`` with ``reference``, parameter by
    parameter (by name), and that parameter's name; a gradient missing on one side only
    counts as 0, two zero gradients as 1."""
    worst, worst_name = 1.0, ""
    for name in sorted(set(reference) | set(grads)):
        a, b = reference.get(name), grads.get(name)
        if a is None or b is None:
            cosine = 1.0 if a is None and b is None else 0.0
        else:
            x, y = a.flatten().float(), b.flatten().float()
            norms = float(x.norm()) * float(y.norm())
            cosine = float(x @ y) / norms if norms else float(x.norm() == y.norm())
        if cosine < worst:
            worst, worst_name = cosine, name
    return worst, worst_name


def measure(workload: Workload, forms: Mapping[str, Form], reps: int,
            row: Callable[..., ModelRow], say: Callable[[str], None]) -> list[ModelRow]:
    """Check every form (eager first), warm the compiled ones up, then time the correct
    ones in ``reps`` interleaved rounds; one row per form, made by ``row(form name,
    **fields)``."""
    checks: dict[str, Check] = {}
    counts: dict[str, tuple[int, int]] = {}  # a compiled form's graphs and graph breaks
    runs: dict[str, Callable[[], float]] = {}
    for name, form in forms.items():
        if name != "eager" and "eager" not in runs:
            checks[name] = Check(False, note="not checked: eager's call failed")
            continue
        say(f"{workload.describe()}: {name}: {'compiling, ' if form.compiled else ''}checking")
        clear_counters()
        try:
            checks[name] = workload.check(form)
            if checks[name].ok:
                run = workload.runner(form)
                for _ in range(COMPILED_WARMUPS if form.compiled else 0):
                    run()
                runs[name] = run
        except Exception as exc:  # a form that fails is a failed row, not a crash
            checks[name] = Check(False, note=describe_error(exc))
        if form.compiled:
            counts[name] = compile_counts()
            if counts[name][0] == 0 and checks[name].ok:
                checks[name].note = "torch.compile made no graph: this ran uncompiled"
    say(f"{workload.describe()}: timing {', '.join(runs)} in {reps} rounds")
    try:
        times = interleaved_rounds(runs, reps)
    except Exception as exc:  # checked, but not timed: the rows keep their checks
        times, note = {}, "timing: " + describe_error(exc)
        for check in checks.values():
            check.note = check.note or note
    rows = []
    for name, check in checks.items():
        mine = times.get(name)
        seconds = statistics.median(mine) if mine else None
        graphs, breaks = counts.get(name, (None, None))
        rows.append(row(
            name, ms=seconds * 1e3 if seconds else None,
            tokens_per_s=workload.units / seconds if seconds else None,
            ratio_eager=_ratio(times, "eager", name), ratio_compile=_ratio(times, "compile", name),
            rel_error=check.rel_error, ok=check.ok, graphs=graphs, graph_breaks=breaks,
            tokens_equal=check.tokens_equal, grad_min_cos=check.grad_min_cos,
            note=check.note))
    return rows


def _ratio(times: Mapping[str, list[float]], base: str, name: str) -> float | None:
    if base not in times or name not in times:
        return None
    return paired_ratio(times[base], times[name])


def bench_model(spec: ModelSpec, run: Settings, say: Callable[[str], None],
                done: Callable[[list[ModelRow]], None] = lambda rows: None
                ) -> list[ModelRow]:
    """The rows of one model, workload by workload; ``done`` gets each workload's rows as
    they come (to print and save them)."""
    dtype, device = run.dtype, run.device
    widths = spec.tiny if run.tiny else spec.widths
    vocab, dtype_name = widths["vocab_size"], str(dtype).removeprefix("torch.")
    positions = max(2048, *run.seqs, run.prompt + run.decode_tokens, run.train_seq)
    rows: list[ModelRow] = []

    def add(workload: Workload, forms: Mapping[str, Form], layers: int) -> None:
        def row(form: str, **fields: Any) -> ModelRow:
            return ModelRow(spec.name, workload.name, form, dtype_name, layers,
                            widths["hidden_size"], workload.batch, workload.seq,
                            workload.new_tokens, **fields)

        mine = measure(workload, forms, run.reps, row, lambda text: say(f"{spec.name} {text}"))
        mine += [row(name, note=note) for name, note in run.skipped.items()]
        mine.sort(key=lambda r: FORMS.index(r.form))
        rows.extend(mine)
        done(mine)

    def built(layers: int, mode: str) -> dict[str, Form]:
        say(f"{spec.name}: {layers} layers, hidden {widths['hidden_size']}, {dtype_name} "
            f"on {device}, {mode}: building {', '.join(run.forms)}")
        model = build(spec, layers, device, dtype, run.tiny, positions)
        return forms_of(model.train() if mode == "train mode" else model, run.forms)

    tolerance = TOLERANCES[dtype]
    if {"prefill", "decode"} & set(run.workloads):
        forms = built(run.layers, "eval mode")
        for i, seq in enumerate(run.seqs if "prefill" in run.workloads else ()):
            ids = random_ids((1, seq), vocab, device, 1 + i)
            add(Prefill(ids, tolerance, device), forms, run.layers)
        for i, batch in enumerate(run.decode_batches if "decode" in run.workloads else ()):
            ids = random_ids((batch, run.prompt), vocab, device, 100 + i)
            add(Decode(ids, run.decode_tokens, tolerance, device), forms, run.layers)
        del forms
        release(device)
    if "train" in run.workloads:
        forms = built(run.train_layers, "train mode")
        ids = random_ids((1, run.train_seq), vocab, device, 200)
        add(Train(ids, tolerance, device), forms, run.train_layers)
        del forms
        release(device)
    return rows


def release(device: str) -> None:
    """Free what a model's forms held: torch.compile's caches and the GPU's memory."""
    torch.compiler.reset()
    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------
# the run and its files
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelsResult:
    rows: list[ModelRow]
    files: list[Path]
    messages: list[str]
    table: str

    @property
    def failed(self) -> int:
        return sum(r.ok is False for r in self.rows)


def metadata(run: Settings) -> dict[str, Any]:
    """What the JSON records beside the rows: where, with what, and how."""
    import transformers

    meta = report.metadata(run.device, run.reps, "none")
    meta.update({
        "sweep": "models", "transformers": transformers.__version__,
        "settings": {k: v for k, v in dataclasses.asdict(run).items() if k != "skipped"},
        "skipped": dict(run.skipped), "dtype": str(run.dtype).removeprefix("torch."),
        "tolerance": TOLERANCES[run.dtype], "grad_min_cos": GRAD_MIN_COS,
        "widths": {name: dict(MODELS[name].tiny if run.tiny else MODELS[name].widths)
                   for name in run.models},
        "timing": f"{run.reps} rounds, the forms in turns; medians; a ratio is the median "
                  "over the rounds of the baseline's time over the form's in that round",
        "forms": {"eager": "transformers' model, attn_implementation='sdpa'",
                  "compile": "torch.compile(model, dynamic=False)",
                  "croqtile": "a copy with croqtile.nn.transformers.optimize(model)",
                  "croqtile+compile": "torch.compile of the croqtile copy, dynamic=False"},
        "workloads": {
            "prefill": "model(ids) under torch.no_grad(), batch 1; ms per forward",
            "decode": "model.generate, greedy, min_new_tokens = max_new_tokens; eager forms "
                      "with the dynamic cache, compiled forms with cache_implementation="
                      "'static' and CompileConfig(mode='reduce-overhead'); ms per decode "
                      "step, from the first new token's logits to the last's",
            "train": "zero_grad, loss = model(ids, labels=ids).loss, loss.backward(); "
                     "ms per step"},
    })
    return meta


def run_models(run: Settings, out_dir: Path, progress: TextIO | None = None,
               plot: bool = True) -> ModelsResult:
    """Every model of ``run``: check, time, and write the files (rewritten after every
    workload, so that a run stopped by a time limit keeps the rows it finished).
    ``progress`` gets a line per step and per row (the command line passes stderr)."""
    meta = metadata(run)
    rows: list[ModelRow] = []

    def say(text: str) -> None:
        if progress is not None:
            progress.write(f"models: {text}\n")
            progress.flush()

    def done(workload_rows: list[ModelRow]) -> None:
        rows.extend(workload_rows)
        for r in workload_rows:
            say(row_line(r))
        write_files(rows, out_dir, meta, plot=False)

    if run.skipped:
        say(f"forms {', '.join(run.skipped)} skipped: {next(iter(run.skipped.values()))}")
    # every form and shape is compiled for its own model: more than torch's default
    # number of graphs per function (past which it would run eager, quietly)
    with torch._dynamo.config.patch(recompile_limit=64, accumulated_recompile_limit=1024):
        for name in run.models:
            bench_model(MODELS[name], run, say, done)
    files, messages = write_files(rows, out_dir, meta, plot)
    return ModelsResult(rows, files, messages, summary_table(rows))
