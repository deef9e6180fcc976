"""croqtile.nn.functional.fused_moe: a mixture-of-experts layer on the grouped GEMMs and the
combine of croqtile/kernels/moe.co, forward and backward against float64 torch, its
operators under ``opcheck``, and ``experts_implementation="croqtile"`` in tiny Qwen3-MoE
and Mixtral models (random weights, nothing downloaded)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import croqtile.nn.functional as cf
from croqtile.nn import moe, moe_ops

from ..e2e.checks import assert_close, poisoned_empty, random
from .ops import croqtile_ops

ACTS = {"silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu}


def reference(hidden: torch.Tensor, logits: torch.Tensor, gate_up: torch.Tensor,
              down: torch.Tensor, top_k: int, renormalize: bool = True,
              activation: str = "silu") -> torch.Tensor:
    """The layer in float64 torch, token by token (differentiable)."""
    weights, ids = torch.softmax(logits.double(), -1).topk(top_k, -1)
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return experts_reference(hidden, ids, weights, gate_up, down, activation)


def experts_reference(hidden: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
                      gate_up: torch.Tensor, down: torch.Tensor,
                      activation: str = "silu") -> torch.Tensor:
    """The experts ``ids`` [T, k] of each token summed with ``weights`` [T, k], in float64
    torch, token by token (differentiable)."""
    hidden, weights, gate_up, down = (t.double() for t in (hidden, weights, gate_up, down))
    half = gate_up.shape[1] // 2
    rows = []
    for t in range(hidden.shape[0]):
        total = torch.zeros(hidden.shape[1], dtype=torch.float64)
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            gu = gate_up[e] @ hidden[t]
            total = total + weights[t, j] * (down[e] @ (ACTS[activation](gu[:half]) * gu[half:]))
        rows.append(total)
    return torch.stack(rows)


def _layer(tokens: int, hidden: int, inter: int, experts: int,
           dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    router = torch.float64 if dtype == torch.float64 else torch.float32
    return (random((tokens, hidden), dtype), random((tokens, experts), router),
            random((experts, 2 * inter, hidden), dtype) / 6,
            random((experts, hidden, inter), dtype) / 4)


# (dtype, tokens, hidden, intermediate, experts, top_k, renormalize): tokens and widths
# past whole tiles (16-row, 32-column tiles on the CPU), one token, top-k 1, 2 and 8
CASES = [
    (torch.float32, 19, 40, 24, 6, 2, True),
    (torch.bfloat16, 19, 40, 24, 6, 2, False),
    (torch.float16, 5, 32, 40, 8, 8, True),
    (torch.float32, 1, 40, 24, 6, 1, False),
    (torch.float64, 7, 24, 16, 4, 2, True),
]


@pytest.mark.parametrize("dtype,tokens,hidden,inter,experts,top_k,renormalize", CASES)
def test_fused_moe(dtype: torch.dtype, tokens: int, hidden: int, inter: int, experts: int,
                   top_k: int, renormalize: bool) -> None:
    x, logits, gate_up, down = _layer(tokens, hidden, inter, experts, dtype)
    with poisoned_empty():
        out, ran = croqtile_ops(cf.fused_moe, x, logits, gate_up, down, top_k,
                                renormalize=renormalize)
    assert [op.split("_")[1] for op in ran] == ["gate", "down", "combine"]
    assert all(op.startswith("croqtile.moe_") for op in ran)
    assert out.shape == (tokens, hidden) and out.dtype == dtype
    assert_close(out, reference(x, logits, gate_up, down, top_k, renormalize), dtype)


def test_experts_without_tokens() -> None:
    """Experts no token chose (the first, two in the middle and the last) own no rows."""
    x, logits, gate_up, down = _layer(21, 40, 24, 8, torch.float32)
    logits[:, [0, 3, 4, 7]] = -30.0
    with poisoned_empty():
        out, ran = croqtile_ops(cf.fused_moe, x, logits, gate_up, down, 2)
    assert len(ran) == 3
    assert_close(out, reference(x, logits, gate_up, down, 2), torch.float32)


def _runs(counts: list[int]) -> torch.Tensor:
    ends = torch.tensor(counts).cumsum(0).to(torch.int32)
    return torch.stack((ends - torch.tensor(counts, dtype=torch.int32), ends), 1)


def test_tile_table() -> None:
    """Each expert's run cut into BM-row tiles in the order of the rows, the last one
    ragged; experts without rows get none; the entries past the last tile are unused."""
    table = moe_ops.tile_table(_runs([5, 0, 16, 17, 0, 32, 1]), 16, 71)
    assert table.dtype == torch.int32
    assert table.tolist() == [[0, 0, 5], [2, 5, 16], [3, 21, 16], [3, 37, 1], [5, 38, 16],
                              [5, 54, 16], [6, 70, 1]] + [[-1, 0, 0]] * 4
    # MT = S // BM + min(E, S) bounds the tiles: reached when every expert's run has a
    # part tile, and with fewer rows than experts
    assert moe_ops.tile_table(_runs([17, 1, 1]), 16, 19).tolist() == [
        [0, 0, 16], [0, 16, 1], [1, 17, 1], [2, 18, 1]]
    assert moe_ops.tile_table(_runs([0, 2, 0, 0, 0]), 16, 2).tolist() == [[1, 0, 2], [-1, 0, 0]]
    for counts in ([5, 0, 16, 17, 0, 32, 1], [17, 1, 1], [0, 0, 3]):
        table = moe_ops.tile_table(_runs(counts), 16, sum(counts))
        assert torch.equal(moe_ops.runs_of(table, len(counts)), _runs(counts))


@pytest.mark.parametrize("tokens,top_k,experts,block", [(1, 8, 128, 16), (52, 2, 7, 16),
                                                        (300, 4, 16, 16), (9, 2, 8, 64)])
def test_layout_kernel_is_the_torch_layout(tokens: int, top_k: int, experts: int,
                                           block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eager layout (a sort, then moe_layout.co writing the table and the positions
    into poisoned tensors) against the torch form that traced calls take: the same
    pairs, table and positions."""
    gen = torch.Generator().manual_seed(tokens)
    ids = torch.randint(0, experts, (tokens, top_k), generator=gen)
    ids[0] = torch.arange(top_k) % experts  # (an expert with a long run in the mix)
    with monkeypatch.context() as patched:  # (the kernel's path, not the torch form)
        patched.setattr(moe_ops, "tile_table", None)
        pairs, tiles, pos = moe_ops.layout(ids, experts, block)
    want_pairs, runs, want_pos = moe_ops.sort_by_expert(ids, experts)
    assert torch.equal(pairs, want_pairs)
    assert torch.equal(tiles, moe_ops.tile_table(runs, block, tokens * top_k))
    assert torch.equal(pos, want_pos)
    assert torch.equal(pairs[pos.view(-1).long()], torch.arange(tokens * top_k))


def test_layout_under_a_dispatch_mode_takes_the_torch_form() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    ids = torch.tensor([[3, 1], [1, 0]])
    with Record():
        _, tiles, _ = moe_ops.layout(ids, 4, 16)
    assert any("searchsorted" in name for name in seen) and any("cumsum" in name for name in seen)
    assert tiles.tolist() == [[0, 0, 1], [1, 1, 2], [3, 3, 1], [-1, 0, 0]]


def test_ragged_runs() -> None:
    """Runs of chosen lengths at the CPU's 16-row tiles: exactly one tile (16 rows), none
    (two experts), part of one (6), two and a part (33), exactly two (32) and one and a
    part (17), so that the tile table ends in unused entries; every element of the
    output and of the gradients against float64."""
    assert moe_ops.moe_block_rows("f32", "cpu") == 16
    counts = [16, 0, 6, 33, 0, 32, 17]  # 104 rows: 9 tiles, a table of 6 + 7 entries
    gen = torch.Generator().manual_seed(3)
    ids = torch.repeat_interleave(torch.arange(7), torch.tensor(counts))
    ids = ids[torch.randperm(104, generator=gen)].view(52, 2)
    x, _, gate_up, down = _layer(52, 40, 24, 7, torch.float32)
    weights = torch.rand(52, 2, generator=gen)
    inputs = [t.requires_grad_() for t in (x, weights, gate_up, down)]
    with poisoned_empty():
        out, ran = croqtile_ops(moe.moe_experts, x, ids, weights, gate_up, down)
    assert len(ran) == 3
    wide = [t.detach().double().requires_grad_() for t in inputs]
    ref = experts_reference(wide[0], ids, *wide[1:])
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-5)
    dy = random(tuple(out.shape), torch.float32)
    with poisoned_empty():
        out.backward(dy)
    ref.backward(dy.double())
    for ours, theirs in zip(inputs, wide):
        assert ours.grad is not None and theirs.grad is not None
        torch.testing.assert_close(ours.grad.double(), theirs.grad, rtol=1e-4, atol=1e-5)
    # (the experts without rows get zero gradients)
    assert not down.grad[[1, 4]].any() and not gate_up.grad[[1, 4]].any()


@pytest.mark.parametrize("activation", ["gelu_tanh", "relu"])
def test_other_activations(activation: str) -> None:
    x, logits, gate_up, down = _layer(9, 32, 24, 4, torch.float32)
    out, ran = croqtile_ops(cf.fused_moe, x, logits, gate_up, down, 2, activation=activation)
    assert len(ran) == 3 and all(f"_{activation}_" in op for op in ran)
    assert_close(out, reference(x, logits, gate_up, down, 2, activation=activation),
                 torch.float32)


def test_gradients() -> None:
    """Gradients of the hidden states, the router's logits and both weights."""
    inputs = [t.requires_grad_() for t in _layer(17, 40, 24, 4, torch.float32)]
    out = cf.fused_moe(*inputs, 2)
    dy = random(tuple(out.shape), torch.float32)
    out.backward(dy)
    wide = [t.detach().double().requires_grad_() for t in inputs]
    reference(*wide, 2).backward(dy.double())
    for ours, ref in zip(inputs, wide):
        assert ours.grad is not None and ref.grad is not None
        assert_close(ours.grad, ref.grad, torch.float32)


def test_opcheck() -> None:
    x, _, gate_up, down = _layer(11, 32, 24, 4, torch.float32)
    names = moe_ops.moe_names("f32", "silu", "cpu")
    gate_up_op, grad_op, down_op, combine_op, nn_op, tn_op = (getattr(torch.ops.croqtile, n)
                                                              for n in names)
    counts = torch.tensor([5, 0, 9, 8])
    ends = counts.cumsum(0).to(torch.int32)
    runs = torch.stack((ends - counts.to(torch.int32), ends), 1)
    tiles = moe_ops.tile_table(runs, moe_ops.moe_block_rows("f32", "cpu"), 22)
    xs = random((22, 32), torch.float32).requires_grad_()
    wg = gate_up[:, :24].detach().requires_grad_()
    wu = gate_up[:, 24:].detach().requires_grad_()
    h = random((22, 24), torch.float32).requires_grad_()
    y = random((22, 32), torch.float32).requires_grad_()
    pos = torch.randperm(22).to(torch.int32).view(11, 2)
    weights = torch.rand(11, 2).requires_grad_()
    torch.library.opcheck(gate_up_op, (xs, wg, wu, tiles))
    torch.library.opcheck(down_op, (h, down.requires_grad_(), tiles))
    torch.library.opcheck(combine_op, (y, pos, weights))
    torch.library.opcheck(nn_op, (h.detach(), wg.detach(), tiles))
    torch.library.opcheck(tn_op, (h.detach(), xs.detach(), runs))
    torch.library.opcheck(grad_op, (xs.detach(), wg.detach(), wu.detach(), tiles,
                                          h.detach()))


def test_uncovered_and_refused() -> None:
    x, logits, gate_up, down = _layer(6, 32, 24, 4, torch.float32)
    # weights of another dtype: torch's computation, the same values
    out, ran = croqtile_ops(cf.fused_moe, x, logits, gate_up.double(), down.double(), 2)
    assert ran == [] and out.dtype == torch.float32
    assert_close(out, reference(x, logits, gate_up, down, 2), torch.float32)
    with pytest.raises(ValueError, match="activation='gelu'"):
        cf.fused_moe(x, logits, gate_up, down, 2, activation="gelu")
    with pytest.raises(ValueError, match="top_k=5"):
        cf.fused_moe(x, logits, gate_up, down, 5)
    with pytest.raises(ValueError, match="expected hidden"):
        cf.fused_moe(x, logits, gate_up, down[:, :, :8], 2)
    if hasattr(torch, "float8_e4m3fn"):
        # (FP8 weights take the FP8 path, which needs their scales: test_moe_fp8.py)
        with pytest.raises(ValueError, match="FP8 weights need gate_up_scale"):
            cf.fused_moe(x, logits, gate_up.to(torch.float8_e4m3fn),
                         down.to(torch.float8_e4m3fn), 2)


# ------------------------------------------------------------------ transformers models

def _tiny(family: str, hidden: int = 32, inter: int = 24, experts: int = 6,
          vocab: int = 64) -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("transformers.integrations.moe")
    common = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4,
                  max_position_embeddings=128)
    if family == "qwen3_moe":
        config = transformers.Qwen3MoeConfig(
            **common, intermediate_size=64, moe_intermediate_size=inter, num_experts=experts,
            num_experts_per_tok=2, norm_topk_prob=True)
        model_class = transformers.Qwen3MoeForCausalLM
    else:
        config = transformers.MixtralConfig(**common, intermediate_size=inter,
                                            num_local_experts=experts - 2,
                                            num_experts_per_tok=2)
        model_class = transformers.MixtralForCausalLM
    torch.manual_seed(0)
    return model_class(config).eval()


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_experts_implementation(family: str) -> None:
    """The experts through croqtile keep the eager model's logits and greedy tokens."""
    from croqtile.nn import transformers as integration

    integration.register()
    model = _tiny(family)
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model.set_experts_implementation("eager")
        ref = model(ids).logits
        tokens = model.generate(ids, max_new_tokens=3, do_sample=False)
        model.set_experts_implementation(integration.NAME)
        assert model.config._experts_implementation == integration.NAME
        out, ran = croqtile_ops(model, ids)
        assert len(ran) == 2 * 3 and all(op.startswith("croqtile.moe_") for op in ran)
        assert_close(out.logits, ref, torch.float32)
        assert torch.equal(model.generate(ids, max_new_tokens=3, do_sample=False), tokens)


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_optimize_runs_the_experts_through_croqtile(family: str) -> None:
    """``optimize`` (every rewrite) sets ``experts_implementation="croqtile"`` on a
    mixture-of-experts model: its experts run croqtile's MoE kernels, its logits stay the
    eager model's."""
    from croqtile.nn import transformers as integration

    model = _tiny(family)
    ours = copy.deepcopy(model)
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(2))
    counts = integration.optimize(ours)
    assert counts["experts"] == 2 and ours.config._experts_implementation == integration.NAME
    with torch.no_grad():
        ref = model(ids).logits
        out, ran = croqtile_ops(ours, ids)
    assert sum(op.startswith("croqtile.moe_") for op in ran) == 2 * 3, ran
    assert_close(out.logits, ref, torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("tokens", [1, 16, 1000])
def test_fused_moe_on_the_gpu_in_bf16(tokens: int) -> None:
    """Qwen3-MoE-like widths (128 experts, top-8, hidden 2048, expert width 768): the GPU
    tiles, ragged runs and many experts without tokens at few tokens; and the gradients."""
    x, logits, gate_up, down = (t.cuda() for t in _layer(tokens, 2048, 768, 128,
                                                          torch.bfloat16))
    out, ran = croqtile_ops(cf.fused_moe, x, logits, gate_up, down, 8)
    assert len(ran) == 3
    weights, ids = torch.softmax(logits.double(), -1).topk(8, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    expected = torch.zeros(tokens, 2048, dtype=torch.float64, device="cuda")
    for e in range(128):  # (float64 torch, expert by expert)
        token, slot = torch.where(ids == e)
        gate, up = (x[token].double() @ gate_up[e].double().T).chunk(2, -1)
        rows = (F.silu(gate) * up) @ down[e].double().T
        expected.index_add_(0, token, rows * weights[token, slot, None])
    assert_close(out, expected, torch.bfloat16)
    inputs = [t.detach().requires_grad_() for t in (x, logits, gate_up, down)]
    cf.fused_moe(*inputs, 8).float().square().sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in inputs)


def _greedy_agrees(ours: torch.Tensor, eager: torch.Tensor, scores: tuple[torch.Tensor, ...],
                   prompt: int, tolerance: float) -> bool:
    """Whether greedy tokens agree with eager's: equal, or first different at a step where
    eager's two best logits were within ``tolerance`` of each other (relative to the
    largest logit), a tie that rounding may break either way (the steps after it then
    continue from different text)."""
    for row in range(ours.shape[0]):
        differ = torch.nonzero(ours[row, prompt:] != eager[row, prompt:])
        if differ.numel():
            step = int(differ[0])
            best = scores[step][row].float().topk(2).values
            if float(best[0] - best[1]) > tolerance * float(best.abs().max()):
                return False
    return True


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_experts_implementation_on_the_gpu_in_bf16(family: str) -> None:
    """A Qwen3-MoE and a Mixtral model in bf16 on the GPU with
    experts_implementation="croqtile": logits within bf16 tolerance of eager's, greedy
    tokens as eager's (but where eager's two best logits tie within that tolerance)."""
    from croqtile.nn import transformers as integration

    integration.register()
    model = _tiny(family, hidden=256, inter=128, experts=18, vocab=512).to("cuda",
                                                                          torch.bfloat16)
    ids = torch.randint(0, 512, (2, 40), generator=torch.Generator().manual_seed(4)).cuda()
    greedy = dict(max_new_tokens=8, do_sample=False, output_scores=True,
                  return_dict_in_generate=True)
    with torch.no_grad():
        model.set_experts_implementation("eager")
        ref = model(ids).logits.double()
        eager = model.generate(ids, **greedy)
        model.set_experts_implementation(integration.NAME)
        out, ran = croqtile_ops(model, ids)
        assert sum(op.startswith("croqtile.moe_") for op in ran) == 2 * 3, ran
        ours = model.generate(ids, **greedy)
    assert float((out.logits.double() - ref).norm() / ref.norm()) < 2e-2
    assert _greedy_agrees(ours.sequences, eager.sequences, eager.scores, ids.shape[1], 2e-2)


def test_experts_without_the_layout_flags_run_croqtile_and_odd_layouts_the_library(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Experts modules of transformers versions before a layout flag existed (no
    ``is_concatenated``, ``has_post_expert_norm`` ...) have the standard layout: they run
    croqtile's kernels (a missing flag once sent every call to the library's grouped_mm,
    silently). Weights of another shape (transposed) run the library's path."""
    from croqtile.nn import transformers as integration

    model = _tiny("qwen3_moe")
    experts = model.model.layers[0].mlp.experts
    for flag in ("is_concatenated", "has_post_expert_norm", "is_transposed", "has_bias",
                 "has_gate", "_is_expert_parallel"):
        if flag in vars(experts):
            delattr(experts, flag)
    hidden = torch.randn(5, 32)
    ids = torch.randint(0, 6, (5, 2))
    weights = torch.rand(5, 2)
    with torch.no_grad():
        out, ran = croqtile_ops(integration.experts_forward, experts, hidden, ids, weights)
        assert len(ran) == 3 and all(op.startswith("croqtile.moe_") for op in ran), ran
        want = experts_reference(hidden, ids, weights, experts.gate_up_proj, experts.down_proj,
                                 "silu")
        assert_close(out, want, torch.float32)
    import transformers.integrations.moe as library

    experts.gate_up_proj = torch.nn.Parameter(experts.gate_up_proj.transpose(1, 2).contiguous())
    called: list[torch.nn.Module] = []
    monkeypatch.setattr(library, "grouped_mm_experts_forward",
                        lambda module, *args: called.append(module) or args[0])
    with torch.no_grad():
        _, ran = croqtile_ops(integration.experts_forward, experts, hidden, ids, weights)
    assert called == [experts] and ran == []
