"""memself doctor: registrations, the judge endpoint (a real local HTTP server), fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memself.installers import doctor
from memself.installers.base import InstallContext
from memself.installers.cursor import INSTALLER as CURSOR
from memself.paths import DataPaths
from tests.fakes.judge_server import Reply, running_judge, sse
from tests.side_helpers import API_KEY, configure

SKILL = Path(__file__).parent / "fixtures" / "installers" / "_skill" / "memory-self-evolution-manage"


@pytest.fixture
def packaged_skill(monkeypatch: pytest.MonkeyPatch) -> None:
    # Doctor compares the installed copy with the packaged one; point both at the test skill.
    monkeypatch.setattr(doctor, "default_skill_source", lambda: SKILL)


def test_host_not_installed_is_not_a_problem(isolated_home: Path) -> None:
    check = doctor.check_host("cursor", isolated_home, None)
    assert check.ok is None and "未安装" in check.summary


def test_host_registration_is_checked_against_the_current_commands(
        isolated_home: Path, packaged_skill: None) -> None:
    (isolated_home / ".cursor").mkdir()
    before = doctor.check_host("cursor", isolated_home, None)
    assert before.ok is False and before.fix == "memself setup --only cursor"
    CURSOR.apply(InstallContext(home=isolated_home, skill_source=SKILL))
    after = doctor.check_host("cursor", isolated_home, None)
    assert after.ok is True, after.summary
    assert str(isolated_home / ".cursor/hooks.json") in after.summary
    # A registration pointing at another interpreter (a moved venv) is stale.
    hooks = isolated_home / ".cursor/hooks.json"
    hooks.write_text(hooks.read_text().replace("-I -S", "-I  -S"))
    assert doctor.check_host("cursor", isolated_home, None).ok is False


def test_claude_without_binary_names_the_manual_command(
        isolated_home: Path, packaged_skill: None) -> None:
    (isolated_home / ".claude").mkdir()
    check = doctor.check_host("claude", isolated_home, None)
    assert check.ok is False
    assert "claude mcp add --scope user memory-self-evolution --" in check.fix


def test_malformed_host_file_is_reported_with_its_name(isolated_home: Path,
                                                        packaged_skill: None) -> None:
    (isolated_home / ".codebuddy").mkdir()
    (isolated_home / ".codebuddy/settings.json").write_text("{,")
    check = doctor.check_host("codebuddy", isolated_home, None)
    assert check.ok is False and "settings.json 不是合法的 JSON" in check.summary


def test_judge_unconfigured_and_legacy(isolated_home: Path) -> None:
    paths = DataPaths.default()
    check = doctor.check_judge(paths)
    assert check.ok is False and "sideApiBase" in check.summary and "apiKey" in check.summary
    paths.ensure()
    paths.config.write_text('{"sideJudge": false}\n')
    assert doctor.check_judge(paths).fix == "memself setup sidepath"


def test_judge_real_request_hides_the_key(isolated_home: Path) -> None:
    paths = DataPaths.default()
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(sse("OK"))
        ok = doctor.check_judge(paths)
        assert ok.ok is True and "真实请求成功" in ok.summary
        assert judge.requests[0].headers.get("Authorization") == f"Bearer {API_KEY}"
        judge.script(Reply("status", f'{{"error": "bad key {API_KEY}"}}', 401))
        bad = doctor.check_judge(paths)
    assert bad.ok is False and "401" in bad.summary
    for check in (ok, bad):
        assert API_KEY not in check.summary + check.fix


def test_render_counts_problems() -> None:
    lines: list[str] = []
    doctor.render([doctor.Check("a", True, "好"), doctor.Check("b", False, "坏", "修它"),
                   doctor.Check("c", None, "没装")], lines.append)
    assert lines == ["✓ a：好", "✗ b：坏", "    修复：修它", "- c：没装",
                     "发现 1 个问题，按上面的「修复」处理。"]
