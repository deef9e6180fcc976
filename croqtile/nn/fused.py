"""The modules that croqtile's rewrites of a model put in place of its own
(``croqtile.nn.transformers``, ``croqtile.nn.blocks``), and what they share: a gated MLP
as one GEMM (``GatedMLP``), query, key and value projections as one (``FusedProjection``),
a projection that adds a residual in its GEMM's epilogue (``ResidualLinear``), and the
comparison by which a rewrite checks that a replacement computes what it replaced
(``same_output``)."""

from __future__ import annotations

import torch

from . import functional
from .modules import Linear

# relative error allowed between a module's output before and after a rewrite, by dtype
# (a fused GEMM rounds once where the unfused steps round after each)
FUSED_TOLERANCE = {torch.float16: 5e-2, torch.bfloat16: 5e-2, torch.float32: 1e-4,
                   torch.float64: 1e-10}


def same_output(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a module's output after a rewrite is its output before, up to rounding."""
    error = ((after.double() - before.double()).norm() / before.double().norm()).item()
    return bool(error <= FUSED_TOLERANCE.get(before.dtype, 1e-4))


class GatedMLP(torch.nn.Module):
    """A gated MLP, ``down_proj(act(gate_proj(x)) * up_proj(x))``, whose first half is one
    GEMM (``croqtile.nn.functional.gated_linear``). It holds the original module's three
    projections under their names, so its state_dict is the original's."""

    def __init__(self, gate_proj: torch.nn.Linear, up_proj: torch.nn.Linear,
                 down_proj: torch.nn.Linear, activation: str) -> None:
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = functional.gated_linear(x, self.gate_proj.weight, self.up_proj.weight,
                                         activation=self.activation)
        out: torch.Tensor = self.down_proj(hidden)
        return out

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class SharedProduct:
    """What a layer's fused query, key and value projections share: the fused weight
    (and bias), of which each part's parameters are views, and the last input's fused
    output, kept as one tuple ``(input, its version, output)`` (one reference, replaced
    whole: a part reads it once)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None,
                 bounds: list[tuple[int, int]]) -> None:
        self.weight, self.bias, self.bounds = weight, bias, bounds
        self.kept: tuple[torch.Tensor, int, torch.Tensor] | None = None


class FusedProjection(Linear):
    """One of an attention layer's query, key and value projections whose parameters are
    views of one fused matrix (``fuse_qkv``): the query projection computes all three
    products as one GEMM, and the key and value projections, called next on the same
    input, return their columns of it. The parameters keep their names, so the layer's
    state_dict is the original's. Any other call computes its own product: a gradient
    wanted, tracing, a different input, or parameters no longer views of the fused
    matrix (after ``.to()``; fuse after moving the model)."""

    _fused: SharedProduct  # set by fuse_qkv
    _index: int  # which of the parts: 0 (the query projection), 1 or 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused = self._fused
        if not self._shares(fused, x):
            return super().forward(x)
        start, stop = fused.bounds[self._index]
        if self._index == 0:
            out = functional.linear(x, fused.weight, fused.bias)
            fused.kept = (x, version_of(x), out)
            return out[..., start:stop]
        kept = fused.kept
        if kept is None or kept[0] is not x or kept[1] != version_of(x):
            return super().forward(x)
        if self._index == len(fused.bounds) - 1:
            fused.kept = None  # (the last part: nothing left to serve)
        return kept[2][..., start:stop]

    def _shares(self, fused: SharedProduct, x: torch.Tensor) -> bool:
        if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (
                x.requires_grad or self.weight.requires_grad)):
            return False
        start = fused.bounds[self._index][0]
        offset = start * fused.weight.stride(0) * fused.weight.element_size()
        return self.weight.data_ptr() == fused.weight.data_ptr() + offset \
            and self.weight.dtype == fused.weight.dtype and x.device == fused.weight.device


def version_of(x: torch.Tensor) -> int:
    """``x``'s version counter (in-place writes advance it); -1 for a tensor made under
    inference mode, which has none."""
    return -1 if x.is_inference() else x._version


class ResidualLinear(Linear):
    """A ``croqtile.nn.Linear`` whose next call adds a residual in its GEMM's epilogue
    (``croqtile.nn.functional.linear(..., residual=)``): ``add_to_next(r)`` makes the next
    forward return ``linear(x) + r``, after which it is a plain linear layer again. A
    decoder layer's rewrite (``croqtile.nn.blocks.fuse_residuals``) gives an attention's
    output projection and an MLP's down projection the layer's residual this way, as they
    are called inside the attention's and the MLP's own forward."""

    _residual: torch.Tensor | None = None  # (the residual of the next call, if any)

    def add_to_next(self, residual: torch.Tensor | None) -> None:
        """Add ``residual`` to the output of the next call (None: add nothing)."""
        self._residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual, self._residual = self._residual, None
        return functional.linear(x, self.weight, self.bias, activation=self.activation,
                                 residual=residual)


