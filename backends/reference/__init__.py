"""The reference interpreter: executes checked Croqtile directly on CPU torch tensors,
following spec 5 literally. Slow and obviously correct; the oracle the Triton path is
compared against.

    from croqtile.backends.reference import interpret_source
    out = interpret_source(text, [lhs, rhs])
"""

from __future__ import annotations

from .errors import ArgumentError, AssertionFailed, InterpretError
from .interpret import Interpreter, Semantics, run
from .source import check_text, interpret_source

__all__ = ["ArgumentError", "AssertionFailed", "InterpretError", "Interpreter", "Semantics",
           "check_text", "interpret_source", "run"]
