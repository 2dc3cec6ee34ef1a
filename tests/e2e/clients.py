"""Install the pinned real clients once, and run them against the fake API in a temp home."""

from __future__ import annotations

import fcntl
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "npm-clients"
DRIVER = Path(__file__).with_name("driver.py")
HARNESS = REPO / "tests" / "support" / "hook_harness.py"
CLAUDE_PKG, CLAUDE_VERSION = "@anthropic-ai/claude-code", "2.1.332"
SDK_PKG, SDK_VERSION = "@tencent-ai/agent-sdk", "0.3.201"
TIMINGS: dict[str, float] = {}  # reported at the end of the session (conftest)


@dataclass(frozen=True)
class Clients:
    claude: list[str]  # argv prefix
    codebuddy: list[str]


@dataclass
class ClientRun:
    rc: int | None
    stdout: str
    stderr: str
    elapsed_s: float
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """Requests that asked the model for an answer (not token counts, model lists...)."""
        return [
            r
            for r in self.requests
            if r["method"] == "POST"
            and (r["path"].split("?")[0].endswith(("/v1/messages", "/chat/completions")))
        ]

    def bodies_containing(self, needle: str) -> list[dict[str, Any]]:
        return [r for r in self.model_requests if needle in json.dumps(r["body"], ensure_ascii=False)]


def _installed_version(package: str) -> str:
    try:
        manifest = CACHE / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text(encoding="utf-8")).get("version", ""))
    except (OSError, ValueError):
        return ""


@contextmanager
def _install_lock() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / "npm-clients.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_clients() -> Clients:
    """npm-install the pinned clients into ``.cache/npm-clients`` unless already there."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        raise RuntimeError("e2e tests need node and npm on PATH")
    with _install_lock():
        wanted = {CLAUDE_PKG: CLAUDE_VERSION, SDK_PKG: SDK_VERSION}
        missing = [f"{pkg}@{ver}" for pkg, ver in wanted.items() if _installed_version(pkg) != ver]
        if missing:
            started = time.monotonic()
            subprocess.run(
                [
                    npm,
                    "install",
                    "--prefix",
                    str(CACHE),
                    "--no-audit",
                    "--no-fund",
                    "--save-exact",
                    "--loglevel=error",
                    *missing,
                ],
                check=True,
                timeout=900,
            )
            TIMINGS["npm install " + " ".join(missing)] = time.monotonic() - started
        else:
            TIMINGS["npm install (cache reused)"] = 0.0
    modules = CACHE / "node_modules"
    claude = modules / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"
    if not claude.is_file():  # installed with --ignore-scripts: run the platform package directly
        claude = modules / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    headless = modules / "@tencent-ai" / "agent-sdk" / "cli" / "dist" / "codebuddy-headless.js"
    return Clients(claude=[str(claude)], codebuddy=[node, str(headless)])


def netns_prefix() -> list[str]:
    """``unshare -n`` (root) or ``unshare -rn`` (user namespaces), whichever works here."""
    unshare = shutil.which("unshare")
    if not unshare:
        return []
    for flags in (["-n"], ["-rn"]):
        probe = subprocess.run([unshare, *flags, "true"], capture_output=True)
        if probe.returncode == 0:
            return [unshare, *flags]
    return []


def hook_command_line(host: str, replies: Path | None = None) -> str:
    """Our real hook command, or the scripted harness (same bootstrap) when ``replies`` is set."""
    from memself.hook.command import hook_command

    argv = hook_command(host)
    if replies is not None:
        argv = [argv[0], "-I", "-S", str(HARNESS), "--agent", host, "--replies", str(replies)]
    return shlex.join(argv)


def registered_hook_lines(host: str) -> dict[str, str]:
    """Event name -> the command line installers register for it (timeout included)."""
    from memself.hook.command import hook_command_line as registered_line
    from memself.hosts import HOSTS

    adapter = HOSTS[host]
    return {name: registered_line(host, kind) for kind, name in adapter.EVENT_NAMES.items()}


def write_claude_style_hooks(
    settings: Path, command: str | Mapping[str, str], timeouts: dict[str, int]
) -> None:
    """Register ``command`` (one for all, or one per event) for each event in a Claude-shaped
    settings file."""
    settings.parent.mkdir(parents=True, exist_ok=True)

    def handler(event: str, timeout: int) -> dict[str, Any]:
        line = command if isinstance(command, str) else command[event]
        return {"type": "command", "command": line, "timeout": timeout}

    hooks = {
        event: [{"matcher": "", "hooks": [handler(event, timeout)]}] for event, timeout in timeouts.items()
    }
    settings.write_text(json.dumps({"hooks": hooks}, indent=2), encoding="utf-8")


def _base_env(home: Path, memself_home: Path) -> dict[str, str]:
    node_dir = str(Path(shutil.which("node") or "/usr/bin/node").parent)
    return {
        "PATH": f"{node_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "MEMSELF_HOME": str(memself_home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(home / "tmp"),
        # No Stop-side check of answers unless a test asks for one: it would send the fake judge
        # requests that tests counting the judge's requests do not expect.
        "MEMSELF_KEPT": "0",
    }


def _drive(spec: dict[str, Any], label: str) -> ClientRun:
    with tempfile.TemporaryDirectory(prefix="memself-e2e-") as tmp:
        spec_path, result_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        prefix = netns_prefix()
        spec["netns"] = bool(prefix)
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        started = time.monotonic()
        subprocess.run(
            [*prefix, sys.executable, "-I", str(DRIVER), str(spec_path), str(result_path)],
            check=True,
            timeout=spec.get("timeout", 120) + 30,
        )
        TIMINGS[label] = TIMINGS.get(label, 0.0) + time.monotonic() - started
        data = json.loads(result_path.read_text(encoding="utf-8"))
    return ClientRun(
        rc=data["rc"],
        stdout=data["stdout"],
        stderr=data["stderr"],
        elapsed_s=data["elapsed_s"],
        requests=data["requests"],
    )


def run_claude(
    clients: Clients,
    home: Path,
    prompt: str,
    *,
    cwd: Path,
    memself_home: Path,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 120,
    files: Mapping[str, str] | None = None,
    rules: Sequence[Mapping[str, Any]] = (),
) -> ClientRun:
    """``claude -p PROMPT --output-format json`` in ``home`` against the fake Anthropic API.

    ``files`` are written first (``{base}`` becomes the fake API's address); ``rules`` script
    the fake API's replies (``fakeapi.match_rule``)."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = (
        _base_env(home, memself_home)
        | {
            "ANTHROPIC_BASE_URL": "{base}",
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        | dict(extra_env or {})
    )
    spec = {
        "argv": [*clients.claude, "-p", prompt, "--output-format", "json", *extra_args],
        "env": env,
        "cwd": str(cwd),
        "mode": "plain",
        "timeout": timeout,
        "files": dict(files or {}),
        "rules": [dict(r) for r in rules],
    }
    return _drive(spec, "claude runs")


def run_claude_turns(
    clients: Clients,
    home: Path,
    prompts: Sequence[str],
    *,
    cwd: Path,
    memself_home: Path,
    idle_s: float = 3.0,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 120,
    files: Mapping[str, str] | None = None,
    rules: Sequence[Mapping[str, Any]] = (),
) -> ClientRun:
    """One ``claude -p`` session in stream-json mode: each prompt is sent once the session has
    been idle for ``idle_s`` after the previous one's result, so what a turn's Stop left behind
    (a detached check) has finished before the next prompt, against the same fake API."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = (
        _base_env(home, memself_home)
        | {
            "ANTHROPIC_BASE_URL": "{base}",
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        | dict(extra_env or {})
    )
    messages = [
        json.dumps({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": p}]}})
        + "\n"
        for p in prompts
    ]
    spec = {
        "argv": [
            *clients.claude,
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ],
        "env": env,
        "cwd": str(cwd),
        "mode": "stream-json",
        "stdin": messages[0],
        "followups": messages[1:],
        "idle_s": idle_s,
        "timeout": timeout,
        "files": dict(files or {}),
        "rules": [dict(r) for r in rules],
    }
    return _drive(spec, "claude runs")


def codebuddy_product_config() -> str:
    off = {"enabled": False}
    return json.dumps(
        {
            "endpoint": "{base}",
            "stagingEndpoint": "{base}",
            "officialEndpoints": ["{base}"],
            "telemetry": {"report": {"standard": off, "model": off}, "tracing": off},
            "builtInMarketplaces": {},
        }
    )


def run_codebuddy(
    clients: Clients,
    home: Path,
    prompt: str,
    *,
    cwd: Path,
    memself_home: Path,
    stream_json: bool = True,
    idle_s: float = 3.0,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> ClientRun:
    """CodeBuddy Code headless against the fake OpenAI API. ``stream_json`` keeps stdin open
    until the session is idle, the only mode in which a Stop continuation runs."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    product = home / ".fake-product.json"
    env = (
        _base_env(home, memself_home)
        | {
            "CODEBUDDY_BASE_URL": "{base}/v1",
            "CODEBUDDY_API_KEY": "sk-fake",
            "CODEBUDDY_SKIP_BUILTIN_MARKETPLACE": "1",
            "CODEBUDDY_SANDBOX_CLOUD_AUDIT_DISABLED": "1",
            "ACC_PRODUCT_CONFIG_PATH": str(product),
        }
        | dict(extra_env or {})
    )
    files = {str(product): codebuddy_product_config()}
    if stream_json:
        message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}}
        spec = {
            "argv": [
                *clients.codebuddy,
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                *extra_args,
            ],
            "stdin": json.dumps(message) + "\n",
            "mode": "stream-json",
            "idle_s": idle_s,
        }
    else:
        spec = {
            "argv": [*clients.codebuddy, "-p", prompt, "--output-format", "json", *extra_args],
            "mode": "plain",
        }
    spec |= {"env": env, "cwd": str(cwd), "files": files, "timeout": timeout}
    return _drive(spec, "codebuddy runs")
