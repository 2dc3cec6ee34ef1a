"""Make sure the embedding model is prepared before anything is registered.

Preparing reads the model (a hub model that is not cached is downloaded, with huggingface_hub's
progress bars), builds what the lean runtime needs and checks it (``memself.model.prepare``),
with a progress bar on a terminal.
When the hub cannot be reached, huggingface_hub retries for well over a minute; a short probe
first lets setup say why at once and fall back to the offline model that ships in a package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from memself.errors import MemselfError
from memself.model.catalog import OFFLINE_MODEL, resolve_model
from memself.model.hub import hub_endpoint, is_cached, probe_hub


@dataclass(frozen=True)
class ModelReady:
    model: str  # the model that loaded
    fell_back: bool  # the configured model could not be had; the offline one is used instead
    reason: str = ""  # why the configured one failed (Chinese), when fell_back


def _load(model: str) -> None:
    from memself.model.prepare import STEPS, prepare
    from memself.progress import progress_bar

    with progress_bar("准备向量模型", STEPS) as advance:
        found = prepare(model, progress=advance)
    if found.fresh:
        print(found.done_message(model), file=sys.stderr, flush=True)


def prepare_model(
    model: str,
    echo: Callable[[str], None],
    load: Callable[[str], None] = _load,
    probe: Callable[[str], str] = probe_hub,
) -> ModelReady:
    """Prepare ``model`` once (downloading it if needed); fall back to the offline model.

    Raises ``MemselfError`` when neither loads: registering hooks for a model that cannot be
    had would give the user a memory that never recalls anything.
    """
    settings = resolve_model(model)
    failure = ""
    if settings.kind == "hub" and not is_cached(settings.source):
        endpoint = hub_endpoint()
        unreachable = probe(endpoint)
        if unreachable:
            failure = (
                f"无法下载向量模型 {settings.source}：{unreachable}。在中国大陆可设置镜像后重试，"
                f"如 HF_ENDPOINT=https://hf-mirror.com memself setup"
            )
    if not failure:
        echo(f"准备向量模型 {model}（首次会下载或展开，稍候）…")
        try:
            load(model)
            return ModelReady(model, False)
        except MemselfError as exc:
            failure = str(exc)
    if settings.kind == "offline":
        raise MemselfError(failure)
    echo(failure)
    echo(f"改用随包提供、无需联网的离线模型 {OFFLINE_MODEL} …")
    try:
        load(OFFLINE_MODEL)
    except MemselfError as exc:
        raise MemselfError(f"{failure}\n离线模型也无法使用：{exc}。hook 和 MCP 没有注册。") from exc
    return ModelReady(OFFLINE_MODEL, True, failure)
