"""The hand-written Triton forms of bench/attention_probe.py: attn_hand (croqtile's
generated attention kernel written out with constexpr switches, one technique each), the
Triton 3.6 tutorial's forward adapted to the same inputs (attn_tut), their launchers,
croqtile's own compiled kernel, and the table of forms (VARIANTS, EXCLUDED) with
make_variant, which gives each form's callable (q, k, v, causal, scale) -> o [B, L, H, D].
"""

from __future__ import annotations

import warnings

import torch
import triton
import triton.language as tl

KV_BUDGET = 16777216  # attention.co's: K/V elements the blocks in flight share (L2)

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
