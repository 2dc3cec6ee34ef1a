"""The hook entry's old place: hook commands registered before it moved still run this file.

``memself setup`` used to register ``<python> -I -S <root>/memself/hooks/entry.py --agent HOST``;
the entry now ships as ``hooks/entry.py`` (a wheel carries it as ``memself/_shipped/hooks``). Hosts
keep running the old command until ``memself setup`` rewrites it (the installers recognise both
paths as memself's and replace the old one), so this file runs the entry with the same arguments.
Like the entry: standard library only, and exit 0 whatever happens (a non-zero exit is an error,
or "block this prompt", to the host).
"""

import os
import runpy
import sys

if __name__ == "__main__":
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    entry = os.path.join(package, "_shipped", "hooks", "entry.py")
    if not os.path.isfile(entry):
        entry = os.path.join(os.path.dirname(package), "hooks", "entry.py")
    try:
        # The entry ends the process itself (os._exit) once its work is done.
        runpy.run_path(entry, run_name="__main__")
    except BaseException as exc:  # the host must never see a failure
        try:
            sys.stderr.write(f"memself hook: {type(exc).__name__}\n")
            sys.stderr.flush()
        except Exception:
            pass
    os._exit(0)
