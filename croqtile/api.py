"""``croqtile.compile`` and ``croqtile.load``."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Mapping

from .driver import compile_source, make_options
from .module import Function, Module

Defines = Mapping[str, int | float | str | None]


def compile(src: str, *, defines: Defines | None = None, filename: str = "<string>",
            **options: Any) -> Module:
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

    ``defines`` override ``#define`` constants of the source. Options: ``num_warps``,
    ``num_stages``, ``descriptors`` (tensor-descriptor loads when aligned, default True),
    ``f32_precision`` (``"tf32"`` or ``"ieee"`` for f32 MMA operands).
    Raises ``CompileError`` with located diagnostics when the program is wrong.
    """
    result = compile_source(src, filename=filename, defines=defines,
                            options=make_options(options))
    return Module([Function(f) for f in result.functions], filename)


def load(path: str | PathLike[str], *, defines: Defines | None = None, **options: Any) -> Module:
    """Compile the ``.co`` file at ``path`` (see ``compile``)."""
    p = Path(path)
    return compile(p.read_text(), defines=defines, filename=str(path), **options)
