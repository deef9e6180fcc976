"""The error-code reference, rendered as Markdown from the registry of codes
(``frontend/codes.py``) and the examples (``frontend/code_examples.py``): the documentation
site's page of error codes is this render, made while the site builds.

    python -m croqtile.tools.errors_doc    # the page on standard output

One section per code: its message template, severity, what it means, a program that
produces it, the fix and the hint. ``tests/test_error_codes.py`` checks the examples and
that the render covers every code.
"""

from __future__ import annotations

import re
import sys

from ..frontend.code_examples import EXAMPLES, MEANINGS, UNTRIGGERABLE, Example
from ..frontend.codes import CODES, Code

# The code ranges of frontend/codes.py, in order: the prefix of the code and a title.
_RANGES: tuple[tuple[str, str], ...] = (
    ("CQ00", "Preprocessor"),
    ("CQ01", "Lexer and parser"),
    ("CQ02", "Names, types and scalars"),
    ("CQ03", "Shapes and views"),
    ("CQ04", "DMA and TMA"),
    ("CQ05", "MMA"),
    ("CQ06", "Parallel levels and control flow"),
    ("CQ07", "Constructs the Triton backend cannot map"),
    ("CQ09", "Internal compiler errors"),
)

_INTRO = """\
# Croqtile error codes

Every diagnostic the compiler reports has a stable code: `error[CQ0201]: ...` or
`warning[CQ0206]: ...`. This reference lists each code with what it means, a minimal
program that produces it, the smallest change that fixes it, and the hint the compiler
adds. Errors stop the compile; warnings are reported and the program still compiles;
notes point out a difference from the reference compiler, are listed by `croqtile check`
and are not raised as Python warnings.
`croqtile explain CQ0201` prints the same entry in a terminal.

The examples are checked by `tests/test_error_codes.py`: each wrong program reports its
code with the message shown, each fixed program compiles. Programs are checked for the
default target, `sm_90`, unless a section names another. This page is generated from
`frontend/codes.py` and `frontend/code_examples.py` when the documentation is built.
"""


def render_reference() -> str:
    """The whole reference, as Markdown."""
    parts = [_INTRO, _index()]
    for prefix, title in _RANGES:
        codes = [code for code in CODES.values() if code.code.startswith(prefix)]
        if codes:
            parts.append(f"## {prefix}xx: {title}\n")
            parts.extend(_section(code) for code in codes)
    return "\n".join(parts)


def _index() -> str:
    rows = ["| Code | Severity | Message |", "| --- | --- | --- |"]
    for code in CODES.values():
        rows.append(f"| [{code.code}](#{code.code.lower()}) | {code.severity.value} "
                    f"| {_markdown(_title(code)).replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def _section(code: Code) -> str:
    lines = [f'<a id="{code.code.lower()}"></a>',
             f"### {code.code} — {_markdown(_title(code))}", "",
             f"**{code.severity.value.capitalize()}.** {_markdown(MEANINGS[code.code])}", ""]
    example = EXAMPLES.get(code.code)
    if example is not None:
        lines += _example(code, example)
    else:
        lines += [f"No program produces this code: {_markdown(UNTRIGGERABLE[code.code])}.", ""]
    if code.hint == "{hint}":
        lines += ["Hint: given with each diagnostic; it depends on the case.", ""]
    elif code.hint:
        lines += [f"Hint: {_markdown(_unescape(code.hint))}", ""]
    return "\n".join(lines)


def _shown(program: str, keep: int = 12) -> str:
    """A program as shown in the reference: long ones keep their head and tail."""
    lines = program.rstrip("\n").split("\n")
    if len(lines) <= 3 * keep:
        return "\n".join(lines)
    hidden = len(lines) - keep - 2
    return "\n".join(lines[:keep] + [f"  // ... {hidden:,} more lines ..."] + lines[-2:])


def _example(code: Code, example: Example) -> list[str]:
    target = f" (target `{example.target}`)" if example.target else ""
    return [
        f"A program with this problem{target}:", "",
        "```c", _shown(example.bad), "```", "",
        "The compiler says:", "",
        "```text", f"{code.severity.value}[{code.code}]: {example.message}", "```", "",
        "Fixed:", "",
        "```c", example.fixed.rstrip("\n"), "```", "",
    ]


def _title(code: Code) -> str:
    # `{char!r}` reads `{char}`: the conversion is an implementation detail
    return re.sub(r"\{(\w+)![rsa]\}", r"{\1}", _unescape(code.template))


def _unescape(template: str) -> str:
    # Templates are str.format strings: `{{` is the `{` a reader sees.
    return template.replace("{{", "{").replace("}}", "}")


def _markdown(text: str) -> str:
    """``text`` with Markdown's special characters escaped outside `code spans`."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):  # even pieces are outside code spans
        pieces[i] = re.sub(r"([\\*_<>\[\]])", r"\\\1", pieces[i])
    return "`".join(pieces)


if __name__ == "__main__":
    sys.stdout.write(render_reference())
