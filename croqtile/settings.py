"""The one place that reads environment variables: ``CROQTILE_*``, and ``CUDA_HOME``
(or ``CUDA_PATH``) for the compiler of the hand-written CUDA kernels."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def cache_dir() -> Path:
    """Where generated Triton modules (and later tuning results) are kept.

    ``CROQTILE_CACHE_DIR`` overrides the default ``~/.cache/croqtile``.
    """
    root = os.environ.get("CROQTILE_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "croqtile"
    path.mkdir(parents=True, exist_ok=True)
    return path


def dump_dir() -> Path | None:
    """``CROQTILE_DUMP_DIR``: when set, every compile writes its stages' text there."""
    root = os.environ.get("CROQTILE_DUMP_DIR")
    if not root:
        return None
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def nvcc() -> str | None:
    """The ``nvcc`` that builds the hand-written CUDA kernels (``backend="cuda"``):
    ``$CUDA_HOME/bin/nvcc`` (or ``$CUDA_PATH``'s), else the one on ``PATH``."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def debug() -> bool:
    """``CROQTILE_DEBUG``: when set to anything but ``""`` or ``"0"``, every compile takes
    ``debug=True`` unless the call passes ``debug`` itself."""
    return os.environ.get("CROQTILE_DEBUG", "") not in ("", "0")


def cache_size() -> int | None:
    """``CROQTILE_CACHE_SIZE``: how many entries each per-shape table of a function keeps
    (see ``croqtile.runtime.lru``); None when unset. A value that is not a positive integer is an
    error naming the variable."""
    text = os.environ.get("CROQTILE_CACHE_SIZE", "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"CROQTILE_CACHE_SIZE={text!r}: expected a positive integer")
    return value


def attention_cuda() -> bool:
    """``CROQTILE_ATTENTION_CUDA``: unless set to ``""`` or ``"0"`` (default: on),
    ``croqtile.nn``'s unmasked attention forward on a Hopper GPU (f16/bf16, head dimension
    128, no gradient wanted) runs the hand-written CUDA kernel where it was timed faster
    than the Triton one (``croqtile.nn.attention_cuda``)."""
    return os.environ.get("CROQTILE_ATTENTION_CUDA", "1") not in ("", "0")


def attention_ws() -> bool:
    """``CROQTILE_ATTENTION_WS``: when set to anything but ``""`` or ``"0"``,
    ``croqtile.nn``'s attention forward on a GPU (f16/bf16, head dimension up to 128, no
    mask) runs its warp-specialised form (``croqtile.nn.attention_ops.attention_ws``)."""
    return os.environ.get("CROQTILE_ATTENTION_WS", "") not in ("", "0")
