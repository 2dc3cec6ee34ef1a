"""The registered hook command in each client's shell: a home of 张 三 with spaces, a payload that
starts with a UTF-8 BOM and a GBK console; the answer the client reads is UTF-8 JSON.

POSIX forms run through real ``bash -c`` and ``sh -c``. Windows forms cannot run here: the Git
Bash form is parsed by bash itself, the PowerShell form checked as text against PowerShell's
documented quoting rules (about_Quoting_Rules: in a single-quoted string nothing is expanded and
a single quote is written twice; about_Operators: ``&`` calls what a quoted path names).
"""

from __future__ import annotations

import json
import ntpath
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memself.hook import command
from memself.hook.command import command_line, git_bash_path, powershell_command, powershell_quote
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0
from tests.support.hookproc import hook_data, hook_runs, load_payloads

__all__ = ["hook_data"]

REPO_ROOT = Path(__file__).resolve().parent.parent
BOM = b"\xef\xbb\xbf"
RULE = "回答一律用中文，术语保留英文"
GBK_CONSOLE = {"PYTHONIOENCODING": "gbk", "LANG": "zh_CN.GBK", "LC_ALL": "zh_CN.GBK"}
CLAUDE = load_payloads("claude-code-2.1.332.json")
CODEBUDDY = load_payloads("codebuddy-code-2.117.0.json")
CURSOR = load_payloads("cursor-documented.json")
SESSION_START = {
    "claude": CLAUDE["SessionStart"],
    "codebuddy": CODEBUDDY["SessionStart"],
    "workbuddy": CODEBUDDY["SessionStart"],
    "cursor": CURSOR["sessionStart"],
}
WINDOWS_PYTHON = r"C:\Users\张 三\AppData\Local\Programs\Python\Python312\python.exe"
WINDOWS_ENTRY = r"C:\Users\张 三\AppData\Roaming\Python\site-packages\memself\_shipped\hooks\entry.py"


@pytest.fixture
def spaced_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The interpreter and the package as a user whose home is ``…/张 三`` has them installed:
    the registered command names these paths (links to this checkout's)."""
    home = tmp_path / "张 三"
    site = home / "Program Files" / "mem self"
    site.mkdir(parents=True)
    (site / "memself").symlink_to(REPO_ROOT / "memself", target_is_directory=True)
    (site / "hooks").symlink_to(REPO_ROOT / "hooks", target_is_directory=True)
    (home / "venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    monkeypatch.setattr(sys, "executable", str(home / "venv" / "bin" / "python"))
    monkeypatch.setattr(command, "ENTRY", site / "hooks" / "entry.py")
    return home


def _run_in_shell(shell: str, line: str, payload: bytes, home: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **GBK_CONSOLE, "HOME": str(home)}
    return subprocess.run(
        [shell, "-c", line], input=payload, capture_output=True, timeout=60, env=env, cwd=home
    )


@pytest.mark.parametrize("shell", ["bash", "sh"])
@pytest.mark.parametrize("host", list(HOSTS))
def test_session_start_through_the_registered_command(
    host: str, shell: str, spaced_install: Path, hook_data: DataPaths
) -> None:
    MemoryStore(hook_data).add(RULE, "rule", T0)
    line = command.hook_command_line(host, EventKind.SESSION_START, system="linux")
    assert line.startswith(f"'{spaced_install}/") and line.count("张 三") == 2  # quoted, not bare
    payload = BOM + json.dumps(SESSION_START[host], ensure_ascii=False).encode("utf-8")
    done = _run_in_shell(shell, line, payload, spaced_install)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("utf-8")  # UTF-8 whatever the console's code page
    assert RULE in text, text
    assert text.endswith("\n") and isinstance(json.loads(text), dict)
    runs = hook_runs(hook_data)
    # Parsed (the BOM did not hide the event), run here (no engine yet), no error.
    assert runs[-1]["kind"] == "session_start" and "error" not in runs[-1], json.dumps(runs[-1])


def test_a_prompt_through_the_registered_command(spaced_install: Path, hook_data: DataPaths) -> None:
    line = command.hook_command_line("claude", EventKind.PROMPT_SUBMIT, system="linux")
    prompt = dict(CLAUDE["UserPromptSubmit"], prompt="以后回答都用中文，谢谢")
    payload = BOM + json.dumps(prompt, ensure_ascii=False).encode("utf-8")
    done = _run_in_shell("bash", line, payload, spaced_install)
    assert done.returncode == 0, done.stderr
    if done.stdout:
        assert isinstance(json.loads(done.stdout.decode("utf-8")), dict)
    runs = hook_runs(hook_data)
    assert runs[-1]["kind"] == "prompt_submit" and runs[-1]["hook_event"] == "UserPromptSubmit", runs


# -- Windows forms, as text ----------------------------------------------------------------------


def _windows_argv(host: str, kind: EventKind) -> list[str]:
    posix = command.hook_command(host, kind)
    return [WINDOWS_PYTHON, posix[1], posix[2], WINDOWS_ENTRY, *posix[4:]]


def _bash_words(line: str) -> list[str]:
    """The words real bash makes of ``line``."""
    done = subprocess.run(
        ["bash", "-c", 'words() { printf "%s\\0" "$@"; }; words ' + line],
        capture_output=True,
        timeout=30,
        check=True,
    )
    return done.stdout.decode("utf-8").split("\0")[:-1]


def test_git_bash_paths_follow_windows_path_rules() -> None:
    assert git_bash_path(WINDOWS_PYTHON) == WINDOWS_PYTHON.replace("\\", "/")
    assert git_bash_path("C:/already/forward") == "C:/already/forward"
    for not_a_drive_path in ("--agent", "{}", "relative\\dir", r"\\server\share\x.py", "C:relative"):
        assert git_bash_path(not_a_drive_path) == not_a_drive_path
    converted = git_bash_path(WINDOWS_ENTRY)
    # Windows reads the converted path as the same file.
    assert ntpath.normcase(ntpath.normpath(converted)) == ntpath.normcase(WINDOWS_ENTRY)
    assert ntpath.basename(converted) == "entry.py" and ntpath.isabs(converted)


@pytest.mark.parametrize("host", [h for h in HOSTS if HOSTS[h].HOOK_SHELLS["windows"] == "bash"])
def test_the_git_bash_form_is_the_argv(host: str) -> None:
    for kind in HOSTS[host].TIMEOUTS:
        argv = _windows_argv(host, kind)
        line = command_line(argv, "bash")
        assert "\\" not in line
        assert _bash_words(line) == [git_bash_path(arg) for arg in argv]
        assert command.hook_command_agent(line) == host


def _powershell_words(line: str) -> list[str]:
    """Arguments of a PowerShell command line of bare words and single-quoted strings, read by
    the documented rules: inside '...' nothing is special but '' (one quote)."""
    words = []
    for match in re.finditer(r"'((?:[^']|'')*)'|(\S+)", line):
        quoted, bare = match.groups()
        words.append(quoted.replace("''", "'") if quoted is not None else bare)
    return words


@pytest.mark.parametrize(
    "host", [h for h in HOSTS if HOSTS[h].HOOK_SHELLS["windows"].startswith("powershell")]
)
def test_the_powershell_form_is_the_argv(host: str) -> None:
    shell = HOSTS[host].HOOK_SHELLS["windows"]
    for kind in HOSTS[host].TIMEOUTS:
        argv = _windows_argv(host, kind)
        line = command.command_line(argv, shell)
        head = (
            "& { $OutputEncoding = [Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false);"
            " $input | & "
        )
        prefix = head if shell == "powershell-stage" else "$input | " + head
        assert line.startswith(prefix) and line.endswith(" }"), line
        call = line[len(prefix) : -2]
        assert call.startswith(f"'{WINDOWS_PYTHON}' ")  # the call operator before a quoted path
        assert _powershell_words(call) == argv
        assert command.hook_command_agent(line) == host
        # Nothing PowerShell would expand is left outside single quotes.
        outside = re.sub(r"'(?:[^']|'')*'", "", call)
        assert not re.search(r"[$`@{}();,|&<>\"#]", outside), outside


def test_powershell_quoting_rules() -> None:
    assert powershell_quote("--agent") == "--agent" and powershell_quote("-I") == "-I"
    assert powershell_quote("{}") == "'{}'"  # a script block if bare
    assert powershell_quote("C:\\Users\\O'Brien\\x.py") == "'C:\\Users\\O''Brien\\x.py'"
    assert powershell_quote("a\u2019b") == "'a\u2019\u2019b'"  # PowerShell takes typographic quotes too
    assert powershell_quote("$env:USERPROFILE") == "'$env:USERPROFILE'"
    assert powershell_quote("a`b") == "'a`b'"
    with pytest.raises(ValueError):
        powershell_command(["C:\\x.exe", '{"a":1}'])  # Windows PowerShell would drop the quotes


def test_claude_on_windows_names_its_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code runs hooks through Git Bash, or PowerShell where Git Bash is missing: the
    entry says "shell": "powershell", which every Windows has."""
    from memself.install import entries
    from memself.install.jsonhost import _shell_field
    from memself.platform import system

    monkeypatch.setattr(system, "_REAL_WINDOWS", True)
    assert _shell_field(HOSTS["claude"]) == "powershell"
    assert _shell_field(HOSTS["codebuddy"]) is None and _shell_field(HOSTS["cursor"]) is None
    assert entries.claude_handler("x", 10, "powershell") == {
        "type": "command",
        "command": "x",
        "timeout": 10,
        "shell": "powershell",
    }
    monkeypatch.setattr(system, "_REAL_WINDOWS", False)
    assert _shell_field(HOSTS["claude"]) is None  # elsewhere the entry stays as it was


@pytest.mark.parametrize("host", list(HOSTS))
def test_config_folders_per_system(host: str) -> None:
    adapter = HOSTS[host]
    assert set(adapter.HOOK_SHELLS) == {"linux", "macos", "windows"}
    assert adapter.HOOK_SHELLS["linux"] == adapter.HOOK_SHELLS["macos"] == "sh"
    windows_home = r"C:\Users\张 三"
    folder = ntpath.join(windows_home, adapter.CONFIG_DIR)
    assert ntpath.dirname(folder) == windows_home and ntpath.basename(folder).startswith(".")
    assert shlex.split(shlex.quote(folder)) == [folder]
