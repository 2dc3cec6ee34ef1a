"""Run one real client against the fake API and record what reached the model.

``python driver.py SPEC.json RESULT.json``; the caller may wrap it in ``unshare -n`` so the
fake API and the client share a namespace that has only loopback. Standard library only.

SPEC: ``argv``, ``env``, ``cwd``, ``files`` (path -> text, written first), ``stdin`` (text),
``mode`` (``plain``: write stdin and close; ``stream-json``: write stdin, keep it open until the
session has been idle for ``idle_s`` after a ``result`` message; ``followups``: further stdin
texts, each written once the session has been idle that long after the previous one's result),
``timeout``, ``netns`` (bring
``lo`` up first), ``rules`` (scripted replies of the fake API, see ``fakeapi.match_rule``).
``{base}`` in env values, argv and files becomes the fake API's address.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # after the path insert: this file runs as a script


def lo_up() -> None:
    """A new network namespace starts with ``lo`` down; SIOCSIFFLAGS brings it up."""
    import fcntl

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        req = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, req))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def run_plain(spec: dict, argv: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run(
        argv,
        input=spec.get("stdin", "").encode(),
        env=env,
        cwd=spec["cwd"],
        capture_output=True,
        timeout=spec.get("timeout", 120),
    )
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout.decode("utf-8", "replace"),
        "stderr": proc.stderr.decode("utf-8", "replace"),
    }


def run_stream(spec: dict, argv: list[str], env: dict[str, str], api: FakeAPI) -> dict:
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=spec["cwd"]
    )
    lines: list[str] = []
    errs: list[bytes] = []
    last = {"t": time.monotonic(), "results": 0}

    def pump_out() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            last["t"] = time.monotonic()
            try:
                if json.loads(line).get("type") == "result":
                    last["results"] += 1
            except (ValueError, AttributeError):
                pass

    def pump_err() -> None:
        assert proc.stderr is not None
        errs.append(proc.stderr.read())

    threads = [threading.Thread(target=pump_out, daemon=True), threading.Thread(target=pump_err, daemon=True)]
    for thread in threads:
        thread.start()
    assert proc.stdin is not None
    proc.stdin.write(spec.get("stdin", "").encode())
    proc.stdin.flush()
    deadline = time.monotonic() + spec.get("timeout", 120)
    idle_s = spec.get("idle_s", 3.0)
    followups: list[str] = list(spec.get("followups", []))
    sent = 0
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        count = len(api.recorder.requests)
        if count != seen:
            seen = count
            last["t"] = time.monotonic()
        if last["results"] and time.monotonic() - last["t"] > idle_s:
            if sent < len(followups) and last["results"] > sent:
                proc.stdin.write(followups[sent].encode())
                proc.stdin.flush()
                sent += 1
                last["t"] = time.monotonic()
                continue
            break
    proc.stdin.close()
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for thread in threads:
        thread.join(timeout=5)
    return {
        "rc": proc.returncode,
        "stdout": "".join(lines),
        "stderr": b"".join(errs).decode("utf-8", "replace"),
    }


def main() -> None:
    spec_path, result_path = sys.argv[1], sys.argv[2]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    if spec.get("netns"):
        lo_up()
    with FakeAPI(spec.get("rules")) as api:
        sub = lambda text: text.replace("{base}", api.base)  # noqa: E731
        env = {key: sub(value) for key, value in spec["env"].items()}
        for path, text in spec.get("files", {}).items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(sub(text))
        argv = [sub(arg) for arg in spec["argv"]]
        started = time.monotonic()
        try:
            if spec.get("mode", "plain") == "stream-json":
                result = run_stream(spec, argv, env, api)
            else:
                result = run_plain(spec, argv, env)
        except subprocess.TimeoutExpired as exc:
            result = {"rc": None, "stdout": str(exc.stdout), "stderr": "timeout"}
        result["elapsed_s"] = round(time.monotonic() - started, 3)
        time.sleep(0.2)  # let a last in-flight request land
        with api.recorder.lock:
            result["requests"] = list(api.recorder.requests)
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)


if __name__ == "__main__":
    main()
