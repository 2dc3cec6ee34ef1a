"""The id of a judge proposal: ``s_`` + HMAC-SHA256 over the turn's identity.

It is what the original plugin calls the ``sessionID`` (the name the popup instruction and
``memory_resolve`` still use on the wire), not the host's session key. A retried hook (same host,
session, turn and prompt) gets the same id; anyone without the local secret cannot forge one for a
proposal they did not see.
"""

from __future__ import annotations

import hashlib
import hmac
import re

PROPOSAL_ID_RE = re.compile(r"^s_[a-f0-9]{64}$")
_VERSION = "1"


def normalise_prompt(prompt: str) -> str:
    """CRLF and CR become LF, then surrounding whitespace is trimmed."""
    return prompt.replace("\r\n", "\n").replace("\r", "\n").strip()


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(normalise_prompt(prompt).encode("utf-8")).hexdigest()


def proposal_id(host: str, session_key: str, turn_id: str, prompt: str, secret: str) -> str:
    """``s_`` + hex HMAC; the key is the hex secret string's UTF-8 bytes, not its decoded bytes."""
    return proposal_id_from_hash(host, session_key, turn_id, prompt_hash(prompt), secret)


def proposal_id_from_hash(host: str, session_key: str, turn_id: str, prompt_sha256: str, secret: str) -> str:
    """The same id from the prompt's hash: how a stored job's id is checked again later."""
    material = "\0".join((host, session_key, turn_id, prompt_sha256, _VERSION))
    digest = hmac.new(secret.encode("utf-8"), material.encode("utf-8"), hashlib.sha256)
    return "s_" + digest.hexdigest()


def is_proposal_id(value: object) -> bool:
    return isinstance(value, str) and bool(PROPOSAL_ID_RE.match(value))
