"""``croqtile.nn``: PyTorch layers and functions running Croqtile kernels shipped with the
package (``croqtile/kernels/*.co``), compiled on first use, with autograd (arch 4.1).

    croqtile.nn.Linear(in_features, out_features, bias=True, *, activation=None,
                       device=None, dtype=None)
    croqtile.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True, device=None,
                        dtype=None)
    croqtile.nn.functional.linear(x, weight, bias=None, *, activation=None, residual=None,
                                  row_scale=None)
    croqtile.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None,
        dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
    croqtile.nn.functional.rms_norm(x, normalized_shape, weight=None, eps=None)
    croqtile.nn.functional.gated_linear(x, gate_weight, up_weight, *, activation="silu",
                                        row_scale=None)
    croqtile.nn.functional.rms_rstd(x, eps=None)
    croqtile.nn.functional.fused_moe(hidden, router_logits, gate_up_weight, down_weight,
                                     top_k, *, renormalize=True, activation="silu")
    croqtile.nn.convert(model)
"""

from __future__ import annotations

from . import functional as functional
from .modules import Linear as Linear
from .modules import RMSNorm as RMSNorm
from .modules import convert as convert

__all__ = ["Linear", "RMSNorm", "convert", "functional"]
