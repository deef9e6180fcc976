"""Finding the code blocks of a Markdown page: their language, the line where each starts and
their text, descending into MyST directives written as fences (```{note} ... ```).

Only the languages of ``LANGUAGES`` may appear; any other fence (or one without a language,
or an indented code block) is returned as a ``BadBlock`` so that the page's test fails at
its line. Code-block directives (``{code-block}``, ``{literalinclude}`` ...) would show code
that the runner does not run, so they are bad blocks too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

# The fence languages the runner executes or checks, in the order its summary lists them.
LANGUAGES: tuple[str, ...] = ("croqtile", "python", "pycon", "console", "triton")

# Directives that would display code the runner never sees.
_CODE_DIRECTIVES = frozenset({"code", "code-block", "sourcecode", "code-cell", "literalinclude"})
# The same inside reStructuredText ({eval-rst} blocks), and reST's literal-block marker.
_RST_CODE = re.compile(r"^\s*\.\. (code|code-block|sourcecode|literalinclude)::", re.M)
_DIRECTIVE = re.compile(r"^\{([\w:-]+)\}")


@dataclass(frozen=True)
class Block:
    """One fenced code block: ``line`` is the 1-based page line of its opening fence,
    ``text`` its content (which starts on ``line + 1``)."""

    language: str
    line: int
    text: str

    @property
    def first_line(self) -> str:
        """The first line of the content, stripped."""
        return self.text.split("\n", 1)[0].strip()

    @property
    def gpu(self) -> bool:
        """Whether the block needs CUDA: a python (or pycon) block whose first line is
        ``# gpu``."""
        return self.language in ("python", "pycon") and self.first_line == "# gpu"


@dataclass(frozen=True)
class BadBlock:
    """A code block the runner cannot accept, with the reason."""

    line: int
    reason: str


def page_blocks(text: str) -> list[Block | BadBlock]:
    """The code blocks of a Markdown page, in page order."""
    parser = MarkdownIt("commonmark")
    return _blocks(parser, parser.parse(text), 0)


def _blocks(parser: MarkdownIt, tokens: list[Token], offset: int) -> list[Block | BadBlock]:
    found: list[Block | BadBlock] = []
    for token in tokens:
        if token.type not in ("fence", "code_block") or token.map is None:
            continue
        line = offset + token.map[0] + 1
        if token.type == "code_block":
            found.append(BadBlock(line, "an indented code block: write a fenced block with "
                                        f"one of the languages {', '.join(LANGUAGES)}"))
            continue
        info = token.info.strip()
        directive = _DIRECTIVE.match(info)
        if directive is not None:
            name = directive.group(1)
            if name in _CODE_DIRECTIVES:
                found.append(BadBlock(line, f"the {{{name}}} directive shows code the runner "
                                            "does not run: use a fenced block"))
            elif name == "eval-rst":
                match = _RST_CODE.search(token.content)
                if match is not None:
                    found.append(BadBlock(line, f"reST {match.group(1)}:: inside eval-rst "
                                                "shows code the runner does not run"))
            else:  # a directive's body is Markdown: its fences are blocks of the page
                found.extend(_blocks(parser, parser.parse(token.content), line))
            continue
        language = info.split()[0] if info else ""
        if language not in LANGUAGES:
            shown = f"language {language!r}" if language else "no language"
            found.append(BadBlock(line, f"a code block with {shown}: the documentation "
                                        f"accepts {', '.join(LANGUAGES)}"))
            continue
        found.append(Block(language, line, token.content))
    return found
