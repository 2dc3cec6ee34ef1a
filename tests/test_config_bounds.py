"""Every numeric config key has a range: values outside it are refused with the range in the
(Chinese) message and the file untouched, on the CLI and in the file; negative numbers reach the
range check as values, not as options."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memself.cli import main
from memself.config import KEYS, load_config, set_config_value
from memself.errors import ConfigError
from memself.paths import DataPaths
from tests.support.cli import memself

# key -> (lowest, highest) accepted; -1 is "off" for the recall lines and the margin.
RANGES: dict[str, tuple[float, float]] = {
    "recallTopK": (1, 50),
    "recallMinScore": (-1, 1),
    "recallMinScoreProject": (-1, 1),
    "recallMinMargin": (-1, 1),
    "sideWaitMs": (0, 20000),
    "decayDays": (1, 3650),
    "engineIdleMinutes": (1, 1440),
    "viewsDailyRequests": (0, 1000),
    "viewsDailyTokens": (0, 5_000_000),
}


@pytest.fixture
def paths() -> DataPaths:
    paths = DataPaths.default()
    paths.ensure()
    return paths


def _shown(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def test_every_numeric_key_has_its_range_here() -> None:
    numeric = {name: (key.minimum, key.maximum) for name, key in KEYS.items() if key.kind in (int, float)}
    assert numeric == RANGES


@pytest.mark.parametrize("name", sorted(RANGES))
def test_each_bound_is_accepted_and_one_step_past_it_is_refused(paths: DataPaths, name: str) -> None:
    low, high = RANGES[name]
    step = 1 if KEYS[name].kind is int else 0.01
    for edge in (low, high):
        assert set_config_value(paths, name, _shown(edge)) == edge
    before = paths.config.read_bytes()
    for outside in (low - step, high + step):
        with pytest.raises(ConfigError) as refused:
            set_config_value(paths, name, _shown(outside))
        message = str(refused.value)
        assert f"{_shown(low)} 到 {_shown(high)}" in message and f"「{_shown(outside)}」" in message
        assert paths.config.read_bytes() == before


@pytest.mark.parametrize("name", sorted(RANGES))
def test_a_value_outside_the_range_in_the_file_is_ignored_with_a_log(paths: DataPaths, name: str) -> None:
    high = RANGES[name][1]
    paths.config.write_text(json.dumps({name: high * 10 + 1}), encoding="utf-8")
    assert not load_config(paths).is_set(name)
    assert name in paths.log_file.read_text(encoding="utf-8")


def test_a_negative_number_is_a_value_on_the_command_line(paths: DataPaths) -> None:
    runner = CliRunner()
    set_config_value(paths, "recallTopK", "4")
    before = paths.config.read_bytes()
    refused = runner.invoke(main, ["config", "recallTopK", "-3"])
    assert refused.exit_code == 1, refused.output
    assert "recallTopK 需要正整数（1 到 50），收到「-3」" in refused.output
    assert "No such option" not in refused.output and paths.config.read_bytes() == before
    too_big = runner.invoke(main, ["config", "recallTopK", "100000"])
    assert too_big.exit_code == 1 and "1 到 50" in too_big.output
    assert paths.config.read_bytes() == before
    for name, value in (("recallMinMargin", "-0.5"), ("recallMinScore", "-1")):
        accepted = runner.invoke(main, ["config", name, value])
        assert accepted.exit_code == 0, accepted.output
    assert load_config(paths).recallMinMargin == -0.5
    listed = runner.invoke(main, ["config", "recallTopK", "--json"])
    assert json.loads(listed.output) == {"recallTopK": 4}


def test_the_same_from_a_real_process() -> None:
    result = memself("config", "recallTopK", "-3")
    assert result.returncode == 1 and result.stderr.startswith("错误：recallTopK 需要正整数（1 到 50）")
    assert memself("config", "sideWaitMs", "-1").returncode == 1
