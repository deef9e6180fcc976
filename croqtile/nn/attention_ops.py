"""croqtile.nn's attention operators: the forward (``croqtile/kernels/attention.co``) in
its variants, and its autograd (``croqtile/kernels/attention_backward.co``).

A call that needs no gradient runs the forward operator (``attention_name``). One that
does runs the training form (``training_name``): the same forward compiled with ``LSE 1``,
which also writes each query row's log-sum-exp, returned beside the output by a
functional operator whose autograd the backward kernels implement:

- ``delta = rowsum(dout * out)`` per query row (one memory pass, no product);
- ``dq`` per block of query rows walking the keys (3 products a key tile);
- ``dk`` and ``dv`` per block of keys of a key/value head walking the query rows of the
  heads that share it (4 products a query tile); or, where that grid is too small for the
  GPU (``backward_split``), per block of keys of one query head, the partial gradients of
  a group's heads summed after.

Each recomputes the probabilities tile by tile from the rows' log-sum-exp, as
FlashAttention-2 does. The forward operator keeps an autograd of its own for calls of the
operator itself (``torch.library.opcheck``): it runs the training form's forward again
for the log-sum-exp, then the same backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import settings
from .kernels import (ELEMENTS_ACC, NAMESPACE, Variant, constant_result, function, load,
                      operator, run as run_operator)
from ..runtime.module import Module

# log2(e): the kernels' scores are in base-2 units (``scale`` is sm_scale * log2(e))
LOG2E = 1.4426950408889634


def attention_tiles(kind: str, element: str, head_dim: int) -> tuple[int, int, int]:
    """(ROWS, COLS, WG_ROWS): query rows per block, keys per step, rows per warpgroup.
    The staged q, k and v tiles must fit in a block's shared memory (the checker holds
    every target to sm_90's 227 KiB): 8-byte elements at head dimension 256 take 16-row
    tiles on the CPU and 32-row ones on the GPU."""
    wide = element == "f64" and head_dim == 256
    if kind == "cpu":
        return (16, 16, 16) if wide else (32, 32, 16)
    if element == "f64":
        return (32, 32, 32) if wide else (64, 32, 64)
    if element == "f32":  # 4-byte tiles: half the rows and keys
        return 64, 32, 64
    return (128, 64, 64) if head_dim == 256 else (128, 128, 64)


@dataclass(frozen=True)
class BackwardTiles:
    """The backward's tiles: dq's blocks of ``dq_rows`` query rows walk the keys
    ``dq_cols`` at a time; dk/dv's blocks of ``dkv_cols`` keys walk the query rows
    ``dkv_rows`` at a time; each block's rows (dq) or keys (dk/dv) are split among
    warpgroups of ``wg_rows`` (two warpgroups: 8 warps); delta takes ``delta_rows`` rows a
    block."""

    dq_rows: int
    dq_cols: int
    dkv_rows: int
    dkv_cols: int
    wg_rows: int
    delta_rows: int

    def defines(self) -> tuple[tuple[str, int], ...]:
        return (("DQ_ROWS", self.dq_rows), ("DQ_COLS", self.dq_cols),
                ("DKV_ROWS", self.dkv_rows), ("DKV_COLS", self.dkv_cols),
                ("WG_ROWS", self.wg_rows), ("DELTA_ROWS", self.delta_rows))


def attention_backward_tiles(kind: str, element: str, head_dim: int) -> BackwardTiles:
    """The backward's tiles (``BackwardTiles``). On the GPU, for 2-byte types up to head
    dimension 128, 128-wide tiles for Hopper's products: dq on 128-row blocks stepping 64
    keys, dk/dv on 128-key blocks stepping 32 query rows, 8 warps, so that the dk and dv
    accumulators take 128 registers a thread (stepping 64 rows, as FlashAttention-3 does,
    spilled in Triton 3.6: 255 registers, 216 bytes of spill stores). Head dimension 256
    halves the blocks; 4- and 8-byte types take 32-wide tiles. On the CPU (Triton's interpreter),
    small tiles of two sizes, so that the tests' small shapes cross several tiles, the
    causal diagonal and tails, split among two warpgroups."""
    if kind == "cpu":
        if element == "f64" and head_dim == 256:
            return BackwardTiles(16, 16, 16, 16, 16, 16)
        return BackwardTiles(32, 16, 16, 32, 16, 16)
    if element in ("f32", "f64"):
        if element == "f64" and head_dim == 256:
            return BackwardTiles(16, 16, 16, 16, 16, 16)
        return BackwardTiles(32, 32, 32, 32, 32, 32)
    if head_dim == 256:
        return BackwardTiles(64, 32, 32, 64, 32, 32)
    return BackwardTiles(128, 64, 32, 128, 64, 64)


# The backward's compile options: each block stores every element of its tiles (no zero
# fill); on the GPU 2 stages (the compiler's own count for two key loops of 128-row
# tiles is 1). Compiled for sm_90 at D = 128 (bf16, Triton 3.6): dq 168 registers, dk/dv
# 231, no spills, 128 KiB and 96 KiB of shared memory (dk/dv's split form: 214, 96 KiB);
# 3 stages: 172 and 250 registers, 161 and 113 KiB.
BACKWARD_OPTIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "cpu": (("fill_buffers", False),), "gpu": (("fill_buffers", False), ("num_stages", 2))}


# dk/dv in two forms for grouped-query attention (attention_backward.co): grouped
# (NAME_DKV: a block per key tile of a key/value head walks the rows of every query head
# that reads it) or split (NAME_DKV_SPLIT, as FlashAttention-2 does: a block per key tile
# of ONE query head, H / HKV times the blocks, writing that head's partial dk and dv in
# the accumulator type, [2, B, H, S, D]; a group's partials are summed in torch and
# rounded once, as the grouped form's accumulator is). The split form pays for the
# partials (Llama-3-8B at S = 2048: 64 MiB of f32 written and read back) to fill a GPU
# that the grouped grid would not: there 128 blocks (16 key tiles x 8 key/value heads),
# one partial wave on an H100's 132 SMs, each block walking 4 query heads' rows in turn.
# The rule (backward_split): split when H > HKV and the grouped grid has fewer than
# BACKWARD_SPLIT_BLOCKS[kind] blocks. GPU: never, for now. Timed on an H100
# (bench/attention_probe.py, PROBE_BWD_FORMS=grouped,split; Llama-3-8B's attention,
# causal), the whole backward ran 0.96x / 0.89x / 0.92x as fast split as grouped at
# S = 2,048 / 4,096 / 8,192: the partials' traffic costs more than the fuller grid wins
# (the split kernel itself is not faster per block). CPU (Triton's interpreter,
# where the grid's size does not matter): between the tests' grids, so that they run both
# forms; the tests that need one form set the threshold.
BACKWARD_SPLIT_BLOCKS: dict[str, int] = {"cpu": 6, "gpu": 0}


def backward_split(kind: str, element: str, head_dim: int, batch: int, heads: int,
                   kv_heads: int, keys: int) -> bool:
    """Whether the backward computes dk and dv in the split form (see
    ``BACKWARD_SPLIT_BLOCKS``): grouped heads and a grouped grid (key tiles x key/value
    heads x batch) of fewer blocks than the threshold."""
    cols = attention_backward_tiles(kind, element, head_dim).dkv_cols
    blocks = -(-keys // cols) * kv_heads * batch
    return heads > kv_heads and blocks < BACKWARD_SPLIT_BLOCKS[kind]


def attention_op(element: str, head_dim: int, masked: bool, kind: str) -> Any:
    """``(q [B, H, L, D], k [B, HKV, S, D], v [B, HKV, S, D][, mask [MB, MH, L, S]],
    causal, scale [1]) -> o [B, L, H, D]`` (torch's flash-attention layout: ``o.transpose(1,
    2)`` is the result), ``scale`` being sm_scale * log2(e), with autograd."""
    return operator(attention_name(element, head_dim, masked, kind))


def attention_defines(element: str, head_dim: int, masked: bool,
                      tiles: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int | str], ...]:
    return (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("HEAD_DIM", head_dim),
            ("MASK", int(masked))) + tiles


# The warp-specialised form of the attention forward: attention.co with EVERY_TILE (every
# key tile masked by one comparison an element, no branch in the key loop) compiled with
# Triton's warp specialisation, which on Hopper (Triton 3.6) takes only a 4-warp program
# with one such loop, no if/else, and tensor descriptors made in the kernel (squeezed
# views then get descriptors of their own, tiles._view_descriptor): a producer warpgroup
# loads K and V, two consumer warpgroups of 64 rows compute, each at its own pace (the
# default form's loop holds its two warpgroups in step with CTA-wide barriers around every
# TMA load, so one's softmax never overlaps the other's products). 2 stages: 3 need 257 KiB.
# Checked on the CPU and compiled for sm_90 (12 warps, no spills); not yet timed, so off
# unless CROQTILE_ATTENTION_WS=1 (see attention_ws).
ATTENTION_WS_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("warp_specialize", True), ("num_warps", 4), ("num_stages", 2), ("descriptors", "kernel"))


def attention_ws(element: str, head_dim: int, masked: bool, kind: str) -> bool:
    """Whether croqtile.nn's attention forward runs the warp-specialised form: on a GPU,
    for f16/bf16 without a mask at head dimensions up to 128 (128-row tiles of 128 keys),
    when ``CROQTILE_ATTENTION_WS`` asks for it."""
    return settings.attention_ws() and kind == "gpu" and element in ("f16", "bf16") \
        and not masked and head_dim <= 128


def attention_variant(element: str, head_dim: int, masked: bool, kind: str,
                      ws: bool = False, lse: bool = False) -> Variant:
    """The attention forward's program, defines and options (``ws``: the warp-specialised
    form, ``ATTENTION_WS_OPTIONS``; ``lse``: the training form, which also writes the rows'
    log-sum-exp), named as croqtile.nn names its operator."""
    rows, cols, wg_rows = attention_tiles(kind, element, head_dim)
    name = f"attention_{element}_d{head_dim}{'_mask' if masked else ''}" \
        f"{'_ws' if ws else ''}{'_lse' if lse else ''}_{kind}"
    defines = attention_defines(element, head_dim, masked, (
        ("ROWS", rows), ("COLS", cols), ("WG_ROWS", wg_rows))) + (
        ("EVERY_TILE", int(ws)), ("LSE", int(lse)))
    # (every block stores its whole [ROWS, HEAD_DIM] tile of o, rows past L masked: o
    # needs no zero fill, which the compiler cannot prove for the banded block order)
    options = (("fill_buffers", False),) + (ATTENTION_WS_OPTIONS if ws else ())
    return Variant("attention", defines, (("NAME", name),), options)


# the training form's parameters by the forward operator's name (see ``run``)
_TRAINING: dict[str, tuple[str, int, bool, str]] = {}


@constant_result
def attention_name(element: str, head_dim: int, masked: bool, kind: str) -> str:
    variant = attention_variant(element, head_dim, masked, kind,
                                attention_ws(element, head_dim, masked, kind))
    name = dict(variant.names)["NAME"]
    load(variant, forward_autograd(name, element, head_dim, masked, kind), kind)
    _TRAINING[name] = (element, head_dim, masked, kind)
    return name


# attention_decode.co: a decode step's few queries (at most DECODE_ROWS) in one 16-row
# tile, the keys in pieces (each a block) of CHUNK keys walked COLS at a time. On an H100
# (bf16, 32 query heads over 8, D = 128, under CUDA graphs), against attention.co's
# 128-row blocks, one a head (354 us over a static cache of 8,192 positions, 69 us over
# 4,096 keys, 14.5 us over 544): pieces of 256 keys, 128 a step, 2 stages took 7.7 us
# over 544 keys (cuDNN 7.5); over long caches pieces of 512 keys, 64 a step, 2 stages
# (fewer keys in flight a block, more blocks an SM) took 25.7 us for 8,192 (cuDNN 17.5)
# and 17.4 for 4,096 (cuDNN 9.4), where 128 a step in pieces of 512 took 41.8 and 18.1.
DECODE_ROWS = 16
DECODE_SHORT_KEYS = 1024  # at most this many keys: the short form
# (COLS, steps a piece, num_stages or None for the compiler's) by (element, short)
DECODE_GPU_TILES: dict[tuple[str, bool], tuple[int, int, int | None]] = {
    **{(t, True): (128, 2, 2) for t in ("f16", "bf16")},
    **{(t, False): (64, 8, 2) for t in ("f16", "bf16")},
    **{("f32", short): (64, 4, None) for short in (True, False)},
    **{("f64", short): (32, 4, None) for short in (True, False)},
}


def attention_decode_tiles(kind: str, element: str, head_dim: int,
                           short: bool) -> tuple[int, int, int, int | None]:
    """(ROWS, COLS, CHUNK, num_stages) of attention_decode.co (``short``: at most
    DECODE_SHORT_KEYS keys)."""
    if kind == "cpu":
        cols = 16 if head_dim == 256 and element == "f64" else 32
        return DECODE_ROWS, cols, 4 * cols, None
    cols, steps, stages = DECODE_GPU_TILES[element, short]
    if head_dim == 256:  # (the staged key and value tiles twice as wide)
        cols //= 2
    return DECODE_ROWS, cols, cols * steps, stages


@constant_result
def attention_decode_name(element: str, head_dim: int, masked: bool, kind: str,
                          short: bool = False) -> str:
    """The operator of attention_decode.co, for at most DECODE_ROWS queries a head
    (``short``: over at most DECODE_SHORT_KEYS keys): the same arguments and result as
    ``attention_name``'s (a call that wants a gradient runs the training form instead,
    see ``run``)."""
    rows, cols, chunk, stages = attention_decode_tiles(kind, element, head_dim, short)
    name = f"attention_decode_{element}_d{head_dim}{'_mask' if masked else ''}_{kind}" \
        f"{'_short' if short and kind == 'gpu' else ''}"
    defines = attention_defines(element, head_dim, masked, (
        ("ROWS", rows), ("COLS", cols), ("CHUNK", chunk)))
    # (every element of o and of the pieces' buffers is written: no zero fill)
    options = (("fill_buffers", False),) + ((("num_stages", stages),) if stages else ())
    load(Variant("attention_decode", defines, (("NAME", name),), options),
         forward_autograd(name, element, head_dim, masked, kind), kind)
    _TRAINING[name] = (element, head_dim, masked, kind)
    return name


def forward_autograd(name: str, element: str, head_dim: int, masked: bool,
                     kind: str) -> Any:
    """The autograd of forward operator ``name`` called itself (``opcheck``): the
    training form's forward again for the log-sum-exp, then the backward."""

    def autograd(module: Module) -> None:
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
            ctx.save_for_backward(*tensors, output)
            ctx.causal = inputs[-2]

        def backward(ctx: Any, do: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            *inputs, scale, out = ctx.saved_tensors  # q, k, v[, mask]
            train = operator(training_name(element, head_dim, masked, kind))
            _, lse = train(*inputs[:3], inputs[3] if masked else None, ctx.causal, scale)
            grads = gradients(element, head_dim, masked, kind, inputs, out, lse, do,
                              ctx.causal, scale)
            return grads + ((None,) if masked else ()) + (None, None)

        torch.library.register_autograd(f"{NAMESPACE}::{name}", backward,
                                        setup_context=setup_context)

    return autograd


@constant_result
def training_name(element: str, head_dim: int, masked: bool, kind: str) -> str:
    """The training form's operator (registered on first use): ``(q, k, v, mask | None,
    causal, scale) -> (o [B, L, H, D], lse [B, H, L])``, functional, with autograd (the
    gradient of lse is not taken: nothing but the backward reads it)."""
    variant = attention_variant(element, head_dim, masked, kind, lse=True)
    forward = dict(variant.names)["NAME"]
    load(variant, kind=kind)
    name = forward.replace("_lse_", "_train_")

    def train(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              causal: bool, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, length, _ = q.shape
        lse = torch.empty((b, h, length), dtype=scale.dtype, device=q.device)
        out = function(forward).call(q, k, v, *(() if mask is None else (mask,)), lse, causal,
                                     scale)
        return out, lse

    def fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
             causal: bool, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, length, d = q.shape
        return (q.new_empty((b, length, h, d)),
                torch.empty((b, h, length), dtype=scale.dtype, device=q.device))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        q, k, v, mask, causal, scale = inputs
        ctx.save_for_backward(q, k, v, *(() if mask is None else (mask,)), scale, *output)
        ctx.causal = causal

    def backward(ctx: Any, do: torch.Tensor, dlse: Any) -> tuple[torch.Tensor | None, ...]:
        *inputs, scale, out, lse = ctx.saved_tensors
        return gradients(element, head_dim, masked, kind, inputs, out, lse, do, ctx.causal,
                         scale) + (None, None, None)

    op = torch.library.custom_op(
        f"{NAMESPACE}::{name}", train, mutates_args=(),
        schema="(Tensor q, Tensor k, Tensor v, Tensor? mask, bool causal, Tensor scale) "
               "-> (Tensor, Tensor)")
    op.register_fake(fake)
    op.register_autograd(backward, setup_context=setup_context)
    return name


def run(name: str, *args: Any) -> torch.Tensor:
    """Forward operator ``name`` (``attention_name``) on ``(q, k, v[, mask], causal,
    scale)``, or, when a gradient of q, k or v is wanted, its training form."""
    q, k, v = args[:3]
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        train = operator(training_name(*_TRAINING[name]))
        out: torch.Tensor = train(q, k, v, args[3] if len(args) == 6 else None,
                                  *args[-2:])[0]
        return out
    return run_operator(name, *args)


def gradients(element: str, head_dim: int, masked: bool, kind: str,
              inputs: list[torch.Tensor], out: torch.Tensor, lse: torch.Tensor,
              do: torch.Tensor, causal: bool,
              scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) from ``inputs`` (q, k, v[, mask]), the forward's output ``out`` and
    lse, and the output's gradient ``do`` (both [B, L, H, D], as the forward writes o);
    dk and dv in the grouped or the split form (``backward_split``)."""
    q, k = inputs[:2]
    b, h, _, _ = q.shape
    hkv, keys = k.shape[1], k.shape[2]
    split = backward_split(kind, element, head_dim, b, h, hkv, keys)
    delta_op, dq_op, dkv_op = attention_backward_ops(element, head_dim, masked, kind, split)
    # (the backward's kernels take [B, H, L, D], strided: views of the [B, L, H, D]
    # tensors, or the gradient of the result as it comes; a gradient with a dimension of
    # stride 0 or a last one not dense, a broadcast one, is copied)
    do = do.transpose(1, 2)
    if do.stride(-1) != 1 or 0 in do.stride():
        do = do.contiguous()
    out = out.transpose(1, 2)
    delta = delta_op(out, do)
    grad_q = dq_op(*inputs, do, lse, delta, causal, scale)
    grad_kv = dkv_op(*inputs, do, lse, delta, causal, scale)
    if split:  # (the partials of each group's heads summed, then rounded once)
        grad_kv = grad_kv.view(2, b, hkv, h // hkv, keys, head_dim).sum(3).to(k.dtype)
    return grad_q, grad_kv[0], grad_kv[1]


def attention_backward_ops(element: str, head_dim: int, masked: bool, kind: str,
                           split: bool = False) -> tuple[Any, Any, Any]:
    """The backward's operators (attention_backward.co): ``delta`` (the rows'
    rowsum(dout * out)), ``dq`` and ``dkv``: dk and dv stacked, [2, B, HKV, S, D], or
    with ``split`` the split form's partials, [2, B, H, S, D] in the accumulator type
    (``BACKWARD_SPLIT_BLOCKS``). One program: its four operators are registered
    together."""
    tiles = attention_backward_tiles(kind, element, head_dim)
    suffix = f"{element}_d{head_dim}{'_mask' if masked else ''}_{kind}"
    names = (("NAME_DELTA", f"attention_delta_{suffix}"), ("NAME_DQ", f"attention_dq_{suffix}"),
             ("NAME_DKV", f"attention_dkv_{suffix}"),
             ("NAME_DKV_SPLIT", f"attention_dkv_split_{suffix}"))
    load(Variant("attention_backward", attention_defines(element, head_dim, masked,
                                                         tiles.defines()),
                 names, BACKWARD_OPTIONS[kind]), kind=kind)
    delta, dq, dkv, dkv_split = (operator(name) for _, name in names)
    return delta, dq, dkv_split if split else dkv
