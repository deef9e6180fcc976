"""Loads a generated module and launches its kernels: compiled by Triton for CUDA
tensors, run by Triton's interpreter for CPU tensors (no environment variable needed)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .codegen import Artifact

_LOCK = threading.RLock()


class KernelError(RuntimeError):
    """Triton could not compile or run a generated kernel; the message names the kernel
    and the Croqtile source it came from."""


def load_module(artifact: Artifact, cache_dir: Path) -> ModuleType:
    """Write the artifact's source to the cache (content-addressed) and import it.

    Triton reads kernel source through ``inspect``, so the module must live in a file.
    """
    digest = hashlib.sha256(artifact.source.encode()).hexdigest()[:20]
    path = cache_dir / f"{artifact.function}_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(artifact.source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"croqtile_gen_{digest}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - file just written
        raise ImportError(f"cannot load generated module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Launcher:
    """Callable handed to the generated host function as ``launch``."""

    def __init__(self) -> None:
        self._interpreted: dict[int, Any] = {}
        self._stages: dict[int, int] = {}
        self._sms: dict[int, int] = {}
        self.launches = 0

    def sm_count(self, device: Any) -> int:
        """Streaming multiprocessors of ``device`` (the programs of a persistent launch);
        4 for the CPU, so that the interpreter runs persistent loops too."""
        if getattr(device, "type", "cpu") != "cuda":
            return 4
        index = device.index if device.index is not None else _current_device()
        count = self._sms.get(index)
        if count is None:
            import torch

            count = torch.cuda.get_device_properties(index).multi_processor_count
            self._sms[index] = count
        return count

    def __call__(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        self.launches += 1
        if any(g <= 0 for g in grid):
            return  # an empty grid launches nothing (zero-sized dimension)
        try:
            self._launch(kernel, grid, args, num_warps, num_stages, device)
        except Exception as exc:
            name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None),
                                                                "__name__", "kernel")
            raise KernelError(f"croqtile: Triton failed on generated kernel '{name}' "
                              f"({type(exc).__name__}: {str(exc).strip()[:2000]}); the kernel's "
                              "source is in the function's .triton_source, with # file:line "
                              "comments pointing at the Croqtile statements") from exc

    def _launch(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...],
                num_warps: int, num_stages: int, device: Any) -> None:
        if getattr(device, "type", "cpu") == "cuda":
            _ensure_allocator()
            self._launch_gpu(kernel, grid, args, num_warps, num_stages)
            return
        _check_interpreter_numpy()
        interpreted = self._interpreted.get(id(kernel))
        if interpreted is None:
            from triton.runtime.interpreter import InterpretedFunction

            interpreted = InterpretedFunction(kernel.fn)
            self._interpreted[id(kernel)] = interpreted
        with _LOCK, _interpreting(debug=bool(getattr(kernel, "debug", False))):
            interpreted[grid](*args)


    def _launch_gpu(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...],
                    num_warps: int, num_stages: int) -> None:
        """Launch; when the pipeline's buffers do not fit in shared memory, retry with
        fewer stages and remember the number that fits."""
        from triton.runtime.errors import OutOfResources

        stages = self._stages.get(id(kernel), num_stages)
        # a kernel in debug mode (it checks assertions) would also trap on integer
        # overflow, which wraps in Croqtile as in C
        extra = {"sanitize_overflow": False} if getattr(kernel, "debug", False) else {}
        while True:
            try:
                kernel[grid](*args, num_warps=num_warps, num_stages=stages, **extra)
            except OutOfResources:
                if stages <= 1:
                    raise
                stages -= 1
                continue
            self._stages[id(kernel)] = stages
            return


def _current_device() -> int:
    import torch

    return torch.cuda.current_device()


class _interpreting:
    """Lets ``@triton.jit`` helpers of ``triton.language`` (``tl.sum``...) run inside the
    interpreter although ``TRITON_INTERPRET`` was not set when Triton was imported."""

    def __init__(self, debug: bool = False) -> None:
        self.debug = debug

    def __enter__(self) -> None:
        from triton.runtime.interpreter import InterpretedFunction, interpreter_builder
        from triton.runtime.jit import JITFunction

        # device assertions are checked in debug mode only, which the interpreter takes
        # from its builder rather than from the kernel; integers wrap as in C, unchecked
        self.options = interpreter_builder.options
        if self.debug:
            interpreter_builder.options = replace(self.options, debug=True,
                                                  sanitize_overflow=False)

        self.saved: Callable[..., Any] = JITFunction.__call__

        def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
            # InterpretedFunction.__call__ patches triton.language for the callee and never
            # undoes it, which breaks later GPU compiles in the same process: restore here.
            from triton.runtime.interpreter import _patch_lang

            scope = _patch_lang(fn.fn)
            try:
                return InterpretedFunction(fn.fn).rewrite()(*args, **kwargs)
            finally:
                scope.restore()

        JITFunction.__call__ = call  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        from triton.runtime.jit import JITFunction

        from triton.runtime.interpreter import interpreter_builder

        JITFunction.__call__ = self.saved  # type: ignore[method-assign]
        interpreter_builder.options = self.options


def _check_interpreter_numpy() -> None:
    """Triton 3.6's interpreter turns 1-element arrays into ints, which numpy 2.4 refuses."""
    import numpy
    import triton

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())

    if version(triton.__version__) <= (3, 6) and version(numpy.__version__) >= (2, 4):
        raise RuntimeError(f"running on CPU tensors uses Triton's interpreter, which in triton "
                           f"{triton.__version__} needs numpy<2.4 (found {numpy.__version__}); "
                           "install 'numpy<2.4' or pass CUDA tensors")


_ALLOCATOR_SET = False


def _ensure_allocator() -> None:
    """Tensor descriptors made inside kernels need scratch memory from the host."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET:
        return
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        del alignment, stream
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)
    _ALLOCATOR_SET = True
