#!/usr/bin/env bash
# The SHA-256 of one file, hex: sha256sum where it exists (Linux), shasum -a 256 elsewhere
# (macOS ships only that). Bash 3.2 and BSD tools are enough.
set -eu
if command -v sha256sum >/dev/null 2>&1; then
    sum=$(sha256sum "$1")
else
    sum=$(shasum -a 256 "$1")
fi
printf '%s\n' "${sum%% *}"
