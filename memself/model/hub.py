"""The model hub, asked once: where it is, whether a model is in its cache, whether it answers.

huggingface_hub retries a connection that fails, five times per file with backoff, printing each
retry in English: well over a minute before the error when the hub cannot be reached (no network,
a firewall, a mainland-China network without a mirror). Everything that is about to download asks
``unreachable`` first, one short request, and stops with a Chinese message when it fails.
"""

from __future__ import annotations

import os

PROBE_TIMEOUT_S = 8.0
DEFAULT_ENDPOINT = "https://huggingface.co"
# The mirror users in mainland China set as HF_ENDPOINT; named in the messages that say how.
MIRROR = "https://hf-mirror.com"


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT


def is_cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds ``repo_id`` already (then nothing is downloaded)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # a malformed id or cache: treat as not cached, the download will say why
        return False
    return isinstance(found, str)


def probe_hub(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> str:
    """``""`` when the hub answers at all (any HTTP status), else why not (Chinese). One request,
    no retry."""
    import httpx

    try:
        httpx.head(endpoint, timeout=timeout, follow_redirects=False)
    except httpx.HTTPError as exc:
        return f"连接 {endpoint} 失败（{type(exc).__name__}）"
    return ""
