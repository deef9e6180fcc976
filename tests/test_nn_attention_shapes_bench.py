"""bench/nn_attention_shapes.py: every kernel variant it times compiles with its launch
option, and without a GPU it says that it needs one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .bench_scripts import BENCH, load

SCRIPT = BENCH / "nn_attention_shapes.py"


def _module():
    return load("nn_attention_shapes")


def test_every_variant_compiles_with_its_option() -> None:
    module = _module()
    compiled = module.compile_options("bf16")
    assert list(compiled) == list(module.OPTIONS)
    sources = {name: fn.triton_source for name, fn in compiled.items()}
    assert "num_stages=2" in sources["stages2"] and "num_stages=4" in sources["stages4"]
    assert "num_stages=3" in sources["kernel"]
    assert "warp_specialize=True" in sources["ws"] and "num_warps=4" in sources["ws"]
    # the blocks start with the last row tiles (the longest when causal)
    for source in sources.values():
        assert "row_tile = (((" in source and "- (within // planes))" in source
    for source in sources.values():
        assert source.count("tl.dot(") == 2  # Q K^T and P V, nothing else


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_without_a_gpu_it_says_so(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "a.csv")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "needs a CUDA device" in run.stderr
    assert not (tmp_path / "a.csv").exists()
