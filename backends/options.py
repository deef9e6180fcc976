"""The compile options: one frozen dataclass, ``Options``, with one field per option.

This module owns every fact about an option: its name, its type, its default, its
documentation (``field.metadata["doc"]``, the paragraph the options reference renders),
the values it accepts (``metadata["allowed"]``, the words an error quotes) and the check
of those values (``metadata["accepts"]``). ``Options`` validates itself when it is made,
so an ``Options`` that exists is a valid one; the lowering, the code generators, the
backends and the reference interpreter all read this one class. The public package
re-exports it as ``croqtile.Options``; ``croqtile.compile`` takes the same names as
keyword parameters.

A value outside what an option accepts raises ``OptionError`` (a ``ValueError``) naming
the option, the value and what it accepts; an unknown option name in a mapping given to
``Options.of`` raises ``TypeError`` naming it and the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Literal, Mapping

from ..frontend.sema.targets import DEFAULT_TARGET, TARGETS, Target
from ..frontend.sema.targets import lookup as lookup_target

__all__ = ["OptionError", "Options"]


class OptionError(ValueError):
    """A compile option given a value it does not accept (or two options that do not go
    together): the message names the option, the value and the values it accepts."""


Check = Callable[[Any], bool]


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_power_of_two(value: Any) -> bool:
    return _is_positive_int(value) and value & (value - 1) == 0


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _one_of(*choices: Any) -> Check:
    """Exactly one of ``choices`` (of its type too: ``True`` is not ``1``)."""
    return lambda value: any(type(value) is type(c) and value == c for c in choices)


def _is_target(value: Any) -> bool:
    return isinstance(value, str) and lookup_target(value) is not None


def _is_stream_k(value: Any) -> bool:
    return _is_bool(value) or value == "always" or (_is_positive_int(value) and value >= 2)


def _option(default: Any, allowed: str, accepts: Check, doc: str) -> Any:
    """A field of ``Options``: its default, the values it accepts (in words, and as a
    check) and its documentation (one paragraph, the options reference's text)."""
    return field(default=default, metadata={"doc": " ".join(doc.split()), "allowed": allowed,
                                            "accepts": accepts})


_TARGET_NAMES = ", ".join(f'"{name}"' for name in TARGETS)  # (for messages; the doc's below)
_TARGET_LIST = ", ".join(f'``"{name}"``' for name in TARGETS)


@dataclass(frozen=True)
class Options:
    """How a program is compiled: the checking target, the backend, the launch and code
    generation choices and debug mode. None of them changes what a correct program
    computes (``f32_precision`` picks the rounding of f32 MMA operands); each field
    documents itself (``dataclasses.fields(Options)``, ``metadata["doc"]``).

    >>> Options(num_warps=4, persistent=False).changed()
    {'num_warps': 4, 'persistent': False}
    """

    target: str = _option(
        DEFAULT_TARGET, f"one of {_TARGET_NAMES} (also spelled sm90, 90 or sm_90a)",
        _is_target, f"""
        The GPU whose rules the checker applies: its shared-memory budget per block, which
        MMA element types and scopes exist, TMA. One of {_TARGET_LIST}; ``"sm_90a"``,
        ``"sm90"`` and ``"90"`` name ``"sm_90"``. ``"s5000"`` (also ``"mp_31"``) is a checking
        target for the Moore Threads S5000: MMA and TMA statements are checked against its
        tensor-engine tables, and the same Triton kernel is generated as for the default
        target, since there is no S5000 backend. With ``backend="cuda"``,
        ``"sm_100a"`` selects the tcgen05 kernel of Blackwell GPUs.""")
    backend: Literal["triton", "cuda"] = _option(
        "triton", '"triton" or "cuda" (the hand-written GEMM kernels for plain GEMM functions)',
        _one_of("triton", "cuda"), """
        ``"triton"`` (default) runs every function on its generated Triton kernels.
        ``"cuda"`` runs a function the compiler proves to be a plain GEMM (``out = lhs @
        rhs^T``, f16 or bf16 operands into an f32 accumulator, or a 2:4 sparse lhs) on a
        hand-written CUDA kernel where the GPU suits it: the Hopper kernel, or with
        ``target="sm_100a"`` the generated tcgen05 kernel (also for 8-bit float operands).
        Any other function is refused with CQ0705 and the reason; a call the kernel cannot
        take (another GPU, no ``nvcc``, misaligned or oddly sized operands) runs the
        Triton kernel, with a warning saying why.""")
    cta_group: int = _option(
        1, "1 (one CTA per tile) or 2 (a CTA pair per tile; backend='cuda', sm_100a)",
        _one_of(1, 2), """
        For ``backend="cuda"`` with ``target="sm_100a"``: ``1`` (default) computes a 128 x
        256 tile per CTA; ``2`` a 256 x 256 tile per CTA pair (``cta_group::2``: each CTA
        loads half of each operand). Other values of ``backend`` take 1 only.""")
    num_warps: int | None = _option(
        None, "None (chosen from the tile sizes) or a power of two (1, 2, 4, 8, ...)",
        _optional(_is_power_of_two), """
        Warps per program of every Triton kernel of the function (a power of two). None
        (default): chosen from the tiles, growing with the MMA accumulator (8 warps for a
        128 x 256 f32 tile).""")
    num_stages: int | None = _option(
        None, "None (chosen from the staged tiles) or a positive integer",
        _optional(_is_positive_int), """
        The software-pipeline depth of the K loops (Triton's ``num_stages``): how many
        iterations' loads are in flight. None (default): 3, fewer when the staged tiles
        would not fit the shared-memory budget.""")
    descriptors: bool | Literal["host", "kernel"] = _option(
        True, 'True (where aligned), "host" (made by the host), "kernel" (made in each '
        'program) or False (pointer loads)', _one_of(True, False, "host", "kernel"), """
        Tensor-descriptor (TMA) loads and stores where the tensors are 16-byte aligned
        (decided at each call). ``True`` (default): the host makes the descriptors and
        passes them as kernel arguments, or every program makes its own when
        ``epilogue_split`` needs sliced ones; ``"host"`` and ``"kernel"`` choose one of the
        two; ``False``: pointer loads and stores only.""")
    f32_precision: Literal["tf32", "ieee"] = _option(
        "tf32", '"tf32" or "ieee"', _one_of("tf32", "ieee"), """
        How MMA operands of type f32 are multiplied: ``"tf32"`` (default, as the language
        specifies: the tensor cores' 10-bit mantissa) or ``"ieee"`` (full f32, slower).""")
    group_m: int = _option(
        8, "a positive integer (1: row-major order)", _is_positive_int, """
        MMA kernels on a 2-D grid of blocks visit the output tiles in groups of this many
        rows, so that tiles running together share operands in L2 (default 8); ``1``
        walks the tiles in row-major order. Blocks are independent: the order never
        changes results.""")
    heavy_first: bool = _option(
        False, "True or False", _is_bool, """
        Launch the first block axis from its last index: a causal kernel, whose loop
        grows with that index, starts its longest programs first and the launch ends on
        short ones. The other axes keep their order.""")
    persistent: bool | None = _option(
        None, "None (on for MMA kernels), True or False", _optional(_is_bool), """
        Launch one program per SM, each looping over the tiles, instead of one program per
        tile. None (default): on for MMA kernels, off for the others.""")
    flatten: bool = _option(
        False, "True or False", _is_bool, """
        Triton's ``flatten`` hint on the persistent tile loop (``tl.range(flatten=True)``):
        the tile loop and the K loop become one software pipeline.""")
    warp_specialize: bool = _option(
        False, "True or False", _is_bool, """
        Triton's ``warp_specialize`` hint on the persistent tile loop, or without one on
        the outermost loops that multiply matrices: loads and MMAs run in separate warps
        (Hopper and newer GPUs). On Hopper, Triton 3.6 specialises only a 4-warp program
        with one such loop and no branch with an ``else`` (a producer warpgroup and two
        consumer warpgroups), whose loads go through descriptors made in the kernel
        (``descriptors="kernel"``); the views of a squeezed tensor (``.sqz()``, a head
        of ``[B, H, S, D]``) then get descriptors of their own, made once each block's
        coordinates are known. Other programs compile as if it were off.""")
    epilogue_split: int = _option(
        1, "1 or 2", _one_of(1, 2), """
        Tensor-descriptor stores of 2-D output tiles written as this many column slices:
        ``2`` halves the shared memory of the epilogue, which leaves room for another
        pipeline stage. Needs descriptors made in the kernel (not
        ``descriptors="host"``).""")
    stream_k: bool | int | Literal["always"] = _option(
        False, 'True, False, "always" or the most parts a tile is split into (an integer '
        '>= 2)', _is_stream_k, """
        Stream-K for persistent MMA launches whose last wave of tiles is at most half full:
        ``True`` deals the K iterations of that wave's tiles out to every SM; an integer
        ``N >= 2`` to at most N programs per tile; ``"always"`` splits any partial last
        wave. The parts meet in an f32 workspace and are added in a fixed order, so
        results are the same from run to run. A kernel whose block body is not one K loop
        into zero-initialised accumulators followed by the epilogue is refused with
        CQ0705.""")
    split_tiles: bool = _option(
        False, "True or False", _is_bool, """
        A block tile whose extent is the sum of two powers of two (192 = 128 + 64) is
        computed in those two pieces, each with its own loads, dot and store, instead of
        padded to the next power of two and masked. A tile axis that is reduced or is a
        dot's K axis stays padded.""")
    halve_last_wave: bool = _option(
        False, "True or False", _is_bool, """
        Persistent MMA launches whose last wave of tiles is at most half full compute each
        tile of that wave in two halves by two programs, each over half the tile's wider
        output axis: no workspace and no sums, unlike ``stream_k``, with which it cannot be
        combined.""")
    debug: bool = _option(
        False, "True or False", _is_bool, """
        Bounds checks on computed indices and tile copies, and run-time checks of the
        futures protocol, as device assertions naming the Croqtile line; on CPU tensors a
        failed check raises ``DeviceAssertionError``. Off (default) adds nothing to the
        kernels. The environment variable ``CROQTILE_DEBUG=1`` turns it on for every
        compile that does not pass ``debug`` itself.""")
    fill_buffers: bool = _option(
        True, "True or False", _is_bool, """
        ``True`` (default): a buffer declared in the function without an initialiser is
        zero-filled, unless the compiler proves the kernel writes all of it first.
        ``False``: it is made uninitialised, as the language allows, saving a pass over
        memory per call for a function that writes every element itself; with ``debug``
        its floating-point elements then start as NaN, so that one left unwritten
        shows.""")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not f.metadata["accepts"](value):
                raise OptionError(f"compile option {f.name}={value!r}: expected "
                                  f"{f.metadata['allowed']}")
        if self.descriptors == "host" and self.epilogue_split != 1:
            raise OptionError(f"compile option epilogue_split={self.epilogue_split} needs "
                              "descriptors made in the kernel (descriptors=True or "
                              "\"kernel\"), not descriptors=\"host\"")
        if self.cta_group != 1 and self.backend != "cuda":
            raise OptionError(f"compile option cta_group={self.cta_group} applies to "
                              "backend='cuda' (the tcgen05 GEMM of target='sm_100a')")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Options:
        """The options of a mapping name -> value (a tuning configuration, a saved
        choice); names left out keep their defaults. An unknown name is a ``TypeError``
        naming it and the known ones."""
        unknown = set(values) - NAMES
        if unknown:
            raise TypeError(f"unknown compile option(s): {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(sorted(NAMES))}")
        return cls(**values)

    def changed(self) -> dict[str, Any]:
        """The options whose value differs from the default, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != f.default
                or type(getattr(self, f.name)) is not type(f.default)}

    @property
    def target_rules(self) -> Target:
        """The table entry of ``target`` (its limits and MMA rules)."""
        rules = lookup_target(self.target)
        assert rules is not None  # (checked when made)
        return rules

    @property
    def descriptor_maker(self) -> str | None:
        """Who makes the tensor descriptors: "host", "kernel" or None (no descriptors)."""
        if self.descriptors is True:
            return "kernel" if self.epilogue_split > 1 else "host"
        return self.descriptors or None


NAMES: frozenset[str] = frozenset(f.name for f in fields(Options))
