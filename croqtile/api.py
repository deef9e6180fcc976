"""``croqtile.compile`` and ``croqtile.load``.

Both spell every compile option as a keyword parameter (so that editors complete them);
the options themselves -- types, defaults, accepted values, documentation -- are the
fields of ``croqtile.Options``. A keyword left at None takes the option's default (or
the field of ``options=``, when one is given), and is what ``autotune`` may search.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from . import settings
from .backends.options import NAMES, Options
from .runtime.driver import compile_source
from .ops.library import register
from .runtime.lru import resolve_size
from .runtime.module import Function, Module
from .ops.traced import traced_call
from .tuning.tuner import Config, Tunables, make_tuned

TunablesByShape = Callable[[dict[str, int]], Tunables]

Defines = Mapping[str, int | float | str | None]


def compile(src: str, *, defines: Defines | None = None, filename: str = "<string>",
            autotune: str = "none", tunables: Tunables | TunablesByShape | None = None,
            tune_budget_s: float | None = None, library: str | None = None,
            cache_size: int | None = None, options: Options | None = None,
            target: str | None = None,
            backend: Literal["triton", "cuda"] | None = None,
            cta_group: int | None = None,
            num_warps: int | None = None,
            num_stages: int | None = None,
            descriptors: bool | Literal["host", "kernel"] | None = None,
            f32_precision: Literal["tf32", "ieee"] | None = None,
            group_m: int | None = None,
            heavy_first: bool | None = None,
            persistent: bool | None = None,
            flatten: bool | None = None,
            warp_specialize: bool | None = None,
            epilogue_split: int | None = None,
            stream_k: bool | int | Literal["always"] | None = None,
            split_tiles: bool | None = None,
            halve_last_wave: bool | None = None,
            debug: bool | None = None,
            fill_buffers: bool | None = None) -> Module:
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

    ``defines`` override ``#define`` constants of the source; ``filename`` names the
    source in diagnostics.

    The compile options (``target``, ``backend``, ``num_warps``, ``debug`` ...) are
    documented on ``croqtile.Options``, one field each. Pass them as keywords, or as
    ``options=croqtile.Options(...)``; a keyword given (not None) overrides that field.
    A value an option does not accept raises ``croqtile.OptionError`` naming it.

    ``autotune="quick"`` or ``"full"`` picks options and ``#define`` values per shape on
    the first call (see ``croqtile.tuning.tuner``): ``tunables={"TILE_M": [64, 128], "num_warps":
    [4, 8]}`` searches every combination, a list ``[{"TILE_M": 64, "num_warps": 4}, ...]``
    exactly those configurations, and a function of the shape bucket (``{"M": 16, ...}``,
    each dimension rounded up to a power of two) returning either, a space per shape
    (default: the defines used as tile extents around their values, the launch options,
    and stream-K where few tiles leave SMs idle; the default configuration is always
    timed and kept unless beaten by 1 %). ``tune_budget_s`` bounds one search (default
    30 s quick, 300 s full); values fixed by ``defines`` or options are not searched.
    Choices are cached in the cache directory.

    ``cache_size`` bounds what each function remembers per shape and argument signature
    (kernel variants, loaded modules, warm calls; least recently used first out): by
    default ``CROQTILE_CACHE_SIZE``, else 256 (``croqtile.runtime.lru``).

    ``library="NS"`` registers every function as the PyTorch operator
    ``torch.ops.NS.<name>`` (``croqtile.ops.library``): ``mod.<name>.op`` is it, and calling
    ``mod.<name>`` goes through it, so that ``torch.compile`` traces the call.
    Raises ``CompileError`` with located diagnostics when the program is wrong.
    """
    # (first: ``locals()`` holds the parameters only) the options this call chose
    chosen = _chosen(options, locals())
    if debug is None and settings.debug():
        chosen["debug"] = True
    size = resolve_size(cache_size)  # (a malformed size fails now, not at the first call)
    if autotune != "none":
        module = _tuned(src, defines or {}, filename, autotune, tunables, tune_budget_s,
                        chosen, size)
    else:
        if tunables is not None or tune_budget_s is not None:
            raise ValueError("tunables= and tune_budget_s= apply with autotune='quick' or "
                             "'full'")
        result = compile_source(src, filename=filename, defines=defines,
                                options=Options(**chosen))
        module = Module([Function(f, size) for f in result.functions], filename)
    if library is not None:
        for function in module.functions.values():
            function.op = register(library, function.compiled, function.call,
                                   traced_call(function))
    return module


def _chosen(options: Options | None, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The options a call chose, by name: the fields of ``options`` that differ from the
    defaults, overridden by the option keywords given (not None)."""
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"options={options!r}: expected a croqtile.Options")
    chosen = options.changed() if options is not None else {}
    chosen.update({name: value for name, value in parameters.items()
                   if name in NAMES and value is not None})
    return chosen


def _tuned(src: str, defines: Defines, filename: str, mode: str,
           tunables: Tunables | TunablesByShape | None, budget_s: float | None,
           options: Mapping[str, Any], cache_size: int) -> Module:
    Options(**options)  # malformed options fail now, not at the first call

    def compile_config(config: Config) -> dict[str, Function]:
        merged = {**dict(config.options), **options}
        result = compile_source(src, filename=filename,
                                defines={**dict(config.defines), **defines},
                                options=Options.of(merged))
        return {f.name: Function(f, cache_size) for f in result.functions}

    names = list(compile_config(Config()))
    functions = make_tuned(names, src, mode, tunables, defines, options, budget_s,
                           compile_config)
    return Module(functions, filename)


def load(path: str | PathLike[str], *, defines: Defines | None = None,
         autotune: str = "none", tunables: Tunables | TunablesByShape | None = None,
         tune_budget_s: float | None = None, library: str | None = None,
         cache_size: int | None = None, options: Options | None = None,
         target: str | None = None,
         backend: Literal["triton", "cuda"] | None = None,
         cta_group: int | None = None,
         num_warps: int | None = None,
         num_stages: int | None = None,
         descriptors: bool | Literal["host", "kernel"] | None = None,
         f32_precision: Literal["tf32", "ieee"] | None = None,
         group_m: int | None = None,
         heavy_first: bool | None = None,
         persistent: bool | None = None,
         flatten: bool | None = None,
         warp_specialize: bool | None = None,
         epilogue_split: int | None = None,
         stream_k: bool | int | Literal["always"] | None = None,
         split_tiles: bool | None = None,
         halve_last_wave: bool | None = None,
         debug: bool | None = None,
         fill_buffers: bool | None = None) -> Module:
    """Compile the ``.co`` file at ``path`` (see ``compile``: the same keyword
    parameters, but ``filename``, which is ``path``)."""
    keywords = dict(locals())  # (first: the parameters only) every one but path is compile's
    del keywords["path"]
    return compile(Path(path).read_text(), filename=str(path), **keywords)
