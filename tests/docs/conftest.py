"""The documentation runner's line in pytest's summary: how many code blocks ran."""

from __future__ import annotations

import pytest

from .runner import STATS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STATS.run or STATS.gpu_not_run:
        terminalreporter.write_line(STATS.summary())
