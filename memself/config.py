"""``config.json``: the original's keys and defaults plus memself's own, type-checked on load.

A bad value is ignored with a log line; a corrupt file falls back to defaults and is never
overwritten; setting one key writes only that key (unlike the original, which pinned every key).

The recall floors are per embedding model, since each model's scores sit in their own band. The
original's flat ``recallMinScore`` / ``recallMinScoreProject`` are bge-base-zh's (the model it
ran, and the numbers it pinned in every file it ever wrote): memself reads them for that model
only and never writes them, so the original still reads its own values. What the user sets in
memself goes to ``recallLines``, ``{"<model>": {"rule": x, "project": y}}``, for the current model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memself.atomic import write_atomic
from memself.errors import ConfigError, MemselfError
from memself.logs import log
from memself.model.catalog import DEFAULT_MODEL, resolve_model
from memself.paths import DataPaths


@dataclass(frozen=True)
class Key:
    kind: type  # bool, int, float or str
    default: Any
    help: str
    # The accepted range of a number, both ends included: every numeric key has one.
    minimum: float | None = None
    maximum: float | None = None
    # Decides where data goes or whether the user is asked: only the user changes it (the CLI or
    # setup), never an assistant's tool call.
    user_only: bool = False


# None as a default means "not set": thresholds then come from the model table (memself.model.catalog).
KEYS: dict[str, Key] = {
    # enabled decides whether prompts leave the machine at all: switching it back on would resume
    # sending them to the judge after the user stopped that.
    "enabled": Key(bool, True, "关掉后 hook 不注入任何记忆，旁路判别也不启动", user_only=True),
    # Each memory is up to 400 characters and both groups are injected every turn: 50 each is
    # already far more context than recall is for.
    "recallTopK": Key(int, 3, "rule 和 project 每轮各自最多召回几条", minimum=1, maximum=50),
    # Recall scores are similarities: a line above 1 is a typo (22 for 0.22), below 0 means off.
    "recallMinScore": Key(
        float,
        None,
        "rule 的召回下限，-1 关闭；按向量模型分别保存，改的是当前模型的",
        minimum=-1,
        maximum=1,
    ),
    "recallMinScoreProject": Key(
        float,
        None,
        "project 的召回下限，-1 关闭；按向量模型分别保存，改的是当前模型的",
        minimum=-1,
        maximum=1,
    ),
    "recallMinMargin": Key(float, -1.0, "对第二名的领先幅度下限，-1 关闭", minimum=-1, maximum=1),
    "showRecall": Key(bool, False, "把召回的条目也展示给用户（Claude Code）"),
    "confirm": Key(bool, True, "写盘前是否弹确认", user_only=True),
    # Stop waits inside the host's Stop timeout (20 s in every host's facts) whatever this says.
    "sideWaitMs": Key(int, 12000, "回答结束后 stop 等待旁路结果的毫秒数", minimum=0, maximum=20000),
    "decayDays": Key(int, 30, "闲置满多少天扣一次置信度", minimum=1, maximum=3650),
    "sideApiBase": Key(str, "", "旁路判别接口根地址（OpenAI 兼容）", user_only=True),
    "sideApiModel": Key(str, "", "旁路判别模型名", user_only=True),
    # model names what is downloaded from the hub or loaded from a local folder.
    "model": Key(str, DEFAULT_MODEL, "向量模型：hub id、本地目录或 multilingual-e5-small", user_only=True),
    # The engine holds the model in memory: a day idle is the longest that makes sense.
    "engineIdleMinutes": Key(int, 30, "常驻召回进程闲置多少分钟后退出", minimum=1, maximum=1440),
    # What the background filler of "applies when" requests may spend per local day; 0 stops it.
    # A request carries a batch of memories (about 2500 tokens): the token cap matches the
    # request cap's order of magnitude.
    "viewsDailyRequests": Key(
        int, 20, "每天为记忆补写适用场景最多发几次请求，0 关闭", minimum=0, maximum=1000
    ),
    "viewsDailyTokens": Key(
        int, 50000, "每天为记忆补写适用场景最多用多少 token（估算），0 关闭", minimum=0, maximum=5_000_000
    ),
}
USER_ONLY_KEYS = tuple(name for name, key in KEYS.items() if key.user_only)
# The recall floors: the key the user sets, and the group it is the line of.
LINE_KEYS = {"recallMinScore": "rule", "recallMinScoreProject": "project"}
LINES_KEY = "recallLines"  # memself's per-model lines, {"<model>": {"rule": x, "project": y}}
ORIGINAL_LINES_MODEL = DEFAULT_MODEL  # whose lines the original's flat keys are
# Where a line in effect comes from (doctor, config listings).
LINE_SOURCES = {
    "user": "你为这个模型设置的值",
    "original": "原插件 config.json 里的值，原插件用的就是这个模型",
    "shipped": "随 memself 发布的这个模型的标定值",
    "default": "通用默认值：这个模型没有标定",
}
_RESET_WORDS = {"default", "默认"}
LEGACY_KEYS = ("sideJudge",)
_TRUE = {"true", "on", "1", "yes"}
_FALSE = {"false", "off", "0", "no"}
_TYPE_NAMES = {bool: "布尔值", int: "整数", float: "数字", str: "字符串"}


@dataclass(frozen=True)
class Config:
    values: dict[str, Any]
    explicit: frozenset[str] = field(default_factory=frozenset)
    side_judge: bool | None = None  # legacy blocking mode marker; False means "deposition disabled"
    lines: dict[str, dict[str, float]] = field(default_factory=dict)  # ``recallLines``, checked

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def is_set(self, key: str) -> bool:
        return key in self.explicit


def _accepts(key: Key, value: object) -> bool:
    if key.kind is bool:
        return isinstance(value, bool)
    if key.kind is str:
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if key.kind is int:
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if key.kind is float:
        return math.isfinite(value)
    return False


def _in_range(key: Key, value: object) -> bool:
    if key.minimum is None and key.maximum is None:
        return True
    if not isinstance(value, (int, float)):
        return False
    low = -math.inf if key.minimum is None else key.minimum
    high = math.inf if key.maximum is None else key.maximum
    return low <= value <= high


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def expected(key: Key) -> str:
    """What a key takes, in Chinese, range included: ``正整数（1 到 50）``."""
    if key.kind is int:
        kind = {0: "非负整数", 1: "正整数"}.get(int(key.minimum) if key.minimum is not None else -1, "整数")
    else:
        kind = _TYPE_NAMES[key.kind]
    if key.minimum is None or key.maximum is None:
        return kind
    return f"{kind}（{_number(key.minimum)} 到 {_number(key.maximum)}）"


def _read_file(paths: DataPaths) -> dict[str, Any] | None:
    """The file's object, {} when missing, None when it cannot be used."""
    try:
        raw = json.loads(paths.config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log(paths, "config-unreadable", error=str(exc))
        return None
    if not isinstance(raw, dict):
        log(paths, "config-unreadable", error="not a JSON object")
        return None
    return raw


def load_config(paths: DataPaths | None = None) -> Config:
    """Read config.json afresh (hooks and MCP re-read on every call)."""
    paths = paths or DataPaths.default()
    raw = _read_file(paths) or {}
    values = {name: key.default for name, key in KEYS.items()}
    explicit = set()
    for name, value in raw.items():
        key = KEYS.get(name)
        if key is None:
            continue
        if not _accepts(key, value) or not _in_range(key, value):
            log(paths, f"配置项 {name} 应为{expected(key)}，已忽略", value=repr(value)[:200])
            continue
        values[name] = int(value) if key.kind is int else value
        explicit.add(name)
    side_judge = raw.get("sideJudge")
    return Config(
        values,
        frozenset(explicit),
        side_judge if isinstance(side_judge, bool) else None,
        _read_lines(paths, raw.get(LINES_KEY)),
    )


def _read_lines(paths: DataPaths, raw: object) -> dict[str, dict[str, float]]:
    """``recallLines`` as far as it is usable; what is not is logged and ignored."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        log(paths, f"配置项 {LINES_KEY} 应为对象，已忽略")
        return {}
    lines: dict[str, dict[str, float]] = {}
    groups = set(LINE_KEYS.values())
    for model, entry in raw.items():
        kept = {}
        if isinstance(entry, dict):
            line = KEYS["recallMinScore"]
            kept = {
                g: float(v)
                for g, v in entry.items()
                if g in groups and _accepts(line, v) and _in_range(line, v)
            }
        if not isinstance(entry, dict) or len(kept) != len(entry):
            log(paths, f"配置项 {LINES_KEY} 里「{str(model)[:200]}」的内容不对，已忽略不认识的部分")
        if kept:
            lines[str(model)] = kept
    return lines


def parse_value(name: str, raw: str) -> Any:
    """Turn a CLI/MCP string into the key's type, or raise ConfigError with a Chinese message."""
    key = KEYS.get(name)
    if key is None:
        if name in LEGACY_KEYS:
            raise ConfigError(f"{name} 是旧版本的配置项，请运行 memself setup sidepath")
        raise ConfigError(f"未知配置项「{name}」，可用：{'、'.join(KEYS)}")
    text = raw.strip()
    if key.kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{name} 需要 true 或 false，收到「{raw}」")
    if key.kind is str:
        return text
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    whole = key.kind is not int or number.is_integer()
    if not math.isfinite(number) or not whole or not _in_range(key, number):
        raise ConfigError(f"{name} 需要{expected(key)}，收到「{raw}」")
    return int(number) if key.kind is int else number


def set_config_value(paths: DataPaths, name: str, raw: str) -> Any:
    """Validate and write one key; every other key in the file stays as it is.

    A recall floor is written to ``recallLines`` for the current model (``default`` removes it
    there); the original's flat key is left alone."""
    reset = name in LINE_KEYS and raw.strip().lower() in _RESET_WORDS
    value = None if reset else parse_value(name, raw)
    current = _read_file(paths)
    if current is None:
        raise ConfigError(f"{paths.config} 不是合法的 JSON，为免覆盖你的内容未做修改；请先修好或删除它")
    if name in LINE_KEYS:
        _set_line(current, resolve_model(load_config(paths).model).model_id, LINE_KEYS[name], value)
    else:
        current[name] = value
    paths.ensure()
    write_atomic(paths.config, json.dumps(current, ensure_ascii=False, indent=2) + "\n")
    return value


def set_model(paths: DataPaths, raw: str, prepare: Callable[[str], None]) -> str:
    """Switch ``model`` only once the new model works: ``prepare`` (which raises a
    ``MemselfError`` when the model cannot be had) runs first, and ``config.json`` is written only
    after it returned, so a model that fails leaves the file as it was, byte for byte."""
    name = parse_value("model", raw)
    resolve_model(name)  # a name that cannot be a model is refused before anything is fetched
    if _read_file(paths) is None:
        raise ConfigError(f"{paths.config} 不是合法的 JSON，为免覆盖你的内容未做修改；请先修好或删除它")
    try:
        prepare(name)
    except MemselfError as exc:
        current = load_config(paths).model
        raise ConfigError(f"{exc}\n向量模型没有切换：config.json 未修改，model 仍为 {current}") from exc
    set_config_value(paths, "model", name)
    return str(name)


def _set_line(current: dict[str, Any], model_id: str, group: str, value: float | None) -> None:
    """Set (or, with None, remove) one model's line in the file's ``recallLines``."""
    lines = current.get(LINES_KEY)
    if not isinstance(lines, dict):
        lines = {}
    entry = lines.get(model_id)
    entry = dict(entry) if isinstance(entry, dict) else {}
    if value is None:
        entry.pop(group, None)
    else:
        entry[group] = value
    if entry:
        lines[model_id] = entry
    else:
        lines.pop(model_id, None)
    if lines:
        current[LINES_KEY] = lines
    else:
        current.pop(LINES_KEY, None)


def unset_config_value(paths: DataPaths, name: str) -> None:
    """Remove a key so its default applies again."""
    current = _read_file(paths)
    if current is None:
        raise ConfigError(f"{paths.config} 不是合法的 JSON，未做修改")
    if name in current:
        del current[name]
        write_atomic(paths.config, json.dumps(current, ensure_ascii=False, indent=2) + "\n")


def user_only_key(name: str) -> str | None:
    """The user-only key ``name`` spells (case and surrounding blanks ignored), else ``None``."""
    wanted = name.strip().lower()
    return next((key for key in USER_ONLY_KEYS if key.lower() == wanted), None)


def user_only_command(name: str, value: object) -> str:
    """The CLI command the user runs to change a user-only key.

    Booleans are spelled out; a string value is never echoed (a tool call's address must not
    become a command the model hands the user to run), so it is a placeholder.
    """
    key = KEYS[name]
    if key.kind is bool:
        try:
            shown = (
                "true"
                if parse_value(name, str(value).lower() if isinstance(value, bool) else str(value))
                else "false"
            )
        except ConfigError:
            shown = "<true|false>"
        return f"memself config {name} {shown}"
    placeholder = {"sideApiBase": "<地址>", "sideApiModel": "<模型名>", "model": "<模型>"}
    return f"memself config {name} {placeholder.get(name, '<值>')}"
