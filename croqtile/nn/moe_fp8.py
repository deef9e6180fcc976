"""``croqtile.nn.functional.fused_moe`` with FP8 expert weights: the "fine-grained FP8"
layout of DeepSeek-V3 and Qwen3 FP8 checkpoints (weight_block_size [128, 128]), running
the Croqtile kernels of ``croqtile/kernels/moe_fp8.co``. Inference only.

    gate_up_weight float8_e4m3fn [E, 2I, H], gate_up_scale float32 [E, 2I / 128, H / 128]
    down_weight    float8_e4m3fn [E, H, I],  down_scale    float32 [E, H / 128, I / 128]

The real weight is ``weight.float() * scale`` over each 128 x 128 block (the checkpoints'
``weight_scale_inv``). H and I are multiples of 128. The steps, as the serving engines
(vLLM, SGLang) run them:

1. Routing and sorting: ``croqtile.nn.moe_ops``'s (``route``, ``sort_by_expert``,
   ``tile_table``).
2. The hidden states quantised per token per 128 columns (torch, ``quantize_rows``): E4M3
   values and a float32 scale ``amax / 448`` per row and group (1 for a group of zeros),
   then gathered in the sorted order (quantised before the gather: T rows, not T * k).
3. ``moe_fp8_gate_up`` (Croqtile): the block-scaled grouped GEMM of the gate and up
   products, the gated activation in its epilogue, h in the hidden states' dtype.
4. h quantised again per row per 128 columns (torch, ``quantize_rows``; the gate/up
   kernel's epilogue could do it, a 128-column tile being one group, with
   ``reduce_max`` over its rows, but its scales would be a second output).
5. ``moe_fp8_down`` (Croqtile): the down projection's block-scaled grouped GEMM.
6. moe.co's combine: each token's weighted sum of its experts' rows.

The GEMMs take one 128-wide K block per step: its FP8 product (f32 accumulation) scaled
by the rows' activation scales and the weight block's scale as it is added
(``mma.row.row.scale``). No autograd: ``fused_moe`` refuses a call that would record a
gradient (``check_fp8``).
"""

from __future__ import annotations

from typing import Any

import torch

from . import kernels
from .kernels import ELEMENTS, GATED_ACTIVATIONS, Variant
from .moe_ops import MOE_OPTIONS, layout, moe_names, moe_size, route

BLOCK = 128  # the scales' block: 128 x 128 of a weight, 1 x 128 of an activation
E4M3_MAX = 448.0  # the largest finite float8_e4m3fn
# (BM, BN) of the FP8 grouped GEMMs by (device kind, size class, see ``moe_size``); BK is
# BLOCK. BN is 128 so that a column tile lies in one weight-scale block. The GPU's are a
# first guess for Hopper, not timed yet; the CPU's keep the tests' tokens across tiles.
FP8_TILES = {
    ("cpu", "medium"): (16, 128),
    ("gpu", "small"): (16, 128), ("gpu", "medium"): (64, 128), ("gpu", "large"): (128, 128),
}
# the hidden states' dtypes of the FP8 path
FP8_HIDDEN = (torch.bfloat16, torch.float16)
_FUNCTIONS = ("MOE_FP8_GATE_UP", "MOE_FP8_DOWN")


@kernels.constant_result
def moe_fp8_names(element: str, activation: str, kind: str,
                  size: str = "medium") -> tuple[str, str]:
    """The operators' names of a moe_fp8.co variant ``(gate_up, down)``, compiled and
    registered on first use (no autograd): ``moe_fp8_<function>_<element>_<activation>_
    <kind>_<size>``."""
    suffix = f"{element}_{activation}_{kind}_{size}"
    gate_up, down = (f"{macro.lower()}_{suffix}" for macro in _FUNCTIONS)
    bm, bn = FP8_TILES[kind, size]
    defines = (("DT", element), ("BM", bm), ("BN", bn), ("BK", BLOCK),
               ("ACT", GATED_ACTIVATIONS[activation]))
    variant = Variant("moe_fp8", defines, tuple(zip(_FUNCTIONS, (gate_up, down))),
                      MOE_OPTIONS[kind, size])
    kernels.load(variant, None, kind)
    return gate_up, down


def fp8_size(rows: int | torch.SymInt, experts: int, kind: str) -> str:
    """The size class of an FP8 call (moe.py's ``moe_size`` where FP8_TILES has it)."""
    size = moe_size(rows, experts, "bf16", kind)
    return size if (kind, size) in FP8_TILES else "medium"


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [R, C] (C a multiple of 128) quantised per row per 128 columns, as the
    serving engines quantise activations: ``(q, scale)`` with ``scale`` [R, C / 128]
    float32 ``amax / 448`` of each group (1 for a group of zeros) and ``q`` [R, C]
    float8_e4m3fn ``x / scale``, so that ``q * scale`` approximates ``x``."""
    rows, cols = x.shape
    groups = x.to(torch.float32).view(rows, cols // BLOCK, BLOCK)
    amax = groups.abs().amax(dim=-1)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (groups / scale[..., None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.view(rows, cols), scale


def _scale_shape(weight: torch.Tensor) -> tuple[int, int, int]:
    experts, rows, cols = weight.shape
    return experts, -(-rows // BLOCK), -(-cols // BLOCK)


def check_fp8(hidden: torch.Tensor, router_logits: torch.Tensor | None,
              gate_up_weight: torch.Tensor, down_weight: torch.Tensor,
              gate_up_scale: torch.Tensor | None, down_scale: torch.Tensor | None,
              top_k_weights: torch.Tensor | None = None) -> None:
    """Refuse FP8 arguments that the kernels do not compute (the weights are FP8 and the
    shapes those of ``fused_moe``): another FP8 format (NotImplementedError), a missing
    or ill-shaped scale, widths not multiples of 128, hidden states of another dtype than
    bf16 and f16, and any tensor needing a gradient (the FP8 path has no autograd)
    (ValueError or NotImplementedError, naming the argument)."""
    for name, weight in (("gate_up_weight", gate_up_weight), ("down_weight", down_weight)):
        if weight.dtype != torch.float8_e4m3fn:
            if weight.is_floating_point() and weight.element_size() == 1:
                raise NotImplementedError(
                    f"fused_moe: {name} of dtype {weight.dtype}: the FP8 path takes "
                    f"torch.float8_e4m3fn weights only")
            raise ValueError(f"fused_moe: {name} of dtype {weight.dtype} beside FP8 "
                             f"weights: pass both weights in float8_e4m3fn")
    for name, scale, weight in (("gate_up_scale", gate_up_scale, gate_up_weight),
                                ("down_scale", down_scale, down_weight)):
        expected = _scale_shape(weight)
        if scale is None:
            raise ValueError(f"fused_moe: FP8 weights need {name} (float32 {list(expected)}: "
                             f"a scale per 128 x 128 block of the weight)")
        if tuple(scale.shape) != expected or scale.dtype != torch.float32:
            raise ValueError(f"fused_moe: {name} of shape {list(scale.shape)} and dtype "
                             f"{scale.dtype}: expected float32 {list(expected)} (a scale "
                             f"per 128 x 128 block of the weight)")
    width, inter = hidden.shape[1], gate_up_weight.shape[1] // 2
    if width % BLOCK or inter % BLOCK:
        raise ValueError(f"fused_moe: FP8 weights need the hidden width H and the "
                         f"intermediate width I to be multiples of {BLOCK}; got H = {width}, "
                         f"I = {inter}")
    if hidden.dtype not in FP8_HIDDEN:
        raise ValueError(f"fused_moe: hidden states of dtype {hidden.dtype} with FP8 "
                         f"weights: expected torch.bfloat16 or torch.float16")
    tensors: tuple[Any, ...] = (hidden, router_logits, gate_up_weight, down_weight,
                                gate_up_scale, down_scale, top_k_weights)
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in tensors):
        raise RuntimeError("fused_moe: the FP8 path is inference only (no gradients), but "
                           "a tensor passed requires grad: call it under torch.no_grad() "
                           "or torch.inference_mode(), or pass detached tensors")
    devices = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devices) > 1:
        raise ValueError(f"fused_moe: tensors on several devices ({sorted(map(str, devices))})")
    if hidden.device.type not in ("cpu", "cuda"):
        raise NotImplementedError(f"fused_moe: FP8 weights on device {hidden.device}: the "
                                  f"kernels run on the CPU and CUDA")


def _gather_rows(q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``q.index_select(0, index)`` of a float8 tensor (through its bytes)."""
    return q.view(torch.uint8).index_select(0, index).view(q.dtype)


def moe_experts_fp8(hidden: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor, gate_up_weight: torch.Tensor,
                    down_weight: torch.Tensor, gate_up_scale: torch.Tensor,
                    down_scale: torch.Tensor, activation: str = "silu") -> torch.Tensor:
    """``croqtile.nn.moe.moe_experts`` with FP8 weights and their block scales (checked
    by ``check_fp8``): steps 2 to 6 of the module's docstring."""
    tokens, top_k = top_k_index.shape
    experts, double, _ = gate_up_weight.shape
    if tokens == 0:
        return hidden.new_zeros(hidden.shape)
    element = ELEMENTS[hidden.dtype][0]
    kind = kernels.device_kind(hidden)
    rows = tokens * top_k
    size = fp8_size(rows, experts, kind)
    gate_up, down = moe_fp8_names(element, activation, kind, size)
    combine = moe_names(element, activation, kind, moe_size(rows, experts, element, kind))[3]
    pairs, tiles, pos = layout(top_k_index, experts, FP8_TILES[kind, size][0])
    xq, xs = quantize_rows(hidden)
    token = torch.div(pairs, top_k, rounding_mode="floor")
    xq, xs = _gather_rows(xq, token), xs.index_select(0, token)
    half, blocks = double // 2, double // 2 // BLOCK
    h = kernels.run(gate_up, xq, xs, gate_up_weight[:, :half], gate_up_weight[:, half:],
                    gate_up_scale[:, :blocks], gate_up_scale[:, blocks:], tiles)
    hq, hs = quantize_rows(h)
    y = kernels.run(down, hq, hs, down_weight, down_scale, tiles)
    return kernels.run(combine, y, pos,
                       top_k_weights.to(torch.float32).contiguous())


def fused_moe_fp8(hidden: torch.Tensor, router_logits: torch.Tensor,
                  gate_up_weight: torch.Tensor, down_weight: torch.Tensor, top_k: int,
                  gate_up_scale: torch.Tensor | None, down_scale: torch.Tensor | None, *,
                  renormalize: bool = True, activation: str = "silu") -> torch.Tensor:
    """``fused_moe`` with FP8 weights (its arguments checked by moe.py's ``_check``)."""
    check_fp8(hidden, router_logits, gate_up_weight, down_weight, gate_up_scale, down_scale)
    assert gate_up_scale is not None and down_scale is not None
    weights, ids = route(router_logits, top_k, renormalize)
    return moe_experts_fp8(hidden, ids, weights, gate_up_weight, down_weight, gate_up_scale,
                           down_scale, activation)
