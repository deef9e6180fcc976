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
   of the sorted ids (no host synchronisation: the kernels read the runs at run time),
   and the tokens' rows gathered in that order.
3. ``moe_gate_up`` (Croqtile): a grouped GEMM over each expert's run of rows computing
   the gate and up products from one tile of rows per K step, the gated activation in
   its epilogue; the weight's halves are read in place.
4. ``moe_down`` (Croqtile): the down projection, a grouped GEMM over the same runs.
5. ``moe_combine`` (Croqtile): each token's weighted sum of its experts' rows, back in
   token order.

The backward (each of the three operators has one, ``torch.library.register_autograd``):
the gate/up gradients come from ``moe_gate_up_grad`` (both products recomputed), the
inputs' and weights' gradients from the grouped GEMMs ``moe_grouped_nn`` and
``moe_grouped_tn`` (Croqtile); the combine's backward (a scatter of the output's
gradient to the sorted rows, and the routing weights' gradients, a dot product per
pair) and the gather of step 2 are torch's. The routing weights get gradients, so a
router trained through ``fused_moe`` learns as the model's own code would.

What the kernels do not cover runs torch's own computation (``uncovered_fused_moe`` says
why): weights of another dtype than the hidden states, a dtype without kernels, tensors
on several devices or on another device than the CPU and CUDA. FP8 (E4M3) expert weights
with per-128-block scales, the layout of DeepSeek and Qwen FP8 checkpoints, are not
implemented yet: ``fused_moe`` refuses them (NotImplementedError) rather than compute
with them as if they were plain numbers.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from . import kernels
from .kernels import ELEMENTS, ELEMENTS_ACC, GATED_ACTIVATIONS, NAMESPACE, Variant, operator
from ..runtime.module import Module

# (BM, BN, BK) of the grouped GEMMs by (device kind, element type): rows of an expert's run
# per step, columns per block, the reduction's step. The GPU's are a first guess for
# Hopper (not yet timed): 64-row tiles, since an expert's run at a decode step or a short
# prefill has few rows. The CPU's keep the tests' small shapes crossing tiles and tails.
MOE_TILES = {
    **{("cpu", t): (16, 32, 32) for t in ("f16", "bf16", "f32", "f64")},
    ("gpu", "f16"): (64, 128, 64), ("gpu", "bf16"): (64, 128, 64),
    ("gpu", "f32"): (64, 64, 32), ("gpu", "f64"): (32, 32, 16),
}
MOE_OPTIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "cpu": (), "gpu": (("num_warps", 4), ("num_stages", 3))}
COMBINE_COLS = {"cpu": 32, "gpu": 256}  # the combine's columns per block

# the macros of moe.co's functions, by the role of their operator
_FUNCTIONS = ("MOE_GATE_UP", "MOE_GATE_UP_GRAD", "MOE_DOWN", "MOE_COMBINE", "MOE_GROUPED_NN",
              "MOE_GROUPED_TN")
_FLOAT8 = tuple(getattr(torch, name) for name in ("float8_e4m3fn", "float8_e4m3fnuz",
                                                   "float8_e5m2", "float8_e5m2fnuz")
                if hasattr(torch, name))


@kernels.constant_result
def moe_names(element: str, activation: str, kind: str) -> tuple[str, ...]:
    """The operators' names of a moe.co variant, in the order of ``_FUNCTIONS`` (compiled
    and registered on first use, with the autograd of the gate/up, down and combine
    operators): ``moe_<function>_<element>_<activation>_<kind>``."""
    suffix = f"{element}_{activation}_{kind}"
    names = tuple(f"{macro.lower()}_{suffix}" for macro in _FUNCTIONS)
    bm, bn, bk = MOE_TILES[kind, element]
    defines = (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("BM", bm), ("BN", bn),
               ("BK", bk), ("COLS", COMBINE_COLS[kind]),
               ("ACT", GATED_ACTIVATIONS[activation]))
    variant = Variant("moe", defines, tuple(zip(_FUNCTIONS, names)), MOE_OPTIONS[kind])
    kernels.load(variant, _autograd(names), kind)
    return names


def _autograd(names: tuple[str, ...]) -> Callable[[Module], None]:
    """Attaches the backward of the gate/up, down and combine operators of ``names``."""
    gate_up, gate_up_grad, down, combine, grouped_nn, grouped_tn = names

    def attach(module: Module) -> None:
        def save_inputs(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        def gate_up_backward(ctx: Any, dh: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            x, wg, wu, runs = ctx.saved_tensors
            grads = operator(gate_up_grad)(x, wg, wu, runs, dh.contiguous())
            dg, du = grads[0], grads[1]
            nn, tn = operator(grouped_nn), operator(grouped_tn)
            dx = nn(dg, wg, runs) + nn(du, wu, runs) if ctx.needs_input_grad[0] else None
            dwg = tn(dg, x, runs) if ctx.needs_input_grad[1] else None
            dwu = tn(du, x, runs) if ctx.needs_input_grad[2] else None
            return dx, dwg, dwu, None

        def down_backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            h, wd, runs = ctx.saved_tensors
            dy = dy.contiguous()
            dh = operator(grouped_nn)(dy, wd, runs) if ctx.needs_input_grad[0] else None
            dwd = operator(grouped_tn)(dy, h, runs) if ctx.needs_input_grad[1] else None
            return dh, dwd, None

        def combine_backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            y, pos, weights = ctx.saved_tensors
            rows = pos.reshape(-1).long()
            dy = dweights = None
            if ctx.needs_input_grad[0]:  # (pos is a permutation of the sorted rows)
                pairs = weights[..., None] * dout[:, None, :].to(weights.dtype)
                dy = torch.empty_like(y).index_copy_(0, rows, pairs.reshape(rows.shape[0], -1)
                                                     .to(y.dtype))
            if ctx.needs_input_grad[2]:
                picked = y.index_select(0, rows).reshape(*pos.shape, -1).to(weights.dtype)
                dweights = (picked * dout[:, None, :].to(weights.dtype)).sum(-1)
            return dy, None, dweights

        for name, backward in ((gate_up, gate_up_backward), (down, down_backward),
                               (combine, combine_backward)):
            torch.library.register_autograd(f"{NAMESPACE}::{name}", backward,
                                            setup_context=save_inputs)

    return attach


def route(router_logits: torch.Tensor, top_k: int,
          renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, ids)`` [T, top_k] of each token's ``top_k`` experts: the softmax of the
    router's logits (in float32, or float64 for float64 logits), its largest entries,
    renormalised to sum to one with ``renormalize`` (Mixtral; Qwen-MoE's
    ``norm_topk_prob``)."""
    wide = torch.float64 if router_logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(router_logits.to(wide), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


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
           activation: str) -> None:
    """Refuse arguments that no path computes."""
    if activation not in GATED_ACTIVATIONS:
        choices = ", ".join(repr(a) for a in GATED_ACTIVATIONS)
        raise ValueError(f"activation={activation!r}: expected one of {choices}")
    if gate_up_weight.dtype in _FLOAT8 or down_weight.dtype in _FLOAT8:
        raise NotImplementedError(
            "fused_moe: FP8 expert weights (with per-block scales) are not implemented yet; "
            "pass bf16, f16 or f32 weights (dequantised)")
    experts, double, width = gate_up_weight.shape
    if (hidden.dim() != 2 or down_weight.dim() != 3 or double % 2
            or hidden.shape[1] != width
            or tuple(down_weight.shape) != (experts, width, double // 2)):
        raise ValueError(
            f"fused_moe: expected hidden [T, H], gate_up_weight [E, 2I, H] and down_weight "
            f"[E, H, I]; got {tuple(hidden.shape)}, {tuple(gate_up_weight.shape)} and "
            f"{tuple(down_weight.shape)}")


def moe_experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
                gate_up_weight: torch.Tensor, down_weight: torch.Tensor, *,
                activation: str = "silu") -> torch.Tensor:
    """The experts of a routed MoE layer: ``hidden`` [T, H] sent to the experts
    ``top_k_index`` [T, k] and summed with ``top_k_weights`` [T, k] (the signature of the
    experts registry of ``transformers``; ``fused_moe`` routes first)."""
    _check(hidden, gate_up_weight, down_weight, activation)
    if uncovered_fused_moe(hidden, gate_up_weight, down_weight) is not None:
        return _torch_experts(hidden, top_k_index, top_k_weights, gate_up_weight, down_weight,
                              activation)
    tokens, top_k = top_k_index.shape
    experts, double, _ = gate_up_weight.shape
    element = ELEMENTS[hidden.dtype][0]
    kind = kernels.device_kind(hidden)
    gate_up, _, down, combine, _, _ = moe_names(element, activation, kind)
    ids = top_k_index.reshape(-1)
    order = torch.sort(ids, stable=True)
    bounds = torch.searchsorted(order.values, torch.arange(
        experts + 1, device=ids.device, dtype=order.values.dtype)).to(torch.int32)
    runs = torch.stack((bounds[:-1], bounds[1:]), dim=1)  # [E, 2]: each expert's rows
    pairs = order.indices
    pos = torch.empty_like(pairs).index_copy_(0, pairs, torch.arange(
        pairs.shape[0], device=pairs.device, dtype=pairs.dtype)).view(tokens, top_k)
    x = hidden.index_select(0, torch.div(pairs, top_k, rounding_mode="floor"))
    half = double // 2
    h = kernels.run(gate_up, x, gate_up_weight[:, :half], gate_up_weight[:, half:], runs)
    y = kernels.run(down, h, down_weight, runs)
    acc = kernels.ACC_DTYPE[ELEMENTS_ACC[element]]
    return kernels.run(combine, y, pos.to(torch.int32), top_k_weights.to(acc).contiguous())


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
              activation: str = "silu") -> torch.Tensor:
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
    the router's logits and both weights. FP8 weights are refused (not implemented
    yet)."""
    if not 1 <= top_k <= router_logits.shape[-1]:
        raise ValueError(f"top_k={top_k}: expected 1 to the number of experts "
                         f"({router_logits.shape[-1]})")
    _check(hidden, gate_up_weight, down_weight, activation)
    weights, ids = route(router_logits, top_k, renormalize)
    return moe_experts(hidden, ids, weights, gate_up_weight, down_weight,
                       activation=activation)

