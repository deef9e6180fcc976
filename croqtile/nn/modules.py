"""``croqtile.nn.Linear`` and ``convert``: torch.nn.Linear's parameters, initialisation
and state_dict, running the Croqtile linear kernel with an optional fused activation."""

from __future__ import annotations

from typing import Any

import torch

from . import functional


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` (same ``weight [out, in]`` and ``bias [out]`` parameters,
    ``reset_parameters`` and state_dict, so that checkpoints load either way) whose
    forward is ``croqtile.nn.functional.linear``, with ``activation`` (``None``,
    ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``) fused into the GEMM."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 activation: str | None = None, device: Any = None,
                 dtype: torch.dtype | None = None) -> None:
        functional.linear_activation(activation)  # (refused before allocating anything)
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation = activation

    @classmethod
    def of(cls, linear: torch.nn.Linear, *, activation: str | None = None) -> Linear:
        """A ``croqtile.nn.Linear`` holding ``linear``'s parameters (the same tensors:
        device, dtype and values kept), with ``activation``."""
        # built on the meta device (nothing allocated or initialised), then given the
        # original parameters themselves
        new = cls(linear.in_features, linear.out_features, linear.bias is not None,
                  activation=activation, device="meta", dtype=linear.weight.dtype)
        new.weight = linear.weight
        new.bias = linear.bias
        new.train(linear.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.linear(x, self.weight, self.bias, activation=self.activation)

    def extra_repr(self) -> str:
        text = super().extra_repr()
        return text if self.activation is None else f"{text}, activation={self.activation!r}"


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Replace every ``torch.nn.Linear`` in ``model`` (the model itself included when it
    is one: then the new module is returned) by a ``croqtile.nn.Linear`` holding the same
    parameters (same tensors: device, dtype and values kept), in place; returns the model.
    Only modules whose type is exactly ``torch.nn.Linear`` are replaced: a subclass may
    have its own forward, or its owner may read its weight directly (the ``out_proj`` of
    ``torch.nn.MultiheadAttention``)."""
    if type(model) is torch.nn.Linear:
        return Linear.of(model)
    for name, child in list(model.named_children()):
        if type(child) is torch.nn.Linear:
            setattr(model, name, Linear.of(child))
        else:
            convert(child)
    return model
