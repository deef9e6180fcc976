"""The corpus (``tests/data/manifest.py``): every program through the reference
interpreter and the Triton path on fresh random inputs, both against a float64 torch
reference and against each other -- integers exactly, floats within the tolerances of
``checks.py``."""

from __future__ import annotations

import pytest

from ..data.manifest import CORPUS, DATA
from .checks import DEVICES, Case, check


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.id)
def test_corpus_program(case: Case, device: str) -> None:
    check(case, device)


def test_every_program_has_a_case() -> None:
    """Each program of the folder is in the manifest (the seed kernels have theirs in
    tests/reference/test_interpret.py), and each case names a program that exists."""
    programs = {p.stem for p in DATA.glob("*.co") if not p.stem.startswith("seed")}
    named = {c.id.split("-")[0] for c in CORPUS}
    assert sorted(programs - named) == [], "programs without a case"
    assert sorted(named - programs) == [], "cases without a program"
    assert len(programs) >= 60
