"""The one exception the lowering raises for user-visible problems: a diagnostic code, the
span to report it at and the message fields. The driver turns it into a diagnostic."""

from __future__ import annotations

from ...frontend.source import Span


class LoweringError(Exception):
    def __init__(self, code: str, span: Span, **fields: object) -> None:
        super().__init__(code)
        self.code = code
        self.span = span
        self.fields = fields


def unsupported(span: Span, construct: str, hint: str | None = None) -> LoweringError:
    """CQ0701: a construct this backend does not lower yet."""
    return LoweringError("CQ0701", span, construct=construct, hint=hint)
