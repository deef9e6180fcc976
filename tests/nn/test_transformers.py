"""``attn_implementation="croqtile"`` in a Hugging Face ``transformers`` model (an optional
dependency: these tests are skipped without it). A Llama model built from a config
(random weights, nothing downloaded), with its linear layers converted to croqtile's and
its attention through croqtile's kernel, gives the eager model's logits."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn
from croqtile.nn import transformers as integration

from .ops import croqtile_ops

transformers = pytest.importorskip("transformers")


def _llama(dtype: torch.dtype, device: str, layers: int = 2, hidden: int = 128,
           heads: int = 2, kv_heads: int = 1, head_dim: int = 64, intermediate: int = 256,
           vocab: int = 96) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=intermediate, num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=head_dim, num_hidden_layers=layers,
        vocab_size=vocab, max_position_embeddings=4096, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def _croqtile_copy(model: torch.nn.Module) -> torch.nn.Module:
    integration.register()
    ours = copy.deepcopy(model)
    ours.set_attn_implementation(integration.NAME)
    return croqtile.nn.convert(ours)


def _relative(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _against(model: torch.nn.Module, ours: torch.nn.Module, seed: int) -> tuple[float, list]:
    """The relative error of ``ours``'s logits to ``model``'s on random tokens, and the
    croqtile operators ``ours`` ran."""
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    return _relative(out.logits, ref), ran


def test_register_is_idempotent_and_the_name_is_accepted() -> None:
    integration.register()
    integration.register()
    model = _llama(torch.float32, "cpu", layers=1)
    model.set_attn_implementation(integration.NAME)
    assert model.config._attn_implementation == integration.NAME


def test_llama_logits_match_eager_on_cpu() -> None:
    """Prefill of two sequences, one padded on the left (a boolean mask reaches the
    kernel), and the causal case without padding."""
    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    assert any(isinstance(m, croqtile.nn.Linear) for m in ours.modules())
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 96, (2, 24), generator=gen)
    padded = torch.ones_like(ids)
    padded[1, :5] = 0
    with torch.no_grad():
        for mask in (None, padded):
            ref = model(ids, attention_mask=mask).logits
            out, ran = croqtile_ops(ours, ids, attention_mask=mask)
            got = out.logits
            # every layer's attention and its seven linear layers ran Croqtile kernels
            assert sum("attention" in op for op in ran) == 2, ran
            assert sum("linear" in op for op in ran) >= 2 * 7, ran
            assert torch.isfinite(got).all()
            keep = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
            assert _relative(got[keep], ref[keep]) < 1e-4


def test_llama_decode_steps_match_eager_on_cpu() -> None:
    """A prefill, then tokens one at a time through the key/value cache (one query row
    against a longer key sequence)."""
    model = _llama(torch.float32, "cpu", layers=1)
    ours = _croqtile_copy(model)
    ids = torch.randint(0, 96, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=4, do_sample=False)
        got = ours.generate(ids, max_new_tokens=4, do_sample=False)
    assert torch.equal(got, ref)


def test_fused_mlp_activations_keep_the_logits() -> None:
    """fuse_activations moves every layer's SiLU into its gate projection's GEMM."""
    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    assert integration.fuse_activations(ours) == 2  # one MLP a layer
    error, ran = _against(model, ours, 3)
    assert sum("_silu_" in op for op in ran) == 2, ran
    assert error < 1e-4


def test_fused_mlps_keep_the_logits() -> None:
    """fuse_mlps makes each layer's gate and up projections one GEMM (GatedMLP)."""
    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    keys = list(ours.state_dict())
    assert integration.fuse_mlps(ours) == 2
    assert list(ours.state_dict()) == keys
    assert sum(isinstance(m, integration.GatedMLP) for m in ours.modules()) == 2
    error, ran = _against(model, ours, 4)
    assert sum(op.startswith("croqtile.gated_") for op in ran) == 2, ran
    assert error < 1e-4


def test_an_unsupported_feature_is_named() -> None:
    module = torch.nn.Module()
    q = torch.randn(1, 2, 4, 64)
    with pytest.raises(ValueError, match="softcap"):
        integration.attention_forward(module, q, q, q, None, softcap=30.0)


@pytest.mark.gpu
def test_llama_logits_match_eager_on_the_gpu_in_bf16() -> None:
    model = _llama(torch.bfloat16, "cuda", layers=2, hidden=1024, heads=8, kv_heads=2,
                   head_dim=128, intermediate=2048, vocab=1024)
    ours = _croqtile_copy(model)
    ids = torch.randint(0, 1024, (2, 256), device="cuda")
    with torch.no_grad():
        ref = model(ids).logits
        got = ours(ids).logits
        compiled = torch.compile(ours)(ids).logits
        assert integration.fuse_activations(ours) == 2
        fused = ours(ids).logits
        mlps = _croqtile_copy(model)
        assert integration.fuse_mlps(mlps) == 2
        gated = mlps(ids).logits
        assert integration.fuse_qkv(mlps) == 2
        qkv = mlps(ids).logits
        assert integration.convert_norms(mlps) == 2 * 2 + 1
        normed = mlps(ids).logits
        normed_compiled = torch.compile(mlps)(ids).logits
    assert _relative(got, ref) < 2e-2
    assert _relative(compiled, ref) < 2e-2
    assert _relative(fused, ref) < 2e-2
    assert _relative(gated, ref) < 2e-2
    assert _relative(qkv, ref) < 2e-2
    assert _relative(normed, ref) < 2e-2
    assert _relative(normed_compiled, ref) < 2e-2


def test_fused_qkv_keeps_the_logits_and_the_state_dict() -> None:
    """fuse_qkv: each layer's q, k and v projections as one GEMM, their parameters views
    of the fused matrix (no memory added, the same state_dict keys and values)."""
    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    state = {k: v.clone() for k, v in ours.state_dict().items()}
    assert integration.fuse_qkv(ours) == 2
    assert list(ours.state_dict()) == list(state)
    assert all(torch.equal(v, state[k]) for k, v in ours.state_dict().items())
    layer = ours.model.layers[0].self_attn
    assert isinstance(layer.k_proj, integration.FusedProjection)
    assert layer.k_proj.weight.untyped_storage().data_ptr() == \
        layer.q_proj.weight.untyped_storage().data_ptr()
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    # per layer: one q/k/v GEMM, o, gate, up, down (7 before); and the lm_head
    assert sum(op.startswith("croqtile.linear_") for op in ran) == 2 * 5 + 1, ran
    assert _relative(out.logits, ref) < 1e-4
    # a loaded state_dict reaches the fused matrix (the parameters are its views)
    ours.load_state_dict(copy.deepcopy(model).state_dict())
    with torch.no_grad():
        assert _relative(ours(ids).logits, ref) < 1e-4


def test_fused_qkv_stays_one_gemm_under_torch_compile() -> None:
    """Traced, the query projection computes the fused product and the key and value
    projections take their columns of it, as in eager mode: one graph, one q/k/v GEMM a
    layer (the check that the parameters still view the fused matrix is read once, when
    the layer is traced)."""
    from torch._dynamo.utils import counters

    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    assert integration.fuse_qkv(ours) == 2
    graphs: list[list[str]] = []

    def backend(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        graphs.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        return gm

    torch._dynamo.reset()
    counters.clear()
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = torch.compile(ours, backend=backend)(ids).logits
        ref = model(ids).logits
    assert len(graphs) == 1 and not counters["graph_break"], dict(counters["graph_break"])
    # per layer: one q/k/v GEMM, o, gate, up, down; and the lm_head
    assert sum(op.startswith("croqtile.linear_") for op in graphs[0]) == 2 * 5 + 1, graphs
    assert _relative(out, ref) < 1e-4


def test_fused_projections_fall_back_where_they_must() -> None:
    """With a gradient wanted each part computes its own product (gradients reach each
    part's parameters); after ``.to()`` the parameters are no longer views of the fused
    matrix and each part computes its own; a key projection called on another input
    than the query's computes its own."""
    model = _llama(torch.float32, "cpu", layers=1)
    ours = _croqtile_copy(model)
    assert integration.fuse_qkv(ours) == 1
    attn, ref_attn = ours.model.layers[0].self_attn, model.model.layers[0].self_attn
    x = torch.randn(3, 128, generator=torch.Generator().manual_seed(6))
    y = torch.randn(3, 128, generator=torch.Generator().manual_seed(7))
    out = sum(p(x).sum() for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    out.backward()
    ref = sum(p(x).sum() for p in (ref_attn.q_proj, ref_attn.k_proj, ref_attn.v_proj))
    ref.backward()
    for mine, theirs in ((attn.k_proj, ref_attn.k_proj), (attn.v_proj, ref_attn.v_proj)):
        assert _relative(mine.weight.grad, theirs.weight.grad) < 1e-5
    with torch.no_grad():
        attn.q_proj(x)
        assert _relative(attn.k_proj(y), ref_attn.k_proj(y)) < 1e-5  # (another input)
        ours.to(torch.float64)
        x64 = x.double()
        for mine, theirs in ((attn.q_proj, ref_attn.q_proj), (attn.k_proj, ref_attn.k_proj)):
            assert _relative(mine(x64), copy.deepcopy(theirs).double()(x64)) < 1e-5
    with torch.inference_mode():  # (inference tensors have no version counter)
        ours2 = _croqtile_copy(model)
        integration.fuse_qkv(ours2)
        a2 = ours2.model.layers[0].self_attn
        assert integration.fuse_qkv(ours2) == 0  # (already fused)
        xi = x.clone()  # (an inference tensor)
        q = a2.q_proj(xi)
        assert a2.q_proj._fused.kept is not None  # (the fused product, kept for k and v)
        k, v = a2.k_proj(xi), a2.v_proj(xi)
        assert a2.q_proj._fused.kept is None  # (served and dropped)
        assert _relative(k, ref_attn.k_proj(x)) < 1e-5 and q.shape[-1] == 128
        assert _relative(v, ref_attn.v_proj(x)) < 1e-5


def _varied_norms(model: torch.nn.Module) -> None:
    """Give every one-dimensional parameter (the norms' weights, all ones when built)
    values of its own, so that a weight that is not applied shows."""
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) + 0.5)


def test_converted_norms_keep_the_logits_and_the_weights() -> None:
    """convert_norms: each layer's two RMS norms and the final one become
    croqtile.nn.RMSNorm holding the same weight tensors."""
    model = _llama(torch.float32, "cpu")
    _varied_norms(model)
    ours = _croqtile_copy(model)
    weights = {name: p for name, p in ours.named_parameters()}
    assert integration.convert_norms(ours) == 2 * 2 + 1
    assert integration.convert_norms(ours) == 0  # (nothing left to convert)
    assert {name: p for name, p in ours.named_parameters()} == weights  # the same tensors
    assert sum(isinstance(m, croqtile.nn.RMSNorm) for m in ours.modules()) == 5
    error, ran = _against(model, ours, 6)
    assert sum(op.startswith("croqtile.rms_norm_") for op in ran) == 5, ran
    assert error < 1e-4


class OffsetRMSNorm(torch.nn.Module):
    """An RMS norm scaling by ``1 + weight`` (Gemma's form): not what the kernel computes."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(width))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), None, self.eps) * (1 + self.weight)


class TokensRMSNorm(OffsetRMSNorm):
    """A norm that takes only [B, L, D] inputs: the two-dimensional probe fails."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return F.rms_norm(x, (width,), self.weight, self.eps)


def test_norms_computing_something_else_are_kept() -> None:
    model = torch.nn.Sequential(OffsetRMSNorm(16), TokensRMSNorm(16), torch.nn.Linear(16, 4))
    assert integration.convert_norms(model) == 0
    assert isinstance(model[0], OffsetRMSNorm) and isinstance(model[1], TokensRMSNorm)


@pytest.mark.parametrize("family, converted", [("Qwen3", 2 * 4 + 1), ("Gemma", 0)])
def test_norms_of_other_families(family: str, converted: int) -> None:
    """Qwen3 also normalises each head's queries and keys (RMS norms over the head
    dimension of [B, L, H, D]): all converted. Gemma scales by ``1 + weight``: none."""
    model_class = getattr(transformers, f"{family}ForCausalLM", None)
    if model_class is None:
        pytest.skip(f"transformers {transformers.__version__} has no {family} model")
    config = getattr(transformers, f"{family}Config")(
        hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, num_hidden_layers=2, vocab_size=96, max_position_embeddings=512)
    torch.manual_seed(0)
    model = model_class(config).eval()
    _varied_norms(model)
    ours = copy.deepcopy(model)
    assert integration.convert_norms(ours) == converted
    error, ran = _against(model, ours, 8)
    assert sum(op.startswith("croqtile.rms_norm_") for op in ran) == converted, ran
    assert error < 1e-5
