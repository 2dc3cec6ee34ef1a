"""A round trip on this machine, as a user would make it: setup for Claude Code in a fresh home
whose name has a space and Chinese characters, one prompt through the hook command setup
registered (run by the shell Claude Code would use here, the payload starting with a UTF-8 BOM),
then uninstall, which must leave no hook of ours.

    .venv/bin/python scripts/roundtrip.py            (Windows: .venv\\Scripts\\python.exe)

Run by CI on Linux, macOS and Windows. ``MEMSELF_MODEL_CACHE`` is passed on when set (a prepared
model); otherwise setup prepares one, which needs the model hub or a mirror (``HF_ENDPOINT``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BOM = b"\xef\xbb\xbf"


def memself(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(
        [sys.executable, "-m", "memself", *args], env=env, capture_output=True, timeout=1800
    )
    sys.stdout.write(done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace"))
    if done.returncode != 0:
        raise SystemExit(f"roundtrip: memself {' '.join(args)} exited {done.returncode}")
    return done


def shell_argv(handler: dict[str, object]) -> list[str]:
    """How Claude Code runs a command hook here: its "shell" field, else a POSIX shell."""
    command = str(handler["command"])
    if handler.get("shell") == "powershell":
        return ["powershell", "-NoProfile", "-NonInteractive", "-Command", command]
    if os.name == "nt":
        return ["bash", "-c", command]  # Git Bash
    return ["sh", "-c", command]


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="memself-roundtrip-"))
    home = base / "张 三"
    (home / ".claude").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CURSOR", "CODEBUDDY"))}
    env.update(HOME=str(home), USERPROFILE=str(home), MEMSELF_HOME=str(home / ".memory-self-evolution"))
    env["PYTHONIOENCODING"] = "gbk"  # a Chinese console; what the client reads stays UTF-8
    try:
        memself("setup", "--only", "claude", env=env)
        settings = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
        handler = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]
        payload = {
            "session_id": "roundtrip-session",
            "transcript_path": str(home / "t.jsonl"),
            "cwd": str(home),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "以后回答都用中文，谢谢",
        }
        done = subprocess.run(
            shell_argv(handler),
            input=BOM + json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            capture_output=True,
            env=env,
            cwd=home,
            timeout=60,
        )
        if done.returncode != 0:
            raise SystemExit(f"roundtrip: the hook exited {done.returncode}: {done.stderr!r}")
        if done.stdout.strip():
            answer = json.loads(done.stdout.decode("utf-8"))
            if not isinstance(answer, dict):
                raise SystemExit(f"roundtrip: the hook printed {done.stdout!r}")
        log = (home / ".memory-self-evolution" / "memself.log").read_text(encoding="utf-8")
        runs = [
            json.loads(line.split(" hook-run ", 1)[1]) for line in log.splitlines() if " hook-run " in line
        ]
        if not runs or runs[-1].get("kind") != "prompt_submit" or runs[-1].get("error"):
            raise SystemExit(f"roundtrip: the hook did not run the prompt: {runs[-1:]}")
        memself("uninstall", "--only", "claude", env=env)
        settings_file = home / ".claude" / "settings.json"
        left = settings_file.read_text(encoding="utf-8") if settings_file.exists() else ""
        if "entry.py" in left or "memself" in left:
            raise SystemExit(f"roundtrip: uninstall left a hook of ours: {left}")
        memself("engine", "stop", env=env)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("roundtrip: setup, one prompt through the registered hook, uninstall: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
