"""``croqtile.nn.functional.fused_moe``: a mixture-of-experts layer (Mixtral, Qwen-MoE and
their kin) running the Croqtile kernels of ``croqtile/kernels/moe.co``, with autograd.

    fused_moe(hidden [T, H], router_logits [T, E], gate_up_weight [E, 2I, H],
              down_weight [E, H, I], top_k, *, renormalize=True, activation="silu")
        = sum over each token's top_k experts e of
          weight_e * down_weight[e] @ (act(gate_up[e, :I] @ x) * (gate_up[e, I:] @ x))

The steps, and what runs them:

1. Routing (torch): softmax of the router's logits in float32, the top ``top_k``
   experts, their weights optionally renormalised to sum to one (``route``). Its few
   element-wise operations over [T, E] are not worth a kernel of their own, and torch's
   ``topk`` breaks ties as the models' own code does.
2. Sorting (torch): the T * top_k (token, expert) pairs sorted by expert (a stable
   sort), each expert's run of rows ``runs[e] = [first, end)`` found by a binary search
   of the sorted ids, the runs cut into tiles of BM rows listed in a tile table
   (``tile_table``: an entry (expert, first row, rows) per tile, a fixed number of
   entries bounding the number of tiles, the unused ones last), and the tokens' rows
   gathered in that order. No host synchronisation: the kernels read the table at run
   time. An eager call builds the table and the combine's positions with one kernel
   after the sort (``croqtile/kernels/moe_layout.co``; ``moe_ops.layout``).
3. ``moe_gate_up`` (Croqtile): a grouped GEMM computing the gate and up products from
   one tile of rows per K step, the gated activation in its epilogue; the weight's
   halves are read in place. Each block computes one output tile: a table entry's rows
   by one column tile, with the weights of the expert the entry names (the layout of
   vLLM's fused-MoE kernel; see the header of ``moe.co``).
4. ``moe_down`` (Croqtile): the down projection, a grouped GEMM over the same table.
5. ``moe_combine`` (Croqtile): each token's weighted sum of its experts' rows, back in
   token order.

The tiles and launch options follow the mean rows per expert (``moe_size``: "small" at
a decode step, "medium", "large" for long prefills and training), a guess to be timed.

The backward (each of the three operators has one, ``torch.library.register_autograd``):
Croqtile kernels compute the gate/up gradients (``moe_gate_up_grad``, both products
recomputed), the inputs' gradients (the grouped GEMM ``moe_grouped_nn``, over the tile
table that the forward's operators saved as an input) and the weights' gradients
(``moe_grouped_tn``, a reduction over each expert's run: ``runs_of`` recovers the runs
from the table); the combine's backward (a scatter of the output's gradient to the
sorted rows, and the routing weights' gradients, a dot product per pair) and the gather
of step 2 are torch's. The routing weights get gradients, so a router trained through
``fused_moe`` learns as the model's own code would.

What the kernels do not cover runs torch's own computation (``uncovered_fused_moe`` says
why): weights of another dtype than the hidden states, a dtype without kernels, tensors
on several devices or on another device than the CPU and CUDA. FP8 (E4M3) expert weights
with per-128-block scales, the layout of DeepSeek and Qwen FP8 checkpoints, take the
FP8 path of ``croqtile.nn.moe_fp8`` (inference only; its own kernels,
``croqtile/kernels/moe_fp8.co``, and the same routing, sorting and combine).

This module holds the public functions (``fused_moe``, ``moe_experts``) and their
checks; what both paths share (``route``, ``sort_by_expert``, ``tile_table``,
``runs_of``, the kernels' variants by size class: ``moe_names``, ``moe_size``) is in
``croqtile.nn.moe_ops``.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from . import kernels, moe_fp8
from .kernels import ELEMENTS, ELEMENTS_ACC, GATED_ACTIVATIONS
from .moe_ops import layout, moe_block_rows, moe_names, moe_size, route

_FLOAT8 = tuple(getattr(torch, name) for name in ("float8_e4m3fn", "float8_e4m3fnuz",
                                                   "float8_e5m2", "float8_e5m2fnuz")
                if hasattr(torch, name))

def uncovered_fused_moe(hidden: torch.Tensor, gate_up_weight: torch.Tensor,
                        down_weight: torch.Tensor) -> str | None:
    """Why the kernels do not take these tensors (None: they do)."""
    if not hidden.dtype == gate_up_weight.dtype == down_weight.dtype:
        return "hidden states and weights of different dtypes"
    if hidden.dtype not in ELEMENTS:
        return f"dtype {hidden.dtype}"
    device = hidden.device
    if gate_up_weight.device != device or down_weight.device != device:
        return "tensors on several devices"
    if device.type not in ("cpu", "cuda"):
        return f"device {device}"
    if hidden.shape[0] == 0:
        return "no tokens"
    return None


def _check(hidden: torch.Tensor, gate_up_weight: torch.Tensor, down_weight: torch.Tensor,
           activation: str, gate_up_scale: torch.Tensor | None = None,
           down_scale: torch.Tensor | None = None) -> None:
    """Refuse arguments that no path computes (the FP8 path checks its own further:
    ``croqtile.nn.moe_fp8.check_fp8``)."""
    if activation not in GATED_ACTIVATIONS:
        choices = ", ".join(repr(a) for a in GATED_ACTIVATIONS)
        raise ValueError(f"activation={activation!r}: expected one of {choices}")
    experts, double, width = gate_up_weight.shape
    if (hidden.dim() != 2 or down_weight.dim() != 3 or double % 2
            or hidden.shape[1] != width
            or tuple(down_weight.shape) != (experts, width, double // 2)):
        raise ValueError(
            f"fused_moe: expected hidden [T, H], gate_up_weight [E, 2I, H] and down_weight "
            f"[E, H, I]; got {tuple(hidden.shape)}, {tuple(gate_up_weight.shape)} and "
            f"{tuple(down_weight.shape)}")
    if not is_fp8(gate_up_weight, down_weight) and (gate_up_scale is not None
                                                    or down_scale is not None):
        raise ValueError("fused_moe: gate_up_scale and down_scale go with FP8 weights only "
                         f"(the weights are {gate_up_weight.dtype} and {down_weight.dtype})")


def is_fp8(gate_up_weight: torch.Tensor, down_weight: torch.Tensor) -> bool:
    """Whether either expert weight is FP8 (the FP8 path, ``croqtile.nn.moe_fp8``, takes
    the call and checks its formats and scales)."""
    return gate_up_weight.dtype in _FLOAT8 or down_weight.dtype in _FLOAT8


def moe_experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
                gate_up_weight: torch.Tensor, down_weight: torch.Tensor, *,
                activation: str = "silu", gate_up_scale: torch.Tensor | None = None,
                down_scale: torch.Tensor | None = None) -> torch.Tensor:
    """The experts of a routed MoE layer: ``hidden`` [T, H] sent to the experts
    ``top_k_index`` [T, k] and summed with ``top_k_weights`` [T, k] (the signature of the
    experts registry of ``transformers``; ``fused_moe`` routes first). FP8 weights and
    their scales: see ``fused_moe``."""
    _check(hidden, gate_up_weight, down_weight, activation, gate_up_scale, down_scale)
    if is_fp8(gate_up_weight, down_weight):
        moe_fp8.check_fp8(hidden, None, gate_up_weight, down_weight, gate_up_scale,
                          down_scale, top_k_weights)
        assert gate_up_scale is not None and down_scale is not None
        return moe_fp8.moe_experts_fp8(hidden, top_k_index, top_k_weights, gate_up_weight,
                                       down_weight, gate_up_scale, down_scale, activation)
    if uncovered_fused_moe(hidden, gate_up_weight, down_weight) is not None:
        return _torch_experts(hidden, top_k_index, top_k_weights, gate_up_weight, down_weight,
                              activation)
    tokens, top_k = top_k_index.shape
    experts, double, _ = gate_up_weight.shape
    element = ELEMENTS[hidden.dtype][0]
    kind = kernels.device_kind(hidden)
    rows = tokens * top_k
    size = moe_size(rows, experts, element, kind)
    gate_up, _, down, combine, _, _ = moe_names(element, activation, kind, size)
    # (the tile table serves both GEMMs)
    pairs, tiles, pos = layout(top_k_index, experts, moe_block_rows(element, kind, size))
    x = hidden.index_select(0, torch.div(pairs, top_k, rounding_mode="floor"))
    half = double // 2
    h = kernels.run(gate_up, x, gate_up_weight[:, :half], gate_up_weight[:, half:], tiles)
    y = kernels.run(down, h, down_weight, tiles)
    acc = kernels.ACC_DTYPE[ELEMENTS_ACC[element]]
    return kernels.run(combine, y, pos, top_k_weights.to(acc).contiguous())


def _torch_experts(hidden: torch.Tensor, top_k_index: torch.Tensor,
                   top_k_weights: torch.Tensor, gate_up_weight: torch.Tensor,
                   down_weight: torch.Tensor, activation: str) -> torch.Tensor:
    """``moe_experts`` in torch (what the kernels do not cover): a loop over the experts."""
    act = _ACTIVATIONS[activation]
    out = torch.zeros(hidden.shape, dtype=torch.float32 if hidden.dtype != torch.float64
                      else torch.float64, device=hidden.device)
    half = gate_up_weight.shape[1] // 2
    for e in range(gate_up_weight.shape[0]):
        token, slot = torch.where(top_k_index == e)
        x = hidden[token].to(gate_up_weight.dtype)
        gate_up = F.linear(x, gate_up_weight[e])
        y = F.linear(act(gate_up[:, :half]) * gate_up[:, half:], down_weight[e])
        out = out.index_add(0, token, y.to(out.dtype) * top_k_weights[token, slot, None]
                            .to(out.dtype))
    return out.to(hidden.dtype)


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}


def fused_moe(hidden: torch.Tensor, router_logits: torch.Tensor, gate_up_weight: torch.Tensor,
              down_weight: torch.Tensor, top_k: int, *, renormalize: bool = True,
              activation: str = "silu", gate_up_scale: torch.Tensor | None = None,
              down_scale: torch.Tensor | None = None) -> torch.Tensor:
    """A mixture-of-experts layer: each token of ``hidden`` [T, H] routed by
    ``router_logits`` [T, E] (softmax, top ``top_k``, renormalised with ``renormalize``)
    to its experts, each a gated MLP ``down_weight[e] @ (act(gate @ x) * (up @ x))`` with
    ``gate_up_weight[e]`` [2I, H] the gate's rows then the up projection's and
    ``down_weight[e]`` [H, I] (the layout of ``transformers``' MoE models), and the
    experts' outputs summed with the routing weights. ``activation``: ``"silu"``
    (SwiGLU), ``"gelu_tanh"`` or ``"relu"``. Returns [T, H] of ``hidden``'s dtype.

    The grouped GEMMs (the gated activation in the first one's epilogue) and the weighted
    combine are Croqtile kernels (``croqtile/kernels/moe.co``); routing and sorting are
    torch's (see ``croqtile.nn.moe``). Differentiable with respect to the hidden states,
    the router's logits and both weights.

    FP8 weights (inference only): ``gate_up_weight`` and ``down_weight`` of
    ``torch.float8_e4m3fn`` with ``gate_up_scale`` float32 [E, 2I / 128, H / 128] and
    ``down_scale`` float32 [E, H / 128, I / 128], a scale per 128 x 128 block (the real
    weight is ``weight.float() * scale`` over each block: the ``weight_scale_inv`` of
    DeepSeek-V3's and Qwen3's FP8 checkpoints); H and I multiples of 128, hidden states
    bf16 or f16. The activations are quantised to E4M3 per token per 128 columns (and the
    gated result again before the down projection), and the GEMMs are block-scaled FP8
    GEMMs (``croqtile/kernels/moe_fp8.co``; see ``croqtile.nn.moe_fp8``). The FP8 path is
    not differentiable: a call with a tensor that requires grad, with gradients enabled,
    raises RuntimeError. A missing or ill-shaped scale raises ValueError; other FP8
    formats (e5m2, the fnuz ones) raise NotImplementedError."""
    if not 1 <= top_k <= router_logits.shape[-1]:
        raise ValueError(f"top_k={top_k}: expected 1 to the number of experts "
                         f"({router_logits.shape[-1]})")
    _check(hidden, gate_up_weight, down_weight, activation, gate_up_scale, down_scale)
    if is_fp8(gate_up_weight, down_weight):
        from .moe_fp8 import fused_moe_fp8  # (it imports this module)

        return fused_moe_fp8(hidden, router_logits, gate_up_weight, down_weight, top_k,
                             gate_up_scale, down_scale, renormalize=renormalize,
                             activation=activation)
    weights, ids = route(router_logits, top_k, renormalize)
    return moe_experts(hidden, ids, weights, gate_up_weight, down_weight,
                       activation=activation)

