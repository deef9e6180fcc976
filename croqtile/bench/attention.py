"""The attention sweep: flash-attention forward kernels beside torch's
``scaled_dot_product_attention`` (SDPA) on the same tensors.

Three kernels, each compiled as written:

* ``attention``: the project's own, ``kernels/attention.co``: [B, H, S, D] tensors,
  f16 or bf16 (``DT``), any ``HEAD_DIM``, causal and not (a flag), the softmax scale
  an argument;
* ``tutorial_flash``: the causal-prefill kernel of the Croqtile tutorial (its page
  ``optimization/flash-attention-causal-prefill.md``, the first code block that defines
  ``flash_atten``): bf16, D = 128, [B, S, H, D] tensors, causal only (the page's kernel
  has no flag), the scale log2(e)/sqrt(128) a constant of the source;
* ``upstream_flash``: ``tests/gpu/end2end/flash_atten.co`` of the reference repository:
  f16, D = 64, [B, H, S, D] tensors, an ``is_causal`` flag, the output returned (not
  written to an argument), the scale log2(e)/sqrt(64) a constant.

The last two are read at run time from checkouts named on the command line; no text of
theirs is kept here. Their scale constants are SDPA's default 1/sqrt(D) taken base 2, so
SDPA with its default scale computes the same function. Outside its causal mode the
reference kernel counts the zero-filled keys past a sequence that is not a multiple of its
64-key tile; every sweep shape is a multiple of 128.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from ..tools.code_blocks import defines_function, program_block
from .harness import DTYPES, Case, Prepared, Program, kernel_program, random_tensors

SEQUENCES = (1024, 2048, 4096, 8192, 16384)
QUICK_SEQUENCES = (2048, 8192)
# Relative Frobenius error allowed: the probabilities are rounded to the input type before
# the second product and the output is rounded once (bf16: about 5e-3 measured).
TOLERANCE = 1e-2


@dataclass(frozen=True)
class AttentionKernel:
    """One attention kernel and how it is called: ``fn(q, k, v[, o][, causal][, scale])``."""

    name: str  # the cases' ``kernel``
    function: str  # the __co__ function
    dtypes: tuple[str, ...]  # the element types it is written for
    head_dim: int
    layout: str  # "BHSD" or "BSHD"
    causal_modes: tuple[bool, ...]
    causal_argument: bool  # takes the causal flag after the tensors
    scale_argument: bool  # takes log2(e) / sqrt(D) last
    returns_output: bool  # returns o instead of writing a fourth argument

    def arguments(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  o: torch.Tensor | None, causal: bool) -> list[Any]:
        args: list[Any] = [q, k, v] + ([] if self.returns_output else [o])
        args += [causal] if self.causal_argument else []
        args += [math.log2(math.e) / math.sqrt(q.shape[-1])] if self.scale_argument else []
        return args


OURS = AttentionKernel("attention", "attention", ("f16", "bf16"), 128, "BHSD", (False, True),
                       causal_argument=True, scale_argument=True, returns_output=False)
TUTORIAL = AttentionKernel("tutorial_flash", "flash_atten", ("bf16",), 128, "BSHD", (True,),
                           causal_argument=False, scale_argument=False, returns_output=False)
UPSTREAM = AttentionKernel("upstream_flash", "flash_atten", ("f16",), 64, "BHSD",
                           (False, True), causal_argument=True, scale_argument=False,
                           returns_output=True)
KERNELS = {k.name: k for k in (OURS, TUTORIAL, UPSTREAM)}
OURS_FILE = "attention.co"  # ours, in the package's kernels folder

# Where the two published kernels are inside their checkouts.
TUTORIAL_PAGE = Path("optimization", "flash-attention-causal-prefill.md")
UPSTREAM_FILE = Path("tests", "gpu", "end2end", "flash_atten.co")


# ----------------------------------------------------------------------------------------
# sources
# ----------------------------------------------------------------------------------------


class SourceError(Exception):
    """A checkout given for a kernel lacks it: a message for the command line."""


def our_program() -> Program:
    return kernel_program(OURS_FILE)


def tutorial_program(path: Path) -> Program:
    """The tutorial's kernel from a tutorial checkout, or from the page itself."""
    page = _locate(path, TUTORIAL_PAGE, "--tutorial")
    block = program_block(page.read_text(errors="replace"), TUTORIAL.function)
    if block is None:
        raise SourceError(f"--tutorial {path}: no code block of {page.name} defines the "
                          f"__co__ function {TUTORIAL.function}")
    # (line numbers of diagnostics count from the block's first line)
    return Program(block, f"{_relative(page, path, TUTORIAL_PAGE)}#{TUTORIAL.function}",
                   _revision(page))


def upstream_program(path: Path) -> Program:
    """The reference repository's kernel from a checkout, or from the ``.co`` file."""
    file = _locate(path, UPSTREAM_FILE, "--upstream")
    text = file.read_text(errors="replace")
    if not defines_function(text, UPSTREAM.function):
        raise SourceError(f"--upstream {path}: {file.name} does not define the __co__ "
                          f"function {UPSTREAM.function}")
    return Program(text, _relative(file, path, UPSTREAM_FILE), _revision(file))


def _locate(path: Path, inside: Path, option: str) -> Path:
    if not path.exists():
        raise SourceError(f"{option} {path}: no such file or directory")
    if path.is_file():
        return path
    found = path / inside
    if not found.is_file():
        raise SourceError(f"{option} {path}: no file {inside.as_posix()} in this directory")
    return found


def _relative(file: Path, given: Path, inside: Path) -> str:
    """The name to record: the path inside the checkout, or the file's own name when the
    file itself was given."""
    return file.name if file == given else inside.as_posix()


def _revision(file: Path) -> str:
    """The last commit of ``file`` in the git checkout holding it; "" for a file git does
    not track (a copy, perhaps inside another repository) or outside a checkout."""
    try:
        done = subprocess.run(["git", "-C", str(file.parent), "log", "-1", "--format=%h",
                               "--abbrev=12", "--", file.name],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def programs(tutorial: Path | None = None, upstream: Path | None = None
             ) -> dict[str, Program]:
    """The sources of the kernels that can run: ours, and those of the checkouts given."""
    found = {OURS.name: our_program()}
    if tutorial is not None:
        found[TUTORIAL.name] = tutorial_program(tutorial)
    if upstream is not None:
        found[UPSTREAM.name] = upstream_program(upstream)
    return found


def defines(case: Case) -> dict[str, Any]:
    """The ``#define``s a case sets: our kernel takes its type and head size from the
    case; the published ones are compiled as written."""
    if case.kernel == OURS.name:
        return {"DT": case.dtype, "HEAD_DIM": case.D}
    return {}


# ----------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------


def batch_and_heads(seq: int) -> tuple[int, int]:
    """B = 4, H = 32 up to 4096 positions, then one sequence of 32 heads (the issue's
    measurements): enough blocks to fill the GPU, inputs of at most 512 MB each."""
    return (4, 32) if seq <= 4096 else (1, 32)


def attention_cases(kernels: Iterable[str], dtypes: Sequence[str] = ("f16", "bf16"),
                    sequences: Sequence[int] = SEQUENCES, batch: int | None = None,
                    heads: int | None = None, head_dim: int | None = None) -> list[Case]:
    """Every kernel named (its own element types; ours in ``dtypes``) at every sequence
    length, causal and not where the kernel has both. ``batch``, ``heads`` and ``head_dim``
    replace the defaults (``head_dim`` only for our kernel: the others fix theirs)."""
    cases: list[Case] = []
    for name in kernels:
        kernel = KERNELS[name]
        types = [d for d in dtypes if d in kernel.dtypes] if kernel is OURS else kernel.dtypes
        dim = head_dim if head_dim is not None and kernel is OURS else kernel.head_dim
        for dtype in types:
            for seq in sequences:
                b, h = batch_and_heads(seq)
                cases += [Case("attention", name, dtype, B=batch or b, H=heads or h, S=seq,
                               D=dim, causal=causal, layout=kernel.layout)
                          for causal in kernel.causal_modes]
    return cases


def tiny_attention_cases(kernels: Iterable[str], dtypes: Sequence[str]) -> list[Case]:
    """CPU shapes: ours with a ragged last tile (160 positions, D = 64); the published
    kernels at two or one of their row tiles (their sizes are fixed in their sources)."""
    cases: list[Case] = []
    for name in kernels:
        if name == OURS.name:
            cases += attention_cases([name], dtypes, (160,), 1, 2, 64)
        else:
            cases += attention_cases([name], dtypes, (256 if name == TUTORIAL.name else 128,),
                                     1, 2)
    return cases


# ----------------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------------


def to_bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    """A [B, H, S, D] view of a tensor laid out as ``layout``."""
    return t.transpose(1, 2) if layout == "BSHD" else t


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                        max_elements: int = 1 << 27) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v of [B, H, S, D] tensors in float64, a few heads at a time
    (at most ``max_elements`` scores at once: 16384^2 scores of one head are 2 GB)."""
    batch, heads, seq, dim = q.shape
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    step = max(1, max_elements // (seq * seq))
    future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(batch):
        for h in range(0, heads, step):
            part = slice(h, h + step)
            scores = q[b, part].double() @ k[b, part].double().transpose(-1, -2)
            scores /= math.sqrt(dim)
            if future is not None:
                scores.masked_fill_(future, float("-inf"))
            out[b, part] = torch.softmax(scores, dim=-1) @ v[b, part].double()
            del scores
    return out


def prepare_attention(case: Case, fn: Any, device: str) -> Prepared:
    """q, k, v (standard normal) in the kernel's layout; SDPA on [B, H, S, D] views of the
    same tensors; the reference laid out as the kernel's output."""
    kernel = KERNELS[case.kernel]
    if case.dtype not in DTYPES:
        raise ValueError(f"attention in {case.dtype}")
    randn = random_tensors(case, device)
    shape = ((case.B, case.S, case.H, case.D) if case.layout == "BSHD"
             else (case.B, case.H, case.S, case.D))
    q, k, v = randn(*shape), randn(*shape), randn(*shape)
    out = None if kernel.returns_output else torch.empty_like(q)
    args = kernel.arguments(q, k, v, out, case.causal)
    vq, vk, vv = (to_bhsd(t, case.layout) for t in (q, k, v))

    def baseline() -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(vq, vk, vv,
                                                                is_causal=case.causal)

    def reference() -> torch.Tensor:
        return to_bhsd(attention_reference(vq, vk, vv, case.causal), case.layout)

    return Prepared(lambda: fn(*args), baseline, out, reference, tolerance=TOLERANCE)
