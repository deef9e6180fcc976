"""Errors of the reference interpreter.

``InterpretError`` is a fault of the program found while running it (an element read
past the end of its data, a data race between instances, a failed ``assert``), named at
the statement. Constructs the interpreter does not implement yet raise the builtin
``NotImplementedError`` naming the construct.
"""

from __future__ import annotations


class InterpretError(RuntimeError):
    """The program did something the language leaves undefined or forbids at run time."""


class AssertionFailed(InterpretError):
    """``assert(cond, "message")`` evaluated to false (spec 5.10)."""


class ArgumentError(ValueError):
    """Arguments that do not fit the function's parameters (spec 6)."""


def not_implemented(construct: str) -> NotImplementedError:
    return NotImplementedError(f"the reference interpreter does not implement {construct} yet")
