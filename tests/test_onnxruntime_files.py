"""onnxruntime writes a device id into the user's cache folder when it is imported; memself
imports it so that the file lands in its own model cache, which ``uninstall --purge`` removes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CI_MARKERS = {
    "CI",
    "GITHUB_ACTIONS",
    "TF_BUILD",
    "BUILD_ID",
    "BUILD_BUILDID",
    "JENKINS_URL",
    "TRAVIS",
    "GITLAB_CI",
}
PROBE = (
    "import json, os; from memself.model.runtime import onnxruntime_module; onnxruntime_module(); "
    "print(json.dumps(os.environ.get('XDG_CACHE_HOME')))"
)


@pytest.mark.parametrize("user_cache", [None, "elsewhere"])
def test_onnxruntime_leaves_nothing_outside_the_model_cache(tmp_path: Path, user_cache: str | None) -> None:
    home, cache = tmp_path / "user", tmp_path / "models"
    home.mkdir()
    # onnxruntime writes nothing where it sees a CI service (CI, GITHUB_ACTIONS, TF_BUILD, ...):
    # the user's machine is what this test is about.
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME" and k not in CI_MARKERS}
    env.update(HOME=str(home), MEMSELF_MODEL_CACHE=str(cache))
    if user_cache:
        env["XDG_CACHE_HOME"] = str(tmp_path / user_cache)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The caller's setting is back as it was, for everything imported after.
    assert json.loads(done.stdout) == (str(tmp_path / user_cache) if user_cache else None)
    assert not any(home.rglob("*")) and not (tmp_path / "elsewhere").exists()
    assert [p.name for p in (cache / "onnxruntime").rglob("*") if p.is_file()] != []
