"""Judge jobs sealed by the local ``session-secret``: a job file is trusted only if the plugin wrote it.

A job's sessionID is an HMAC over the turn's identity (§4.2), and every field that decides what is
written or shown (the proposal, the notice, the state flags, the job's identity, the turn's
workspace a proposal may be written into) is covered by a
second HMAC, ``mac``. Whoever can write ``side/`` without the secret can therefore not invent a
proposal, edit one, point it at another memory, re-arm an applied one or copy it under another id.

To recompute the sessionID the job keeps the SHA-256 of the prompt, masked with a key derived from
the secret and the id: the raw prompt never persists, and a bare hash would let anyone holding the
file test guesses of a secret the redaction removed (a PIN in a known sentence is 10^6 guesses).

Standard library only: the hooks seal and check jobs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from memself.judge.proposal_id import proposal_id_from_hash

MAC_FIELD = "mac"
PROMPT_HASH_FIELD = "promptHash"
# Everything a popup, a notice or a write is built from; bookkeeping (reason, finishedAt,
# promptedAt) and fields added later stay outside, so updating them needs no secret.
COVERED = (
    "version",
    "id",
    "agent",
    "sessionKey",
    "generationKey",
    PROMPT_HASH_FIELD,
    "prompt",
    "startedAt",
    "status",
    "prompted",
    "applied",
    "proposal",
    "notice",
)
# Covered when present: a job of a turn without one (and every job written before it existed)
# keeps the MAC it had, while adding, dropping or changing it breaks the seal.
COVERED_WHEN_PRESENT = ("workspace",)
_JOB_LABEL = b"memself-job-mac\0v1\0"
_MASK_LABEL = b"memself-prompt-hash-mask\0v1\0"
_PAIR_LABEL = b"memself-confirm-pair\0v1\0"
_HEX64 = re.compile(r"^[a-f0-9]{64}$")


def _hmac(secret: str, label: bytes, message: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8"), label + message, hashlib.sha256).digest()


def mask_prompt_hash(prompt_sha256: str, session_id: str, secret: str) -> str:
    """XOR with a per-id key stream: masking and unmasking are the same operation."""
    mask = _hmac(secret, _MASK_LABEL, session_id.encode("utf-8"))
    return bytes(a ^ b for a, b in zip(bytes.fromhex(prompt_sha256), mask, strict=True)).hex()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def job_mac(job: dict[str, Any], secret: str) -> str:
    covered = {name: job.get(name) for name in COVERED}
    covered.update({name: job[name] for name in COVERED_WHEN_PRESENT if name in job})
    return _hmac(secret, _JOB_LABEL, _canonical(covered)).hex()


def seal_job(job: dict[str, Any], secret: str) -> None:
    job[MAC_FIELD] = job_mac(job, secret)


def bind_prompt(job: dict[str, Any], prompt_sha256: str, secret: str) -> None:
    """Record the (masked) prompt hash the sessionID was made from, then seal the job."""
    job[PROMPT_HASH_FIELD] = mask_prompt_hash(prompt_sha256, str(job["id"]), secret)
    seal_job(job, secret)


def check_job(job: dict[str, Any], secret: str | None, expected_id: str) -> str:
    """``""`` if the plugin wrote this job as it is, else why not (for the log; never shown)."""
    if secret is None:
        return "no-session-secret"
    sid = job.get("id")
    if sid != expected_id:
        return "id-not-file-name"
    masked = job.get(PROMPT_HASH_FIELD)
    if not isinstance(masked, str) or not _HEX64.match(masked):
        return "no-prompt-hash"
    digest = mask_prompt_hash(masked, expected_id, secret)
    host, key, turn = job.get("agent"), job.get("sessionKey"), job.get("generationKey")
    if not (isinstance(host, str) and isinstance(key, str) and isinstance(turn, str)):
        return "bad-identity"
    if not hmac.compare_digest(proposal_id_from_hash(host, key, turn, digest, secret), expected_id):
        return "id-mismatch"
    mac = job.get(MAC_FIELD)
    if not isinstance(mac, str) or not hmac.compare_digest(mac, job_mac(job, secret)):
        return "mac-mismatch"
    return ""


def pair_mac(host: str, session_key: str, user_text: str, model_text: str, secret: str) -> str:
    """The MAC of a confirm pair (the model text of a continuation the host shows, handed back on
    the next prompt)."""
    return _hmac(secret, _PAIR_LABEL, _canonical([host, session_key, user_text, model_text])).hex()
