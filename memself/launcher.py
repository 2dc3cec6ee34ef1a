"""How memself starts a Python process of its own: ``<python> -I <root>/memself/launcher.py MODULE
ARGS...``, which runs ``MODULE`` as ``python -m MODULE ARGS...`` would.

The working directory of such a process is usually the repository the user opened, and the
environment is the client's. ``python -m`` puts the working directory first on ``sys.path`` and
honours ``PYTHONPATH``, so a repository holding ``memself/``, ``mcp/`` or ``httpx/`` would run its
own code in a process that can read the key. Isolated mode (``-I``) drops both, and the user's
site-packages and every ``PYTHON*`` variable with them; the interpreter's own site-packages (the
installed dependencies, a wheel install of memself) are still read. This file then puts
``<root>``, the directory holding this memself package, first on ``sys.path``: the child imports
exactly the code its parent runs, installed as a wheel, editable (a source tree), or not at all.

Run as a script it uses the standard library only; imported, it builds the argv.
"""

import os
import sys

# <root>/memself/launcher.py: the directory above the package.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, "memself", "launcher.py")


def python_command(module: str, *args: str) -> list[str]:
    """The argv that runs ``module`` in an isolated interpreter: absolute, no shell, no PATH."""
    return [os.path.abspath(sys.executable), "-I", LAUNCHER, module, *args]


def _run() -> None:
    import runpy

    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -I launcher.py MODULE [ARGS...]\n")
        raise SystemExit(2)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    module = sys.argv[1]
    del sys.argv[1]  # the module sees argv as under ``python -m``; run_module sets argv[0]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _run()
