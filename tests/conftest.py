"""Shared test fixtures: a private cache directory, devices, and numeric checks."""

from __future__ import annotations

from pathlib import Path

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
