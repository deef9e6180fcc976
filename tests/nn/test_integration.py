"""croqtile.nn inside PyTorch (arch 4.1): opcheck passes for every kind of operator the
nn kernels register, a model built on croqtile.nn compiles whole under torch.compile, and
a Llama-style decoder block converted to croqtile.nn gives the plain torch block's output."""

from __future__ import annotations

import copy
import warnings
import math
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import croqtile
import croqtile.nn.functional as cf
from croqtile.nn import attention_ops, kernels
from croqtile.nn import transformers as integration

from ..e2e.checks import assert_close, random
from .ops import croqtile_ops


def _f32(*shape: int, grad: bool = False) -> torch.Tensor:
    return random(shape, torch.float32).requires_grad_(grad)


def _scale() -> torch.Tensor:
    return torch.full((1,), 0.125 * attention_ops.LOG2E)


def _attention_backward(part: str) -> tuple[Any, tuple[Any, ...]]:
    delta, dq, dkv = attention_ops.attention_backward_ops("f32", 32, True, "cpu")
    q, k, v = _f32(1, 2, 20, 32), _f32(1, 1, 24, 32), _f32(1, 1, 24, 32)
    mask, out, do = _f32(1, 1, 20, 24), _f32(1, 2, 20, 32), _f32(1, 2, 20, 32)
    if part == "delta":
        return delta, (out, do)
    lse, row_delta = torch.randn(1, 2, 20) + 3.0, torch.randn(1, 2, 20)
    return {"dq": dq, "dkv": dkv}[part], (q, k, v, mask, do, lse, row_delta, False, _scale())


def _attention_training(masked: bool) -> tuple[Any, tuple[Any, ...]]:
    """The training form of the forward (o and each row's log-sum-exp), with autograd."""
    q, k, v = (_f32(1, 2, 20, 32, grad=True), _f32(1, 1, 24, 32, grad=True),
               _f32(1, 1, 24, 32, grad=True))
    mask = _f32(1, 1, 20, 24) if masked else None
    return (kernels.operator(attention_ops.training_name("f32", 32, masked, "cpu")),
            (q, k, v, mask, not masked, _scale()))


def _rms_norm_backward(part: str) -> tuple[Any, tuple[Any, ...]]:
    rstd, dx, dw = kernels.rms_norm_backward_ops("f32", True, "cpu")
    x, dy, r = _f32(20, 40), _f32(20, 40), torch.rand(20) + 0.5
    return {"rstd": (rstd, (x, torch.tensor([1e-6]))), "dx": (dx, (x, _f32(40), dy, r)),
            "dw": (dw, (x, dy, r))}[part]


# (operator kind, the operator, its arguments): every function of every kernel program
OPERATORS: dict[str, Callable[[], tuple[Any, tuple[Any, ...]]]] = {
    "linear": lambda: (kernels.linear_ops("f32", "SILU", True, "cpu"),
                       (_f32(20, 40, grad=True), _f32(36, 40, grad=True), _f32(36, grad=True))),
    "linear (no bias)": lambda: (kernels.linear_ops("f32", "NONE", False, "cpu"),
                                 (_f32(20, 40, grad=True), _f32(36, 40, grad=True))),
    "linear (residual)": lambda: (kernels.linear_ops("f32", "GELU_TANH", True, "cpu",
                                                     residual=True),
                                  (_f32(20, 40, grad=True), _f32(36, 40, grad=True),
                                   _f32(36, grad=True), _f32(20, 36, grad=True))),
    "linear (row scale)": lambda: (kernels.linear_ops("f32", "SILU", True, "cpu",
                                                      row_scale=True),
                                   (_f32(20, 40), _f32(36, 40), _f32(36), torch.rand(20) + 0.5)),
    "linear_grad": lambda: (kernels.linear_grad_op("f32", "GELU", True, "cpu"),
                            (_f32(20, 40), _f32(36, 40), _f32(36), _f32(20, 36))),
    "gated": lambda: (kernels.gated_op("f32", "silu", "cpu"),
                      (_f32(20, 40, grad=True), _f32(36, 40, grad=True), _f32(36, 40, grad=True))),
    "gated (row scale)": lambda: (kernels.gated_op("f32", "silu", "cpu", row_scale=True),
                                  (_f32(20, 40), _f32(36, 40), _f32(36, 40),
                                   torch.rand(20) + 0.5)),
    "gated_grad": lambda: (kernels.operator(kernels.gated_name("f32", "gelu_tanh", "cpu")
                                            .replace("gated_", "gated_grad_", 1)),
                           (_f32(20, 40), _f32(36, 40), _f32(36, 40), _f32(20, 36))),
    "matmul_nn": lambda: (kernels.matmul_ops("f32", "cpu")[0], (_f32(20, 36), _f32(36, 40))),
    "matmul_tn": lambda: (kernels.matmul_ops("f32", "cpu")[1], (_f32(20, 36), _f32(20, 40))),
    "attention": lambda: (attention_ops.attention_op("f32", 32, False, "cpu"),
                          (_f32(1, 2, 20, 32, grad=True), _f32(1, 1, 24, 32, grad=True),
                           _f32(1, 1, 24, 32, grad=True), True, _scale())),
    "attention (mask)": lambda: (attention_ops.attention_op("f32", 32, True, "cpu"),
                                 (_f32(1, 2, 20, 32, grad=True), _f32(1, 2, 24, 32, grad=True),
                                  _f32(1, 2, 24, 32, grad=True), _f32(1, 2, 20, 24), False,
                                  _scale())),
    "attention (decode)": lambda: (
        kernels.operator(attention_ops.attention_decode_name("f32", 32, True, "cpu")),
        (_f32(1, 2, 3, 32, grad=True), _f32(1, 1, 150, 32, grad=True),
         _f32(1, 1, 150, 32, grad=True), _f32(1, 1, 3, 150), False, _scale())),
    "attention (training)": lambda: _attention_training(False),
    "attention (training, mask)": lambda: _attention_training(True),
    **{f"attention_{part}": (lambda part=part: _attention_backward(part))
       for part in ("delta", "dq", "dkv")},
    "rms_norm": lambda: (kernels.rms_norm_op("f32", True, "cpu"),
                         (_f32(20, 40, grad=True), _f32(40, grad=True), torch.tensor([1e-6]))),
    **{f"rms_norm_{part}": (lambda part=part: _rms_norm_backward(part))
       for part in ("rstd", "dx", "dw")},
    "rms_norm (no weight)": lambda: (kernels.rms_norm_op("f32", False, "cpu"),
                                     (_f32(20, 40, grad=True), torch.tensor([1e-6]))),
    "rotary": lambda: (kernels.operator(kernels.rotary_name("f32", 32, "cpu")),
                       (_f32(1, 20, 2, 32, grad=True).transpose(1, 2), _f32(1, 20, 32),
                        _f32(1, 20, 32))),
}


@pytest.mark.parametrize("kind", list(OPERATORS))
def test_opcheck(kind: str) -> None:
    op, args = OPERATORS[kind]()
    torch.library.opcheck(op, args)


def test_every_registered_operator_is_of_a_checked_kind() -> None:
    """The operators the nn kernels have registered so far (those above and those the
    other tests compiled) are all of the kinds opcheck covers above (the mixture of
    experts' operators: tests/nn/test_moe.py's test_opcheck)."""
    for build in OPERATORS.values():
        build()
    names = [str(op).split(".")[-1] for op in kernels.loaded_operators()]
    kinds = ("linear_grad_", "linear_", "gated_grad_", "gated_", "matmul_nn_", "matmul_tn_",
             "attention_delta_",
             "attention_dq_", "attention_dkv_", "attention_", "rms_norm_rstd_",
             "rms_norm_dx_", "rms_norm_dw_", "rms_norm_", "rotary_", "moe_")
    assert names and all(name.startswith(kinds) for name in names), names


class Tiny(torch.nn.Module):
    """Attention (two heads of 32) and an MLP on croqtile.nn, the MLP's residual added in
    its down projection's epilogue."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = croqtile.nn.Linear(64, 3 * 64)
        self.up = croqtile.nn.Linear(64, 96, activation="gelu_tanh")
        self.down = croqtile.nn.Linear(96, 64, bias=False)
        self.norm = torch.nn.Parameter(torch.rand(64) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(cf.rms_norm(x, (64,), self.norm)).view(b, s, 3, 2, 32).unbind(2)
        h = cf.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                            v.transpose(1, 2), is_causal=True)
        x = x + h.transpose(1, 2).reshape(b, s, 64)
        return cf.linear(self.up(x), self.down.weight, residual=x)


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd:UserWarning")
@pytest.mark.parametrize("dynamic, dtype", [(False, torch.float32), (True, torch.float64)])
def test_a_model_compiles_whole_with_autograd(dynamic: bool, dtype: torch.dtype) -> None:
    """Under aot_eager, fullgraph, static and dynamic shapes: the forward graph calls the
    five Croqtile operators (rms_norm, qkv, attention, up, down) and the backward graph
    the backward GEMMs; the outputs and gradients are the eager ones. The compiled model
    runs first, so that kernels compile on first use while tracing (float64 attention at
    head dimension 32 is compiled by no other test)."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    model = Tiny().to(dtype)
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
    for length in (24, 40):
        x = random((2, length, 64), dtype).requires_grad_()
        out = compiled(x)
        eager = model(x)
        assert_close(out, eager.double(), dtype)
        dy = random(tuple(out.shape), dtype)
        expected = torch.autograd.grad(eager, [x, *model.parameters()], dy)
        for got, want in zip(torch.autograd.grad(out, [x, *model.parameters()], dy), expected):
            assert_close(got, want.double(), dtype)
    # one graph for both lengths when dynamic, one per length when not
    assert len(backend.fw_graphs) == (1 if dynamic else 2)
    forward, backward = backend.fw_graphs[0], backend.bw_graphs[0]
    assert _croqtile_calls(forward) == 5
    assert "matmul_nn" in backward.code and "matmul_tn" in backward.code
    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def _croqtile_calls(graph: torch.fx.GraphModule) -> int:
    return sum(1 for node in graph.graph.nodes if node.op == "call_function"
               and str(node.target).startswith(kernels.NAMESPACE + "."))


# ---------------------------------------------------------------- a Llama-style block


def rotary(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding of [B, H, S, D] (halves rotated, as Llama's)."""
    s, d = x.shape[-2:]
    freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angle = torch.arange(s, dtype=torch.float64, device=x.device)[:, None] * freq[None, :]
    cos, sin = (torch.cat([f, f], -1).to(x.dtype) for f in (angle.cos(), angle.sin()))
    first, second = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-second, first], -1) * sin


class DecoderBlock(torch.nn.Module):
    """Pre-norm attention (grouped-query, rotary, causal) and a SwiGLU MLP, in plain torch;
    ``sdpa`` and ``rms_norm`` are torch's functions unless replaced."""

    def __init__(self, dim: int = 128, heads: int = 4, kv_heads: int = 2, hidden: int = 160,
                 sdpa: Callable[..., torch.Tensor] = F.scaled_dot_product_attention,
                 rms_norm: Callable[..., torch.Tensor] = F.rms_norm) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = torch.nn.Linear(dim, dim, bias=False)
        self.k = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = torch.nn.Linear(dim, dim, bias=False)
        self.gate = torch.nn.Linear(dim, hidden, bias=False)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)
        self.attn_norm = torch.nn.Parameter(torch.rand(dim) + 0.5)
        self.mlp_norm = torch.nn.Parameter(torch.rand(dim) + 0.5)
        self.sdpa, self.rms_norm = sdpa, rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, dim = x.shape
        h = self.rms_norm(x, (dim,), self.attn_norm, 1e-6)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        attended = self.sdpa(rotary(q), rotary(k), v, is_causal=True, enable_gqa=True)
        x = x + self.o(attended.transpose(1, 2).reshape(b, s, dim))
        h = self.rms_norm(x, (dim,), self.mlp_norm, 1e-6)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def test_a_converted_llama_block_gives_the_torch_output() -> None:
    plain = DecoderBlock()
    reference = copy.deepcopy(plain).double()
    mine = croqtile.nn.convert(copy.deepcopy(plain))
    mine.sdpa, mine.rms_norm = cf.scaled_dot_product_attention, cf.rms_norm
    x = random((2, 40, 128), torch.float32)
    out, ran = croqtile_ops(mine, x)
    assert sum(op.startswith("croqtile.linear_") for op in ran) == 7
    assert sum(op.startswith("croqtile.attention_") for op in ran) == 1
    assert sum(op.startswith("croqtile.rms_norm_") for op in ran) == 2
    expected = reference(x.double())
    assert_close(out, expected, torch.float32)
    assert math.isclose(out.double().norm().item(), expected.norm().item(), rel_tol=1e-4)


@pytest.mark.gpu
def test_a_converted_llama_block_on_the_gpu() -> None:
    plain = DecoderBlock(dim=1024, heads=8, kv_heads=2, hidden=2816).cuda().bfloat16()
    reference = copy.deepcopy(plain).double()
    mine = croqtile.nn.convert(copy.deepcopy(plain))
    mine.sdpa, mine.rms_norm = cf.scaled_dot_product_attention, cf.rms_norm
    x = random((2, 512, 1024), torch.bfloat16, "cuda")
    out, ran = croqtile_ops(mine, x)
    assert len(ran) == 10
    assert_close(out, reference(x.double()), torch.bfloat16)


# the variants with the most shared memory per block: the widest elements and heads
LARGEST = [(kind, element, d) for kind in ("cpu", "gpu")
           for element, d in (("f64", 256), ("f32", 256), ("bf16", 256), ("bf16", 128))]


@pytest.mark.parametrize("kind, element, d", LARGEST)
def test_the_largest_attention_variants_compile(kind: str, element: str, d: int) -> None:
    """The tile sizes chosen for each device kind pass the checker's shared-memory budget
    (GPU variants are compiled here, not run)."""
    rows, cols, wg_rows = attention_ops.attention_tiles(kind, element, d)
    backward = attention_ops.attention_backward_tiles(kind, element, d)
    for program, tiles in (
            ("attention", (("ROWS", rows), ("COLS", cols), ("WG_ROWS", wg_rows),
                           ("LSE", 1))),
            ("attention_backward", backward.defines())):
        source = (kernels.KERNELS / f"{program}.co").read_text()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(source, defines=dict(
                attention_ops.attention_defines(element, d, True, tiles)))
        assert all("@triton.jit" in f.triton_source for f in module.functions.values())


@pytest.mark.parametrize("element", ["bf16", "f32", "f64"])
def test_the_gpu_gemm_variants_compile(element: str) -> None:
    variants = [("linear", kernels.GEMM_TILES["gpu", element], ()),
                ("matmul", kernels.BACKWARD_GEMM_TILES["gpu", element], ())]
    if ("gpu", element) in kernels.NARROW_GEMM_TILES:
        variants += [("linear", kernels.NARROW_GEMM_TILES["gpu", element],
                      kernels.NARROW_LINEAR_OPTIONS),
                     ("linear", kernels.SKINNY_GEMM_TILES["gpu", element],
                      kernels.SKINNY_LINEAR_OPTIONS)]
    # each linear variant also with a residual added in its epilogue, and a row scale
    variants += [(program, tiles, options, {"RESIDUAL": 1, "ROW_SCALE": scaled})
                 for program, tiles, options in variants if program == "linear"
                 for scaled in (0, 1)]
    for program, tiles, options, *extra in variants:
        source = (kernels.KERNELS / f"{program}.co").read_text()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(source, defines={
                "DT": element, "ACC": kernels.ELEMENTS_ACC[element], "ACT": "GELU_TANH",
                "BM": tiles[0], "BN": tiles[1], "BK": tiles[2], **(extra[0] if extra else {})},
                **dict(options))
        assert all("tl.dot(" in f.triton_source for f in module.functions.values())
        if dict(options).get("stream_k"):  # (the skinny variant: K shared by the SMs)
            assert all("stream-K" in f.triton_source for f in module.functions.values())
    source = (kernels.KERNELS / "gated_linear.co").read_text()
    bm, bn, bk = kernels.GATED_TILES["gpu", element]
    for scaled in (0, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(source, defines={
                "DT": element, "ACC": kernels.ELEMENTS_ACC[element], "ACT": "SILU",
                "BM": bm, "BN": bn, "BK": bk, "ROW_SCALE": scaled},
                **dict(kernels.GATED_OPTIONS["gpu"]))
        # the gate's and the up projection's products, in one K loop
        for f in module.functions.values():
            loop = f.triton_source[f.triton_source.index("for kk in"):]
            assert loop.count("tl.dot(") == 2


def test_a_tile_loaded_in_the_key_loop_counts_in_its_pipeline() -> None:
    """The additive mask, read from global memory in the key loop, is pipelined by Triton
    beside the K and V tiles: its bytes count, so the masked GPU variant takes 2 stages
    where the unmasked one takes 3 (at 3 it asked 352 KiB of shared memory)."""
    source = (kernels.KERNELS / "attention.co").read_text()
    tiles = (("ROWS", 128), ("COLS", 128), ("WG_ROWS", 64))
    stages = {}
    for masked in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", croqtile.CompileWarning)
            module = croqtile.compile(source, defines=dict(
                attention_ops.attention_defines("bf16", 128, masked, tiles)))
        [function] = module.functions.values()
        stages[masked] = function.triton_source.count("num_stages=2")
    assert stages == {False: 0, True: 1}


def test_the_linear_tiles_follow_the_call_shape(monkeypatch) -> None:
    """Skinny tiles for a decode step's few rows; 128 x 128 tiles where 128 x 256 ones
    would leave SMs idle (132 SMs: Llama-3-8B's k/v projection at 2048 tokens makes 64
    wide tiles, its q projection 256); wide tiles otherwise."""
    monkeypatch.setattr(kernels, "sm_count", lambda index: 132)
    gpu = torch.device("cuda", 0)
    assert kernels.linear_tiles(2048, 1024, "bf16", "gpu", gpu) == "narrow"
    assert kernels.linear_tiles(17, 4096, "f16", "gpu", gpu) == "narrow"
    assert kernels.linear_tiles(16, 4096, "f16", "gpu", gpu) == "skinny"
    assert kernels.linear_tiles(1, 128256, "bf16", "gpu", gpu) == "skinny"
    assert kernels.linear_tiles(2048, 4096, "bf16", "gpu", gpu) == "wide"
    assert kernels.linear_tiles(4096, 2048, "bf16", "gpu", gpu) == "wide"  # 32 x 8 tiles
    assert kernels.linear_tiles(2048, 1024, "f32", "gpu", gpu) == "wide"  # no other f32
    assert kernels.linear_tiles(1, 1024, "bf16", "cpu", torch.device("cpu")) == "wide"
    assert kernels.linear_name("bf16", "NONE", False, "gpu", "narrow").endswith("_gpu_narrow")
    assert kernels.linear_name("bf16", "NONE", False, "gpu", "skinny").endswith("_gpu_skinny")


def test_the_narrow_tile_choice_traces_under_dynamic_shapes(monkeypatch) -> None:
    """Under torch.compile with dynamic shapes the rows are symbolic: the choice is a
    guard, and the traced graph calls the operator the rule picks (no graph break)."""
    monkeypatch.setattr(kernels, "sm_count", torch.compiler.assume_constant_result(
        lambda index: 132))

    @torch.compiler.assume_constant_result
    def width(tiles: str) -> int:
        return {"skinny": 16, "narrow": 128, "wide": 256}[tiles]

    def f(x: torch.Tensor) -> torch.Tensor:
        tiles = kernels.linear_tiles(x.shape[0], 1024, "bf16", "gpu", torch.device("cuda", 0))
        return x + width(tiles)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="eager")
    assert compiled(torch.zeros(2048, 2))[0, 0].item() == 128  # 64 wide tiles
    assert compiled(torch.zeros(8192, 2))[0, 0].item() == 256  # 256 wide tiles
    assert compiled(torch.zeros(1000, 2))[0, 0].item() == 128
    assert compiled(torch.zeros(12, 2))[0, 0].item() == 16


# ---------------------------------------------------------------- fused MLP activations


class HFStyleMLP(torch.nn.Module):
    """``down(act_fn(gate(x)) * up(x))`` under the names of Hugging Face's gated MLPs;
    ``wrong`` applies the activation to the other branch (a forward fusing must not take)."""

    def __init__(self, act: torch.nn.Module, dim: int = 48, hidden: int = 80,
                 wrong: bool = False) -> None:
        super().__init__()
        self.gate_proj = torch.nn.Linear(dim, hidden, bias=False)
        self.up_proj = torch.nn.Linear(dim, hidden, bias=False)
        self.down_proj = torch.nn.Linear(hidden, dim, bias=False)
        self.act_fn, self.wrong = act, wrong

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.wrong:
            return self.down_proj(self.gate_proj(x) * self.act_fn(self.up_proj(x)))
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


@pytest.mark.parametrize("act, name", [(torch.nn.SiLU(), "silu"), (torch.nn.ReLU(), "relu"),
                                       (torch.nn.GELU(), "gelu"),
                                       (torch.nn.GELU(approximate="tanh"), "gelu_tanh"),
                                       (torch.nn.Tanh(), None), (torch.nn.Identity(), None)])
def test_an_activation_module_is_recognised_by_what_it_computes(act: torch.nn.Module,
                                                                name: str | None) -> None:
    assert integration.activation_of(act) == name


def test_a_gated_mlp_takes_its_activation_into_the_gate_gemm() -> None:
    model = torch.nn.Sequential(HFStyleMLP(torch.nn.SiLU()), HFStyleMLP(torch.nn.GELU()))
    reference = copy.deepcopy(model).double()
    weights = [p for p in model.parameters()]
    assert integration.fuse_activations(model) == 2
    for mlp, name in zip(model, ("silu", "gelu")):
        assert isinstance(mlp.gate_proj, croqtile.nn.Linear)
        assert mlp.gate_proj.activation == name
        assert isinstance(mlp.act_fn, torch.nn.Identity)
    assert [p for p in model.parameters()] == weights  # the same tensors
    x = random((5, 48), torch.float32)
    out, ran = croqtile_ops(model, x)
    assert sum("_silu_" in op for op in ran) == 1 and sum("_gelu_" in op for op in ran) == 1
    assert_close(out, reference(x.double()), torch.float32)
    assert integration.fuse_activations(model) == 0  # (already fused)


def test_a_forward_that_is_not_the_gated_form_is_left_as_it_was() -> None:
    wrong = HFStyleMLP(torch.nn.SiLU(), wrong=True)
    x = random((3, 48), torch.float32)
    expected = wrong(x)
    act, gate = wrong.act_fn, wrong.gate_proj
    assert integration.fuse_activations(wrong) == 0
    assert wrong.act_fn is act and wrong.gate_proj is gate
    assert torch.equal(wrong(x), expected)
    plain = HFStyleMLP(torch.nn.Tanh())  # an activation the kernel does not have
    assert integration.fuse_activations(plain) == 0 and isinstance(plain.act_fn, torch.nn.Tanh)


def test_a_gated_mlp_becomes_one_gemm_and_a_down_projection() -> None:
    model = torch.nn.Sequential(HFStyleMLP(torch.nn.SiLU()), HFStyleMLP(torch.nn.ReLU()),
                                HFStyleMLP(torch.nn.GELU()))  # (exact gelu: no gated kernel)
    reference = copy.deepcopy(model).double()
    keys = list(model.state_dict())
    assert integration.fuse_mlps(model) == 2
    assert [type(m).__name__ for m in model] == ["GatedMLP", "GatedMLP", "HFStyleMLP"]
    assert list(model.state_dict()) == keys  # checkpoints load either way
    x = random((3, 7, 48), torch.float32, ).requires_grad_()
    out, ran = croqtile_ops(model, x)
    assert sum(op.startswith("croqtile.gated_") for op in ran) == 2
    x64 = x.detach().double().requires_grad_()
    expected = reference(x64)
    assert_close(out, expected, torch.float32)
    grad = random(tuple(out.shape), torch.float32)
    (got,) = torch.autograd.grad(out, x, grad)
    (want,) = torch.autograd.grad(expected, x64, grad.double())
    assert_close(got, want, torch.float32)
    wrong = HFStyleMLP(torch.nn.SiLU(), wrong=True)
    assert integration.fuse_mlps(wrong) == 0  # (its own module: nothing to replace it in)
    holder = torch.nn.Sequential(wrong)
    assert integration.fuse_mlps(holder) == 0 and holder[0] is wrong
