"""The pieces of ``croqtile.nn.moe``'s mixture of experts that its bf16/f16/f32 and its
FP8 paths (``croqtile.nn.moe_fp8``) share: routing (``route``), the sort of the (token,
expert) pairs by expert (``sort_by_expert``), the grouped GEMMs' tile table
(``tile_table``, ``runs_of``), and the variants of ``croqtile/kernels/moe.co`` with their
tiles by size class and their autograd (``moe_names``, ``moe_size``). See
``croqtile.nn.moe`` for the steps and what runs them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, cast

import torch

from . import kernels
from .kernels import ELEMENTS_ACC, GATED_ACTIVATIONS, NAMESPACE, Variant, operator
from ..runtime.module import Module

# (BM, BN, BK) of the grouped GEMMs by (device kind, element type, size class): rows of a
# tile, columns per block, the reduction's step. The size class (``moe_size``) follows
# the rows an expert gets on average: "small" at a decode step (a handful of rows each:
# 16-row tiles and narrow columns, more blocks streaming the weights), "large" for long
# prefills and training (128 x 128 tiles, 8 warps), "medium" between, and for every call
# where only "medium" has tiles. The GPU's are a first guess for Hopper, to be timed: the
# "large" ones are what the earlier kernel (a block per expert, walking its run) timed
# best with on an H100 at many rows, with 8 warps and 3 stages. The CPU's keep the
# tests' small shapes crossing tiles and tails.
MOE_TILES = {
    **{("cpu", t, "medium"): (16, 32, 32) for t in ("f16", "bf16", "f32", "f64")},
    ("gpu", "f16", "small"): (16, 64, 128), ("gpu", "bf16", "small"): (16, 64, 128),
    ("gpu", "f16", "medium"): (64, 128, 64), ("gpu", "bf16", "medium"): (64, 128, 64),
    ("gpu", "f16", "large"): (128, 128, 64), ("gpu", "bf16", "large"): (128, 128, 64),
    ("gpu", "f32", "medium"): (64, 64, 32), ("gpu", "f64", "medium"): (32, 32, 16),
}
# Launch options by (device kind, size class). Every element of the kernels' outputs is
# written (each sorted row is in exactly one tile), so the outputs are not zero-filled.
MOE_OPTIONS: dict[tuple[str, str], tuple[tuple[str, Any], ...]] = {
    ("cpu", "medium"): (("fill_buffers", False),),
    ("gpu", "small"): (("fill_buffers", False), ("num_warps", 4), ("num_stages", 3)),
    ("gpu", "medium"): (("fill_buffers", False), ("num_warps", 4), ("num_stages", 3)),
    ("gpu", "large"): (("fill_buffers", False), ("num_warps", 8), ("num_stages", 3)),
}
# The size classes' bounds on the mean rows per expert (S / E): "small" up to SMALL_RUN,
# "medium" up to LARGE_RUN, "large" past it. Timed on an H100 (bf16, the gate/up and
# down GEMMs of each class on the same sorted rows): Qwen3-30B-A3B widths (128 experts,
# top-8) at 1 / 16 / 128 / 2,048 / 8,192 tokens ran best as medium / medium / medium /
# large / large (large 1.2x medium at 8,192; small 1.1x slower than medium at 1 and 16
# tokens, 3-6x slower past 2,048); Mixtral widths (8 experts, top-2) at 1 / 16 / 2,048 /
# 8,192 as small / medium / large / large (small 1.05x medium at 1 token; large 1.4x
# medium at 2,048). So small only below one row per two experts. The small tiles, timed
# on an H100 at 1 token (the gate/up and down GEMMs): 16 x 64 x 128 with 3 stages ran
# 47.6 us (Qwen3 widths) and 264 us (Mixtral), against 50.1 and 281 us for 16 x 64 x 64
# with 4 stages, 53-63 us for 32-column tiles and 53.7 / 296 us for the medium tiles.
SMALL_RUN, LARGE_RUN = 0.5, 64
COMBINE_COLS = {"cpu": 32, "gpu": 256}  # the combine's columns per block

# the macros of moe.co's functions, by the role of their operator
FUNCTIONS = ("MOE_GATE_UP", "MOE_GATE_UP_GRAD", "MOE_DOWN", "MOE_COMBINE", "MOE_GROUPED_NN",
              "MOE_GROUPED_TN")


def moe_size(rows: int | torch.SymInt, experts: int, element: str, kind: str) -> str:
    """The size class of a call sorting ``rows`` = tokens * top_k rows over ``experts``
    experts (see MOE_TILES): by the mean rows per expert against SMALL_RUN and LARGE_RUN
    where the device kind and element have tiles of each class, else "medium" (``rows``
    may be symbolic under ``torch.compile``: the comparisons are then guards)."""
    if (kind, element, "small") not in MOE_TILES:
        return "medium"
    # (branches, not bool(): torch.compile guards on a branch's condition)
    if rows <= SMALL_RUN * experts:
        return "small"
    if rows <= LARGE_RUN * experts:
        return "medium"
    return "large"


@kernels.constant_result
def moe_names(element: str, activation: str, kind: str,
              size: str = "medium") -> tuple[str, ...]:
    """The operators' names of a moe.co variant, in the order of ``FUNCTIONS`` (compiled
    and registered on first use, with the autograd of the gate/up, down and combine
    operators): ``moe_<function>_<element>_<activation>_<kind>_<size>`` (``size``: the
    size class, see ``moe_size``)."""
    suffix = f"{element}_{activation}_{kind}_{size}"
    names = tuple(f"{macro.lower()}_{suffix}" for macro in FUNCTIONS)
    bm, bn, bk = MOE_TILES[kind, element, size]
    defines = (("DT", element), ("ACC", ELEMENTS_ACC[element]), ("BM", bm), ("BN", bn),
               ("BK", bk), ("COLS", COMBINE_COLS[kind]),
               ("ACT", GATED_ACTIVATIONS[activation]))
    variant = Variant("moe", defines, tuple(zip(FUNCTIONS, names)), MOE_OPTIONS[kind, size])
    kernels.load(variant, _autograd(names), kind)
    return names


def moe_block_rows(element: str, kind: str, size: str = "medium") -> int:
    """BM of a variant: the rows of each entry of its tile table (``tile_table``)."""
    return MOE_TILES[kind, element, size][0]


def tile_table(runs: torch.Tensor, block_rows: int, rows: int | torch.SymInt) -> torch.Tensor:
    """The grouped GEMMs' tile table [MT, 3] int32 of the experts' runs ``runs`` [E, 2]
    (``[first, end)`` of each expert's sorted rows, ``rows`` in all): each expert's run
    cut into tiles of ``block_rows`` rows, an entry ``(expert, first row, rows)`` per
    tile, in the order of the rows; the last tile of a run may have fewer rows. The table
    has MT = rows // BM + min(E, rows) entries, a bound on the number of tiles (each
    expert adds its run's whole tiles, and one part tile when the run's length is not a
    multiple of BM: at most min(E, rows) of those); those past the last tile are unused,
    ``(-1, 0, 0)``. Torch operations only: nothing waits for the device, and the entries
    are read when the kernels run."""
    # (int32 throughout: the table's type. A fused_moe call is host-bound below a few
    # thousand tokens, so each launch counts: one gather of a stacked per-expert table,
    # not one per column)
    experts = runs.shape[0]
    runs = runs.to(torch.int32)
    counts = runs[:, 1] - runs[:, 0]
    spans = torch.div(counts + (block_rows - 1), block_rows, rounding_mode="floor")
    ends = torch.cumsum(spans, 0, dtype=torch.int32)  # each expert's tiles end there
    # (symbolic under torch.compile: a cast for the type checker only, no int())
    length = cast(int, rows // block_rows + min(experts, rows))
    index = torch.arange(length, device=runs.device, dtype=torch.int32)
    expert = torch.searchsorted(ends, index, right=True, out_int32=True)  # E: past the end
    used = expert < experts
    expert = expert.clamp(max=experts - 1)
    # each expert's (first tile, first row, rows), gathered for every entry at once
    start, first_row, count = torch.stack((ends - spans, runs[:, 0], counts), dim=1)[
        expert].unbind(1)
    offset = (index - start) * block_rows  # the tile's first row in its expert's run
    first = first_row + offset
    count = (count - offset).clamp(max=block_rows)
    # (scalars, not a tensor made on the host: its copy to the device would wait)
    return torch.stack((torch.where(used, expert, -1), torch.where(used, first, 0),
                        torch.where(used, count, 0)), dim=1)


def runs_of(tiles: torch.Tensor, experts: int) -> torch.Tensor:
    """The runs [E, 2] that ``tiles`` (a ``tile_table``) cuts: each expert's rows summed
    over its entries (unused entries count no rows), the runs laid end to end in the
    experts' order, as the sort leaves them."""
    counts = torch.zeros(experts, dtype=torch.int32, device=tiles.device).index_add_(
        0, tiles[:, 0].clamp(min=0), tiles[:, 2])
    ends = counts.cumsum(0).to(torch.int32)
    return torch.stack((ends - counts, ends), dim=1)


def _autograd(names: tuple[str, ...]) -> Callable[[Module], None]:
    """Attaches the backward of the gate/up, down and combine operators of ``names``."""
    gate_up, gate_up_grad, down, combine, grouped_nn, grouped_tn = names

    def attach(module: Module) -> None:
        def save_inputs(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        # (moe_grouped_tn reduces over each expert's run: the runs come from the table)
        def gate_up_backward(ctx: Any, dh: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            x, wg, wu, tiles = ctx.saved_tensors
            grads = operator(gate_up_grad)(x, wg, wu, tiles, dh.contiguous())
            dg, du = grads[0], grads[1]
            nn, tn = operator(grouped_nn), operator(grouped_tn)
            dx = nn(dg, wg, tiles) + nn(du, wu, tiles) if ctx.needs_input_grad[0] else None
            runs = runs_of(tiles, wg.shape[0])
            dwg = tn(dg, x, runs) if ctx.needs_input_grad[1] else None
            dwu = tn(du, x, runs) if ctx.needs_input_grad[2] else None
            return dx, dwg, dwu, None

        def down_backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            h, wd, tiles = ctx.saved_tensors
            dy = dy.contiguous()
            dh = operator(grouped_nn)(dy, wd, tiles) if ctx.needs_input_grad[0] else None
            dwd = (operator(grouped_tn)(dy, h, runs_of(tiles, wd.shape[0]))
                   if ctx.needs_input_grad[1] else None)
            return dh, dwd, None

        def combine_backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            y, pos, weights = ctx.saved_tensors
            rows = pos.reshape(-1).long()
            dy = dweights = None
            if ctx.needs_input_grad[0]:  # (pos is a permutation of the sorted rows)
                pairs = weights[..., None] * dout[:, None, :].to(weights.dtype)
                dy = torch.empty_like(y).index_copy_(0, rows, pairs.reshape(rows.shape[0], -1)
                                                     .to(y.dtype))
            if ctx.needs_input_grad[2]:
                picked = y.index_select(0, rows).reshape(*pos.shape, -1).to(weights.dtype)
                dweights = (picked * dout[:, None, :].to(weights.dtype)).sum(-1)
            return dy, None, dweights

        for name, backward in ((gate_up, gate_up_backward), (down, down_backward),
                               (combine, combine_backward)):
            torch.library.register_autograd(f"{NAMESPACE}::{name}", backward,
                                            setup_context=save_inputs)

    return attach


def route(router_logits: torch.Tensor, top_k: int,
          renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, ids)`` [T, top_k] of each token's ``top_k`` experts: the softmax of the
    router's logits (in float32, or float64 for float64 logits), its largest entries,
    renormalised to sum to one with ``renormalize`` (Mixtral; Qwen-MoE's
    ``norm_topk_prob``)."""
    wide = torch.float64 if router_logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(router_logits.to(wide), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


LAYOUT_LANES = 128  # moe_layout.co's threads per block


def layout(top_k_index: torch.Tensor, experts: int, block_rows: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pairs, tiles, pos)`` of ``sort_by_expert`` and ``tile_table`` (BM =
    ``block_rows``) together. An eager call sorts with torch and writes the table and
    ``pos`` with one kernel (``croqtile/kernels/moe_layout.co``): a fused_moe call is
    host-bound below a few thousand tokens, and the torch form is some twenty small
    launches. Traced calls (torch.compile, where Inductor fuses the torch form), and
    calls under a dispatch mode, take the torch form."""
    rows = top_k_index.numel()
    if not kernels.direct(top_k_index):
        pairs, runs, pos = sort_by_expert(top_k_index, experts)
        return pairs, tile_table(runs, block_rows, rows), pos
    ids = top_k_index.reshape(-1)
    order = torch.sort(ids, stable=True)
    bounds = torch.searchsorted(order.values, _edges(experts, ids.device, ids.dtype),
                                out_int32=True)
    length = rows // block_rows + min(experts, rows)
    tiles = torch.empty((length, 3), dtype=torch.int32, device=ids.device)
    pos = torch.empty(rows, dtype=torch.int32, device=ids.device)
    kernels.load_plain(_layout_variant(block_rows)).moe_layout(bounds, order.indices, tiles,
                                                               pos)
    return order.indices, tiles, pos.view(top_k_index.shape)


@functools.cache
def _layout_variant(block_rows: int) -> Variant:
    return Variant("moe_layout", (("BM", block_rows), ("LANES", LAYOUT_LANES)), ())


_EDGES: dict[tuple[int, torch.device, torch.dtype], torch.Tensor] = {}


def _edges(experts: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``arange(experts + 1)``, made once per device and type (eager calls only read it)."""
    key = (experts, device, dtype)
    made = _EDGES.get(key)
    if made is None:
        with torch.inference_mode(False):
            made = _EDGES[key] = torch.arange(experts + 1, device=device, dtype=dtype)
    return made


def sort_by_expert(top_k_index: torch.Tensor,
                   experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (token, expert) pairs of ``top_k_index`` [T, k] sorted by expert (a stable
    sort): ``(pairs, runs, pos)`` with ``pairs`` [T * k] the flat index ``token * k + j``
    of each sorted row's pair (its token is ``pairs // k``), ``runs`` [E, 2] int32 each
    expert's rows ``[first, end)`` in the sorted order (found by a binary search of the
    sorted ids; empty for an expert no token chose) and ``pos`` [T, k] int32 where each
    pair landed in the sorted order (the inverse permutation, for the combine). Torch
    operations only: nothing waits for the device."""
    ids = top_k_index.reshape(-1)
    order = torch.sort(ids, stable=True)
    bounds = torch.searchsorted(order.values, torch.arange(
        experts + 1, device=ids.device, dtype=order.values.dtype), out_int32=True)
    runs = torch.stack((bounds[:-1], bounds[1:]), dim=1)  # [E, 2]: each expert's rows
    pairs = order.indices
    pos = torch.empty(pairs.shape, dtype=torch.int32, device=pairs.device).index_copy_(
        0, pairs, torch.arange(pairs.shape[0], device=pairs.device, dtype=torch.int32))
    return pairs, runs, pos.view(top_k_index.shape)
