#!/usr/bin/env bash
# Put a venv's `memself` on the user's PATH as pipx does: a symlink in ~/.local/bin, never over
# someone else's file. Says what it did on stderr; prints on stdout how to call memself from now on
# (`memself`, or the full path when the link is not usable yet). Safe to run again.
#
#   installers/link-memself.sh /path/to/.venv/bin/memself
set -euo pipefail

target=$1
bin_dir="$HOME/.local/bin"
link="$bin_dir/memself"
say() { printf '==> %s\n' "$*" >&2; }

if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
    say "$link 已指向 $target，未改动"
elif [ -e "$link" ] || [ -L "$link" ]; then
    say "$link 已存在，指向别处（$(readlink "$link" 2>/dev/null || echo 不是链接)），没有覆盖；可直接运行 $target"
    echo "$target"
    exit 0
else
    mkdir -p "$bin_dir"
    ln -s "$target" "$link"
    say "已建立链接 $link -> $target"
fi
case ":$PATH:" in
    *":$bin_dir:"*) echo memself ;;
    *)
        say "$bin_dir 不在 PATH 里：在 ~/.bashrc 或 ~/.zshrc 里加一行 export PATH=\"\$HOME/.local/bin:\$PATH\"，新开终端后就能直接用 memself"
        echo "$target"
        ;;
esac
