"""``croqtile --version``: the package's version, written in one place (``croqtile.__version__``,
which pyproject.toml reads for the distribution; tests/test_wheel.py checks the installed
metadata against it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import croqtile
from croqtile.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"croqtile {croqtile.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+(\S*)", croqtile.__version__)


def test_pyproject_takes_the_version_from_the_package() -> None:
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is not in Python 3.10)
    assert not re.search(r"^version\s*=\s*\"", text, re.M)  # no second copy
    assert re.search(r"^dynamic\s*=\s*\[\"version\"\]", text, re.M)
    assert re.search(r"^version\s*=\s*\{\s*attr\s*=\s*\"croqtile.__version__\"\s*\}", text,
                     re.M)
    # an SPDX expression, not the deprecated table
    assert re.search(r'^license\s*=\s*"Apache-2.0"', text, re.M)
