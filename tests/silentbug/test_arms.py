"""The arm registry: the built-in arms' capabilities, strict parsing, and a new arm added by
one registration that the episode, the scripted agents and the scoring then honour."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.silentbug import arms
from verigap.silentbug.bank import load_registry
from verigap.silentbug.episode import BugEpisode, prompt
from verigap.silentbug.evaluate import episode_scores, parse_arms
from verigap.silentbug.scripted import script

BUG = load_registry().get("single_recomputed_old_logprob")


def test_builtin_arms_and_their_capabilities() -> None:
    assert arms.names()[:4] == ("A", "B", "C", "D")
    caps = {n: (a.files, a.run, a.metrics, a.plots) for n in "ABCD" for a in [arms.get(n)]}
    assert caps == {
        "A": (True, True, False, False),
        "B": (True, True, True, False),
        "C": (True, True, True, True),
        "D": (False, True, True, False),
    }
    assert arms.get("c") is arms.C and arms.get(arms.D) is arms.D


def test_parsing_is_strict_and_names_the_choices() -> None:
    assert parse_arms(" a, D ") == ["A", "D"]
    for bad in ("A,Z", "", ","):
        with pytest.raises(ConfigError, match="choose from A, B, C, D"):
            parse_arms(bad)
    with pytest.raises(ConfigError, match="unknown arm 'Q'"):
        arms.get("Q")
    with pytest.raises(ConfigError, match="already registered"):
        arms.register(arms.Arm("A", files=False, run=False, metrics=False, plots=False))
    with pytest.raises(ConfigError, match="upper-case"):
        arms.register(arms.Arm("x,y", files=False, run=False, metrics=False, plots=False))


@pytest.fixture
def plots_only() -> arms.Arm:
    """A new arm, registered by this test alone: plots of runs, no files, no raw metrics."""
    arm = arms.register(
        arms.Arm(
            "P",
            files=False,
            run=True,
            metrics=False,
            plots=True,
            tools="run training and plot its metrics",
        )
    )
    yield arm
    arms.unregister("P")


def test_a_new_arm_is_one_registration(plots_only: arms.Arm, tmp_path: Path) -> None:
    assert "P" in parse_arms("A,P") and "P" not in arms.names()[:4]
    calls = [name for name, _ in script("oracle", BUG, "P", 0, _budget())]
    assert calls == ["run_training", "plot_metrics", "submit_diagnosis"]
    submit = dict(script("noop", BUG, "P", 0, _budget()))["submit_diagnosis"]
    assert set(submit) == {"component", "mechanism"}  # no files: no location to give
    scores = episode_scores(
        {
            "arm": "P",
            "verdict": {"reward": 0.0, "status": "OK", "checks": {}, "correct": False, "hacks": []},
        }
    )
    assert scores["localized"] is None
    assert "run training and plot its metrics" in prompt(BUG, "P", _budget())
    if shutil.which("bwrap") is None:
        pytest.fail("needs bubblewrap: apt-get install bubblewrap")
    names = [t.name for t in BugEpisode(BUG, "P", 1, tmp_path / "ep").tools()]
    assert names == ["run_training", "plot_metrics", "submit_diagnosis"]


def _budget():
    from verigap.silentbug.episode import EpisodeBudget

    return EpisodeBudget(max_runs=2, max_steps=1000, max_turns=8)
