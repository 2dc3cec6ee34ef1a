"""Workspaces on the command line as a user runs it (real subprocesses in real directories):
where `rule add` and `project add` put a memory, `move`, and what `list` and `read` show."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import memself


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    """Two repositories (with a subdirectory each) and a directory outside any repository."""
    out: dict[str, Path] = {}
    for name in ("pay-service", "shop"):
        root = tmp_path.resolve() / "code" / name
        (root / ".git").mkdir(parents=True)
        (root / "src" / "api").mkdir(parents=True)
        out[name] = root
    out["loose"] = tmp_path.resolve() / "loose"
    out["loose"].mkdir()
    return out


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def records(group: str, cwd: Path, *extra: str) -> list[dict]:
    return json.loads(ok(memself("read", group, "--json", *extra, cwd=cwd)))


def test_project_add_defaults_to_the_repository_rule_add_to_global(repos: dict[str, Path]) -> None:
    pay = repos["pay-service"]
    fact = ok(memself("project", "add", "支付服务的灰度开关是 pay_new_flow", cwd=pay / "src" / "api"))
    assert f"范围：仅项目 pay-service（{pay}）" in fact
    rule = ok(memself("rule", "add", "回答一律使用中文", cwd=pay / "src"))
    assert "范围：所有项目" in rule
    [project] = records("project", repos["loose"])
    assert project["workspace"] == str(pay) and project["workspaceName"] == "pay-service"
    [glob] = records("rule", repos["loose"])
    assert glob["workspace"] is None and glob["workspaceName"] is None
    # On disk a global record stays in the original's shape: no workspace keys at all.
    on_disk = json.loads(Path(os.environ["MEMSELF_HOME"], "rule.jsonl").read_text("utf-8"))
    assert "workspace" not in on_disk and "workspaceName" not in on_disk


def test_workspace_and_global_flags(repos: dict[str, Path]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    ok(memself("rule", "add", "提交前先跑 make lint", "--workspace", str(shop / "src"), cwd=pay))
    ok(memself("project", "add", "所有服务的日志都进 Loki", "--global", cwd=pay))
    ok(memself("project", "add", "本地开发数据库端口是 5433", cwd=repos["loose"]))
    assert [r["workspace"] for r in records("rule", pay)] == [str(shop)]
    by_text = {r["text"]: r["workspace"] for r in records("project", pay)}
    # Outside any repository the directory itself is the workspace.
    assert by_text == {"所有服务的日志都进 Loki": None, "本地开发数据库端口是 5433": str(repos["loose"])}


@pytest.mark.parametrize(
    "args, message",
    [
        (("rule", "add", "提交前先跑 make lint", "--workspace", ".", "--global"), "只能选一个"),
        (("project", "add", "提交前先跑 make lint", "--workspace", "/no/such"), "目录不存在：/no/such"),
        (("project", "add", "提交前先跑 make lint", "--workspace", "/"), "根目录不能作为项目范围"),
        (("move", "mem-nope", "--global"), "找不到记忆「mem-nope」"),
        (("move", "mem-nope"), "请用 --workspace DIR 或 --global"),
        (("list", "--workspace", "/no/such/dir"), "目录不存在"),
    ],
)
def test_bad_scopes_are_refused_and_nothing_is_written(
    repos: dict[str, Path], args: tuple[str, ...], message: str
) -> None:
    result = memself(*args, cwd=repos["pay-service"])
    assert result.returncode == 1 and result.stderr.startswith("错误：") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not Path(os.environ["MEMSELF_HOME"], "project.jsonl").exists()
    assert not Path(os.environ["MEMSELF_HOME"], "rule.jsonl").exists()


def test_a_duplicate_counts_only_where_the_scope_sees_it(repos: dict[str, Path]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    ok(memself("project", "add", "构建命令是 make build-all", cwd=pay))
    second = ok(memself("project", "add", "构建命令是 make build-all", cwd=shop))
    assert "已新增项目事实" in second and "shop" in second
    again = ok(memself("project", "add", "构建命令是 make build-all", cwd=shop / "src"))
    assert "已有相同的项目事实" in again and f"范围：仅项目 shop（{shop}）" in again
    assert sorted(r["workspaceName"] for r in records("project", pay)) == ["pay-service", "shop"]


def test_move_between_scopes(repos: dict[str, Path]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    ok(memself("rule", "add", "提交前先跑 make lint", cwd=pay))
    [before] = records("rule", pay)
    mem_id = before["id"]
    moved = ok(memself("move", mem_id, "--workspace", str(shop / "src" / "api"), cwd=pay))
    assert f"从「所有项目」改为「仅项目 shop（{shop}）」" in moved
    [after] = records("rule", pay)
    assert after["workspace"] == str(shop)
    unchanged = {k: v for k, v in after.items() if k not in ("workspace", "workspaceName")}
    assert unchanged == {k: v for k, v in before.items() if k not in ("workspace", "workspaceName")}
    assert "范围没有变化" in ok(memself("move", mem_id, "--workspace", str(shop), cwd=pay))
    back = ok(memself("move", mem_id, "--global", cwd=shop))
    assert f"从「仅项目 shop（{shop}）」改为「所有项目」" in back
    assert records("rule", pay) == [before]


def test_list_and_read_show_scopes_and_a_workspace_view(repos: dict[str, Path]) -> None:
    pay, shop = repos["pay-service"], repos["shop"]
    ok(memself("rule", "add", "回答一律使用中文", cwd=pay))
    ok(memself("rule", "add", "提交前先跑 make lint", "--workspace", str(pay), cwd=pay))
    ok(memself("project", "add", "支付服务的灰度开关是 pay_new_flow", cwd=pay))
    ok(memself("project", "add", "商城的图片都放在 OSS 的 shop-img 桶", cwd=shop))
    listed = ok(memself("list", cwd=repos["loose"]))
    assert "rule    2 条" in listed and "project 2 条" in listed and "共 4 条" in listed
    assert "  所有项目：rule 1 条，project 0 条\n" in listed
    assert f"  仅项目 pay-service（{pay}）：rule 1 条，project 1 条\n" in listed
    assert f"  仅项目 shop（{shop}）：rule 0 条，project 1 条\n" in listed
    as_json = json.loads(ok(memself("list", "--json", cwd=repos["loose"])))
    assert as_json["total"] == 4 and as_json["view"] is None
    assert as_json["workspaces"] == [
        {"workspace": None, "workspaceName": None, "rule": 1, "project": 0},
        {"workspace": str(pay), "workspaceName": "pay-service", "rule": 1, "project": 1},
        {"workspace": str(shop), "workspaceName": "shop", "rule": 0, "project": 1},
    ]
    # What a session in shop sees: the global memories and shop's, never pay-service's.
    view = json.loads(ok(memself("list", "--json", "--workspace", str(shop / "src"), cwd=pay)))
    assert (view["rule"], view["project"], view["total"]) == (1, 1, 2)
    assert view["view"] == {"workspace": str(shop), "workspaceName": "shop"}
    assert [w["workspaceName"] for w in view["workspaces"]] == [None, "shop"]
    shop_view = ok(memself("list", "--workspace", str(shop), cwd=pay))
    assert shop_view.startswith(f"在 shop（{shop}）里开的会话能看到的记忆") and "pay-service" not in shop_view
    read = ok(memself("read", "rule", cwd=shop)).splitlines()
    assert read[0] == "rule（共 2 条）"
    assert f"   范围：仅项目 pay-service（{pay}）" in read and "   范围：所有项目" in read
    seen = ok(memself("read", "rule", "--workspace", str(shop), cwd=pay)).splitlines()
    assert seen[0] == f"rule（共 1 条，在 shop（{shop}）里开的会话能看到的）"
    assert seen[1].startswith("1. 回答一律使用中文") and seen[2] == "   范围：所有项目"
    texts = [r["text"] for r in records("project", pay, "--workspace", str(pay))]
    assert texts == ["支付服务的灰度开关是 pay_new_flow"]


def test_a_removed_repository_can_still_be_viewed_by_its_exact_path(repos: dict[str, Path]) -> None:
    pay = repos["pay-service"]
    ok(memself("project", "add", "支付服务的灰度开关是 pay_new_flow", cwd=pay))
    shutil.rmtree(pay)
    [kept] = records("project", repos["loose"], "--workspace", str(pay))
    assert kept["workspace"] == str(pay)
    typo = memself("read", "project", "--workspace", str(pay) + "x", cwd=repos["loose"])
    assert typo.returncode == 1 and "目录不存在" in typo.stderr


def test_trash_json_carries_the_scope(repos: dict[str, Path]) -> None:
    pay = repos["pay-service"]
    ok(memself("project", "add", "支付服务的灰度开关是 pay_new_flow", cwd=pay))
    [fact] = records("project", pay)
    ok(memself("delete", fact["id"], cwd=pay))
    [entry] = json.loads(ok(memself("trash", "--json", cwd=pay)))
    assert entry["workspace"] == str(pay) and entry["workspaceName"] == "pay-service"
    ok(memself("restore", fact["id"], cwd=pay))
    assert records("project", pay)[0]["workspace"] == str(pay)
