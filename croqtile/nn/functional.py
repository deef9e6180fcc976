"""``croqtile.nn.functional``: torch's ``linear`` (with a residual and a row scale fused
too), ``scaled_dot_product_attention`` and ``rms_norm`` (same signatures and semantics),
``gated_linear`` (a gated MLP's first half), ``rms_rstd`` (each row's reciprocal RMS) and
``fused_moe`` (a mixture-of-experts layer, ``croqtile.nn.moe``),
running Croqtile kernels (``croqtile/kernels/*.co``, see ``croqtile.nn.kernels``), with
autograd.

A call the kernels do not cover runs torch's own function instead, so that the result is
never wrong: ``uncovered_*`` say why for each function (``None`` when a kernel runs).
Tensors are passed contiguous (a copy when they are not), except attention's q, k and v,
read in place when their last dimension is dense.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from . import attention_cuda, attention_ops, kernels
from .kernels import strided_key, tensor_key
from .moe import fused_moe as fused_moe

_ACTIVATIONS: dict[str | None, Callable[[torch.Tensor], torch.Tensor]] = {
    None: lambda t: t,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
}


def reference_activation(activation: str | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """torch's function for a linear ``activation`` (identity for ``None``)."""
    linear_activation(activation)
    return _ACTIVATIONS[activation]


def linear_activation(activation: str | None) -> None:
    """Refuse an activation the linear kernel does not know."""
    if activation not in _ACTIVATIONS:
        choices = ", ".join(repr(a) for a in _ACTIVATIONS)
        raise ValueError(f"activation={activation!r}: expected one of {choices}")


def _uncovered_device(*tensors: torch.Tensor) -> str | None:
    # (every call runs this: plain comparisons, no set of devices)
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            return "tensors on several devices"
    if device.type not in ("cpu", "cuda"):
        return f"device {device}"
    return None


def _uncovered_row_scale(x: torch.Tensor, row_scale: torch.Tensor,
                         *operands: torch.Tensor | None) -> str | None:
    """Why a kernel's row scale does not take ``row_scale`` for ``x`` (``None``: it does);
    ``operands`` are the call's other tensors, whose gradients it does not give."""
    if row_scale.dtype != kernels.ACC_DTYPE[kernels.ELEMENTS[x.dtype][1]]:
        return "a row scale not of the accumulator's dtype (float32; float64 for float64)"
    if tuple(row_scale.shape) != tuple(x.shape[:-1]):
        return "a row scale that is not of x's shape without its last dimension"
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (x, row_scale) + operands):
        return "a gradient wanted with a row scale (its kernels have no backward)"
    return _uncovered_device(x, row_scale)


def uncovered_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                     activation: str | None, residual: torch.Tensor | None = None,
                     row_scale: torch.Tensor | None = None) -> str | None:
    """Why the linear kernel does not take this call (``None``: it does)."""
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        return "operands of different dtypes"
    if x.dtype not in kernels.ELEMENTS:
        return f"dtype {x.dtype}"
    if activation == "gelu" and x.dtype == torch.float64:
        return "exact gelu in float64 (the kernel's erf is good to about 1e-7)"
    if x.dim() == 0 or weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        return "shapes that are not [..., in] and [out, in]"
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        return "a bias that is not [out]"
    if x.numel() == 0 or weight.numel() == 0:
        return "an empty tensor"
    if row_scale is not None:
        why = _uncovered_row_scale(x, row_scale, weight, bias, residual)
        if why is not None:
            return why
    if residual is not None:
        if residual.dtype != x.dtype:
            return "a residual of another dtype"
        if tuple(residual.shape) != (*x.shape[:-1], weight.shape[0]):
            return "a residual that is not of the output's shape [..., out]"
        return _uncovered_device(x, weight, residual) if bias is None else _uncovered_device(
            x, weight, bias, residual)
    return _uncovered_device(x, weight) if bias is None else _uncovered_device(x, weight, bias)


_LINEAR_PLANS = kernels.Plans()


def _linear_key(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                activation: str | None, residual: torch.Tensor | None = None,
                row_scale: torch.Tensor | None = None) -> tuple[Any, ...] | None:
    """The key of a linear call's plan: everything ``uncovered_linear``, the choice of
    kernel and its signature read (None when a tensor is not contiguous)."""
    key = (tensor_key(x), tensor_key(weight), tensor_key(bias), tensor_key(residual),
           tensor_key(row_scale), activation)
    return None if None in key[:5] else key


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           activation: str | None = None, residual: torch.Tensor | None = None,
           row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """``activation(x @ weight.T + bias) + residual`` with the bias, the activation and
    the residual fused into the GEMM's epilogue (added to the accumulator before its one
    store: a transformer block's residual connection costs no pass of its own); ``x`` is
    ``[..., in]``, ``weight`` ``[out, in]`` as ``torch.nn.Linear`` stores it,
    ``residual`` of the output's shape ``[..., out]`` and dtype, ``activation`` one of
    ``None``, ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` and ``"silu"``.

    ``row_scale`` (``[...]``, x's shape without its last dimension; float32, float64 for
    float64 ``x``) multiplies each row of the product before the bias:
    ``activation(row_scale[..., None] * (x @ weight.T) + bias) + residual``, which is how
    an RMS norm before the layer folds into it (``rms_norm(x) * w @ W.T`` is
    ``rms_rstd(x)[..., None] * (x @ (W * w).T)``). Its kernels have no backward: with a
    gradient wanted, torch computes the call."""
    # (keys only for eager calls: tracing sees no addresses)
    key = _linear_key(x, weight, bias, activation, residual, row_scale) \
        if kernels.direct(x, weight, bias, residual, row_scale) else None
    found = _LINEAR_PLANS.get(key)
    if found is not None:
        # (a warm eager call of a known kind: the plan's launch alone)
        rows = x if x.dim() == 2 else x.view(-1, x.shape[-1])
        given: tuple[torch.Tensor, ...] = (rows, weight) if bias is None else \
            (rows, weight, bias)
        if residual is not None:
            given += (residual.view(rows.shape[0], weight.shape[0]),)
        if row_scale is not None:
            given += (row_scale.view(rows.shape[0]),)
        planned: torch.Tensor = found[0](*given)
        return planned if x.dim() == 2 else planned.view(*x.shape[:-1], weight.shape[0])
    linear_activation(activation)
    if uncovered_linear(x, weight, bias, activation, residual, row_scale) is not None:
        return _torch_linear(x, weight, bias, activation, residual, row_scale)
    element = kernels.ELEMENTS[x.dtype][0]
    kind = kernels.device_kind(x)
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    tiles = kernels.linear_tiles(x2.shape[0], weight.shape[0], element, kind, x.device)
    name = kernels.linear_name(element, kernels.ACTIVATIONS[activation], bias is not None,
                               kind, tiles, residual is not None, row_scale is not None)
    args: tuple[torch.Tensor, ...] = (x2, weight.contiguous()) + (
        (bias.contiguous(),) if bias is not None else ())
    if residual is not None:
        args += (residual.reshape(x2.shape[0], weight.shape[0]).contiguous(),)
    if row_scale is not None:
        args += (row_scale.reshape(x2.shape[0]).contiguous(),)
    out = kernels.run(name, *args).reshape(*x.shape[:-1], weight.shape[0])
    _LINEAR_PLANS.remember(key, name, args)
    return out


def _torch_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  activation: str | None, residual: torch.Tensor | None,
                  row_scale: torch.Tensor | None) -> torch.Tensor:
    """``linear`` in torch's functions (for calls the kernel does not take)."""
    if row_scale is None:
        out = F.linear(x, weight, bias)
    else:
        out = _row_scaled(F.linear(x, weight), row_scale)
        out = out if bias is None else out + bias
    out = _ACTIVATIONS[activation](out)
    return out if residual is None else out + residual


def _row_scaled(product: torch.Tensor, row_scale: torch.Tensor) -> torch.Tensor:
    """``row_scale[..., None] * product`` in the product's dtype."""
    return (product * row_scale.unsqueeze(-1)).to(product.dtype)


def rms_rstd(x: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """Each row's reciprocal root mean square, ``1 / sqrt(mean(x^2) + eps)`` over the last
    dimension of ``x`` (``[...]``, in float32; float64 for float64 ``x``; ``eps``
    defaults to ``finfo(x.dtype).eps``): the row scale of an RMS norm folded into the
    GEMM after it (``linear(..., row_scale=)``). One pass over ``x``; no backward (with a
    gradient wanted, torch computes it)."""
    eps_value = torch.finfo(x.dtype).eps if eps is None else float(eps)
    if x.dtype not in kernels.ELEMENTS or x.dim() == 0 or x.numel() == 0 \
            or _uncovered_device(x) is not None or (torch.is_grad_enabled() and x.requires_grad):
        wide = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        return torch.rsqrt(wide.pow(2).mean(-1) + eps_value)
    element, acc_name = kernels.ELEMENTS[x.dtype]
    eps_t = kernels.scalar_tensor(eps_value, kernels.ACC_DTYPE[acc_name], x.device)
    name = kernels.rms_rstd_name(element, kernels.device_kind(x))
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    return kernels.run(name, rows, eps_t).reshape(x.shape[:-1])


def uncovered_gated_linear(x: torch.Tensor, gate_weight: torch.Tensor,
                           up_weight: torch.Tensor, activation: str,
                           row_scale: torch.Tensor | None = None) -> str | None:
    """Why the gated linear kernel does not take this call (``None``: it does)."""
    if activation not in kernels.GATED_ACTIVATIONS:
        return f"activation {activation!r}"
    why = uncovered_linear(x, gate_weight, None, activation)
    if why is not None:
        return why
    if up_weight.shape != gate_weight.shape or up_weight.dtype != gate_weight.dtype:
        return "gate and up weights of different shapes or dtypes"
    if row_scale is not None:
        why = _uncovered_row_scale(x, row_scale, gate_weight, up_weight)
        if why is not None:
            return why
    return _uncovered_device(x, gate_weight, up_weight)


def gated_linear(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor, *,
                 activation: str = "silu",
                 row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """``activation(x @ gate_weight.T) * (x @ up_weight.T)``, the first half of a gated
    MLP (SwiGLU for ``"silu"``), as one GEMM computing both products: the activation and
    the product run on its two accumulators, so neither projection's output reaches
    memory. ``x`` is ``[..., in]``, the weights ``[out, in]`` as ``torch.nn.Linear``
    stores them; ``activation`` one of ``"silu"``, ``"gelu_tanh"`` and ``"relu"``.
    ``row_scale`` multiplies each row of both products first, as ``linear``'s does (an
    RMS norm before the MLP, folded into the weights; no backward)."""
    key = (tensor_key(x), tensor_key(gate_weight), tensor_key(up_weight),
           tensor_key(row_scale), activation) \
        if kernels.direct(x, gate_weight, up_weight, row_scale) else None
    found = _GATED_PLANS.get(key)
    if found is not None:  # (see linear)
        rows = x.view(-1, x.shape[-1])
        planned: torch.Tensor = found[0](rows, gate_weight, up_weight) if row_scale is None \
            else found[0](rows, gate_weight, up_weight, row_scale.view(rows.shape[0]))
        return planned.view(*x.shape[:-1], gate_weight.shape[0])
    if activation not in _ACTIVATIONS or activation is None:
        choices = ", ".join(repr(a) for a in kernels.GATED_ACTIVATIONS)
        raise ValueError(f"activation={activation!r}: expected one of {choices}")
    if uncovered_gated_linear(x, gate_weight, up_weight, activation, row_scale) is not None:
        gate, up = F.linear(x, gate_weight), F.linear(x, up_weight)
        if row_scale is not None:
            gate, up = _row_scaled(gate, row_scale), _row_scaled(up, row_scale)
        return _ACTIVATIONS[activation](gate) * up
    element = kernels.ELEMENTS[x.dtype][0]
    kind = kernels.device_kind(x)
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    args: tuple[torch.Tensor, ...] = (x2, gate_weight.contiguous(), up_weight.contiguous())
    if row_scale is not None:
        args += (row_scale.reshape(x2.shape[0]).contiguous(),)
    name = kernels.gated_name(element, activation, kind, row_scale is not None,
                              kernels.gated_tiles(x2.shape[0], element, kind))
    out = kernels.run(name, *args)
    if key is not None and None not in key[:4]:
        _GATED_PLANS.remember(key, name, args)
    return out.reshape(*x.shape[:-1], gate_weight.shape[0])


_GATED_PLANS = kernels.Plans()


def _mask_shape(mask: torch.Tensor, batch: int, heads: int, length: int,
                keys: int) -> tuple[int, int] | None:
    """(MB, MH) of a mask broadcast to [B, H, L, S] as the kernel takes it (a batch and a
    head dimension of 1 or full), or None when it is not such a mask."""
    if mask.dim() > 4:
        return None
    shape = (1,) * (4 - mask.dim()) + tuple(mask.shape)
    full = (batch, heads, length, keys)
    if any(m not in (1, f) for m, f in zip(shape, full)):
        return None
    return shape[0], shape[1]


def _batch_dims(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None) -> bool:
    """Whether q, k and v have other than one batch dimension in a form that flattens to
    one (not when they have exactly one, or another form, which torch takes): three
    dimensions (one batch of heads: a mask broadcasts the same way against [1, H, L, S]),
    or more than four with the same leading dimensions and no mask."""
    if not q.dim() == k.dim() == v.dim() or q.dim() == 4:
        return False
    if q.dim() == 3:
        return mask is None or mask.dim() <= 3
    return q.dim() > 4 and mask is None and q.shape[:-3] == k.shape[:-3] == v.shape[:-3]


def uncovered_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        attn_mask: torch.Tensor | None, dropout_p: float, is_causal: bool,
                        enable_gqa: bool, scale: float | None = None) -> str | None:
    """Why the attention kernel does not take this call (``None``: it does)."""
    if dropout_p > 0.0:
        return "dropout"
    if attn_mask is None and scale is not None and not float(scale) > 0.0:
        # (the unmasked kernel takes each row's maximum before scaling)
        return f"a scale of {float(scale)} (not positive)"
    if q.dtype not in kernels.ELEMENTS or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"dtypes {q.dtype}, {k.dtype}, {v.dtype}"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "tensors that are not [B, H, L, D]"
    (b, h, length, d), (bk, hkv, keys, dk) = q.shape, k.shape
    if tuple(v.shape) != tuple(k.shape) or bk != b or dk != d:
        return "k and v not [B, HKV, S, D] with q's B and D"
    if d not in kernels.HEAD_DIMS:
        return f"head dimension {d}"
    if hkv != h and not (enable_gqa and h % hkv == 0):
        return "different head counts without grouped-query attention"
    if length == 0 or keys == 0 or b == 0 or h == 0:
        return "an empty tensor"
    if attn_mask is not None:
        if is_causal:
            return "a mask and is_causal together"
        if attn_mask.dtype != torch.bool and attn_mask.dtype != q.dtype:
            return f"a mask of dtype {attn_mask.dtype}"
        if attn_mask.requires_grad:
            return "a mask that requires grad"
        if _mask_shape(attn_mask, b, h, length, keys) is None:
            return f"a mask of shape {tuple(attn_mask.shape)}"
    return _uncovered_device(q, k, v) if attn_mask is None else _uncovered_device(
        q, k, v, attn_mask)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention``: q ``[B, H, L, D]``, k and v
    ``[B, HKV, S, D]``; causal or not, a boolean or additive mask broadcastable to
    ``[B, H, L, S]``, ``scale`` (default ``1 / sqrt(D)``), grouped-query attention with
    ``enable_gqa``. Three-dimensional tensors are one batch of heads, more than four
    (without a mask) several batch dimensions. Dropout, other layouts, dtypes and head
    dimensions run torch's."""
    # (plans for the calls a model makes: no mask, no dropout, rows of dense elements)
    key = (strided_key(q), strided_key(k), strided_key(v), is_causal, scale, enable_gqa) \
        if attn_mask is None and dropout_p == 0.0 and kernels.direct(q, k, v) else None
    found = _ATTENTION_PLANS.get(key)
    if found is not None:  # (see linear)
        planned: torch.Tensor = found[0](q, k, v, bool(is_causal),
                                         kernels.scalar_tensor(*found[1]))
        return planned.transpose(1, 2)
    if _batch_dims(q, k, v, attn_mask):
        lead = q.shape[:-3] if q.dim() > 3 else ()
        qf, kf, vf = (t.reshape(-1, *t.shape[-3:]) for t in (q, k, v))
        out = scaled_dot_product_attention(qf, kf, vf, attn_mask, dropout_p, is_causal, scale,
                                           enable_gqa)
        return out.reshape(*lead, *out.shape[-3:]) if lead else out[0]
    if uncovered_attention(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa,
                           scale) is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                              dropout_p=dropout_p, is_causal=is_causal,
                                              scale=scale, enable_gqa=enable_gqa)
    element, acc_name = kernels.ELEMENTS[q.dtype]
    acc = kernels.ACC_DTYPE[acc_name]
    b, h, length, d = q.shape
    keys = k.shape[2]
    # the head dimension as a plain int, also when tracing with symbolic sizes (the
    # comparison specialises on it: each head dimension is its own kernel anyway)
    if type(d) is not int:
        d = next(size for size in kernels.HEAD_DIMS if size == d)
    sm_scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    scale_t = kernels.scalar_tensor(sm_scale * attention_ops.LOG2E, acc, q.device)
    # (the hand-written Hopper forward where it is faster, when asked for)
    if attn_mask is None and length > attention_ops.DECODE_ROWS \
            and attention_cuda.cuda_attention(q, k, v, bool(is_causal), sm_scale):
        return attention_cuda.run(q, k, v, bool(is_causal), sm_scale)
    kind = kernels.device_kind(q)
    # (a decode step's few queries: the keys split over blocks, attention_decode.co)
    if length <= attention_ops.DECODE_ROWS:
        name = attention_ops.attention_decode_name(element, d, attn_mask is not None, kind,
                                                   keys <= attention_ops.DECODE_SHORT_KEYS)
    else:
        name = attention_ops.attention_name(element, d, attn_mask is not None, kind)
    # strided heads (a model's [B, L, H, D] projections transposed to [B, H, L, D]) are
    # read in place: the kernel takes the strides; only a last dimension that is not
    # dense is copied
    args = [t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v)]
    if attn_mask is not None:
        mask_shape = _mask_shape(attn_mask, b, h, length, keys)
        assert mask_shape is not None  # (uncovered_attention took the mask)
        mb, mh = mask_shape
        mask = attn_mask
        if mask.dtype == torch.bool:  # (True: take part; one kernel)
            mask = torch.where(mask, 0.0, float("-inf"))
        args.append(mask.to(acc).expand(mb, mh, length, keys).contiguous())
    # ([B, L, H, D] in memory, as torch's flash attention returns it)
    out = attention_ops.run(name, *args, bool(is_causal), scale_t).transpose(1, 2)
    if key is not None and all(t.stride(-1) == 1 for t in (q, k, v)):
        _ATTENTION_PLANS.remember(key, name, (*args, bool(is_causal), scale_t),
                                  (sm_scale * attention_ops.LOG2E, acc, q.device))
    return out


# (their extra: the scale tensor's value, dtype and device, for kernels.scalar_tensor)
_ATTENTION_PLANS = kernels.Plans()


def uncovered_rms_norm(x: torch.Tensor, shape: tuple[int, ...],
                       weight: torch.Tensor | None) -> str | None:
    """Why the rms_norm kernel does not take this call (``None``: it does)."""
    if x.dtype not in kernels.ELEMENTS:
        return f"dtype {x.dtype}"
    if not shape or x.dim() < len(shape) or tuple(x.shape[x.dim() - len(shape):]) != shape:
        return f"normalized_shape {shape} that is not the end of {tuple(x.shape)}"
    if weight is not None and (tuple(weight.shape) != shape or weight.dtype != x.dtype):
        return "a weight not of normalized_shape and x's dtype"
    if x.numel() == 0:
        return "an empty tensor"
    return _uncovered_device(x) if weight is None else _uncovered_device(x, weight)


def rms_norm(x: torch.Tensor, normalized_shape: int | Sequence[int],
             weight: torch.Tensor | None = None, eps: float | None = None) -> torch.Tensor:
    """``torch.nn.functional.rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight`` over the
    last ``len(normalized_shape)`` dimensions; ``eps`` defaults to ``finfo(x.dtype).eps``."""
    # (plans for a norm over the last dimension, as a model's layers call it)
    width = normalized_shape if isinstance(normalized_shape, int) else \
        normalized_shape[0] if type(normalized_shape) is tuple and len(normalized_shape) == 1 \
        else None
    key = (tensor_key(x), tensor_key(weight), width, eps) \
        if type(width) is int and kernels.direct(x, weight) else None
    found = _RMS_PLANS.get(key)
    if found is not None:  # (see linear)
        plan, eps_t = found[0], kernels.scalar_tensor(*found[1])
        rows = x.view(-1, x.shape[-1])  # (the key's width: the last dimension)
        normed: torch.Tensor = plan(rows, eps_t) if weight is None else \
            plan(rows, weight, eps_t)
        return normed.view(x.shape)
    shape = ((normalized_shape,) if isinstance(normalized_shape, int)
             else tuple(map(int, normalized_shape)))
    if uncovered_rms_norm(x, shape, weight) is not None:
        return F.rms_norm(x, list(shape), weight, eps)
    element, acc_name = kernels.ELEMENTS[x.dtype]
    eps_value = torch.finfo(x.dtype).eps if eps is None else float(eps)
    eps_t = kernels.scalar_tensor(eps_value, kernels.ACC_DTYPE[acc_name], x.device)
    name = kernels.rms_norm_name(element, weight is not None, kernels.device_kind(x))
    size = math.prod(shape)
    rows = x if x.dim() == 2 and len(shape) == 1 else x.reshape(-1, size)
    args: tuple[torch.Tensor, ...] = (rows.contiguous(), eps_t) if weight is None else \
        (rows.contiguous(), (weight if len(shape) == 1 else weight.reshape(size)).contiguous(),
         eps_t)
    out = kernels.run(name, *args).view(x.shape)
    if key is not None and None not in key[:2]:
        _RMS_PLANS.remember(key, name, args, (eps_value, kernels.ACC_DTYPE[acc_name], x.device))
    return out


# (their extra: the epsilon tensor's value, dtype and device, for kernels.scalar_tensor)
_RMS_PLANS = kernels.Plans()


def uncovered_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor) -> str | None:
    """Why the rotary kernel does not take this call (``None``: it does)."""
    if q.dtype not in kernels.ELEMENTS or any(t.dtype != q.dtype for t in (k, cos, sin)):
        return "tensors of different dtypes, or a dtype the kernel does not take"
    if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or cos.shape != sin.shape:
        return "q and k not [B, H, L, D] or cos and sin not [B, L, D]"
    (b, _, length, d), (bk, _, keys, dk) = q.shape, k.shape
    if (bk, keys, dk) != (b, length, d) or d % 2 or d not in kernels.HEAD_DIMS:
        return "q and k of different batches, lengths or head dimensions"
    if cos.shape[0] not in (1, b) or tuple(cos.shape[1:]) != (length, d):
        return f"cos and sin of shape {tuple(cos.shape)}"
    if cos.requires_grad or sin.requires_grad:
        return "cos or sin requiring grad"
    if q.numel() == 0 or k.numel() == 0:
        return "an empty tensor"
    return _uncovered_device(q, k, cos, sin)


def rotary_embedding(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of queries and keys as Llama and its kin apply it
    (``transformers``' ``apply_rotary_pos_emb``): ``x * cos + rotate_half(x) * sin`` for
    ``q`` ``[B, H, L, D]`` and ``k`` ``[B, HKV, L, D]`` (read in place whatever their
    strides), ``cos`` and ``sin`` ``[B or 1, L, D]`` whose halves repeat (``cat(freqs,
    freqs)``). One kernel per tensor where torch runs a pass per step; the results are
    ``[B, L, H, D]`` in memory, as a model's projections, viewed as ``[B, H, L, D]``.
    Gradients flow to ``q`` and ``k``."""
    direct = kernels.direct(q, k, cos, sin)
    found_q = _ROTARY_PLANS.get(_rotary_key(q, cos, sin)) if direct else None
    found_k = _ROTARY_PLANS.get(_rotary_key(k, cos, sin)) if found_q is not None else None
    if found_q is not None and found_k is not None:  # (see linear)
        return (found_q[0](q, cos, sin).transpose(1, 2),
                found_k[0](k, cos, sin).transpose(1, 2))
    if uncovered_rotary(q, k, cos, sin) is not None:
        return _rotate(q, cos, sin), _rotate(k, cos, sin)
    if q.stride(-1) != 1:
        q = q.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    cos, sin = cos.contiguous(), sin.contiguous()
    name = kernels.rotary_name(kernels.ELEMENTS[q.dtype][0], q.shape[-1], kernels.device_kind(q))
    out = [kernels.run(name, t, cos, sin).transpose(1, 2) for t in (q, k)]
    for t in (q, k) if direct else ():
        _ROTARY_PLANS.remember(_rotary_key(t, cos, sin), name, (t, cos, sin))
    return out[0], out[1]


def _rotary_key(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[Any, ...] | None:
    key = (strided_key(x), tensor_key(cos), tensor_key(sin))
    return None if None in key or x.stride(-1) != 1 else key


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """torch's rotary embedding of ``x`` [B, H, L, D] (cos and sin [B, L, D])."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.unsqueeze(1) + turned * sin.unsqueeze(1)


_ROTARY_PLANS = kernels.Plans()
