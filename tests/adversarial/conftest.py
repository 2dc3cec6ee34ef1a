"""The adversarial group: each test reproduces an attack or an accident (a hostile tool call, a
crafted memory, a killed writer, a full disk, a loaded machine) and checks that it is refused or
survived. Every test here carries the ``adversarial`` marker: ``pytest -m adversarial``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/adversarial/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.adversarial)
