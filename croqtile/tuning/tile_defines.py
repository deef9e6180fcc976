"""Which ``#define`` constants a program uses as tile extents, found by asking the checker.

The rule. A ``#define`` whose value (as written, or as ``defines=`` gives it) is a
positive decimal integer is a *tile define* of a ``__co__`` function when compiling the
source with that one value changed (to twice the value, and to half of it) changes an
extent the checker computes for the function:

- the shape of a view (``subspan``, ``chunkat``, ``view``, ``at``: what a DMA copies and
  what an MMA loads),
- the shape of a ``shared`` or ``local`` buffer (array dimensions included),
- a ``parallel`` bound that depends on a parameter dimension (``cdiv(M, TILE_M)``),

and changes neither a parameter's shape nor the returned type: a constant that does is a
problem size (``[N, HEAD_DIM]``), which tuning must not touch. The name does not matter
(``#define FOO 128`` used as a tile extent is found; ``#define TILE_M 2.0`` used as a
scale is not). A constant used only in arithmetic, in an index or as a loop count
(``foreach s in [STAGES]``) changes none of these extents and is not a tile define; one
that shapes a buffer (``shared f16 [STAGES, 64, 64]``) is.

Probing runs the preprocessor, the parser and the checker only (a few milliseconds for a
GEMM), never the lowering or Triton. A probe whose program the checker walks differently
(a ``#if`` on the constant) says nothing and the other probe decides.

Each tile define also records the parameter dimensions it tiles -- a view of a parameter
whose extent along dimension ``M`` follows it, or a ``parallel`` bound over ``M`` --
which lets the search choose candidate values for a shape (a 128-row tile over
``M = 16`` rows computes mostly padding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..frontend import syntax as ast
from ..frontend.diagnostics import Reporter
from ..frontend.lexer import gc_paused
from ..frontend.parser import parse_program, recursion_headroom
from ..frontend.preprocessor import preprocess
from ..frontend.regions import find_co_functions
from ..frontend.sema.checker import Checker
from ..frontend.sema.model import CheckedFunction, Level, SymKind
from ..frontend.sema.symbolic import Sym
from ..frontend.source import Source, SourceMap

Defines = Mapping[str, Any]


@dataclass(frozen=True)
class TileDefine:
    """A ``#define`` used as a tile extent: its value in effect and the parameter
    dimensions it tiles (empty when it tiles only buffers, e.g. a K slice of a staged
    tile). ``parallel``: some ``parallel`` bound over a dimension follows it (an output
    tile spread over blocks, rather than a step of a loop)."""

    name: str
    value: int
    dims: tuple[str, ...] = ()
    parallel: bool = False


@dataclass(frozen=True)
class _Extent:
    """One extent the checker computed: what it is (for the message of a test), its
    values, and per position the parameter dimension it tiles (None where unknown)."""

    what: str
    values: tuple[Sym, ...]
    dims: tuple[str | None, ...]
    parallel: bool = False


@dataclass(frozen=True)
class _Shape:
    """What a probe compares for one function."""

    problem: tuple[Any, ...]  # parameter shapes and the returned type
    extents: tuple[_Extent, ...]
    block_grids: tuple[tuple[Sym, ...], ...]  # the bounds of each block-level parallel
    has_mma: bool


def _single_dim(dim: Sym) -> str | None:
    names = dim.free_vars()
    return next(iter(names)) if len(names) == 1 else None


def _shape_of(fn: CheckedFunction) -> _Shape:
    problem: list[Any] = [(p.name, p.shape) for p in fn.params]
    problem.append(repr(fn.ret_type))
    extents: list[_Extent] = []
    for view in fn.views.values():
        root, shape = view.root, tuple(view.type.shape)
        tiled: tuple[str | None, ...] = (None,) * len(shape)
        if root.is_param and root.shape is not None and len(root.shape) == len(shape):
            tiled = tuple(_single_dim(d) for d in root.shape)
        extents.append(_Extent(f"view of {root.name}", shape, tiled))
    for declared in fn.decls.values():
        for sym in declared:
            if sym.kind is SymKind.DATA and sym.storage in ("shared", "local"):
                shape = tuple(sym.shape or ()) + tuple(sym.array_dims)
                extents.append(_Extent(f"buffer {sym.name}", shape, (None,) * len(shape)))
    grids: list[tuple[Sym, ...]] = []
    for levels in fn.parallels.values():
        for level in levels:
            if level.level is Level.BLOCK:
                grids.append(tuple(level.bounds))
            for bound in level.bounds:
                names = sorted(bound.free_vars())
                if names:  # a bound over a dimension (a count alone is no tile extent)
                    extents.append(_Extent("parallel bound", (bound,), (",".join(names),),
                                           parallel=True))
    return _Shape(tuple(problem), tuple(extents), tuple(grids), bool(fn.frags))


def check_shapes(text: str, defines: Defines) -> dict[str, _Shape]:
    """The extents of every function of ``text`` compiled with ``defines``, by function
    name; errors do not stop it (a candidate over the shared-memory budget still has
    extents). Empty when the front end fails outright."""
    source = Source(text, "<tile probe>")
    reporter = Reporter(SourceMap.identity(source))
    try:
        with recursion_headroom(), gc_paused():
            pre = preprocess(source, reporter, dict(defines))
            reporter.source_map = pre.source_map
            regions = find_co_functions(pre.text, reporter)
            program: ast.Program = parse_program(pre.text, [(r.start, r.end) for r in regions],
                                                 reporter)
            checked = Checker(reporter).check_program(program)
    except Exception:  # a compiler bug in a probe: no tile defines, never a failed call
        return {}
    return {fn.node.name: _shape_of(fn) for fn in checked.functions}


def integer_value(text: Any) -> int | None:
    """The value of a define written as a positive decimal integer, else None."""
    text = str(text).strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _compare(base: _Shape, probe: _Shape) -> tuple[bool, set[str], bool] | None:
    """Whether ``probe`` changed a tile extent of ``base``, the dimensions those extents
    tile and whether a parallel bound changed; None when the probe says nothing (another
    walk of the program, where extents cannot be matched up)."""
    if len(base.extents) != len(probe.extents):
        return None
    changed, dims, parallel = False, set(), False
    for old, new in zip(base.extents, probe.extents):
        if old.values == new.values:
            continue
        changed = True
        parallel = parallel or old.parallel
        for a, b, dim in zip(old.values, new.values, old.dims):
            if a != b and dim:
                dims.update(dim.split(","))
    return changed, dims, parallel


class TileProbe:
    """The tile defines of the functions of one source (``defines`` fixed by the caller
    are neither probed nor searched), and the number of output tiles of a function for
    given define values and dimensions. Results are computed once and kept."""

    def __init__(self, text: str, source_defines: Mapping[str, str], fixed: Defines) -> None:
        self._text = text
        self._written = dict(source_defines)
        self._fixed = dict(fixed)
        self._shapes: dict[tuple[tuple[str, str], ...], dict[str, _Shape]] = {}
        self._tiles: dict[str, tuple[TileDefine, ...]] | None = None

    def shapes(self, defines: Defines | None = None) -> dict[str, _Shape]:
        merged = {**self._fixed, **(defines or {})}
        key = tuple(sorted((k, str(v)) for k, v in merged.items()))
        if key not in self._shapes:
            self._shapes[key] = check_shapes(self._text, merged)
        return self._shapes[key]

    def tile_defines(self, function: str) -> tuple[TileDefine, ...]:
        """The tile defines of ``function``, in the order the source defines them."""
        if self._tiles is None:
            self._tiles = self._probe_all()
        return self._tiles.get(function, ())

    def _probe_all(self) -> dict[str, tuple[TileDefine, ...]]:
        base = self.shapes()
        found: dict[str, list[TileDefine]] = {name: [] for name in base}
        for name, written in self._written.items():
            value = integer_value(written)
            if name in self._fixed or value is None:
                continue
            probes = [self.shapes({name: v}) for v in (value * 2, value // 2) if v > 0]
            for function, shape in base.items():
                tile = self._judge(name, value, shape, [p.get(function) for p in probes])
                if tile is not None:
                    found[function].append(tile)
        return {function: tuple(tiles) for function, tiles in found.items()}

    @staticmethod
    def _judge(name: str, value: int, base: _Shape,
               probes: Sequence[_Shape | None]) -> TileDefine | None:
        changed, dims, parallel = False, set(), False
        for probe in probes:
            if probe is None:
                continue
            if probe.problem != base.problem:
                return None  # a problem size (a parameter's shape), never a tile
            result = _compare(base, probe)
            if result is None:
                continue
            changed = changed or result[0]
            dims |= result[1]
            parallel = parallel or result[2]
        if not changed:
            return None
        return TileDefine(name, value, tuple(sorted(dims)), parallel)

    def has_mma(self, function: str) -> bool:
        shape = self.shapes().get(function)
        return shape is not None and shape.has_mma

    def output_tiles(self, function: str, defines: Defines, dims: Mapping[str, int]) -> int | None:
        """Programs of the largest block-level ``parallel`` of ``function`` with these
        define values at these dimensions (the tiles a persistent launch deals out);
        None when unknown (a bound over a dimension not given)."""
        shape = self.shapes(defines).get(function)
        if shape is None or not shape.block_grids:
            return None
        counts = []
        for grid in shape.block_grids:
            count = 1
            for bound in grid:
                try:
                    count *= bound.evaluate(dims)
                except (KeyError, ZeroDivisionError):
                    return None
            counts.append(count)
        return max(counts)
