"""The autotuning candidates of the benchmark kernels (``croqtile bench --autotune``),
chosen per shape bucket from a calibration run on the H200 (``bench/tune_gemm.py``:
every candidate of a wide grid timed at 2048^3..8192^3 and at decode shapes).

Large GEMMs: 128 x 256 block tiles with two warpgroups and a persistent launch won at
4096^3 and 8192^3; 128 x 128 and 64-row tiles cover shapes with fewer tiles than SMs.
Short kernels (1024^3, 2048^3, M = 128) took plain pointer loads while every program built
its own tensor descriptors; with descriptors made by the host (the default now) descriptor
loads win there too, and the pointer-load forms stay as candidates.
Decode (M <= 64): one 16- or 64-row tile, narrow N tiles and long K steps with deep
pipelines (the weight stream is what costs), with and without descriptors.
"""

from __future__ import annotations

import itertools
from typing import Any

Config = dict[str, Any]

_LARGE_GEMM: list[Config] = [
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True},
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 4, "persistent": True,
     "flatten": True},
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
     "flatten": True},
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 4, "persistent": True},
    {"TILE_M": 256, "TILE_N": 128, "num_warps": 8, "num_stages": 4, "persistent": True},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 3, "persistent": False},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 4, "persistent": True},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 8, "num_stages": 4, "persistent": True},
    {"TILE_M": 64, "TILE_N": 256, "num_warps": 4, "num_stages": 3, "persistent": True},
    {"TILE_M": 64, "TILE_N": 128, "num_warps": 4, "num_stages": 4, "persistent": False},
    {"TILE_M": 128, "TILE_N": 64, "num_warps": 4, "num_stages": 4, "persistent": False},
    {"TILE_M": 64, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 4,
     "persistent": False},
    # few tiles (1024^2 outputs, M = 128 or 512 rows of tokens): small tiles, deep pipelines
    {"TILE_M": 64, "TILE_N": 64, "num_warps": 4, "num_stages": 5, "persistent": False},
    {"TILE_M": 64, "TILE_N": 128, "TILE_K": 128, "num_warps": 4, "num_stages": 3,
     "persistent": False},
    {"TILE_M": 128, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 3,
     "persistent": False},
    {"TILE_M": 64, "TILE_N": 32, "TILE_K": 128, "num_warps": 4, "num_stages": 6,
     "persistent": False},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True},
    # 1024^3 with the host's descriptors (calibrated on the H200: 5.4 us a kernel
    # under CUDA graphs, against 7.4 us with pointer loads)
    {"TILE_M": 64, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": False},
    # plain pointer loads (short kernels took them when every program built its own
    # descriptors at the start)
    {"TILE_M": 64, "TILE_N": 128, "TILE_K": 128, "num_warps": 4, "num_stages": 3,
     "persistent": True, "descriptors": False},
    {"TILE_M": 128, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 5,
     "persistent": False, "descriptors": False},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 3, "persistent": False,
     "descriptors": False},
    {"TILE_M": 64, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 4,
     "persistent": False, "descriptors": False},
    {"TILE_M": 64, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": False,
     "descriptors": False},
    # one wave of narrow tiles with a deep pipeline (cuBLAS's form at 1024^3: 128 x 64,
    # 8 stages), and 256 x 128 tiles (its form at 2048^3 and 4096^3)
    {"TILE_M": 128, "TILE_N": 64, "num_warps": 4, "num_stages": 8, "persistent": False},
    {"TILE_M": 128, "TILE_N": 64, "num_warps": 4, "num_stages": 6, "persistent": False,
     "descriptors": False},
    {"TILE_M": 256, "TILE_N": 128, "num_warps": 8, "num_stages": 3, "persistent": True},
    # a last wave of tiles shared out along K (3072^3: 288 tiles of 128 x 256 on 132 SMs)
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
     "stream_k": 4},
    {"TILE_M": 128, "TILE_N": 128, "num_warps": 4, "num_stages": 5, "persistent": True,
     "stream_k": 2},
    # tiles of 192 computed as 128 + 64 (split_tiles): 3072^3 is 256 tiles of 192 x 192
    # (cuBLAS's form; 98 us against 105 us for the best power-of-two tile), 512 x 6144 is
    # 128 tiles of 128 x 192 (45 us with stream-K over 2 parts, against 52 us)
    {"TILE_M": 128, "TILE_N": 192, "num_warps": 8, "num_stages": 4, "persistent": True,
     "split_tiles": True},
    {"TILE_M": 128, "TILE_N": 192, "num_warps": 8, "num_stages": 4, "persistent": True,
     "split_tiles": True, "stream_k": 2},
    {"TILE_M": 192, "TILE_N": 192, "num_warps": 8, "num_stages": 3, "persistent": True,
     "split_tiles": True},
    # the largest shapes: Triton's warp specialisation of the tile loop, wider L2 groups
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
     "warp_specialize": True},
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 4, "persistent": True,
     "flatten": True, "group_m": 16},
    # the hand-written Hopper kernel (backends/cuda: 128 x 256 or 128 x 192 tiles, clusters
    # of two sharing B by multicast; it won 3072^3 at 192 wide); the defines and options
    # are those of its Triton fallback
    {"TILE_M": 128, "TILE_N": 256, "num_warps": 8, "num_stages": 3, "persistent": True,
     "backend": "cuda"},
]


# 128 rows of tokens: cuBLAS runs 64 x 64 tiles with 13 stages there (128 tiles at
# N = 4096, one wave); deep pipelines of small tiles (196 KB of shared memory each; not
# yet timed on the H200)
_FEW_ROWS: list[Config] = [
    {"TILE_M": 64, "TILE_N": 64, "num_warps": 4, "num_stages": 12, "persistent": False},
    {"TILE_M": 64, "TILE_N": 64, "TILE_K": 128, "num_warps": 4, "num_stages": 6,
     "persistent": False},
]


def _decode(rows: int, k_steps: tuple[int, ...], extra: Config) -> list[Config]:
    return [{"TILE_M": rows, "TILE_N": n, "TILE_K": k, "num_stages": s, "num_warps": 4,
             "persistent": False, **extra, **({} if tma else {"descriptors": False})}
            for tma, n, k, s in itertools.product((True, False), (64, 32, 128), k_steps,
                                                  (4, 6))]


def gemm_space(bucket: dict[str, int]) -> list[Config]:
    """f16/bf16 GEMM (kernels/gemm.co) candidates for a shape bucket."""
    if bucket["M"] <= 16:
        return _decode(16, (256, 128), {})
    if bucket["M"] <= 64:
        return _decode(64, (128, 256), {})
    if bucket["M"] <= 128:
        return _LARGE_GEMM + _FEW_ROWS
    return _LARGE_GEMM


def fp8_space(bucket: dict[str, int]) -> list[Config]:
    """e4m3 GEMM (kernels/gemm_fp8.co, K steps of 128) candidates."""
    if bucket["M"] <= 64:
        return _decode(16 if bucket["M"] <= 16 else 64, (256, 128), {})
    return [{**c, "TILE_K": 128} for c in _LARGE_GEMM
            if c.get("TILE_K", 64) == 64 and "backend" not in c] + [
        {"TILE_M": 128, "TILE_N": 256, "TILE_K": 64, "WARP_K": 32, "num_warps": 8,
         "num_stages": 4, "persistent": True}]


def memory_space(bucket: dict[str, int]) -> list[Config]:
    """Copy and element-wise add (kernels/copy.co, add.co) candidates."""
    del bucket
    return [{"TILE_R": r, "TILE_C": c, "num_warps": w}
            for (r, c), w in itertools.product(((64, 256), (32, 256), (16, 512), (8, 1024),
                                                (32, 128)), (4, 8))]


SPACES = {"gemm": gemm_space, "gemm_fp8": fp8_space, "copy": memory_space,
          "add": memory_space}
