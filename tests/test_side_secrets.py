"""session-secret and side-secret.json; the HMAC sessionID (checklist 14)."""

from __future__ import annotations

import hashlib
import hmac
import stat
import threading

import pytest

from memself.errors import CorruptFile
from memself.paths import DataPaths
from memself.side.secrets import load_or_create_session_secret, read_api_key, write_api_key
from memself.side.session_id import SESSION_ID_RE, normalise_prompt, session_id

SECRET = "a" * 64


def test_secret_created_once_mode_600_and_reread() -> None:
    paths = DataPaths.default()
    first = load_or_create_session_secret(paths)
    assert len(first) == 64 and all(c in "0123456789abcdef" for c in first)
    assert stat.S_IMODE(paths.session_secret.stat().st_mode) == 0o600
    assert paths.session_secret.read_text() == first + "\n"
    assert load_or_create_session_secret(paths) == first


def test_secret_race_gives_one_value() -> None:
    paths = DataPaths.default()
    results: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        try:
            results.append(load_or_create_session_secret(paths))
        except BaseException as exc:  # a thread's exception would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(results)) == 1 and len(results) == 8


def test_invalid_secret_is_an_error_not_replaced() -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.session_secret.write_text("not-a-secret\n")
    with pytest.raises(CorruptFile):
        load_or_create_session_secret(paths)
    assert paths.session_secret.read_text() == "not-a-secret\n"


def test_api_key_roundtrip_mode_600() -> None:
    paths = DataPaths.default()
    assert read_api_key(paths) == ""
    write_api_key(paths, " sk-test-123 ")
    assert read_api_key(paths) == "sk-test-123"
    assert stat.S_IMODE(paths.side_secret.stat().st_mode) == 0o600
    write_api_key(paths, "")
    assert not paths.side_secret.exists()
    paths.side_secret.write_text("{broken")
    assert read_api_key(paths) == ""


def test_session_id_matches_spec_exactly() -> None:
    prompt = "  记住：以后回答都用中文\r\n第二行\r"
    sid = session_id("claude", "sess-1", "turn-9", prompt, SECRET)
    digest = hashlib.sha256("记住：以后回答都用中文\n第二行".encode()).hexdigest()
    material = f"claude\0sess-1\0turn-9\0{digest}\0" + "1"
    expected = "s_" + hmac.new(SECRET.encode(), material.encode(), hashlib.sha256).hexdigest()
    assert sid == expected
    assert SESSION_ID_RE.match(sid)


def test_session_id_stable_and_sensitive() -> None:
    base = session_id("cursor", "c1", "g1", "记住 用中文", SECRET)
    assert base == session_id("cursor", "c1", "g1", "记住 用中文\r\n", SECRET)
    assert base != session_id("cursor", "c1", "g1", "记住 用中文", "b" * 64)
    assert base != session_id("cursor", "c1", "g2", "记住 用中文", SECRET)
    assert base != session_id("cursor", "c1", "g1", "记住 用英文", SECRET)
    assert base != session_id("cursor", "c2", "g1", "记住 用中文", SECRET)
    assert base != session_id("codebuddy", "c1", "g1", "记住 用中文", SECRET)


def test_normalise_prompt() -> None:
    assert normalise_prompt("\r\n a\r\nb\rc \n") == "a\nb\nc"
