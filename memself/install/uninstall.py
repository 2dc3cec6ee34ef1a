"""``memself uninstall``: memself out of every client, and with ``--purge`` off the machine,
leaving only the memories.

Plain: each client's hooks, MCP entries, skills and permission rules go (``--only``: one client,
nothing else); then the config and secrets, the running engine and the expanded offline model.
What stays is named: the memories and their files, the prepared models, the command's link.

``--purge`` also removes what memself rebuilds or needs only to run: the model cache (prepared
models, lexical tables, backgrounds), the data directory's derived files (index, page, list cache,
logs, turn ledgers, the views' state, the engine's files and runtime folder) and
``~/.local/bin/memself`` when it is the installer's link to this install. Never the memories: the
group files, the trash, the original's embeddings and decay state, the verify cases and the sync
working copy stay, and what is left is listed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from memself.engine.client import stop_engine_quietly
from memself.errors import MemselfError
from memself.install import INSTALLERS, context_for
from memself.install.setup_flow import Echo, register, render_results
from memself.model.runtime import ONNXRUNTIME_CACHE
from memself.paths import DataPaths, model_cache_dir
from memself.store.lock import KERNEL_LOCK_NAME

_REMOVED_DATA = ("config.json", "side-secret.json", "session-secret", "side")
_KEPT_DATA = (
    "rule.jsonl",
    "project.jsonl",
    "trash.jsonl",
    "index/",
    "embeddings.jsonl",
    "memories.html",
    "list-view.json",
    "decay-state.json",
    "verify-cases.json",
)
# The memories and what belongs to them: what a purge keeps (any other group file too).
_MEMORY_FILES = (
    "trash.jsonl",
    "embeddings.jsonl",
    "decay-state.json",
    "verify-cases.json",
    "memories.md",
    "sync",
)
# What memself derives or needs only while it runs; the store's own lock file stays, since a client
# not yet restarted may still run a hook that writes.
_PURGED_DATA = (
    "index",
    "memories.html",
    "list-view.json",
    "memself.log",
    "memself.log.1",
    "kept",
    "views",
    "engine.lock",
    "engine-socket",
    "engine-port",
)
_PURGED_PREFIXES = (".dedup-keys-",)
# The model cache's own entries (``memself.model.cache`` and its neighbours); a cache folder the
# user named may hold other things, which stay.
_MODEL_CACHE_ENTRIES = ("prepared", "lexical", "backgrounds", ONNXRUNTIME_CACHE)
# Installs whose command link belongs to a tool manager, which removes it with the install.
_MANAGED = {"pipx": "pipx uninstall memself", "uv": "uv tool uninstall memself"}


def run_uninstall(
    only: str | None,
    dry_run: bool,
    echo: Echo,
    *,
    purge: bool = False,
    home: Path | None = None,
    paths: DataPaths | None = None,
) -> int:
    home = home or Path.home()
    paths = paths or DataPaths.default()
    if only is not None and only not in INSTALLERS:
        raise MemselfError(f"未知客户端「{only}」，可用：{'、'.join(INSTALLERS)}")
    if only is not None and purge:
        raise MemselfError("--purge 删除的是整台机器上的 memself，不能和 --only 一起用")
    hosts = [only] if only else list(INSTALLERS)
    ctx = context_for(home)
    hub_model = _cached_hub_model(paths) if only is None else None  # config.json goes below
    reports = register(hosts, ctx, dry_run, removing=True)
    echo("将要移除：" if dry_run else "移除结果：")
    for report in reports:
        render_results(report, echo, show_diff=dry_run, only_changed=True)
    if only is None:
        runtime_dirs = _engine_runtime_dirs(paths)
        _stop_engine_for_uninstall(paths, dry_run, echo)
        _remove_data(paths, dry_run, echo, purge)
        _remove_model_copies(dry_run, echo)
        if purge:
            _purge_model_cache(dry_run, echo)
            _purge_runtime_dirs(runtime_dirs, dry_run, echo)
            _purge_link(home, dry_run, echo)
            _left_behind(paths, home, echo, dry_run)
        else:
            _name_what_stays(home, echo)
        if hub_model:
            echo(
                f"Hugging Face 缓存里的向量模型 {hub_model} 与其它程序共用，未删除；"
                "确实不用时可运行 hf cache delete。"
            )
    if not dry_run and any(x.changed for r in reports for x in r.results):
        echo("卸完后请重启改动过的客户端，MCP 才会从已经打开的会话里消失。")
    return 1 if any(r.error for r in reports) else 0


def _remove_data(paths: DataPaths, dry_run: bool, echo: Echo, purge: bool) -> None:
    """Config and secrets go (with ``purge``, the derived files too); memories and what belongs
    to them stay. Only files that exist are named, removed or kept."""
    names = [*_REMOVED_DATA, *_leftover_secrets(paths)]
    if purge:
        names += [*_PURGED_DATA, *_prefixed(paths.root, _PURGED_PREFIXES)]
    removed = [name for name in names if os.path.lexists(paths.root / name)]
    kept = [] if purge else [name for name in _KEPT_DATA if (paths.root / name.rstrip("/")).exists()]
    if not removed and not kept:
        return
    echo(f"{paths.root}：")
    for name in removed:
        if not dry_run:
            _remove(paths.root / name)
        echo(f"  {'将删除' if dry_run else '已删除'} {name}")
    if kept:
        echo(f"  保留记忆和相关文件：{'、'.join(kept)}")


def _prefixed(folder: Path, prefixes: tuple[str, ...]) -> list[str]:
    try:
        return sorted(name for name in os.listdir(folder) if name.startswith(prefixes))
    except OSError:
        return []


def _remove(target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink()


def _cached_hub_model(paths: DataPaths) -> str:
    """The configured hub model when the Hugging Face cache holds it, else ""."""
    from memself.config import load_config
    from memself.model.catalog import resolve_model
    from memself.model.hub import is_cached

    try:
        settings = resolve_model(load_config(paths).model)
    except MemselfError:
        return ""
    return settings.source if settings.kind == "hub" and is_cached(settings.source) else ""


def _leftover_secrets(paths: DataPaths) -> list[str]:
    """Invalid session secrets set aside after a full disk, and the lock of their replacement."""
    from memself.judge.credentials import set_aside_secrets

    names = [p.name for p in set_aside_secrets(paths)]
    return [*names, ".session-secret.lock"]


def _stop_engine_for_uninstall(paths: DataPaths, dry_run: bool, echo: Echo) -> None:
    """A running engine would keep serving (and holding the model) until its idle exit."""
    from memself.engine.client import engine_status

    if engine_status(paths) is None:
        return
    if not dry_run:
        stop_engine_quietly(paths)
    echo(f"{'将停止' if dry_run else '已停止'}常驻召回进程")


def _remove_model_copies(dry_run: bool, echo: Echo) -> None:
    """The offline model folder setup expanded is ours (a hub model sits in the Hugging Face
    cache, which other programs share: the caller only points it out)."""
    from memself.model.offline import expanded_path

    folder = expanded_path()
    if folder.is_dir():
        if not dry_run:
            shutil.rmtree(folder)
        echo(f"{'将删除' if dry_run else '已删除'}展开的离线模型 {folder}（重新 setup 时会再展开）")


def _model_cache_entries() -> list[Path]:
    cache = model_cache_dir()
    return [cache / name for name in _MODEL_CACHE_ENTRIES if (cache / name).exists()]


def _size_text(folders: list[Path]) -> str:
    total = 0
    for folder in folders:
        for base, _, files in os.walk(folder):
            for name in files:
                try:
                    total += os.lstat(os.path.join(base, name)).st_size
                except OSError:
                    pass
    return f"{total / (1 << 20):.0f} MB"


def _purge_model_cache(dry_run: bool, echo: Echo) -> None:
    entries = _model_cache_entries()
    if not entries:
        return
    size = _size_text(entries)
    if not dry_run:
        for entry in entries:
            _remove(entry)
        _remove_empty(model_cache_dir())
        if model_cache_dir() == Path.home() / ".cache" / "memself" / "models":
            _remove_empty(model_cache_dir().parent)
    names = "、".join(entry.name for entry in entries)
    echo(f"{'将删除' if dry_run else '已删除'}模型缓存 {model_cache_dir()} 里的 {names}（{size}）")


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # not empty, or already gone: either way nothing of ours is left there


def _engine_runtime_dirs(paths: DataPaths) -> list[Path]:
    """The engine's runtime folder and, when it listens elsewhere, the private folder it made;
    read before the engine stops and its record goes."""
    from memself.engine.location import locate, recorded_socket

    location = locate(paths.root)
    folders = [Path(location.runtime_dir)]
    recorded = recorded_socket(location)
    if recorded:
        folders.append(Path(recorded).parent)
    return folders


def _purge_runtime_dirs(folders: list[Path], dry_run: bool, echo: Echo) -> None:
    """Each folder goes when nothing is left in it (another data directory's engine may share it)."""
    for folder in folders:
        if not folder.is_dir():
            continue
        if dry_run:
            echo(f"将删除召回进程的运行目录 {folder}（为空时）")
            continue
        _remove_empty(folder)
        if not folder.exists():
            echo(f"已删除召回进程的运行目录 {folder}")


def _link(home: Path) -> Path:
    return home / ".local" / "bin" / "memself"


def _our_link(home: Path) -> bool:
    """True when ``~/.local/bin/memself`` is a link to this install's command."""
    link = _link(home)
    if not link.is_symlink():
        return False
    ours = Path(sys.prefix) / "bin" / "memself"
    return os.path.realpath(link) == os.path.realpath(ours)


def _manager() -> str:
    """The tool manager this install belongs to ("pipx", "uv"), or ""."""
    parts = Path(sys.prefix).parts
    if "pipx" in parts:
        return "pipx"
    return "uv" if "uv" in parts and "tools" in parts else ""


def _purge_link(home: Path, dry_run: bool, echo: Echo) -> None:
    link = _link(home)
    if not _our_link(home):
        if os.path.lexists(link):
            echo(f"{link} 不是指向这份安装的链接，未删除")
        return
    manager = _manager()
    if manager:
        echo(f"{link} 由 {manager} 管理，未删除；运行 {_MANAGED[manager]} 时会一并去掉")
        return
    if not dry_run:
        link.unlink()
    echo(f"{'将删除' if dry_run else '已删除'}命令链接 {link}")


def _left_behind(paths: DataPaths, home: Path, echo: Echo, dry_run: bool) -> None:
    """Say exactly what is left of memself: the memories, and the program itself."""
    if not dry_run:
        try:
            left = sorted(os.listdir(paths.root))
        except OSError:
            left = []
        memories = [name for name in left if name in _MEMORY_FILES or name.endswith(".jsonl")]
        others = [name for name in left if name not in memories and name != KERNEL_LOCK_NAME]
        if memories:
            echo(f"留在 {paths.root} 的记忆：{'、'.join(memories)}")
        if KERNEL_LOCK_NAME in left:
            echo(f"  以及存储的锁文件 {KERNEL_LOCK_NAME}（空文件，还没重启的客户端可能仍在用它）")
        if others:
            echo(f"  以及不是 memself 写下的文件，未动：{'、'.join(others)}")
    manager = _manager()
    step = _MANAGED[manager] if manager else f"删除 {sys.prefix} 所在的目录（克隆或虚拟环境）"
    echo(f"memself 程序本身不会自己删除自己；不再需要时：{step}")
    pip_cache = home / ".cache" / "pip"
    if pip_cache.is_dir():
        echo(f"安装时 pip 的下载缓存 {pip_cache} 与其它程序共用，未删除；确实不用时可运行 pip cache purge")


def _name_what_stays(home: Path, echo: Echo) -> None:
    """Plain uninstall says what it kept, and how ``--purge`` takes it."""
    kept: list[str] = []
    entries = _model_cache_entries()
    if entries:
        kept.append(f"模型缓存 {model_cache_dir()}（{_size_text(entries)}）")
    if _our_link(home):
        kept.append(f"命令链接 {_link(home)}")
    if kept:
        echo(f"保留：{'；'.join(kept)}。")
        echo("运行 memself uninstall --purge 可一并删除（记忆始终保留）。")
