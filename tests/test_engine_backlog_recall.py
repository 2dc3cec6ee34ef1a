"""A real engine (the offline model) meeting a store with no vectors: ready at once, a prompt
answered from the memories already encoded while the rest encode, progress in ``engine status``
and ``doctor``, and in the end every memory searchable."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memself.cli.app import main
from memself.doctor import check_engine
from memself.index.files import read_state
from memself.paths import DataPaths
from tests.support.backlog_helpers import (
    backlog_of,
    engine_home,
    prompt_hook,
    start_engine,
    wait_status,
    write_unencoded_store,
)

__all__ = ["engine_home"]  # a fixture: pytest finds it here

# The test must meet the real model's backlog part way: minutes on a loaded machine, and a race
# on a fast one, so the full group. tests/test_engine_backlog.py covers the steps on a scripted
# encoder, every run.
pytestmark = pytest.mark.full

COUNT = 1000


def test_a_prompt_is_answered_from_encoded_memories_while_the_backlog_runs(engine_home: DataPaths) -> None:
    ids = write_unencoded_store(engine_home, COUNT)
    ready = start_engine(engine_home)
    assert ready["service"].get("memories") == COUNT
    assert ready["service"].get("indexed", 0) < COUNT and backlog_of(ready) is not None
    # The newest memory (the fact) was encoded before ready.
    wait_status(engine_home, lambda s: s["service"].get("indexed", 0) > 0)
    context = prompt_hook()
    assert "pay_new_flow" in context
    # The reward the hook earned is being written meanwhile: wait for the status to say all.
    during = wait_status(engine_home, lambda s: "indexed" in s["service"])
    progress = backlog_of(during)
    assert progress is not None and 0 < progress["done"] < progress["total"]
    assert 0 < during["service"]["indexed"] < COUNT

    shown = CliRunner().invoke(main, ["engine", "status"])
    assert shown.exit_code == 0 and "后台编码" in shown.output and "已编码" in shown.output
    check = check_engine(engine_home)
    assert check.ok and "后台编码" in check.summary

    done = wait_status(
        engine_home, lambda s: backlog_of(s) is None and s["service"].get("indexed") == COUNT, timeout_s=900
    )
    assert "后台编码" not in check_engine(engine_home).summary
    assert done["service"]["memories"] == COUNT
    state = read_state(engine_home.index_dir, mmap=False)
    assert not state.problem and sorted(state.id_list()) == sorted(ids)
    assert "pay_new_flow" in prompt_hook()
