"""The attention, epilogue and decode sweeps of ``croqtile bench`` on the CPU: their cases,
the user-style kernels through the interpreter against float64, the calling conventions and
layouts of the published attention kernels (with torch stand-ins, since their text is only
read from checkouts at run time), reading programs out of pages and files, and the files.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import croqtile
from croqtile.bench import attention as attention_sweep
from croqtile.bench import harness, linear, report, suite
from croqtile.bench.harness import Case
from croqtile.cli import main
from croqtile.tools.code_blocks import defines_function, fenced_blocks, program_block

from .test_bench import SequenceTimer

OURS = attention_sweep.OURS.name
TUTORIAL = attention_sweep.TUTORIAL.name
UPSTREAM = attention_sweep.UPSTREAM.name

# Stand-ins with the published kernels' signatures (written here, not taken from them):
# they compile and run, but copy v to the output, which attention is not.
COPY_BSHD = """
__co__ void flash_atten(global bf16 [B, S, H, D] q, global bf16 [B, S, H, D] k,
                        global bf16 [B, S, H, D] v, global bf16 [B, S, H, D] o) {
  parallel {b, h, t} by [B, H, S / 64] : block {
    v_head = v.subspan(1, S, 1, D).at(b, 0, h, 0).sqz();
    o_head = o.subspan(1, S, 1, D).at(b, 0, h, 0).sqz();
    rows = dma.copy v_head.subspan(64, D).at(t, 0) => shared;
    dma.copy rows.data => o_head.subspan(64, D).at(t, 0);
  }
}
"""
COPY_BHSD_RETURNED = """
#define TILE 64
__co__ auto flash_atten(f16 [B, H, S, D] q, f16 [B, H, S, D] k, f16 [B, H, S, D] v,
                        bool is_causal) {
  f16 [B, H, S, D] o;
  parallel {b, h, t} by [B, H, S / TILE] : block {
    v_head = v.subspan(1, 1, S, D).at(b, h, 0, 0).sqz();
    o_head = o.subspan(1, 1, S, D).at(b, h, 0, 0).sqz();
    rows = dma.copy v_head.subspan(TILE, D).at(t, 0) => shared;
    dma.copy rows.data => o_head.subspan(TILE, D).at(t, 0);
  }
  return o;
}
"""


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                          is_causal=causal).to(q.dtype)


def run(cases: list[Case], load: Callable[[Case], Any], **kwargs: Any) -> list[harness.Row]:
    return harness.run_cases(cases, device="cpu", load=load, prepare=suite.prepare,
                           **kwargs)


# ----------------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------------


def test_attention_cases_follow_each_kernel() -> None:
    cases = attention_sweep.attention_cases([OURS, TUTORIAL, UPSTREAM], ("f16", "bf16"))
    ours = [c for c in cases if c.kernel == OURS]
    assert len(ours) == 2 * 5 * 2  # types, sequence lengths, causal and not
    assert {c.S for c in ours} == {1024, 2048, 4096, 8192, 16384}
    assert {(c.S, c.B, c.H) for c in ours if c.S in (4096, 8192)} == {(4096, 4, 32),
                                                                       (8192, 1, 32)}
    tutorial = [c for c in cases if c.kernel == TUTORIAL]
    # causal only, bf16 only, its own head size and layout, whatever --dtype says
    assert {(c.causal, c.dtype, c.D, c.layout) for c in tutorial} == {(True, "bf16", 128,
                                                                      "BSHD")}
    assert len(tutorial) == 5
    upstream = [c for c in cases if c.kernel == UPSTREAM]
    assert {(c.dtype, c.D, c.layout) for c in upstream} == {("f16", 64, "BHSD")}
    assert {c.causal for c in upstream} == {False, True} and len(upstream) == 10
    assert {c.dtype for c in attention_sweep.attention_cases([OURS], ("bf16",))} == {"bf16"}


def test_attention_flops_halve_when_causal() -> None:
    full = Case("attention", OURS, "f16", B=2, H=3, S=256, D=64)
    causal = Case("attention", OURS, "f16", B=2, H=3, S=256, D=64, causal=True)
    assert full.flops == 4 * 2 * 3 * 256 * 256 * 64 and causal.flops == full.flops / 2
    assert full.bytes == 4 * 2 * 3 * 256 * 64 * 2
    assert causal.describe() == "attention f16 B2 H3 S256 D64 causal"


def test_epilogue_and_decode_cases() -> None:
    epilogue = linear.epilogue_cases()
    assert {c.kernel for c in epilogue} == {"linear_relu", "linear_gelu_tanh", "linear_silu"}
    assert {c.M for c in epilogue} == {16, 64, 512, 4096}
    assert {(c.N, c.K) for c in epilogue} == {(4096, 4096)} and len(epilogue) == 2 * 3 * 4
    decode = linear.decode_cases()
    assert [c.M for c in decode[:10]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert {c.label for c in decode} == {"llama3-8b qkv", "llama3-8b o", "llama3-8b gate_up",
                                         "llama3-8b down"}
    assert len(decode) == 2 * 4 * 10
    quick = suite.quick_cases(["decode"], ["bf16"])
    assert sorted({c.M for c in quick}) == [16, 64, 512]
    sized = suite.full_cases(["attention", "epilogue"], ["f16"], [2048])
    assert {c.S for c in sized if c.is_attention} == {2048}
    assert {c.M for c in sized if not c.is_attention} == {2048}


# ----------------------------------------------------------------------------------------
# the kernels on the CPU
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def load() -> harness.KernelLoader:
    return suite.kernel_loader()


def test_our_attention_kernel_is_correct_with_a_ragged_tile(load: harness.KernelLoader) -> None:
    cases = attention_sweep.tiny_attention_cases([OURS], ("f16",))
    assert {(c.S, c.causal) for c in cases} == {(160, False), (160, True)}  # 160 = 128 + 32
    rows = run(cases, load)
    for row in rows:
        assert row.ok, (row.case, row.note)
        assert row.rel_error is not None and 0 < row.rel_error < 2e-3


def test_a_wrong_attention_result_is_caught(load: harness.KernelLoader) -> None:
    def flipped(case: Case) -> Any:  # the mask the other way round
        fn = load(case)
        return lambda q, k, v, o, causal, scale: fn(q, k, v, o, not causal, scale)

    (case,) = attention_sweep.tiny_attention_cases([OURS], ("f16",))[1:]
    assert case.causal
    (row,) = run([case], flipped)
    assert not row.ok and row.note == "wrong result" and row.rel_error > 0.1


def test_a_returned_output_and_a_transposed_layout_are_checked() -> None:
    """The reference kernel returns O ([B, H, S, D]); the tutorial's writes its fourth
    argument in [B, S, H, D]: torch stand-ins with those signatures pass, and the same
    with the layout or the result wrong fail."""
    upstream = [Case("attention", UPSTREAM, "f16", B=1, H=2, S=64, D=16, causal=c,
                     layout="BHSD") for c in (False, True)]
    rows = run(upstream, lambda case: sdpa)
    assert all(r.ok and r.rel_error < 1e-2 for r in rows), rows
    (zero,) = run(upstream[:1], lambda case: lambda q, k, v, c: torch.zeros_like(q))
    assert not zero.ok

    def tutorial_like(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      o: torch.Tensor) -> None:
        heads = [t.transpose(1, 2) for t in (q, k, v)]
        o.copy_(sdpa(*heads, True).transpose(1, 2))

    def wrong_layout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     o: torch.Tensor) -> None:
        heads = [t.transpose(1, 2) for t in (q, k, v)]
        o.view(-1).copy_(sdpa(*heads, True).reshape(-1))  # [B, H, S, D] order

    case = Case("attention", TUTORIAL, "bf16", B=1, H=2, S=64, D=16, causal=True,
                layout="BSHD")
    (good,) = run([case], lambda c: tutorial_like)
    (bad,) = run([case], lambda c: wrong_layout)
    assert good.ok and not bad.ok and bad.note == "wrong result"


def test_epilogue_kernels_are_correct(load: harness.KernelLoader) -> None:
    cases = linear.tiny_cases("epilogue", ("f16", "bf16"))
    assert len(cases) == 6 and {(c.M, c.N, c.K) for c in cases} == {(40, 200, 72)}
    rows = run(cases, load)
    for row in rows:
        assert row.ok, (row.case, row.note)
        limit = 2e-3 if row.case.dtype == "f16" else 1e-2
        assert 0 < row.rel_error < limit


def test_epilogue_activations_differ() -> None:
    """Each ACT value selects its own activation (the fused result would still be right
    for relu if every define fell through to one branch)."""
    x = torch.tensor([[-1.5, 0.3], [2.0, -0.2]], dtype=torch.float16)
    w = torch.eye(2, dtype=torch.float16)
    bias = torch.zeros(2, dtype=torch.float16)
    source = (harness.KERNEL_DIR / "linear.co").read_text()
    for name, (define, torch_act) in linear.ACTIVATIONS.items():
        y = torch.empty(2, 2, dtype=torch.float16)
        croqtile.compile(source, defines={"ACT": define}).linear(x, w, bias, y)
        torch.testing.assert_close(y, torch_act(x.float()).half(), atol=2e-3, rtol=2e-3,
                                   msg=name)


def test_decode_kernel_pads_a_few_rows_and_is_tuned(load: harness.KernelLoader) -> None:
    cases = linear.tiny_cases("decode", ("f16", "bf16"))
    assert {c.M for c in cases} == {1, 5}  # under the MMA's 16 rows
    with pytest.warns(RuntimeWarning, match="needs a CUDA device"):
        rows = run(cases, load)
    for row in rows:
        assert row.ok, (row.case, row.note)
        # tuned (the source's values ran: nothing can be timed on the CPU)
        assert row.config == "defaults"


def test_the_user_kernels_compile_as_a_user_would(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    class Module:
        def __getattr__(self, name: str) -> str:
            return name

    def fake_compile(text: str, **kwargs: Any) -> Module:
        seen.append((text, kwargs))
        return Module()

    monkeypatch.setattr(croqtile, "compile", fake_compile)
    load = suite.kernel_loader("none", {"BK": "32"})
    assert load(Case("decode", "matmul", "bf16", 16, 64, 64)) == "matmul"
    assert load(Case("epilogue", "linear_gelu_tanh", "f16", 16, 64, 64)) == "linear"
    assert load(Case("attention", OURS, "bf16", B=1, H=1, S=64, D=64)) == "attention"
    decode, epilogue, attention = (kwargs for _, kwargs in seen)
    # decode: autotuned over the compiler's own space (no bench tunables), DT fixed only
    assert decode == {"defines": {"BK": "32", "DT": "bf16"}, "filename": "croqtile/bench/kernels/"
                      "matmul.co", "autotune": "quick"}
    assert epilogue["defines"] == {"BK": "32", "DT": "f16", "ACT": "GELU_TANH"}
    assert "autotune" not in epilogue
    assert attention["defines"] == {"BK": "32", "DT": "bf16", "HEAD_DIM": 64}
    assert "__co__ void attention(" in seen[2][0]
    # compiled once per set of defines
    load(Case("decode", "matmul", "bf16", 512, 64, 64))
    assert len(seen) == 3
    suite.kernel_loader("full")(Case("decode", "matmul", "f16", 16, 64, 64))
    assert seen[-1][1]["autotune"] == "full"


# ----------------------------------------------------------------------------------------
# timing and files (fake timer)
# ----------------------------------------------------------------------------------------


def test_epilogue_times_the_compiled_baseline_too(
        tmp_path: Path, load: harness.KernelLoader,
        uncompiled_baseline: list[Callable[..., Any]]) -> None:
    built = uncompiled_baseline
    case = linear.epilogue_cases(("f16",), (40,), ("silu",), 200, 72)[0]
    # ours, unfused, compiled; reps = 2
    timer = SequenceTimer([2.0, 3.0, 1.0, 2.0, 3.0, 1.0])
    result = suite.run_bench([case], tmp_path, device="cpu", reps=2, timer=timer,
                                   load=load, plot=False)
    (row,) = result.rows
    assert len(built) == 1  # compiled once, before the timing
    ours, unfused, compiled = timer.timed[:3]
    assert timer.timed[3:] == [ours, unfused, compiled] and compiled is not unfused
    assert (row.ratio, row.compiled_ratio) == (1.5, 0.5)
    (record,) = report.read_csv(tmp_path / "epilogue.csv")
    assert (record["ratio"], record["compiled_ratio"], record["compiled_ms"]) == ("1.5", "0.5",
                                                                                "1")
    meta = json.loads((tmp_path / "epilogue.json").read_text())["metadata"]
    assert meta["geomean_ratio"]["epilogue/linear_silu/f16/vs_compiled"] == 0.5


def test_attention_csv_has_the_sequence_length_and_ratio(tmp_path: Path) -> None:
    cases = [Case("attention", OURS, "f16", B=1, H=2, S=s, D=16, causal=True, layout="BHSD")
             for s in (64, 2048)]

    def stand_in(case: Case) -> Any:
        return lambda q, k, v, o, causal, scale: o.copy_(sdpa(q, k, v, causal))

    timer = SequenceTimer([2.0, 1.0, 1.0, 1.0])  # ratios 0.5 and 1
    result = suite.run_bench(cases, tmp_path, device="cpu", reps=1, timer=timer,
                                   load=stand_in, plot=False)
    records = report.read_csv(tmp_path / "attention.csv")
    assert {"S", "ratio", "B", "H", "D", "causal", "layout"} <= set(records[0])
    assert "M" not in records[0]
    assert [(r["S"], r["ratio"], r["causal"]) for r in records] == [("64", "0.5", "True"),
                                                                     ("2048", "1", "True")]
    flops = 4 * 2 * 2048 * 2048 * 16 / 2
    assert float(records[1]["croqtile_tflops"]) == pytest.approx(flops / 1e-3 / 1e12,
                                                                 rel=1e-3)
    doc = json.loads((tmp_path / "attention.json").read_text())
    means = doc["metadata"]["geomean_ratio"]
    # only the long sequence counts towards the S >= 2048 mean
    assert means["attention/attention/f16"] == pytest.approx(math.sqrt(0.5))
    assert means["attention/attention/f16/S>=2048"] == pytest.approx(1.0)
    assert doc["metadata"]["sources"] == {OURS: "croqtile/bench/kernels/attention.co"}
    assert doc["rows"][0]["S"] == 64 and doc["rows"][0]["causal"] is True
    long = [line.split() for line in result.table.splitlines() if line.startswith("S>=")]
    assert long == [["S>=2048", "attention", "f16", "1", "0", "1.000", "1.000"]]


def test_a_run_cut_short_keeps_the_rows_it_finished(tmp_path: Path) -> None:
    cases = [Case("attention", OURS, "f16", B=1, H=1, S=s, D=16, layout="BHSD")
             for s in (32, 64)]

    def stand_in(case: Case) -> Any:
        return lambda q, k, v, o, causal, scale: o.copy_(sdpa(q, k, v, causal))

    def limited(fn: Callable[[], object]) -> float:
        if len(calls) == 2:  # the time limit strikes during the second case
            raise KeyboardInterrupt
        calls.append(fn)
        return 1.0

    calls: list[Callable[[], object]] = []
    with pytest.raises(KeyboardInterrupt):
        suite.run_bench(cases, tmp_path, device="cpu", reps=1, timer=limited,
                              load=stand_in, plot=False)
    records = report.read_csv(tmp_path / "attention.csv")
    assert [(r["S"], r["ratio"]) for r in records] == [("32", "1")]
    assert len(json.loads((tmp_path / "attention.json").read_text())["rows"]) == 1


# ----------------------------------------------------------------------------------------
# programs from pages and files
# ----------------------------------------------------------------------------------------

PAGE = """# A page

Some text, then a shell block:

```sh
make run
```

```c++
__co__ void warm_up(f16 [8] x) { }
```

A call in host code is not a definition:

```c++
int main() { flash_atten(a, b); }
```

```croqtile
__co__ void flash_atten(global bf16 [B, S, H, D] q) {
}
```

```c++
__co__ void flash_atten(global f16 [4] second) { }
```
"""


def test_fenced_blocks_and_the_program_block() -> None:
    assert len(fenced_blocks(PAGE)) == 5
    assert fenced_blocks(PAGE)[0] == "make run\n"
    block = program_block(PAGE, "flash_atten")
    assert block is not None and "bf16 [B, S, H, D] q" in block  # the first definition
    assert program_block(PAGE, "missing") is None


@pytest.mark.parametrize("text, found", [
    ("__co__ void flash_atten(f16 [4] x) {}", True),
    ("__co__ auto\nflash_atten (f16 [4] x) {}", True),
    ("__co__ f16 [B, H] flash_atten(f16 [B, H] x) {}", True),
    ("__co__ void flash_atten_v2(f16 [4] x) {}", False),
    ("__co__ void other(f16 [4] x) { flash_atten(x); }", False),
    ("void flash_atten(float *x);", False),
])
def test_defines_function(text: str, found: bool) -> None:
    assert defines_function(text, "flash_atten") is found


def _checkouts(root: Path) -> tuple[Path, Path]:
    tutorial = root / "tutorial"
    page = tutorial / attention_sweep.TUTORIAL_PAGE
    page.parent.mkdir(parents=True)
    page.write_text(f"# Causal prefill\n\n```cpp\n{COPY_BSHD}```\n")
    upstream = root / "upstream"
    file = upstream / attention_sweep.UPSTREAM_FILE
    file.parent.mkdir(parents=True)
    file.write_text("// RUN: nothing\n" + COPY_BHSD_RETURNED + "\nint main() { return 0; }\n")
    return tutorial, upstream


def test_programs_are_read_from_checkouts_or_files(tmp_path: Path) -> None:
    tutorial, upstream = _checkouts(tmp_path)
    found = attention_sweep.programs(tutorial, upstream)
    assert set(found) == {OURS, TUTORIAL, UPSTREAM}
    assert found[TUTORIAL].text == COPY_BSHD
    assert found[TUTORIAL].name == "optimization/flash-attention-causal-prefill.md#flash_atten"
    assert found[UPSTREAM].name == "tests/gpu/end2end/flash_atten.co"
    assert "int main()" in found[UPSTREAM].text  # the whole file: host code is skipped
    assert str(tmp_path) not in found[UPSTREAM].origin  # no machine path in the results
    direct = attention_sweep.upstream_program(upstream / attention_sweep.UPSTREAM_FILE)
    assert direct.name == "flash_atten.co" and direct.text == found[UPSTREAM].text


@pytest.mark.parametrize("option, make, message", [
    ("tutorial", lambda root: root / "nowhere", "no such file or directory"),
    ("tutorial", lambda root: root, "no file optimization/flash-attention-causal-prefill.md"),
    ("upstream", lambda root: root, "no file tests/gpu/end2end/flash_atten.co"),
    ("tutorial", lambda root: _page(root, "```c\nint x;\n```\n"),
     "no code block of page.md defines the __co__ function flash_atten"),
    ("upstream", lambda root: _page(root, "__co__ void other() {}\n"),
     "page.md does not define the __co__ function flash_atten"),
])
def test_a_missing_program_is_a_clear_error(tmp_path: Path, option: str,
                                            make: Callable[[Path], Path], message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(attention_sweep.SourceError, match=re.escape(message)):
        attention_sweep.programs(**{option: path})


def _page(root: Path, text: str) -> Path:
    page = root / "page.md"
    page.write_text(text)
    return page


# ----------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------


def test_cli_runs_the_checkouts_kernels_and_reports_them_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stand-ins that copy v compile and run as the published kernels would, and fail
    the check; the rows, the sources' names and the exit status say so."""
    tutorial, upstream = _checkouts(tmp_path)
    out = tmp_path / "out"
    code = main(["bench", "attention", "--device", "cpu", "--dtype", "f16", "--out", str(out),
                 "--tutorial", str(tutorial), "--upstream", str(upstream)])
    captured = capsys.readouterr()
    assert code == 1
    records = report.read_csv(out / "attention.csv")
    assert [(r["kernel"], r["causal"], r["ok"]) for r in records] == [
        (OURS, "False", "True"), (OURS, "True", "True"), (TUTORIAL, "True", "False"),
        (UPSTREAM, "False", "False"), (UPSTREAM, "True", "False")]
    assert {r["note"] for r in records[2:]} == {"wrong result"}
    assert "FAILED tutorial_flash bf16 B1 H2 S256 D128 causal: wrong result" in captured.err
    sources = json.loads((out / "attention.json").read_text())["metadata"]["sources"]
    assert sources[UPSTREAM].startswith("tests/gpu/end2end/flash_atten.co")


def test_cli_new_sweeps_and_their_usage_errors(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--device", "cpu", "--dtype", "bf16", "--out", str(tmp_path)]
    assert main([*args, "epilogue", "--kernels", "linear_silu", "linear_relu"]) == 0
    records = report.read_csv(tmp_path / "epilogue.csv")
    assert [(r["kernel"], r["dtype"]) for r in records] == [("linear_relu", "bf16"),
                                                            ("linear_silu", "bf16")]
    assert main([*args, "epilogue", "--kernels", "linear_tanh"]) == 2
    assert "--kernels 'linear_tanh': no such kernel" in capsys.readouterr().err
    assert main([*args, "attention", "--tutorial", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "--tutorial" in err and "no such file or directory" in err
    assert main([*args, "attention", "--upstream", str(tmp_path)]) == 2
    assert "tests/gpu/end2end/flash_atten.co" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------
# on the GPU: the paths the CPU cannot take (SDPA's kernels, torch.compile, the tuner)
# ----------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_the_new_sweeps_time_on_the_gpu(tmp_path: Path) -> None:
    cases = [*attention_sweep.attention_cases([OURS], ("bf16",), (256,), 1, 2, 64),
             *linear.epilogue_cases(("f16",), (16,), ("silu",), 256, 256),
             *linear.decode_cases(("bf16",), (1,), (("small", "proj", 512, 256),))]
    result = suite.run_bench(cases, tmp_path, device="cuda", reps=1, plot=False)
    for row in result.rows:
        assert row.ok and row.ratio is not None, (row.case, row.note)
        assert row.croqtile_host_us is not None
    epilogue = next(r for r in result.rows if r.case.sweep == "epilogue")
    assert epilogue.compiled_ratio is not None and epilogue.note == ""
    decode = next(r for r in result.rows if r.case.sweep == "decode")
    assert decode.config  # the tuner's choice, or "defaults"
    assert {p.name for p in result.files} == {"attention.csv", "attention.json",
                                              "epilogue.csv", "epilogue.json", "decode.csv",
                                              "decode.json"}


@pytest.mark.gpu
def test_the_graph_timer_times_device_work(tmp_path: Path) -> None:
    """``--timer graph``: both sides replayed from a CUDA graph (the decode epilogue row
    and its torch.compile baseline), the host columns still filled, the JSON naming it."""
    cases = linear.epilogue_cases(("bf16",), (16,), ("silu",), 256, 256)
    result = suite.run_bench(cases, tmp_path, device="cuda", reps=1, plot=False,
                                   timer=harness.graph_timer)
    row = result.rows[0]
    assert row.ok and row.ratio is not None and row.compiled_ratio is not None, row.note
    assert 0 < row.croqtile_ms < 1 and row.croqtile_host_us is not None
    meta = json.loads((tmp_path / "epilogue.json").read_text())["metadata"]
    assert meta["timer"] == "graph"


def test_the_timer_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--timer`` takes events or graph (on the CPU nothing is timed either way)."""
    assert main(["bench", "memory", "--device", "cpu", "--timer", "graph",
                 "--out", str(tmp_path)]) == 0
    assert "timer" not in json.loads((tmp_path / "memory.json").read_text())["metadata"]
    assert main(["bench", "memory", "--device", "cpu", "--timer", "wall"]) == 2
    assert "invalid choice: 'wall'" in capsys.readouterr().err
