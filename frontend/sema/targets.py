"""GPU targets the checker knows: one table of the limits that decide whether a program
fits (shared memory per block, which MMA element types and scopes exist, TMA)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    sm: int
    shared_bytes: int  # the most shared memory one block may use
    local_bytes_per_thread: int
    wgmma: bool  # warpgroup MMA (group-4 scope)
    tma: bool
    mma_types: frozenset[str]  # operand element types the tensor cores take

    @property
    def label(self) -> str:
        return f"{self.name} ({self.shared_bytes // 1024} KiB shared memory per block)"


_AMPERE = frozenset({"f16", "bf16", "f32", "tf32", "f64", "s8", "u8"})
_ADA = _AMPERE | {"f8_e4m3", "f8_e5m2"}

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_80", 80, 163 * 1024, 2048, False, False, _AMPERE),
    Target("sm_86", 86, 99 * 1024, 2048, False, False, _AMPERE),
    Target("sm_89", 89, 99 * 1024, 2048, False, False, _ADA),
    Target("sm_90", 90, 227 * 1024, 2048, True, True, _ADA),
    Target("sm_100", 100, 227 * 1024, 2048, True, True, _ADA),
    Target("sm_120", 120, 99 * 1024, 2048, False, True, _ADA),
)}

DEFAULT_TARGET = "sm_90"


def lookup(name: str) -> Target | None:
    """Accepts ``sm_90``, ``sm90``, ``90`` and ``sm_90a``."""
    key = name.lower().replace("sm", "").strip("_").rstrip("a")
    return TARGETS.get(f"sm_{key}")
