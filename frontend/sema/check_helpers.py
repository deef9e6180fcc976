"""Checks of calls into the file's CUDA code: ``call`` of a device helper (inlined by the
parser, see ``device_helpers``), the warp shuffles an inlined helper uses, the bit
built-ins ``__popc`` / ``__clz``, and ``__cpp__`` blocks.

A helper call is its inlined expression: the checker types that expression where the call
stands. A call of a helper that cannot be inlined is CQ0706 at the call, naming the helper
and what stops it. A warp shuffle permutes the values of the lanes of the innermost
enclosing ``: thread`` level, which must have one variable (CQ0707). ``__cpp__`` on the
host is skipped with a warning (CQ0709); inside a kernel it is raw CUDA, which a Triton
kernel cannot run (CQ0708).
"""

from __future__ import annotations

from .. import syntax as ast
from ..device_helpers import SHUFFLES
from . import dtypes
from .check_common import ERROR, CheckerBase, scalar_elem
from .model import ExprInfo, Level, ScalarType

_INT = ScalarType(dtypes.INT)


class HelperChecks(CheckerBase):
    """Mixin of ``Checker``: device helpers, shuffles, bit built-ins, ``__cpp__``."""

    def _expr_ExternCall(self, e: ast.ExternCall) -> ExprInfo:
        if e.inlined is not None:
            self.helper_calls.append(e)
            try:
                return self._expr(e.inlined)
            finally:
                self.helper_calls.pop()
        for a in e.args:
            self._expr(a)
        if e.problem:
            self._error("CQ0706", e.span, helper="::".join(e.path), reason=e.problem)
            return ERROR
        return ExprInfo(_INT)

    def _shuffle(self, e: ast.CallExpr) -> ExprInfo:
        """``__shfl_*_sync(v, lane[, width])`` (the member mask dropped): ``v``'s type."""
        args = [self._expr(a) for a in e.args]
        if not 2 <= len(args) <= 3:
            self._error("CQ0311", e.span, what=e.name, expected="3 or 4 (with the mask)",
                        actual=len(args) + 1)
            return ExprInfo(_INT)
        for extra in args[1:]:
            if not (scalar_elem(extra) or dtypes.F32).is_int:
                self._error("CQ0209", e.span, what=f"the lane argument of {e.name}",
                            actual=extra.type.describe())
        threads = [info for info in self.ctx.levels if info.level is Level.THREAD]
        if not threads or len(threads[-1].vars) != 1:
            site = self.helper_calls[-1] if self.helper_calls else None
            self._error("CQ0707", site.span if site else e.span, name=e.name,
                        helper="::".join(site.path) if site else e.name,
                        where="outside a ': thread' level" if not threads else
                        "in a ': thread' level of several variables")
        else:
            self._fn().lanes[id(e)] = threads[-1].vars[0]
        elem = scalar_elem(args[0])
        return ExprInfo(ScalarType(elem or dtypes.INT))

    def _bits(self, e: ast.CallExpr) -> ExprInfo:
        """``__popc(x)`` / ``__clz(x)`` of a 32-bit integer: an int."""
        args = [self._expr(a) for a in e.args]
        if len(args) != 1:
            self._error("CQ0311", e.span, what=e.name, expected=1, actual=len(args))
        elif not (scalar_elem(args[0]) or dtypes.F32).is_int:
            self._error("CQ0209", e.args[0].span, what=f"the argument of {e.name}",
                        actual=args[0].type.describe())
        return ExprInfo(_INT)

    def _is_helper_call(self, e: ast.CallExpr) -> bool:
        """Calls only an inlined helper makes (the shuffles)."""
        return e.name in SHUFFLES and bool(self.helper_calls)

    def _stmt_CppStmt(self, stmt: ast.CppStmt) -> None:
        if self.ctx.on_device:
            self._error("CQ0708", stmt.span)
        else:
            first = stmt.code.strip().splitlines()[0] if stmt.code.strip() else ""
            shown = first if len(first) <= 40 else first[:37] + "..."
            self._error("CQ0709", stmt.span, text=shown)
