"""session-secret and side-secret.json; the HMAC sessionID (checklist 14)."""

from __future__ import annotations

import hashlib
import hmac
import json
import stat
import threading

import pytest

from memself.errors import InvalidInput, KeyEndpointMismatch, KeyFileInvalid, KeyUnconfirmed
from memself.judge.credentials import (
    bind_key,
    ensure_session_secret,
    key_for_endpoint,
    key_state,
    load_or_create_session_secret,
    read_key_file,
    read_session_secret,
    same_base,
    session_secret_problem,
    set_aside_secrets,
    shown_base,
    write_api_key,
)
from memself.judge.proposal_id import PROPOSAL_ID_RE, normalise_prompt, proposal_id
from memself.paths import DataPaths

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


def test_invalid_secret_is_set_aside_and_replaced() -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.session_secret.write_text("not-a-secret\n")
    assert read_session_secret(paths) is None
    assert session_secret_problem(paths) == "内容不是 64 位小写十六进制"
    value, aside = ensure_session_secret(paths)
    assert aside is not None and aside.read_text() == "not-a-secret\n"
    assert set_aside_secrets(paths) == [aside]
    assert paths.session_secret.read_text() == value + "\n" and read_session_secret(paths) == value
    assert stat.S_IMODE(paths.session_secret.stat().st_mode) == 0o600
    assert ensure_session_secret(paths) == (value, None)
    log = paths.log_file.read_text()
    assert "session-secret-invalid" in log and value not in log


def test_api_key_roundtrip_mode_600() -> None:
    paths = DataPaths.default()
    assert read_key_file(paths).state == "missing"
    write_api_key(paths, " sk-test-123 ")
    assert (read_key_file(paths).state, read_key_file(paths).key) == ("ok", "sk-test-123")
    assert stat.S_IMODE(paths.side_secret.stat().st_mode) == 0o600
    write_api_key(paths, "")
    assert not paths.side_secret.exists()
    paths.side_secret.write_text("{broken")
    assert read_key_file(paths).state == "invalid"


def test_session_id_matches_spec_exactly() -> None:
    prompt = "  记住：以后回答都用中文\r\n第二行\r"
    sid = proposal_id("claude", "sess-1", "turn-9", prompt, SECRET)
    digest = hashlib.sha256("记住：以后回答都用中文\n第二行".encode()).hexdigest()
    material = f"claude\0sess-1\0turn-9\0{digest}\0" + "1"
    expected = "s_" + hmac.new(SECRET.encode(), material.encode(), hashlib.sha256).hexdigest()
    assert sid == expected
    assert PROPOSAL_ID_RE.match(sid)


def test_session_id_stable_and_sensitive() -> None:
    base = proposal_id("cursor", "c1", "g1", "记住 用中文", SECRET)
    assert base == proposal_id("cursor", "c1", "g1", "记住 用中文\r\n", SECRET)
    assert base != proposal_id("cursor", "c1", "g1", "记住 用中文", "b" * 64)
    assert base != proposal_id("cursor", "c1", "g2", "记住 用中文", SECRET)
    assert base != proposal_id("cursor", "c1", "g1", "记住 用英文", SECRET)
    assert base != proposal_id("cursor", "c2", "g1", "记住 用中文", SECRET)
    assert base != proposal_id("codebuddy", "c1", "g1", "记住 用中文", SECRET)


def test_normalise_prompt() -> None:
    assert normalise_prompt("\r\n a\r\nb\rc \n") == "a\nb\nc"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("https://api.example.com/v1", "https://api.example.com/v1/"),
        ("https://api.example.com/v1", "HTTPS://API.Example.COM/v1"),
        ("https://api.example.com/v1", "https://api.example.com:443/v1"),
        ("http://127.0.0.1/v1", "http://127.0.0.1:80/v1"),
        ("https://api.example.com/v1", "https://api.example.com/v1/chat/completions"),
        ("https://api.example.com/v1", "  https://api.example.com/v1  "),
    ],
)
def test_same_base_ignores_spelling(first: str, second: str) -> None:
    assert same_base(first, second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("https://api.example.com/v1", "http://api.example.com/v1"),
        ("https://api.example.com/v1", "https://api.example.com:8443/v1"),
        ("https://api.example.com/v1", "https://api.example.com.evil.io/v1"),
        ("https://api.example.com/v1", "https://api.example.com@evil.io/v1"),
        ("https://api.example.com/v1", "https://evil.io/v1?https://api.example.com/v1"),
        ("https://api.example.com/v1", "https://api.example.com/v2"),
        ("https://api.example.com/v1", "https://api.example.com/V1"),
        ("https://api.example.com/v1", "https://api.example.com"),
    ],
)
def test_same_base_tells_other_endpoints_apart(first: str, second: str) -> None:
    assert not same_base(first, second)


def test_shown_base_drops_credentials() -> None:
    assert shown_base("https://user:pw@api.example.com/v1") == "https://api.example.com/v1"
    assert shown_base("https://api.example.com/v1") == "https://api.example.com/v1"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "是空文件"),
        (b"{broken", "不是合法的 JSON"),
        (b"[1]", "不是 JSON 对象"),
        (b'{"apiKey": 5}', "apiKey 不是一行字符串"),
        (b"\xff\xfe", "不是合法的 JSON"),
        (b'{"apiKey": "sk", "boundApiBase": 3}', "boundApiBase 不是字符串"),
    ],
)
def test_unusable_key_file_is_invalid_not_missing(content: bytes, problem: str) -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.side_secret.write_bytes(content)
    found = read_key_file(paths)
    assert (found.state, found.problem) == ("invalid", problem)
    with pytest.raises(KeyFileInvalid):
        key_for_endpoint(paths, "https://api.example.com/v1")


def test_an_original_file_is_sent_nowhere_until_bound_then_refuses_others() -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.side_secret.write_text(json.dumps({"apiKey": "sk-legacy"}))
    assert read_key_file(paths).bound_base == ""
    with pytest.raises(KeyUnconfirmed) as unconfirmed:
        key_for_endpoint(paths, "https://api.example.com/v1")
    assert "sk-legacy" not in str(unconfirmed.value) and "memself doctor" in str(unconfirmed.value)
    assert json.loads(paths.side_secret.read_text()) == {"apiKey": "sk-legacy"}  # nothing bound
    bind_key(paths, "https://api.example.com/v1")  # what the user's confirmation does
    assert json.loads(paths.side_secret.read_text()) == {
        "apiKey": "sk-legacy",
        "boundApiBase": "https://api.example.com/v1",
    }
    assert stat.S_IMODE(paths.side_secret.stat().st_mode) == 0o600
    # Another spelling of the same endpoint: the request goes to the bound spelling.
    assert key_for_endpoint(paths, "HTTPS://api.example.com:443/v1/") == (
        "sk-legacy",
        "https://api.example.com/v1",
    )
    with pytest.raises(KeyEndpointMismatch) as info:
        key_for_endpoint(paths, "https://evil.io/v1")
    assert "sk-legacy" not in str(info.value) and "memself key set" in str(info.value)
    # A bound key is never moved by a confirmation: only re-entering it changes its address.
    with pytest.raises(InvalidInput):
        bind_key(paths, "https://evil.io/v1")
    assert "side-key-bound" in paths.log_file.read_text() and "sk-legacy" not in paths.log_file.read_text()


def test_key_state() -> None:
    paths = DataPaths.default()
    assert key_state(read_key_file(paths), "https://a/v1") == "missing"
    write_api_key(paths, "sk-1")
    assert key_state(read_key_file(paths), "https://a/v1") == "unbound"
    write_api_key(paths, "sk-1", "https://a/v1")
    assert key_state(read_key_file(paths), "https://a/v1/") == "ok"
    assert key_state(read_key_file(paths), "https://b/v1") == "mismatch"
