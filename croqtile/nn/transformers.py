"""Hugging Face ``transformers`` integration: ``register()`` adds croqtile's attention to
the library's attention-function registry, so that a model loaded or built with
``attn_implementation="croqtile"`` runs its attention through
``croqtile.nn.functional.scaled_dot_product_attention``.

``transformers`` is an optional dependency: importing this module does not import it;
``register()`` does, and says so when it is missing.

The attention function follows the library's own ``sdpa`` integration (the contract its
models call): queries, keys and values arrive as [batch, heads, length, head_dim], the
output leaves as [batch, length, heads, head_dim] with no attention weights; grouped
keys and values (fewer key/value heads) are passed with ``enable_gqa``; a causal layer
without a mask uses the kernel's causal mode. The masks are built by the library's
``sdpa`` mask function (None where causal alone says it, boolean otherwise), which the
croqtile function takes as torch's does.
"""

from __future__ import annotations

from typing import Any

import torch

from . import functional

NAME = "croqtile"


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask: torch.Tensor | None,
                      dropout: float = 0.0, scaling: float | None = None,
                      is_causal: bool | None = None, **kwargs: Any
                      ) -> tuple[torch.Tensor, None]:
    """One attention layer of a ``transformers`` model (the registry's signature)."""
    if kwargs.get("softcap") is not None:
        raise ValueError("attn_implementation='croqtile' does not support softcap; use "
                         "'eager' for this model")
    if kwargs.get("position_bias") is not None:
        raise ValueError("attn_implementation='croqtile' does not support a position bias; "
                         "use 'sdpa' or 'eager' for this model")
    groups = getattr(module, "num_key_value_groups", 1)
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    q_length, kv_length = query.shape[2], key.shape[2]
    # as the library's sdpa path: causal from the flag only without a mask and for more
    # than one query; torch's causal mask is aligned top-left, so keys past the queries
    # (a prefill with no cache) are cut to the queries' length
    is_causal = bool(is_causal) and attention_mask is None and q_length > 1
    if is_causal and kv_length > q_length:
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    if attention_mask is not None and attention_mask.shape[-1] != key.shape[2]:
        attention_mask = attention_mask[..., :key.shape[2]]
    output = functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask,
        dropout_p=dropout if module.training else 0.0, is_causal=is_causal, scale=scaling,
        enable_gqa=groups > 1)
    return output.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ``attn_implementation="croqtile"`` available to ``transformers`` models
    (idempotent)."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as error:
        raise ImportError("croqtile.nn.transformers.register() needs the optional "
                          "dependency 'transformers' (pip install transformers)") from error
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
