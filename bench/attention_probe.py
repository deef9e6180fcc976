"""croqtile's attention forward (croqtile/kernels/attention.co as croqtile.nn compiles it)
against torch SDPA (cuDNN on Hopper), beside hand-edited Triton variants of the generated
kernel (each applying one technique of Triton 3.6's 06-fused-attention tutorial or of
FlashAttention-3), combinations of them, croqtile's new warp-specialised form, and the
tutorial's kernel adapted to the same inputs (the upper reference for Triton 3.6); a few
not-causal forms against SDPA not causal. Also the backward: croqtile.nn's (autograd
through cf.scaled_dot_product_attention: attention_backward.co's three kernels) against
SDPA's. Every form is checked against SDPA first (rel error < 2e-2); timings are medians
of PROBE_REPS interleaved do_bench rounds; the table gives SDPA time / form time.

One self-contained file (it imports the installed croqtile). On a CUDA
machine:

    python bench/attention_probe.py      # everything: about 3-4 min on an H200

Environment flags:
    PROBE_VARIANTS=a,b,...   forward forms to run (default: all of VARIANTS; the ones in
                             EXCLUDED may be named too; sdpa is always timed)
    PROBE_SKIP=a,b,...       forms to leave out
    PROBE_NC=0               leave out the not-causal forms
    PROBE_S=2048,4096,8192   sequence lengths (L = S)
    PROBE_B=1 PROBE_H=32 PROBE_HKV=8 PROBE_D=128
    PROBE_REPS=3             interleaved rounds of do_bench (medians)
    PROBE_FWD=0 / PROBE_BWD=0   leave out the forward / the backward
    PROBE_BWD_TILES=a;b;...  backward tiles to time beside the library's, each
                             DQ_ROWS,DQ_COLS,DKV_ROWS,DKV_COLS,WG_ROWS[,STAGES]
                             (croqtile.nn.attention_ops.BackwardTiles; STAGES: num_stages),
                             e.g. "128,64,64,128,64;128,64,32,64,64;64,64,32,128,64,3"
                             (their three kernels timed, the forward's lse made once;
                             dk/dv in the form croqtile.nn's rule picks for these tiles)
    PROBE_BWD_FORMS=grouped,split  also time croqtile.nn's backward (and each tile set)
                             with dk/dv forced into these forms (attention_ops.
                             BACKWARD_SPLIT_BLOCKS: grouped, a block per key tile of a
                             key/value head; split, one per key tile of a query head, the
                             partials summed after), named "nn[grouped]", "bwd[...]/split"
    PROBE_CHECK_ONLY=1       check every form against SDPA, time nothing
    PROBE_SASS=1             print registers / spills / shared memory / warps of the hand
                             and tutorial forms (Triton's records)
    PROBE_CSV=path           also write the table as CSV
    PROBE_PREFLIGHT=0        skip the pre-flight (default: each warp-specialised form runs
                             once first in a child process, PROBE_PREFLIGHT_LIMIT=90 s
                             each, so that one that hangs costs itself only)
    PROBE_DEADLINE=345       seconds after which a watchdog prints where the run is and
                             exits (what was timed is printed as it goes)
    PROBE_TRACE=1            print the traceback of a form that fails
    PROBE_CUDAGRAPH=1        time with triton.testing.do_bench_cudagraph (no host time in
                             the figures, no L2 flush) instead of do_bench

Without a GPU, TRITON_INTERPRET=1 runs every form in Triton's interpreter at a tiny shape
(PROBE_S=128 PROBE_H=4 PROBE_HKV=2 PROBE_D=64 by default there; tiles of 32) and checks it
against a float64 reference (the hand and tutorial forms write f32 there: 1e-4), about 30 s:

    TRITON_INTERPRET=1 python bench/attention_probe.py
    TRITON_INTERPRET=1 PROBE_FAKE_BENCH=1 ... also runs the timing code (one wall-clock call)

(PROBE_SASS=1 prints each form's registers, spills and shared memory on the GPU.)

Every form takes q [B, H, L, D] (strided views of [B, L, H, D] projections), k, v
[B, HKV, S, D] (grouped-query: query head h reads key/value head h // (H // HKV)), causal,
and writes o as [B, L, H, D] (viewed as [B, H, L, D] for the check, like croqtile.nn).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
import traceback
import warnings
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
LOG2E = 1.4426950408889634
KV_BUDGET = 16777216  # attention.co's: K/V elements the blocks in flight share (L2)
ELEMENTS = {torch.bfloat16: "bf16", torch.float16: "f16"}  # croqtile's element types

# --------------------------------------------------------------------------- kernels
# attn_hand is the generated kernel (croqtile/kernels/attention.co, bf16, D = 128, no mask,
# GPU tiles ROWS = COLS = 128, WG_ROWS = 64, 8 warps, 3 stages, host tensor descriptors,
# the banded longest-first 1-D grid) written out with constexpr switches, each of which
# applies one technique; all switches off it is the generated kernel statement for
# statement (same loads, loop, masking, softmax and store; see GENERATED below).


@triton.jit
def _tile(desc, b, h, row, DDESC: tl.constexpr, N: tl.constexpr, D: tl.constexpr):
    """N rows (from ``row``) of one head: a [1, 1, N, D] block of a 4-D host descriptor
    (as generated), or an [N, D] block of a per-head 2-D descriptor made in the kernel."""
    if DDESC == 1:
        return desc.load([row, 0])
    else:
        return tl.reshape(desc.load([b, h, row, 0]), [N, D])


@triton.jit
def _dot(a, b, acc, ON_CPU: tl.constexpr):
    """tl.dot; in the interpreter (f32 operands there) in full precision, not TF32."""
    if ON_CPU:
        return tl.dot(a, b, acc, out_dtype=tl.float32, input_precision="ieee")
    else:
        return tl.dot(a, b, acc, out_dtype=tl.float32)


@triton.jit
def _step(kt, q, k_desc, v_desc, batch, kv_head, acc, running_max, denominator, sc,
          rows, d_S, causal, whole_tiles, MASK: tl.constexpr, CAUSAL: tl.constexpr,
          ROWS: tl.constexpr, COLS: tl.constexpr, D: tl.constexpr, DDESC: tl.constexpr,
          LATE_L: tl.constexpr, ADD_MASK: tl.constexpr, ON_CPU: tl.constexpr):
    """One key tile of the online softmax, as generated. MASK: 0 none, 1 under the
    generated ``if kt >= whole_tiles``, 2 always (the diagonal loop of a split)."""
    ax_n = tl.arange(0, COLS)
    k = _tile(k_desc, batch, kv_head, kt * COLS, DDESC, COLS, D)
    if ON_CPU:
        k = k.to(tl.float32)
    scores = tl.full([ROWS, COLS], 0.0, tl.float32)
    scores = _dot(q, tl.trans(k), scores, ON_CPU)
    if MASK == 1:
        if kt >= whole_tiles:
            key = kt * COLS + ax_n
            if CAUSAL == 0:
                cond = (key >= d_S)[None, :] & (rows >= 0)[:, None]
            elif CAUSAL == 1:
                cond = (key >= d_S)[None, :] | (key[None, :] > rows[:, None])
            else:
                cond = (key >= d_S)[None, :] | ((causal != 0) & (key[None, :] > rows[:, None]))
            scores = tl.where(cond, float('-inf') + tl.full([ROWS, COLS], 0.0, tl.float32), scores)
    elif MASK == 3:  # every tile, one compare and select an element: key > min(row, S - 1)
        # (rows holds that limit here)
        key = kt * COLS + ax_n
        scores = tl.where(key[None, :] > rows[:, None],
                          float('-inf') + tl.full([ROWS, COLS], 0.0, tl.float32), scores)
    elif MASK == 2:
        key = kt * COLS + ax_n
        if CAUSAL == 0:
            cond = (key >= d_S)[None, :] & (rows >= 0)[:, None]
        elif CAUSAL == 1:
            cond = (key >= d_S)[None, :] | (key[None, :] > rows[:, None])
        else:
            cond = (key >= d_S)[None, :] | ((causal != 0) & (key[None, :] > rows[:, None]))
        if ADD_MASK:  # the tutorial's form: a finite penalty added (no -inf rows)
            scores = scores + tl.where(cond, -1.0e6, 0.0)
        else:
            scores = tl.where(cond, float('-inf') + tl.full([ROWS, COLS], 0.0, tl.float32), scores)
    old_max = running_max
    running_max = tl.max(scores, 1)
    running_max = tl.maximum(running_max, old_max)
    base = tl.where((running_max == float('-inf')), 0.0, running_max)
    correction = tl.exp2(((old_max - base) * sc))
    scores = tl.exp2(((scores * sc) - (base * sc)[:, None]))
    probs = scores.to(q.dtype)
    tile_sum = tl.sum(scores, 1)
    if not LATE_L:
        denominator = ((denominator * correction) + tile_sum)
    acc = (acc * correction[:, None])
    v = _tile(v_desc, batch, kv_head, kt * COLS, DDESC, COLS, D)
    if ON_CPU:
        v = v.to(tl.float32)
        probs = probs.to(tl.float32)
    acc = _dot(probs, v, acc, ON_CPU)
    if LATE_L:  # the tutorial's order: the row sums after the product (fewer live registers)
        denominator = ((denominator * correction) + tile_sum)
    return acc, running_max, denominator


@triton.jit
def attn_hand(q_desc, k_desc, v_desc, o_desc, q_ptr, k_ptr, v_ptr, o_ptr, scale_ptr,
              d_B, d_H, d_L, d_S, d_HKV, sq0, sq1, sq2, sk0, sk1, sk2, sv0, sv1, sv2,
              causal,
              ROWS: tl.constexpr, COLS: tl.constexpr, D: tl.constexpr,
              CAUSAL: tl.constexpr,  # -1: the runtime flag (as generated); 0 / 1: constexpr
              SPLIT: tl.constexpr,  # unmasked loop to whole_tiles, then the masked tiles
              WS: tl.constexpr,  # tl.range(warp_specialize=True) on the (unmasked) loop
              WS_DIAG: tl.constexpr,  # ... and on the diagonal loop of a split
              DDESC: tl.constexpr,  # per-head 2-D descriptors made in the kernel
              RECIP: tl.constexpr,  # epilogue: one reciprocal per row, a multiply per element
              LATE_L: tl.constexpr, ADD_MASK: tl.constexpr, ORDER: tl.constexpr,
              ON_CPU: tl.constexpr, KV_BUDGET: tl.constexpr):
    ax_rows = tl.arange(0, ROWS)
    slot = tl.program_id(0)
    row_tiles = ((d_L + ROWS - 1) // ROWS)
    if ORDER == 0:  # the generated order: bands of planes, longest row tiles first
        band = tl.minimum((d_B * d_H), tl.maximum(1, (KV_BUDGET // ((2 * D) * d_S))))
        first_plane = ((slot // (row_tiles * band)) * band)
        planes = tl.minimum(band, ((d_B * d_H) - first_plane))
        within = (slot - (first_plane * row_tiles))
        plane = (first_plane + (within % planes))
        row_tile = ((row_tiles - 1) - (within // planes))
    else:  # the tutorial's: every row tile of a head in turn, shortest first
        plane = slot // row_tiles
        row_tile = slot % row_tiles
    head = (plane % d_H)
    batch = (plane // d_H)
    kv_head = (head // (d_H // d_HKV))
    sc = tl.load(scale_ptr + 0)
    running_max = tl.full([ROWS], float('-inf'), tl.float32)
    denominator = tl.full([ROWS], 0.0, tl.float32)
    acc = tl.full([ROWS, D], 0.0, tl.float32)
    rows = row_tile * ROWS + ax_rows
    if CAUSAL == 1:
        whole_tiles = tl.minimum(((row_tile * ROWS) // COLS), (d_S // COLS))
        key_tiles = tl.minimum((((((row_tile + 1) * ROWS) + COLS) - 1) // COLS), ((d_S + COLS - 1) // COLS))
    elif CAUSAL == 0:
        whole_tiles = d_S // COLS
        key_tiles = (d_S + COLS - 1) // COLS
    else:
        whole_tiles = tl.where(causal != 0, tl.minimum(((row_tile * ROWS) // COLS), (d_S // COLS)), (d_S // COLS))
        key_tiles = tl.where(causal != 0, tl.minimum((((((row_tile + 1) * ROWS) + COLS) - 1) // COLS), ((d_S + COLS - 1) // COLS)), ((d_S + COLS - 1) // COLS))
    if DDESC == 2:  # 4-D descriptors made in the kernel (croqtile's descriptors="kernel")
        qd = tl.make_tensor_descriptor(q_ptr, shape=[d_B, d_H, d_L, D],
                                       strides=[sq0, sq1, sq2, 1], block_shape=[1, 1, ROWS, D])
        kd = tl.make_tensor_descriptor(k_ptr, shape=[d_B, d_HKV, d_S, D],
                                       strides=[sk0, sk1, sk2, 1], block_shape=[1, 1, COLS, D])
        vd = tl.make_tensor_descriptor(v_ptr, shape=[d_B, d_HKV, d_S, D],
                                       strides=[sv0, sv1, sv2, 1], block_shape=[1, 1, COLS, D])
        od = tl.make_tensor_descriptor(o_ptr, shape=[d_B, d_H, d_L, D],
                                       strides=[d_L * d_H * D, D, d_H * D, 1],
                                       block_shape=[1, 1, ROWS, D])
    elif DDESC:
        qd = tl.make_tensor_descriptor(q_ptr + batch * sq0 + head * sq1, shape=[d_L, D],
                                       strides=[sq2, 1], block_shape=[ROWS, D])
        kd = tl.make_tensor_descriptor(k_ptr + batch * sk0 + kv_head * sk1, shape=[d_S, D],
                                       strides=[sk2, 1], block_shape=[COLS, D])
        vd = tl.make_tensor_descriptor(v_ptr + batch * sv0 + kv_head * sv1, shape=[d_S, D],
                                       strides=[sv2, 1], block_shape=[COLS, D])
        od = tl.make_tensor_descriptor(o_ptr + batch * (d_L * d_H * D) + head * D,
                                       shape=[d_L, D], strides=[d_H * D, 1],
                                       block_shape=[ROWS, D])
    else:
        qd = q_desc
        kd = k_desc
        vd = v_desc
        od = o_desc
    q = _tile(qd, batch, head, row_tile * ROWS, DDESC, ROWS, D)
    if ON_CPU:
        q = q.to(tl.float32)
    if SPLIT == 2:  # the whole tiles only (a shape with S % COLS == 0, not causal)
        for kt in tl.range(0, whole_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 0, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    elif SPLIT == 5:  # one loop, every tile masked (no branch: what Hopper's WS accepts)
        if CAUSAL == 0:
            limit = tl.full([ROWS], 0, tl.int32) + (d_S - 1)
        else:
            limit = tl.minimum(rows, d_S - 1)
        for kt in tl.range(0, key_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, limit, d_S,
                causal, whole_tiles, 3, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    elif SPLIT == 4:  # the masked tiles first (a plain loop), then the whole tiles
        for kt in tl.range(whole_tiles, key_tiles):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 2, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
        for kt in tl.range(0, whole_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 0, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    elif SPLIT == 3:  # the whole tiles, then one masked tile as straight-line code (right
        # when key_tiles - whole_tiles <= 1, which ROWS == COLS guarantees; a tile wholly
        # past S or the diagonal takes no weight)
        for kt in tl.range(0, whole_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 0, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
        acc, running_max, denominator = _step(
            whole_tiles, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows,
            d_S, causal, whole_tiles, 2, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    elif SPLIT:
        for kt in tl.range(0, whole_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 0, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
        for kt in tl.range(whole_tiles, key_tiles, warp_specialize=WS_DIAG):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 2, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    else:
        for kt in tl.range(0, key_tiles, warp_specialize=WS):
            acc, running_max, denominator = _step(
                kt, q, kd, vd, batch, kv_head, acc, running_max, denominator, sc, rows, d_S,
                causal, whole_tiles, 1, CAUSAL, ROWS, COLS, D, DDESC, LATE_L, ADD_MASK, ON_CPU)
    if SPLIT != 2:  # (a row without keys; none when every tile is whole)
        denominator = tl.where((denominator > 0.0), denominator, 1.0)
    if RECIP:
        acc = acc * (1.0 / denominator)[:, None]
    else:
        acc = (acc / denominator[:, None])
    out = acc.to(o_ptr.dtype.element_ty)
    if DDESC == 1:
        od.store([row_tile * ROWS, 0], out)
    else:
        od.store([batch, head, row_tile * ROWS, 0], tl.reshape(out, [1, 1, ROWS, D]))


# ----------------------------------------------------------- the tutorial's kernel
# Triton 3.6 python/tutorials/06-fused-attention.py's forward (_attn_fwd/_attn_fwd_inner),
# adapted: q [B, H, L, D] with strides, GQA k/v, o [B, L, H, D], no log-sum-exp output
# (ours writes none either), L a multiple of BLOCK_M, L == S, causal (STAGE 3: the
# off-band loop without a mask, then the diagonal band with one).


@triton.jit
def _tut_inner(acc, l_i, m_i, q, kd, vd, b, kvh, start_m, qk_scale, offs_m, offs_n, n_ctx,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
               STAGE: tl.constexpr, WS: tl.constexpr, DDESC: tl.constexpr,
               ON_CPU: tl.constexpr):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, n_ctx
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _tile(kd, b, kvh, start_n, DDESC, BLOCK_N, D)
        if ON_CPU:
            k = k.to(tl.float32)
        qk = _dot(q, k.T, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), ON_CPU)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = _tile(vd, b, kvh, start_n, DDESC, BLOCK_N, D)
        if ON_CPU:  # (full precision in the interpreter, whose bf16 conversion truncates)
            v = v.to(tl.float32)
        else:
            p = p.to(v.dtype)
        acc = _dot(p, v, acc, ON_CPU)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_tut(q_desc, k_desc, v_desc, o_desc, q_ptr, k_ptr, v_ptr, o_ptr, sm_scale,
             d_H, d_L, d_HKV, sq0, sq1, sq2, sk0, sk1, sk2, sv0, sv1, sv2,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
             STAGE: tl.constexpr, WS: tl.constexpr, DDESC: tl.constexpr,
             HEAVY: tl.constexpr, ON_CPU: tl.constexpr):
    start_m = tl.program_id(0)
    if HEAVY:  # longest causal row tiles first
        start_m = tl.num_programs(0) - 1 - start_m
    off_hz = tl.program_id(1)
    off_z = off_hz // d_H
    off_h = off_hz % d_H
    kvh = off_h // (d_H // d_HKV)
    if DDESC:
        qd = tl.make_tensor_descriptor(q_ptr + off_z * sq0 + off_h * sq1, shape=[d_L, D],
                                       strides=[sq2, 1], block_shape=[BLOCK_M, D])
        kd = tl.make_tensor_descriptor(k_ptr + off_z * sk0 + kvh * sk1, shape=[d_L, D],
                                       strides=[sk2, 1], block_shape=[BLOCK_N, D])
        vd = tl.make_tensor_descriptor(v_ptr + off_z * sv0 + kvh * sv1, shape=[d_L, D],
                                       strides=[sv2, 1], block_shape=[BLOCK_N, D])
        od = tl.make_tensor_descriptor(o_ptr + off_z * (d_L * d_H * D) + off_h * D,
                                       shape=[d_L, D], strides=[d_H * D, 1],
                                       block_shape=[BLOCK_M, D])
    else:
        qd = q_desc
        kd = k_desc
        vd = v_desc
        od = o_desc
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    qk_scale = sm_scale
    qk_scale *= 1.44269504
    q = _tile(qd, off_z, off_h, start_m * BLOCK_M, DDESC, BLOCK_M, D)
    if ON_CPU:
        q = q.to(tl.float32)
    if STAGE & 1:
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, kd, vd, off_z, kvh, start_m, qk_scale,
                                   offs_m, offs_n, d_L, BLOCK_M, BLOCK_N, D, 4 - STAGE, WS,
                                   DDESC, ON_CPU)
    if STAGE & 2:
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, kd, vd, off_z, kvh, start_m, qk_scale,
                                   offs_m, offs_n, d_L, BLOCK_M, BLOCK_N, D, 2, False,
                                   DDESC, ON_CPU)
    acc = acc / l_i[:, None]
    out = acc.to(o_ptr.dtype.element_ty)
    if DDESC:
        od.store([start_m * BLOCK_M, 0], out)
    else:
        od.store([off_z, off_h, start_m * BLOCK_M, 0], tl.reshape(out, [1, 1, BLOCK_M, D]))


# --------------------------------------------------------------------------- launchers


def _desc(t, shape, strides, block):
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(shape), list(strides), list(block))


_ALLOCATOR = []


def _set_allocator(device):
    """Device-made descriptors need a global scratch allocator (set once)."""
    if _ALLOCATOR:
        return

    def alloc(size: int, align: int, stream):
        return torch.empty(size, dtype=torch.int8, device=device)
    triton.set_allocator(alloc)
    _ALLOCATOR.append(alloc)


def hand_launcher(rows=128, cols=128, num_warps=8, num_stages=3, causal_const=-1, split=0,
                  ws=0, ws_diag=0, ddesc=0, recip=0, late_l=0, add_mask=0, order=0,
                  maxnreg=None):
    """A callable (q, k, v, causal, scale) -> o [B, L, H, D] running attn_hand."""
    def run(q, k, v, causal, scale):
        b, h, length, d = q.shape
        hkv, s = k.shape[1], k.shape[2]
        # (f32 in the interpreter, whose bf16 conversion truncates: checked to 1e-4 there)
        o = torch.empty((b, length, h, d), dtype=q.dtype if q.is_cuda else torch.float32,
                        device=q.device)
        if ddesc:
            _set_allocator(q.device)
            descs = (None, None, None, None)
        else:
            descs = (_desc(q, (b, h, length, d), q.stride(), (1, 1, rows, d)),
                     _desc(k, (b, hkv, s, d), k.stride(), (1, 1, cols, d)),
                     _desc(v, (b, hkv, s, d), v.stride(), (1, 1, cols, d)),
                     _desc(o, (b, h, length, d), (length * h * d, d, h * d, 1), (1, 1, rows, d)))
        grid = (triton.cdiv(length, rows) * b * h,)
        extra = {} if maxnreg is None else {"maxnreg": maxnreg}
        attn_hand[grid](*descs, q, k, v, o, scale, b, h, length, s, hkv,
                        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                        k.stride(2), v.stride(0), v.stride(1), v.stride(2), int(causal),
                        ROWS=rows, COLS=cols, D=d, CAUSAL=causal_const, SPLIT=split, WS=ws,
                        WS_DIAG=ws_diag, DDESC=ddesc, RECIP=recip, LATE_L=late_l,
                        ADD_MASK=add_mask, ORDER=order, ON_CPU=not q.is_cuda,
                        KV_BUDGET=KV_BUDGET, num_warps=num_warps, num_stages=num_stages,
                        **extra)
        return o
    return run


def tut_launcher(block_m=128, block_n=128, num_warps=8, num_stages=3, ws=0, ddesc=0,
                 heavy=0, maxnreg=None):
    def run(q, k, v, causal, scale):
        b, h, length, d = q.shape
        hkv, s = k.shape[1], k.shape[2]
        assert length == s and length % block_m == 0
        # (f32 in the interpreter, whose bf16 conversion truncates: checked to 1e-4 there)
        o = torch.empty((b, length, h, d), dtype=q.dtype if q.is_cuda else torch.float32,
                        device=q.device)
        if ddesc:
            _set_allocator(q.device)
            descs = (None, None, None, None)
        else:
            descs = (_desc(q, (b, h, length, d), q.stride(), (1, 1, block_m, d)),
                     _desc(k, (b, hkv, s, d), k.stride(), (1, 1, block_n, d)),
                     _desc(v, (b, hkv, s, d), v.stride(), (1, 1, block_n, d)),
                     _desc(o, (b, h, length, d), (length * h * d, d, h * d, 1),
                           (1, 1, block_m, d)))
        sm_scale = d ** -0.5  # (the probe's scale: SDPA's default)
        grid = (length // block_m, b * h)
        extra = {} if maxnreg is None else {"maxnreg": maxnreg}
        attn_tut[grid](*descs, q, k, v, o, sm_scale, h, length, hkv,
                       q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                       k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                       BLOCK_M=block_m, BLOCK_N=block_n, D=d, STAGE=3 if causal else 1,
                       WS=ws, DDESC=ddesc,
                       HEAVY=heavy, ON_CPU=not q.is_cuda, num_warps=num_warps,
                       num_stages=num_stages, **extra)
        return o
    return run


def croqtile_kernel(ws=False, options=None):
    """croqtile/kernels/attention.co compiled as croqtile.nn compiles it for these inputs
    (croqtile.nn.attention_ops.attention_variant: its defines, tiles and options; ``ws``: the
    warp-specialised form), optionally under other compile options."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    def run(q, k, v, causal, scale):
        fn = run.fn
        if fn is None:
            element = {torch.bfloat16: "bf16", torch.float16: "f16"}[q.dtype]
            kind = "gpu" if q.is_cuda else "cpu"
            variant = attention_ops.attention_variant(element, q.shape[-1], False, kind, ws)
            defines = dict(variant.defines + variant.names)
            defines["NAME"] = "attention"
            source = (kernels.KERNELS / "attention.co").read_text()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn = run.fn = croqtile.compile(source, defines=defines, **{
                    **dict(variant.options), **(options or {})}).attention
        return fn(q, k, v, causal, scale)
    run.fn = None
    return run


# The forward variants: name -> (what it is, kind, launcher arguments). Each "hand"
# variant applies one technique to the generated kernel; "combo"/"allmask_ws_combo" combine
# the ones expected to help; "tut*" are the tutorial's kernel; "kernel*" croqtile's own
# compiled function. causal=0 in the arguments: a not-causal variant (timed against SDPA
# not causal). Every one of them compiles for sm_90 with Triton 3.6 (checked without a GPU:
# PROBE_SASS=1 prints their registers, spills and shared memory).
VARIANTS = {
    # -- causal
    "kernel": ("croqtile's compiled kernel (croqtile.nn's defines and options), called "
               "directly", "croq", {}),
    "nn": ("croqtile.nn.functional.scaled_dot_product_attention, the function a model "
           "calls (host path included; the default form)", "nn", {}),
    "kernel_ws": ("croqtile's warp-specialised form (attention.co EVERY_TILE=1, compiled "
                  "with warp_specialize, 4 warps, 2 stages, descriptors made in the kernel: "
                  "croqtile.nn.attention_ops.ATTENTION_WS_OPTIONS)", "croq", dict(ws=True)),
    "gen": ("the generated kernel before the epilogue change as a hand kernel, all switches off "
            "(= kernel but for its epilogue's division)", "hand", {}),
    "split": ("causal loop split: unmasked tiles, then the diagonal (tutorial STAGE 1/2)",
              "hand", dict(split=1)),
    "diag": ("the loop over whole tiles, the diagonal tile after it as straight-line code",
             "hand", dict(split=3, causal_const=1)),
    "constcausal": ("causal a constexpr (loop bounds and mask folded)", "hand",
                    dict(causal_const=1)),
    "recip": ("epilogue: a reciprocal per row, a multiply per element", "hand", dict(recip=1)),
    "late_l": ("row sums updated after the PV product (tutorial order)", "hand",
               dict(late_l=1)),
    "ddesc": ("per-head 2-D descriptors made in the kernel (tutorial's Hopper+WS form)",
              "hand", dict(ddesc=1)),
    "stages2": ("num_stages=2", "hand", dict(num_stages=2)),
    "cols64": ("COLS=64, 3 stages", "hand", dict(cols=64)),
    "cols64_s4": ("COLS=64, 4 stages", "hand", dict(cols=64, num_stages=4)),
    "r64c64_s2": ("ROWS=64 on 4 warps, COLS=64, 2 stages: 2 blocks an SM (the SM's two "
                  "warpgroups in different blocks, not held in step by the loop's CTA-wide "
                  "barriers)", "hand", dict(rows=64, cols=64, num_warps=4, num_stages=2)),
    "r64c64_s3": ("ROWS=64 on 4 warps, COLS=64, 3 stages: 2 blocks an SM", "hand",
                  dict(rows=64, cols=64, num_warps=4, num_stages=3)),
    "order_tut": ("the tutorial's launch order (head by head, shortest rows first)", "hand",
                  dict(order=1)),
    "allmask": ("one loop, every tile masked by one compare and select an element "
                "(key > min(row, S - 1)), no branch", "hand", dict(split=5, causal_const=1)),
    "allmask_ws_w4": ("allmask + warp_specialize: a producer warpgroup and two consumer "
                      "warpgroups of 64 rows, in-kernel descriptors, 4 warps a warpgroup, "
                      "2 stages", "hand",
                      dict(split=5, causal_const=1, ws=1, ddesc=1, num_warps=4, num_stages=2)),
    "allmask_ws_c64": ("allmask_ws_w4 with COLS=64, 3 stages", "hand",
                       dict(split=5, causal_const=1, ws=1, ddesc=1, num_warps=4, num_stages=3,
                            cols=64)),
    "combo": ("split + constcausal + recip + late_l", "hand",
              dict(split=1, causal_const=1, recip=1, late_l=1)),
    "allmask_ws_combo": ("allmask_ws_w4 + recip + late_l", "hand",
                         dict(split=5, causal_const=1, ws=1, ddesc=1, num_warps=4,
                              num_stages=2, recip=1, late_l=1)),
    "tut": ("Triton tutorial kernel, BM 128, BN 128, 8 warps, 3 stages", "tut", {}),
    "tut_bn64": ("tutorial, BM 128, BN 64, 4 warps, 3 stages", "tut",
                 dict(block_n=64, num_warps=4)),
    "tut_heavy": ("tutorial, longest row tiles first", "tut", dict(heavy=1)),
    "tut_m64": ("tutorial, BM 64, BN 64, 4 warps, 3 stages (2 blocks an SM)", "tut",
                dict(block_m=64, block_n=64, num_warps=4)),
    # -- not causal
    "kernel_nc": ("NOT CAUSAL: croqtile's compiled kernel", "croq", dict(causal=0)),
    "kernel_ws_nc": ("NOT CAUSAL: croqtile's warp-specialised form", "croq",
                     dict(causal=0, ws=True)),
    "nc_whole": ("NOT CAUSAL: one loop over whole tiles, no branch (S % 128 == 0)", "hand",
                 dict(causal_const=0, split=2, causal=0)),
    "nc_ws_w4": ("NOT CAUSAL: nc_whole + warp_specialize (producer + two consumer "
                 "warpgroups), in-kernel descriptors, 4 warps, 2 stages", "hand",
                 dict(causal_const=0, split=2, ws=1, ddesc=1, num_warps=4, num_stages=2,
                      causal=0)),
    "tut_nc": ("NOT CAUSAL: tutorial, BM 128, BN 128, 8 warps, 3 stages", "tut",
               dict(causal=0)),
    "tut_nc_ws": ("NOT CAUSAL: tutorial with warp_specialize (its Hopper form), in-kernel "
                  "descriptors, 4 warps, 2 stages", "tut",
                  dict(causal=0, ws=1, ddesc=1, num_warps=4, num_stages=2)),
}
# Forms tried and left out of the default run (PROBE_VARIANTS may still name them): on
# Hopper, Triton 3.6's warp specialisation (NVGPUWarpSpecialization) applies only to 4-warp
# kernels with one tl.range(warp_specialize=True) loop and no if/else anywhere: at 8 warps
# it leaves the kernel as it was; with two loops (split, diagonal first or after) or a
# masked-tile branch (the generated if) it fails or is skipped; with host descriptors it
# fails. num_stages=4 at COLS=128 needs 288 KiB of shared memory.
EXCLUDED = {
    "ws": ("warp_specialize at 8 warps: no effect (same code as gen)", "hand", dict(ws=1)),
    "ws_w4": ("warp_specialize at 4 warps over the generated loop: not specialised (its "
              "branch), 128 rows on one warpgroup spill", "hand",
              dict(ws=1, ddesc=1, num_warps=4)),
    "split_ws_w4": ("split + warp_specialize, 4 warps: the pass fails", "hand",
                    dict(split=1, ws=1, ddesc=1, num_warps=4, num_stages=2, causal_const=1)),
    "split_ws2_w4": ("split + warp_specialize on both loops: the pass fails", "hand",
                     dict(split=1, ws=1, ws_diag=1, ddesc=1, num_warps=4, num_stages=2,
                          causal_const=1)),
    "diag_ws_w4": ("diag + warp_specialize: the pass fails", "hand",
                   dict(split=3, ws=1, ddesc=1, num_warps=4, num_stages=2, causal_const=1)),
    "diagfirst_ws_w4": ("the diagonal loop first, then the warp-specialised loop: fails",
                        "hand", dict(split=4, ws=1, ddesc=1, num_warps=4, num_stages=2,
                                     causal_const=1)),
    "allmask_ws_4d": ("allmask_ws_w4 with 4-D descriptors made in the kernel", "hand",
                      dict(split=5, causal_const=1, ws=1, ddesc=2, num_warps=4, num_stages=2)),
    "allmask_ws_host": ("allmask_ws_w4 with host descriptors: the pass fails", "hand",
                        dict(split=5, causal_const=1, ws=1, num_warps=4, num_stages=2)),
    "stages4": ("num_stages=4 at COLS=128: 288 KiB of shared memory, does not fit", "hand",
                dict(num_stages=4)),
    "tut_ws_w4": ("tutorial causal with warp_specialize, 4 warps: the pass fails", "tut",
                  dict(ws=1, ddesc=1, num_warps=4, num_stages=2)),
    "nc_gen": ("NOT CAUSAL: the generated kernel as a hand kernel (= kernel_nc)", "hand",
               dict(causal_const=0, causal=0)),
}
ALL_VARIANTS = {**VARIANTS, **EXCLUDED}


def is_causal(name):
    return ALL_VARIANTS[name][2].get("causal", 1) != 0


def make_variant(name, small=False):
    """The callable (q, k, v, causal, scale) -> o of a variant. ``small``: the
    interpreter's version, the same switches on tiles of 32 (16 where the GPU's are 64) and
    4 warps, so that S = 128 crosses several tiles and the diagonal."""
    _, kind, kwargs = ALL_VARIANTS[name]
    kwargs = dict(kwargs)
    kwargs.pop("causal", None)
    if kind == "croq":
        return croqtile_kernel(**kwargs)
    if kind == "nn":
        import croqtile.nn.functional as cf

        def run(q, k, v, causal, scale):  # (returns [B, L, H, D] like the kernels)
            return cf.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1]).transpose(1, 2)
        return run
    if small:
        kwargs["num_warps"] = 4
        for key in ("rows", "cols", "block_m", "block_n"):
            default = 128
            kwargs[key] = 32 if kwargs.get(key, default) == 128 else 16
        if kind == "hand":
            kwargs.pop("block_m"), kwargs.pop("block_n")
        else:
            kwargs.pop("rows"), kwargs.pop("cols")
    return (hand_launcher if kind == "hand" else tut_launcher)(**kwargs)


# --------------------------------------------------------------------------- harness


def env_list(name, default):
    value = os.environ.get(name)
    return [x.strip() for x in value.split(",") if x.strip()] if value else default


def make_inputs(b, h, hkv, s, d, device, dtype, requires_grad=False):
    """q, k, v as a model makes them: [B, S, H, D] projections viewed as [B, H, S, D]."""
    g = torch.Generator(device="cpu").manual_seed(1234)
    leaves = [torch.randn(b, s, n, d, generator=g, dtype=torch.float32).to(device, dtype)
              for n in (h, hkv, hkv)]
    if requires_grad:
        for t in leaves:
            t.requires_grad_(True)
    return leaves, [t.transpose(1, 2) for t in leaves]


def rel_error(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm()).item()


def main() -> int:
    device = "cpu" if INTERPRET or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not INTERPRET:
        print("no CUDA device: run with TRITON_INTERPRET=1 for the CPU check", file=sys.stderr)
        return 2
    small = device == "cpu"
    seqs = [int(x) for x in env_list("PROBE_S", ["128"] if small else ["2048", "4096", "8192"])]
    b = int(os.environ.get("PROBE_B", "1"))
    h = int(os.environ.get("PROBE_H", "4" if small else "32"))
    hkv = int(os.environ.get("PROBE_HKV", "2" if small else "8"))
    d = int(os.environ.get("PROBE_D", "64" if small else "128"))
    reps = int(os.environ.get("PROBE_REPS", "3"))
    do_fwd = os.environ.get("PROBE_FWD", "1") == "1"
    do_bwd = os.environ.get("PROBE_BWD", "1") == "1"
    fake = os.environ.get("PROBE_FAKE_BENCH") == "1"  # (the harness on the CPU: wall time)
    check_only = os.environ.get("PROBE_CHECK_ONLY", "0") == "1" or (small and not fake)
    dtype = torch.bfloat16
    names = env_list("PROBE_VARIANTS", list(VARIANTS))
    skip = set(env_list("PROBE_SKIP", []))
    unknown = [n for n in names if n not in ALL_VARIANTS]
    if unknown:
        print(f"unknown variants {unknown}; known: {list(ALL_VARIANTS)}", file=sys.stderr)
        return 2
    names = [n for n in names if n not in skip]
    if os.environ.get("PROBE_NC", "1") == "0":
        names = [n for n in names if is_causal(n)]
    import croqtile
    try:
        from croqtile.nn import attention_ops
    except ImportError:  # (an older croqtile)
        attention_ops = None
    if not hasattr(attention_ops, "attention_variant"):
        print(f"croqtile at {croqtile.__file__} has no "
              "croqtile.nn.attention_ops.attention_variant: install this checkout (pip "
              "install -e .)",
              file=sys.stderr)
        return 2
    t_start = time.time()
    print(f"croqtile {os.path.dirname(croqtile.__file__)}")
    print(f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (interpreter)'}, "
          f"torch {torch.__version__}, triton {triton.__version__}; B={b} H={h} HKV={hkv} "
          f"D={d} S={seqs} bf16 causal, reps {reps}", flush=True)
    failed: dict[str, str] = {}
    flight = os.environ.get("PROBE_PREFLIGHT", "1")
    if (device == "cuda" and flight == "1") or flight == "force":
        failed.update(preflight([n for n in names if ALL_VARIANTS[n][2].get("ws")], seqs[0],
                                b, h, hkv, d))
    for name in names:
        print(f"  {name:16s} {ALL_VARIANTS[name][0]}")
    makers = {name: make_variant(name, small) for name in names}
    rows = []
    for s in seqs:
        (q0, k0, v0), (q, k, v) = make_inputs(b, h, hkv, s, d, device, dtype)
        scale = torch.full((1,), d ** -0.5 * LOG2E, device=device)
        groups = [("sdpa", True)] + ([("sdpa_nc", False)] if any(
            not is_causal(n) for n in makers) else [])
        forms: dict[str, Any] = {}
        baseline: dict[str, str] = {}  # form -> the SDPA form it is compared with
        for base_name, causal in groups:
            if small:
                reference = F.scaled_dot_product_attention(
                    q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
            else:
                reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                           enable_gqa=True)
            forms[base_name] = (lambda q=q, k=k, v=v, causal=causal:
                                F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                               enable_gqa=True))
            baseline[base_name] = base_name
            if not do_fwd:
                continue
            for name, fn in makers.items():
                if name in failed or is_causal(name) != causal:
                    continue
                call = (lambda fn=fn, q=q, k=k, v=v, scale=scale, causal=causal:
                        fn(q, k, v, causal, scale).transpose(1, 2))
                t0 = time.time()
                try:
                    out = call()
                    if device == "cuda":
                        torch.cuda.synchronize()
                    error = rel_error(out, reference)
                except Exception as exc:  # a variant that does not compile or run
                    failed[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
                    print(f"  {name:16s} FAILED at S={s}: {failed[name]}", flush=True)
                    if os.environ.get("PROBE_TRACE"):
                        traceback.print_exc()
                    continue
                ok = error < (2e-2 if not small or ALL_VARIANTS[name][1] in ("croq", "nn")
                              else 1e-4)
                print(f"  S={s} {name:16s} rel error {error:.2e} {'ok' if ok else 'WRONG'} "
                      f"({time.time() - t0:.1f} s first call)", flush=True)
                if not ok:
                    failed[name] = f"rel error {error:.3g}"
                    continue
                forms[name] = call
                baseline[name] = base_name
                if os.environ.get("PROBE_SASS") == "1" and device == "cuda" and s == seqs[0]:
                    _print_resources(name)
        if check_only or not do_fwd:
            continue
        do_bench = _bench()

        times: dict[str, list[float]] = {n: [] for n in forms}
        for _ in range(reps):
            for name, fn in forms.items():
                times[name].append(do_bench(fn, warmup=25, rep=100))
        medians = {n: statistics.median(t) for n, t in times.items()}
        for base_name, causal in groups:
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            base = medians[base_name]
            print(f"S={s}: fwd {base_name} {base * 1e3:.1f} us "
                  f"({flops / base / 1e9:.0f} TFLOP/s)", flush=True)
            for name in forms:
                if baseline[name] != base_name:
                    continue
                median = medians[name]
                rows.append({"pass": "fwd" if causal else "fwd_nc", "S": s, "form": name,
                             "ms": median, "tflops": flops / median / 1e9,
                             "ratio": base / median})
                print(f"    {name:16s} {median * 1e3:9.1f} us {flops / median / 1e9:6.0f} "
                      f"TFLOP/s  ratio {base / median:.3f}", flush=True)
    if do_bwd:
        rows += backward(seqs, b, h, hkv, d, device, dtype, reps, check_only)
    if rows:
        print_table(rows)
        out = os.environ.get("PROBE_CSV")
        if out:
            import csv
            with open(out, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    if failed:
        print("failed variants:")
        for name, why in failed.items():
            print(f"  {name}: {why}")
    print(f"total {time.time() - t_start:.0f} s")
    return 0


def _bench():
    """triton.testing.do_bench, or with PROBE_FAKE_BENCH=1 (a CPU check of the harness)
    one call's wall time in ms."""
    if os.environ.get("PROBE_FAKE_BENCH") == "1":
        def wall(fn, warmup=0, rep=0):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        return wall
    if os.environ.get("PROBE_CUDAGRAPH") == "1":  # (no host time, no L2 flush)
        from triton.testing import do_bench_cudagraph

        def graphed(fn, warmup=0, rep=100):
            return do_bench_cudagraph(fn, rep=rep)
        return graphed
    from triton.testing import do_bench
    return do_bench


def preflight(names, s, b, h, hkv, d):
    """Run each warp-specialised variant once at the first shape in a child process, each
    with a time limit (PROBE_PREFLIGHT_LIMIT seconds, 90 by default: its compile and one
    call), so that a kernel that hangs (or breaks the CUDA context) costs its variant, not
    the run: name -> why, for the ones that did not come back right. The child's
    compiles stay in Triton's cache for this process."""
    import selectors
    import subprocess

    limit = float(os.environ.get("PROBE_PREFLIGHT_LIMIT", "90"))
    failed = {}
    todo = list(names)
    while todo:
        env = {**os.environ, "PROBE_PREFLIGHT_CHILD": ",".join(todo), "PROBE_S": str(s),
               "PROBE_B": str(b), "PROBE_H": str(h), "PROBE_HKV": str(hkv),
               "PROBE_D": str(d)}
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None
        watch = selectors.DefaultSelector()
        watch.register(child.stdout, selectors.EVENT_READ)
        reported = []
        stalled = False
        t0 = time.time()
        while len(reported) < len(todo):
            if not watch.select(timeout=limit):  # nothing for `limit` seconds: hung
                stalled = True
                break
            line = child.stdout.readline()
            if not line:  # the child ended
                break
            if line.startswith("PREFLIGHT "):
                _, verdict, name, why = line.rstrip("\n").split(" ", 3)
                reported.append(name)
                print(f"  preflight {name:16s} {verdict} {why} "
                      f"({time.time() - t0:.0f} s)", flush=True)
                if verdict != "ok":
                    failed[name] = why
                t0 = time.time()
        if stalled or child.poll() is None:
            child.kill()
        child.wait()
        rest = [n for n in todo if n not in reported]
        if rest:  # the first one not reported hung or ended the child
            tail = (child.stderr.read().strip().splitlines() or [""])[-1][:200] \
                if child.stderr else ""
            why = (f"no answer within {limit:.0f} s (hung?)" if stalled
                   else f"the child exited {child.returncode}: {tail}")
            failed[rest[0]] = why
            print(f"  preflight {rest[0]:16s} FAILED {why}", flush=True)
            rest = rest[1:]
        todo = rest
    return failed


def preflight_child(names):
    device = "cuda" if torch.cuda.is_available() and not INTERPRET else "cpu"
    b, h, hkv, d = (int(os.environ[k]) for k in ("PROBE_B", "PROBE_H", "PROBE_HKV", "PROBE_D"))
    s = int(os.environ["PROBE_S"])
    _, (q, k, v) = make_inputs(b, h, hkv, s, d, device, torch.bfloat16)
    scale = torch.full((1,), d ** -0.5 * LOG2E, device=device)
    for name in names:
        causal = is_causal(name)
        try:
            out = make_variant(name, device == "cpu")(q, k, v, causal, scale).transpose(1, 2)
            if device == "cuda":
                torch.cuda.synchronize()
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            error = rel_error(out, ref)
            verdict = "ok" if error < 2e-2 else "WRONG"
            if os.environ.get("PROBE_PREFLIGHT_HANG") == name:  # (a test of the time limit)
                time.sleep(10 ** 6)
            why = f"rel error {error:.2e}"
        except Exception as exc:
            verdict, why = "FAILED", f"{type(exc).__name__}: " + (
                str(exc).strip().splitlines() or [""])[-1][:200]
        print(f"PREFLIGHT {verdict} {name} {why}", flush=True)
    return 0


def _print_resources(name):
    """Registers, spills and shared memory of the kernel a hand or tutorial variant last
    compiled (Triton's own records)."""
    kind = ALL_VARIANTS[name][1]
    if kind not in ("hand", "tut"):
        return
    kernel = attn_tut if kind == "tut" else attn_hand
    try:
        for device_cache in kernel.device_caches.values():
            for compiled in list(device_cache[0].values())[-1:]:
                print(f"      {name}: {compiled.n_regs} registers, {compiled.n_spills} "
                      f"spills, {compiled.metadata.shared} B shared, "
                      f"{compiled.metadata.num_warps} warps", flush=True)
    except Exception as exc:  # (Triton's internals may differ)
        print(f"      {name}: no resource record ({exc})", flush=True)


def backward_tiles():
    """The backward tile sets of PROBE_BWD_TILES: name -> (BackwardTiles, stages)."""
    from croqtile.nn import attention_ops

    sets = {}
    for spec in filter(None, os.environ.get("PROBE_BWD_TILES", "").split(";")):
        numbers = [int(x) for x in spec.split(",")]
        tiles = attention_ops.BackwardTiles(*numbers[:5], delta_rows=64)
        sets[f"bwd[{spec}]"] = (tiles, numbers[5] if len(numbers) > 5 else None)
    return sets


def backward_forms():
    """The dk/dv forms of PROBE_BWD_FORMS ("grouped", "split"): name -> split."""
    names = list(filter(None, os.environ.get("PROBE_BWD_FORMS", "").split(",")))
    assert all(n in ("grouped", "split") for n in names), names
    return {n: n == "split" for n in names}


def forced_form(split, fn):
    """``fn`` run with croqtile.nn's rule set to choose the split form of dk/dv for every
    shape (``split``) or for none."""
    from croqtile.nn import attention_ops

    def run():
        saved = dict(attention_ops.BACKWARD_SPLIT_BLOCKS)
        attention_ops.BACKWARD_SPLIT_BLOCKS.update(
            {kind: (1 << 62) if split else 0 for kind in saved})
        try:
            return fn()
        finally:
            attention_ops.BACKWARD_SPLIT_BLOCKS.update(saved)
    return run


def tiled_backward(tiles, stages, q, k, v, causal, dout, split=None):
    """A function computing (dq, dk, dv) as croqtile.nn's backward does (its training
    form's output and lse, then delta, dq and dk/dv of attention_backward.co), with the
    backward compiled on ``tiles`` and ``stages``, outside croqtile.nn's operators; dk/dv
    in the split form if ``split``, the grouped one if not, the rule's for ``tiles`` if
    None (attention_ops.backward_split)."""
    import croqtile
    from croqtile.nn import attention_ops, kernels

    element = ELEMENTS[q.dtype]
    d = q.shape[-1]
    kind = "gpu" if q.is_cuda else "cpu"
    options = dict(attention_ops.BACKWARD_OPTIONS[kind])
    if stages is not None:
        options["num_stages"] = stages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = croqtile.compile(
            (kernels.KERNELS / "attention_backward.co").read_text(),
            defines=dict(attention_ops.attention_defines(element, d, False, tiles.defines())),
            **options)
    scale = torch.full((1,), d ** -0.5 * LOG2E, device=q.device)
    train = kernels.operator(attention_ops.training_name(element, d, False, kind))
    with torch.no_grad():
        out, lse = train(q, k, v, None, causal, scale)
    out = out.transpose(1, 2)
    b, h, _, _ = q.shape
    hkv, keys = k.shape[1], k.shape[2]
    if split is None:
        blocks = -(-keys // tiles.dkv_cols) * hkv * b
        split = h > hkv and blocks < attention_ops.BACKWARD_SPLIT_BLOCKS[kind]

    def run():
        delta = module.attention_delta(out, dout)
        dq = module.attention_dq(q, k, v, dout, lse, delta, causal, scale)
        if split:
            dkv = module.attention_dkv_split(q, k, v, dout, lse, delta, causal, scale)
            dkv = dkv.view(2, b, hkv, h // hkv, keys, d).sum(3).to(k.dtype)
        else:
            dkv = module.attention_dkv(q, k, v, dout, lse, delta, causal, scale)
        return dq, dkv[0], dkv[1]
    return run


def backward(seqs, b, h, hkv, d, device, dtype, reps, check_only):
    """croqtile.nn's backward (autograd through cf.scaled_dot_product_attention: the
    forward's training form writes each row's log-sum-exp; then attention_backward.co's
    three kernels, delta, dq and dk/dv) against SDPA's, on the same output gradient; also
    on the tiles of PROBE_BWD_TILES, and in the dk/dv forms of PROBE_BWD_FORMS."""
    import croqtile.nn.functional as cf
    from croqtile.nn import attention_ops

    tile_sets = backward_tiles()
    forms = backward_forms()
    rows = []
    for s in seqs:
        leaves, (q, k, v) = make_inputs(b, h, hkv, s, d, device, dtype, requires_grad=True)
        g = torch.Generator(device="cpu").manual_seed(99)
        dout = torch.randn(b, h, s, d, generator=g).to(device, dtype)
        outs = {
            "sdpa": F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
            "croqtile.nn": cf.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                           enable_gqa=True),
        }
        # (each a function of no arguments giving the gradients of q, k and v)
        runs = {name: (lambda o=o: torch.autograd.grad(o, leaves, dout, retain_graph=True))
                for name, o in outs.items()}
        kind, element = "gpu" if q.is_cuda else "cpu", ELEMENTS[q.dtype]
        blocks = -(-s // attention_ops.attention_backward_tiles(kind, element, d).dkv_cols) \
            * hkv * b
        split = attention_ops.backward_split(kind, element, d, b, h, hkv, s)
        if forms:
            print(f"  S={s} bwd croqtile.nn: dk/dv {'split' if split else 'grouped'} "
                  f"({blocks} grouped blocks)", flush=True)
        for form, form_split in forms.items():
            runs[f"nn[{form}]"] = forced_form(form_split, runs["croqtile.nn"])
        for name, (tiles, stages) in tile_sets.items():
            for form, form_split in {"": None, **{f"/{f}": x for f, x in forms.items()}}.items():
                run = tiled_backward(tiles, stages, *(t.detach() for t in (q, k, v)), True,
                                     dout, form_split)
                # (the gradients of the [B, L, H, D] leaves: the kernels' [B, H, L, D] back)
                runs[name + form] = lambda run=run: tuple(t.transpose(1, 2) for t in run())
        grads = {name: fn() for name, fn in runs.items()}
        if device == "cpu":
            ql, kl, vl = (t.detach().double().requires_grad_(True) for t in leaves)
            ref_o = F.scaled_dot_product_attention(ql.transpose(1, 2), kl.transpose(1, 2),
                                                   vl.transpose(1, 2), is_causal=True,
                                                   enable_gqa=True)
            reference = torch.autograd.grad(ref_o, (ql, kl, vl), dout.double())
        else:
            reference = grads["sdpa"]
        checked = [name for name in runs if name != "sdpa"]
        for name in checked + (["sdpa"] if device == "cpu" else []):
            errors = [rel_error(x, r) for x, r in zip(grads[name], reference)]
            print(f"  S={s} bwd {name:12s} rel error dq {errors[0]:.2e} dk {errors[1]:.2e} "
                  f"dv {errors[2]:.2e} {'ok' if max(errors) < 2e-2 else 'WRONG'}", flush=True)
        if check_only:
            continue
        do_bench = _bench()

        times: dict[str, list[float]] = {n: [] for n in runs}
        for _ in range(reps):
            for name, fn in runs.items():
                times[name].append(do_bench(fn, warmup=25, rep=100))
        base = statistics.median(times["sdpa"])
        flops = 2.5 * 4 * b * h * s * s * d / 2  # (the usual 2.5x the forward's)
        for name in runs:
            median = statistics.median(times[name])
            rows.append({"pass": "bwd", "S": s, "form": name, "ms": median,
                         "tflops": flops / median / 1e9, "ratio": base / median})
        print(f"S={s}: bwd sdpa {base * 1e3:.1f} us, croqtile.nn "
              f"{statistics.median(times['croqtile.nn']) * 1e3:.1f} us "
              f"(ratio {base / statistics.median(times['croqtile.nn']):.3f})", flush=True)
        for name in checked[1:]:
            print(f"S={s}: bwd {name} {statistics.median(times[name]) * 1e3:.1f} us (ratio "
                  f"{base / statistics.median(times[name]):.3f}"
                  f"{'' if name.startswith('nn[') else '; kernels only'})", flush=True)
    return rows


def print_table(rows):
    """Ratio = SDPA time / the form's time (above 1: faster than SDPA), by S."""
    seqs = sorted({r["S"] for r in rows})
    titles = {"fwd": "forward, causal", "fwd_nc": "forward, NOT causal", "bwd":
              "backward, causal"}
    for kind in ("fwd", "fwd_nc", "bwd"):
        sel = [r for r in rows if r["pass"] == kind]
        if not sel:
            continue
        forms = list(dict.fromkeys(r["form"] for r in sel))
        print(f"\n{titles[kind]}: SDPA time / variant time (TFLOP/s in brackets)")
        print(f"{'variant':14s}" + "".join(f"{'S=' + str(s):>18s}" for s in seqs) + "   gm")
        for form in forms:
            cells, ratios = [], []
            for s in seqs:
                r = next((r for r in sel if r["S"] == s and r["form"] == form), None)
                if r is None:
                    cells.append(f"{'-':>18s}")
                else:
                    ratios.append(r["ratio"])
                    cells.append(f"{r['ratio']:>10.3f} ({r['tflops']:4.0f})")
            gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
            print(f"{form:14s}" + "".join(cells) + f"   {gm:.3f}")


if __name__ == "__main__":
    if os.environ.get("PROBE_PREFLIGHT_CHILD"):
        sys.exit(preflight_child(os.environ["PROBE_PREFLIGHT_CHILD"].split(",")))
    if torch.cuda.is_available() and not INTERPRET:
        # a watchdog: past the deadline, print where it is and exit (what was timed is
        # already printed, a line per variant and shape)
        import faulthandler
        faulthandler.dump_traceback_later(float(os.environ.get("PROBE_DEADLINE", "345")),
                                          exit=True)
    sys.exit(main())
