"""The git working copy that carries the memories: every git command memself sync runs.

Only plumbing that never merges text: blobs, trees and commits are made from the canonical
files (``memself.sync.canonical``), so git never sees a conflict and never leaves a conflicted
file. A SIGKILL can leave git's own ``*.lock`` files behind; they are cleared before each sync,
under the sync lock, when no other git command of ours can be running.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from memself.errors import MemselfError
from memself.platform import children

BRANCH = "main"
REMOTE_REF = f"refs/remotes/origin/{BRANCH}"
BASE_REF = "refs/memself/base"
# The three files that travel; nothing else is ever written into a tree.
FILES = ("rule.jsonl", "project.jsonl", "trash.jsonl")
_NETWORK_TIMEOUT_S = 60
_LOCAL_TIMEOUT_S = 30


class SyncUnreachable(MemselfError):
    """The remote could not be reached or refused us; local memories are untouched."""


class GitFailed(MemselfError):
    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


class PushRejected(MemselfError):
    """The remote moved on since our fetch (non-fast-forward)."""


# Variables that would point git at another repository than ours (a hook of the user's own
# repository runs with them set): dropped, so every command works on the sync copy only.
_REPOSITORY_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)


def clean_env() -> dict[str, str]:
    """The environment without the variables that would point git at another repository."""
    return {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARS}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARS}
    # Never wait for a password or a host-key question: an unattended sync fails instead.
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_SSH_COMMAND": env.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
            "LC_ALL": "C",
        }
    )
    return env


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, *args: str, stdin: bytes | None = None, timeout: float = _LOCAL_TIMEOUT_S) -> bytes:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self.path,
                input=stdin,
                capture_output=True,
                env=_env(),
                timeout=timeout,
                check=False,
                **children.piped(),
            )
        except FileNotFoundError as exc:
            raise MemselfError("找不到 git 命令：同步需要先安装 git") from exc
        except subprocess.TimeoutExpired as exc:
            raise SyncUnreachable(f"git {args[0]} 超时") from exc
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace")
            raise GitFailed(_summary(stderr) or f"git {args[0]} 失败（退出码 {done.returncode}）", stderr)
        return done.stdout

    def exists(self) -> bool:
        return (self.path / ".git").is_dir()

    def init(self, url: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if not self.exists():
            self.run("init", "-q")
        self.run("symbolic-ref", "HEAD", f"refs/heads/{BRANCH}")
        for key, value in (
            ("user.name", "memself"),
            ("user.email", "memself@localhost"),
            ("commit.gpgsign", "false"),
            ("gc.auto", "0"),
        ):
            self.run("config", key, value)
        if self.remote_url() is None:
            self.run("remote", "add", "origin", url)
        else:
            self.run("remote", "set-url", "origin", url)

    def remote_url(self) -> str | None:
        try:
            return self.run("config", "--get", "remote.origin.url").decode().strip() or None
        except MemselfError:
            return None

    def clear_stale_locks(self) -> int:
        """git's own lock files a killed git left (we hold the sync lock: none is live)."""
        removed = 0
        git_dir = self.path / ".git"
        for folder, _dirs, names in os.walk(git_dir):
            if Path(folder).name == "objects" or "/objects/" in folder.replace(os.sep, "/") + "/":
                continue
            for name in names:
                if name.endswith(".lock"):
                    try:
                        os.unlink(os.path.join(folder, name))
                        removed += 1
                    except OSError:
                        pass
        return removed

    def fetch(self) -> None:
        try:
            self.run(
                "fetch",
                "-q",
                "--no-tags",
                "origin",
                f"+refs/heads/{BRANCH}:{REMOTE_REF}",
                timeout=_NETWORK_TIMEOUT_S,
            )
        except SyncUnreachable:
            raise
        except GitFailed as exc:
            text = exc.stderr
            if "couldn't find remote ref" in text.lower():
                # An empty repository: nothing to fetch yet.
                self._drop(REMOTE_REF)
                return
            raise SyncUnreachable(str(exc)) from exc

    def push(self, commit: str) -> None:
        try:
            self.run("push", "-q", "origin", f"{commit}:refs/heads/{BRANCH}", timeout=_NETWORK_TIMEOUT_S)
        except SyncUnreachable:
            raise
        except GitFailed as exc:
            text = exc.stderr.lower()
            if any(s in text for s in ("non-fast-forward", "fetch first", "rejected", "stale info")):
                raise PushRejected(str(exc)) from exc
            raise SyncUnreachable(str(exc)) from exc

    def resolve(self, ref: str) -> str | None:
        try:
            out = self.run("rev-parse", "-q", "--verify", f"{ref}^{{commit}}")
        except MemselfError:
            return None
        return out.decode().strip() or None

    def set_ref(self, ref: str, commit: str) -> None:
        self.run("update-ref", ref, commit)

    def _drop(self, ref: str) -> None:
        if self.resolve(ref) is not None:
            self.run("update-ref", "-d", ref)

    def read(self, commit: str | None, name: str) -> bytes:
        """A file of ``commit`` (empty when there is no commit or no such file)."""
        if commit is None:
            return b""
        try:
            return self.run("cat-file", "blob", f"{commit}:{name}")
        except MemselfError:
            return b""

    def names(self, commit: str) -> list[str]:
        out = self.run("ls-tree", "-r", "--name-only", commit)
        return [n for n in out.decode("utf-8", "replace").split("\n") if n]

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", f"{commit}^{{tree}}").decode().strip()

    def make_tree(self, files: dict[str, bytes]) -> str:
        entries = []
        for name in sorted(files):
            blob = self.run("hash-object", "-w", "--stdin", stdin=files[name]).decode().strip()
            entries.append(f"100644 blob {blob}\t{name}\n")
        return self.run("mktree", stdin="".join(entries).encode()).decode().strip()

    def commit(self, tree: str, parent: str | None, message: str) -> str:
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        return self.run(*args).decode().strip()

    def checkout(self, commit: str) -> None:
        """Point the branch at ``commit`` and show its files in the working copy (for people)."""
        self.set_ref(f"refs/heads/{BRANCH}", commit)
        try:
            self.run("reset", "-q", "--hard", commit)
        except MemselfError:
            pass  # the working copy is only for reading; the refs are what sync uses


def _summary(stderr: str) -> str:
    """git's first fatal or error line (the cause), else its last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return (causes or lines or [""])[0] if causes else (lines[-1] if lines else "")
