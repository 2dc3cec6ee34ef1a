"""End-to-end fixtures: the pinned real clients, installed once per session into the cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from clients import TIMINGS, Clients, ensure_clients, netns_prefix


@pytest.fixture(scope="session")
def clients() -> Clients:
    return ensure_clients()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS:
        return
    terminalreporter.section("e2e timings")
    prefix = netns_prefix()
    terminalreporter.write_line(f"network namespace: {' '.join(prefix) if prefix else 'none'}")
    for label, seconds in TIMINGS.items():
        terminalreporter.write_line(f"{label}: {seconds:.1f} s")
