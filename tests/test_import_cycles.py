"""Imports go one way: no module of memself imports, even lazily, a module that imports it back.

The graph is read from the source (every ``import`` statement, at module level, inside a
function or under ``TYPE_CHECKING``), so an import circle shows up whether or not the code path
that closes it ever runs in a test.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The hook path, from a host's stdin to the text it injects, and the engine it talks to: no
# circle may touch it.
HOOK_PATH = (
    "memself.hook",
    "memself.hooks.entry",
    "memself.engine",
    "memself.hook.core",
)
# Circles elsewhere that predate this test, each being taken apart on its own; the list may only
# shrink (a new circle anywhere fails, and so does an entry whose circle is gone).
KNOWN_ELSEWHERE: list[set[str]] = []


def module_files(root: Path = REPO_ROOT) -> dict[str, Path]:
    files = {}
    for path in sorted((root / "memself").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the memself modules it imports anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                targets.add(module)
                targets.update(f"{module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def on_hook_path(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in HOOK_PATH)


def test_no_circle_touches_the_hook_path() -> None:
    touching = [sorted(c) for c in circles(import_graph(module_files())) if any(map(on_hook_path, c))]
    assert touching == []


def test_no_new_circle_anywhere() -> None:
    found = circles(import_graph(module_files()))
    assert [sorted(c) for c in found if c not in KNOWN_ELSEWHERE] == []
    assert [sorted(c) for c in KNOWN_ELSEWHERE if c not in found] == []  # taken apart: take it out


def test_the_checker_sees_a_lazy_circle(tmp_path: Path) -> None:
    """Guard against a vacuous check: a circle closed by a function-level import is found."""
    (tmp_path / "memself").mkdir()
    (tmp_path / "memself" / "__init__.py").write_text("")
    (tmp_path / "memself" / "a.py").write_text("from memself import b\n")
    (tmp_path / "memself" / "b.py").write_text("def f():\n    from memself.a import x\n")
    (tmp_path / "memself" / "c.py").write_text("from . import a\n")
    files = module_files(tmp_path)
    assert circles(import_graph(files)) == [{"memself.a", "memself.b"}]
    assert import_graph(files)["memself.c"] == {"memself", "memself.a"}
