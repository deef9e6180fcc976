"""The hand-written CUDA kernels build with the plain ``nvcc -arch=sm_90a -c`` (Hopper) and
``nvcc -arch=sm_100a -c`` (Blackwell) a user would type: that flag also embeds PTX for
compute_90 (compute_100), where wgmma, setmaxnreg and tcgen05 are not allowed, so their
code is guarded by the target's feature macro (arch.cuh) and traps in that pass. The
package's own build (``driver.nvcc_flags``) targets compute_90a/compute_100a, where the
guard keeps the kernel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from croqtile import settings
from croqtile.backends.cuda import attention, gemm, gemm_sm100, gemm_sp
from croqtile.backends.cuda.driver import nvcc_flags
from croqtile.backends.cuda.gemm_sm100 import Sm100Config

NVCC = settings.nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")

# name: (source, arch, an instruction only the architecture-specific target has)
KERNELS = {
    "dense_sm90a": (gemm.hopper_source, "90a", "wgmma.mma_async"),
    "sparse_sm90a": (gemm_sp.sparse_source, "90a", "wgmma.mma_async.sp"),
    "attention_sm90a": (attention.attention_source, "90a", "wgmma.mma_async"),
    "tcgen05_sm100a": (lambda: gemm_sm100.source(Sm100Config("bf16", "bf16")), "100a",
                       "tcgen05.mma"),
    "tcgen05_pair_sm100a": (lambda: gemm_sm100.source(Sm100Config("f8_e4m3", "f16",
                                                                  cta_group=2)),
                            "100a", "tcgen05.mma"),
}


def _nvcc(tmp_path: Path, name: str, *flags: str) -> subprocess.CompletedProcess[str]:
    source, _, _ = KERNELS[name]
    path = tmp_path / f"{name}.cu"
    path.write_text(source())
    assert NVCC is not None
    return subprocess.run([NVCC, *flags, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


@pytest.mark.parametrize("name", KERNELS)
def test_the_source_builds_with_nvcc_arch_flag(tmp_path: Path, name: str) -> None:
    arch = KERNELS[name][1]
    done = _nvcc(tmp_path, name, f"-arch=sm_{arch}", "-c", "-o", f"{name}.o")
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stderr
    assert (tmp_path / f"{name}.o").stat().st_size > 0


@pytest.mark.parametrize("name", KERNELS)
def test_the_package_build_keeps_the_architecture_specific_kernel(tmp_path: Path,
                                                                  name: str) -> None:
    _, arch, instruction = KERNELS[name]
    flags = [f for f in nvcc_flags(arch) if f != "-cubin"]
    assert f"-gencode=arch=compute_{arch},code=sm_{arch}" in flags
    done = _nvcc(tmp_path, name, *flags, "-ptx", "-o", "kernel.ptx")
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert instruction in ptx and "trap;" not in ptx


@pytest.mark.parametrize("name", ["dense_sm90a", "attention_sm90a", "tcgen05_sm100a"])
def test_the_portable_ptx_pass_traps(tmp_path: Path, name: str) -> None:
    arch = KERNELS[name][1].rstrip("a")
    done = _nvcc(tmp_path, name, f"-gencode=arch=compute_{arch},code=compute_{arch}", "-ptx",
                 "-o", "kernel.ptx")
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "kernel.ptx").read_text()
    assert "trap;" in ptx
    assert "wgmma" not in ptx and "tcgen05" not in ptx and "setmaxnreg" not in ptx
