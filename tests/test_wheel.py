"""The built wheel works on its own: built from a copy of the checkout, installed with the
pinned runtime dependencies into a fresh virtual environment, and run from a directory
outside the checkout (`croqtile --version`, `croqtile check` on a kernel shipped in the
wheel, `croqtile bench square --device cpu --quick`). ``frontend`` and ``backends``
install under ``croqtile`` only: importing them at the top level fails there.

The environment is a real one: ``python -m venv`` without pip (the test's own pip
installs into it with ``--python``), the wheel and the runtime pins of the Makefile (torch
comes from a local wheel or pip's cache, so this takes seconds, not a download). Nothing
of the checkout or of the test's environment is on its path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

import croqtile

ROOT = Path(__file__).resolve().parent.parent
# Not copied for the build: version control, environments, build outputs, caches.
IGNORED = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
           ".cache", ".whl", "bench-results")


def runtime_pins() -> list[str]:
    """The Makefile's pins without the test-only ones: what CI installs beside the wheel."""
    match = re.search(r"^PINS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, "the Makefile has no PINS line"
    pins = [p for p in match.group(1).split() if not p.startswith("pytest")]
    assert any(p.startswith("torch==") for p in pins), pins
    return pins


@dataclass(frozen=True)
class Installed:
    wheel: Path
    build_log: str
    venv: Path
    workdir: Path  # outside the checkout: where the commands run
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.workdir, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def croqtile(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "croqtile"), *args, timeout=timeout)


def _checked(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{done.args}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*IGNORED))
    dist = tmp / "dist"
    build = _checked(subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         str(source), "-w", str(dist)], capture_output=True, text=True, timeout=300))
    (wheel,) = dist.glob("croqtile-*.whl")
    venv = tmp / "venv"
    _checked(subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                            capture_output=True, text=True, timeout=120))
    _checked(subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", str(wheel), *runtime_pins()], capture_output=True, text=True, timeout=600))
    workdir = tmp / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
           and not k.startswith("CROQTILE_")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CROQTILE_CACHE_DIR"] = str(tmp / "cache")  # nothing compiled by the checkout
    yield Installed(wheel, build.stdout + build.stderr, venv, workdir, env)
    shutil.rmtree(venv, ignore_errors=True)  # (1.6 GB, mostly torch)


def test_the_build_prints_no_deprecation_warning(installed: Installed) -> None:
    # (the `license = { text = ... }` table made setuptools warn on every build)
    assert "Deprecat" not in installed.build_log
    assert "BuildBackendWarning" not in installed.build_log


def test_the_wheel_ships_the_bench_kernels_and_no_top_level_frontend(
        installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("croqtile/bench/kernels/")}
    in_checkout = {p.name for p in (ROOT / "croqtile" / "bench" / "kernels").glob("*.co")}
    assert in_checkout and shipped == in_checkout
    tops = {n.split("/")[0] for n in names}
    assert tops == {"croqtile", f"croqtile-{croqtile.__version__}.dist-info"}
    assert not [n for n in names if re.fullmatch(r"croqtile/bench_\w+\.py", n)]


PROBE = """\
import importlib.metadata, importlib.resources, json
import croqtile
print(json.dumps({"file": croqtile.__file__,
                  "version": importlib.metadata.version("croqtile"),
                  "kernel": str(importlib.resources.files("croqtile.bench") / "kernels" / "gemm.co")}))
"""


@pytest.fixture(scope="module")
def probe(installed: Installed) -> dict[str, str]:
    """What the installed package says of itself, from one interpreter of the environment
    (each start imports torch: one start for all of it)."""
    found: dict[str, str] = json.loads(_checked(installed.run(str(installed.python), "-c",
                                                              PROBE)).stdout)
    return found


def test_version(installed: Installed, probe: dict[str, str]) -> None:
    done = _checked(installed.croqtile("--version"))
    assert done.stdout == f"croqtile {croqtile.__version__}\n"
    assert probe["version"] == croqtile.__version__


def test_the_package_comes_from_the_environment_and_frontend_is_not_top_level(
        installed: Installed, probe: dict[str, str]) -> None:
    assert Path(probe["file"]).is_relative_to(installed.venv)
    for name in ("frontend", "backends"):
        failed = installed.run(str(installed.python), "-c", f"import {name}")
        assert failed.returncode == 1
        assert f"No module named '{name}'" in failed.stderr


def test_check_a_kernel_shipped_in_the_wheel(installed: Installed,
                                             probe: dict[str, str]) -> None:
    kernel = Path(probe["kernel"])  # found through importlib.resources
    assert kernel.is_relative_to(installed.venv) and kernel.is_file()
    done = _checked(installed.croqtile("check", str(kernel)))
    assert done.stdout == ""
    assert done.stderr.strip() == "0 errors, 0 warnings in 1 file"


def test_bench_square_on_the_cpu(installed: Installed) -> None:
    done = _checked(installed.croqtile("bench", "square", "--device", "cpu", "--quick"))
    assert re.search(r"^square +gemm +f16 +1 +0 ", done.stdout, re.M), done.stdout
    assert re.search(r"^square +gemm +bf16 +1 +0 ", done.stdout, re.M), done.stdout
    out = Path("bench-results", "cpu")
    assert f"wrote 2 files to {out}" in done.stdout
    rows = (installed.workdir / out / "square.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",True," in row for row in rows[1:])
