"""Every page of the documentation runs: one test per Markdown page of README.md,
CHANGELOG.md (included in the site) and docs/ (the id is the page's path); a page with
blocks marked ``# gpu`` runs whole in the GPU tier (a test marked ``gpu``) and without
those blocks where there is no CUDA device."""

from __future__ import annotations

from pathlib import Path

import pytest

from .blocks import Block, page_blocks
from .runner import run_page

ROOT = Path(__file__).resolve().parents[2]


def pages() -> list[Path]:
    """README.md, CHANGELOG.md and every Markdown page under docs/, build outputs aside."""
    found = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    found += sorted(p for p in (ROOT / "docs").rglob("*.md")
                    if not {"_build", "build"} & set(p.relative_to(ROOT).parts))
    return found


def _has_gpu_blocks(page: Path) -> bool:
    return any(isinstance(b, Block) and b.gpu for b in page_blocks(page.read_text("utf-8")))


def _cases() -> list[object]:
    import torch

    cuda = torch.cuda.is_available()
    cases: list[object] = []
    for page in pages():
        label = page.relative_to(ROOT).as_posix()
        if not _has_gpu_blocks(page):
            cases.append(pytest.param(page, False, id=label))
            continue
        if not cuda:  # the page without its GPU blocks, here
            cases.append(pytest.param(page, False, id=label))
        cases.append(pytest.param(page, True, id=f"{label}[gpu]", marks=pytest.mark.gpu))
    return cases


@pytest.mark.parametrize(("page", "gpu"), _cases())
def test_page(page: Path, gpu: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_page(page, page.relative_to(ROOT).as_posix(), tmp_path, gpu=gpu)


def test_the_pages_are_found() -> None:
    labels = [p.relative_to(ROOT).as_posix() for p in pages()]
    assert labels[0] == "README.md" and "docs/index.md" in labels
