"""croqtile.nn.blocks: rewrites of whole decoder layers. ``fuse_residuals`` adds a
layer's two residual connections in the epilogues of its attention's output projection and
its MLP's down projection; ``fold_norms`` folds its RMS norms into the fused projections
after them (each row's reciprocal RMS as the GEMM's row scale). Tiny Llama and Qwen2
models (Qwen2's q/k/v projections have a bias) built from configs (random weights, nothing
downloaded) give the same logits, greedy tokens and gradients after the rewrites, and
compile without a graph break; toy layers of other forms are restored, or called as an
older ``transformers`` calls them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn
from croqtile.nn import blocks
from croqtile.nn import transformers as integration
from croqtile.nn.fused import ResidualLinear

from .ops import croqtile_ops

transformers = pytest.importorskip("transformers")

VOCAB = 96


def _model(family: str, dtype: torch.dtype = torch.float32, layers: int = 2) -> Any:
    """A tiny ``family`` model (grouped-query attention, head dimension 64) in eval mode,
    its norms' weights varied (all ones when built: a weight not applied would not
    show)."""
    config = getattr(transformers, f"{family}Config")(
        hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, num_hidden_layers=layers, vocab_size=VOCAB,
        max_position_embeddings=512, attn_implementation="eager")
    torch.manual_seed(0)
    model = getattr(transformers, f"{family}ForCausalLM")(config).to(dtype).eval()
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) + 0.5)
    return model


def _croqtile(model: Any) -> Any:
    """A copy of ``model`` with croqtile's attention and linear layers."""
    integration.register()
    ours = copy.deepcopy(model)
    ours.set_attn_implementation(integration.NAME)
    return croqtile.nn.convert(ours)


def _ids(seed: int, length: int = 24) -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))


def _relative(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_fused_residuals_keep_the_logits_and_the_greedy_tokens(family: str) -> None:
    model = _model(family)
    ours = _croqtile(model)
    keys = list(ours.state_dict())
    assert blocks.fuse_residuals(ours) == 2
    assert blocks.fuse_residuals(ours) == 0  # (already rewritten)
    assert list(ours.state_dict()) == keys  # checkpoints load either way
    layer = ours.model.layers[0]
    assert type(layer).__name__ == f"{family}DecoderLayer"  # (its class kept)
    assert isinstance(layer.self_attn.o_proj, ResidualLinear)
    assert isinstance(layer.mlp.down_proj, ResidualLinear)
    ids = _ids(1)
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum("_residual_" in op for op in ran) == 2 * 2, ran
    assert _relative(out.logits, ref) < 1e-4
    with torch.no_grad():
        prompt = ids[:1, :12]
        want = model.generate(prompt, max_new_tokens=4, do_sample=False)
        assert torch.equal(ours.generate(prompt, max_new_tokens=4, do_sample=False), want)


def test_fused_residuals_in_bf16() -> None:
    model = _model("Llama", torch.bfloat16)
    ours = _croqtile(model)
    assert blocks.fuse_residuals(ours) == 2
    ids = _ids(2)
    with torch.no_grad():
        assert _relative(ours(ids).logits, model(ids).logits) < 2e-2


def test_optimize_applies_every_rewrite() -> None:
    model = _model("Qwen2")
    ours = copy.deepcopy(model)
    counts = integration.optimize(ours)
    assert counts == {"linear": 2 * 7 + 1, "experts": 0, "fuse_mlps": 2, "fuse_qkv": 2,
                      "convert_norms": 2 * 2 + 1, "fuse_rotary": 2, "fuse_residuals": 2}
    ids = _ids(3)
    with torch.no_grad():
        assert _relative(ours(ids).logits, model(ids).logits) < 1e-4


def test_training_through_fused_residuals_gives_the_gradients() -> None:
    """The residual epilogue has autograd: a training step's gradients are the original
    model's (the fused layers stay fused with gradients wanted)."""
    model = _model("Llama")
    ours = _croqtile(model)
    assert blocks.fuse_residuals(ours) == 2
    ids, labels = _ids(4), _ids(5)
    grads = []
    for m in (model, ours):
        m.train()
        logits = m(ids).logits
        F.cross_entropy(logits.flatten(0, 1), labels.flatten()).backward()
        grads.append({name: p.grad for name, p in m.named_parameters()})
    assert grads[0].keys() == grads[1].keys()
    for name, want in grads[0].items():
        assert _relative(grads[1][name], want) < 1e-4, name


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd:UserWarning")
def test_fused_layers_compile_without_a_graph_break() -> None:
    from torch._dynamo.utils import counters

    model = _model("Llama")
    ours = _croqtile(model)
    assert blocks.fuse_residuals(ours) == 2
    torch._dynamo.reset()
    counters.clear()
    ids = _ids(6)
    with torch.no_grad():
        out = torch.compile(ours, backend="aot_eager")(ids).logits
        ref = model(ids).logits
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert _relative(out, ref) < 1e-4


def _folded(family: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """A tiny model and its copy with every rewrite (``optimize``), then its norms folded
    (``fold_norms``: not one of ``optimize``'s, for the memory of its copies)."""
    model = _model(family, dtype)
    ours = copy.deepcopy(model)
    integration.optimize(ours)
    assert integration.fold_norms(ours) == 2
    return model, ours


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_folded_norms_keep_the_logits_and_the_greedy_tokens(family: str) -> None:
    """Per layer: one light pass for each norm's row statistics, the q/k/v and gate/up
    GEMMs scaling their rows by them; only the final norm (before the LM head) runs."""
    model, ours = _folded(family)
    layer = ours.model.layers[0]
    assert layer.mlp.fold is not None and layer.self_attn.q_proj._fused.fold is not None
    ids = _ids(10)
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum(op.startswith("croqtile.rms_norm_rstd_") for op in ran) == 2 * 2, ran
    assert sum(op.startswith("croqtile.rms_norm_") for op in ran) == 2 * 2 + 1, ran
    assert sum("_rowscale_" in op for op in ran) == 2 * 2, ran
    assert _relative(out.logits, ref) < 1e-4
    with torch.no_grad():
        prompt = ids[1:, :10]
        want = model.generate(prompt, max_new_tokens=4, do_sample=False)
        assert torch.equal(ours.generate(prompt, max_new_tokens=4, do_sample=False), want)


def test_folded_norms_in_bf16() -> None:
    model, ours = _folded("Qwen2", torch.bfloat16)
    ids = _ids(11)
    with torch.no_grad():
        out, ran = croqtile_ops(ours, ids)
        assert _relative(out.logits, model(ids).logits) < 2e-2
    assert sum("_rowscale_" in op for op in ran) == 2 * 2, ran


def test_folded_norms_run_as_before_with_gradients_and_follow_new_weights() -> None:
    """With a gradient wanted the norms run (no row-scale kernel), and the gradients are
    the original model's; weights loaded later reach the folded copies."""
    model, ours = _folded("Llama")
    ids, labels = _ids(12), _ids(13)
    logits, ran = croqtile_ops(ours, ids)
    assert not any("_rowscale_" in op for op in ran), ran
    F.cross_entropy(logits.logits.flatten(0, 1), labels.flatten()).backward()
    F.cross_entropy(model(ids).logits.flatten(0, 1), labels.flatten()).backward()
    mine = dict(ours.named_parameters())
    for name, p in model.named_parameters():
        assert _relative(mine[name].grad, p.grad) < 1e-4, name
    with torch.no_grad():
        ours(ids)  # (the folded copies made)
        for p in model.parameters():
            p.mul_(1.1) if p.dim() == 1 else p.add_(0.01)
        ours.load_state_dict(model.state_dict())
        assert _relative(ours(ids).logits, model(ids).logits) < 1e-4


def test_folded_layers_compile_without_a_graph_break() -> None:
    """Under torch.compile the norms run (tracing sees no folded path)."""
    from torch._dynamo.utils import counters

    model, ours = _folded("Llama")
    torch._dynamo.reset()
    counters.clear()
    ids = _ids(14)
    with torch.no_grad():
        out = torch.compile(ours, backend="eager")(ids).logits
        ref = model(ids).logits
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert _relative(out, ref) < 1e-4


def test_a_copy_of_a_folded_model_folds_its_own_weights() -> None:
    model, ours = _folded("Llama")
    ids = _ids(15)
    with torch.no_grad():
        ours(ids)
        fold = ours.model.layers[0].mlp.fold
        assert fold._folded  # (made on first use)
        twin = copy.deepcopy(ours)
        copied = twin.model.layers[0].mlp.fold
        assert copied is not fold and not copied._folded
        assert copied.norm_weight is twin.model.layers[0].post_attention_layernorm.weight
        assert _relative(twin(ids).logits, model(ids).logits) < 1e-4


# ---------------------------------------------------------------- toy layers of other forms


class ToyAttention(torch.nn.Module):
    """An "attention" whose output is a projection of its input (returns it and None, as
    the library's attention layers return their output and weights)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.v_proj = torch.nn.Linear(width, width, bias=False)
        self.o_proj = torch.nn.Linear(width, width, bias=False)
        self.fail = False

    def forward(self, hidden_states: torch.Tensor, attention_mask: Any = None,
                **kwargs: Any) -> tuple[torch.Tensor, None]:
        if self.fail:
            raise RuntimeError("toy failure")
        return self.o_proj(torch.tanh(self.v_proj(hidden_states))), None


class ToyMLP(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up_proj = torch.nn.Linear(width, 2 * width)
        self.down_proj = torch.nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.up_proj(x)))


class ToyLayer(torch.nn.Module):
    """A decoder layer with the Llama family's children. ``form``: "llama" (a tensor
    out), "tuple" (as ``transformers`` before 4.54: positional arguments, a tuple out, the
    attention weights with ``output_attentions``) or "parallel" (attention and MLP both on
    the layer's input: not the form the rewrite takes)."""

    def __init__(self, width: int, form: str) -> None:
        super().__init__()
        self.input_layernorm = torch.nn.RMSNorm(width)
        self.self_attn = ToyAttention(width)
        self.post_attention_layernorm = torch.nn.RMSNorm(width)
        self.mlp = ToyMLP(width)
        self.form = form

    def forward(self, hidden_states: torch.Tensor, attention_mask: Any = None,
                output_attentions: bool = False, **kwargs: Any) -> Any:
        residual = hidden_states
        attended, weights = self.self_attn(self.input_layernorm(hidden_states),
                                           attention_mask=attention_mask)
        if self.form == "parallel":
            return residual + attended + self.mlp(self.post_attention_layernorm(residual))
        hidden_states = residual + attended
        hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        if self.form == "tuple":
            return (hidden_states, weights) if output_attentions else (hidden_states,)
        return hidden_states


class ToyModel(torch.nn.Module):
    """Token ids in, hidden states out, through ``ToyLayer``s (called positionally when
    ``positional``)."""

    def __init__(self, forms: list[str], width: int = 48, positional: bool = False) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, width)
        self.layers = torch.nn.ModuleList(ToyLayer(width, form) for form in forms)
        self.positional = positional

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embed

    def forward(self, input_ids: torch.Tensor, use_cache: bool = False) -> torch.Tensor:
        hidden = self.embed(input_ids)
        for layer in self.layers:
            out = layer(hidden, None, False) if self.positional else layer(hidden)
            hidden = out[0] if isinstance(out, tuple) else out
        return hidden


def test_a_layer_of_another_form_is_restored() -> None:
    torch.manual_seed(0)
    model = ToyModel(["llama", "parallel", "llama"])
    reference = copy.deepcopy(model)
    parallel = model.layers[1]
    o_proj = parallel.self_attn.o_proj
    assert blocks.fuse_residuals(model) == 2
    assert "forward" not in vars(parallel) and parallel.self_attn.o_proj is o_proj
    assert isinstance(model.layers[2].mlp.down_proj, ResidualLinear)
    ids = _ids(8)
    with torch.no_grad():
        assert _relative(model(ids), reference(ids)) < 1e-5


def test_an_older_layer_form_is_called_and_answered_as_it_was() -> None:
    """Positional arguments bound by name, a tuple returned, with the attention weights
    when they are asked for; a failure inside the attention leaves no residual pending."""
    torch.manual_seed(0)
    model = ToyModel(["tuple", "tuple"], positional=True)
    reference = copy.deepcopy(model)
    assert blocks.fuse_residuals(model) == 2
    ids = _ids(9)
    with torch.no_grad():
        assert _relative(model(ids), reference(ids)) < 1e-5
        layer, hidden = model.layers[0], model.embed(ids)
        out = layer(hidden, None, True)
        assert isinstance(out, tuple) and len(out) == 2 and out[1] is None
        assert _relative(out[0], reference.layers[0](hidden)[0]) < 1e-5
        layer.self_attn.fail = True
        with pytest.raises(RuntimeError, match="toy failure"):
            layer(hidden)
        assert layer.self_attn.o_proj._residual is None


def test_what_is_not_a_model_of_token_ids_is_left_alone() -> None:
    layer = ToyLayer(48, "llama")
    assert blocks.fuse_residuals(torch.nn.Sequential(layer)) == 0
    assert "forward" not in vars(layer) and not isinstance(layer.mlp.down_proj, ResidualLinear)
