"""The Encoder interface, the model table, and a hub model prepared from a download, from the hub
cache, or not at all."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from memself.errors import InvalidInput, MemselfError, ModelUnavailable
from memself.model.catalog import DEFAULT_MODEL, MODELS, OFFLINE_MODEL, resolve_model
from memself.model.encoder import Encoder, download_failure_message

REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- the table


def test_table_has_default_and_offline_models():
    bge = MODELS[DEFAULT_MODEL]
    assert (bge.kind, bge.dim, bge.query_prefix, bge.passage_prefix, bge.pooling) == (
        "hub",
        768,
        "",
        "",
        "mean",
    )
    e5 = resolve_model(OFFLINE_MODEL)
    assert (e5.kind, e5.dim, e5.query_prefix, e5.passage_prefix) == ("offline", 384, "query: ", "passage: ")
    for settings in MODELS.values():
        assert -1 <= settings.rule_floor <= 1 and -1 <= settings.project_floor <= 1


def test_resolve_hub_id_local_folder_and_rejects(tmp_path):
    other = resolve_model("someone/some-model")
    assert (other.kind, other.model_id, other.query_prefix) == ("hub", "someone/some-model", "")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q> ", "document": "d> "}}), encoding="utf-8"
    )
    local = resolve_model(str(folder))
    assert (local.kind, local.query_prefix, local.passage_prefix) == ("local", "q> ", "d> ")
    assert local.model_id == f"local:{folder.resolve()}"
    bare = tmp_path / "bare"
    bare.mkdir()
    assert resolve_model(str(bare)).query_prefix == ""
    for bad in ("", "not a model", str(tmp_path / "missing-folder"), "a/b/c"):
        with pytest.raises(InvalidInput):
            resolve_model(bad)


# ---------------------------------------------------------------------- the real model


def test_e5_encoder_contract(e5_encoder):
    assert isinstance(e5_encoder, Encoder)
    assert (e5_encoder.model_id, e5_encoder.dim) == (OFFLINE_MODEL, 384)
    q = e5_encoder.encode_queries(["回答用中文", "提交前先跑单元测试"])
    p = e5_encoder.encode_passages(["回答用中文"])
    assert q.dtype == np.float32 and q.shape == (2, 384) and p.shape == (1, 384)
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    assert e5_encoder.encode_queries([]).shape == (0, 384)
    assert e5_encoder.encode_passages([]).dtype == np.float32
    # Same text on the two sides differs: the prefixes are applied.
    assert float(q[0] @ p[0]) < 0.99


def test_e5_encoder_ranks_a_paraphrase_above_an_unrelated_memory(e5_encoder):
    memories = e5_encoder.encode_passages(
        ["改完代码不要自动 git commit，由我来提交", "周报每周五下午发给组长"]
    )
    query = e5_encoder.encode_queries(["修改完以后别帮我提交代码"])[0]
    scores = memories @ query
    assert scores[0] > scores[1] + 0.03


# ---------------------------------------------------------------------- the hub, in a subprocess
# huggingface_hub reads HF_ENDPOINT and the cache variables at import, as a real CLI run does.


COMMIT = "0123456789abcdef0123456789abcdef01234567"


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Just enough of the Hugging Face hub protocol to serve one repo from a folder."""

    protocol_version = "HTTP/1.1"
    repo_id: ClassVar[str] = ""
    files: ClassVar[dict[str, Path]] = {}
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        _FakeHub.requests.append(f"{self.command} {self.path}")
        path = self.path.split("?")[0]
        api, resolve = f"/api/models/{self.repo_id}", f"/{self.repo_id}/resolve/"
        if path.startswith(api + "/tree/"):
            return self._send(200, b"[]", body, {"Content-Type": "application/json"})
        if path == api or path.startswith(api + "/revision/"):
            info = {
                "id": self.repo_id,
                "sha": COMMIT,
                "siblings": [{"rfilename": name} for name in self.files],
            }
            return self._send(200, json.dumps(info).encode(), body, {"Content-Type": "application/json"})
        if path.startswith(resolve):
            name = path[len(resolve) :].split("/", 1)[-1]
            if name in self.files:
                data = self.files[name].read_bytes()
                return self._send(
                    200, data, body, {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}
                )
            return self._send(404, b"", body, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})
        return self._send(404, b"", body, {"X-Error-Code": "RepoNotFound"})

    def _send(self, status: int, data: bytes, body: bool, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub(bge_tiny_folder) -> Iterator[str]:
    """Serves the tiny bge-shaped model (tests/support/bge_shaped.py): a real download, prepared fast."""
    folder = bge_tiny_folder
    _FakeHub.repo_id = "memself-test/bge-served"
    _FakeHub.files = {str(p.relative_to(folder)): p for p in folder.rglob("*") if p.is_file()}
    _FakeHub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run_load(model: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nfrom memself.model.encoder import load_encoder\n"
        "from memself.errors import MemselfError\n"
        "try:\n    e = load_encoder(sys.argv[1])\n"
        "except MemselfError as exc:\n    print('ERR', exc)\n    sys.exit(3)\n"
        "v = e.encode_queries(['你好'])\n"
        "heavy = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]\n"
        "print('OK', e.model_id, e.dim, 'heavy=' + ','.join(heavy).join('[]'))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, model],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )


def _hub_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_CACHE=str(tmp_path / "hf" / "hub"),
        HF_HUB_ETAG_TIMEOUT="5",
        HF_HUB_DOWNLOAD_TIMEOUT="5",
    )
    return env


@pytest.mark.full
def test_download_failure_names_mirror_folder_and_offline_model(tmp_path, fake_hub):
    proc = _run_load("someone/not-cached-model", _hub_env(tmp_path, fake_hub))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    message = proc.stdout.strip()
    assert message.startswith("ERR 无法从 " + fake_hub + " 下载嵌入模型 someone/not-cached-model")
    assert "找不到该模型" in message
    assert "HF_ENDPOINT=https://hf-mirror.com" in message
    assert "Traceback" not in proc.stderr
    assert "memself config model /path/to/folder" in message
    assert "memself config model multilingual-e5-small" in message
    assert len(message.splitlines()) == 1
    # HF_ENDPOINT was honoured: the request reached our server, not huggingface.co.
    assert any("someone/not-cached-model" in r for r in _FakeHub.requests)


@pytest.mark.full
def test_hub_download_shows_progress_then_runs_prepared_offline(tmp_path, fake_hub):
    env = _hub_env(tmp_path, fake_hub)
    env["TQDM_POSITION"] = "-1"  # huggingface_hub draws bars on a non-terminal only with this
    proc = _run_load("memself-test/bge-served", env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[:3] == ["OK", "memself-test/bge-served", "32"]
    assert "向量模型 memself-test/bge-served 还没有准备好：正在准备" in proc.stderr
    assert "正在从 " + fake_hub + " 下载嵌入模型 memself-test/bge-served" in proc.stderr
    assert "Traceback" not in proc.stderr
    bar_lines = [
        line
        for line in proc.stderr.replace("\r", "\n").splitlines()
        if "model.safetensors" in line and "100%" in line
    ]
    assert bar_lines, proc.stderr[-2000:]
    cached = list(
        (tmp_path / "hf" / "hub").glob("models--memself-test--bge-served/snapshots/*/model.safetensors")
    )
    assert len(cached) == 1
    assert any("model.safetensors" in r for r in _FakeHub.requests)
    # Keyed by the hub commit the cache resolved.
    manifests = list((tmp_path / "home").glob(".cache/memself/models/prepared/*/*/manifest.json"))
    assert [json.loads(m.read_text())["revision"] for m in manifests] == [f"hub:{COMMIT}"]

    # Second start: the prepared model answers; neither the endpoint nor torch is touched.
    _FakeHub.requests = []
    again = _run_load("memself-test/bge-served", _hub_env(tmp_path, fake_hub))
    assert again.returncode == 0, again.stdout + again.stderr
    assert _FakeHub.requests == []
    assert "下载嵌入模型" not in again.stderr and "准备" not in again.stderr
    assert again.stdout.split()[3:] == ["heavy=[]"]


def test_failure_message_is_one_memself_error():
    message = download_failure_message(
        "BAAI/bge-base-zh-v1.5", "https://huggingface.co", OSError("Connection refused\n  at somewhere")
    )
    assert "\n" not in message and "连不上模型仓库" in message
    odd = download_failure_message("x/y", "https://e", ValueError("strange\n failure"))
    assert "strange failure" in odd
    assert issubclass(ModelUnavailable, MemselfError)
