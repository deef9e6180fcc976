"""2:4 structured sparsity on the host: prune a dense matrix, pack it with its metadata in
the format ``mma.LA.LB.sp acc, a_packed, b, meta`` reads (spec 5.8), and unpack it again.

A 2:4 sparse ``[M, K]`` matrix keeps at most two non-zeros in every group of four
consecutive columns of a row. It is stored as two tensors:

* ``packed``: ``[M, K/2]``, same dtype: the two kept values of each group, in column order;
* ``meta``: ``u8 [M, ceil(K/8)]``: per group, the positions ``i0 < i1`` (0..3) of the kept
  values as a 4-bit nibble ``i0 | i1 << 2``; two groups share a byte, the even group in the
  low nibble.

One row, K = 16 (four groups, two metadata bytes)::

    dense   col:  0  1  2  3 | 4  5  6  7 | 8  9 10 11 | 12 13 14 15
            val:  a  .  b  . | .  c  .  d | e  f  .  . |  .  .  .  g
                  group 0      group 1      group 2      group 3
    kept (i0,i1):  (0, 2)       (1, 3)       (0, 1)       (0, 3)  <- one non-zero: it
                                                                     and the lowest zero
    packed  col:  0  1    2  3    4  5    6  7
            val:  a  b    c  d    e  f    0  g
    nibble i0 | i1 << 2:
                  0b1000=0x8   0b1101=0xD   0b0100=0x4   0b1100=0xC
    meta   byte:  [0] = 0xD8 (group 1 high, group 0 low)   [1] = 0xC4

So ``packed[m, 2g + t] == dense[m, 4g + i_t]``. A group with fewer than two non-zeros
still names two positions (the non-zero one and the lowest other one, or 0 and 1 for
an all-zero group), so ``i0 < i1`` always holds.

Interoperability with torch's semi-structured tensors (``to_sparse_semi_structured``):

* CUTLASS backend, f16 and bf16: the packed values are the same (``[M, K/2]``, the kept
  values of each group in column order). The metadata holds the same 4-bit entries, but
  torch reads our bytes two at a time as int16 words and reorders the words into the
  interleaved order of the ``mma.sync`` fragments, so it does not convert by a reshape.
* CUTLASS backend, int8: another packing of values and metadata; nothing converts directly.
* cuSPARSELt backend (and e4m3): values and metadata live in one opaque compressed buffer.

What always converts, exactly and losslessly for 2:4 matrices, is the dense matrix:
``compress_2_4(semi.to_dense())`` one way and
``to_sparse_semi_structured(decompress_2_4(packed, meta))`` the other. torch's tensors
need a CUDA device (sm_80 or newer) and shapes that meet the backend's minimum tile
sizes; the functions here run on any device, for any dtype and any K that is a multiple
of 4.
"""

from __future__ import annotations

import torch

__all__ = ["compress_2_4", "decompress_2_4", "is_2_4", "prune_2_4"]


def prune_2_4(dense: torch.Tensor) -> torch.Tensor:
    """Magnitude pruning to 2:4: in each group of four columns of each row, keep the two
    entries of largest magnitude (the lower column on ties) and zero the other two. The
    result has ``dense``'s shape, dtype and device; its last dimension must be a multiple
    of 4."""
    groups = _groups(dense)
    order = groups.to(torch.float32).abs().argsort(dim=-1, descending=True, stable=True)
    keep = torch.zeros(groups.shape, dtype=torch.bool, device=dense.device)
    keep.scatter_(-1, order[..., :2], True)
    bits = _bits(groups)  # (fp8 has no CPU where/gather: move the bit patterns instead)
    zero = _bits(torch.zeros((), dtype=dense.dtype, device=dense.device))
    return torch.where(keep, bits, zero).view(dense.dtype).reshape(dense.shape)


def is_2_4(dense: torch.Tensor) -> bool:
    """Whether every group of four columns holds at most two non-zeros."""
    return bool(((_groups(dense) != 0).sum(dim=-1) <= 2).all())


def compress_2_4(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(packed, meta)`` of a 2:4 sparse ``[..., M, K]`` matrix (layout above): ``packed``
    ``[..., M, K/2]`` of ``dense``'s dtype, ``meta`` ``uint8 [..., M, ceil(K/8)]``.
    Raises ``ValueError`` when a group holds more than two non-zeros (prune first)."""
    groups = _groups(dense)
    nonzero = groups.to(torch.float32) != 0
    if bool((nonzero.sum(dim=-1) > 2).any()):
        raise ValueError("compress_2_4: a group of four columns holds more than two "
                         "non-zeros; prune it first (prune_2_4)")
    # the kept positions: the non-zeros first, then the lowest zero positions, in order
    rank = torch.arange(4, device=dense.device)
    score = torch.where(nonzero, rank, rank + 4)
    positions = score.argsort(dim=-1)[..., :2].sort(dim=-1).values  # [..., M, G, 2]
    packed = _bits(groups).gather(-1, positions).view(dense.dtype)
    packed = packed.reshape(*dense.shape[:-1], -1)
    nibbles = positions[..., 0] | (positions[..., 1] << 2)  # [..., M, G]
    if nibbles.shape[-1] % 2:
        nibbles = torch.nn.functional.pad(nibbles, (0, 1))
    pairs = nibbles.reshape(*nibbles.shape[:-1], -1, 2)
    meta = (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)
    return packed.contiguous(), meta.contiguous()


def decompress_2_4(packed: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
    """The dense ``[..., M, K]`` matrix of ``(packed, meta)``, ``K = 2 * packed.shape[-1]``
    (the inverse of ``compress_2_4``)."""
    half = packed.shape[-1]
    if half % 2 or meta.shape[:-1] != packed.shape[:-1] or meta.shape[-1] != -(-half // 4):
        raise ValueError(f"decompress_2_4: packed {list(packed.shape)} and metadata "
                         f"{list(meta.shape)} do not fit (expected [..., M, K/2] and "
                         "[..., M, ceil(K/8)])")
    count = half // 2
    g = torch.arange(count, device=packed.device)
    nibbles = (meta.to(torch.int64)[..., g // 2] >> (4 * (g % 2))) & 0xF  # [..., M, G]
    positions = torch.stack([nibbles & 3, (nibbles >> 2) & 3], dim=-1)  # [..., M, G, 2]
    values = _bits(packed).reshape(*packed.shape[:-1], count, 2)
    zero = _bits(torch.zeros((), dtype=packed.dtype, device=packed.device))
    dense = zero.expand(*packed.shape[:-1], count, 4).clone()
    dense.scatter_(-1, positions, values)
    return dense.view(packed.dtype).reshape(*packed.shape[:-1], 4 * count)


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The bit patterns of ``x`` as integers of the same size."""
    return x.view(_SAME_SIZE_INT[x.element_size()]) if x.dim() else \
        x.reshape(1).view(_SAME_SIZE_INT[x.element_size()]).reshape(())


def _groups(dense: torch.Tensor) -> torch.Tensor:
    if dense.dim() < 2 or dense.shape[-1] % 4:
        raise ValueError(f"2:4 sparsity needs a matrix whose last dimension is a multiple "
                         f"of 4, got shape {list(dense.shape)}")
    return dense.reshape(*dense.shape[:-1], -1, 4)
