"""Compiling generated kernels for sm_90 with Triton's real compiler, without a GPU."""

from __future__ import annotations

import importlib.util
from typing import Any

from croqtile import settings
from croqtile.backends.triton.codegen import Artifact
from croqtile.backends.triton.launcher import load_module

HAVE_CUDA_BACKEND = importlib.util.find_spec("triton.backends.nvidia") is not None


def compile_for_sm90(artifact: Artifact, index: int, what: str) -> None:
    """Compile kernel ``index`` of ``artifact`` to sm_90 machine code (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = load_module(artifact, settings.cache_dir())
    kernel = getattr(module, artifact.kernels[index])
    signature = artifact.signatures[index]
    for flags in (False, True):  # both the pointer and the tensor-descriptor variants
        constants = {(kernel.arg_names.index(n),): flags and n != "ON_CPU"
                     for n, kind in signature.items() if kind == "constexpr"}
        variant = dict(signature)
        if not flags:  # the host passes None for its descriptors (descriptors="host")
            for n, kind in signature.items():
                if kind.startswith("tensordesc"):
                    variant[n] = "constexpr"
                    constants[(kernel.arg_names.index(n),)] = None
        source = ASTSource(kernel, variant, constants)
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": artifact.num_warps[index],
                                           "num_stages": artifact.num_stages[index]})
        assert compiled.asm["cubin"], f"{what}: no machine code"


def sm90_metadata(artifact: Artifact, index: int = 0) -> Any:
    """Triton's metadata (warps, shared memory...) of kernel ``index`` of ``artifact``
    compiled for sm_90 as the GPU runs it (tensor descriptors on; no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = getattr(load_module(artifact, settings.cache_dir()), artifact.kernels[index])
    signature = artifact.signatures[index]
    constants = {(kernel.arg_names.index(n),): n != "ON_CPU"
                 for n, kind in signature.items() if kind == "constexpr"}
    compiled = triton.compile(ASTSource(kernel, signature, constants),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": artifact.num_warps[index],
                                       "num_stages": artifact.num_stages[index]})
    return compiled.metadata


def assert_compiles_for_sm90(text: str, name: str) -> None:
    """Every kernel of every function of ``text`` compiles to sm_90 machine code."""
    import croqtile

    for function, fn in croqtile.compile(text, filename=name).functions.items():
        artifact = fn._compiled.artifact  # type: ignore[attr-defined]
        for index in range(len(artifact.kernels)):
            compile_for_sm90(artifact, index, f"{name}:{function}")
