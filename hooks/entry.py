"""What a host executes on a hook event: ``<python> -I -S <this file> --agent HOST --event KIND
--timeout SECONDS [--empty-reply JSON]``, one command per event (``memself.hook.command``).

``-I -S`` keeps start-up short (no site-packages scan, no .pth files, no user environment), so
this file finds the memself package itself: it is ``<root>/hooks/entry.py`` in a source tree (an
editable install, whose .pth file ``-S`` skips) or ``<root>/memself/_shipped/hooks/entry.py`` in a
wheel, with ``<root>`` the directory holding the ``memself`` package, which goes first on
``sys.path``.

Standard library only. Whatever happens, the process exits 0: a non-zero exit is an error or,
worse, "block this prompt" (exit 2) to the host; and it ends before the host's timeout
(``memself.hook.deadline``), with the host's "no answer" output if need be.
"""

import os
import sys


def _package_root() -> str:
    """The nearest folder above this file that holds the memself package (a source tree's root,
    or the site-packages directory a wheel was installed into)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(4):
        here = os.path.dirname(here)
        if os.path.isfile(os.path.join(here, "memself", "__init__.py")):
            return here
    raise ModuleNotFoundError("memself")


def _bootstrap() -> None:
    root = _package_root()
    if root not in sys.path:
        sys.path.insert(0, root)


def _run() -> int:
    try:
        _bootstrap()
        from memself.hook.deadline import arm
        from memself.hook.inputs import agent_arg

        # First of all, the hard deadline (from the timeout the command line carries), counted
        # from this process's start: nothing after this can outlast the host's timeout.
        arm(agent_arg(sys.argv[1:]), sys.argv[1:])
        from memself.hook.process import main

        # The warm engine answers through the fast path; without one the hook runs here.
        main(sys.argv[1:])
    except BaseException as exc:  # the host must never see a failure
        try:
            sys.stderr.write(f"memself hook: {type(exc).__name__}\n")
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    code = _run()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # os._exit skips interpreter teardown (a few ms) and any flush error at exit.
    os._exit(code)
