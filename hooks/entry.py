"""The hook entry's old place: hook commands registered before it moved still run this file.

``memself setup`` used to register ``<python> -I -S <repo>/hooks/entry.py --agent HOST``; the entry
is now ``<repo>/memself/hooks/entry.py``. Hosts keep running the old command until ``memself setup``
rewrites it (the installers take both paths for memself's own and replace the old one), so this
file runs the new entry with the same arguments. Like the entry: standard library only, and exit 0
whatever happens (a non-zero exit is an error, or "block this prompt", to the host).
"""

import os
import runpy
import sys

if __name__ == "__main__":
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        # The entry ends the process itself (os._exit) once its work is done.
        runpy.run_path(os.path.join(repo, "memself", "hooks", "entry.py"), run_name="__main__")
    except BaseException as exc:  # the host must never see a failure
        try:
            sys.stderr.write(f"memself hook: {type(exc).__name__}\n")
            sys.stderr.flush()
        except Exception:
            pass
    os._exit(0)
