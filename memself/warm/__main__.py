"""``python -m memself.warm serve --data-dir DIR [--idle-minutes M]``: what clients spawn.

``--lock-fd N`` (internal) is the single-instance lock the spawning client took for us.

Not the click CLI: the engine must listen quickly, and importing every command family
(side judge, MCP, installers) would only delay its first ``ping``.
"""

from __future__ import annotations

import os

# One BLAS thread: scoring is memory-bound, and on a 2-core machine shared with the host a second
# thread made scoring a large pool slower, not faster. Set before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # after the environment above: numpy reads it when first imported
import sys
from pathlib import Path

from memself.paths import DataPaths
from memself.warm.serve import serve as serve_engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memself.warm")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the engine in the foreground")
    serve.add_argument("--data-dir", type=Path, default=None)
    serve.add_argument("--idle-minutes", type=float, default=None)
    serve.add_argument("--lock-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = DataPaths(args.data_dir) if args.data_dir else DataPaths.default()
    return serve_engine(paths, args.idle_minutes, lock_fd=args.lock_fd)


if __name__ == "__main__":
    sys.exit(main())
