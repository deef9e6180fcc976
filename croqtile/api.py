"""``croqtile.compile`` and ``croqtile.load``."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Callable, Mapping

from . import settings
from .driver import compile_source, make_options
from .library import register
from .lru import resolve_size
from .module import Function, Module
from .traced import traced_call
from .tuning import Config, Tunables, make_tuned

TunablesByShape = Callable[[dict[str, int]], Tunables]

Defines = Mapping[str, int | float | str | None]


def compile(src: str, *, defines: Defines | None = None, filename: str = "<string>",
            autotune: str = "none", tunables: Tunables | TunablesByShape | None = None,
            tune_budget_s: float | None = None, library: str | None = None,
            cache_size: int | None = None, **options: Any) -> Module:
    """Compile Croqtile source text into a module of torch-callable functions.

    >>> import croqtile, torch
    >>> mod = croqtile.compile('''
    ... __co__ s32 [8] twice(s32 [8] x) {
    ...   s32 [x.span] y;
    ...   parallel i by 8
    ...     y.at(i) = x.at(i) * 2;
    ...   return y;
    ... }''')
    >>> mod.twice(torch.arange(8, dtype=torch.int32)).tolist()
    [0, 2, 4, 6, 8, 10, 12, 14]

    ``defines`` override ``#define`` constants of the source. Options: ``target`` (the GPU
    whose rules the checker applies: ``"sm_90"`` by default, ``sm_80`` ... ``sm_120``, or
    ``"s5000"``, a checking target: MMA and TMA statements are checked against the Moore
    Threads S5000's tensor-engine tables, and the same Triton kernel is generated, since
    there is no S5000 backend), ``num_warps``,
    ``num_stages``, ``descriptors`` (tensor-descriptor loads when aligned, default True:
    made by the host; ``"kernel"``: by each program; ``False``: pointer loads),
    ``f32_precision`` (``"tf32"`` or ``"ieee"`` for f32 MMA operands), ``group_m`` (MMA
    kernels on a 2-D block grid run tiles in groups of this many rows, default 8; 1 for
    row-major order), ``persistent`` (one program per SM looping over the tiles), for
    the persistent tile loop ``flatten`` and ``warp_specialize`` (Triton's loop hints),
    ``epilogue_split`` (1 or 2 column slices per descriptor store), ``stream_k`` (the
    K iterations of a last wave at most half full shared by every SM; ``"always"``: of
    any partial last wave), ``halve_last_wave`` (each tile of a last wave at most half
    full computed in two halves by two programs), ``split_tiles``
    (a 192-wide tile computed as 128 + 64 instead of padded to 256), ``heavy_first``
    (the first block axis launched from its last index: a causal kernel's longest rows
    first) and ``debug`` (bounds checks on computed indices and tile copies, and run-time
    checks of the futures protocol, as device assertions naming the Croqtile line; a
    failed check on CPU tensors raises ``DeviceAssertionError``; ``CROQTILE_DEBUG=1``
    turns it on for every compile), ``fill_buffers`` (default True: a buffer declared in
    the function without an initialiser is zero-filled unless the kernel provably writes
    all of it first; False: made uninitialised, as the language allows, for a function
    that writes every element itself, saving a pass over memory per call; with ``debug``
    its floating-point elements start as NaN instead, so that one left unwritten
    shows). ``backend="cuda"`` runs a function proven to be a
    plain GEMM on a hand-written CUDA kernel where the GPU suits it (the Hopper kernel;
    with ``target="sm_100a"`` the generated tcgen05 kernel, one CTA per tile or, with
    ``cta_group=2``, a CTA pair).

    ``autotune="quick"`` or ``"full"`` picks options and ``#define`` values per shape on
    the first call (see ``croqtile.tuning``): ``tunables={"TILE_M": [64, 128], "num_warps":
    [4, 8]}`` searches every combination, a list ``[{"TILE_M": 64, "num_warps": 4}, ...]``
    exactly those configurations, and a function of the shape bucket (``{"M": 16, ...}``,
    each dimension rounded up to a power of two) returning either, a space per shape
    (default: the defines used as tile extents around their values, the launch options,
    and stream-K where few tiles leave SMs idle; the default configuration is always
    timed and kept unless beaten by 1 %). ``tune_budget_s``
    bounds one search (default 30 s quick, 300 s full); values fixed by ``defines`` or
    options are not searched. Choices are cached in the cache directory.

    ``cache_size`` bounds what each function remembers per shape and argument signature
    (kernel variants, loaded modules, warm calls; least recently used first out): by
    default ``CROQTILE_CACHE_SIZE``, else 256 (``croqtile.lru``).

    ``library="NS"`` registers every function as the PyTorch operator
    ``torch.ops.NS.<name>`` (``croqtile.library``): ``mod.<name>.op`` is it, and calling
    ``mod.<name>`` goes through it, so that ``torch.compile`` traces the call.
    Raises ``CompileError`` with located diagnostics when the program is wrong.
    """
    if "debug" not in options and settings.debug():
        options = {**options, "debug": True}
    size = resolve_size(cache_size)  # (a malformed size fails now, not at the first call)
    if autotune != "none":
        module = _tuned(src, defines or {}, filename, autotune, tunables, tune_budget_s,
                        options, size)
    else:
        if tunables is not None or tune_budget_s is not None:
            raise ValueError("tunables= and tune_budget_s= apply with autotune='quick' or "
                             "'full'")
        result = compile_source(src, filename=filename, defines=defines,
                                options=make_options(options))
        module = Module([Function(f, size) for f in result.functions], filename)
    if library is not None:
        for function in module.functions.values():
            function.op = register(library, function.compiled, function.call,
                                   traced_call(function))
    return module


def _tuned(src: str, defines: Defines, filename: str, mode: str,
           tunables: Tunables | TunablesByShape | None, budget_s: float | None,
           options: Mapping[str, Any], cache_size: int) -> Module:
    make_options(options)  # unknown or malformed options fail now, not at the first call

    def compile_config(config: Config) -> dict[str, Function]:
        merged = {**dict(config.options), **options}
        result = compile_source(src, filename=filename,
                                defines={**dict(config.defines), **defines},
                                options=make_options(merged))
        return {f.name: Function(f, cache_size) for f in result.functions}

    names = list(compile_config(Config()))
    functions = make_tuned(names, src, mode, tunables, defines, options, budget_s,
                           compile_config)
    return Module(functions, filename)  # type: ignore[arg-type]


def load(path: str | PathLike[str], *, defines: Defines | None = None, **options: Any) -> Module:
    """Compile the ``.co`` file at ``path`` (see ``compile``; same keyword arguments,
    ``library=`` included)."""
    p = Path(path)
    return compile(p.read_text(), defines=defines, filename=str(path), **options)
