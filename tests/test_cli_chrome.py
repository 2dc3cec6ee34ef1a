"""click's own words (usage, headings, the help option, usage errors) are Chinese like the rest of
the CLI, for every command; internal commands are hidden from help and still run.

What counts as click's words is read from the installed click itself: every literal it passes to
gettext, cut at its placeholders. So the check follows whatever click version is installed."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from memself.cli import main
from tests.support.cli import memself

_PLACEHOLDER = re.compile(r"\{[^}]*\}|%\([a-z_]+\)s|%s")


def _click_fragments() -> list[str]:
    """Every piece of English click can print: its gettext literals, split at placeholders."""
    fragments: set[str] = set()
    for source in Path(click.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("_", "ngettext"):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    fragments.update(p.strip() for p in _PLACEHOLDER.split(arg.value))
    # A piece is English prose when it has a word of three letters or more.
    return sorted(f for f in fragments if re.search(r"[A-Za-z]{3}", f))


CLICK_ENGLISH = _click_fragments()


def english_left(text: str) -> list[str]:
    """click's English pieces found in ``text`` (as whole words: ``--version`` is an option name,
    not click's ``version``)."""
    found = []
    for fragment in CLICK_ENGLISH:
        pattern = (r"(?<![\w-])" if fragment[0].isalnum() else "") + re.escape(fragment)
        pattern += r"(?![\w-])" if fragment[-1].isalnum() else ""
        if re.search(pattern, text):
            found.append(fragment)
    return found


def test_the_fragments_are_read_from_click() -> None:
    # The check is only as good as this list: the words the user reported must be in it.
    for reported in ("Usage:", "Options", "Show this message and exit.", "Error:", "Missing argument"):
        assert reported in CLICK_ENGLISH
    assert {"Error:", "Missing argument"} <= set(english_left("Error: Missing argument 'TEXT'."))
    assert english_left("用法：memself --version [OPTIONS]") == []


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


ALL_COMMANDS = list(_commands(main))


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, prog_name="memself")


def test_the_walk_finds_every_command() -> None:
    assert ("rule", "add") in ALL_COMMANDS and ("engine", "serve") in ALL_COMMANDS
    assert ("hook",) in ALL_COMMANDS and () in ALL_COMMANDS and len(ALL_COMMANDS) > 30


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "memself")
def test_every_help_is_chinese(path: tuple[str, ...]) -> None:
    for flag in ("--help", "-h"):
        result = run([*path, flag])
        assert result.exit_code == 0, result.output
        assert english_left(result.output) == [], result.output
        assert result.output.startswith("用法：memself"), result.output
        assert "显示本帮助并退出" in result.output


def test_the_version_is_chinese() -> None:
    result = run(["--version"])
    assert result.exit_code == 0 and english_left(result.output) == [], result.output
    assert result.output.startswith("memself 版本 ")


def test_a_group_without_its_subcommand_shows_chinese_help() -> None:
    result = run(["engine"])
    assert english_left(result.output) == [], result.output
    assert "命令：" in result.output and "status" in result.output


def _usage_errors(tmp: Path) -> list[tuple[list[str], str]]:
    a_file = tmp / "a-file"
    a_file.write_text("x")
    return [
        (["rule", "add"], "缺少参数 TEXT"),
        (["mcp"], "缺少选项 --agent"),
        (["list", "--nope"], "没有这个选项：--nope"),
        (["list", "--jsn"], "是不是想用 --json"),
        (["nope"], "没有这个命令：nope"),
        (["move", "a", "b"], "多余的参数：b"),
        (["read", "nope"], "可选：rule、project"),
        (["read", "float"], "「float」不是可选的值"),  # the user's word, not click's type name
        (["float"], "没有这个命令：float"),
        (["setup", "--only", "nope"], "「nope」不是可选的值"),
        (["list", "--limit", "x"], "「x」不是整数"),
        (["list", "--limit", "99999"], "99999 不在范围内：需要 0 到 10000 之间的值"),
        (["views", "fill", "--limit", "0"], "0 不在范围内：需要不小于 1 的值"),
        (["engine", "start", "--timeout", "x"], "「x」不是数字"),
        (["list", "--limit"], "选项 --limit 需要一个值"),
        (["list", "--json=1"], "选项 --json 不接受值"),
        (["verify", "--applies-when", str(a_file)], "是文件"),
    ]


def test_every_kind_of_usage_error_is_chinese_and_exits_2(tmp_path: Path) -> None:
    for args, expected in _usage_errors(tmp_path):
        result = run(args)
        assert result.exit_code == 2, (args, result.output)
        assert english_left(result.output) == [], (args, result.output)
        assert expected in result.output, (args, result.output)
        lines = result.output.strip().splitlines()
        assert lines[0].startswith("用法：memself"), (args, result.output)
        assert lines[-1].startswith("错误："), (args, result.output)
        assert "查看帮助" in result.output


def test_a_usage_error_from_a_real_process() -> None:
    """The same through ``python -m memself``: stderr, exit 2, no traceback."""
    result = memself("rule", "add")
    assert result.returncode == 2 and result.stdout == ""
    assert english_left(result.stderr) == [] and "错误：缺少参数 TEXT" in result.stderr
    assert "Traceback" not in result.stderr


INTERNAL = ("hook", "mcp", "side-run", "build-background")


def test_internal_commands_are_hidden_from_help() -> None:
    listed = run(["--help"]).output
    commands = listed.split("命令：", 1)[1]
    shown = {line.split()[0] for line in commands.splitlines() if line.startswith("  ")}
    assert not shown & set(INTERNAL), shown
    assert {"list", "rule", "config", "delete", "doctor", "setup", "engine", "verify"} <= shown


def test_hidden_commands_still_run(tmp_path: Path) -> None:
    for name in INTERNAL:
        result = run([name, "--help"])
        assert result.exit_code == 0 and "用法：memself " + name in result.output
    hook = memself("hook", "--agent", "claude", stdin="not json")
    assert hook.returncode == 0 and hook.stderr == ""
    assert '"note": "bad-json"' in (Path(_home()) / "memself.log").read_text(encoding="utf-8")
    mcp = memself("mcp", "--agent", "vscode")
    assert mcp.returncode == 2 and "未知客户端「vscode」" in mcp.stderr


def _home() -> str:
    import os

    return os.environ["MEMSELF_HOME"]


def _asking_cli() -> click.Group:
    """A command built like memself's (its group class) that asks a yes/no question."""
    from memself.cli.app import MemselfGroup
    from memself.cli.click_zh import confirm

    @click.group(cls=MemselfGroup)
    def cli() -> None:
        pass

    @cli.command()
    def ask() -> None:
        click.echo(f"回答：{confirm('这是你信任的地址吗？', default=False)}")

    @cli.command()
    @click.argument("how", type=click.Choice(["abort", "interrupt"]))
    def end(how: str) -> None:
        # What a prompt raises on ^D or ^C (click.Abort), and a ^C anywhere else.
        raise click.Abort() if how == "abort" else KeyboardInterrupt()

    return cli


def test_a_yes_no_question_complains_in_chinese_and_an_abort_is_chinese() -> None:
    cli = _asking_cli()
    answered = CliRunner().invoke(cli, ["ask"], input="x\ny\n")
    assert answered.exit_code == 0 and "请回答 y 或 n" in answered.output and "回答：True" in answered.output
    assert english_left(answered.output) == [], answered.output
    assert "回答：False" in CliRunner().invoke(cli, ["ask"], input="\n").output
    for how in ("abort", "interrupt"):
        ended = CliRunner().invoke(cli, ["end", how])
        assert ended.exit_code == 1 and ended.output.strip() == "已中止", ended.output
