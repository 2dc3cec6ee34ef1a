"""Packages import one way: the layer table in ``docs/architecture.md`` is the rule, enforced.

Every import of every module (at module level, inside a function, under ``TYPE_CHECKING``) is read
from the source, so a lazy import that points back up is found whether or not a test runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_cycles import import_graph, module_files

REPO_ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
_ROW = re.compile(r"^\|\s*(\d+)\s*\|([^|]*)\|")
_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(/|\.py)`")


def layer_table(text: str) -> dict[str, int]:
    """package -> layer, from the rows of the Packages section's table."""
    section = text.split("## Packages", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for line in section.splitlines():
        row = _ROW.match(line)
        if not row:
            continue
        names = _NAME.findall(row.group(2))
        assert names, f"a row naming no package: {line}"
        for name, _kind in names:
            assert name not in layers, f"{name} is in the table twice"
            layers[name] = int(row.group(1))
    return layers


def package_of(module: str) -> str:
    """``memself.store.records`` -> ``store``; ``memself.config`` -> ``config``; ``memself`` ->
    ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def arrows(graph: dict[str, set[str]]) -> set[tuple[str, str, str, str]]:
    """(package, imported package, module, imported module) for every import across packages."""
    return {
        (package_of(src), package_of(dst), src, dst)
        for src, targets in graph.items()
        for dst in targets
        if package_of(src) != package_of(dst)
    }


def violations(layers: dict[str, int], graph: dict[str, set[str]]) -> list[str]:
    found = []
    for src_pkg, dst_pkg, src, dst in sorted(arrows(graph)):
        if layers[dst_pkg] >= layers[src_pkg]:
            found.append(f"{src} (layer {layers[src_pkg]}) imports {dst} (layer {layers[dst_pkg]})")
    return found


def test_every_package_is_in_the_table() -> None:
    layers = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    packages = {package_of(m) for m in module_files()}
    assert packages - set(layers) == set(), "add the package to docs/architecture.md's table"
    assert set(layers) - packages == set(), "the table names a package that is gone"


def test_no_arrow_runs_back_up() -> None:
    layers = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert violations(layers, import_graph(module_files())) == []


def test_the_check_sees_a_lazy_arrow_back_up(tmp_path: Path) -> None:
    """Guard against a vacuous check: a function-level import from a lower layer into a higher
    one is found, and so is an import between two packages of one layer."""
    root = tmp_path / "memself"
    for package in ("low", "high", "side"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "low" / "a.py").write_text("def f() -> None:\n    from memself.high import b\n")
    (root / "high" / "b.py").write_text("from memself.low import a\n")
    (root / "side" / "c.py").write_text("from memself.low import a\n")
    table = "## Packages\n\n| layer | package | job |\n|---|---|---|\n"
    table += "| 0 | `__init__.py` | x |\n| 1 | `low/` | x |\n| 1 | `side/` | x |\n| 2 | `high/` | x |\n"
    layers = layer_table(table)
    found = violations(layers, import_graph(module_files(tmp_path)))
    assert "memself.low.a (layer 1) imports memself.high.b (layer 2)" in found
    assert "memself.side.c (layer 1) imports memself.low.a (layer 1)" in found
    assert not [line for line in found if line.startswith("memself.high")]  # down is allowed
