"""Bounded tables: what croqtile remembers per shape, dtype or argument signature (kernel
variants, loaded modules, warm-call signatures, launch plans, host descriptors) is kept in
an ``LRU``, so a sweep over thousands of shapes holds at most ``size`` of each.

Lookups are the hot path of a warm call: a hit takes no lock (one dictionary read and a
move to the recent end, each atomic under the interpreter lock); insertions and evictions
take the table's lock. The hit and miss counts are statistics, not synchronised."""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, Iterator, TypeVar, overload

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class _Missing(enum.Enum):
    """The marker of an absent entry (an enum member, so that type checkers narrow it)."""

    MISSING = enum.auto()


_MISSING = _Missing.MISSING


@dataclass(frozen=True)
class TableInfo:
    """One table's statistics, as ``functools.lru_cache``'s ``cache_info`` gives them."""

    hits: int
    misses: int
    size: int  # entries held now
    maxsize: int


class LRU(Generic[K, V]):
    """A mapping of at most ``size`` entries; adding one more drops the least recently
    used, after which ``on_evict(key, value)`` runs (outside the lock)."""

    def __init__(self, size: int, on_evict: Callable[[K, V], None] | None = None) -> None:
        checked: object = size  # (checked as any object: callers need not be type-checked)
        if isinstance(checked, bool) or not isinstance(checked, int) or checked < 1:
            raise ValueError(f"cache size {size!r}: expected a positive integer")
        self.maxsize = size
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self._on_evict = on_evict

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The value of ``key`` (now the most recently used), else ``default``."""
        value = self._items.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        try:
            self._items.move_to_end(key)
        except KeyError:  # (evicted by another thread since the read: the value stands)
            pass
        return value

    def peek(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key`` without counting a hit or a miss or reordering."""
        return self._items.get(key, default)

    def __setitem__(self, key: K, value: V) -> None:
        evicted: list[tuple[K, V]] = []
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                evicted.append(self._items.popitem(last=False))
        if self._on_evict is not None:
            for old_key, old_value in evicted:
                self._on_evict(old_key, old_value)

    def setdefault(self, key: K, value: V) -> V:
        """The value of ``key``, or ``value`` stored for it when there was none."""
        found = self._items.get(key, _MISSING)
        if found is not _MISSING:
            return found
        self[key] = value
        return value

    def pop(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            return self._items.pop(key, default)

    def drop_if(self, test: Callable[[K, V], bool]) -> list[V]:
        """Remove every entry for which ``test(key, value)`` holds (no ``on_evict``);
        the removed values."""
        with self._lock:
            doomed = [k for k, v in self._items.items() if test(k, v)]
            return [self._items.pop(k) for k in doomed]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._items))

    def values(self) -> list[V]:
        return list(self._items.values())

    def items(self) -> list[tuple[K, V]]:
        return list(self._items.items())

    def info(self) -> TableInfo:
        return TableInfo(self.hits, self.misses, len(self._items), self.maxsize)

    def __repr__(self) -> str:
        return f"<LRU {len(self._items)}/{self.maxsize}>"
