"""Two checkouts side by side: each one's interpreter and memself command, for the benches that
compare them (``bench_engine_start``, ``bench_hooks_side_by_side``, ``bench_kill_loops``).
Standard library only: ``bench_kill_loops`` imports it under either checkout's interpreter."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def python_of(root: Path) -> str:
    """The checkout's own interpreter (its ``.venv``)."""
    python = root / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{root}: no .venv (run ./installers/install.sh there)")
    return str(python)


def cli(root: Path, env: dict, *args: str) -> None:
    """``memself ARGS`` as the checkout runs it; a failure ends the bench."""
    subprocess.run(
        [python_of(root), "-m", "memself", *args], cwd=root, env=env, capture_output=True, check=True
    )


def stop_engines(roots: Mapping[str, Path], envs: Mapping[str, dict]) -> None:
    """Stop each checkout's engine, whatever state the bench left it in."""
    for name, root in roots.items():
        subprocess.run(
            [python_of(root), "-m", "memself", "engine", "stop"],
            cwd=root,
            env=envs[name],
            capture_output=True,
            check=False,
        )
