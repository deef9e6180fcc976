"""bench/nn_linear_variants.py: every variant it times compiles, and without a GPU it says
that it needs one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .bench_scripts import BENCH, load

SCRIPT = BENCH / "nn_linear_variants.py"


def _module():
    return load("nn_linear_variants")


def test_every_variant_compiles_with_its_tiles() -> None:
    module = _module()
    compiled = module.compile_variants("bf16")
    assert list(compiled) == list(module.VARIANTS)
    for name, ((bm, bn, _), options) in module.VARIANTS.items():
        source = compiled[name].triton_source
        assert f"tl.arange(0, {bm})" in source and f"tl.arange(0, {bn})" in source, name
        assert ("* 16)" in source) == (options.get("group_m") == 16), name


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_without_a_gpu_it_says_so(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "v.csv")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "needs a CUDA device" in run.stderr
    assert not (tmp_path / "v.csv").exists()
