"""``interpret_source``: compile Croqtile text through the front end (preprocess, find
the ``__co__`` functions, parse, check) and interpret one function."""

from __future__ import annotations

from typing import Any, Mapping

from ...frontend.diagnostics import Reporter
from ...frontend.parser import parse_program
from ...frontend.preprocessor import preprocess
from ...frontend.regions import find_co_functions
from ...frontend.sema.checker import Checker
from ...frontend.sema.model import CheckedFunction
from ...frontend.sema.targets import DEFAULT_TARGET, TARGETS
from ...frontend.sema.targets import lookup as lookup_target
from ...frontend.source import Source, SourceMap, Span
from ..options import Options
from .interpret import Semantics, run


def check_text(text: str, defines: Mapping[str, int | float | str | None] | None = None,
               filename: str = "<string>", target: str = DEFAULT_TARGET,
               ) -> tuple[list[CheckedFunction], Reporter]:
    """The checked functions of ``text``; raises the front end's ``CompileError``."""
    source = Source(text, filename)
    reporter = Reporter(SourceMap.identity(source))
    pp = preprocess(source, reporter, dict(defines or {}))
    reporter.raise_if_errors()
    reporter.source_map = pp.source_map
    regions = find_co_functions(pp.text, reporter)
    program = parse_program(pp.text, [(r.start, r.end) for r in regions], reporter)
    reporter.raise_if_errors()
    checker = Checker(reporter, lookup_target(target) or TARGETS[DEFAULT_TARGET])
    checked = checker.check_program(program)
    reporter.raise_if_errors()
    return checked.functions, reporter


def interpret_source(text: str, args: list[Any],
                     defines: Mapping[str, int | float | str | None] | None = None, *,
                     function: str | None = None, options: Options | None = None,
                     semantics: Semantics | None = None, filename: str = "<string>") -> Any:
    """Interpret ``function`` (the only one when omitted) of ``text`` on ``args``, checked
    for ``options.target`` and run with its ``f32_precision`` (default ``Options()``);
    ``semantics`` fills what the spec leaves open (default ``Semantics()``)."""
    options = options or Options()
    functions, reporter = check_text(text, defines, filename, options.target)
    if function is None:
        if len(functions) != 1:
            names = ", ".join(f.node.name for f in functions)
            raise ValueError(f"{filename} defines {len(functions)} __co__ functions ({names}); "
                             "name one with function=")
        fn = functions[0]
    else:
        matches = [f for f in functions if f.node.name == function]
        if not matches:
            raise ValueError(f"no __co__ function named '{function}' in {filename}")
        fn = matches[0]

    def locate(span: Span) -> str:
        loc = reporter.source_map.locate(span)
        return f"{loc.filename}:{loc.line}"

    return run(fn, list(args), None, options, locate, semantics)
