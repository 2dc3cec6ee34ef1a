"""A workspace travels by its repository's identity, not by its path on one machine.

A memory's workspace key is the repository's root on this machine (``/home/a/proj`` here,
``/Users/a/code/proj`` there). In the synced files a key whose repository has an ``origin``
remote is written as ``repo:<host/owner/name>`` (the URL without scheme, user, port and ``.git``),
and read back as the root of that repository on this machine. The roots this machine knows come
from its own memories and from the workspaces its sessions start in (``memself.sync.background``).
A memory of a repository this machine has not seen yet gets a key under ``<data>/sync/unmapped/``,
which no workspace ever has (so it is injected nowhere), and the next sync after a session in that
repository gives it the real root. A repository without an ``origin`` that names a host (none, or
a local path) is known by its first commit instead: ``repo:root-commit/<hash>``, the oldest of its
root commits when histories were joined, which every clone shares. A repository without a commit
keeps its path.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import json
import os
import re
import subprocess
from typing import Any

from memself.atomic import write_atomic
from memself.paths import DataPaths
from memself.sync.canonical import Record, Snapshot

PREFIX = "repo:"
ROOT_COMMIT = "root-commit/"
_GIT_TIMEOUT_S = 10


def identity(root: str) -> str | None:
    """``host/owner/name`` of the repository at ``root`` from its ``origin`` URL; without one,
    ``root-commit/<hash>`` of its oldest root commit; None when it is neither."""
    config = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        with open(os.path.join(root, ".git", "config"), encoding="utf-8") as handle:
            config.read_file(handle)
        url = config.get('remote "origin"', "url", fallback="").strip()
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    found = normalise_url(url)
    if found is not None:
        return found
    first = root_commit(root)
    return ROOT_COMMIT + first if first else None


def root_commit(root: str) -> str | None:
    """The oldest commit without parents reachable from ``HEAD`` (by commit time, then hash),
    or None (no commit yet, or git cannot read it)."""
    from memself.platform import children
    from memself.sync.gitrepo import clean_env

    try:
        done = subprocess.run(
            ["git", "-C", root, "rev-list", "--max-parents=0", "--timestamp", "HEAD", "--"],
            capture_output=True,
            env=clean_env(),
            timeout=_GIT_TIMEOUT_S,
            check=False,
            **children.piped(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    found: list[tuple[int, str]] = []
    for line in done.stdout.decode("ascii", "replace").splitlines():
        stamp, _, commit = line.strip().partition(" ")
        if stamp.isdigit() and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
            found.append((int(stamp), commit))
    return min(found)[1] if found else None


def normalise_url(url: str) -> str | None:
    if not url:
        return None
    text = url.strip()
    match = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d+)?/(.*)$", text)
    if match:
        host, path = match.groups()
    else:
        scp = re.match(r"^(?:[^@/]+@)?([^/:]+):(?!//)(.*)$", text)
        if not scp or os.path.isabs(text):
            return None  # a local path: not the same repository on another machine
        host, path = scp.groups()
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    if not host or not path:
        return None
    return f"{host.lower()}/{path}"


class WorkspaceMap:
    """Repository identity <-> this machine's root, kept in ``<data>/sync/workspaces.json``."""

    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths
        self.file = paths.sync_dir / "workspaces.json"
        self.roots: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            data: Any = json.loads(self.file.read_text("utf-8"))
            if isinstance(data, dict) and isinstance(data.get("repos"), dict):
                self.roots = {str(k): str(v) for k, v in data["repos"].items() if os.path.isabs(str(v))}
        self._dirty = False
        self._unknown: set[str] = set()  # roots with no identity: asked once per sync, not per record
        self._seen_identities: set[str] = set()
        self._unmapped: dict[str, str] = {}

    def learn(self, root: str) -> str | None:
        if root in self._unknown:
            return None
        found = identity(root) if root and os.path.isabs(root) else None
        if found is None:
            self._unknown.add(root)
        if found and self.roots.get(found) != root:
            self.roots[found] = root
            self._dirty = True
        return found

    def save(self) -> None:
        if self._dirty:
            self.paths.sync_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, json.dumps({"repos": self.roots}, ensure_ascii=False, indent=2) + "\n")
            self._dirty = False

    def unmapped_root(self, ident: str) -> str:
        digest = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]
        return os.path.join(str(self.paths.sync_dir), "unmapped", digest)

    def _identity_of(self, key: str) -> str | None:
        for ident, root in self.roots.items():
            if root == key:
                return ident
        if os.path.dirname(key) == os.path.join(str(self.paths.sync_dir), "unmapped"):
            return self._unmapped.get(key)
        return self.learn(key)

    def to_shared(self, snap: Snapshot) -> Snapshot:
        """This machine's keys -> identities (the synced form)."""
        self._unmapped = {self.unmapped_root(i): i for i in self._seen_identities}
        return _mapped(snap, self._shared_key)

    def to_local(self, snap: Snapshot) -> Snapshot:
        """Identities -> this machine's roots (an unknown one: a key no workspace has)."""
        return _mapped(snap, self._local_key)

    def remember(self, *snaps: Snapshot) -> None:
        """Identities named in synced snapshots: an unmapped key maps back to its identity."""
        seen: set[str] = set()
        for snap in snaps:
            for record in [*snap.memories.values(), *snap.trash.values()]:
                key = record.get("workspace")
                if isinstance(key, str) and key.startswith(PREFIX):
                    seen.add(key[len(PREFIX) :])
        self._seen_identities = seen

    def _shared_key(self, key: str) -> str:
        ident = self._identity_of(key)
        return PREFIX + ident if ident else key

    def _local_key(self, key: str) -> str:
        if not key.startswith(PREFIX):
            return key
        ident = key[len(PREFIX) :]
        return self.roots.get(ident) or self.unmapped_root(ident)


def _mapped(snap: Snapshot, change: Any) -> Snapshot:
    def one(record: Record) -> Record:
        key = record.get("workspace")
        if not isinstance(key, str) or not key:
            return record
        new = change(key)
        return record if new == key else {**record, "workspace": new}

    return Snapshot(
        memories={k: one(v) for k, v in snap.memories.items()},
        trash={k: one(v) for k, v in snap.trash.items()},
        bad=list(snap.bad),
    )
