"""croqtile: compile Croqtile tile programs into Triton kernels callable from PyTorch."""

from __future__ import annotations

from .api import compile as compile
from .api import load as load
from .backends.options import Options as Options
from .errors import ArgumentError as ArgumentError
from .errors import CompileError as CompileError
from .errors import CompileWarning as CompileWarning
from .errors import DeviceAssertionError as DeviceAssertionError
from .errors import Diagnostic as Diagnostic
from .errors import KernelError as KernelError
from .errors import OptionError as OptionError
from .runtime.module import Function as Function
from .runtime.module import Module as Module
from . import nn as nn
from . import sparse as sparse  # host helpers for 2:4 sparse MMA operands

__all__ = ["ArgumentError", "CompileError", "CompileWarning", "DeviceAssertionError", "Diagnostic",
           "Function", "KernelError", "Module", "OptionError", "Options", "compile", "load", "nn",
           "sparse"]
__version__ = "0.1.0"
