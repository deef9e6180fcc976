"""Every kernel of the sample and construct programs compiles for sm_90 with Triton's real
compiler (no GPU needed): catches what the CPU interpreter accepts but the GPU does not
(tl.dot minimum sizes, layouts, types)."""

from __future__ import annotations

import importlib.util

import pytest

import croqtile
from croqtile import settings
from croqtile.backends.triton.launcher import load_module

from ..e2e import test_constructs as constructs
from ..e2e import test_element_buffers as element_buffers
from ..e2e.checks import DATA

PROGRAMS = {p.name: p.read_text() for p in sorted(DATA.glob("*.co"))}
for _module in (constructs, element_buffers):
    PROGRAMS.update({name: getattr(_module, name) for name in dir(_module)
                     if name.isupper() and isinstance(getattr(_module, name), str)})

HAVE_CUDA_BACKEND = importlib.util.find_spec("triton.backends.nvidia") is not None


def _kernels() -> list[tuple[str, str, int]]:
    cases = []
    for name, text in PROGRAMS.items():
        mod = croqtile.compile(text, filename=name)
        for fn_name, fn in mod.functions.items():
            for index in range(len(fn._compiled.artifact.kernels)):
                cases.append((name, fn_name, index))
    return cases


@pytest.mark.skipif(not HAVE_CUDA_BACKEND, reason="Triton without its CUDA backend")
@pytest.mark.parametrize("program, function, index", _kernels())
def test_kernel_compiles_for_sm90(program: str, function: str, index: int) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = croqtile.compile(PROGRAMS[program], filename=program).functions[function]
    artifact = fn._compiled.artifact
    module = load_module(artifact, settings.cache_dir())
    kernel = getattr(module, artifact.kernels[index])
    signature = artifact.signatures[index]
    for flags in (False, True):  # both the pointer and the tensor-descriptor variants
        constants = {(kernel.arg_names.index(n),): flags and n != "ON_CPU"
                     for n, kind in signature.items() if kind == "constexpr"}
        source = ASTSource(kernel, signature, constants)
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": artifact.num_warps[index],
                                           "num_stages": artifact.num_stages[index]})
        assert compiled.asm["cubin"], f"{program}:{function}: no machine code"
