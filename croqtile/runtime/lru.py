"""How much croqtile remembers per function, and the report of it.

A function compiled per call shape makes one kernel variant (and loads one generated
module) per distinct shape, and every function remembers the argument signatures of its
warm calls; the launcher remembers, per kernel, the compiled variants it launched. Each of
these tables is a least-recently-used cache of ``DEFAULT_CACHE_SIZE`` (256) entries: a
long sweep over shapes recompiles a shape evicted from the table when it comes back, and
the process's memory stays flat. Change the size per compile with ``cache_size=``
(``croqtile.compile(src, cache_size=64)``) or for every compile with the environment
variable ``CROQTILE_CACHE_SIZE``; the option wins.

``mod.<fn>.cache_info()`` returns a ``CacheInfo``: the hits and misses of the warm-call
signatures (a hit skips the argument checks), how many are held, the size, and per table
its own ``TableInfo``."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import settings
from ..backends.bounded import LRU, TableInfo

DEFAULT_CACHE_SIZE = 256

__all__ = ["DEFAULT_CACHE_SIZE", "LRU", "CacheInfo", "TableInfo", "resolve_size"]


def resolve_size(option: int | None) -> int:
    """The size of a function's tables: the ``cache_size=`` option, else
    ``CROQTILE_CACHE_SIZE``, else ``DEFAULT_CACHE_SIZE``."""
    if option is not None:
        checked: object = option  # (checked as any object: callers need not be type-checked)
        if isinstance(checked, bool) or not isinstance(checked, int) or checked < 1:
            raise ValueError(f"compile option cache_size={option!r}: expected a positive "
                             "integer (entries kept per table)")
        return option
    return settings.cache_size() or DEFAULT_CACHE_SIZE


@dataclass(frozen=True)
class CacheInfo:
    """``hits``/``misses``: calls whose argument signature was / was not remembered;
    ``size``: signatures held; ``maxsize``: the size of every table; ``tables``: each
    table's ``TableInfo`` by name (``signatures``, ``variants``, ``modules``,
    ``launches``)."""

    hits: int
    misses: int
    size: int
    maxsize: int
    tables: dict[str, TableInfo] = field(default_factory=dict)
