"""The error-code reference: every diagnostic code has a program that triggers it, with its
rendered message, and a fixed program that compiles; the documentation's page of error codes
is rendered from them while the site builds (docs/_ext/croqtile_docs/error_codes.py).

A few examples are right but the compiler is not (yet): those tests are marked
``xfail(strict=True)`` with the gap, so that fixing the compiler makes them fail until the
entry below is removed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from croqtile.cli import main as cli_main
from croqtile.runtime.driver import check_source
from croqtile.tools.errors_doc import render_reference
from croqtile.frontend.code_examples import EXAMPLES, MEANINGS, UNTRIGGERABLE
from croqtile.frontend.codes import CODES

ROOT = Path(__file__).resolve().parent.parent
FILENAME = "example.co"

# Wrong programs that do not report their code.
BAD_GAPS: dict[str, str] = {}

# Fixed programs that still report an error.
FIXED_GAPS: dict[str, str] = {}


def _cases(gaps: dict[str, str]) -> list[object]:
    return [pytest.param(code, id=code,
                         marks=[pytest.mark.xfail(strict=True, reason=gaps[code])]
                         if code in gaps else [])
            for code in EXAMPLES]


# --- coverage ------------------------------------------------------------------------------


def test_every_code_has_an_example_or_a_reason() -> None:
    covered = set(EXAMPLES) | set(UNTRIGGERABLE)
    assert not set(CODES) - covered, f"codes without an example: {sorted(set(CODES) - covered)}"
    assert not covered - set(CODES), f"examples of unknown codes: {sorted(covered - set(CODES))}"
    assert not set(EXAMPLES) & set(UNTRIGGERABLE)


def test_every_code_has_a_meaning() -> None:
    assert set(MEANINGS) == set(CODES)


def test_known_gaps_name_examples() -> None:
    assert set(BAD_GAPS) <= set(EXAMPLES) and set(FIXED_GAPS) <= set(EXAMPLES)


# --- the examples ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", _cases(BAD_GAPS))
def test_bad_program_reports_its_code(code: str) -> None:
    example = EXAMPLES[code]
    severity = CODES[code].severity.value
    diagnostics = check_source(example.bad, filename=FILENAME, target=example.target)
    found = [d for d in diagnostics if d.code == code]
    assert found, f"{code} not reported; got {[(d.code, d.message) for d in diagnostics]}"
    assert {d.severity for d in found} == {severity}
    assert example.message in [d.message for d in found], [d.message for d in found]
    diag = next(d for d in found if d.message == example.message)
    rendered = diag.render()
    assert rendered.startswith(f"{severity}[{code}]: {example.message}\n")
    assert f"  --> {FILENAME}:{diag.line}:{diag.column}\n" in rendered
    carets = re.findall(r"^ +\| ( *)\^+$", rendered, re.M)
    assert carets, rendered
    if "..." not in diag.source_line and "...(" not in rendered:
        assert len(carets[0]) == diag.column - 1, rendered  # long lines are excerpted


@pytest.mark.parametrize("code", _cases(FIXED_GAPS))
def test_fixed_program_compiles(code: str) -> None:
    example = EXAMPLES[code]
    diagnostics = check_source(example.fixed, filename=FILENAME, target=example.target)
    errors = [d.render() for d in diagnostics if d.severity == "error"]
    assert not errors, "\n\n".join(errors)
    assert code not in [d.code for d in diagnostics]


# --- the generated reference -------------------------------------------------------------------


def _error_codes_module() -> Any:
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from croqtile_docs import error_codes
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    return error_codes


def test_the_documentation_page_is_the_render() -> None:
    error_codes = _error_codes_module()
    page = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    source = [page]
    error_codes.replace_error_codes(None, error_codes.DOCNAME, source)
    assert source[0] == error_codes.error_codes_page() != page
    other = [page]
    error_codes.replace_error_codes(None, "reference/cli", other)
    assert other == [page]


def test_the_page_has_a_target_per_code_and_its_links_resolve() -> None:
    text = _error_codes_module().error_codes_page()
    targets = set(re.findall(r"^\((cq\d{4})\)=$", text, re.M))
    assert targets == {code.lower() for code in CODES}
    for code in CODES:
        assert f"({code.lower()})=\n### {code} — " in text
    links = set(re.findall(r"\]\(#(cq\d{4})\)", text))
    assert links and links <= targets
    assert "<a id=" not in text and "```c\n" not in text and "```croqtile\n" in text
    assert "ERRORS.md" not in text


def test_reference_has_a_section_per_code() -> None:
    text = render_reference()
    for code in CODES:
        assert f'<a id="{code.lower()}"></a>\n### {code} — ' in text


def test_explain_prints_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["explain", "CQ0510"]) == 0
    out = capsys.readouterr().out
    assert "A program with this problem (target sm_86):" in out
    assert "        parallel g by 1 : group-4 {" in out and "Fixed:" in out
