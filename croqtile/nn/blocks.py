"""Rewrites of the decoder layers of a Hugging Face ``transformers`` model (Llama,
Mistral, Qwen2 and their kin): the element-wise work between a layer's GEMMs moves into
croqtile's kernels.

``fuse_residuals(model)``: a layer computes ``h = x + attention(input_layernorm(x))`` and
``h + mlp(post_attention_layernorm(h))``; after the rewrite the attention's output
projection adds ``x`` in its GEMM's epilogue and the MLP's down projection adds ``h`` in
its own (``croqtile.nn.functional.linear(..., residual=)``), so neither residual
connection is a pass of its own.

``fold_norms(model)`` (inference; on layers ``fuse_residuals`` rewrote, after
``fuse_qkv``, ``fuse_mlps`` and ``convert_norms``): the RMS norm before the attention
folds into the fused query/key/value projection, and the one before the MLP into the
fused gate/up projection: ``rms_norm(x) * w @ W.T = rstd[:, None] * (x @ (W * w).T)``.
One light pass computes each row's ``rstd`` (``croqtile.nn.functional.rms_rstd``), the
GEMM multiplies its accumulator's rows by it (``linear(..., row_scale=)``), and the
normalised activations never reach memory. The folded weights are copies (``NormFold``).
With a gradient wanted or under ``torch.compile`` the layer runs the norms as before.

A layer qualifies when its children are exactly ``input_layernorm``, ``self_attn`` (with
a linear ``o_proj``), ``post_attention_layernorm`` and ``mlp`` (with a linear
``down_proj``). The rewritten layer keeps its class, submodules, parameters and
state_dict: its forward is replaced (an attribute of the instance) by one that calls the
layer's own submodules in the order the library's does, passing the attention every
argument the layer got, and returns what the original returns (a tensor, or the tuple of
older ``transformers`` versions). Each rewrite runs the model once on a small random input
(``use_cache=False``) to record every layer's arguments, then compares each rewritten
layer's output with the original's on them; a layer whose output differs is restored.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import functional
from .fused import FusedProjection, GatedMLP, NormFold, ResidualLinear, SharedProduct, same_output
from .modules import Linear

# the children of a Llama-family decoder layer, which a rewritten layer calls
LAYER_PARTS = frozenset({"input_layernorm", "self_attn", "post_attention_layernorm", "mlp"})
# the attribute of a rewritten layer that holds its ``LayerForm``
FORM = "croqtile_block"
# the random input on which a model runs to record its layers' arguments: (batch, tokens)
_PROBE_SHAPE = (2, 8)

# a rewrite of one module: given it and its output before, it makes the change and
# returns how to undo it, or None when the module does not qualify after all
Rewrite = Callable[[torch.nn.Module, Any], Callable[[], None] | None]


@dataclass
class LayerForm:
    """What a rewritten decoder layer's forward knows of the original: the names of its
    positional parameters (``hidden_states`` first), the forward it replaced (called
    where a part is no longer of the rewritten form), and whether it returns a tuple
    (``transformers`` before 4.54) rather than a tensor; and the norms folded into the
    attention's and the MLP's projections (``fold_norms``)."""

    positional: tuple[str, ...]
    original: Callable[..., Any]
    returns_tuple: bool
    attention_fold: NormFold | None = None
    mlp_fold: NormFold | None = None


def _plain_linear(module: Any) -> bool:
    """Whether ``module`` is a linear layer without an activation, of torch's or
    croqtile's plain classes (a subclass may have a forward of its own)."""
    return type(module) in (torch.nn.Linear, Linear, ResidualLinear) \
        and getattr(module, "activation", None) is None


def decoder_layer(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a Llama-family decoder layer (see the module's
    documentation) not rewritten yet."""
    if FORM in vars(module) or {name for name, _ in module.named_children()} != LAYER_PARTS:
        return False
    return _plain_linear(getattr(module.self_attn, "o_proj", None)) \
        and _plain_linear(getattr(module.mlp, "down_proj", None))


def _positional(forward: Callable[..., Any]) -> tuple[str, ...] | None:
    """The names of ``forward``'s positional parameters (None: it has none, or its
    signature cannot be read)."""
    try:
        parameters = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return None
    names = tuple(p.name for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return names or None


def _attention_outputs(rest: tuple[Any, ...], named: dict[str, Any]) -> tuple[Any, ...]:
    """What a tuple-returning layer (``transformers`` before 4.54) returns after the
    hidden states, from what its attention returned after its output: the attention
    weights with ``output_attentions``, the cache with ``use_cache`` (before 4.48)."""
    extra: tuple[Any, ...] = ()
    if named.get("output_attentions") and rest:
        extra += (rest[0],)
    if named.get("use_cache") and len(rest) > 1:
        extra += (rest[1],)
    return extra


def fused_layer_forward(layer: Any, *args: Any, **kwargs: Any) -> Any:
    """The forward of a decoder layer rewritten by ``fuse_residuals`` (bound to it): the
    layer's computation with each residual added in the epilogue of the projection that
    precedes it."""
    form: LayerForm = getattr(layer, FORM)
    attention, mlp = layer.self_attn, layer.mlp
    o_proj, down_proj = attention.o_proj, mlp.down_proj
    if not (isinstance(o_proj, ResidualLinear) and isinstance(down_proj, ResidualLinear)):
        return form.original(*args, **kwargs)  # (a part replaced since)
    named = dict(zip(form.positional, args))
    named.update(kwargs)
    hidden = named.pop(form.positional[0])
    o_proj.add_to_next(hidden)
    try:
        out = attention(hidden_states=_normalised(layer.input_layernorm, form.attention_fold,
                                                  hidden), **named)
    finally:  # (nothing left pending for a later call, whatever happened)
        o_proj.add_to_next(None)
        _unfold(form.attention_fold)
    hidden, rest = (out[0], tuple(out[1:])) if isinstance(out, tuple) else (out, ())
    down_proj.add_to_next(hidden)
    try:
        hidden = mlp(_normalised(layer.post_attention_layernorm, form.mlp_fold, hidden))
    finally:
        down_proj.add_to_next(None)
        _unfold(form.mlp_fold)
    return (hidden,) + _attention_outputs(rest, named) if form.returns_tuple else hidden


def _normalised(norm: Any, fold: NormFold | None, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)``; or, where the norm is folded into the projections after it and may be
    (no gradient wanted, not tracing, the norm's weight still the folded one), ``x``
    itself with its rows' reciprocal RMS pending for those projections."""
    if fold is None or torch.is_grad_enabled() or torch.compiler.is_compiling() \
            or getattr(norm, "weight", None) is not fold.norm_weight:
        normed: torch.Tensor = norm(x)
        return normed
    fold.pending = (x, functional.rms_rstd(x, norm.eps))
    return x


def _unfold(fold: NormFold | None) -> None:
    """End what ``_normalised`` began."""
    if fold is not None:
        fold.pending = None


def _fuse_layer(layer: torch.nn.Module, before: Any) -> Callable[[], None] | None:
    """``fuse_residuals``'s rewrite of one decoder layer (``Rewrite``)."""
    original = layer.forward
    positional = _positional(original)
    if positional is None:
        return None
    attention: Any = layer.self_attn  # (the library's modules, typed by what they hold)
    mlp: Any = layer.mlp
    o_proj, down_proj = attention.o_proj, mlp.down_proj
    replaced_forward = vars(layer).get("forward")  # (an instance's own forward, if any)
    setattr(layer, FORM, LayerForm(positional, original, isinstance(before, tuple)))
    attention.o_proj, mlp.down_proj = ResidualLinear.of(o_proj), ResidualLinear.of(down_proj)
    # (a partial of a module-level function, not a bound method: a pickled model loads
    # with it)
    setattr(layer, "forward", functools.partial(fused_layer_forward, layer))

    def undo() -> None:
        attention.o_proj, mlp.down_proj = o_proj, down_proj
        delattr(layer, FORM)
        delattr(layer, "forward")
        if replaced_forward is not None:
            setattr(layer, "forward", replaced_forward)

    return undo


def fuse_residuals(model: torch.nn.Module) -> int:
    """Add the residual connections of every Llama-family decoder layer of ``model`` in
    the epilogues of the GEMMs before them: the attention's output projection adds the
    layer's input, the MLP's down projection the attention block's output (both become
    ``croqtile.nn.fused.ResidualLinear`` holding the same parameters). In place; returns
    how many layers were rewritten. Works with gradients (the residual's is the output's)
    and under ``torch.compile`` (one registered operator, no graph break). ``model`` must
    run on token ids (a ``transformers`` model): it runs once on a small random input,
    and each layer whose output changes is restored (see the module's documentation)."""
    return rewrite_checked(model, [m for m in model.modules() if decoder_layer(m)],
                           _fuse_layer)


def _rms_norm(module: Any) -> bool:
    """Whether ``module`` is torch's (or croqtile's) RMS norm over the last dimension,
    with a weight: what ``NormFold`` folds."""
    if not isinstance(module, torch.nn.RMSNorm):
        return False
    weight: torch.Tensor | None = module.weight  # (None: made without one)
    return weight is not None and len(module.normalized_shape) == 1


def _qkv_product(attention: Any) -> SharedProduct | None:
    """The shared product of an attention's query, key and value projections made one
    GEMM by ``fuse_qkv`` (None: they are not, or a norm is folded in already)."""
    found = [getattr(attention, name, None) for name in ("q_proj", "k_proj", "v_proj")]
    parts = [p for p in found if isinstance(p, FusedProjection)]
    if len(parts) != len(found):
        return None
    shared = parts[0]._fused
    if shared.fold is not None or any(p._fused is not shared for p in parts):
        return None
    return shared


def _foldable(layer: torch.nn.Module) -> tuple[SharedProduct | None, GatedMLP | None]:
    """What of a layer rewritten by ``fuse_residuals`` a norm folds into: the attention's
    fused q/k/v projection after ``input_layernorm`` and the ``GatedMLP`` after
    ``post_attention_layernorm``, each where that norm is an RMS norm with a weight."""
    parts: Any = layer
    form = vars(layer).get(FORM)
    if not isinstance(form, LayerForm):
        return None, None
    shared = _qkv_product(parts.self_attn) if form.attention_fold is None \
        and _rms_norm(parts.input_layernorm) else None
    mlp = parts.mlp if form.mlp_fold is None and isinstance(parts.mlp, GatedMLP) \
        and parts.mlp.fold is None and _rms_norm(parts.post_attention_layernorm) else None
    return shared, mlp


def _fold_layer(layer: torch.nn.Module, before: Any) -> Callable[[], None] | None:
    """``fold_norms``'s rewrite of one decoder layer (``Rewrite``)."""
    parts: Any = layer
    form: LayerForm = getattr(layer, FORM)
    shared, mlp = _foldable(layer)
    if shared is None and mlp is None:
        return None
    if shared is not None:
        form.attention_fold = shared.fold = NormFold(parts.input_layernorm.weight)
    if mlp is not None:
        form.mlp_fold = mlp.fold = NormFold(parts.post_attention_layernorm.weight)

    def undo() -> None:
        form.attention_fold = form.mlp_fold = None
        if shared is not None:
            shared.fold = None
        if mlp is not None:
            mlp.fold = None

    return undo


def fold_norms(model: torch.nn.Module) -> int:
    """Fold the RMS norms of every decoder layer of ``model`` rewritten by
    ``fuse_residuals`` into the projections after them, for inference: the input norm
    into the query/key/value projection made one GEMM by ``fuse_qkv``, the
    post-attention norm into the ``GatedMLP`` of ``fuse_mlps`` (each where the norm is an
    RMS norm with a weight, as ``convert_norms`` makes them). In place; returns how many
    layers changed. Each folded projection keeps a copy of its weight times the norm's
    (made on first use: as much memory again as those weights); with a gradient wanted or
    under ``torch.compile`` the norms run as before. Checked as ``fuse_residuals`` is."""
    return rewrite_checked(model, [m for m in model.modules() if _foldable(m) != (None, None)],
                           _fold_layer)


def rewrite_checked(model: torch.nn.Module, modules: list[torch.nn.Module],
                    rewrite: Rewrite) -> int:
    """Apply ``rewrite`` to each of ``modules`` (submodules of ``model``), keeping it
    where the module's output on the arguments it got in a run of ``model`` on a small
    random input is the same after as before; returns how many were kept (none when
    ``model`` does not run on token ids)."""
    if not modules:
        return 0
    recorded = record_arguments(model, modules)
    kept = 0
    with torch.no_grad():
        for module in modules:
            if module not in recorded:
                continue
            args, kwargs = recorded[module]
            before = module(*args, **kwargs)
            undo = rewrite(module, before)
            if undo is None:
                continue
            try:
                after = module(*args, **kwargs)
            except Exception:  # (a form the rewrite does not take after all)
                after = None
            if after is not None and _same_outputs(before, after):
                kept += 1
            else:
                undo()
    return kept


def record_arguments(model: torch.nn.Module, modules: list[torch.nn.Module]
                     ) -> dict[torch.nn.Module, tuple[tuple[Any, ...], dict[str, Any]]]:
    """The arguments each of ``modules`` gets (its first call) when ``model`` runs, in
    evaluation mode and without a cache, on random token ids of its vocabulary; empty
    when ``model`` has no input embeddings or does not run."""
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    if not isinstance(embeddings, torch.nn.Embedding):
        return {}
    ids = torch.randint(0, embeddings.num_embeddings, _PROBE_SHAPE,
                        generator=torch.Generator().manual_seed(0))
    recorded: dict[torch.nn.Module, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    def record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        recorded.setdefault(module, (args, dict(kwargs)))

    hooks = [m.register_forward_pre_hook(record, with_kwargs=True) for m in modules]
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        with torch.no_grad():
            model(input_ids=ids.to(embeddings.weight.device), use_cache=False)
    except Exception:  # (not a model of token ids: nothing recorded)
        recorded.clear()
    finally:
        for hook in hooks:
            hook.remove()
        for module, training in modes.items():
            module.training = training
    return recorded


def _same_outputs(before: Any, after: Any) -> bool:
    """Whether a module's output after a rewrite is its output before: tensors equal up to
    rounding (``same_output``), tuples element by element, anything else identical."""
    if isinstance(before, torch.Tensor):
        return isinstance(after, torch.Tensor) and before.shape == after.shape \
            and same_output(before, after)
    if isinstance(before, tuple):
        return isinstance(after, tuple) and len(before) == len(after) \
            and all(_same_outputs(b, a) for b, a in zip(before, after))
    return before is after
