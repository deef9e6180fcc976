"""``croqtile.nn.Linear``, ``croqtile.nn.RMSNorm`` and ``convert``: torch's modules'
parameters, initialisation and state_dict, running the Croqtile linear kernel (with an
optional fused activation) and RMS normalisation kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, TypeVar

import torch

from . import functional


_LinearT = TypeVar("_LinearT", bound="Linear")


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` (same ``weight [out, in]`` and ``bias [out]`` parameters,
    ``reset_parameters`` and state_dict, so that checkpoints load either way) whose
    forward is ``croqtile.nn.functional.linear``, with ``activation`` (``None``,
    ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``) fused into the GEMM."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 activation: str | None = None, device: torch.types.Device = None,
                 dtype: torch.dtype | None = None) -> None:
        functional.linear_activation(activation)  # (refused before allocating anything)
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation = activation

    @classmethod
    def of(cls: type[_LinearT], linear: torch.nn.Linear, *,
           activation: str | None = None) -> _LinearT:
        """A ``croqtile.nn.Linear`` (of this class) holding ``linear``'s parameters (the
        same tensors: device, dtype and values kept), with ``activation``."""
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


class RMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` (same ``normalized_shape``, ``eps``, ``weight`` parameter and
    state_dict) whose forward is ``croqtile.nn.functional.rms_norm``: one kernel where
    torch's unfused form is a pass per step."""

    @classmethod
    def of(cls, norm: torch.nn.RMSNorm) -> RMSNorm:
        """A ``croqtile.nn.RMSNorm`` holding ``norm``'s weight (the same tensor)."""
        return cls.with_weight(norm.weight, norm.normalized_shape, norm.eps,
                               training=norm.training)

    @classmethod
    def with_weight(cls, weight: torch.nn.Parameter | None, normalized_shape: int | Sequence[int],
                    eps: float | None, *, training: bool = False) -> RMSNorm:
        """A ``croqtile.nn.RMSNorm`` over ``normalized_shape`` whose weight is ``weight``
        itself (a parameter, shared with its owner; None: no weight)."""
        new = cls(normalized_shape, eps, elementwise_affine=weight is not None,
                  device="meta", dtype=None if weight is None else weight.dtype)
        if weight is not None:
            new.weight = weight
        new.train(training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)


# torch's modules that ``convert`` replaces, and how
_CONVERSIONS: dict[type, Callable[[Any], torch.nn.Module]] = {
    torch.nn.Linear: Linear.of, torch.nn.RMSNorm: RMSNorm.of}


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Replace every ``torch.nn.Linear`` and ``torch.nn.RMSNorm`` in ``model`` (the model
    itself included when it is one: then the new module is returned) by a
    ``croqtile.nn.Linear`` or ``croqtile.nn.RMSNorm`` holding the same parameters (same
    tensors: device, dtype and values kept), in place; returns the model. Only modules
    whose type is exactly one of those are replaced: a subclass may have its own forward,
    or its owner may read its weight directly (the ``out_proj`` of
    ``torch.nn.MultiheadAttention``)."""
    replace = _CONVERSIONS.get(type(model))
    if replace is not None:
        return replace(model)
    for name, child in list(model.named_children()):
        replace = _CONVERSIONS.get(type(child))
        if replace is not None:
            setattr(model, name, replace(child))
        else:
            convert(child)
    return model
