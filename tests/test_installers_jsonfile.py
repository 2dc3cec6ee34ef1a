"""Editing other programs' JSON files: style, backup, atomicity, refusal, locking, markers."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from memself.hook.command import hook_command_line
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.install import entries, jsonfile
from memself.install.jsonfile import ForeignFileError

OURS = hook_command_line("claude")
LEGACY = '"/usr/local/bin/node" "/Users/dev/memory-self-evolution/bin/memory.mjs" hook --agent claude'
EVENTS = [
    entries.Registration("SessionStart", 10, OURS),
    entries.Registration("UserPromptSubmit", 10, OURS),
    entries.Registration("Stop", 20, OURS),
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    # tmp_path also holds the fake HOME; tests that list a folder need one of their own.
    work = tmp_path / "work"
    work.mkdir()
    return work


def add_key(data: dict[str, Any], path: Path) -> dict[str, Any]:
    data["added"] = True
    return data


def install(data: dict[str, Any], path: Path) -> dict[str, Any]:
    return entries.upsert_nested_hooks(data, path, EVENTS)


@pytest.mark.parametrize(
    "text",
    [
        '{\n\t"a": 1,\n\t"b": [\n\t\t1\n\t]\n}\n',
        '{\n    "a": 1,\n    "b": {\n        "c": "中文"\n    }\n}',
        '{"a":1,"b":[1,2]}',
        '{"a": 1, "b": [1, 2]}\n',
        '{\n  "a": "\\u4e2d\\u6587"\n}\n',
        '\ufeff{\n  "a": 1\n}\n',
    ],
)
def test_style_is_kept(folder: Path, text: str) -> None:
    path = folder / "f.json"
    path.write_bytes(text.encode("utf-8"))
    assert jsonfile.apply_edit(path, lambda d, p: d).changed is False
    assert path.read_bytes() == text.encode("utf-8")
    jsonfile.apply_edit(path, add_key)
    new = path.read_text(encoding="utf-8")
    doc = jsonfile.load(path)
    assert doc.data == {**json.loads(text.lstrip("\ufeff")), "added": True}
    # Re-serialising the original in the detected style reproduces it byte for byte.
    original = jsonfile.parse_bytes(path, text.encode("utf-8"))
    assert original[1].dumps(original[0]) == text
    assert new.endswith("\n") == text.endswith("\n")
    assert new.startswith("\ufeff") == text.startswith("\ufeff")


def test_backup_is_taken_once_and_mode_kept(folder: Path) -> None:
    path = folder / "settings.json"
    path.write_text('{"x": 1}\n')
    path.chmod(0o600)
    jsonfile.apply_edit(path, add_key)
    bak = jsonfile.backup_path(path)
    assert bak.read_text() == '{"x": 1}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text('{"x": 2}\n')
    jsonfile.apply_edit(path, add_key)
    assert bak.read_text() == '{"x": 1}\n', "the backup of the user's original is never overwritten"


def test_symlinked_file_is_edited_through_the_link(folder: Path) -> None:
    real = folder / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("{}\n")
    link = folder / "settings.json"
    link.symlink_to(real)
    jsonfile.apply_edit(link, add_key)
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {"added": True}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"hooks": {', "不是合法的 JSON"),
        (b'{"a": 1,}', "不是合法的 JSON"),
        (b"\xff\xfe{}", "不是 UTF-8"),
        (b"[1, 2]", "顶层不是 JSON 对象"),
        (b'{"hooks": []}', "hooks 应为 JSON 对象"),
        (b'{"hooks": {"Stop": {}}}', "hooks.Stop 应为 JSON 数组"),
    ],
)
def test_refuses_what_it_cannot_merge_safely(folder: Path, raw: bytes, message: str) -> None:
    path = folder / "settings.json"
    path.write_bytes(raw)
    with pytest.raises(ForeignFileError, match=message) as info:
        jsonfile.apply_edit(path, install)
    assert str(path) in str(info.value)
    assert path.read_bytes() == raw
    assert sorted(p.name for p in folder.iterdir()) == ["settings.json"]


def test_blank_file_counts_as_empty(folder: Path) -> None:
    path = folder / "mcp.json"
    path.write_text("  \n")
    jsonfile.apply_edit(path, add_key)
    assert json.loads(path.read_text()) == {"added": True}


def test_failed_transform_leaves_no_trace(folder: Path) -> None:
    path = folder / "f.json"
    path.write_text('{"a": 1}\n')

    def boom(data: dict[str, Any], p: Path) -> dict[str, Any]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        jsonfile.apply_edit(path, boom)
    assert sorted(p.name for p in folder.iterdir()) == ["f.json"]


def _add_many(path: str, prefix: str) -> None:
    for i in range(25):
        key = f"{prefix}{i}"

        def add(data: dict[str, Any], p: Path, key: str = key, i: int = i) -> dict[str, Any]:
            data[key] = i
            return data

        jsonfile.apply_edit(Path(path), add)


def test_concurrent_editors_lose_nothing(folder: Path) -> None:
    path = folder / "f.json"
    path.write_text("{}\n")
    # spawn, not fork: what Windows has (and the foreign-platform mode leaves).
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_many, args=(str(path), p)) for p in ("a", "b", "c")]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(json.loads(path.read_text())) == 75


def test_duplicates_and_legacy_collapse_into_one_entry_in_place(folder: Path) -> None:
    other = {"type": "command", "command": "echo other"}
    data = {
        "hooks": {
            "Stop": [
                {"hooks": [other, {"type": "command", "command": LEGACY, "timeout": 20}]},
                {"hooks": [{"type": "command", "command": OURS.replace("claude", "cursor")}]},
                {"matcher": "", "hooks": [{"type": "command", "command": OURS}]},
            ]
        }
    }
    result = install(data, folder / "s.json")
    assert result["hooks"]["Stop"] == [{"hooks": [other, entries.claude_handler(OURS, 20)]}]
    assert list(result["hooks"]) == ["Stop", "SessionStart", "UserPromptSubmit"]


def test_a_command_at_the_entrys_old_place_is_replaced_not_doubled(folder: Path) -> None:
    """Setup before the entry moved out of the package registered <root>/memself/hooks/entry.py."""
    old = OURS.replace("/hooks/entry.py", "/memself/hooks/entry.py")
    assert old != OURS and entries.is_our_hook(old)
    data = {
        "hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": old, "timeout": 20}]}]}
    }
    result = install(data, folder / "s.json")
    assert result["hooks"]["Stop"] == [{"matcher": "", "hooks": [entries.claude_handler(OURS, 20)]}]
    assert all(old not in json.dumps(groups) for groups in result["hooks"].values())


def test_foreign_commands_that_look_similar_are_not_ours() -> None:
    assert entries.is_our_hook(OURS)
    assert entries.is_our_hook(LEGACY)
    assert not entries.is_our_hook("python3 /opt/other/hooks/entry.py")
    assert not entries.is_our_hook("node /x/memory.mjs list")
    assert not entries.is_our_hook(None)


def test_flat_entries_keep_position(folder: Path) -> None:
    ours = hook_command_line("cursor")
    data = {
        "version": 1,
        "hooks": {"stop": [{"command": "a"}, {"command": ours, "timeout": 1}, {"command": "b"}]},
    }
    stop = entries.Registration("stop", 20, ours)
    result = entries.upsert_flat_hooks(data, folder / "h.json", [stop])
    assert result["hooks"]["stop"] == [{"command": "a"}, {"command": ours, "timeout": 20}, {"command": "b"}]
    # Per-event fields (Cursor's loop_limit) go into our entry only, in place and on a new event.
    fields = {"stop": {"loop_limit": 1}}
    start = entries.Registration("sessionStart", 10, ours)
    result = entries.upsert_flat_hooks(result, folder / "h.json", [stop, start], fields)
    assert result["hooks"]["stop"] == [
        {"command": "a"},
        {"command": ours, "timeout": 20, "loop_limit": 1},
        {"command": "b"},
    ]
    assert result["hooks"]["sessionStart"] == [{"command": ours, "timeout": 10}]


def test_removal_keeps_the_users_empty_containers(folder: Path) -> None:
    path = folder / "settings.json"
    original = b'{\n  "hooks": {},\n  "permissions": {\n    "allow": []\n  }\n}\n'
    path.write_bytes(original)
    jsonfile.apply_edit(path, lambda d, p: entries.add_allow_rule(install(d, p), p))
    assert jsonfile.load(path).data["permissions"]["allow"] == [entries.RESOLVE_RULE]
    jsonfile.apply_removal(
        path, lambda d, p: entries.remove_allow_rule(entries.remove_nested_hooks(d, p), p), install
    )
    assert path.read_bytes() == original
    assert not jsonfile.backup_path(path).exists()


def test_removal_keeps_what_the_user_added_after_install(folder: Path) -> None:
    path = folder / "settings.json"
    jsonfile.apply_edit(path, install)  # the file did not exist: no backup
    assert not jsonfile.backup_path(path).exists()
    data = json.loads(path.read_text())
    data["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo mine"}]})
    data["theme"] = "dark"
    path.write_text(json.dumps(data, indent=2) + "\n")
    jsonfile.apply_removal(path, entries.remove_nested_hooks, install)
    assert json.loads(path.read_text()) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]},
        "theme": "dark",
    }


def test_removal_of_a_file_we_created_deletes_it(folder: Path) -> None:
    path = folder / "settings.json"
    jsonfile.apply_edit(path, install)
    outcome = jsonfile.apply_removal(path, entries.remove_nested_hooks, install)
    assert outcome.after is None and not path.exists()
    assert os.listdir(folder) == []


def test_paths_with_spaces_are_quoted_and_still_recognised(folder: Path) -> None:
    import shlex

    from memself.install import INSTALLERS
    from memself.install.base import InstallContext

    INSTALLER = INSTALLERS["cursor"]

    def command(host: str, kind: EventKind) -> str:
        return shlex.join(
            [
                "/opt/My Python/bin/python",
                "-I",
                "-S",
                "/Users/dev/My Projects/memself/hooks/entry.py",
                "--agent",
                host,
                "--timeout",
                str(HOSTS[host].TIMEOUTS[kind]),
            ]
        )

    skill = Path(__file__).parent / "fixtures/installers/_skill/memory-self-evolution-manage"
    ctx = InstallContext(home=folder, skill_source=skill, hook_command=command)
    INSTALLER.apply(ctx)
    first = (folder / ".cursor/hooks.json").read_bytes()
    assert "'/Users/dev/My Projects/memself/hooks/entry.py'" in first.decode()
    INSTALLER.apply(ctx)
    assert (folder / ".cursor/hooks.json").read_bytes() == first
    INSTALLER.remove(ctx)
    assert not (folder / ".cursor/hooks.json").exists()
