"""bench/ holds what maintainers rerun, each script listed in its README, and
bench/results/<gpu>/ the current figures only: one CSV, JSON and PNG per sweep, a README
with a line per sweep, every row checked, no dated folders, at most 2 MB in all."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
RESULTS = BENCH / "results"
HELPERS = {"rows.py", "attention_probe_kernels.py"}  # imported by the scripts, not run
GPUS = sorted(p for p in RESULTS.iterdir() if p.is_dir() and p.name != "conformance")


def test_every_script_is_listed_in_the_readme_and_every_listed_one_exists() -> None:
    readme = (BENCH / "README.md").read_text()
    scripts = {p.name for p in BENCH.glob("*.py")}
    listed = set(re.findall(r"`(\w+\.py)`", readme))
    assert scripts - HELPERS <= listed, sorted(scripts - HELPERS - listed)
    assert listed <= scripts, sorted(listed - scripts)
    assert not list(BENCH.glob("*.sh")) and not (BENCH / "kernels").exists()


def test_the_results_stay_small() -> None:
    size = sum(p.stat().st_size for p in RESULTS.rglob("*") if p.is_file())
    assert size <= 2 * 1024 * 1024, f"bench/results holds {size / 2**20:.2f} MiB"


def test_no_dated_folders_or_notes() -> None:
    dated = [p for p in RESULTS.rglob("*") if re.match(r"\d{4}-\d{2}-\d{2}", p.name)]
    assert not dated and not list(RESULTS.rglob("NOTES.md"))
    assert GPUS and all(not any(p.is_dir() for p in gpu.iterdir()) for gpu in GPUS)


@pytest.mark.parametrize("gpu", GPUS, ids=lambda p: p.name)
def test_each_sweep_has_its_files_a_summary_line_and_only_checked_rows(gpu: Path) -> None:
    sweeps = {p.stem for p in gpu.glob("*.csv")}
    assert sweeps and {p.name for p in gpu.iterdir()} == {"README.md"} | {
        f"{s}.{ext}" for s in sweeps for ext in ("csv", "json", "png")}
    summary = set(re.findall(r"^\| (\w+) \| .+ \| (\d{4}-\d{2}-\d{2}), [0-9a-f]{7,} \|$",
                             (gpu / "README.md").read_text(), re.M))
    assert {sweep for sweep, _ in summary} == sweeps
    for sweep in sweeps:
        with (gpu / f"{sweep}.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert rows and all(r["ok"] == "True" for r in rows), sweep
