"""The candidates of an autotuning search (see ``croqtile.tuning.tuner``): configurations, the
spaces a caller gives with ``tunables=``, and the search ``autotune="quick"``/``"full"``
runs without them.

The default search (``Descent``) starts from the untuned configuration and changes one
thing at a time, keeping what was fastest so far:

1. each tile define in turn (``croqtile.tuning.tile_defines`` finds them, whatever their
   names), over values chosen for the shape bucket (``tile_values``), the other defines
   at the best values so far -- the defines of a tile that overhangs its dimension
   first (a 128-row tile over 16 rows of a decode GEMM computes mostly padding), then
   those spreading output tiles over blocks, then the rest; a three-quarter tile
   (``_split_option``) is timed at the untuned launch, at 4 stages and at 4 stages with
   4 warps, since its own launch decides whether it beats the written tile (128 x 192
   over 512 x 6144 x 4096 on the H200: 0.85 of cuBLAS at the untuned 3 stages; chosen at
   4 stages and 4 warps, 0.99-1.01);
2. for an MMA kernel that streams its weights (fewer output tiles than SMs, and at
   most 128 rows: a decode step), instead of the single rounds of these defines: a row
   tile over more rows than there are at the size covering them, with the output tile
   across the weights (down to a width whose grid fills half the SMs) and the K step
   (its written value, twice and four times) together, with 4 warps (and 8 for tiles
   of 8192 elements or more): narrower tiles with longer steps win only together (the
   H200's decode shapes took 16 x 64 to 64 x 32 tiles, K steps of 128-256 and 4 warps,
   which one change at a time from 128 x 256 and 8 warps does not reach);
3. the launch options (``num_warps``, ``num_stages``, ``persistent``; ``group_m`` in
   "full"; with fewer output tiles than SMs deeper pipelines and ``descriptors``),
   every combination, on the best defines;
4. "full" sweeps the tile defines once more with the chosen options;
5. stream-K on the best configuration, when its grid leaves SMs idle (``idle_wave``).
   Only there: tried first, on the written tiles, stream-K won the first round of
   512 x 4096 x 14336 on the H200 (0.112 ms against 0.142 untuned), and the tile rounds
   then compared each narrower tile at the untuned launch against it, so the search
   never reached the 64-row tile with its own launch options (0.099 ms). With at least
   one full wave before that idle one, the last wave computed in halves
   (``halve_last_wave``) too: 512 x 28672 x 4096 in 128 x 256 tiles is 3 waves and 52
   tiles on 132 SMs, which narrower tiles everywhere do not help (128 x 128 measured
   0.88-0.93 of cuBLAS against 0.91-0.93 for 128 x 256) and halving only the last wave
   does (0.938-0.961; stream-K 0.92, its parts' workspace traffic costing what the
   idle SMs gain).

Otherwise one define at a time cannot find a pair of changes of which neither helps
alone; it does find the changes a shape needs (smaller tiles for few rows, stream-K for
few tiles) in a few dozen candidates, which a product of every knob (hundreds) does not
within the quick budget.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from .tile_defines import TileDefine, TileProbe

MODES = ("none", "quick", "full")

# The launch options a default search varies, with their candidate values per mode (the
# first value of each is where the product's order starts).
_OPTION_SPACE: dict[str, dict[str, tuple[Any, ...]]] = {
    "quick": {"num_warps": (4, 8), "num_stages": (3, 4), "persistent": (False, True)},
    "full": {"num_warps": (4, 8), "num_stages": (2, 3, 4, 5), "persistent": (False, True),
             "group_m": (1, 8)},
}
# MMA kernels whose written tiles are fewer than the SMs (decode and skinny shapes) stream
# their weights: deep pipelines and plain pointer loads won there in the benchmark
# kernel's calibration on the H200 (bench/tune_gemm.py: M = 16 and 64 took 6 stages, 4
# warps and no descriptors; M = 512 took 5 stages), so those are searched instead
_FEW_TILES_OPTION_SPACE: dict[str, dict[str, tuple[Any, ...]]] = {
    "quick": {"num_warps": (4, 8), "num_stages": (4, 6), "persistent": (False, True),
              "descriptors": (True, False)},
    "full": {"num_warps": (4, 8), "num_stages": (3, 4, 5, 6), "persistent": (False, True),
             "descriptors": (True, False), "group_m": (1, 8)},
}
# stream_k values tried where the grid leaves SMs idle: every SM (True), and in "full"
# at most 2 or 4 programs per tile too (fewer partial tiles to add up)
_STREAM_K = {"quick": (True,), "full": (True, 2, 4)}
# A three-quarter tile (two pieces, split_tiles) is also timed in its tile round at this
# many stages, and at this many stages with 4 warps: on the H200 128 x 192 x 64 tiles
# over 512 x 6144 x 4096 took 49.8 us at the untuned 3 stages, 46.6 at 4 (40 KB a
# stage), against 47.7 for 128 x 256 tiles; with 4 warps too, 37.7-39.7 (chosen after the
# launch round in two searches of three; in the third the 8-warp forms came out 1.5 %
# behind the written tile, so that the launch round never tried its 4 warps: 0.90 of
# cuBLAS where the others reached 0.99-1.01)
_SPLIT_STAGES = 4
# the tile defines are swept this many times (the second with the chosen options)
_SWEEPS = {"quick": 1, "full": 2}
TUNABLE_OPTIONS = ("num_warps", "num_stages", "persistent", "group_m", "flatten",
                   "warp_specialize", "descriptors", "epilogue_split", "stream_k",
                   "halve_last_wave", "split_tiles", "backend", "heavy_first")
_DEFINE_LINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)\s+(\S.*?)\s*$", re.MULTILINE)

# Tile values searched. An MMA tile is at least 16 along each axis (tl.dot's minimum)
# and at most 256 (a 256 x 256 f32 accumulator already fills the register file of a
# 2-warpgroup block); other kernels' tiles (copies, element-wise) go from 8 to 1024.
_MMA_TILES = (16, 256)
_OTHER_TILES = (8, 1024)
# When the output tiles are fewer than the SMs, tiles along an output dimension are
# halved this many times at most (nearest first): 128 x 256 over 512 x 4096 is 64 tiles
# for 132 SMs, 64 x 128 is 256.
_HALVINGS = {"quick": 2, "full": 3}
# A last wave of tiles at most half full wastes this share of the launch or more before
# stream-K is tried: 16 tiles on 132 SMs waste 88 %, 288 tiles (3 waves) 27 %, 448 tiles
# (512 x 28672 in 128 x 256 tiles, 3.4 waves) 15 %, 1000 tiles 5 % (the parts' workspace
# traffic would cost about that). The final round keeps the default unless stream-K wins.
_IDLE_SHARE = 0.1


@dataclass(frozen=True)
class Config:
    """One point of the search: ``#define`` values and compile options, in a canonical
    order (defines by name, options in ``TUNABLE_OPTIONS`` order) so that equal
    configurations compare equal."""

    defines: tuple[tuple[str, Any], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def of(defines: Mapping[str, Any], options: Mapping[str, Any],
           written: Mapping[str, str] | None = None) -> Config:
        """The configuration of these values; a define at its written value (in
        ``written``) is left out, so it equals the configuration that does not set it."""
        written = written or {}
        kept = {n: v for n, v in defines.items() if n not in written or str(v) != written[n]}
        order = {name: i for i, name in enumerate(TUNABLE_OPTIONS)}
        return Config(tuple(sorted(kept.items())),
                      tuple(sorted(options.items(), key=lambda kv: order.get(kv[0], 99))))

    def as_dict(self) -> dict[str, Any]:
        return {"defines": dict(self.defines), **dict(self.options)}

    def describe(self) -> str:
        """The config as the arguments a user pastes into ``croqtile.compile``."""
        parts = [f"defines={dict(self.defines)!r}"] if self.defines else []
        parts += [f"{name}={value!r}" for name, value in self.options]
        return ", ".join(parts) or "(the defaults)"


Round = Callable[[Config], list[Config]]  # the best configuration so far -> candidates


@dataclass(frozen=True)
class Space:
    """The candidates a caller gave: the product of ``knobs`` (name -> values, the first
    value the default), or an ``explicit`` list of configurations. ``written``: the
    source's defines as written (a candidate setting one to that value is the default)."""

    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    explicit: tuple[Config, ...] = ()
    written: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.knobs and not self.explicit

    def configs(self) -> list[Config]:
        """Every candidate: an explicit list in its order; a product with the all-first
        combination first, then by how many knobs differ from the first values (so a
        search cut short by its budget has tried the nearest)."""
        if self.explicit:
            return list(self.explicit)
        names = [name for name, _ in self.knobs]
        combos = list(itertools.product(*(values for _, values in self.knobs)))
        combos.sort(key=lambda combo: _distance(self.knobs, combo))
        return [_config(names, combo, dict(self.written)) for combo in combos]

    def rounds(self) -> Iterator[Round]:
        yield lambda best: self.configs()

    def key(self) -> list[Any]:
        """A JSON-able description (part of the cache key)."""
        return [[[n, list(v)] for n, v in self.knobs], [c.as_dict() for c in self.explicit]]


@dataclass(frozen=True)
class Descent:
    """The default search (module docstring): ``tiles`` per tile define its values (the
    written one first), ``joint`` the points (define and option values) tried together
    after the tiles, each over the best configuration so far, ``options`` the launch
    option knobs, ``stream_k`` the values tried last on the best configuration when
    ``idle`` says that its grid leaves SMs idle, and a halved last wave when ``halves``
    says that one full wave at least comes before it."""

    tiles: tuple[tuple[str, tuple[int, ...]], ...] = ()
    joint: tuple[tuple[tuple[str, Any], ...], ...] = ()
    options: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    stream_k: tuple[Any, ...] = ()
    sweeps: int = 1
    idle: Callable[[Config], bool] = field(default=lambda config: False, compare=False)
    halves: Callable[[Config], bool] = field(default=lambda config: False, compare=False)
    # the written values of the defines the joint points set
    written: tuple[tuple[str, str], ...] = ()
    # the shape ``idle`` counts tiles at (part of the key: it decides the stream-K round)
    counted_at: tuple[tuple[str, int], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.tiles and not self.options and not self.stream_k

    def rounds(self) -> Iterator[Round]:
        for _ in range(self.sweeps):
            for name, values in self.tiles:
                yield functools.partial(self._tile, name, values)
            if self.joint:
                yield self._joint
            if self.options:
                yield self._launch
        if self.stream_k:
            yield self._split

    def _tile(self, name: str, values: tuple[int, ...], best: Config) -> list[Config]:
        written = {name: str(values[0])}
        searched = {n for n, _ in self.options}
        configs = []
        for v in values:
            defines = {**dict(best.defines), name: v}
            split = _split_option(v, values[0])
            options = {**dict(best.options), **split}
            configs.append(Config.of(defines, options, written))
            if split and "num_stages" in searched and "num_stages" not in options:
                # (the untuned launch pipelines at most 3 stages: see _SPLIT_STAGES)
                deeper = {**options, "num_stages": _SPLIT_STAGES}
                configs.append(Config.of(defines, deeper, written))
                if "num_warps" in searched and "num_warps" not in options:
                    configs.append(Config.of(defines, {**deeper, "num_warps": 4}, written))
        return configs

    def _joint(self, best: Config) -> list[Config]:
        configs = []
        written = dict(self.written)
        for point in self.joint:
            defines = dict(best.defines)
            options = dict(best.options)
            for name, value in point:
                if name in TUNABLE_OPTIONS:
                    options[name] = value
                else:
                    defines[name] = value
                    options.update(_split_option(value, int(written[name])))
            configs.append(Config.of(defines, options, written))
        return configs

    def _launch(self, best: Config) -> list[Config]:
        names = [name for name, _ in self.options]
        combos = sorted(itertools.product(*(values for _, values in self.options)),
                        key=lambda combo: _distance(self.options, combo))
        configs = []
        for combo in combos:
            options = {**dict(best.options), **dict(zip(names, combo))}
            configs.append(Config.of(dict(best.defines), options))
        return configs

    def _split(self, best: Config) -> list[Config]:
        if not self.idle(best):
            return []
        persistent = {**dict(best.options), "persistent": True}
        configs = [Config.of(dict(best.defines), {**persistent, "stream_k": value})
                   for value in self.stream_k]
        if self.halves(best):
            configs.append(Config.of(dict(best.defines),
                                     {**persistent, "halve_last_wave": True}))
        return configs

    def key(self) -> list[Any]:
        return ["descent", [[n, list(v)] for n, v in self.tiles],
                [[list(kv) for kv in point] for point in self.joint],
                [[n, list(v)] for n, v in self.options], list(self.stream_k), self.sweeps,
                "stream-K last", "three-quarter stages and warps", "halved last wave",
                *([["stream-K counted at", [list(kv) for kv in self.counted_at]]]
                  if self.counted_at else [])]


Plan = Space | Descent


def _split_option(value: int, written: int) -> dict[str, Any]:
    """The option a tile value needs: a three-quarter tile (192 = 128 + 64) is computed
    in its two power-of-two pieces (``split_tiles``), not padded to the next power."""
    if value != written and value & (value - 1):
        return {"split_tiles": True}
    return {}


def _distance(knobs: Sequence[tuple[str, tuple[Any, ...]]], combo: Sequence[Any]) -> int:
    """How many knobs of ``combo`` are not at their first value."""
    return sum(values.index(v) != 0 for (_, values), v in zip(knobs, combo))


def _config(names: Sequence[str], combo: Sequence[Any], written: Mapping[str, str]) -> Config:
    defines = {n: v for n, v in zip(names, combo) if n not in TUNABLE_OPTIONS}
    options = {n: v for n, v in zip(names, combo) if n in TUNABLE_OPTIONS}
    return Config.of(defines, options, written)


def source_defines(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines of a source (the value as written)."""
    return {m.group(1): m.group(2) for m in _DEFINE_LINE.finditer(text)}


Tunables = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]


def search_space(mode: str, text: str, tunables: Tunables,
                 fixed_defines: Mapping[str, Any], fixed_options: Mapping[str, Any]) -> Space:
    """The candidates a caller gave: a mapping name -> candidate values (every
    combination), or a list of mappings name -> value (exactly these configurations);
    names are tunable compile options or ``#define``s of the source. Values the caller
    fixed are not searched."""
    del mode  # (the same rules in both modes; the budget differs)
    defined = source_defines(text)
    written = tuple(sorted(defined.items()))
    fixed = set(fixed_options) | set(fixed_defines)

    def check(name: str) -> None:
        if name not in TUNABLE_OPTIONS and name not in defined:
            raise ValueError(f"tunable {name!r} is neither a tunable compile option "
                             f"({', '.join(TUNABLE_OPTIONS)}) nor a #define of the source")

    if not isinstance(tunables, Mapping):
        configs: list[Config] = []
        for entry in tunables:
            if not isinstance(entry, Mapping):
                raise ValueError("tunables: expected a mapping name -> values, or a list of "
                                 f"mappings name -> value; got an item {entry!r}")
            for name in entry:
                check(name)
            names = [n for n in entry if n not in fixed]
            config = _config(names, [entry[n] for n in names], defined)
            if config not in configs:
                configs.append(config)
        if not configs:
            raise ValueError("tunables: the list of configurations is empty")
        return (Space(explicit=tuple(configs), written=written) if configs != [Config()]
                else Space())
    knobs: dict[str, tuple[Any, ...]] = {}
    for name, values in tunables.items():
        values = tuple(values)
        if not values:
            raise ValueError(f"tunable {name!r} has no candidate values")
        check(name)
        knobs[name] = values
    return Space(tuple((n, v) for n, v in knobs.items() if n not in fixed), written=written)


def default_space(mode: str, probe: TileProbe, function: str, bucket: Mapping[str, int],
                  sms: int, fixed_defines: Mapping[str, Any],
                  fixed_options: Mapping[str, Any],
                  dims: Mapping[str, int] | None = None) -> Descent:
    """The search of ``mode`` for ``function`` at a shape bucket on a device of ``sms``
    SMs (module docstring). Values the caller fixed are not searched. ``dims``: the
    shape the search times (by default the bucket's); whether stream-K is tried counts
    its tiles, since the last wave depends on the exact size (512 x 28672 x 4096 is 448
    tiles of 128 x 256, 3.4 waves on 132 SMs; its bucket's 32768 columns are 512, 3.9)."""
    mma = probe.has_mma(function)
    tiles = probe.output_tiles(function, {}, bucket)
    few = tiles is not None and tiles < sms
    # a grid over half the SMs: three-quarter tiles may fill one wave (tile_values)
    near_wave = tiles is not None and tiles < sms and 2 * tiles >= sms
    searched = []
    defined = probe.tile_defines(function)
    for tile in defined:
        if tile.name in fixed_defines:
            continue
        values = tile_values(tile, bucket, few, mma, mode, near_wave)
        if len(values) > 1:
            searched.append((tile, values))
    # overhanging tiles first, then output tiles, then the rest (stable: source order)
    searched.sort(key=lambda item: (not _overhangs(item[0], bucket), not item[0].parallel))
    launch = _FEW_TILES_OPTION_SPACE[mode] if few and mma else _OPTION_SPACE[mode]
    options = tuple((n, v) for n, v in launch.items() if n not in fixed_options)
    stream_k: tuple[Any, ...] = ()
    if (mma and "stream_k" not in fixed_options and fixed_options.get("persistent") is not False
            and not fixed_options.get("halve_last_wave")):
        stream_k = _STREAM_K[mode]

    timed = dict(dims or bucket)

    def count(defines: Mapping[str, int]) -> int:
        """Output tiles at these define values (0 when unknown)."""
        return probe.output_tiles(function, dict(defines), bucket) or 0

    def idle(config: Config) -> bool:
        return idle_wave(probe.output_tiles(function, dict(config.defines), timed) or 0, sms)

    def halves(config: Config) -> bool:
        """A full wave at least before the idle one (fewer tiles are narrowed instead),
        and the caller fixed neither the option nor stream-K."""
        return ("halve_last_wave" not in fixed_options and "stream_k" not in fixed_options
                and (probe.output_tiles(function, dict(config.defines), timed) or 0) > sms)

    joint: tuple[tuple[tuple[str, Any], ...], ...] = ()
    if few and mma:
        joint = _streaming_points(searched, defined, bucket, fixed_options, count, sms)
    # the defines the joint round sets have no single rounds of their own
    jointly = {name for point in joint for name, _ in point}
    return Descent(tuple((t.name, v) for t, v in searched if t.name not in jointly), joint,
                   options, stream_k, _SWEEPS[mode], idle, halves,
                   tuple((t.name, str(t.value)) for t, _ in searched if t.name in jointly),
                   tuple(sorted(timed.items())) if stream_k else ())


# A GEMM over at most this many rows streams its weights (see _streaming_points): the
# decode steps of a model (M = 1..64, and 128 for a few sequences at once); at 512 rows
# a 128 x 256 tile reuses each weight element 128 times and is compute-bound.
_STREAMING_ROWS = 128
# A weight-streaming GEMM's tile of at least this many elements is also tried with 8 warps
# (one warpgroup per 64 x 128 of it); a smaller one gives 8 warps too little each.
_EIGHT_WARPS_ELEMENTS = 64 * 128


def _streaming_points(searched: Sequence[tuple[TileDefine, tuple[int, ...]]],
                      defined: Sequence[TileDefine], bucket: Mapping[str, int],
                      fixed_options: Mapping[str, Any],
                      count: Callable[[Mapping[str, int]], int], sms: int
                      ) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """The joint round of a GEMM streaming its weights (fewer output tiles than SMs, and
    at most ``_STREAMING_ROWS`` rows: an output dimension that small makes each weight
    element's reuse too short to hide its load): a row tile over more rows than there
    are at the size covering them, the output tile across the weights (the parallel
    define over the widest dimension it does not overhang) over its searched values and
    halved further while its grid fills fewer than half of the ``sms`` (``count``: the
    output tiles of some define values), with the K step (the first define tiling a
    loop) at its written value, twice and four times, and ``num_warps`` 4 (and 8 for
    tiles of ``_EIGHT_WARPS_ELEMENTS`` or more). ``defined``: every tile define of the
    kernel, searched or not. Nothing when the kernel has no such tiles."""
    covers = {t.name: v[1] for t, v in searched if _overhangs(t, bucket) and len(v) > 1}
    outputs = [(t, v) for t, v in searched
               if t.parallel and not _overhangs(t, bucket) and _extent(t, bucket)]
    # (the widest output dimension: N of a GEMM over few rows)
    across = max(outputs, key=lambda item: _extent(item[0], bucket) or 0, default=None)
    step = next((t for t, _ in searched if not t.parallel and t.dims), None)
    if across is None or step is None:
        return ()
    # the row tiles: parallel over a dimension of at most _STREAMING_ROWS
    rows = [t for t in defined if t.parallel and t.name != across[0].name
            and (_extent(t, bucket) or _STREAMING_ROWS + 1) <= _STREAMING_ROWS]
    if not rows:
        return ()
    tile, widths = across[0], list(across[1])
    narrowest = min(widths)
    while narrowest // 2 >= _MMA_TILES[0] and 2 * count({**covers, tile.name: narrowest}) < sms:
        narrowest //= 2
        widths.append(narrowest)
    steps = [step.value * f for f in (1, 2, 4) if step.value * f <= _MMA_TILES[1]]
    height = math.prod(covers.get(t.name, t.value) for t in rows)
    points = []
    for width in widths:
        warps: tuple[int, ...] = ()
        if "num_warps" not in fixed_options:
            warps = (4, 8) if height * width >= _EIGHT_WARPS_ELEMENTS else (4,)
        for k_step in steps:
            point = (*covers.items(), (tile.name, width), (step.name, k_step))
            points += [point + (("num_warps", w),) for w in warps] or [point]
    return tuple(points)


def idle_wave(tiles: int, sms: int) -> bool:
    """Whether stream-K is worth trying for ``tiles`` output tiles on ``sms`` SMs: its
    rewrite acts (with ``stream_k=True``) only when the last wave is at most half full
    (``backends/ir/stream_k``), and that wave must waste at least ``_IDLE_SHARE`` of the
    launch."""
    last = tiles % sms
    return tiles > 0 and 0 < 2 * last <= sms and _waste(tiles, sms) >= _IDLE_SHARE


def _waste(tiles: int, sms: int) -> float:
    """The share of a launch of ``tiles`` on ``sms`` SMs that its last wave leaves idle."""
    waves = -(-tiles // sms)
    return 1 - tiles / (waves * sms)


def _overhangs(tile: TileDefine, bucket: Mapping[str, int]) -> bool:
    extent = _extent(tile, bucket)
    return extent is not None and extent < tile.value


def _extent(tile: TileDefine, bucket: Mapping[str, int]) -> int | None:
    """The smallest dimension (of the bucket) the define tiles, None when it tiles none."""
    sizes = [bucket[d] for d in tile.dims if d in bucket]
    return min(sizes) if sizes else None


def tile_values(tile: TileDefine, bucket: Mapping[str, int], few_tiles: bool, mma: bool,
                mode: str, near_wave: bool = False) -> tuple[int, ...]:
    """The values of a tile define to try at a shape bucket, the written value first,
    then the most promising first; powers of two within the tile range of the kernel
    (``_MMA_TILES`` or ``_OTHER_TILES``). ``few_tiles``: the written tiles give fewer
    output tiles than the device has SMs; ``near_wave``: at least half as many.

    - A tile larger than its dimension (128 rows over M = 16) computes padding: the
      power of two covering the dimension first, then the larger ones up to the written
      value (16, 32, 64), never larger values.
    - With few output tiles, a tile along an output dimension is halved (one or two
      octaves, nearest first) to spread the work over more SMs, and for an MMA kernel
      whose tiles fill at least half the SMs first cut to three quarters (192 for 256:
      one fuller wave where halving gives one and a half); a loop's step (K) is
      doubled first, then halved: each program then streams a long K, and longer steps
      with deep pipelines won the decode shapes of the benchmark kernel's calibration.
    - Otherwise half and twice the written value ("full": one more octave each way)."""
    low, high = _MMA_TILES if mma else _OTHER_TILES
    value = tile.value
    if value < low:
        return (value,)
    below = [1 << b for b in range(value.bit_length(), -1, -1)
             if low <= 1 << b < value]  # nearest first
    above = [1 << b for b in range(value.bit_length(), high.bit_length())
             if value < 1 << b <= high]
    extent = _extent(tile, bucket)
    if extent is not None and extent < value:
        fit = max(low, 1 << max(0, extent - 1).bit_length())
        tried = [v for v in reversed(below) if v >= fit]
    elif few_tiles and tile.parallel:
        # three quarters first when the grid is near one wave (computed as two pieces,
        # see _split_option): 128 x 192 tiles over 512 x 6144 are 128 programs for 132
        # SMs where 128 x 256 are 96 and 128 x 128 or 64 x 256 are 192 (1.5 waves)
        three_quarters = [value * 3 // 4] if mma and near_wave and value >= 128 else []
        tried = three_quarters + below[:_HALVINGS[mode]]
    elif few_tiles:
        tried = above[:1] + below[:1]
    else:
        octaves = 2 if mode == "full" else 1
        tried = below[:octaves] + above[:octaves]
    return (value, *tried)


def shape_bucket(dims: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Each dimension rounded up to the next power of two or 1.5 times one (..., 2048,
    3072, 4096, 6144, ...): shapes in one bucket share a choice. Half-octave steps keep a
    3072^3 GEMM from choosing for a 4096^3 one (their best tiles differ)."""
    return tuple((name, _round_up(int(value))) for name, value in sorted(dims.items()))


def _round_up(value: int) -> int:
    power = 1 << max(0, value - 1).bit_length()  # the next power of two
    half_step = power // 2 + power // 4  # 1.5 times the power below
    return half_step if power >= 4 and value <= half_step else power

