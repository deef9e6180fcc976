"""Hugging Face ``transformers`` integration: ``register()`` adds croqtile's attention to
the library's attention-function registry, so that a model loaded or built with
``attn_implementation="croqtile"`` runs its attention through
``croqtile.nn.functional.scaled_dot_product_attention``; in transformers 5 it also adds
``experts_implementation="croqtile"`` to the experts registry, running the experts of MoE
models (Mixtral, Qwen2-MoE, Qwen3-MoE and the other families with 3-D expert weights)
through ``croqtile.nn.moe`` (``experts_forward``).

``transformers`` is an optional dependency: importing this module does not import it;
``register()`` does, and says so when it is missing.

The attention function follows the library's own ``sdpa`` integration (the contract its
models call): queries, keys and values arrive as [batch, heads, length, head_dim], the
output leaves as [batch, length, heads, head_dim] with no attention weights; grouped
keys and values (fewer key/value heads) are passed with ``enable_gqa``; a causal layer
without a mask uses the kernel's causal mode. The masks are built by the library's
``sdpa`` mask function (None where causal alone says it, boolean otherwise), which the
croqtile function takes as torch's does.

``fuse_activations(model)`` moves the activation of the library's gated MLPs (Llama,
Mistral, Qwen and others compute ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``) into
``gate_proj``'s GEMM epilogue: one element-wise pass over the widest activation fewer per
layer. ``fuse_mlps(model)`` goes further: the gate and up projections become one GEMM
whose epilogue applies the activation and the product (``GatedMLP``), so neither
projection's output reaches memory. ``fuse_qkv(model)`` makes each attention layer's
query, key and value projections one GEMM (``FusedProjection``). ``convert_norms(model)``
replaces the library's RMS normalisation layers (``LlamaRMSNorm`` and its kin, a pass
over the activations per step in eager torch) by ``croqtile.nn.RMSNorm``, one kernel.
The modules these rewrites put in place are those of ``croqtile.nn.fused``.

``fuse_residuals(model)`` (``croqtile.nn.blocks``, which rewrites whole decoder layers)
adds each decoder layer's two residual connections in the epilogues of the attention's
output projection and the MLP's down projection; ``fold_norms(model)`` then folds each
layer's RMS norms into the fused projections after them (inference).
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from typing import Any, Callable

import torch

from . import functional
from .blocks import fold_norms as fold_norms
from .blocks import fuse_residuals as fuse_residuals
from .fused import FusedProjection as FusedProjection
from .fused import GatedMLP as GatedMLP
from .fused import SharedProduct, same_output
from .kernels import GATED_ACTIVATIONS as GATED
from .modules import Linear, RMSNorm
from .moe import moe_experts

NAME = "croqtile"

# The activations the linear kernel fuses, tried in this order against a module's own
ACTIVATIONS = ("silu", "gelu_tanh", "gelu", "relu")
# inputs on which an activation module is compared with them (float64)
_PROBE_RANGE = (-8.0, 8.0, 161)


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
    """Make ``attn_implementation="croqtile"`` (and, in transformers 5,
    ``experts_implementation="croqtile"``) available to ``transformers`` models
    (idempotent)."""
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as error:
        raise ImportError("croqtile.nn.transformers.register() needs the optional "
                          "dependency 'transformers' (pip install transformers)") from error
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, causal_or_sdpa_mask(sdpa_mask))
    try:  # (the experts registry: transformers 5)
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return
    ALL_EXPERTS_FUNCTIONS.register(NAME, experts_forward)


# the activation each experts module's act_fn computes (None: none of GATED's), found once
_EXPERT_ACTIVATIONS: weakref.WeakKeyDictionary[torch.nn.Module, str | None] = \
    weakref.WeakKeyDictionary()


def experts_forward(module: torch.nn.Module, hidden_states: torch.Tensor,
                    top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
    """The experts of one MoE layer of a ``transformers`` model (the experts registry's
    signature: ``experts_implementation="croqtile"``), through ``croqtile.nn.moe``'s
    kernels: for experts with a gate, concatenated [E, 2I, H] gate/up and [E, H, I] down
    weights without biases, no norm after each expert, an activation the kernel fuses and
    no expert parallelism (Mixtral, Qwen2-MoE, Qwen3-MoE and most others). Other experts
    run the library's ``grouped_mm`` implementation."""
    act = getattr(module, "act_fn", None)
    activation = _expert_activation(act) if isinstance(act, torch.nn.Module) else None
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    # (the layout flags of the registry's experts classes; versions before a flag existed
    # had only its default layout, and the weights' shapes are checked besides)
    plain = (getattr(module, "has_gate", True) and not getattr(module, "has_bias", False)
             and getattr(module, "is_concatenated", True)
             and not getattr(module, "is_transposed", False)
             and not getattr(module, "has_post_expert_norm", False)
             and not getattr(module, "_is_expert_parallel", False)
             and getattr(module, "gate_up_proj_bias", None) is None
             and getattr(module, "down_proj_bias", None) is None)
    if (activation is None or not plain or not isinstance(gate_up, torch.Tensor)
            or not isinstance(down, torch.Tensor)
            or not _standard_shapes(gate_up, down, hidden_states.shape[-1])):
        from transformers.integrations.moe import grouped_mm_experts_forward
        library: torch.Tensor = grouped_mm_experts_forward(module, hidden_states, top_k_index,
                                                           top_k_weights)
        return library
    return moe_experts(hidden_states, top_k_index, top_k_weights, gate_up, down,
                       activation=activation)


def _standard_shapes(gate_up: torch.Tensor, down: torch.Tensor, hidden: int) -> bool:
    """Whether the experts' weights are gate/up [E, 2I, H] and down [E, H, I]."""
    if gate_up.dim() != 3 or down.dim() != 3 or gate_up.shape[1] % 2:
        return False
    experts, double, width = gate_up.shape
    return width == hidden and tuple(down.shape) == (experts, hidden, double // 2)


def _expert_activation(act: torch.nn.Module) -> str | None:
    """The name (of GATED) of the activation an experts module's ``act_fn`` computes."""
    if act not in _EXPERT_ACTIVATIONS:
        name = activation_of(act)
        _EXPERT_ACTIVATIONS[act] = name if name in GATED else None
    return _EXPERT_ACTIVATIONS[act]


def causal_or_sdpa_mask(sdpa_mask: Callable[..., Any]) -> Callable[..., Any]:
    """The mask function of ``attn_implementation="croqtile"``: the library's ``sdpa``
    one, except where the mask is plain causal attention of queries over exactly their
    own keys (a prefill with nothing cached: no padding, no local window, the library's
    causal mask function, keys as many as queries, no offset), where it is None and the
    attention runs croqtile's causal kernel. Some versions of the library skip that mask
    only outside tracing, so that under ``torch.compile`` every prefill would otherwise
    run a materialised mask through the masked kernel (five times slower at 2,048
    tokens)."""
    from transformers.masking_utils import causal_mask_function

    signature = inspect.signature(sdpa_mask)

    def mask(*args: Any, **kwargs: Any) -> Any:
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError:  # (another version's arguments: the library's mask)
            return sdpa_mask(*args, **kwargs)
        queries = given.get("q_length")
        if queries is None and isinstance(given.get("cache_position"), torch.Tensor):
            queries = given["cache_position"].shape[0]
        offsets = (given.get("q_offset", 0), given.get("kv_offset", 0))
        plain = (given.get("attention_mask") is None and given.get("local_size") is None
                 and given.get("mask_function", causal_mask_function) is causal_mask_function
                 and given.get("allow_is_causal_skip", True) is True
                 and all(type(o) is int and o == 0 for o in offsets)
                 and type(queries) is int and queries == given.get("kv_length"))
        return None if plain else sdpa_mask(*args, **kwargs)

    return mask


def activation_of(module: torch.nn.Module) -> str | None:
    """The name (of ``ACTIVATIONS``) of the activation ``module`` computes, found by
    comparing it with each on a range of inputs; None when it is none of them."""
    probe = torch.linspace(*_PROBE_RANGE, dtype=torch.float64)
    try:
        with torch.no_grad():
            got = module(probe)
    except Exception:  # (a module that takes no CPU float64 tensor: not recognised)
        return None
    if not isinstance(got, torch.Tensor) or got.shape != probe.shape:
        return None
    for name in ACTIVATIONS:
        if torch.allclose(got, functional.reference_activation(name)(probe), rtol=1e-9,
                          atol=1e-12):
            return name
    return None


# a gated MLP's gate, up and down projections and its activation (_gated_parts)
GatedParts = tuple[torch.nn.Linear, torch.nn.Linear, torch.nn.Linear, str]


def _gated_parts(module: torch.nn.Module) -> GatedParts | None:
    """``(gate_proj, up_proj, down_proj, activation)`` of a gated MLP whose ``act_fn``
    computes one of ``ACTIVATIONS`` and whose ``gate_proj`` has none of its own; None for
    other modules."""
    gate, up, down = (getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj"))
    act = getattr(module, "act_fn", None)
    if not (isinstance(gate, torch.nn.Linear) and isinstance(up, torch.nn.Linear)
            and isinstance(down, torch.nn.Linear)):
        return None
    if type(gate) not in (torch.nn.Linear, Linear) or getattr(gate, "activation", None):
        return None
    name = activation_of(act) if isinstance(act, torch.nn.Module) else None
    return None if name is None else (gate, up, down, name)


def _probe(linear: torch.nn.Linear) -> torch.Tensor:
    """A small random input of ``linear``'s width, device and dtype."""
    return _random_like(linear.in_features, linear.weight)


def _random_like(width: int, like: torch.Tensor) -> torch.Tensor:
    """A small random input ``[2, width]`` on ``like``'s device, of its dtype."""
    return torch.randn((2, width), generator=torch.Generator().manual_seed(0),
                       dtype=torch.float32).to(device=like.device, dtype=like.dtype)


def _bias(linear: torch.nn.Linear) -> torch.Tensor | None:
    """A linear layer's bias (torch's type information says it is always there; a layer
    made with ``bias=False`` has None)."""
    bias: torch.Tensor | None = linear.bias
    return bias


def fuse_activations(model: torch.nn.Module) -> int:
    """Fuse the activation of every gated MLP of ``model`` into its ``gate_proj`` (in
    place; returns how many were fused). A module qualifies when it has linear
    ``gate_proj``, ``up_proj`` and ``down_proj`` and an ``act_fn`` computing one of
    ``ACTIVATIONS``: ``gate_proj`` becomes a ``croqtile.nn.Linear`` with that activation
    (the same parameters) and ``act_fn`` an identity. The module's output on a small
    random input is compared before and after, and a module whose output changes (its
    forward is not ``act_fn(gate_proj(x))`` times ``up_proj(x)``) is restored."""
    fused = 0
    for module in list(model.modules()):
        found = _gated_parts(module)
        if found is None:
            continue
        gate, _, _, name = found
        act, probe = module.act_fn, _probe(gate)
        with torch.no_grad():
            before = module(probe)
            module.gate_proj, module.act_fn = Linear.of(gate, activation=name), \
                torch.nn.Identity()
            if not same_output(before, module(probe)):
                module.gate_proj, module.act_fn = gate, act
                continue
        fused += 1
    return fused


def fuse_mlps(model: torch.nn.Module) -> int:
    """Replace every gated MLP of ``model`` (as ``fuse_activations`` finds them, with an
    activation of ``croqtile.nn.kernels.GATED_ACTIVATIONS`` and no gate or up bias) by a
    ``GatedMLP`` holding its projections: the gate and up products are one GEMM with
    the activation and the product in its epilogue. In place; returns how many were
    replaced. Each replacement's output on a small random input is compared with the
    original's, which stays where they differ."""
    fused = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            found = _gated_parts(child)
            if found is None or found[3] not in GATED:
                continue
            gate, up, down, name = found
            if _bias(gate) is not None or _bias(up) is not None:
                continue
            mlp = GatedMLP(gate, up, down, name)
            fused += _swap_if_same(parent, child_name, mlp, _probe(gate))
    return fused


def _swap_if_same(parent: torch.nn.Module, name: str, new: torch.nn.Module,
                  probe: torch.Tensor) -> bool:
    """Put ``new`` in the place of ``parent``'s child ``name`` when it gives the child's
    output on ``probe``; whether it did (not when the child does not take the probe)."""
    with torch.no_grad():
        try:
            before = getattr(parent, name)(probe)
        except Exception:  # (a module that needs other inputs: not recognised)
            return False
        if not isinstance(before, torch.Tensor) or not same_output(before, new(probe)):
            return False
    setattr(parent, name, new)
    return True


def _qkv_parts(module: torch.nn.Module) -> list[torch.nn.Linear] | None:
    """``[q_proj, k_proj, v_proj]`` of an attention layer whose three projections are
    linear layers without activations, over the same input width, dtype and device, all
    with a bias or none; None for other modules."""
    found = [getattr(module, name, None) for name in ("q_proj", "k_proj", "v_proj")]
    parts = [p for p in found if isinstance(p, torch.nn.Linear) and type(p) in (torch.nn.Linear,
                                                                               Linear)]
    if len(parts) != len(found):
        return None
    first = parts[0]
    same = all(p.in_features == first.in_features and p.weight.dtype == first.weight.dtype
               and p.weight.device == first.weight.device
               and (p.bias is None) == (first.bias is None)
               and getattr(p, "activation", None) is None for p in parts)
    return parts if same else None


def fuse_qkv(model: torch.nn.Module) -> int:
    """Make the query, key and value projections of every attention layer of ``model``
    one GEMM (``FusedProjection``): one launch instead of three, and one wider product
    (the key and value projections of grouped-query attention are narrow). The three
    weights (and biases) are copied into one matrix whose rows the parts' parameters
    then view: no memory is added, and the state_dict keeps its keys. In place; returns
    how many layers were fused. Each part's output on a small random input is compared
    with the original projection's, which stays where they differ."""
    fused_layers = 0
    for module in list(model.modules()):
        parts = _qkv_parts(module)
        if parts is None:
            continue
        probe = _probe(parts[0])
        with torch.no_grad():
            before = [p(probe) for p in parts]
            weight = torch.cat([p.weight.detach() for p in parts])
            biases = [_bias(p) for p in parts]
            bias = torch.cat([b.detach() for b in biases if b is not None]) \
                if biases[0] is not None else None
        ends = torch.tensor([p.out_features for p in parts]).cumsum(0).tolist()
        bounds = [(end - p.out_features, end) for p, end in zip(parts, ends)]
        shared = SharedProduct(weight, bias, bounds)
        new = []
        for index, (part, (start, stop)) in enumerate(zip(parts, bounds)):
            fused = FusedProjection.of(part)
            fused.weight = torch.nn.Parameter(weight[start:stop],
                                              requires_grad=part.weight.requires_grad)
            if bias is not None:
                fused.bias = torch.nn.Parameter(bias[start:stop],
                                                requires_grad=part.bias.requires_grad)
            fused.share(shared, index)
            new.append(fused)
        with torch.no_grad():
            after = [p(probe) for p in new]
        if not all(same_output(b, a) for b, a in zip(before, after)):
            continue
        module.q_proj, module.k_proj, module.v_proj = new
        fused_layers += 1
    return fused_layers


def _norm_parts(module: torch.nn.Module) -> tuple[torch.nn.Parameter, float] | None:
    """``(weight, eps)`` of what looks like a library RMS normalisation layer: a module
    whose class name ends in ``RMSNorm`` (not torch's own, which ``croqtile.nn.convert``
    takes), with a one-dimensional ``weight`` and an ``eps`` or ``variance_epsilon``;
    None for other modules. What it computes is checked by the caller."""
    if isinstance(module, torch.nn.RMSNorm) or not type(module).__name__.endswith("RMSNorm"):
        return None
    weight = getattr(module, "weight", None)
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    if not isinstance(weight, torch.nn.Parameter) or weight.dim() != 1 \
            or isinstance(eps, bool) or not isinstance(eps, (int, float)):
        return None
    return weight, float(eps)


def convert_norms(model: torch.nn.Module) -> int:
    """Replace every RMS normalisation layer of ``model`` that computes
    ``x / sqrt(mean(x^2) + eps) * weight`` over its last dimension (Llama's, Mistral's,
    Qwen's: ``LlamaRMSNorm`` and its kin) by a ``croqtile.nn.RMSNorm`` holding the same
    weight: one kernel where eager torch makes a pass per step (a cast, the square, the
    mean, the reciprocal root, two products). In place; returns how many were replaced.
    Each replacement's output on a small random input is compared with the original's,
    which stays where they differ (Gemma's, for one, scales by ``1 + weight``)."""
    converted = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            found = _norm_parts(child)
            if found is None:
                continue
            weight, eps = found
            norm = RMSNorm.with_weight(weight, tuple(weight.shape), eps,
                                       training=child.training)
            converted += _swap_if_same(parent, child_name, norm,
                                       _random_like(weight.shape[0], weight))
    return converted


# the rotary forward of each attention layer class (``_rotary_code``), None for a class
# without one
_ROTARY_CODES: dict[type, types.FunctionType | None] = {}


def _rotary_code(layer_class: type) -> types.FunctionType | None:
    """The forward of an attention layer class whose code applies the library's
    module-level ``apply_rotary_pos_emb`` (Llama's, Mistral's, Qwen's...), with that name
    bound to ``_rotary`` of it: the same code, croqtile's rotary kernel. None for other
    classes. Made once per class."""
    if layer_class not in _ROTARY_CODES:
        _ROTARY_CODES[layer_class] = _rotary_rebuilt(layer_class)
    return _ROTARY_CODES[layer_class]


def _rotary_rebuilt(layer_class: type) -> types.FunctionType | None:
    """``_rotary_code``, made."""
    forward = getattr(layer_class, "forward", None)
    if forward is None:
        return None
    forward = inspect.unwrap(forward)
    if not isinstance(forward, types.FunctionType) \
            or "apply_rotary_pos_emb" not in forward.__code__.co_names:
        return None
    scope: dict[str, Any] = forward.__globals__
    original = scope.get("apply_rotary_pos_emb")
    if not callable(original):
        return None
    rebuilt = types.FunctionType(forward.__code__, {**scope, "apply_rotary_pos_emb":
                                                    _rotary(original)},
                                 forward.__name__, forward.__defaults__, forward.__closure__)
    rebuilt.__kwdefaults__ = forward.__kwdefaults__
    return rebuilt


def rotary_forward(layer: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The forward ``fuse_rotary`` gives an attention layer, as a ``functools.partial``
    of this function and the layer (so that a pickled model loads with it)."""
    # (a dictionary's entry, which torch.compile reads as a constant)
    code = _ROTARY_CODES.get(type(layer))
    if code is None:  # (a model loaded in another process)
        code = _rotary_code(type(layer))
    assert code is not None  # (fuse_rotary gives it to layers whose class has one)
    return code(layer, *args, **kwargs)


def _rotary(original: Callable[..., Any]) -> Callable[..., Any]:
    """``apply_rotary_pos_emb`` through ``croqtile.nn.functional.rotary_embedding`` where
    the kernel takes the call (the library's own function otherwise: other arguments, a
    partial rotary dimension...)."""

    def apply(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              *rest: Any, **named: Any) -> Any:
        if rest or any(key != "unsqueeze_dim" or value != 1 for key, value in named.items()) \
                or functional.uncovered_rotary(q, k, cos, sin) is not None:
            return original(q, k, cos, sin, *rest, **named)
        return functional.rotary_embedding(q, k, cos, sin)

    return apply


def _model_output(model: torch.nn.Module) -> torch.Tensor | None:
    """The output (logits, or the last hidden state) of a language model on a few random
    tokens, without a cache; None for a model that takes no token ids."""
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    parameter = next(model.parameters(), None)
    if not isinstance(vocab, int) or parameter is None:
        return None
    ids = torch.randint(0, vocab, (1, 12), generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            out = model(input_ids=ids.to(parameter.device), use_cache=False)
    except Exception:  # (not a model of token ids)
        return None
    found = getattr(out, "logits", None)
    found = getattr(out, "last_hidden_state", None) if found is None else found
    return found if isinstance(found, torch.Tensor) else None


def _same_logits(before: torch.Tensor, after: torch.Tensor | None) -> bool:
    return after is not None and after.shape == before.shape and same_output(before, after)


def fuse_rotary(model: torch.nn.Module) -> int:
    """Run the rotary position embedding of every attention layer of ``model`` that
    applies the library's ``apply_rotary_pos_emb`` (Llama, Mistral, Qwen and others)
    through croqtile's kernel (``croqtile.nn.functional.rotary_embedding``): one kernel
    for the queries and one for the keys where eager torch makes about six passes over
    each (the halves' copies, the negation, the concatenation, two products, the sum).
    The layers keep their class and parameters: their forward runs the library's own
    code with that one function bound to croqtile's. The model's output on a few random
    tokens is compared before and after, and every layer is restored when it differs (a
    family whose ``apply_rotary_pos_emb`` is another rotation); a model that takes no
    token ids is left as it is. In place; returns how many layers changed."""
    before = _model_output(model)
    if before is None:
        return 0
    changed = []
    for module in model.modules():
        if hasattr(module, "q_proj") and hasattr(module, "k_proj") \
                and _rotary_code(type(module)) is not None and "forward" not in vars(module):
            module.forward = functools.partial(rotary_forward, module)
            changed.append(module)
    if changed and not _same_logits(before, _model_output(model)):
        for module in changed:
            del module.forward
        return 0
    return len(changed)


# The rewrites of ``optimize`` by name, in the order it applies them (a later one finds
# the modules an earlier one made: fuse_qkv takes croqtile.nn.Linear projections; the
# decoder-layer rewrites come last, over the fused modules)
REWRITES: dict[str, Callable[[torch.nn.Module], int]] = {
    "fuse_mlps": fuse_mlps, "fuse_qkv": fuse_qkv, "convert_norms": convert_norms,
    "fuse_rotary": fuse_rotary, "fuse_residuals": fuse_residuals}


def set_experts(model: torch.nn.Module) -> int:
    """``experts_implementation="croqtile"`` for a ``transformers`` 5 mixture-of-experts
    model (``register()`` first): the number of its experts modules (those with 3-D
    ``gate_up_proj`` weights), 0 for a model without any, which is left as it is."""
    experts = sum(1 for m in model.modules()
                  if isinstance(getattr(m, "gate_up_proj", None), torch.Tensor)
                  and getattr(m, "gate_up_proj").dim() == 3)
    setter = getattr(model, "set_experts_implementation", None)
    if not experts or setter is None:
        return 0
    register()
    setter(NAME)
    return experts


def optimize(model: torch.nn.Module) -> dict[str, int]:
    """Every croqtile rewrite of a ``transformers`` model, in place: attention through
    croqtile's kernel (``register()`` and ``attn_implementation="croqtile"``), a mixture
    of experts' experts through ``croqtile.nn.moe`` (``set_experts``), its
    ``torch.nn.Linear`` layers converted (``croqtile.nn.convert``), then each of
    ``REWRITES`` (gated MLPs, query/key/value projections, RMS norms, the decoder layers'
    residual connections, the norms folded into the projections after them). Each
    rewrite checks the output of what it replaced, as its own documentation says.
    Returns how many modules each rewrite changed, by name (``"linear"`` for the
    conversion, ``"experts"`` for the experts modules)."""
    from .modules import convert

    register()
    set_attention = getattr(model, "set_attn_implementation", None)
    if set_attention is not None:
        set_attention(NAME)
    else:
        # (versions of transformers before set_attn_implementation read the config)
        config = getattr(model, "config", None)
        if hasattr(config, "_attn_implementation"):
            setattr(config, "_attn_implementation", NAME)
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    convert(model)
    counts = {"linear": linears, "experts": set_experts(model)}
    for name, rewrite in REWRITES.items():
        counts[name] = rewrite(model)
    return counts
