"""Rotary position embedding (``croqtile.nn.functional.rotary_embedding``, rotary.co)
against the float64 reference of the library's formula, with gradients; and
``croqtile.nn.transformers.fuse_rotary``, which runs a model's ``apply_rotary_pos_emb``
through it: the logits and greedy tokens stay eager's, a rotation of another form is
left alone, and the layers trace under torch.compile without a graph break."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import croqtile.nn.functional as cf
from croqtile.nn import transformers as integration

from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def _positions(batches: int, length: int, dim: int, dtype: torch.dtype
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [batches, length, dim] as the library makes them (halves repeated),
    positions offset per batch."""
    pos = torch.arange(length)[None].float() + 7 * torch.arange(batches)[:, None]
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    emb = torch.cat([pos[..., None] * inv] * 2, -1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x, cos, sin = x.double(), cos.double(), sin.double()
    half = x.shape[-1] // 2
    return x * cos.unsqueeze(1) + torch.cat((-x[..., half:], x[..., :half]), -1) * \
        sin.unsqueeze(1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("dim, cos_batches", [(32, 1), (64, 2)])
def test_rotary_matches_the_reference_with_gradients(dtype: torch.dtype, dim: int,
                                                     cos_batches: int) -> None:
    # q and k as a model makes them ([B, L, H, D] viewed as [B, H, L, D]), grouped keys,
    # a length that is not a multiple of the block
    q = random((2, 37, 4, dim), dtype).transpose(1, 2).requires_grad_()
    k = random((2, 37, 2, dim), dtype).transpose(1, 2).requires_grad_()
    cos, sin = _positions(cos_batches, 37, dim, dtype)
    cos, sin = cos.expand(2, 37, dim) if cos_batches == 1 else cos, \
        sin.expand(2, 37, dim) if cos_batches == 1 else sin
    cos, sin = cos[:cos_batches], sin[:cos_batches]
    q_out, k_out = cf.rotary_embedding(q, k, cos, sin)
    assert_close(q_out, _reference(q, cos, sin), dtype)
    assert_close(k_out, _reference(k, cos, sin), dtype)
    dq_out, dk_out = random(tuple(q_out.shape), dtype), random(tuple(k_out.shape), dtype)
    (q_out * dq_out).sum().backward()
    (k_out * dk_out).sum().backward()
    q64, k64 = (t.detach().double().requires_grad_() for t in (q, k))
    (_reference(q64, cos, sin) * dq_out.double()).sum().backward()
    (_reference(k64, cos, sin) * dk_out.double()).sum().backward()
    assert q.grad is not None and k.grad is not None
    assert q64.grad is not None and k64.grad is not None
    assert_close(q.grad, q64.grad, dtype)
    assert_close(k.grad, k64.grad, dtype)


def test_warm_calls_run_plans_and_other_forms_fall_back() -> None:
    q = random((1, 20, 4, 32), torch.float32).transpose(1, 2)
    k = random((1, 20, 2, 32), torch.float32).transpose(1, 2)
    cos, sin = _positions(1, 20, 32, torch.float32)
    with torch.no_grad():
        hits = cf._ROTARY_PLANS.info().hits
        for _ in range(3):
            q_out, _ = cf.rotary_embedding(q, k, cos, sin)
            assert_close(q_out, _reference(q, cos, sin), torch.float32)
        assert cf._ROTARY_PLANS.info().hits == hits + 4
        # a head dimension the kernel does not take runs torch's formula
        odd = random((1, 4, 20, 24), torch.float32)
        cos24, sin24 = _positions(1, 20, 24, torch.float32)
        assert cf.uncovered_rotary(odd, odd, cos24, sin24) is not None
        assert_close(cf.rotary_embedding(odd, odd, cos24, sin24)[0],
                     _reference(odd, cos24, sin24), torch.float32)


transformers = pytest.importorskip("transformers")


def _model(family: str) -> Any:
    config = getattr(transformers, f"{family}Config")(
        hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, num_hidden_layers=2, vocab_size=96, max_position_embeddings=512)
    torch.manual_seed(0)
    return getattr(transformers, f"{family}ForCausalLM")(config).eval()


def _check_rotary_logits(model: Any, ours: Any, ids: torch.Tensor) -> None:
    """``ours`` (a copy of the 2-layer ``model`` with fused rotary) runs croqtile's rotary
    kernel for the queries and keys of each layer and gives ``model``'s logits."""
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum(op.startswith("croqtile.rotary_") for op in ran) == 2 * 2, ran
    assert_close(out.logits, ref.double(), torch.float32)


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_fused_rotary_keeps_the_logits_and_the_tokens(family: str) -> None:
    model = _model(family)
    ours = copy.deepcopy(model)
    assert integration.fuse_rotary(ours) == 2
    ids = torch.randint(0, 96, (2, 24), generator=torch.Generator().manual_seed(3))
    _check_rotary_logits(model, ours, ids)
    assert torch.equal(model.generate(ids, max_new_tokens=5, do_sample=False),
                       ours.generate(ids, max_new_tokens=5, do_sample=False))
    assert ours.state_dict().keys() == model.state_dict().keys()
    # (a copy's layers run their own forwards, fused)
    _check_rotary_logits(model, copy.deepcopy(ours), ids)


def test_another_rotation_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose rotation is not the kernel's (here: the kernel made wrong) gives other
    logits after the rewrite: every layer is restored."""
    model = _model("Llama")

    def swapped(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return q * cos.unsqueeze(1), k * cos.unsqueeze(1)

    monkeypatch.setattr(cf, "rotary_embedding", swapped)
    assert integration.fuse_rotary(model) == 0
    assert all("forward" not in vars(m) for m in model.modules())


def test_every_rewrite_traces_without_graph_breaks() -> None:
    """``optimize`` (every rewrite, the rotary one included): the model traces as one
    graph, and eager calls' launch plans do not get in the way."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    from torch._dynamo.utils import counters

    model = _model("Llama")
    ours = copy.deepcopy(model)
    assert integration.optimize(ours)["fuse_rotary"] == 2
    ids = torch.randint(0, 96, (1, 24), generator=torch.Generator().manual_seed(4))
    torch._dynamo.reset()
    counters.clear()
    backend = AotEagerAndRecordGraphs()
    with torch.no_grad():
        out = torch.compile(ours, backend=backend)(ids).logits
        ref = model(ids).logits
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert_close(out, ref.double(), torch.float32)
    # a prefill's plain causal mask is not materialised while tracing: the attention is
    # croqtile's causal kernel, not its masked one
    code = "\n".join(graph.code for graph in backend.fw_graphs)
    assert "attention_f32" in code and "_mask_" not in code


def test_a_plain_causal_prefill_needs_no_mask() -> None:
    """croqtile's mask function is None for a prefill of plain causal attention (also
    where the library's own would materialise a mask, as some versions do while
    tracing), and the library's mask for anything else: padding, a cache before the
    queries, a local window."""
    import inspect

    from transformers.masking_utils import sdpa_mask

    calls = []

    def materialising(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(kwargs)
        return torch.ones(1, dtype=torch.bool)

    materialising.__signature__ = inspect.signature(sdpa_mask)  # type: ignore[attr-defined]  # (the library's arguments)
    mask = integration.causal_or_sdpa_mask(materialising)
    names = inspect.signature(sdpa_mask).parameters
    queries = {"q_length": 8} if "q_length" in names else {"cache_position": torch.arange(8)}
    assert mask(batch_size=1, kv_length=8, **queries) is None
    assert calls == []
    padded = torch.ones(1, 8, dtype=torch.bool)
    for other in ({"kv_length": 12}, {"kv_length": 8, "attention_mask": padded},
                  {"kv_length": 8, "local_size": 4}):
        assert mask(batch_size=1, **queries, **other) is not None
    assert len(calls) == 3


def test_an_optimized_model_pickles_whole() -> None:
    """``torch.save`` of the whole model after every rewrite, and ``torch.load``: the
    rewritten forwards (partials of module-level functions) come back, fused."""
    import io

    model = _model("Llama")
    ours = copy.deepcopy(model)
    counts = integration.optimize(ours)
    assert counts["fuse_rotary"] == 2 and counts["fuse_residuals"] == 2
    saved = io.BytesIO()
    torch.save(ours, saved)
    saved.seek(0)
    loaded = torch.load(saved, weights_only=False)
    assert all("forward" in vars(layer) and "forward" in vars(layer.self_attn)
               for layer in loaded.model.layers)
    ids = torch.randint(0, 96, (1, 16), generator=torch.Generator().manual_seed(5))
    _check_rotary_logits(model, loaded, ids)
