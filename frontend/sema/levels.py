"""Parallel-level inference (spec 5.2): which hardware level each ``parallel`` level maps to.

Unannotated nests map by depth -- 1 level: thread (in one implicit block); 2: block,
thread; 3: block, group, thread; 4: block, group-4, group, thread. In mixed nests an
unannotated outermost level becomes ``block`` and an unannotated leaf ``thread``; any
other unannotated level must be the only level that fits between its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import syntax as ast
from .model import Level

_BY_NAME = {"block": Level.BLOCK, "group-4": Level.GROUP4, "group": Level.GROUP,
            "thread": Level.THREAD}

_DEFAULTS = {
    1: (Level.THREAD,),
    2: (Level.BLOCK, Level.THREAD),
    3: (Level.BLOCK, Level.GROUP, Level.THREAD),
    4: (Level.BLOCK, Level.GROUP4, Level.GROUP, Level.THREAD),
}


@dataclass(frozen=True)
class LevelProblem:
    code: str
    node: ast.Node
    fields: dict[str, str]


def collect_paths(stmt: ast.Parallel) -> list[list[ast.ParallelLevel]]:
    """Every outermost-to-leaf chain of parallel levels under ``stmt``."""
    inner = [p for p in _nested_parallels(stmt.body)]
    heads = list(stmt.levels)
    if not inner:
        return [heads]
    paths = []
    for child in inner:
        for tail in collect_paths(child):
            paths.append(heads + tail)
    return paths


def _nested_parallels(block: ast.Block) -> list[ast.Parallel]:
    found: list[ast.Parallel] = []
    stack: list[ast.Node] = list(reversed(block.stmts))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Parallel):
            found.append(node)
            continue
        for child in _child_blocks(node):
            stack.extend(reversed(child.stmts))
    return found


def _child_blocks(node: ast.Node) -> list[ast.Block]:
    if isinstance(node, ast.Block):
        return [node]
    blocks = []
    for name in ("body", "then", "other"):
        child = getattr(node, name, None)
        if isinstance(child, ast.Block):
            blocks.append(child)
    return blocks


# The devices a `: device(name)` level may name, as the reference compiler knows them.
DEVICE_NAMES = ("cpu", "gpu", "hetero")


def is_device_scope(stmt: ast.Parallel) -> bool:
    """A parallel statement whose levels are all ``: device`` or ``: cluster`` levels: it
    chooses where the kernels inside it run (a device; clusters of their blocks, which
    only multicast TMA uses -- ignored, spec 8) and is no kernel itself."""
    return bool(stmt.levels) and all(node.level in ("device", "cluster")
                                     for node in stmt.levels)


def infer_levels(stmt: ast.Parallel) -> tuple[dict[int, Level], list[LevelProblem]]:
    """Level of every ParallelLevel node in the nest rooted at ``stmt`` (by node id)."""
    assigned: dict[int, Level] = {}
    problems: list[LevelProblem] = []
    for path in collect_paths(stmt):
        levels = _infer_path(path, problems)
        if levels is None:
            continue
        for node, level in zip(path, levels):
            previous = assigned.setdefault(id(node), level)
            if previous is not level:
                problems.append(LevelProblem("CQ0603", node, {
                    "outer": previous.value, "inner": level.value}))
        _check_order(path, levels, problems)
    return assigned, problems


def _explicit(node: ast.ParallelLevel) -> Level | None:
    return _BY_NAME.get(node.level or "")


def _infer_path(path: list[ast.ParallelLevel], problems: list[LevelProblem]) -> list[Level] | None:
    given = [_explicit(n) for n in path]
    if all(g is None for g in given):
        if len(path) in _DEFAULTS:
            return list(_DEFAULTS[len(path)])
        problems.append(LevelProblem("CQ0603", path[4], {"outer": "group", "inner": "thread"}))
        return None
    result: list[Level | None] = list(given)
    if result[0] is None and Level.BLOCK not in given:
        result[0] = Level.BLOCK
    if result[-1] is None:
        result[-1] = Level.THREAD
    for i, level in enumerate(result):
        if level is not None:
            continue
        outer = _prev_known(result, i)
        inner = _next_known(result, i)
        low = outer.depth + 1 if outer else 0
        high = inner.depth - 1 if inner else 3
        if low != high:
            problems.append(LevelProblem("CQ0603", path[i], {
                "outer": outer.value if outer else "host",
                "inner": inner.value if inner else "thread"}))
            return None
        result[i] = [lv for lv in _BY_NAME.values() if lv.depth == low][0]
    return [lv for lv in result if lv is not None]


def _prev_known(levels: list[Level | None], i: int) -> Level | None:
    for j in range(i - 1, -1, -1):
        if levels[j] is not None:
            return levels[j]
    return None


def _next_known(levels: list[Level | None], i: int) -> Level | None:
    for j in range(i + 1, len(levels)):
        if levels[j] is not None:
            return levels[j]
    return None


def _check_order(path: list[ast.ParallelLevel], levels: list[Level],
                 problems: list[LevelProblem]) -> None:
    for i in range(1, len(levels)):
        if levels[i].depth <= levels[i - 1].depth:
            # reported at the outer level: that is where the nest stops making sense
            problems.append(LevelProblem("CQ0609", path[i - 1], {
                "inner": levels[i].value, "outer": levels[i - 1].value}))
            return


def threads_per_block(level_bounds: dict[Level, int]) -> int:
    """Threads of one block from the product of each inner level's bounds (spec 5.2):
    a warpgroup is 128 threads, a warp 32; missing lower levels are filled with 1."""
    g4 = level_bounds.get(Level.GROUP4)
    g = level_bounds.get(Level.GROUP)
    t = level_bounds.get(Level.THREAD)
    if g is not None:
        warps = g * (g4 or 1)
        return warps * 32 if t is None else warps * max(t, 32)
    if g4 is not None:
        return g4 * 128 if t is None else g4 * max(t, 128)
    return t or 1
