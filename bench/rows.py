"""What the bench scripts share: writing their rows (dicts of one shape) as a CSV."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Sequence


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """``rows`` as a CSV at ``path``, the first row's keys as the header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
