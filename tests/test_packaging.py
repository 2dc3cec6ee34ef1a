"""The built wheel: only ``memself`` is an import name, every source package ships, data included."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_SKIP = {
    ".venv",
    ".git",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".cache",
    "node_modules",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """Build the wheel from a copy of the working tree, so the build leaves no files behind."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    # symlinks=True keeps memself/data/background_sentences.json a link, as in a git checkout.
    shutil.copytree(
        REPO,
        src,
        symlinks=True,
        ignore=lambda _d, names: [n for n in names if n in _SKIP or n.endswith(".egg-info")],
    )
    out = base / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # setuptools warns about a deprecated license table or a data folder missing from packages
    # on every install; the configuration gives it nothing to warn about.
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if "Warning" in line]
    assert not warnings, "\n".join(warnings)
    wheels = list(out.glob("memself-*.whl"))
    assert len(wheels) == 1, [p.name for p in out.iterdir()]
    with zipfile.ZipFile(wheels[0]) as zf:
        yield zf


def names(zf: zipfile.ZipFile) -> set[str]:
    return set(zf.namelist())


def dist_info(zf: zipfile.ZipFile) -> str:
    (info,) = {n.split("/")[0] for n in zf.namelist() if n.split("/")[0].endswith(".dist-info")}
    return info


def test_only_memself_is_a_top_level_name(wheel: zipfile.ZipFile) -> None:
    tops = {n.split("/")[0] for n in names(wheel)}
    assert tops == {"memself", dist_info(wheel)}
    assert re.fullmatch(r"memself-[0-9][^/]*\.dist-info", dist_info(wheel))


def test_host_installer_and_hook_packages_are_inside_memself(wheel: zipfile.ZipFile) -> None:
    files = names(wheel)
    for pkg in ("memself/hosts", "memself/install", "memself/hooks"):
        assert f"{pkg}/__init__.py" in files, pkg
    assert "memself/hosts/base.py" in files
    # The top-level folders ship inside the package (memself.shipped finds them there).
    assert "memself/_shipped/hooks/entry.py" in files
    assert "memself/hooks/entry.py" in files  # the old place, for commands registered before


def test_every_source_module_ships(wheel: zipfile.ZipFile) -> None:
    # Catches a subpackage missing from pyproject's explicit package list.
    files = names(wheel)
    missing = []
    for py in sorted((REPO / "memself").rglob("*.py")):
        rel = py.relative_to(REPO).as_posix()
        if "__pycache__" not in py.parts and rel not in files:
            missing.append(rel)
    assert not missing, f"not in the wheel (add the package to pyproject's list): {missing}"


def test_background_sentences_ship_as_data(wheel: zipfile.ZipFile) -> None:
    path = "memself/data/background_sentences.json"
    assert path in names(wheel)
    sentences = json.loads(wheel.read(path).decode("utf-8"))
    assert isinstance(sentences, list) and len(sentences) >= 20
    assert all(isinstance(s, str) and s.strip() for s in sentences)
    # The packaged copy is the repo-root file (through the symlink), not a stale duplicate.
    root_copy = json.loads((REPO / "background_sentences.json").read_text(encoding="utf-8"))
    assert sentences == root_copy


def test_console_script_and_metadata(wheel: zipfile.ZipFile) -> None:
    info = dist_info(wheel)
    entry_points = wheel.read(f"{info}/entry_points.txt").decode("utf-8")
    section = entry_points.split("[console_scripts]", 1)[1].split("\n[", 1)[0]
    scripts = {
        k.strip(): v.strip() for k, v in (line.split("=", 1) for line in section.splitlines() if "=" in line)
    }
    assert scripts.get("memself", "").startswith("memself.cli")
    module = scripts["memself"].split(":")[0].replace(".", "/")
    assert {f"{module}.py", f"{module}/__init__.py"} & names(wheel)

    metadata = wheel.read(f"{info}/METADATA").decode("utf-8")
    assert "Requires-Python: >=3.10" in metadata
    requires = [
        line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    base = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower() for r in requires if "extra ==" not in r}
    assert {"click", "filelock", "numpy", "httpx", "onnx", "onnxruntime", "huggingface-hub"} <= base
    # Preparing the offline model or a BERT with safetensors weights needs no torch: torch and
    # sentence-transformers are the torch extra's only.
    assert not {"torch", "sentence-transformers", "transformers"} & base
    extra = {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower() for r in requires if 'extra == "torch"' in r}
    assert "sentence-transformers" in extra
    # An unpinned torch would pull a multi-GB CUDA build; if torch is declared it is pinned.
    for req in requires:
        if re.match(r"torch\b", req, re.IGNORECASE):
            assert "==2.13.0" in req.replace(" ", ""), req


def test_wheel_imports_from_its_own_files(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    # Without site (-S) the editable install's finder is off, so these come from the wheel only.
    site = tmp_path / "site"
    wheel.extractall(site)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import memself, memself.hosts, memself.hooks, memself.page.html; "
        "print(memself.__file__); print(memself.hosts.__file__); print(memself.hooks.__file__)"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(site)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for line in proc.stdout.splitlines():
        assert Path(line).resolve().is_relative_to(site.resolve()), line


@pytest.mark.full
def test_the_wheel_installs_and_runs_from_anywhere(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """What ``pipx install .`` does, minus the heavy dependencies: the wheel in a fresh venv,
    ``memself --version`` and the hook entry run from another folder."""
    venv = tmp_path / "fresh venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    wheel_file = Path(wheel.filename or "")
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel_file), "click"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    version = subprocess.run(
        [str(bindir / "memself"), "--version"], capture_output=True, text=True, timeout=60, cwd=elsewhere
    )
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr
    entry = subprocess.run(
        [str(python), "-c", "import memself.hooks.entry as e; print(e.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=elsewhere,
    )
    assert Path(entry.stdout.strip()).resolve().is_relative_to(venv.resolve()), entry.stdout


@pytest.mark.full
def test_an_installed_wheel_makes_the_round_trip_without_the_source_tree(
    wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    """Setup, one prompt through the registered hook command and uninstall, with memself from a
    wheel in a fresh venv and nothing of this source tree on any path: the host facts, the hook
    entry and the skill come from inside the installed package. The dependencies are borrowed
    from this interpreter's site-packages (a path line, whose own .pth files, this checkout's
    editable finder among them, are not run)."""
    import sysconfig

    venv = tmp_path / "wheel venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(Path(wheel.filename or ""))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = elsewhere / "roundtrip.py"
    shutil.copy(REPO / "scripts" / "roundtrip.py", script)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.setdefault("MEMSELF_MODEL_CACHE", os.environ.get("MEMSELF_TEST_MODEL_CACHE", ""))
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import memself, memself.shipped as s; print(memself.__file__); print(s.shipped_dir('hosts'))",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    for found in where.stdout.splitlines():
        assert Path(found).resolve().is_relative_to(venv.resolve()), found
    trip = subprocess.run(
        [str(python), str(script)], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=1800
    )
    assert trip.returncode == 0, trip.stdout[-3000:] + trip.stderr[-3000:]
    assert "roundtrip: setup, one prompt through the registered hook, uninstall: ok" in trip.stdout
    assert str(REPO) not in trip.stdout
