"""The one registry of diagnostic codes.

Each entry has a stable code, a severity, a message template with named fields and an
optional hint template. Ranges:

    CQ00xx  preprocessor            CQ05xx  MMA
    CQ01xx  lexer and parser        CQ06xx  parallel levels and control flow
    CQ02xx  names, types, scalars   CQ07xx  constructs the Triton backend cannot map
    CQ03xx  shapes and views        CQ09xx  internal compiler errors
    CQ04xx  DMA and TMA
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"  # reported by `croqtile check`; not raised as a Python warning


@dataclass(frozen=True, slots=True)
class Code:
    code: str
    severity: Severity
    template: str
    hint: str | None = None


E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE

_TABLE: tuple[Code, ...] = (
    # --- preprocessor -------------------------------------------------------------
    Code("CQ0001", E, "unterminated conditional directive: missing #endif"),
    Code("CQ0002", E, "#{directive} without a matching #if"),
    Code("CQ0003", E, "malformed directive: {detail}"),
    Code("CQ0004", E, "cannot evaluate #if expression: {detail}"),
    Code("CQ0005", E, "macro '{name}' expects {expected} argument(s), got {actual}"),
    Code("CQ0006", E, "unterminated argument list for macro '{name}'"),
    Code("CQ0007", E, "macro expansion of '{name}' is too deep (recursive macro?)"),
    Code("CQ0008", W, "macro '{name}' redefined differently"),
    Code("CQ0009", E, "unterminated comment"),
    Code("CQ0010", E, "macro expansion of '{name}' produces too much text; "
         "macros are not expanded any further",
         "look for a macro whose expansion doubles with every use"),
    # --- lexer and parser -----------------------------------------------------------
    Code("CQ0101", E, "unexpected character {char!r}"),
    Code("CQ0102", E, "unterminated string literal"),
    Code("CQ0103", E, "malformed number literal '{text}'"),
    Code("CQ0104", E, "number literal '{text}' does not fit in {what}"),
    Code("CQ0110", E, "expected {expected}, found {found}"),
    Code("CQ0111", E, "unexpected {found} {context}"),
    Code("CQ0112", E, "no __co__ function found in the source",
         "a Croqtile function starts with `__co__ <return type> name(params) { ... }`"),
    Code("CQ0113", E, "unbalanced braces: the __co__ function '{name}' is never closed"),
    Code("CQ0114", E, "'{modifier}' must come {order}",
         "modifiers go in this order: operation, config, .async, then attributes"),
    Code("CQ0115", E, "nesting is too deep ({depth} levels)",
         "split the expression or the block into smaller parts"),
    Code("CQ0116", E, "'{name}' is a reserved word and cannot be used as a name"),
    Code("CQ0117", E, "{what} is too large: more than {limit} tokens",
         "split the work into smaller __co__ functions or several sources"),
    Code("CQ0118", E, "'{name}' is called outside the scope of `#pragma croq intrinsic {kind} "
                      "{declared}`",
         "a pragma inside braces (a function, a block) holds until the closing brace: call "
         "the intrinsic there, repeat the pragma here, or put it at file scope"),
    # --- names, types, scalars -------------------------------------------------------
    Code("CQ0201", E, "symbol '{name}' is used before declaration"),
    Code("CQ0202", E, "symbol '{name}' has been declared already"),
    Code("CQ0203", E, "only mutable variables can be re-assigned ('{name}')",
         "declare it with `mutable`, e.g. `mutable {type} {name} = ...;`"),
    Code("CQ0204", E, "'{name}' is {actual}, expected {expected}"),
    Code("CQ0205", E, "operator '{op}' cannot be applied to {lhs} and {rhs}"),
    Code("CQ0206", W, "implicit conversion from '{src}' to '{dst}' may lose precision",
         "write `__to<{dst}>(...)` to make the conversion explicit"),
    Code("CQ0207", E, "'{name}' is not a bounded variable: '#' needs a parallel, foreach or "
                      "with variable"),
    Code("CQ0208", E, "'_' is not allowed as {what}"),
    Code("CQ0209", E, "{what} must be an integer, got {actual}"),
    Code("CQ0266", E, "{what} must be known when the kernel is compiled, but '{expr}' is an "
         "integer computed at run time",
         "use a constant, a parameter dimension or an expression of them; a run-time count "
         "of loop trips is fine in `foreach i in [n]`"),
    Code("CQ0210", E, "index {index} is out of range for {what} of rank {rank}"),
    Code("CQ0211", E, "return statement with a value in void function '{name}'"),
    Code("CQ0212", E, "non-void function '{name}' has no return statement"),
    Code("CQ0213", E, "'{name}' is {kind}; it cannot be used {usage}"),
    Code("CQ0214", E, "the element type '{elem}' has no torch or Triton equivalent",
         "use a byte-sized type such as s8, u8, f8_e4m3 or f16"),
    Code("CQ0215", E, "division by zero in a constant expression"),
    Code("CQ0216", E, "ituple must be initialised with '{{' and '}}'"),
    Code("CQ0217", E, "mdspan must be initialised with ':'"),
    Code("CQ0218", E, "'{name}' is declared as {declared} but initialised as {actual}"),
    Code("CQ0219", E, "the {what} storage cannot be used for a parameter"),
    Code("CQ0220", E, "the global parameter '{name}' cannot be passed by reference",
         "global data is already used in place: drop the '&'"),
    Code("CQ0221", E, "the scalar parameter '{name}' cannot be passed by reference",
         "return the value instead, or pass a one-element tensor"),
    Code("CQ0222", E, "the parameter '{name}' has an unbounded dimension ('??') and must be global"),
    Code("CQ0224", E, "cannot deduce the type of '{name}'",
         "give it a type (`mutable int {name} = 0;`) or an initial value"),
    Code("CQ0225", E, "'{name}' is {kind}; only scalars can be mutable"),
    Code("CQ0226", E, "the initialiser of '{name}' must be a constant scalar, got {actual}"),
    Code("CQ0227", E, "'{name}' takes {expected} arguments, got {actual}"),
    Code("CQ0228", E, "'{name}' needs an element of shared or global data as its first argument",
         "atomics update memory other threads see; a private scalar needs no atomic"),
    Code("CQ0229", E, "'{name}' is a future: read its tile with '{name}.data.at(...)'"),
    Code("CQ0230", W, "'{name}' is written, but it is neither 'global' nor passed by "
         "reference: the function writes a copy and the caller's tensor does not change",
         "declare it 'global' to write the caller's tensor in place, or add '&' after its "
         "shape to copy it back"),
    Code("CQ0265", E, "the operator '{op}' is reserved: bounded values combine with '#', "
                      "'#+' and '#-' only",
         "to scale a bound, write the arithmetic on the value (e.g. `p * 2`)"),
    Code("CQ0223", E, "string variables are not supported ('{name}')",
         "strings may only appear in assert, print and __cpp__"),
    # --- shapes and views -----------------------------------------------------------
    Code("CQ0301", E, "data rank ({rank}) must match the number of tiling factors ({count})"),
    Code("CQ0302", E, "tiling factor exceeds data size ({factor} > {size}) in dimension {dim}"),
    Code("CQ0303", E, "subspan too large for dimension {dim} ({extent} > {size})"),
    Code("CQ0304", E, "index out of bounds for dimension {dim} ({index} >= {bound})"),
    Code("CQ0305", E, "'{name}' has rank {rank} but the access gives {count} index values"),
    Code("CQ0306", E, "the mdspan size '{value}' is invalid: dimensions must be positive"),
    Code("CQ0307", E, "dimensions of '{name}' must be static inside a parallel block (got '{dim}')",
         "declare device buffers with constant sizes (use #define constants)"),
    Code("CQ0308", E, "cannot apply span_as to reshape {src} ({src_count}) to {dst} ({dst_count})"),
    Code("CQ0309", E, "in operation '{op}': dimension inconsistent ({lhs} vs. {rhs})"),
    Code("CQ0310", N, "chunkat over a cdiv bound tiles dimension(s) {dim} (size {size}) by "
                      "{tile} with a masked last tile; the literal rule (size / bound) tiles "
                      "differently when the tile does not divide the size",
         "write `subspan(...).at(...)` with the tile sizes to say this explicitly"),
    Code("CQ0311", E, "{what} expects {expected} values, got {actual}"),
    Code("CQ0316", E, "inconsistent shapes for the spanned operation '{op}': {lhs} vs. {rhs}"),
    Code("CQ0315", E, "the index '{index}' of the buffer array '{name}' reaches {high}, outside "
                      "[0, {count})"),
    Code("CQ0313", E, "the tiling factor of dimension {dim} must be positive, got {factor}"),
    Code("CQ0314", E, "'{name}' is not a bounded variable: chunkat tiles by the bounds of "
                      "parallel, foreach or with indices",
         "write `chunk(F).at({name})` to give the number of tiles F explicitly"),
    Code("CQ0312", E, "'{name}' has shape {actual}, expected {expected}"),
    Code("CQ0317", E, "'.sqz()' needs a '.subspan', '.view' or '.span_as' before it in the "
                      "view chain",
         "give the tile's extents first, e.g. `x.subspan(1, N).at(i, 0).sqz()`"),
    # --- DMA and TMA -----------------------------------------------------------------
    Code("CQ0401", E, "DMA element types differ: 'from' is {src}, 'to' is {dst}",
         "DMA copies do not convert; convert in arithmetic or use a buffer of type {src}"),
    Code("CQ0402", E, "DMA rank mismatch between 'from' and 'to': {src} != {dst}"),
    Code("CQ0403", E, "DMA shapes are inconsistent: 'from' is {src}, 'to' is {dst}"),
    Code("CQ0404", E, "DMA to-buffer is too small ({src} > {dst} elements)"),
    Code("CQ0405", E, "'{storage}' cannot be a DMA destination outside a parallel block"),
    Code("CQ0406", E, "'.{op}' is a TMA-only operation", "write `tma.{op}`"),
    Code("CQ0407", E, "swizzle value must be 128, 64 or 32 (got {value})"),
    Code("CQ0408", E, "the {what} configuration has {actual} entries but the data has rank {rank}"),
    Code("CQ0409", E, "the transpose layout <{perm}> is not a permutation of 0..{last}"),
    Code("CQ0410", E, "'{name}' is not a DMA future"),
    Code("CQ0411", E, "asynchronous DMA must be bound to a named future",
         "write `f = dma.copy.async ...;` and `wait f;` before using f.data"),
    Code("CQ0412", E, "non-async future '{name}' cannot be waited"),
    Code("CQ0413", E, "some async futures are never waited: {name}",
         "add `wait <future>;` before the data is used (each async copy is waited once)"),
    Code("CQ0414", E, "TMA copies move data between global and shared memory only (got {src} -> {dst})"),
    Code("CQ0415", E, "the TMA box shape must be computable on the host; '{extent}' is a value "
                      "computed in the kernel",
         "use `dma.copy` for tiles whose shape depends on values inside the kernel"),
    Code("CQ0417", E, "the async future '{name}' is waited twice",
         "each async copy is waited exactly once; remove the second `wait`"),
    Code("CQ0418", E, "dma.any '{name}' is defined but never used"),
    Code("CQ0419", E, "cannot swap '{a}' and '{b}': {reason}"),
    Code("CQ0420", E, "the select index {index} is not in bound [0, {count})"),
    Code("CQ0421", E, "TMA copies are issued once per block or warpgroup: '{name}' (a {level} "
                      "variable) cannot select the tile",
         "select TMA tiles with block or warpgroup indices, or use dma.copy"),
    Code("CQ0422", E, "'.{attr}' is only valid on tma.load"),
    Code("CQ0423", E, "cannot bind '{name}' to an event with 'after': {reason}",
         "write `wait {name};` and then `trigger` the event"),
    Code("CQ0424", W, "'{name}' was staged with .swiz<{producer}> but is loaded with "
                      ".swiz<{consumer}>", "use the same swizzle on both sides"),
    Code("CQ0425", W, "redundant .zfill: source and destination have the same shape {shape}",
         "remove .zfill (tails are masked automatically)"),
    Code("CQ0427", E, "'{name}' cannot be initialised from the placeholder '{source}'",
         "assign a copy to the placeholder first, or use `swap`"),
    Code("CQ0428", E, "'{kind}' takes {expected} futures, got {actual}"),
    Code("CQ0429", E, "'{name}' cannot be waited or triggered: it is {kind}",
         "wait for futures of asynchronous copies, or for events"),
    Code("CQ0430", E, "'.at(order)' needs a one-dimensional event array; '{name}' is {kind}"),
    Code("CQ0431", E, "the event order must be an integer, got {actual}"),
    Code("CQ0432", E, "an event order may only be updated as the whole '.at' argument",
         "write `.at(order++)`, or update the order in its own statement"),
    Code("CQ0433", E, "an event cannot be combined with a value that is not an event in a "
                      "condition"),
    Code("CQ0434", E, "one incremented event order cannot be bound to several futures",
         "use `.at(order)` here and increment the order once afterwards"),
    Code("CQ0435", E, "sparse copies take the 2:4 pattern (got {pattern})"),
    Code("CQ0436", E, "select options have different types: '{a}' is {ta}, '{b}' is {tb}",
         "every option of a select must have the same element type, shape and storage"),
    Code("CQ0437", E, "TMA moves tiles of rank 1 to 5, this one has rank {rank}",
         "use dma.copy for tiles of higher rank"),
    Code("CQ0440", E, "L2 promotion must be 64, 128 or 256 bytes (got {value})"),
    # target s5000: the copy engine's swizzle table (frontend/sema/targets_s5000.py)
    Code("CQ0438", W, "S5000 TME swizzle is listed for rank-{allowed} tiles only; this {op} "
                      "tile has rank {rank}",
         "drop the `.swiz<...>` (it only arranges shared memory: the values do not change), "
         "or copy a rank-1 tile"),
    Code("CQ0439", W, "S5000 TME swizzle (SG {sg}B, SS {ss}B, SL {sl}B) is not in the TME "
                      "swizzle table: SL is the tile's contiguous length, {sl} bytes",
         "{hint}"),
    Code("CQ0426", W, "the source {src} is smaller than the destination {dst}: elements past "
                      "the source are undefined",
         "add .zfill when the whole destination is read (for example by an MMA)"),
    # --- MMA ------------------------------------------------------------------------
    Code("CQ0501", E, "MMA operand '{name}' must be a matrix with a static shape, got {shape}"),
    Code("CQ0502", E, "MMA shapes do not match: {a} and {b} disagree on K for layout .{la}.{lb}",
         "{hint}"),
    Code("CQ0503", E, "MMA accumulator '{name}' has shape {acc}, but the operands produce {expected}"),
    Code("CQ0504", E, "MMA operand types {a} x {b} with accumulator {c} are not supported"),
    Code("CQ0505", E, "only an accumulator created by mma.fill or mma.load can be {usage} ('{name}')"),
    Code("CQ0506", E, "the MMA operation of '{name}' is never executed"),
    Code("CQ0507", E, "mma.store destination has shape {dst}, the accumulator has {acc}"),
    Code("CQ0508", E, "'{name}' is not an MMA fragment"),
    Code("CQ0509", E, "MMA on {a} operands is not supported on {target}"),
    Code("CQ0510", E, "warpgroup MMA (inside a group-4 level) needs sm_90 or newer; the target "
                      "is {target}",
         "use a ': group' (warp) level, or compile with target=\"sm_90\""),
    Code("CQ0511", E, "sparse MMA needs K to be a multiple of 4 (K = {k})"),
    Code("CQ0513", E, "sparse MMA needs its metadata operand: "
                      "'mma.{la}.{lb}.sp acc, a_packed, b, meta'"),
    Code("CQ0514", E, "sparse MMA metadata '{name}' is {elem} {shape}; with K = {k} it must "
                      "be u8 {expected} (one 4-bit entry per group of 4 columns of K)"),
    Code("CQ0515", E, "a sparse warpgroup MMA reads its metadata from registers: load "
                      "'{name}' with mma.load first",
         "me = mma.load <metadata view>; then pass 'me' to the MMA"),
    Code("CQ0512", E, "the MMA scale operand must have shape [M, 1] or [1, M] with M = {m}, "
                      "got {shape}"),
    # target s5000: the WMMA and SQMMA tables (frontend/sema/targets_s5000.py)
    Code("CQ0516", E, "warp MMA {a} x {b} -> {c} is not in the S5000 WMMA table: {entry}",
         "{hint}"),
    Code("CQ0517", E, "warp MMA tile {tile} is not a whole number of any S5000 WMMA shape of "
                      "the row {row} ({shapes})", "{hint}"),
    Code("CQ0518", E, "mma.store.transp stores '{name}' column-major, but its {tile} tile "
                      "only divides into the S5000 WMMA shape {shape} of the row {row}, "
                      "which stores row-major only",
         "{hint}"),
    Code("CQ0519", E, "warpgroup MMA {a} x {b} -> {c} is not in the S5000 SQMMA table: {entry}",
         "{hint}"),
    Code("CQ0520", E, "warpgroup MMA tile {tile} is not a whole number of any S5000 SQMMA "
                      "shape of the row {row} ({shapes})", "{hint}"),
    Code("CQ0521", E, "warpgroup MMA operand '{name}' is {where}; S5000 SQMMA reads A and B "
                      "from shared memory",
         "copy it into a shared buffer first (`dma.copy ... => shared` or `tma.load`), or "
         "compute at warp scope (a `: group` level), where WMMA loads its operands from "
         "memory"),
    Code("CQ0522", E, "MMA k_tiles schedule ({order}) must be a permutation of [0, {n})",
         "name each K tile of the MMA once, in the order it should run"),
    Code("CQ0524", E, "a 2:4 sparse MMA (`.sp`) has no S5000 equivalent: the {table} table "
                      "lists dense shapes only",
         "multiply the dense operand (`croqtile.sparse` decompresses a packed one), or "
         "compile for sm_90 where `wgmma.sp` runs it"),
    Code("CQ0560", E, "'{call}' into '{dst}' of shape {dst_shape}: the source '{src}' "
                      "gives {expected}"),
    Code("CQ0550", E, "'{name}' is an array of MMA fragments {dims}: select one element, as in "
                      "'{name}{first}'"),
    # --- parallel levels and control flow ----------------------------------------------
    Code("CQ0601", E, "bound {value} in parallel is invalid: it must be greater than 0"),
    Code("CQ0602", E, "the parallel variable '{name}' is used twice in the same parallel statement"),
    Code("CQ0603", E, "unable to infer the parallel level(s) between {outer} and {inner}"),
    Code("CQ0604", E, "{threads} threads per block exceed the limit of 1024"),
    Code("CQ0605", E, "threads per block ({threads}) must be a multiple of {multiple} when a "
                      "'{level}' level exists"),
    Code("CQ0606", E, "{what} is not allowed {where}"),
    Code("CQ0607", E, "'{storage}' buffer '{name}' must be declared {where}"),
    Code("CQ0608", E, "the parallel bound must be an integer, got '{actual}'"),
    Code("CQ0609", E, "a '{inner}' level cannot be nested inside a '{outer}' level"),
    Code("CQ0610", E, "parallel bounds of '{level}' levels must be constants (got '{bound}')"),
    Code("CQ0611", E, "assertion failed: {message}"),
    Code("CQ0612", E, "one block uses {used} bytes of shared memory; {target} has {limit}",
         "use smaller tiles, or fewer staging buffers"),
    Code("CQ0614", E, "[[{attr}]] is only valid on a block-level parallel (this level is "
                      "'{level}')"),
    Code("CQ0615", E, "[[{attr}]] argument must be {what}, got {actual}"),
    Code("CQ0616", E, "[[launch_bounds]] allows {limit} threads per block but the block has "
                      "{threads}"),
    Code("CQ0617", E, "'{name}' is not a stream; parallel<...> takes a stream variable"),
    Code("CQ0618", E, "a stream can only be bound to a block-level parallel (this level is "
                      "'{level}')"),
    Code("CQ0619", E, "an inner parallel level cannot be asynchronous",
         "only the outermost parallel (a kernel launch) may be `parallel.async`"),
    Code("CQ0620", E, "parallel levels of one block imply different thread counts ({threads} "
                      "here, {other} before)",
         "every inner parallel of a block must describe the same number of threads"),
    Code("CQ0621", E, "unroll factor {factor} {problem}"),
    Code("CQ0622", E, "'{what}' is only valid {where}"),
    Code("CQ0613", E, "the inthreads predicate must depend on a parallel variable",
         "compare a parallel index, e.g. `inthreads (t == 0)`"),
    Code("CQ0623", E, "unknown device target '{name}' (known: {known})",
         "name one of the known devices in `: device(...)`, or drop the parentheses"),
    # --- constructs the Triton backend cannot map ------------------------------------------
    Code("CQ0701", E, "not supported by the Triton backend yet: {construct}",
         "{hint}"),
    Code("CQ0702", E, "{construct} has no Triton mapping: {reason}"),
    Code("CQ0703", E, "cannot lower this MMA to one tile-level dot: {reason}"),
    Code("CQ0704", E, "tile extent '{extent}' has no static bound; Triton needs a constant tile shape"),
    Code("CQ0705", E, "compile option {option} does not apply to this kernel: {reason}",
         "compile without it, or write the block body as one loop over K that accumulates "
         "into zero-initialised f32 accumulators, followed by the epilogue"),
    Code("CQ0706", E, "the device helper '{helper}' cannot be inlined: {reason}",
         "make its body one `return` of an expression over warp shuffles, atomics and math "
         "intrinsics, or write the computation with Croqtile built-ins"),
    Code("CQ0707", E, "the device helper '{helper}' shuffles ('{name}') {where}: Triton has "
         "no shuffles, so a shuffle permutes the lanes of one ': thread' level",
         "call the helper inside `parallel t by N : thread`, with one variable"),
    Code("CQ0708", E, "'__cpp__' inside a kernel is raw CUDA, which a Triton kernel cannot run",
         "write the code in Croqtile, or move the block to the host side of the function"),
    Code("CQ0709", W, "the host '__cpp__' block is skipped (\"{text}\"): host code runs in "
         "Python"),
    Code("CQ0755", E, "this warp specialisation cannot be serialised into one loop: {reason}",
         "supported: roles without loops whose waits find their triggers in some order, or "
         "a ring: one producer role `foreach {{k}} in [n] {{ wait empty.at(k); <copies into "
         "ring[k % S]>; trigger full.at(k); }}` and consumer roles that release every slot "
         "of `empty` and then `foreach {{k}} in [n] {{ wait full.at(k); <use ring[k % S]>; "
         "trigger empty.at(k); }}` (in a persistent loop the release may sit under "
         "`if (i == 0)`, i the loop's variable)"),
    Code("CQ0756", E, "'wait' on '{name}' would never return: {reason}",
         "trigger the event (in another role, or earlier) before it is waited for"),
    # --- internal -------------------------------------------------------------------
    Code("CQ0901", E, "internal compiler error: {detail} (please report this)"),
)

CODES: dict[str, Code] = {entry.code: entry for entry in _TABLE}
assert len(CODES) == len(_TABLE), "duplicate diagnostic code"
