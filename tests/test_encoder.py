"""The Encoder interface, the model table, and loading from a folder, the hub cache, or nowhere."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from memself.encoder import Encoder, ModelUnavailable, download_failure_message
from memself.errors import InvalidInput, MemselfError
from memself.models import DEFAULT_MODEL, MODELS, OFFLINE_MODEL, resolve_model
from memself.offline_model import expanded_path

REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- the table


def test_table_has_default_and_offline_models():
    bge = MODELS[DEFAULT_MODEL]
    assert (bge.kind, bge.dim, bge.query_prefix, bge.passage_prefix, bge.pooling) == (
        "hub", 768, "", "", "mean")
    e5 = resolve_model(OFFLINE_MODEL)
    assert (e5.kind, e5.dim, e5.query_prefix, e5.passage_prefix) == (
        "offline", 384, "query: ", "passage: ")
    for settings in MODELS.values():
        assert -1 <= settings.rule_floor <= 1 and -1 <= settings.project_floor <= 1


def test_resolve_hub_id_local_folder_and_rejects(tmp_path):
    other = resolve_model("someone/some-model")
    assert (other.kind, other.model_id, other.query_prefix) == ("hub", "someone/some-model", "")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q> ", "document": "d> "}}), encoding="utf-8")
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
        ["改完代码不要自动 git commit，由我来提交", "周报每周五下午发给组长"])
    query = e5_encoder.encode_queries(["修改完以后别帮我提交代码"])[0]
    scores = memories @ query
    assert scores[0] > scores[1] + 0.03


def test_local_folder_loads_with_its_prompts_and_no_network(shared_model_cache, e5_encoder,
                                                            tmp_path):
    """A copy of the expanded folder, loaded as a local model: prompts from its own config."""
    from memself.encoder import load_encoder

    folder = tmp_path / "copied-e5"
    folder.mkdir()
    for item in expanded_path(shared_model_cache).iterdir():
        (folder / item.name).symlink_to(item)
    connects: list[object] = []

    def audit(event: str, args: tuple) -> None:
        if event == "socket.connect":
            connects.append(args[1])

    sys.addaudithook(audit)
    local = load_encoder(str(folder))
    vec = local.encode_queries(["本地模型文件夹"])
    assert connects == []
    assert local.model_id == f"local:{folder.resolve()}"
    assert local.settings.query_prefix == "query: "  # type: ignore[attr-defined]
    assert float(vec[0] @ e5_encoder.encode_queries(["本地模型文件夹"])[0]) > 0.9999


def test_mean_pooling_is_forced_where_the_table_says_so(shared_model_cache, e5_encoder,
                                                        tmp_path):
    """bge ships CLS pooling; the table's pooling="mean" replaces it, as the original did."""
    from dataclasses import replace

    from memself.encoder import SentenceTransformerEncoder, _apply_pooling, _construct

    folder = tmp_path / "cls-pooled"
    shutil.copytree(expanded_path(shared_model_cache), folder, symlinks=False,
                    copy_function=os.symlink)
    pooling = folder / "1_Pooling" / "config.json"
    cfg = json.loads(Path(os.path.realpath(pooling)).read_text())
    pooling.unlink()
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))
    raw = _construct(str(folder), local_files_only=True)
    settings = replace(resolve_model(OFFLINE_MODEL), model_id="test", pooling=None)
    cls_vec = SentenceTransformerEncoder(settings, raw).encode_queries(["池化方式"])[0]
    mean_model = _apply_pooling(raw, replace(settings, pooling="mean"))
    mean_vec = SentenceTransformerEncoder(settings, mean_model).encode_queries(["池化方式"])[0]
    reference = e5_encoder.encode_queries(["池化方式"])[0]
    assert float(mean_vec @ reference) > 0.9999
    assert float(cls_vec @ reference) < 0.99


# ---------------------------------------------------------------------- the hub, in a subprocess
# huggingface_hub reads HF_ENDPOINT and the cache variables at import, as a real CLI run does.


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._fail()

    def do_HEAD(self) -> None:
        self._fail()

    def _fail(self) -> None:
        _Recorder.requests.append(self.path)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub() -> Iterator[str]:
    _Recorder.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run_load(model: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = ("import sys\nfrom memself.encoder import load_encoder\n"
            "from memself.errors import MemselfError\n"
            "try:\n    e = load_encoder(sys.argv[1])\n"
            "except MemselfError as exc:\n    print('ERR', exc)\n    sys.exit(3)\n"
            "v = e.encode_queries(['你好'])\nprint('OK', e.model_id, e.dim, v.shape)\n")
    return subprocess.run([sys.executable, "-c", code, model], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)


def _hub_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"),
               HF_HUB_CACHE=str(tmp_path / "hf" / "hub"), HF_HUB_ETAG_TIMEOUT="5",
               HF_HUB_DOWNLOAD_TIMEOUT="5")
    return env


def test_download_failure_names_mirror_folder_and_offline_model(tmp_path, fake_hub):
    proc = _run_load("someone/not-cached-model", _hub_env(tmp_path, fake_hub))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    message = proc.stdout.strip()
    assert message.startswith("ERR 无法从 " + fake_hub + " 下载嵌入模型 someone/not-cached-model")
    assert "HF_ENDPOINT=https://hf-mirror.com" in message
    assert "memself config model /path/to/folder" in message
    assert "memself config model multilingual-e5-small" in message
    assert len(message.splitlines()) == 1
    # HF_ENDPOINT was honoured: the request reached our server, not huggingface.co.
    assert any("not-cached-model" in path for path in _Recorder.requests)
    assert "下载嵌入模型" in proc.stderr  # the progress notice went to stderr


def test_cached_hub_model_loads_without_touching_the_endpoint(tmp_path, fake_hub,
                                                              shared_model_cache):
    """A model already in the standard HF cache is used offline: no request at all."""
    repo = tmp_path / "hf" / "hub" / "models--memself-test--e5-copy"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / commit
    shutil.copytree(expanded_path(shared_model_cache), snapshot, symlinks=False,
                    copy_function=os.symlink)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    proc = _run_load("memself-test/e5-copy", _hub_env(tmp_path, fake_hub))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[:3] == ["OK", "memself-test/e5-copy", "384"]
    assert _Recorder.requests == []


def test_failure_message_is_one_memself_error():
    message = download_failure_message("BAAI/bge-base-zh-v1.5", "https://huggingface.co",
                                       OSError("Connection refused\n  at somewhere"))
    assert "\n" not in message and "连不上模型仓库" in message
    odd = download_failure_message("x/y", "https://e", ValueError("strange\n failure"))
    assert "strange failure" in odd
    assert issubclass(ModelUnavailable, MemselfError)
