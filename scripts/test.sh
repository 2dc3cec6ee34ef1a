#!/usr/bin/env bash
# The one test command: the Python test extra into .venv, then ruff (lint and format), mypy, then pytest.
#
#   ./scripts/test.sh              # the everyday suite: everything but the full and e2e groups
#   ./scripts/test.sh --all        # everything except the e2e group (then the full group, serially)
#   ./scripts/test.sh -m e2e       # only the end-to-end group (real npm clients)
#   ./scripts/test.sh tests/test_snapshot.py -k chromium
#   MEMSELF_TEST_WORKERS=0 ./scripts/test.sh    # serially, in this process (no pytest-xdist workers)
#
# Other arguments go to pytest. The tests run in parallel worker processes (pytest-xdist), two per
# core, at most eight; the e2e group runs serially (it installs the real clients once per session
# and reports their timings at the end). It installs only the test extra (pytest, pytest-xdist,
# ruff, mypy, build, zizmor, and the torch extra after the CPU torch pinned as install.sh pins it)
# into .venv, on top of ./installers/install.sh, and nothing else: no
# system packages, nothing from npm. A test that needs a program from outside (Chromium and a CJK
# font for the memories.html screenshot test, actionlint for the workflow test) uses it when the
# machine has it, and is otherwise skipped, its reason (with how to install) in the summary;
# with CI=true it fails instead (.ci/run installs those programs).
set -uo pipefail

cd "$(dirname "$0")/.."
[ -x .venv/bin/memself ] || { echo "test.sh: no .venv; run ./installers/install.sh first" >&2; exit 1; }

# 1. The test extra, once per pyproject change (a stamp, as install.sh keeps).
stamp_file=.venv/.memself-test-stamp
stamp="$(installers/sha256.sh pyproject.toml)"
if [ ! -x .venv/bin/pytest ] || [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ]; then
    # The test extra takes the torch extra (tests compare preparation with sentence-transformers):
    # torch goes first, pinned as install.sh pins it, or sentence-transformers would pull a CUDA build.
    torch_pin=""
    while IFS= read -r line; do
        case "$line" in TORCH_PIN=*) torch_pin=${line#TORCH_PIN=}; torch_pin=${torch_pin//\"/} ;; esac
    done < installers/install.sh
    [ -n "$torch_pin" ] || { echo "test.sh: no TORCH_PIN in installers/install.sh" >&2; exit 1; }
    echo "test.sh: installing $torch_pin (CPU) and the test extra (pytest, pytest-xdist, ruff, mypy, build)"
    .venv/bin/python -m pip install --quiet "$torch_pin" || exit 1
    .venv/bin/python -m pip install --quiet -e ".[offline,test]" || exit 1
    printf '%s' "$stamp" > "$stamp_file"
fi

# 2. Lint and types, then the tests.
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
    echo "test.sh: no mypy in .venv (the test extra did not install; the run will fail after the tests)" >&2
    types=1
fi

args=()
all=0
e2e=0
previous=""
for arg in "$@"; do
    # --all: the everyday run, then the full group (below).
    if [ "$arg" = "--all" ]; then all=1; else args+=("$arg"); fi
    # A marker expression that selects the e2e group (not one that excludes it).
    if [ "$previous" = "-m" ] && [[ "$arg" == *e2e* ]] && [[ "$arg" != *"not e2e"* ]]; then e2e=1; fi
    previous="$arg"
done
# -rs: each skipped test's reason in the summary (what is missing and how to install it).
extra=(-rs)
# In CI, show the slowest tests so each group's time stays visible.
[ "${CI:-}" = "true" ] && extra+=(--durations=15)
# Workers: most tests wait on child processes (hooks, engines, the CLI), so two per core keep the
# cores busy; each worker loads the model once, so at most eight. worksteal hands each worker a run
# of neighbouring tests (a file's module fixtures are mostly built once) and lets an idle worker
# take tests queued on a busy one, so a few long tests do not leave the others waiting at the end.
# Arguments given after these (-n 0) still win.
workers="${MEMSELF_TEST_WORKERS:-}"
if [ -z "$workers" ]; then
    cores="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
    workers=$((cores * 2))
    [ "$workers" -gt 8 ] && workers=8
fi
[ "$e2e" = 1 ] && workers=0
parallel=()
[ "$workers" -gt 0 ] && parallel+=(-n "$workers" --dist worksteal)
# ${a[@]+"${a[@]}"}: an empty array under set -u is an error before bash 4.4 (macOS has 3.2).
.venv/bin/pytest -q ${extra[@]+"${extra[@]}"} ${parallel[@]+"${parallel[@]}"} ${args[@]+"${args[@]}"}
tests=$?
if [ "$all" = 1 ]; then
    # The full group serially: its kill loops and real lock timings want the cores to themselves.
    # A later -m wins over the addopts' marker expression.
    .venv/bin/pytest -q ${extra[@]+"${extra[@]}"} ${args[@]+"${args[@]}"} -m "full and not e2e"
    full=$?
    # Exit 5 (nothing selected) only when neither run selected anything.
    if [ $tests -eq 5 ] && [ $full -eq 5 ]; then tests=5
    elif [ $tests -eq 5 ]; then tests=$full
    elif [ $full -ne 5 ] && [ $full -ne 0 ]; then tests=$full
    fi
fi

if [ $tests -eq 5 ]; then
    echo "test.sh: pytest selected no tests (exit 5); that counts as a failure" >&2
fi
[ $lint -eq 0 ] && [ $types -eq 0 ] && [ $tests -eq 0 ]
