"""The type checker's escape hatch stays narrow: every ``type: ignore`` in the package names
the error code it silences and, on the same line, the reason the types cannot say it."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("croqtile", "frontend", "backends")

# `# type: ignore[code, ...]  # why`
_EXPLAINED = re.compile(r"#\s*type:\s*ignore\[[a-z0-9-]+(?:,\s*[a-z0-9-]+)*\]\s+#\s*\S")


def _ignores(path: Path) -> list[tuple[int, str]]:
    """The comments of ``path`` that hold ``type: ignore``, with their lines (comments
    only: a string that mentions the words is not one)."""
    found = []
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for tok in tokens:
        if tok.type == tokenize.COMMENT and re.search(r"type:\s*ignore", tok.string):
            found.append((tok.start[0], tok.string))
    return found


def test_every_type_ignore_names_its_code_and_reason() -> None:
    unexplained = [f"{path.relative_to(ROOT)}:{line}: {comment}"
                   for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
                   for line, comment in _ignores(path) if not _EXPLAINED.search(comment)]
    assert not unexplained, "type: ignore without an error code and a reason:\n" + \
        "\n".join(unexplained)


def test_the_pattern_tells_explained_from_bare_ignores() -> None:
    assert _EXPLAINED.search("# type: ignore[arg-type]  # torch types it as a Tensor")
    assert _EXPLAINED.search("# type: ignore[misc, union-attr]  # why")
    assert not _EXPLAINED.search("# type: ignore[arg-type]")
    assert not _EXPLAINED.search("# type: ignore  # no code")
