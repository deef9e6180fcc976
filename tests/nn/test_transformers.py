"""``attn_implementation="croqtile"`` in a Hugging Face ``transformers`` model (an optional
dependency: these tests are skipped without it). A Llama model built from a config
(random weights, nothing downloaded), with its linear layers converted to croqtile's and
its attention through croqtile's kernel, gives the eager model's logits."""

from __future__ import annotations

import copy

import pytest
import torch

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
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum("_silu_" in op for op in ran) == 2, ran
    assert _relative(out.logits, ref) < 1e-4


def test_fused_mlps_keep_the_logits() -> None:
    """fuse_mlps makes each layer's gate and up projections one GEMM (GatedMLP)."""
    model = _llama(torch.float32, "cpu")
    ours = _croqtile_copy(model)
    keys = list(ours.state_dict())
    assert integration.fuse_mlps(ours) == 2
    assert list(ours.state_dict()) == keys
    assert sum(isinstance(m, integration.GatedMLP) for m in ours.modules()) == 2
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum(op.startswith("croqtile.gated_") for op in ran) == 2, ran
    assert _relative(out.logits, ref) < 1e-4


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
    assert _relative(got, ref) < 2e-2
    assert _relative(compiled, ref) < 2e-2
    assert _relative(fused, ref) < 2e-2
    assert _relative(gated, ref) < 2e-2
