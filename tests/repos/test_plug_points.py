"""A grader added by one registration is what the entry points then accept: the registry and
the episode jobs behind ``verigap repos run`` (adding one touches no other file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verigap.errors import ConfigError
from verigap.repos import episode
from verigap.repos.graders import registry
from verigap.verdict import Verdict


class ForgivingGrader:
    """Pays every episode: the grader a careless environment would ship."""

    name = "forgiving"

    def __call__(self, task: Any, workspace: Path, **context: Any) -> Verdict:
        return Verdict(task.task_id, {"build": True, "visible": True}, 1.0, False)


@pytest.fixture
def forgiving():
    grader = ForgivingGrader()
    registry.register(grader)
    yield grader
    registry._REGISTRY.pop("forgiving", None)


def test_a_registered_grader_is_accepted_everywhere(forgiving, tmp_path: Path) -> None:
    assert registry.make("forgiving") is forgiving and "forgiving" in registry.names()
    task = tmp_path / "t.json"
    task.write_text("{}")
    jobs = episode.jobs([task], ["scripted:oracle"], ["forgiving", "v2"], tmp_path / "runs")
    assert {j.kwargs["grader"] for j in jobs} == {"forgiving", "v2"}
    v = forgiving(type("T", (), {"task_id": "t"})(), tmp_path)
    assert v.false_success  # paid and wrong: what the gap measures


def test_an_unregistered_grader_is_refused_with_the_choices(tmp_path: Path) -> None:
    task = tmp_path / "t.json"
    task.write_text("{}")
    with pytest.raises(ConfigError, match="v1, v2"):
        episode.jobs([task], ["scripted:oracle"], ["forgiving"], tmp_path / "runs")
