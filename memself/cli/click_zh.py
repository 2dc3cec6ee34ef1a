"""click's own words in Chinese: the help page's chrome (usage line, headings, the help option,
the bracketed extras) and every usage error, so that nothing memself prints is English.

click passes these words through ``gettext``, but only a process-wide catalog chosen by the
environment's language could change them there (and it would change them for every other library
in the process). So they are translated where they are printed instead: the help through
``ZhHelpFormatter`` (the formatter every memself context uses), the errors by ``to_chinese``,
which builds the message from the exception's own fields (its parameter, its option name, the
parameter's type) and uses ``MESSAGES`` only for the value-level detail a type wrote. ``MESSAGES``
holds click's English templates of 8.1 to the newest, placeholders and all; a template click
changes is caught by ``tests/test_cli_chrome.py``, which reads click's words from click itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from typing import Any

import click

# click's template -> ours; the placeholders are click's names, filled from its message.
MESSAGES: dict[str, str] = {
    # types.py: what a value failed
    "{value!r} is not one of {choices}.": "「{value}」不是可选的值",
    "{value!r} is not {choice}.": "「{value}」不是可选的值",
    "{value!r} is not a valid {number_type}.": "「{value}」不是{number_type}",
    "{value} is not in the range {range}.": "{value} 不在范围内",
    "{value!r} is not a valid boolean. Recognized values: {states}": "「{value}」不是布尔值（true 或 false）",
    "{value!r} is not a valid boolean.": "「{value}」不是布尔值（true 或 false）",
    "{value!r} is not a valid UUID.": "「{value}」不是 UUID",
    "{value!r} does not match the format {format}.": "「{value}」不符合格式 {format}",
    "{value!r} does not match the formats {formats}.": "「{value}」不符合格式 {formats} 中的任何一个",
    "{name} {filename!r} does not exist.": "{name}「{filename}」不存在",
    "{name} {filename!r} is a file.": "「{filename}」是文件，这里需要{name}",
    "{name} {filename!r} is a directory.": "「{filename}」是目录，这里需要{name}",
    "{name} {filename!r} is not readable.": "{name}「{filename}」不可读",
    "{name} {filename!r} is not writable.": "{name}「{filename}」不可写",
    "{name} {filename!r} is not executable.": "{name}「{filename}」不可执行",
    "{len_type} values are required, but {len_value} was given.": (
        "需要 {len_type} 个值，收到 {len_value} 个"
    ),
    "{len_type} values are required, but {len_value} were given.": (
        "需要 {len_type} 个值，收到 {len_value} 个"
    ),
    "Takes {nargs} values but 1 was given.": "需要 {nargs} 个值，收到 1 个",
    "Takes {nargs} values but {len} were given.": "需要 {nargs} 个值，收到 {len} 个",
    "Value must be an iterable.": "需要一组值",
    # parser and core: how the command line was used
    "Option {name!r} requires an argument.": "选项 {name} 需要一个值",
    "Option {name!r} requires {nargs} arguments.": "选项 {name} 需要 {nargs} 个值",
    "Option {name!r} does not take a value.": "选项 {name} 不接受值",
    "Argument {name!r} takes {nargs} values.": "参数 {name} 需要 {nargs} 个值",
    "Invalid start character for option ({option})": "选项的开头字符不对（{option}）",
    "Got unexpected extra argument ({args})": "多余的参数：{args}",
    "Got unexpected extra arguments ({args})": "多余的参数：{args}",
    "Missing command.": "缺少子命令",
    "No such command {name!r}.": "没有这个命令：{name}",
    "No such option {name!r}.": "没有这个选项：{name}",
    "No such option: {name}": "没有这个选项：{name}",
    "Could not open file {filename!r}: {message}": "无法打开文件「{filename}」：{message}",
    "Missing parameter: {param_name}": "缺少参数 {param_name}",
}
# Words click puts into the templates above, and its help page's own.
WORDS: dict[str, str] = {
    "integer": "整数",
    "integer range": "整数",
    "float": "数字",
    "float range": "数字",
    "file": "文件",
    "directory": "目录",
    "path": "路径",
    "Options": "选项",
    "Commands": "命令",
    "Positional arguments": "参数",
    "Arguments": "参数",
    "Show this message and exit.": "显示本帮助并退出",
    "Show the version and exit.": "显示版本并退出",
    "required": "必填",
    "deprecated": "已弃用",
}
# The bracketed extras after an option's help: ``default: 3``, ``env var: X``.
EXTRAS = {"default: ": "默认：", "env var: ": "环境变量："}

USAGE_PREFIX = "用法："
ABORTED = "已中止"


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)(?:![rs])?\}", template)
    body = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>.+?)" for i, part in enumerate(parts))
    return re.compile(body + "$", re.DOTALL)


def _literal_length(template: str) -> int:
    return len(re.sub(r"\{\w+(?:![rs])?\}", "", template))


# The most specific template first: "is not a valid {number_type}" before "is not {choice}".
_COMPILED = [
    (_pattern(english), MESSAGES[english]) for english in sorted(MESSAGES, key=_literal_length, reverse=True)
]


def _plain(text: str) -> str:
    """A value click quoted with ``repr`` ('x'), unquoted; anything else as it is."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        return str(value)
    return text


def translate(message: str) -> str:
    """click's English ``message`` in Chinese; a message that is not click's (memself's own, in
    Chinese already) comes back unchanged."""
    text = message.strip()
    for pattern, chinese in _COMPILED:
        found = pattern.match(text)
        if found:
            fields = {k: _plain(v) for k, v in found.groupdict().items()}
            # Only click's own words are translated: a value, option or command name the user
            # typed ("file", "float") stays as typed.
            for word in ("number_type", "name") if "name" not in fields or "filename" in fields else ():
                if word in fields:
                    fields[word] = WORDS.get(fields[word].lower(), fields[word])
            return chinese.format(**fields)
    return WORDS.get(text, message)


def _extras(text: str) -> str:
    """``help  [default: 3; required]`` with the bracket's words in Chinese."""
    found = re.search(r"\[([^\[\]]*)\]\s*$", text)
    if not found:
        return WORDS.get(text, text)
    items = []
    for item in found.group(1).split("; "):
        for english, chinese in EXTRAS.items():
            if item.startswith(english):
                item = chinese + item[len(english) :]
        items.append(WORDS.get(item, item))
    head = text[: found.start()]
    return WORDS.get(head.strip(), head) + "[" + "；".join(items) + "]"


class ZhHelpFormatter(click.HelpFormatter):
    """click's help page with its own words in Chinese; the command's texts are memself's."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, USAGE_PREFIX if prefix is None else prefix)

    def write_heading(self, heading: str) -> None:
        self.write(f"{'':>{self.current_indent}}{WORDS.get(heading, heading)}：\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(term, _extras(text)) for term, text in rows], col_max, col_spacing)


def _choices(param: click.Parameter | None) -> str:
    kind = getattr(param, "type", None)
    if isinstance(kind, click.Choice):
        return "（可选：" + "、".join(str(c) for c in kind.choices) + "）"
    return ""


def _bounds(param: click.Parameter | None) -> str:
    kind = getattr(param, "type", None)
    if not isinstance(kind, (click.IntRange, click.FloatRange)):
        return ""
    low, high = kind.min, kind.max
    if low is not None and high is not None:
        return f"：需要 {low} 到 {high} 之间的值"
    if low is not None:
        return f"：需要{'大于' if kind.min_open else '不小于'} {low} 的值"
    return f"：需要{'小于' if kind.max_open else '不大于'} {high} 的值"


def _hint(exc: click.BadParameter) -> str:
    """The parameter a message is about: its option names, or an argument's metavar."""
    given: Any = exc.param_hint
    if isinstance(given, str):
        return given
    if given:
        return " / ".join(str(g) for g in given)
    param = exc.param
    if isinstance(param, click.Option):
        return " / ".join(param.opts)
    return param.human_readable_name if param is not None else ""


def _possibilities(found: Sequence[str] | None) -> str:
    return f"（是不是想用 {'、'.join(sorted(found))}？）" if found else ""


def message_of(exc: click.ClickException) -> str:
    """The Chinese message for one of click's exceptions."""
    if isinstance(exc, click.MissingParameter):
        what = {"argument": "参数", "option": "选项"}.get(str(exc.param_type or ""), "参数")
        if isinstance(exc.param, click.Option):
            what = "选项"
        return f"缺少{what} {_hint(exc)}{_choices(exc.param)}".rstrip()
    if isinstance(exc, click.BadParameter):
        detail = translate(exc.message)
        if detail != exc.message.strip():
            detail += _choices(exc.param) + (_bounds(exc.param) if "不在范围内" in detail else "")
        hint = _hint(exc)
        return f"{hint} 的值不对：{detail}" if hint else f"值不对：{detail}"
    if isinstance(exc, click.NoSuchOption):
        return f"没有这个选项：{exc.option_name}{_possibilities(exc.possibilities)}"
    possibilities = getattr(exc, "possibilities", None)  # NoSuchCommand (click 8.4 and later)
    command = getattr(exc, "command_name", None)
    if command is not None:
        return f"没有这个命令：{command}{_possibilities(possibilities)}"
    return translate(exc.message)


class ZhUsageError(click.UsageError):
    """A usage error shown in Chinese: the usage line, how to get help, the message. Exit 2."""

    def show(self, file: Any = None) -> None:
        ctx = self.ctx
        if ctx is not None:
            lines = [ctx.get_usage()]
            if ctx.command.get_help_option(ctx) is not None:
                lines.append(f"用 {ctx.command_path} {max(ctx.help_option_names, key=len)} 查看帮助")
            click.echo("\n".join(lines) + "\n", file=file, err=True, color=ctx.color)
        click.echo(f"错误：{self.message}", file=file, err=True)


class ZhError(click.ClickException):
    """Any other of click's errors (a file it could not open), in Chinese, with its exit code."""

    def show(self, file: Any = None) -> None:
        click.echo(f"错误：{self.message}", file=file, err=True)


def to_chinese(exc: click.ClickException, ctx: click.Context | None = None) -> click.ClickException:
    """``exc`` as a Chinese error with the same exit code; already Chinese: itself. ``ctx`` is the
    command being parsed, for the errors click's parser raises without one."""
    if isinstance(exc, (ZhUsageError, ZhError)) or _shows_help(exc):
        return exc
    if isinstance(exc, click.UsageError):
        return ZhUsageError(message_of(exc), exc.ctx or ctx)  # exit 2, like click's
    return ZhError(message_of(exc))  # exit 1, like click's


def _shows_help(exc: click.ClickException) -> bool:
    """click 8.2's "no arguments: show the help" error carries the (already Chinese) help page."""
    return type(exc).__name__ == "NoArgsIsHelpError"


_YES = {"y", "yes", "是"}
_NO = {"n", "no", "否"}


def confirm(question: str, default: bool) -> bool:
    """``click.confirm``, whose complaint about an answer that is not yes or no ("Error: invalid
    input") click prints itself in English: the same question and answers, the complaint Chinese."""
    suffix = " [Y/n]" if default else " [y/N]"
    while True:
        answer = str(click.prompt(question + suffix, default="", show_default=False)).strip().lower()
        if not answer:
            return default
        if answer in _YES:
            return True
        if answer in _NO:
            return False
        click.echo("请回答 y 或 n")
