"""Every kernel of the programs in tests/data (the seeds and the corpus) and of the MMA
programs compiles for sm_90 with Triton's real compiler (no GPU needed): catches what the
CPU interpreter accepts but the GPU does not (tl.dot minimum sizes, layouts, types)."""

from __future__ import annotations

import pytest

import croqtile

from ..e2e import test_constructs as constructs
from ..e2e import test_element_buffers as element_buffers
from ..e2e import test_mma_more as mma_more
from ..e2e import test_sparse as sparse
from ..e2e.checks import DATA
from .sm90 import HAVE_CUDA_BACKEND, compile_for_sm90

PROGRAMS = {p.name: p.read_text() for p in sorted(DATA.glob("*.co"))}
for module in (constructs, mma_more, element_buffers, sparse):
    PROGRAMS.update({name: getattr(module, name) for name in dir(module)
                     if name.isupper() and isinstance(getattr(module, name), str)})


def _kernels() -> list[tuple[str, str, int]]:
    cases = []
    for name, text in PROGRAMS.items():
        mod = croqtile.compile(text, filename=name)
        for fn_name, fn in mod.functions.items():
            if fn._compiled.artifact is None:
                continue  # compiled per call shape: tests/e2e/test_symbolic_extents.py
            for index in range(len(fn._compiled.artifact.kernels)):
                cases.append((name, fn_name, index))
    return cases


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("program, function, index", _kernels())
def test_kernel_compiles_for_sm90(program: str, function: str, index: int) -> None:
    fn = croqtile.compile(PROGRAMS[program], filename=program).functions[function]
    compile_for_sm90(fn._compiled.artifact, index, f"{program}:{function}")
