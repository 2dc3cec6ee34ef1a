"""The judge may propose "team" in a git repository; the popup offers it; accepting it writes the
memory for the workspace and shares it into the repository's ``.memself/`` (never committed).
A real local HTTP judge, real git repositories, the real store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memself.judge import jobs, prompts
from memself.judge.resolve import MSG_MISMATCH, ResolveRejected, resolve
from memself.store import team
from memself.store.workspaces import workspace_of
from memself.text.messages import popup_options
from tests.support.judge_helpers import NOW, judge, proposal, ready, start_job, stop
from tests.support.judge_helpers import judged_data as setup
from tests.support.judge_helpers import run_judge_job as run
from tests.support.judge_server import remember, sse

__all__ = ["judge"]

RULE = "数据库迁移脚本必须可以重复执行"


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def system_prompts(judge) -> list[str]:
    return [m["content"] for r in judge.requests for m in r.body["messages"] if m["role"] == "system"]


def team_prop(text: str = RULE, group: str = "rule") -> dict:
    return {**proposal(text, category=group), "scope": "team"}


def test_the_judge_is_offered_team_in_a_git_repository_only(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=True)
    repo = git_repo(tmp_path / "pay")
    sid = start_job(paths, f"记住：{RULE}，大家都要遵守", workspace=str(repo))
    judge.script(sse(remember(RULE, "rule", scope="team")))
    job = run(paths, store, sid)
    assert system_prompts(judge) == [prompts.REMEMBER_SYSTEM_TEAM]
    assert '"global、workspace 或 team"' not in prompts.REMEMBER_SYSTEM_SCOPED
    assert "team" in prompts.REMEMBER_SYSTEM_TEAM and "team" not in prompts.REMEMBER_SYSTEM_SCOPED
    assert job["proposal"]["scope"] == "team"
    # A plain directory: not offered, and an answer that says team anyway is this workspace's.
    plain = tmp_path / "notes"
    plain.mkdir()
    judge.requests.clear()
    other = start_job(paths, f"记住：{RULE}", workspace=str(plain), turn="turn-2")
    judge.script(sse(remember(RULE, "rule", scope="team")))
    job = run(paths, store, other)
    assert system_prompts(judge) == [prompts.REMEMBER_SYSTEM_SCOPED]
    assert job["proposal"]["scope"] == "workspace"


def test_the_popup_shows_and_offers_the_team_scope(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=True)
    repo = git_repo(tmp_path / "pay")
    options = popup_options(team_prop(), "pay")
    assert [d for _, d in options] == [
        "create_rule_team",
        "create_rule_here",
        "create_project_team",
        "discard",
    ]
    assert options[0][0].startswith(
        "落成，使用推荐标签 rule，范围：团队共享（写入 pay 仓库的 .memself/，由你检查后提交）"
    )
    ready(paths, f"记住：{RULE}", team_prop(), workspace=str(repo))
    visible, model = stop(paths, store)
    assert "   范围：团队共享（写入 pay 仓库的 .memself/，由你检查后提交）（推荐）" in visible.split("\n")
    assert f"「{RULE}」 → create_rule_team" in model and "create_rule_team" in model


def test_accepting_team_writes_here_and_into_memself_without_a_commit(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=True)
    repo = git_repo(tmp_path / "pay")
    sid = ready(paths, f"记住：{RULE}", team_prop(), workspace=str(repo))
    assert stop(paths, store) is not None
    notice = resolve(paths, store, "claude", sid, "create_rule_team", NOW)
    [memory] = store.all()
    assert (memory.category, memory.workspace) == ("rule", str(repo))
    [record] = [
        json.loads(line) for line in (repo / ".memself" / "rule.jsonl").read_text("utf-8").splitlines()
    ]
    assert record["id"] == memory.id and record["text"] == RULE and "workspace" not in record
    assert f"已写入 {repo / '.memself' / 'rule.jsonl'}" in notice and "不会替你提交" in notice
    assert f"git -C {repo} add .memself/rule.jsonl" in notice
    assert "\n" not in notice  # one line, as every resolve notice
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "?? .memself/\n"
    assert [m.text for m in team.team_memories(str(repo), "rule")] == [RULE]
    assert jobs.load_job(paths, sid)["reason"] == "create_rule_team"


def test_team_is_refused_when_the_popup_did_not_offer_it(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=True)
    repo = git_repo(tmp_path / "pay")
    sid = ready(paths, f"记住：{RULE}", {**proposal(RULE), "scope": "workspace"}, workspace=str(repo))
    assert stop(paths, store) is not None
    with pytest.raises(ResolveRejected) as info:
        resolve(paths, store, "claude", sid, "create_rule_team", NOW)
    assert str(info.value) == MSG_MISMATCH
    assert store.all() == [] and not (repo / ".memself").exists()


def test_outside_a_repository_team_falls_back_to_the_workspace_and_says_so(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=True)
    plain = tmp_path / "notes"
    plain.mkdir()
    space = workspace_of(str(plain))
    assert space is not None
    sid = ready(paths, f"记住：{RULE}", team_prop(), workspace=space.key)
    assert stop(paths, store) is not None
    notice = resolve(paths, store, "claude", sid, "create_rule_team", NOW)
    [memory] = store.all()
    assert memory.workspace == space.key
    assert "不在 git 仓库里，没有写入团队记忆，改为仅此项目" in notice
    assert not (plain / ".memself").exists()


def test_confirm_off_never_writes_into_the_repository(judge, tmp_path: Path) -> None:
    paths, store = setup(judge, confirm=False)
    repo = git_repo(tmp_path / "pay")
    sid = start_job(paths, f"记住：{RULE}，大家都要遵守", workspace=str(repo))
    judge.script(sse(remember(RULE, "rule", scope="team")))
    job = run(paths, store, sid)
    [memory] = store.all()
    assert memory.workspace == str(repo)
    assert not (repo / ".memself").exists()
    assert f"memself share {memory.id}" in job["notice"]
