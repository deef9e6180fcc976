"""The modules that croqtile's rewrites of a model put in place of its own
(``croqtile.nn.transformers``, ``croqtile.nn.blocks``), and what they share: a gated MLP
as one GEMM (``GatedMLP``), query, key and value projections as one (``FusedProjection``),
a projection that adds a residual in its GEMM's epilogue (``ResidualLinear``), an RMS norm
folded into the projections after it (``NormFold``), and the comparison by which a
rewrite checks that a replacement computes what it replaced (``same_output``)."""

from __future__ import annotations

from typing import Any

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


class NormFold:
    """An RMS norm (``x / rms(x) * w``) folded into the projections after it:
    ``norm(x) @ W.T`` is ``rstd[:, None] * (x @ (W * w).T)``, ``rstd`` each row's
    reciprocal RMS (``functional.rms_rstd``), so the normalised activations never reach
    memory. ``pending`` is ``(x, rstd)`` while the projections' owner runs on the
    un-normalised ``x``: a projection that holds this fold and gets that very ``x``
    computes from the folded weight with ``rstd`` as its GEMM's row scale. The folded
    weights are made on first use, kept (memory as large as the weights folded), and made
    anew when a weight or the norm's weight changes (in place, moved or replaced). For
    inference: the decoder layer sets ``pending`` only when no gradient is wanted and
    torch.compile is not tracing (``croqtile.nn.blocks.fold_norms``)."""

    def __init__(self, norm_weight: torch.Tensor) -> None:
        self.norm_weight = norm_weight
        self.pending: tuple[torch.Tensor, torch.Tensor] | None = None
        self._folded: dict[str, tuple[tuple[Any, ...], torch.Tensor]] = {}

    def scale_for(self, x: torch.Tensor) -> torch.Tensor | None:
        """The row scale of ``x`` when it is the pending un-normalised input, else None."""
        pending = self.pending
        return pending[1] if pending is not None and pending[0] is x else None

    def folded(self, key: str, weight: torch.Tensor) -> torch.Tensor:
        """``weight * norm_weight`` (columns scaled), kept under ``key`` until either
        changes."""
        stamp = (_stamp(weight), _stamp(self.norm_weight))
        made = self._folded.get(key)
        if made is None or made[0] != stamp:
            with torch.no_grad():
                wide = torch.float64 if weight.dtype == torch.float64 else torch.float32
                product = weight.to(wide) * self.norm_weight.to(device=weight.device, dtype=wide)
                made = self._folded[key] = (stamp, product.to(weight.dtype))
        return made[1]

    def __getstate__(self) -> dict[str, Any]:
        # (a copy of a model remakes its own folded weights, from its own parameters)
        return {**vars(self), "pending": None, "_folded": {}}


def _stamp(t: torch.Tensor) -> tuple[Any, ...]:
    """What changes when ``t``'s values may have: its storage, version, type and place."""
    return (t.data_ptr(), version_of(t), t.dtype, t.device, tuple(t.shape))


class GatedMLP(torch.nn.Module):
    """A gated MLP, ``down_proj(act(gate_proj(x)) * up_proj(x))``, whose first half is one
    GEMM (``croqtile.nn.functional.gated_linear``). It holds the original module's three
    projections under their names, so its state_dict is the original's. With a ``fold``
    (``NormFold``, set by ``croqtile.nn.blocks.fold_norms``), its pending input is taken
    un-normalised, the norm folded into the gate and up weights."""

    fold: NormFold | None = None

    def __init__(self, gate_proj: torch.nn.Linear, up_proj: torch.nn.Linear,
                 down_proj: torch.nn.Linear, activation: str) -> None:
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = gate_proj, up_proj, down_proj
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_proj.weight, self.up_proj.weight
        fold = self.fold
        rstd = None if fold is None else fold.scale_for(x)
        if fold is None or rstd is None:
            hidden = functional.gated_linear(x, gate, up, activation=self.activation)
        else:
            hidden = functional.gated_linear(x, fold.folded("gate", gate), fold.folded("up", up),
                                             activation=self.activation, row_scale=rstd)
        out: torch.Tensor = self.down_proj(hidden)
        return out

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


class SharedProduct:
    """What a layer's fused query, key and value projections share: the fused weight
    (and bias), of which each part's parameters are views, the norm folded into them if
    any (``NormFold``), and the last input's fused output, kept as one tuple ``(input,
    its version, its row scale, output)`` (one reference, replaced whole: a part reads it
    once)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None,
                 bounds: list[tuple[int, int]]) -> None:
        self.weight, self.bias, self.bounds = weight, bias, bounds
        self.fold: NormFold | None = None
        self.kept: tuple[torch.Tensor, int, torch.Tensor | None, torch.Tensor] | None = None


class FusedProjection(Linear):
    """One of an attention layer's query, key and value projections whose parameters are
    views of one fused matrix (``fuse_qkv``): the query projection computes all three
    products as one GEMM, and the key and value projections, called next on the same
    input, return their columns of it. The parameters keep their names, so the layer's
    state_dict is the original's. Any other call computes its own product: a gradient
    wanted, tracing, a different input, or parameters no longer views of the fused
    matrix (after ``.to()``; fuse after moving the model). With a fold (``NormFold``, in
    the shared product), the pending un-normalised input is taken with the norm folded
    into the weights, whichever way the product is computed."""

    _fused: SharedProduct  # set by fuse_qkv (share)
    _index: int  # which of the parts: 0 (the query projection), 1 or 2
    _views: bool  # whether the parameters are views of the fused matrix (views_fused)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused = self._fused
        rstd = None if fused.fold is None else fused.fold.scale_for(x)
        if not self._shares(fused, x):
            return self._own(x, rstd)
        start, stop = fused.bounds[self._index]
        if self._index == 0:
            weight = fused.weight if fused.fold is None or rstd is None \
                else fused.fold.folded("fused", fused.weight)
            out = functional.linear(x, weight, fused.bias, row_scale=rstd)
            fused.kept = (x, version_of(x), rstd, out)
            return out[..., start:stop]
        kept = fused.kept
        if kept is None or kept[0] is not x or kept[1] != version_of(x) or kept[2] is not rstd:
            return self._own(x, rstd)
        if self._index == len(fused.bounds) - 1:
            fused.kept = None  # (the last part: nothing left to serve)
        return kept[3][..., start:stop]

    def _own(self, x: torch.Tensor, rstd: torch.Tensor | None) -> torch.Tensor:
        """This part's own product (of the folded weight for the fold's pending input)."""
        fold = self._fused.fold
        if fold is None or rstd is None:
            return super().forward(x)
        return functional.linear(x, fold.folded(f"part {self._index}", self.weight), self.bias,
                                 row_scale=rstd)

    def _shares(self, fused: SharedProduct, x: torch.Tensor) -> bool:
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return False
        return self._views and x.device == fused.weight.device

    def share(self, fused: SharedProduct, index: int) -> None:
        """Make this layer part ``index`` of ``fused`` (its parameters already views of
        the fused matrix's rows)."""
        self._fused, self._index = fused, index
        self._views = views_fused(self)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:
        # (.to(), .cuda(), .half() give the parameters new tensors: no longer views of
        # the fused matrix, which stays where it was)
        result = super()._apply(fn, recurse)
        self._views = views_fused(self)
        return result


def views_fused(part: FusedProjection) -> bool:
    """Whether ``part``'s weight is still its rows of the fused matrix. Kept by the layer
    as a flag, updated when the parameters move (``_apply``): a forward reads no pointers,
    which torch.compile could not trace."""
    fused = part._fused
    start = fused.bounds[part._index][0]
    offset = start * fused.weight.stride(0) * fused.weight.element_size()
    return part.weight.data_ptr() == fused.weight.data_ptr() + offset \
        and part.weight.dtype == fused.weight.dtype


def version_of(x: torch.Tensor) -> int:
    """``x``'s version counter (in-place writes advance it); -1 for a tensor made under
    inference mode, which has none, and while tracing (a traced graph is functional: the
    parts' calls on one input in one graph see the same values)."""
    if torch.compiler.is_compiling():
        return -1
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


