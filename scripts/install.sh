#!/usr/bin/env bash
# The one install command: a project venv (.venv) with memself (editable) and its test tools
# (pytest, ruff, mypy: the test extra).
#
#   ./scripts/install.sh
#
# Safe to run again: when nothing changed it checks the venv and returns in a second or two.
# Environment: PYTHON (default python3, must be >= 3.10).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"
TORCH_PIN="torch==2.13.0"
PYTHON=${PYTHON:-python3}

say() { printf '==> %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python >= 3.10 or set PYTHON"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "Python >= 3.10 required, $PYTHON is $("$PYTHON" -V 2>&1)"

# 1. Browser and CJK font for the memories.html screenshot test (Debian; needs root and apt).
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if ! fc-list :lang=zh 2>/dev/null | grep -q .; then need_apt+=(fonts-wqy-microhei); fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "apt-get install ${need_apt[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    else
        say "missing ${need_apt[*]}: install them (e.g. sudo apt-get install ${need_apt[*]})" \
            "or the screenshot test will fail"
    fi
fi

# 2. The venv. Recreated only if it is missing or broken.
if ! "$VPY" -c 'import sys' >/dev/null 2>&1; then
    say "creating .venv with $("$PYTHON" -V 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi

# 3. Packages. A stamp of what was installed makes a second run skip pip entirely.
stamp_file="$VENV/.memself-install-stamp"
stamp="$("$VPY" -V 2>&1) $TORCH_PIN $(sha256sum pyproject.toml | cut -d' ' -f1) $ROOT"
installed_ok() {
    [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] || return 1
    "$VPY" - "$ROOT" <<'PY' >/dev/null 2>&1
import importlib.metadata as md, pathlib, sys
import memself
assert md.version("torch").split("+")[0] == "2.13.0"
assert pathlib.Path(memself.__file__).resolve().is_relative_to(pathlib.Path(sys.argv[1]).resolve())
PY
}
if installed_ok; then
    say "packages up to date (delete $stamp_file to force a reinstall)"
else
    rm -f "$stamp_file"
    say "upgrading pip"
    "$VPY" -m pip install --quiet --upgrade pip
    # torch first and pinned: the CPU wheel lies on these machines; an unpinned requirement
    # (sentence-transformers asks for torch) would pull a multi-GB CUDA build instead.
    say "installing $TORCH_PIN"
    "$VPY" -m pip install --quiet "$TORCH_PIN"
    say "installing memself (editable) with test extras"
    "$VPY" -m pip install --quiet -e ".[test]"
    torch_version=$("$VPY" -c 'import importlib.metadata as m; print(m.version("torch"))')
    case "$torch_version" in
        2.13.0*) ;;
        *) die "torch $torch_version was installed instead of 2.13.0" ;;
    esac
    printf '%s' "$stamp" > "$stamp_file"
fi

"$VENV/bin/memself" --help >/dev/null 2>&1 || say "warning: 'memself --help' failed (is the CLI complete?)"

cat <<MSG

memself is installed in $VENV.
Next:
  ./scripts/test.sh               # ruff, mypy and the test suite (without the e2e group)
  ./scripts/test.sh -m e2e        # end-to-end tests against the real Claude Code / CodeBuddy CLIs (needs npm)
  .venv/bin/memself --help        # the command line (or: source .venv/bin/activate)
MSG
