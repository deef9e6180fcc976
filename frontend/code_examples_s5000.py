"""The error-code examples of the S5000 target's rules (``target="s5000"``): a wrong
program, its fix and the message, for each code the engine rules report, and what each
code means. Plain data: ``code_examples`` turns the entries into its ``Example`` records
(this module imports nothing, so the two stay one-way)."""

from __future__ import annotations

TARGET = "s5000"

# code -> the fields of code_examples.Example (bad, fixed, message); the target is TARGET.
EXAMPLES: dict[str, dict[str, str]] = {
    "CQ0438": {
        "bad": """\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 1 : block {
    t = tma.load.swiz<128> x => shared;
    tma.copy t => y;
  }
}
""",
        "fixed": """\
__co__ void stage(global f16 [64, 64] x, global f16 [64, 64] y) {
  parallel p by 1 : block {
    t = tma.load x => shared;
    tma.copy t => y;
  }
}
""",
        "message": "S5000 TME swizzle is listed for rank-1 tiles only; this tma.load tile "
                   "has rank 2",
    },
    "CQ0439": {
        "bad": """\
__co__ void stage(global f16 [256] x, global f16 [256] y) {
  parallel p by 8 : block {
    t = tma.load.swiz<128> x.chunkat(p) => shared;
    tma.copy t => y.chunkat(p);
  }
}
""",
        "fixed": """\
__co__ void stage(global f16 [256] x, global f16 [256] y) {
  parallel p by 4 : block {
    t = tma.load.swiz<128> x.chunkat(p) => shared;
    tma.copy t => y.chunkat(p);
  }
}
""",
        "message": "S5000 TME swizzle (SG 16B, SS 128B, SL 64B) is not in the TME swizzle "
                   "table: SL is the tile's contiguous length, 64 bytes",
    },
    "CQ0516": {
        "bad": """\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill 0.0;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "message": "warp MMA f16 x f16 -> f16 is not in the S5000 WMMA table: its rows for "
                   "f16 x f16 accumulate in f32 only",
    },
    "CQ0517": {
        "bad": """\
__co__ void gemm(global f16 [16, 8] a, global f16 [16, 8] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f16 [16, 16] a, global f16 [16, 16] b, global f32 [16, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "message": "warp MMA tile 16x16x8 is not a whole number of any S5000 WMMA shape of "
                   "the row f16 x f16 -> f32 (16x16x16, 16x16x32)",
    },
    "CQ0518": {
        "bad": """\
__co__ void gemm(global f32 [16, 4] a, global f32 [8, 4] b, global f32 [8, 16] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store.transp mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f32 [16, 4] a, global f32 [8, 4] b, global f32 [16, 8] c) {
  parallel p by 1 : block {
    parallel w by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "message": "mma.store.transp stores 'mc' column-major, but its 16x8x4 tile only "
                   "divides into the S5000 WMMA shape 16x8x4 of the row tf32 x tf32 -> f32, "
                   "which stores row-major only",
    },
    "CQ0519": {
        "bad": """\
__co__ void gemm(global f8_e4m3 [64, 32] a, global f8_e4m3 [64, 32] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f8_e4m3 [64, 32] a, global f8_e4m3 [64, 32] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "message": "warpgroup MMA f8_e4m3 x f8_e4m3 -> f32 is not in the S5000 SQMMA table: "
                   "no row takes f8_e4m3 x f8_e4m3 operands (the rows take bf16 x bf16, "
                   "f16 x f16, s8 x s8, tf32 x tf32, u8 x u8)",
    },
    "CQ0520": {
        "bad": """\
__co__ void gemm(global f16 [32, 16] a, global f16 [16, 16] b, global f32 [32, 16] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f16 [32, 16] a, global f16 [32, 16] b, global f32 [32, 32] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "message": "warpgroup MMA tile 32x16x16 is not a whole number of any S5000 SQMMA "
                   "shape of the row f16 x f16 | bf16 x bf16 -> f32 (M x N in 16x64 32x32 "
                   "32x64 32x128 64x16 64x32 64x64 64x128 128x32 128x64 128x128; K in 16, "
                   "32, 64)",
    },
    "CQ0521": {
        "bad": """\
__co__ void gemm(global f16 [64, 16] a, global f16 [64, 16] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, a, b;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f16 [64, 16] a, global f16 [64, 16] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "message": "warpgroup MMA operand 'a' is in global memory; S5000 SQMMA reads A and B "
                   "from shared memory",
    },
    "CQ0524": {
        "bad": """\
__co__ void gemm_sp(global f16 [64, 16] a_packed, global u8 [64, 4] meta,
                    global f16 [64, 32] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    sa = dma.copy a_packed => shared;
    sm = dma.copy meta => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      me = mma.load sm.data;
      mc = mma.fill.f32 0.0f;
      mma.row.row.sp mc, sa.data, sb.data, me;
      mma.store mc, c;
    }
  }
}
""",
        "fixed": """\
__co__ void gemm(global f16 [64, 32] a, global f16 [64, 32] b, global f32 [64, 64] c) {
  parallel p by 1 : block {
    sa = dma.copy a => shared;
    sb = dma.copy b => shared;
    parallel g by 1 : group-4 {
      mc = mma.fill.f32 0.0f;
      mma.row.row mc, sa.data, sb.data;
      mma.store mc, c;
    }
  }
}
""",
        "message": "a 2:4 sparse MMA (`.sp`) has no S5000 equivalent: the SQMMA table lists "
                   "dense shapes only",
    },
}

MEANINGS: dict[str, str] = {
    "CQ0438": "On the S5000 target the copy engine (TME) swizzles rank-1 tiles only: the "
              "vendor guide lists swizzle configurations for those alone. A swizzle only "
              "arranges shared memory, so this is a warning: the copy is right without it.",
    "CQ0439": "On the S5000 target a swizzled TME copy needs a (granularity, stride, length) "
              "entry of the guide's swizzle table; `.swiz<N>` reads as 16-byte granules "
              "permuted within N bytes, and the length is the tile's size in bytes.",
    "CQ0516": "On the S5000 target an MMA at warp scope runs as WMMA, whose table pairs each "
              "operand type with one accumulator type: f16, bf16 and fp8 accumulate in f32, "
              "s8 and u8 in s32. `mma.fill v` without a type gives f16 operands an f16 "
              "accumulator, which WMMA has not.",
    "CQ0517": "On the S5000 target a warp's MMA tile is cut into WMMA instructions of one "
              "shape of its type's row, so M, N and K must be multiples of that shape's.",
    "CQ0518": "The S5000 WMMA tf32 shape 16x8x4 stores its accumulator row-major only; "
              "`mma.store.transp` writes column-major, which needs a shape of the 16x16x16 "
              "row.",
    "CQ0519": "On the S5000 target an MMA inside a `group-4` level runs as SQMMA, whose table "
              "takes f16 and bf16 (into f32), s8 and u8 (into s32) and tf32 (into f32); fp8 "
              "has no SQMMA row, only WMMA ones.",
    "CQ0520": "On the S5000 target a warpgroup's MMA tile is cut into SQMMA instructions of "
              "one shape of its type's row, so M, N and K must be multiples of a listed "
              "shape (M x N pairs are listed, not free).",
    "CQ0524": "The S5000 vendor guide's WMMA and SQMMA tables list dense operand shapes "
              "only: a 2:4 sparse MMA (`mma.LA.LB.sp`, `wgmma.sp` on Hopper) has nothing "
              "to map onto.",
    "CQ0521": "S5000 SQMMA reads both operands through shared-memory descriptors: an operand "
              "in global memory or in registers (a `frag` tile, an accumulator) has to be "
              "staged in shared memory first.",
}
