"""The original's pinned recall floors must not leak onto another embedding model.

Once anything was changed in the original (CLI or ``memory_config``) it wrote every setting into
``config.json``, so a user's file pins ``recallMinScore`` 0.22 and ``recallMinScoreProject`` 0.29:
bge-base-zh's calibration. memself on the offline model (multilingual-e5-small, whose cosines sit
in another band) read those pinned numbers as the user's own and used them instead of e5's lines:
``memself recall`` showed 底线 0.220, and the gate let most of the pool through.

The lines are per model: the original's flat keys stay in the file, untouched, and count as
bge-base-zh's; memself's own ``recallLines`` map holds what the user sets for each model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from memself.cli import main
from memself.config import load_config
from memself.model.catalog import DEFAULT_MODEL, OFFLINE_MODEL, resolve_model
from memself.paths import DataPaths
from memself.recall.gate import default_floors
from memself.recall.lines import gate_params

ORIGINAL_CONFIG = Path(__file__).parents[1] / "fixtures" / "original-store" / "config.json"
E5 = default_floors(resolve_model(OFFLINE_MODEL))  # its shipped calibration


def _original_config(paths: DataPaths, **changes: object) -> dict:
    """The original's pinned config.json, with ``changes`` (memself's setup adds ``model``)."""
    paths.ensure()
    shutil.copy(ORIGINAL_CONFIG, paths.config)
    data = json.loads(paths.config.read_text("utf-8"))
    data.update(changes)
    paths.config.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")
    return data


def _floors(paths: DataPaths) -> dict[str, float]:
    config = load_config(paths)
    return gate_params(config, resolve_model(config.model)).floors


def test_pinned_original_floors_do_not_apply_to_the_offline_model() -> None:
    paths = DataPaths.default()
    _original_config(paths, model=OFFLINE_MODEL)
    assert _floors(paths) == E5


def test_pinned_original_floors_are_bge_base_zhs() -> None:
    """What the user changed in the original still holds for the model the original ran."""
    paths = DataPaths.default()
    _original_config(paths, recallMinScore=0.3)
    assert _floors(paths) == {"rule": 0.3, "project": 0.29}


def test_config_sets_the_line_of_the_current_model_and_says_which() -> None:
    paths = DataPaths.default()
    _original_config(paths, model=OFFLINE_MODEL)
    result = CliRunner().invoke(main, ["config", "recallMinScore", "0.45"])
    assert result.exit_code == 0, result.output
    assert "multilingual-e5-small" in result.output and "0.45" in result.output
    data = json.loads(paths.config.read_text("utf-8"))
    # The original reads its flat keys: they stay exactly as it wrote them.
    assert (data["recallMinScore"], data["recallMinScoreProject"]) == (0.22, 0.29)
    assert data["recallLines"] == {OFFLINE_MODEL: {"rule": 0.45}}
    assert _floors(paths) == {"rule": 0.45, "project": E5["project"]}
    # Back on bge-base-zh, the original's numbers apply again, not the e5 line.
    data["model"] = DEFAULT_MODEL
    paths.config.write_text(json.dumps(data), "utf-8")
    assert _floors(paths) == {"rule": 0.22, "project": 0.29}


def test_doctor_shows_the_lines_in_effect_and_where_each_comes_from() -> None:
    from memself.doctor import check_recall_lines

    paths = DataPaths.default()
    _original_config(paths, model=OFFLINE_MODEL, recallLines={OFFLINE_MODEL: {"rule": 0.45}})
    check = check_recall_lines(paths)
    assert OFFLINE_MODEL in check.summary
    assert "rule 0.45（你为这个模型设置的值）" in check.summary
    assert f"project {E5['project']:g}（随 memself 发布的这个模型的标定值）" in check.summary
    assert "0.22" in check.summary  # the original's numbers are shown as bge-base-zh's, unused
