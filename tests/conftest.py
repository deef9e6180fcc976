"""Shared test fixtures: a private cache directory, devices, numeric checks, and the
epilogue bench's compiled baseline left uncompiled."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    import os

    os.environ["CROQTILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("croqtile-cache"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def read_data(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture
def uncompiled_baseline(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """The epilogue's torch.compile baseline left uncompiled (slow on the CPU); the list
    collects each function that would have been compiled."""
    built: list[Callable[..., Any]] = []

    def no_compile(fn: Callable[..., Any]) -> Callable[..., Any]:
        built.append(fn)
        return fn

    from croqtile.bench import linear

    monkeypatch.setattr(linear, "compile_baseline", no_compile)
    return built
