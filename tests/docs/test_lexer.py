"""The documentation's Croqtile lexer: Croqtile's words are keywords, types and built-ins,
and no program shipped with the package or used in an error-code example lexes to an
error token (Sphinx would warn, and the warnings-as-errors build would fail)."""

from __future__ import annotations

import sys
from pathlib import Path

from pygments.token import Error, Keyword, Name, Operator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from croqtile_docs.lexer import CroqtileLexer  # noqa: E402

sys.path.remove(str(ROOT / "docs" / "_ext"))


def _tokens(text: str) -> list[tuple[object, str]]:
    return [(token, value) for _, token, value in CroqtileLexer().get_tokens_unprocessed(text)
            if value.strip()]


def test_croqtile_words() -> None:
    tokens = dict((value, token) for token, value in _tokens(
        "__co__ void f(global f16 [M] x) { parallel p by 4 : block "
        "foreach {i} in [4] { s = dma.copy x => shared; y = __exp(x.at(p # i)); } }"))
    assert tokens["__co__"] is Keyword and tokens["parallel"] is Keyword
    assert tokens["foreach"] is Keyword and tokens["dma"] is Keyword
    assert tokens["global"] is Keyword and tokens["shared"] is Keyword
    assert tokens["f16"] is Keyword.Type and tokens["void"] is Keyword.Type
    assert tokens["__exp"] is Name.Builtin
    assert tokens["#"] is Operator


def test_no_error_tokens_in_shipped_programs() -> None:
    from croqtile.frontend.code_examples import EXAMPLES

    texts = [p.read_text() for p in sorted((ROOT / "croqtile" / "kernels").glob("*.co"))]
    texts += [text for example in EXAMPLES.values() for text in (example.bad, example.fixed)]
    assert len(texts) > 100
    for text in texts:
        errors = [value for _, token, value in CroqtileLexer().get_tokens_unprocessed(text)
                  if token is Error]
        assert not errors, (errors, text)
