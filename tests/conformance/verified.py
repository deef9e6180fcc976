"""Expected lines checked against the reference compiler's source.

``locate.py`` infers where an upstream error is from the message and the function it is
about; for a few directives that guess points at the wrong statement. Each entry here
replaces the inferred lines of one directive (file, variant defines, directive line) with
the line the reference compiler reports, worked out from which syntax node's location its
diagnostic uses (``n.LOC()`` of the node named in ``why``) and that node's first token.
A reference-compiler run (``--reference-compiler``) still takes precedence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .locate import Expectation


@dataclass(frozen=True)
class Verified:
    lines: tuple[int, ...]
    why: str  # the node whose location the reference compiler reports, and where it starts


# (path in the checkout, -D variant as Program.variant spells it, directive line) -> lines
VERIFIED: dict[tuple[str, str, int], Verified] = {
    ("tests/check/illegal_data_access.co", "", 13): Verified(
        (8,), "early sema, element access of a non-spanned name: the access node, "
              "starting at 'ii' of 'ii.at(i, i)'"),
    ("tests/check/no_wait.co", "", 18): Verified(
        (3,), "sema check after the function: the function node, starting at '__co__'"),
    ("tests/parse/error_parallel_by3.co", "", 12): Verified(
        (4,), "early sema of a parallel-by: the node, starting at 'parallel' "
              "({p} by [6, 128]: 1 variable, 2 bounds)"),
    ("tests/parse/error_parallel_by3.co", "", 13): Verified(
        (8,), "early sema of a parallel-by: the node, starting at 'parallel' "
              "({q} by [s], s of rank 2)"),
    ("tests/gpu/check/illegal_mma_mc.co", "", 50): Verified(
        (40,), "early sema of an MMA exec: its first operand, 'mc' of 'mma.row.col mc, ...'"),
    ("tests/gpu/codegen/cute/dma_copy_swizzle_syntax_fail.co", "", 4): Verified(
        (11,), "parser action of the swizzle value: the number token of the first "
               "'.swiz<256>'"),
    ("tests/gpu/codegen/cute/wgmma_schedule_invalid.co", "", 16): Verified(
        (11,), "code generator, MMA exec with an issue order: the MMA statement node, "
               "starting at 'mma' (the attribute line is not part of it)"),
    ("tests/gpu/codegen/cute/wgmma_store_async_tma_event_warpspec.co", "", 37): Verified(
        (31,), "sema check of trigger-after: the dependency, 'store' of "
               "'trigger stored after store'"),
}


def apply(rel: str, variant: str, found: list[Expectation]) -> list[Expectation]:
    """``found`` with the verified lines of this program's directives substituted."""
    out = []
    for expectation in found:
        entry = VERIFIED.get((rel, variant, expectation.directive_line))
        out.append(expectation if entry is None else
                   replace(expectation, lines=entry.lines, how="verified"))
    return out
