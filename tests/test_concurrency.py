"""Threads and processes sharing a cache directory make their first calls at once
(``bench/stress.py``, whose long run is ``python bench/stress.py``): no error, no wrong
result, one module load per function."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest
import torch

import croqtile
from croqtile.backends.triton.launcher import publish

ROOT = Path(__file__).resolve().parent.parent


def _stress() -> ModuleType:
    spec = importlib.util.spec_from_file_location("croqtile_stress", ROOT / "bench" / "stress.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


def test_threads_and_processes_first_calls_coincide() -> None:
    """12 threads in each of 2 processes, 4 rounds, each round a fresh shared cache
    directory and fresh sources. (Before the fix: FileNotFoundError renaming the
    temporary file, modules loaded several times, in most rounds.)"""
    stress = _stress()
    calls, errors = stress.stress(stress.Plan(rounds=4, threads=12, processes=2))
    assert calls == 4 * 12 * 2
    assert errors == [], "\n".join(errors[:3])


def test_publish_from_many_threads_leaves_one_whole_file(tmp_path: Path) -> None:
    """Writers of one path at once all succeed; the file is one writer's text, whole,
    and no temporary file is left behind."""
    path = tmp_path / "module.py"
    texts = [f"# writer {i}\n" + "x = 1\n" * 20_000 for i in range(12)]
    start = threading.Barrier(len(texts))
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            start.wait()
            publish(path, text)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert path.read_text() in texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["module.py"]


def test_a_partial_module_in_the_cache_is_written_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated module left incomplete in the cache (by an older writer) is replaced
    by the whole one before it is imported."""
    monkeypatch.setenv("CROQTILE_CACHE_DIR", str(tmp_path))
    fn = croqtile.compile(STATIC).add_once
    artifact, _ = fn.host()
    (published,) = tmp_path.glob("*.py")
    assert published.read_text() == artifact.source
    published.write_text(artifact.source[: len(artifact.source) // 2])
    again = croqtile.compile(STATIC).add_once
    x = torch.arange(32, dtype=torch.int32).reshape(4, 8)
    assert torch.equal(again(x, x, 3), 2 * x + 3)
    assert published.read_text() == artifact.source


STATIC = """
__co__ s32 [4, 8] add_once(s32 [4, 8] x, s32 [4, 8] y, int k) {
  s32 [x.span] out;
  parallel {i, j} by [4, 8]
    out.at(i, j) = x.at(i, j) + y.at(i, j) + k;
  return out;
}
"""
