"""Build, load and launch the hand-written kernels of this folder through the CUDA driver.

The kernels are CUDA C++ files shipped with the package. `build` compiles one with
`nvcc` for one GPU architecture into a cubin kept in a cache folder (keyed by the
source, the flags and the compiler's version), `Kernel` loads a function of that cubin
and launches it with `ctypes` calls into the driver library, and `tensor_map_2d` makes
the descriptor that a bulk tensor copy reads. Nothing here imports torch: callers pass
device pointers and stream handles as integers.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias

KERNEL_DIR = Path(__file__).resolve().parent

# A kernel argument for `Kernel.launch`: a ctypes value, or the address of an argument held
# elsewhere (a tensor map).
KernelArg: TypeAlias = "ctypes._SimpleCData[Any] | int"


class CudaError(RuntimeError):
    """A driver call, or the build of a kernel, failed."""


# ---- the driver library ---------------------------------------------------------------

@functools.cache
def _driver() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaError(f"the CUDA driver library could not be loaded: {exc}") from exc
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                        ctypes.c_char_p]
    lib.cuModuleGetGlobal_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                         ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                                         ctypes.c_char_p]
    lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                                                 ctypes.c_void_p]
    lib.cuTensorMapEncodeTiled.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return lib


def _check(result: int, what: str) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        _driver().cuGetErrorString(result, ctypes.byref(name))
        text = name.value.decode() if name.value else "unknown error"
        raise CudaError(f"{what} failed: {text} (CUDA error {result})")


# ---- building -------------------------------------------------------------------------

@functools.cache
def _nvcc_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def build(source: str, arch: str, cache_dir: Path, defines: Sequence[str] = (),
          nvcc: str | None = None) -> bytes:
    """The cubin of `source` (a file in this folder) for `arch` (e.g. "90a"), built once
    with `nvcc` (default: the one on PATH); `defines` are NAME=VALUE macros for
    experiments with the kernel's constants."""
    return build_text(Path(source).stem, kernel_text(source), arch, cache_dir, defines, nvcc)


def kernel_text(source: str) -> str:
    """The text of `source` (a file in this folder) with each `#include "<file>"` of a
    file of this folder replaced by that file's text: one self-contained translation unit."""
    lines = []
    for line in (KERNEL_DIR / source).read_text().splitlines(keepends=True):
        words = line.split()
        if len(words) == 2 and words[0] == "#include" and words[1].startswith('"'):
            lines.append(kernel_text(words[1].strip('"')))
        else:
            lines.append(line)
    return "".join(lines)


def build_text(name: str, text: str, arch: str, cache_dir: Path, defines: Sequence[str] = (),
               nvcc: str | None = None) -> bytes:
    """The cubin of the CUDA source `text` (a generated kernel; `name` names its cache
    file and its messages), as `build`."""
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        raise CudaError("building a CUDA kernel needs nvcc; set CUDA_HOME or put nvcc on PATH")
    flags = nvcc_flags(arch, defines)
    key = hashlib.sha256(text.encode() + " ".join(flags).encode() + _nvcc_version(nvcc).encode())
    target = Path(cache_dir) / "cuda" / f"{name}-{key.hexdigest()[:16]}.cubin"
    if target.exists():
        return target.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        out, src = Path(tmp) / "kernel.cubin", Path(tmp) / f"{name}.cu"
        src.write_text(text)
        done = subprocess.run([nvcc, *flags, "-o", str(out), str(src)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CudaError(f"nvcc could not build {name}:\n{done.stderr.strip()}")
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(out, partial)
        os.replace(partial, target)
    return target.read_bytes()


def nvcc_flags(arch: str, defines: Sequence[str] = ()) -> list[str]:
    """The flags of a kernel build for `arch`: machine code only (a cubin)."""
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}", "-O3", "-std=c++17", "-cubin",
            *(f"-D{d}" for d in defines)]


# ---- loading and launching ------------------------------------------------------------

_FUNC_MAX_DYNAMIC_SHARED = 8


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


class Module:
    """A cubin loaded into the current CUDA context."""

    def __init__(self, cubin: bytes):
        handle = ctypes.c_void_p()
        _check(_driver().cuModuleLoadData(ctypes.byref(handle), cubin), "loading a cubin")
        self.handle = handle

    def int_global(self, name: str) -> int:
        """The value of an `int` variable of the module (`__constant__` or `__device__`)."""
        address, size = ctypes.c_uint64(), ctypes.c_size_t()
        _check(_driver().cuModuleGetGlobal_v2(ctypes.byref(address), ctypes.byref(size),
                                              self.handle, name.encode()), f"finding {name}")
        value = ctypes.c_int()
        _check(_driver().cuMemcpyDtoH_v2(ctypes.byref(value), address.value, 4), f"reading {name}")
        return value.value

    def kernel(self, name: str, threads: int, shared: int) -> Kernel:
        return Kernel(self, name, threads, shared)


class Kernel:
    """One `extern "C"` kernel with a fixed block size and dynamic shared memory."""

    def __init__(self, module: Module, name: str, threads: int, shared: int):
        func = ctypes.c_void_p()
        _check(_driver().cuModuleGetFunction(ctypes.byref(func), module.handle, name.encode()),
               f"finding kernel {name}")
        _check(_driver().cuFuncSetAttribute(func, _FUNC_MAX_DYNAMIC_SHARED, shared),
               f"giving {name} {shared} bytes of shared memory")
        self.module, self.name, self.func = module, name, func
        self.threads, self.shared = threads, shared

    def max_active_clusters(self, blocks: int) -> int:
        """How many clusters (of the size compiled into the kernel) fit on the GPU at once."""
        config = _LaunchConfig((ctypes.c_uint * 3)(blocks, 1, 1),
                               (ctypes.c_uint * 3)(self.threads, 1, 1), self.shared, None, None, 0)
        count = ctypes.c_int()
        _check(_driver().cuOccupancyMaxActiveClusters(ctypes.byref(count), self.func,
                                                      ctypes.byref(config)),
               f"asking how many clusters of {self.name} fit")
        return count.value

    def launch(self, blocks: int, stream: int, params: list[KernelArg]) -> None:
        """Launch on `blocks` blocks. A `params` entry that is an int is the address of
        an argument held elsewhere (a tensor map); the others are ctypes values."""
        addresses = [p if isinstance(p, int) else ctypes.addressof(p) for p in params]
        array = (ctypes.c_void_p * len(addresses))(*addresses)
        _check(_driver().cuLaunchKernel(self.func, blocks, 1, 1, self.threads, 1, 1, self.shared,
                                        ctypes.c_void_p(stream), array, None),
               f"launching {self.name}")


# ---- tensor maps ----------------------------------------------------------------------

TENSOR_MAP_F16 = 6
TENSOR_MAP_BF16 = 9
SWIZZLE_64B = 2
SWIZZLE_128B = 3
_L2_PROMOTE_256B = 3


class TensorMap:
    """A 2-D tiled tensor map (the 128-byte, 64-byte-aligned descriptor of a bulk copy);
    the box lands in shared memory with the 128-byte swizzle unless ``swizzle`` says
    otherwise (``SWIZZLE_64B``: box rows of 64 bytes). `TensorMap.tiled` makes one of up
    to 5 dimensions."""

    def __init__(self, pointer: int, dtype: int, rows: int, cols: int, row_bytes: int,
                 box_rows: int, box_cols: int, swizzle: int = SWIZZLE_128B):
        self._encode(pointer, dtype, (cols, rows), (row_bytes,), (box_cols, box_rows), swizzle,
                     f"a {rows} x {cols} tensor")

    @classmethod
    def tiled(cls, pointer: int, dtype: int, dims: Sequence[int], strides: Sequence[int],
              box: Sequence[int], swizzle: int = SWIZZLE_128B) -> TensorMap:
        """A map of ``len(dims)`` dimensions, innermost first (the innermost dense):
        ``strides`` the byte strides of the others (multiples of 16, in any order: a
        sequence-major [B, L, H, D] tensor read as [B, H, L, D] is fine), ``box`` the
        elements of a copy along each dimension."""
        found = cls.__new__(cls)
        found._encode(pointer, dtype, tuple(dims), tuple(strides), tuple(box), swizzle,
                      f"a {' x '.join(map(str, reversed(dims)))} tensor")
        return found

    def _encode(self, pointer: int, dtype: int, dims: tuple[int, ...], strides: tuple[int, ...],
                box: tuple[int, ...], swizzle: int, what: str) -> None:
        rank = len(dims)
        if not 1 <= rank <= 5 or len(strides) != rank - 1 or len(box) != rank:
            raise ValueError(f"a tensor map of {rank} dimensions, {len(strides)} strides and "
                             f"{len(box)} box sizes")
        self._buffer = ctypes.create_string_buffer(128 + 64)
        self.address = (ctypes.addressof(self._buffer) + 63) & ~63
        _check(_driver().cuTensorMapEncodeTiled(
            self.address, dtype, rank, pointer, (ctypes.c_uint64 * rank)(*dims),
            (ctypes.c_uint64 * max(rank - 1, 1))(*strides), (ctypes.c_uint32 * rank)(*box),
            (ctypes.c_uint32 * rank)(*([1] * rank)), 0, swizzle, _L2_PROMOTE_256B, 0),
            f"describing {what} for bulk copies")
