"""Public exception types."""

from __future__ import annotations

from .backends.options import OptionError
from .backends.triton.launcher import DeviceAssertionError, KernelError
from .frontend.diagnostics import CompileError, Diagnostic

__all__ = ["ArgumentError", "CompileError", "CompileWarning", "DeviceAssertionError", "Diagnostic",
           "KernelError", "OptionError"]


class ArgumentError(ValueError):
    """A call with arguments that do not fit the function: the message names the
    parameter, the dimension, the expected and the actual value."""


class CompileWarning(UserWarning):
    """A warning diagnostic of a program that compiled."""
