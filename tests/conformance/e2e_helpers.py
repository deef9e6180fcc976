"""Small building blocks shared by the end-to-end recipe modules.

Upstream host code mostly fills inputs with ``fill_random(lo, hi)`` (uniform values in a
range), with ``fill(v)`` or with index patterns, and checks against a loop over the
inputs. These helpers build the same kind of tensors from a seeded ``torch.Generator`` and
compute references in float64 (or exactly, for integers).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .e2e_recipe import TORCH_DTYPES, Recipe

Shape = Sequence[int]


def dtype_of(dtype: str | torch.dtype) -> torch.dtype:
    """A torch dtype from a language element-type name (``"f16"``) or a torch dtype."""
    return TORCH_DTYPES[dtype] if isinstance(dtype, str) else dtype


def is_float(dtype: str | torch.dtype) -> bool:
    return dtype_of(dtype).is_floating_point


def rand_int(gen: torch.Generator, shape: Shape, lo: int, hi: int,
             dtype: str | torch.dtype = "s32") -> torch.Tensor:
    """Uniform integers in ``[lo, hi]`` (both ends included), stored as ``dtype``."""
    values = torch.randint(lo, hi + 1, tuple(shape), generator=gen, dtype=torch.int64)
    return values.to(dtype_of(dtype))


def rand_float(gen: torch.Generator, shape: Shape, lo: float, hi: float,
               dtype: str | torch.dtype = "f32") -> torch.Tensor:
    """Uniform reals in ``[lo, hi)``, rounded to ``dtype`` (fp8 goes through float32)."""
    values = torch.rand(tuple(shape), generator=gen, dtype=torch.float64) * (hi - lo) + lo
    return values.to(torch.float32).to(dtype_of(dtype))


def rand(gen: torch.Generator, shape: Shape, lo: float, hi: float,
         dtype: str | torch.dtype) -> torch.Tensor:
    """``rand_int`` or ``rand_float`` by the element type, as ``fill_random`` does."""
    if is_float(dtype):
        return rand_float(gen, shape, lo, hi, dtype)
    return rand_int(gen, shape, int(lo), int(hi), dtype)


def zeros(shape: Shape, dtype: str | torch.dtype) -> torch.Tensor:
    return torch.zeros(tuple(shape), dtype=dtype_of(dtype))


def full(shape: Shape, value: float, dtype: str | torch.dtype) -> torch.Tensor:
    return torch.full(tuple(shape), value, dtype=dtype_of(dtype))


def arange(shape: Shape, dtype: str | torch.dtype, start: int = 0, modulo: int | None = None
           ) -> torch.Tensor:
    """Row-major index pattern ``start, start+1, ...`` (optionally ``% modulo``)."""
    count = 1
    for extent in shape:
        count *= extent
    values = torch.arange(start, start + count, dtype=torch.int64)
    if modulo is not None:
        values = values % modulo
    return values.reshape(tuple(shape)).to(dtype_of(dtype))


def index_grids(shape: Shape) -> list[torch.Tensor]:
    """One int64 tensor per dimension holding that dimension's index (``meshgrid``)."""
    return list(torch.meshgrid(*[torch.arange(n, dtype=torch.int64) for n in shape],
                               indexing="ij"))


def index_pattern(shape: Shape, coeffs: Sequence[int], modulo: int, offset: int,
                  dtype: str | torch.dtype) -> torch.Tensor:
    """``(sum(c_d * i_d) % modulo) + offset`` over the index ``i`` of every element: the
    deterministic fills that host code writes as nested loops."""
    grids = index_grids(shape)
    total = sum(c * g for c, g in zip(coeffs, grids))
    return cast(total % modulo + offset, dtype)


def identity(*args: Any) -> Any:
    """Reference of a copy kernel: its (first) input, unchanged."""
    return args[0]


def f64(t: torch.Tensor) -> torch.Tensor:
    """Exact float64 view of the values (fp8 and bf16 included)."""
    return t.to(torch.float32).to(torch.float64) if t.dtype.itemsize == 1 and \
        t.dtype.is_floating_point else t.to(torch.float64)


def cast(t: torch.Tensor, dtype: str | torch.dtype) -> torch.Tensor:
    """``t`` rounded to ``dtype`` the way a kernel's store does (integers wrap)."""
    target = dtype_of(dtype)
    if target.is_floating_point:
        return t.to(torch.float64).to(torch.float32).to(target) if target.itemsize == 1 \
            else t.to(target)
    return wrap(t, target)


def wrap(t: torch.Tensor, dtype: str | torch.dtype) -> torch.Tensor:
    """Integer values reduced modulo 2**bits into ``dtype`` (two's complement)."""
    target = dtype_of(dtype)
    bits = target.itemsize * 8
    values = t.to(torch.int64)
    if bits < 64:
        values = values & ((1 << bits) - 1)
        if target.is_signed:
            values = torch.where(values >= 1 << (bits - 1), values - (1 << bits), values)
    return values.to(target)


def gemm(lhs: torch.Tensor, rhs: torch.Tensor, out: str | torch.dtype | None = None, *,
         rhs_nk: bool = False) -> torch.Tensor:
    """``lhs @ rhs`` (``rhs`` [K,N]; with ``rhs_nk`` it is [N,K], i.e. ``lhs @ rhs.T``),
    computed exactly from the already-rounded inputs: float64 for floats, int64 for
    integers; rounded to ``out`` when given (float64/int64 otherwise)."""
    right = rhs.transpose(-1, -2) if rhs_nk else rhs
    if lhs.dtype.is_floating_point or right.dtype.is_floating_point:
        result = f64(lhs) @ f64(right)
    else:
        result = lhs.to(torch.int64) @ right.to(torch.int64)
    return cast(result, out) if out is not None else result


def add_reference(out: str | torch.dtype) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Reference of an element-wise add stored as ``out``: integers exactly (wrapping to
    ``out``); floats as the exact float64 sum, unrounded, for checks that follow a host
    tolerance around the true sum (the tolerance must cover the store's rounding)."""
    def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.dtype.is_floating_point or dtype_of(out).is_floating_point:
            return f64(a) + f64(b)
        return cast(a.to(torch.int64) + b.to(torch.int64), out)
    return reference


def excluded(verdict: str, reason: str, note: str = "") -> Recipe:
    """A recipe for a kernel outside this backend's scope (``ESC`` or ``OUT``): never run."""
    assert verdict in ("ESC", "OUT"), verdict
    return Recipe(args=_no_args, reference=_no_reference, verdict=verdict,  # type: ignore[arg-type]
                  reason=reason, note=note)


def _no_args(gen: torch.Generator) -> list[Any]:
    raise RuntimeError("an excluded kernel is not run")


def _no_reference(*args: Any) -> Any:
    raise RuntimeError("an excluded kernel is not run")


def elementwise(fn: Callable[..., torch.Tensor], out: str | torch.dtype) -> Callable[..., torch.Tensor]:
    """A reference that applies ``fn`` to the float64/int64 values of all arguments and
    stores the result as ``out``."""
    def reference(*args: Any) -> torch.Tensor:
        exact = [f64(a) if isinstance(a, torch.Tensor) and (a.dtype.is_floating_point or
                                                            is_float(out))
                 else (a.to(torch.int64) if isinstance(a, torch.Tensor) else a) for a in args]
        return cast(fn(*exact), out)
    return reference
