"""config.json: defaults, type checks on load, validation on set, one key at a time."""

from __future__ import annotations

import json

import pytest

from memself.config import (
    USER_ONLY_KEYS,
    load_config,
    set_config_value,
    user_only_command,
    user_only_key,
)
from memself.errors import ConfigError
from memself.paths import DataPaths


@pytest.fixture
def paths() -> DataPaths:
    paths = DataPaths.default()
    paths.ensure()
    return paths


def test_defaults(paths: DataPaths) -> None:
    config = load_config(paths)
    assert (
        config.enabled,
        config.recallTopK,
        config.recallMinMargin,
        config.showRecall,
        config.confirm,
        config.sideWaitMs,
        config.decayDays,
        config.sideApiBase,
        config.sideApiModel,
        config.model,
    ) == (True, 3, -1.0, False, True, 12000, 30, "", "", "BAAI/bge-base-zh-v1.5")
    assert config.recallMinScore is None  # comes from the model table unless the user sets it


@pytest.mark.parametrize("bad", [0, -1, 1.5, "7", None, True])
def test_invalid_decay_days_in_file_falls_back_with_log(paths: DataPaths, bad: object) -> None:
    paths.config.write_text(json.dumps({"decayDays": bad, "recallTopK": 5}))
    config = load_config(paths)
    assert config.decayDays == 30 and config.recallTopK == 5
    assert "decayDays" in paths.log_file.read_text()


def test_corrupt_file_falls_back_and_is_never_overwritten(paths: DataPaths) -> None:
    paths.config.write_text("{oops")
    assert load_config(paths).recallTopK == 3
    with pytest.raises(ConfigError, match="不是合法的 JSON"):
        set_config_value(paths, "recallTopK", "5")
    assert paths.config.read_text() == "{oops"


@pytest.mark.parametrize("raw", ["0", "-3", "1.5", "abc"])
def test_set_rejects_bad_decay_days_and_leaves_file(paths: DataPaths, raw: str) -> None:
    set_config_value(paths, "recallTopK", "4")
    before = paths.config.read_bytes()
    with pytest.raises(ConfigError, match="decayDays"):
        set_config_value(paths, "decayDays", raw)
    assert paths.config.read_bytes() == before


def test_set_writes_only_that_key_and_keeps_others(paths: DataPaths) -> None:
    paths.config.write_text(json.dumps({"sideApiBase": "http://x", "custom": 1}))
    set_config_value(paths, "confirm", "off")
    assert json.loads(paths.config.read_text()) == {"sideApiBase": "http://x", "custom": 1, "confirm": False}


def test_unknown_key_and_bool_parsing(paths: DataPaths) -> None:
    with pytest.raises(ConfigError, match="未知配置项「nope」"):
        set_config_value(paths, "nope", "1")
    for raw, value in [("true", True), ("on", True), ("1", True), ("false", False), ("0", False)]:
        assert set_config_value(paths, "showRecall", raw) is value
    with pytest.raises(ConfigError, match="true 或 false"):
        set_config_value(paths, "showRecall", "maybe")
    with pytest.raises(ConfigError, match="旧版本"):
        set_config_value(paths, "sideJudge", "false")


def test_legacy_side_judge_is_read(paths: DataPaths) -> None:
    paths.config.write_text(json.dumps({"sideJudge": False}))
    assert load_config(paths).side_judge is False


def test_user_only_keys_are_one_flag_in_the_table() -> None:
    assert USER_ONLY_KEYS == ("enabled", "confirm", "sideApiBase", "sideApiModel", "model")
    assert user_only_key(" SideApiBase ") == "sideApiBase" and user_only_key("recallTopK") is None
    assert user_only_command("confirm", False) == "memself config confirm false"
    assert user_only_command("enabled", "on") == "memself config enabled true"
    assert user_only_command("confirm", "maybe") == "memself config confirm <true|false>"
    assert user_only_command("sideApiBase", "https://evil.io") == "memself config sideApiBase <地址>"


def test_the_cli_still_sets_user_only_keys(paths: DataPaths) -> None:
    assert set_config_value(paths, "confirm", "false") is False
    assert set_config_value(paths, "sideApiBase", "https://a.example/v1") == "https://a.example/v1"


def test_recall_lines_per_model_set_and_reset(paths: DataPaths) -> None:
    from memself.model.catalog import OFFLINE_MODEL, resolve_model
    from memself.recall.lines import recall_lines

    set_config_value(paths, "model", OFFLINE_MODEL)
    e5 = resolve_model(OFFLINE_MODEL)
    assert set_config_value(paths, "recallMinScoreProject", "-1") == -1
    lines = recall_lines(load_config(paths), e5)
    assert (lines["project"].value, lines["project"].source) == (-1, "user")
    assert lines["rule"].source == "shipped"
    assert set_config_value(paths, "recallMinScoreProject", "default") is None
    assert "recallLines" not in json.loads(paths.config.read_text())  # nothing left to keep
    assert recall_lines(load_config(paths), e5)["project"].source == "shipped"


def test_an_uncalibrated_model_uses_the_generic_lines(paths: DataPaths) -> None:
    from memself.model.catalog import GENERIC_PROJECT_FLOOR, GENERIC_RULE_FLOOR, MODELS, resolve_model
    from memself.recall.lines import recall_lines

    for name in ("someone/some-model", "intfloat/multilingual-e5-small"):
        lines = recall_lines(load_config(paths), resolve_model(name))
        assert {g: (line.value, line.source) for g, line in lines.items()} == {
            "rule": (GENERIC_RULE_FLOOR, "default"),
            "project": (GENERIC_PROJECT_FLOOR, "default"),
        }
    bge = recall_lines(load_config(paths), MODELS["BAAI/bge-base-zh-v1.5"])
    assert {g: (line.value, line.source) for g, line in bge.items()} == {
        "rule": (0.22, "shipped"),  # the original's own calibration of this model
        "project": (0.29, "shipped"),
    }


@pytest.mark.parametrize(
    "raw",
    [
        "bad",
        {"multilingual-e5-small": {"rule": "0.4", "project": 0.3, "extra": 1}},
        {"multilingual-e5-small": 0.4},
    ],
)
def test_unusable_recall_lines_are_ignored_with_a_log(paths: DataPaths, raw: object) -> None:
    paths.config.write_text(json.dumps({"recallLines": raw}))
    lines = load_config(paths).lines
    assert lines in ({}, {"multilingual-e5-small": {"project": 0.3}})
    assert "recallLines" in paths.log_file.read_text()


def test_set_model_prepares_first_and_writes_only_when_that_worked(paths: DataPaths) -> None:
    from memself.config import set_model
    from memself.errors import ModelUnavailable

    set_config_value(paths, "recallTopK", "4")
    before = paths.config.read_bytes()
    asked: list[str] = []

    def failing(name: str) -> None:
        asked.append(name)
        assert paths.config.read_bytes() == before  # nothing written yet
        raise ModelUnavailable("下载失败")

    with pytest.raises(ConfigError) as failed:
        set_model(paths, " some/model ", failing)
    message = str(failed.value)
    assert "下载失败" in message and "config.json 未修改，model 仍为 BAAI/bge-base-zh-v1.5" in message
    assert asked == ["some/model"] and paths.config.read_bytes() == before
    assert set_model(paths, "some/model", asked.append) == "some/model"
    assert load_config(paths).model == "some/model" and load_config(paths).recallTopK == 4


def test_set_model_refuses_before_preparing(paths: DataPaths) -> None:
    from memself.config import set_model
    from memself.errors import InvalidInput

    def never(name: str) -> None:
        raise AssertionError(f"prepared {name}")

    with pytest.raises(InvalidInput):
        set_model(paths, "not a model name", never)
    paths.config.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="不是合法的 JSON"):
        set_model(paths, "some/model", never)
    assert paths.config.read_text(encoding="utf-8") == "{not json"
