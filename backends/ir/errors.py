"""The one exception the lowering raises for user-visible problems: a diagnostic code, the
span to report it at and the message fields. The driver turns it into a diagnostic."""

from __future__ import annotations

from typing import Any

from ...frontend.sema.symbolic import Sym
from ...frontend.source import Span


class LoweringError(Exception):
    def __init__(self, code: str, span: Span, **fields: Any) -> None:
        super().__init__(code)
        self.code = code
        self.span = span
        self.fields = fields  # the keyword arguments of ``Reporter.report`` (and a hint)


def unsupported(span: Span, construct: str, hint: str | None = None) -> LoweringError:
    """CQ0701: a construct this backend does not lower yet."""
    return LoweringError("CQ0701", span, construct=construct, hint=hint)


class NeedsSpecialization(Exception):
    """A tile extent built from parameter dimensions (``M``, ``K / 8``): Triton needs it
    constant, so the function is compiled per call with those dimensions' values from the
    arguments (the driver catches this and defers the compile to the call)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = frozenset(names)


class NeedsContiguous(Exception):
    """A construct that reads a parameter's memory as row-major (``span_as``, explicit
    element strides) met a parameter lowered for strided arguments: the variant is
    lowered again with that parameter copied contiguous by the host (the driver catches
    this)."""

    def __init__(self, param: str) -> None:
        super().__init__(param)
        self.param = param


def static_extent(extent: Sym, span: Span) -> int:
    """The value of a tile extent; one that depends on parameter dimensions asks for a
    specialised compile (every free name of a ``Sym`` is a parameter dimension)."""
    if extent.value is not None:
        return extent.value
    names = extent.free_vars()
    if names:
        raise NeedsSpecialization(names)
    raise LoweringError("CQ0704", span, extent=extent)
