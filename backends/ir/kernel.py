"""A kernel's frame (a rule family of the lowering): the `: block` level becomes the
launch grid, and the lowered body becomes an ``ir.Kernel`` with its program ids (direct,
row-major, grouped or persistent), stream-K and split-tile passes, warps and stages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ...frontend import syntax as ast
from ...frontend.sema.levels import threads_per_block
from ...frontend.sema.model import Level, LevelInfo
from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span
from . import build as b
from . import nodes as ir
from . import split_tiles, stream_k
from .errors import LoweringError
from .state import SHARED_BUDGET, SHARED_LIMIT, KernelState, static_high
from .tiles import make_descriptor
from .values import Bounded


class KernelAssembly(KernelState):
    """Launch grid, program ids and the kernel record."""

    def lower(self) -> ir.Kernel:
        if isinstance(self.root, ast.Block):  # host statements (FunctionLowering._host_program)
            for stmt in self.root.stmts:
                self.stmt(stmt)
                self.emit(ir.Barrier(stmt.span))  # the next statement sees every write
            return self._kernel((Sym(1),))
        root = self.root
        assert root is not None  # (only the host's view probe has no root; it makes no kernel)
        levels = list(self.fn.parallels[id(root)])
        grid: tuple[Sym, ...] = (Sym(1),)
        if levels and levels[0].level is Level.BLOCK:
            grid = self._program_ids(levels.pop(0))
        self.grid = grid
        with self.nested_levels(levels):
            self.bodies.add(id(root.body))
            self.block(root.body)
        return self._kernel(grid)

    def _root_span(self) -> Span:
        """Where the kernel is in the source: its ``: block`` parallel (or host block)."""
        assert self.root is not None  # (only the host's view probe has no root)
        return self.root.span

    def _kernel(self, grid: tuple[Sym, ...]) -> ir.Kernel:
        body = self._split_tiles(self.scopes[0])
        if self.block_names:
            body, grid = self._block_ids(body)
        body = self.prologue + body
        if ir.rounds_on_cpu(body):
            self.cpu_flag()  # the interpreter's bf16/fp8 rounding is replaced (codegen)
        if ir.reads_back(body):
            self.pipelining = False
        params = sorted(self.params.values(), key=lambda p: list(ir.ParamKind).index(p.kind))
        for name in self.flags:
            params.append(ir.KernelParam(name, ir.ParamKind.FLAG))
        return ir.Kernel(self.name, params, grid, sorted(self.axes.values(), key=lambda a: a.order),
                         body, self._num_warps(), self._num_stages(), self._root_span(),
                         dict(self.flags), self.persistent_tiles, self.fl.options.epilogue_split,
                         self.stream_k_floats)

    def _split_tiles(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """``body`` with each padded tile axis computed in two power-of-two pieces where
        ``split_tiles`` asks for it and the pass applies (split_tiles.py); an axis that
        stays whole loads and stores through pointers."""
        if not self.fl.options.split_tiles:
            return body

        for key, axis in list(self.axes.items()):
            if not axis.padded or split_tiles.uses_axis(self.prologue, axis):
                continue
            try:
                body, pieces = split_tiles.split_axis(body, axis, self._piece_axis,
                                                      self._piece_desc)
            except split_tiles.NotSplit:
                continue
            del self.axes[key]
            self.axes.update({object(): piece for piece in pieces})
        body = split_tiles.pointer_paths(body, lambda axis: axis.padded)
        # descriptors nothing loads or stores through: those of whole padded tiles (each
        # piece has its own now), and pieces made for an axis that then did not split
        used = {n.desc for n in ir.nodes_of(body) if isinstance(n, (ir.DescLoad, ir.DescStore))}
        made = {p.name for p in self.params.values() if p.kind is ir.ParamKind.DESC} | {
            d.name for d in ir.nodes_of(self.prologue) if isinstance(d, ir.DefineDesc)}
        unused = made - used
        for name in unused:
            self.params.pop(name, None)
        self.prologue = [s for s in self.prologue if not (
            isinstance(s, ir.Branch) and any(isinstance(d, ir.DefineDesc) and d.name in unused
                                             for d in s.then))]
        tested = {n.flag for n in ir.nodes_of(self.prologue + body) if isinstance(n, ir.Branch)}
        tested |= {p.source.flag for p in self.params.values()
                   if isinstance(p.source, ir.HostDesc)}
        for flag in [f for f in self.flags if f.startswith("TMA_") and f not in tested]:
            del self.flags[flag]  # (the flag of a descriptor no longer made)
        return body

    def _piece_desc(self, name: str, dims: tuple[ir.Axis, ...]) -> str:
        """The descriptor of a piece of descriptor ``name``'s block (``dims``: the piece's
        block, in memory order)."""
        tensor = self.desc_tensors.get(name)
        if tensor is None:
            raise split_tiles.NotSplit("a tile is loaded through a permuted descriptor")
        return make_descriptor(self, tensor, tuple(d.size for d in dims))

    def _piece_axis(self, whole: ir.Axis, size: int) -> ir.Axis:
        """A power-of-two piece of a split tile axis (in the same place among the axes)."""
        return ir.Axis(self.fresh(whole.name), size, size, whole.order)

    def _program_ids(self, level: LevelInfo) -> tuple[Sym, ...]:
        """Bind the variables of the `: block` level to names; the statements that compute
        them are written by ``_block_ids`` once the body is lowered (their form depends on
        whether the kernel multiplies matrices). Returns the logical grid."""
        bounds = level.bounds
        for bound in bounds:
            self.use_sym(bound)
        names = [self.fresh(v.name) for v in level.vars]
        index: ir.Expr = b.const(0)
        for sym, name, bound in zip(level.vars, names, bounds):
            self.env[sym] = Bounded(b.var(name, high=static_high(bound)), bound)
            index = b.add(b.mul(index, b.sym(bound)), b.var(name))
        self.program_index = index  # row-major: unique per block whatever the launch order
        self.block_names = names
        self.bind_tuple(level)
        return tuple(bounds)

    def _block_ids(self, body: list[ir.Stmt]) -> tuple[list[ir.Stmt], tuple[Sym, ...]]:
        """The kernel body with the block variables computed in front, and the launch grid.

        Up to three block axes map to program ids directly. Otherwise the blocks are
        numbered by one flat tile index: row-major for more than three axes, and for a 2-D
        grid of an MMA kernel in groups of ``group_m`` rows (the tiles running at the same
        time then share rows of A and columns of B in the L2 cache). With ``persistent``
        one program per SM loops over the tile indices (no launch tail of short-lived
        programs, tensor descriptors made once)."""
        bounds, names = self.grid, list(self.block_names)
        options = self.fl.options
        if options.heavy_first and names:
            # the ids below compute a stand-in for the first block variable
            self.block_names = [self.fresh(names[0] + "_walked")] + names[1:]
        grouped = len(bounds) == 2 and options.group_m > 1 and self.has_dot
        # by default MMA kernels are persistent, except those chaining one product into
        # the next (attention): on the H200 each of those ran 1.2-1.7x faster with one
        # program per tile, the hardware scheduling their tiles of uneven length
        persistent = options.persistent
        if persistent is None:
            persistent = self.has_dot and not self.chained_dot
        if options.warp_specialize and not persistent:
            body = _specialized(body)
        for option in ("stream_k", "halve_last_wave"):
            if getattr(options, option) and self.has_dot and not persistent:
                raise LoweringError("CQ0705", self._root_span(), option=option,
                                    reason="it needs a persistent launch (persistent=False)")
        if options.stream_k and options.halve_last_wave and self.has_dot:
            raise LoweringError("CQ0705", self._root_span(), option="halve_last_wave",
                                reason="stream_k already shares out the last wave")
        if not (grouped or persistent or len(bounds) > 3):
            direct: list[ir.Stmt] = [
                ir.Let(None, name, ir.Call((), b.I32, "program_id", (b.const(i),)))
                for i, name in enumerate(self.block_names)]
            return direct + self._walked_back(names) + body, bounds
        total = Sym(1)
        for bound in bounds:
            total = total * bound
        tile = self.fresh("tile")
        ids = (self._grouped_ids(tile, options.group_m) if grouped
               else self._row_major_ids(tile))
        program = ir.Call((), b.I32, "program_id", (b.const(0),))
        ids += self._walked_back(names)
        if not persistent:
            return [ir.Let(None, tile, program)] + ids + body, (total,)
        programs = self.fresh("n_programs")
        self.params[programs] = ir.KernelParam(programs, ir.ParamKind.INT, ir.DType.I32,
                                               ir.PROGRAMS)
        self.persistent_tiles = total
        loop = ir.For(self._root_span(), tile, program, b.sym(total), ids + body,
                      step=b.var(programs), flatten=options.flatten,
                      warp_specialize=options.warp_specialize)
        if options.stream_k and self.has_dot:
            return self._stream_k(loop, total, self._column_runs() if grouped else None), \
                (total,)
        if options.halve_last_wave and self.has_dot:
            return self._halved_last_wave(loop, total), (total,)
        return [loop], (total,)

    def _walked_back(self, names: list[str]) -> list[ir.Stmt]:
        """With ``heavy_first``: the first block variable from its stand-in, walked from
        its last value (one-to-one, so the same result); ``block_names`` restored."""
        if self.block_names == names:
            return []
        walked, self.block_names = self.block_names[0], names
        last = b.add(b.sym(self.grid[0]), b.const(-1))
        return [ir.Let(None, names[0], b.binary("-", last, b.var(walked)))]

    def _column_runs(self) -> ir.Expr:
        """How many consecutive tiles of the grouped walk share a column: all the rows
        where they fit in one group (``_grouped_ids``), else 1 (groups of uneven height)."""
        rows = b.sym(self.grid[0])
        return ir.Where((), b.I32, b.binary("<=", rows, b.const(self.fl.options.group_m)),
                        rows, b.const(1))

    def _stream_k(self, loop: ir.For, tiles: Sym, runs: ir.Expr | None) -> list[ir.Stmt]:
        """The persistent tile loop with its last wave split along K (stream_k.py);
        ``runs`` as in ``stream_k.Names``."""
        mode = self.fl.options.stream_k
        parts = None if mode is True or mode == "always" else int(mode)
        names = stream_k.Names(self.fresh("workspace_ptr"), self.fresh("counters_ptr"),
                               self.fresh("STREAM_K"), self.fresh, parts, runs)
        outer = {s.name for s in self.prologue if isinstance(s, (ir.Let, ir.DefineDesc))}
        try:
            stmts, floats = stream_k.split_last_wave(loop, names, outer)
        except stream_k.NotSplittable as exc:
            raise LoweringError("CQ0705", self._root_span(), option="stream_k",
                                reason=str(exc)) from None
        self.params[names.workspace] = ir.KernelParam(names.workspace, ir.ParamKind.POINTER,
                                                      ir.DType.F32, ir.WORKSPACE)
        self.params[names.counters] = ir.KernelParam(names.counters, ir.ParamKind.POINTER,
                                                     ir.DType.I32, ir.COUNTERS)
        self.stream_k_floats = floats
        count = tiles.render(ir.dim_var_name)
        # (which last waves are split: see stream_k.py)
        self.flags[names.flag] = (f"0 < ({count}) % programs" if mode == "always"
                                  else f"0 < ({count}) % programs * 2 <= programs")
        return stmts

    def _halved_last_wave(self, loop: ir.For, tiles: Sym) -> list[ir.Stmt]:
        """The persistent tile loop ``loop`` with the tiles of a last wave at most half
        full computed in halves (``halve_last_wave``): the full waves as before, then
        program ``p`` computes half ``p % 2`` of last-wave tile ``p // 2``, over half the
        widest output axis of the tile's matrix product. A wave of 52 tiles of 128 x 256
        on 132 SMs (512 x 28672 x 4096) leaves 80 SMs idle for a tile's whole time;
        halved, 104 programs each take about half that time. Unlike stream-K nothing is
        written to a workspace and added up: each half is a tile of its own."""
        span, program, programs = loop.span, loop.start, loop.step
        assert programs is not None  # a persistent loop steps by the program count
        axis = self._halved_axis(loop.body)
        names = {stem: self.fresh(stem) for stem in ("HALVES", "dp_tiles", "half", "piece")}
        dp_tiles = b.var(names["dp_tiles"])
        piece = ir.Axis(self.fresh(axis.name), axis.size // 2, axis.size // 2, axis.order)
        offset = b.mul(b.var(names["piece"]), b.const(piece.size))
        try:
            body = split_tiles.one_piece(loop.body, axis, piece, offset, self._piece_desc)
        except split_tiles.NotSplit as exc:
            raise LoweringError("CQ0705", self._root_span(), option="halve_last_wave",
                                reason=f"the tile's {axis.size}-wide output axis cannot be "
                                       f"halved: {exc}") from None
        self.axes[object()] = piece
        whole = b.sym(tiles)
        half = b.var(names["half"])
        halves = ir.For(span, names["half"], program,
                        b.mul(b.binary("-", whole, dp_tiles), b.const(2)), [
                            ir.Let(span, loop.var, b.add(dp_tiles,
                                                         b.binary("//", half, b.const(2)))),
                            ir.Let(span, names["piece"], b.binary("%", half, b.const(2))),
                            *body], step=programs)
        count = tiles.render(ir.dim_var_name)
        # (the host halves a last wave only when its halves fit in one wave)
        self.flags[names["HALVES"]] = f"0 < ({count}) % programs * 2 <= programs"
        return [
            ir.Branch(span, names["HALVES"], [ir.Let(span, names["dp_tiles"], b.binary(
                "-", whole, b.binary("%", whole, programs)))],
                [ir.Let(span, names["dp_tiles"], whole)]),
            replace(loop, stop=dp_tiles),
            ir.Branch(span, names["HALVES"], [
                ir.Comment(span, "the last wave's tiles in halves, one program each"),
                halves], []),
        ]

    def _halved_axis(self, body: list[ir.Stmt]) -> ir.Axis:
        """The output axis of the tile body's one matrix product that is halved: the
        wider (the columns on a tie), unpadded and at least 32 wide."""
        dots = {id(n): n for n in ir.nodes_of(body) if isinstance(n, ir.Dot)}
        outputs = {(d.m.name, d.n.name) for d in dots.values()}
        if len(outputs) != 1:
            raise LoweringError("CQ0705", self._root_span(), option="halve_last_wave",
                                reason="the tile body has no single matrix product")
        dot = next(iter(dots.values()))
        for axis in sorted((dot.n, dot.m), key=lambda a: -a.size):
            if not axis.padded and axis.size >= 2 * split_tiles.DOT_MIN \
                    and not split_tiles.uses_axis(self.prologue, axis):
                return axis
        raise LoweringError("CQ0705", self._root_span(), option="halve_last_wave",
                            reason=f"the {dot.m.size} x {dot.n.size} output tile has no "
                                   "unpadded axis of at least 32 to halve")

    def _row_major_ids(self, tile: str) -> list[ir.Stmt]:
        ids: list[ir.Stmt] = []
        rest: ir.Expr = b.var(tile)
        for name, bound in reversed(list(zip(self.block_names, self.grid))):
            size = b.sym(bound)
            ids.insert(0, ir.Let(None, name, b.binary("%", rest, size)))
            rest = b.binary("//", rest, size)
        return ids

    def _grouped_ids(self, tile: str, group_m: int) -> list[ir.Stmt]:
        """Tile ``tile`` of a 2-D grid walked ``group_m`` rows at a time, column by column
        within the group (the last group may have fewer rows)."""
        (row, col), (rows, cols) = self.block_names, self.grid
        t, group = b.var(tile), b.const(group_m)
        width = self.fresh("group_width")
        first = self.fresh("first_row")
        height = self.fresh("group_rows")
        within = b.binary("%", t, b.var(width))
        return [
            ir.Let(None, width, b.mul(group, b.sym(cols))),
            ir.Let(None, first, b.mul(b.binary("//", t, b.var(width)), group)),
            ir.Let(None, height, ir.Call((), b.I32, "minimum",
                                         (b.binary("-", b.sym(rows), b.var(first)), group))),
            ir.Let(None, row, b.add(b.var(first), b.binary("%", within, b.var(height)))),
            ir.Let(None, col, b.binary("//", within, b.var(height))),
        ]

    def _num_stages(self) -> int:
        if not self.pipelining:  # a loop reads back what it stored: one stage, in order
            return 1
        if self.fl.options.num_stages:
            return self.fl.options.num_stages
        # a chained kernel (attention) keeps its hoisted tiles in shared memory and needs
        # little for its epilogue: its loop's stages may fill the rest (on the H200 the
        # causal tutorial kernel ran 4-7 % faster with 3 stages than with 2)
        budget = SHARED_LIMIT - self.resident_bytes if self.chained_dot else SHARED_BUDGET
        # Triton pipelines the loop's other tile loads too (an attention mask read in
        # the loop), with one buffer fewer than the stages: counted, or the pipeline
        # would not fit (a masked attention kernel asked 352 KiB at 3 stages)
        streamed = _streamed_bytes(self.scopes[0])
        stages = 3
        while stages > 1 and stages * self.stage_bytes + (stages - 1) * streamed > budget:
            stages -= 1
        return stages

    def _num_warps(self) -> int:
        if self.fl.options.num_warps:
            return self.fl.options.num_warps
        threads = threads_per_block(self.level_bounds)
        warps = max(1, min(16, -(-threads // 32)))
        warps = b.next_pow2(warps)
        if not self.has_dot:
            return min(warps, 8)
        # a warpgroup at least; more when the accumulator would take over 128 registers a
        # thread (a 128 x 256 f32 tile: two warpgroups, as measured on the H200)
        by_registers = b.next_pow2(-(-self.dot_bytes // (32 * 128 * 4)))
        return max(warps, 4, min(by_registers, 8))


def _streamed_bytes(body: list[ir.Stmt]) -> int:
    """Bytes of the tiles (two axes or more) that loops multiplying matrices load from
    global memory other than as MMA operands (those are in ``stage_bytes``), per trip;
    a loop's own statements only (a nested loop is pipelined on its own)."""
    total = 0
    for loop in ir.nodes_of(body):
        if not isinstance(loop, ir.For):
            continue
        own = list(_own_nodes(loop.body))
        dots = [n for n in own if isinstance(n, ir.Dot)]
        if not dots:
            continue
        operands = {n.name for d in dots for n in ir.nodes_of([d.a, d.b])
                    if isinstance(n, ir.Var)}
        operand_loads = {id(n.value) for n in own
                         if isinstance(n, ir.Let) and n.name in operands}
        for node in own:
            if isinstance(node, ir.Load) and len(node.axes) >= 2 \
                    and id(node) not in operand_loads:
                count = 1
                for axis in node.axes:
                    count *= axis.size
                total += count * _element_bytes(node.dtype)
    return total


def _own_nodes(body: list[ir.Stmt]) -> Iterator[object]:
    """The IR nodes under ``body`` outside the loops nested in it."""
    for stmt in body:
        if isinstance(stmt, ir.For):
            continue
        if isinstance(stmt, ir.If):
            yield stmt.cond
            yield from _own_nodes(stmt.then)
            yield from _own_nodes(stmt.other)
            continue
        yield from ir.nodes_of([stmt])


def _element_bytes(dtype: ir.DType) -> int:
    bits = int("".join(ch for ch in dtype.value if ch.isdigit()) or 8)
    return max(1, bits // 8)


def _specialized(body: list[ir.Stmt]) -> list[ir.Stmt]:
    """``body`` with Triton's warp specialisation asked for on its outermost loops that
    multiply matrices (``warp_specialize`` without a persistent tile loop to put it on)."""
    out: list[ir.Stmt] = []
    for stmt in body:
        if isinstance(stmt, ir.For) and any(isinstance(n, ir.Dot) for n in ir.nodes_of(stmt.body)):
            stmt = replace(stmt, warp_specialize=True)
        elif isinstance(stmt, ir.If):
            stmt = replace(stmt, then=_specialized(stmt.then), other=_specialized(stmt.other))
        out.append(stmt)
    return out

