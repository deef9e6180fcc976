"""``croqtile.bench.moe_tutorial``: the tutorial's fused-MoE pipeline run as its host code
runs it. The tutorial's files are not part of this repository (the conformance harness
runs them from a checkout); these tests check the pieces around them: the host code's
inputs and reference, its prefix sum, its checks, the launch order, and the rows of files
that stop at a compile error."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from croqtile.bench import moe_tutorial as mt

SMALL = mt.Sizes(tokens=3, experts=64, n=128, k=256, max_m=4, routes=64)


def scalar_routing(gating: torch.Tensor, top_k: int) -> tuple[list[list[int]], list[list[float]]]:
    """``topkSoftmaxCpuReference`` transcribed loop for loop (in float64)."""
    ids, weights = [], []
    for row in gating.double().tolist():
        capped = [math.tanh(v / mt.SOFTCAP) * mt.SOFTCAP for v in row]
        top = max(capped)
        probs = [math.exp(v - top) for v in capped]
        total = sum(probs)
        probs = [p / total for p in probs]
        chosen, picked = [], []
        for _ in range(top_k):
            best = 0
            for e in range(1, len(probs)):
                if probs[e] > probs[best]:
                    best = e
            chosen.append(best)
            picked.append(probs[best])
            probs[best] = -1.0
        ids.append(chosen)
        weights.append([p / sum(picked) for p in picked])
    return ids, weights


def test_routing_is_the_host_codes_and_takes_the_lower_expert_on_ties() -> None:
    given = mt.inputs(SMALL)
    gating = given["gating"]
    assert torch.equal(gating[:, :21], gating[:, 43:])  # (the pattern repeats: ties happen)
    ids, weights = mt.routing(gating, SMALL.top_k)
    want_ids, want_weights = scalar_routing(gating, SMALL.top_k)
    assert ids.tolist() == want_ids
    assert torch.allclose(weights, torch.tensor(want_weights, dtype=torch.float64),
                          rtol=1e-12, atol=0.0)


def test_reference_output_is_the_host_codes_loop() -> None:
    """The grouped reference against ``fusedMoeCpuReferenceFp8``'s loop: token by token,
    slot by slot, each weight row dequantised by its block scales."""
    given = mt.inputs(SMALL)
    ref = mt.reference(given, SMALL)
    xq, xs = mt.quantize_rows(given["input"], SMALL.block)
    x = xq.double() * xs.repeat_interleave(SMALL.block, 1)
    w = given["expert_weights"].double().view(SMALL.experts, SMALL.n, SMALL.k)
    scales = given["expert_scales"].double().view(SMALL.experts, SMALL.n_blocks,
                                                   SMALL.k_blocks)
    want = torch.zeros(SMALL.tokens, SMALL.n, dtype=torch.float64)
    for t in range(SMALL.tokens):
        for slot in range(SMALL.top_k):
            e = int(ref["ids"][t, slot])
            for col in range(SMALL.n):
                row_scale = scales[e, col // SMALL.block].repeat_interleave(SMALL.block)
                want[t, col] += ref["weights"][t, slot] * (x[t] * w[e, col] * row_scale).sum()
    assert torch.allclose(ref["out"], want, rtol=1e-12, atol=1e-12)
    routes = SMALL.tokens * SMALL.top_k
    assert int(ref["n_routes"]) == routes and int(ref["offsets"][-1]) == routes
    assert (ref["sorted_ids"][routes:] == -1).all()
    assert sorted(ref["sorted_ids"][:routes].tolist()) == list(range(routes))


def test_host_layout_is_the_prefix_sum_of_the_counts() -> None:
    counts = torch.tensor([3, 0, 5, 1], dtype=torch.int32)
    b = {"expert_counts": counts, "expert_offsets": torch.full((5,), 99, dtype=torch.int32),
         "expert_write_offsets": torch.full((4,), 99, dtype=torch.int32)}
    mt.host_layout(b)
    assert b["expert_offsets"].tolist() == [0, 3, 3, 8, 9]
    assert b["expert_write_offsets"].tolist() == [0, 3, 3, 8]


def correct_buffers() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    given = mt.inputs(SMALL)
    ref = mt.reference(given, SMALL)
    b = mt.buffers(given, SMALL, "cpu")
    b["topk_ids"].copy_(ref["ids"])
    b["topk_weights"].copy_(ref["weights"])
    b["output"].copy_(ref["out"])
    return b, ref


def test_check_passes_the_reference_and_fails_each_kind_of_wrong_result() -> None:
    b, ref = correct_buffers()
    ok, note = mt.check(b, ref)
    assert ok, note
    wrong_id, _ = correct_buffers()
    wrong_id["topk_ids"][1, 2] += 1
    assert mt.check(wrong_id, ref) == (False, "top-k ids: 1 of 24 differ")
    wrong_weight, _ = correct_buffers()
    wrong_weight["topk_weights"][0, 0] += 1e-4
    ok, note = mt.check(wrong_weight, ref)
    assert not ok and note.startswith("top-k weights: 1 of 24")
    poisoned, _ = correct_buffers()
    poisoned["output"][2, 5] = float("nan")
    ok, note = mt.check(poisoned, ref)
    assert not ok and note.startswith("output: 1 of 384 elements")


def test_buffers_poison_what_the_host_code_leaves_unset() -> None:
    b = mt.buffers(mt.inputs(SMALL), SMALL, "cpu")
    assert torch.isnan(b["output_wide"]).all() and torch.isnan(b["rep_a_q"].float()).all()
    assert (b["sorted_route_ids"] == 0x3FFFFFFF).all()
    assert b["output"].data_ptr() == b["output_wide"].data_ptr()
    assert b["topk_weights"].shape == (SMALL.tokens, SMALL.top_k)
    assert b["topk_weights_wide"].shape == (SMALL.max_m, SMALL.top_k)


@pytest.mark.parametrize("program", list(mt.PROGRAMS))
def test_the_launch_runs_the_host_codes_steps_in_order(program: str) -> None:
    """A stand-in module records its calls: routing first, then the memsets, then the
    steps in order with the buffers the host code passes."""
    calls: list[tuple[str, list[torch.Tensor]]] = []
    steps = mt.PROGRAMS[program].steps
    b = mt.buffers(mt.inputs(SMALL), SMALL, "cpu")

    def recorder(name: str) -> object:
        def call(*args: torch.Tensor) -> None:
            if name == "fused_moe_count_experts":  # (what 02's host step then reads)
                assert (b["expert_counts"] == 0).all(), "the counts were not cleared first"
                args[1].copy_(torch.arange(SMALL.experts, dtype=torch.int32) % 3)
            if name == "fused_moe_route":
                assert torch.isnan(b["output"]).all(), "a memset ran before routing"
            calls.append((name, list(args)))
        return call

    module = SimpleNamespace(**{name: recorder(name) for name, _ in steps
                                if name != mt.HOST_LAYOUT})
    mt.launcher(mt.PROGRAMS[program], module, b)()
    assert [name for name, _ in calls] == [name for name, _ in steps if name != mt.HOST_LAYOUT]
    for (name, args), (_, names) in zip(calls, [s for s in steps if s[0] != mt.HOST_LAYOUT]):
        assert all(a is b[n] for a, n in zip(args, names)), name
    assert (b["output"] == 0).all()
    if program == "02_qsg_fusion":
        counts = torch.arange(SMALL.experts, dtype=torch.int32) % 3
        assert b["expert_offsets"][1:].tolist() == torch.cumsum(counts, 0).tolist()


def fake_checkout(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / mt.FOLDER
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.co").write_text(text)
    return tmp_path


RAW_CUDA = """// End-to-end TFLOPS: ~9.45 (H800 PCIe)
__co__ void k(global f32 [16] x) {
  parallel p by 1 : block {
    __cpp__("  __syncwarp();\\n");
  }
}
"""


def test_a_later_file_stops_at_its_first_raw_cuda_block(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path, {"03_all_fusions": RAW_CUDA})
    row = mt.run_program(checkout, "03_all_fusions", SMALL, "cpu", lambda f: 0.0, 1)
    assert row.ok is None and row.ms is None
    assert row.note.startswith("error[CQ0708]")
    assert row.note.endswith("(at 03_all_fusions.co:4:5)")
    assert row.h800_tflops == 9.45


def test_a_missing_file_names_the_path_looked_for(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="00_baseline.co: not found"):
        mt.run_program(tmp_path, "00_baseline", SMALL, "cpu", lambda f: 0.0, 1)


def test_the_roadmap_table_gives_the_h800_figure(tmp_path: Path) -> None:
    page = tmp_path / mt.PAGE
    page.parent.mkdir(parents=True)
    page.write_text("| **Phase 4** | [`05_cuda_optimized.co`](../assets/x/05_cuda_optimized.co)"
                    " | **13.18** | Grid swap |\n")
    assert mt.h800_tflops(tmp_path, "05_cuda_optimized", "") == 13.18
    assert mt.h800_tflops(tmp_path, "04_host_micro", "no figure") is None
    assert mt.h800_tflops(tmp_path, "00_baseline",
                          "// End-to-end TFLOPS: ~8.09 (H800 PCIe)") == 8.09
