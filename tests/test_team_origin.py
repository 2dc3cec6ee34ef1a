"""Where a memory comes from is shown wherever memories are listed: the user's own (本机) or the
team's (the ``.memself/`` file of which repository). Team memories of the current repository are
in ``memself list``/``read``, the MCP tools and ``memself recall`` (the engine's preview and the
local one). Real git repositories, the real command line, the real model and engine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memself.mcp_server import MemoryTools
from memself.paths import DataPaths
from memself.store import team
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import workspace_of
from tests.support.cli import memself
from tests.support.helpers import T0

TEAM_RULE = "提交信息一律写中文并带上需求单号"
OWN_RULE = "回答问题时一律使用中文"
TEAM_FACT = "支付回调的签名校验在 callback/verify.py 里实现，密钥从配置中心读取"
QUESTION = "支付回调的签名校验在哪里实现"


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def carry(repo: Path, group: str, mem_id: str, text: str) -> None:
    folder = repo / ".memself"
    folder.mkdir(exist_ok=True)
    line = json.dumps({"id": mem_id, "text": text, "confidence": 0.7, "category": group}, ensure_ascii=False)
    (folder / f"{group}.jsonl").write_text(line + "\n", encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    pay = git_repo(tmp_path / "pay")
    carry(pay, "rule", "r1", TEAM_RULE)
    carry(pay, "project", "f1", TEAM_FACT)
    MemoryStore(DataPaths.default()).add(OWN_RULE, "rule", T0)
    return pay


def origin(repo: Path, group: str) -> str:
    return f"来源：团队（{repo} 的 .memself/{group}.jsonl）"


def test_list_and_read_show_the_teams_memories_with_their_origin(repo: Path, tmp_path: Path) -> None:
    listed = memself("list", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert f"本仓库 {repo / '.memself'} 携带的团队记忆（只读）：rule 1 条，project 1 条" in out
    team_line = next(line for line in out.splitlines() if TEAM_RULE in line)
    assert origin(repo, "rule") in team_line and f"id {team.ID_PREFIX}r1" in team_line
    own_line = next(line for line in out.splitlines() if OWN_RULE in line)
    assert "来源：本机" in own_line
    data = json.loads(memself("list", "--json", cwd=repo).stdout)
    assert {m["origin"] for m in data["memories"]} == {"local"}
    assert [(m["text"], m["origin"], m["teamFile"]) for m in data["team"]] == [
        (TEAM_RULE, "team", str(repo / ".memself" / "rule.jsonl")),
        (TEAM_FACT, "team", str(repo / ".memself" / "project.jsonl")),
    ]
    read = memself("read", "rule", cwd=repo).stdout
    assert f"   {origin(repo, 'rule')}，只读" in read.splitlines() and "   来源：本机" in read.splitlines()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert TEAM_RULE not in memself("list", cwd=elsewhere).stdout
    assert TEAM_RULE not in memself("read", "rule", cwd=elsewhere).stdout


def test_mcp_tools_show_the_teams_memories_of_the_current_project(repo: Path) -> None:
    tools = MemoryTools(DataPaths.default(), "claude", workspace=workspace_of(str(repo)))
    read = tools.memory_read({"group": "rule"})
    team_line = next(line for line in read.splitlines() if TEAM_RULE in line)
    assert origin(repo, "rule") in team_line and "只读" in team_line
    assert "来源：本机" in next(line for line in read.splitlines() if OWN_RULE in line)
    listed = tools.memory_list({})
    assert "当前项目的仓库 .memself/ 携带团队记忆（只读）：rule 1 条，project 1 条" in listed
    nowhere = MemoryTools(DataPaths.default(), "claude", workspace=None).memory_read({"group": "rule"})
    assert TEAM_RULE not in nowhere


def test_recall_previews_the_teams_facts_marked_locally_and_through_the_engine(
    repo: Path, e5_engine_home: DataPaths, tmp_path: Path
) -> None:
    from memself.engine.client import call_engine

    local = memself("recall", QUESTION, cwd=repo)  # no engine running: computed in the process
    assert local.returncode == 0, local.stderr
    hit = next(line for line in local.stdout.splitlines() if TEAM_FACT in line)
    assert origin(repo, "project") in hit and f"id {team.ID_PREFIX}f1" in hit
    other = git_repo(tmp_path / "other")
    assert TEAM_FACT not in memself("recall", QUESTION, cwd=other).stdout
    detail = call_engine(e5_engine_home, "preview", {"text": QUESTION, "workspace": str(repo)}, timeout_s=120)
    assert [h["id"] for h in detail["groups"]["project"]["hits"]] == [team.ID_PREFIX + "f1"]
    warm = memself("recall", QUESTION, cwd=repo)  # the engine is up now: its preview
    assert origin(repo, "project") in warm.stdout


def test_the_page_lists_each_repositorys_team_memories_as_the_teams(repo: Path) -> None:
    from memself.page.listing import refresh_views

    paths = DataPaths.default()
    MemoryStore(paths).add("支付服务本地调试端口是 8081", "project", T0, workspace=workspace_of(str(repo)))
    page = refresh_views(paths, T0).read_text("utf-8")
    raw = page.split('<script type="application/json" id="memself-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(raw)
    names = [name for _, name, _ in data["scopes"]]
    assert names[-1] == "团队：pay" and data["scopes"][-1][0] == f"{repo}/.memself"
    assert "只读" in data["scopes"][-1][2] and "本机" in data["scopes"][-1][2]
    team_rows = {row[1] for row in data["rows"] if row[7] == len(names) - 1}
    assert team_rows == {TEAM_RULE, TEAM_FACT}
    assert "另有仓库 .memself/ 携带的团队记忆 <b>2</b> 条（只读）" in page
