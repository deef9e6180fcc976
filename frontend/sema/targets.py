"""GPU targets the checker knows: one table of the limits that decide whether a program
fits (shared memory per block, which MMA element types and scopes exist, TMA).

A target with ``engine`` tables (the Moore Threads S5000) is checked against them instead
of ``mma_types``: its MMA statements must map onto the engine's instruction shapes and
types, its TMA copies onto its copy engine (``rules_s5000``). There is no backend for such
a target: code generation still produces the Triton kernel, so it is a checking target."""

from __future__ import annotations

from dataclasses import dataclass

from .targets_s5000 import S5000, EngineTables, operand_types


@dataclass(frozen=True)
class Target:
    name: str
    sm: int | None  # None: not an NVIDIA GPU
    shared_bytes: int | None  # the most shared memory one block may use (None: not known)
    local_bytes_per_thread: int | None
    wgmma: bool  # warpgroup MMA (group-4 scope)
    tma: bool
    mma_types: frozenset[str]  # operand element types the tensor cores take
    engine: EngineTables | None = None  # instruction tables that replace mma_types

    @property
    def label(self) -> str:
        if self.shared_bytes is None:
            return self.name
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
    # The vendor guide (seed 003) gives no shared-memory or local-memory size, so the
    # checker does not check those budgets for the S5000. Its warpgroup MMA (SQMMA) and
    # copy engine (TME) play the roles of WGMMA and TMA.
    Target("s5000", None, None, None, True, True,
           operand_types(S5000.wmma + S5000.sqmma) | {"f32"}, S5000),
)}

# Other names of a target: the S5000's compile target in the vendor's toolchain is mp_31.
_ALIASES = {"mp_31": "s5000", "mp31": "s5000"}

DEFAULT_TARGET = "sm_90"


def lookup(name: str) -> Target | None:
    """Accepts ``sm_90``, ``sm90``, ``90`` and ``sm_90a``; ``s5000`` and ``mp_31``."""
    exact = _ALIASES.get(name.lower(), name.lower())
    if exact in TARGETS:
        return TARGETS[exact]
    key = name.lower().replace("sm", "").strip("_").rstrip("a")
    return TARGETS.get(f"sm_{key}")
