#!/usr/bin/env bash
# The one test command: ruff (lint and format), mypy, then pytest. Arguments go to pytest.
#
#   ./scripts/test.sh              # everything except the e2e group (pyproject addopts)
#   ./scripts/test.sh -m e2e       # only the end-to-end group (real npm clients)
#   ./scripts/test.sh tests/test_snapshot.py -k chromium
set -uo pipefail

cd "$(dirname "$0")/.."
[ -x .venv/bin/pytest ] || { echo "test.sh: no .venv; run ./scripts/install.sh first" >&2; exit 1; }

.venv/bin/ruff check .
lint=$?
.venv/bin/ruff format --check --quiet . || { echo "test.sh: ruff format would change files (run .venv/bin/ruff format .)" >&2; lint=1; }
# Said before pytest runs, so pytest's summary stays the last line of the output.
[ $lint -ne 0 ] && echo "test.sh: ruff check failed (the run will fail after the tests)" >&2

# Types: pyproject's [tool.mypy] says what is checked and how strictly; .mypy_cache keeps reruns short.
if [ -x .venv/bin/mypy ]; then
    .venv/bin/mypy
    types=$?
    [ $types -ne 0 ] && echo "test.sh: mypy found type errors (the run will fail after the tests)" >&2
else
    echo "test.sh: no mypy in .venv; run ./scripts/install.sh (the run will fail after the tests)" >&2
    types=1
fi

extra=()
# In CI, show the slowest tests so the default run's time stays visible.
[ "${CI:-}" = "true" ] && extra+=(--durations=15)
.venv/bin/pytest -q "${extra[@]}" "$@"
tests=$?

if [ $tests -eq 5 ]; then
    echo "test.sh: pytest selected no tests (exit 5); that counts as a failure" >&2
fi
[ $lint -eq 0 ] && [ $types -eq 0 ] && [ $tests -eq 0 ]
