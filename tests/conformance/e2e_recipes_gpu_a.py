"""Recipes for the upstream ``tests/gpu/end2end`` files whose names start with a..i.

Each recipe builds the arguments the way that file's host ``main`` does (shapes, value
ranges, defines) and states the expected result in float64 (or exactly, for integers).
See ``e2e_recipe.Recipe`` for the fields and ``e2e_upstream`` for how they are used.
"""

from __future__ import annotations

from .e2e_helpers import rand_int
from .e2e_recipe import Recipe

GPU = "gpu/end2end/"


def _add_pair(shape: tuple[int, ...], lo: int = -10, hi: int = 10, dtype: str = "s32") -> Recipe:
    """Two random tensors of one shape, their element-wise sum."""
    return Recipe(args=lambda g: [rand_int(g, shape, lo, hi, dtype), rand_int(g, shape, lo, hi, dtype)],
                  reference=lambda a, b: a + b)


RECIPES: dict[tuple[str, str], Recipe] = {
    (GPU + "add-shared.co", "ele_add"): _add_pair((6, 17, 64)),
    (GPU + "add.co", "ele_add_span_as"): Recipe(
        args=lambda g: [rand_int(g, (2, 3, 64), -10, 10), rand_int(g, (2, 3, 64), -10, 10)],
        reference=lambda a, b: (a + b).reshape(6, 64)),
    (GPU + "add.co", "ele_add_local_dma"): _add_pair((6, 17, 64)),
}
