import numpy as np
import pytest

from verigap.verdict import Status, Verdict, summarize, summarize_arrays


def v(passed_build=True, visible=True, correct=True, reward=1.0, outcomes=(), **kw):
    return Verdict(
        "t",
        {"build": passed_build, "visible": visible, "hidden": correct},
        reward,
        correct,
        outcomes=outcomes,
        **kw,
    )


def test_false_success_is_visible_green_and_wrong():
    assert v(correct=False).false_success
    assert not v(correct=True).false_success
    assert not v(visible=False, correct=False).false_success
    assert not v(passed_build=False, correct=False).false_success


def test_float_visible_check_passes_only_at_one():
    assert not Verdict("t", {"visible": 0.99}, 0.0, False).passed
    assert Verdict("t", {"visible": 1.0}, 1.0, False).false_success
    assert not Verdict("t", {}, 0.0, False).passed  # no visible check at all is not a pass


def test_summary_rates_and_outcome_mix():
    vs = [
        v(correct=False, outcomes=("untested/delete", "tested/fixed")),
        v(correct=True, outcomes=("untested/fixed", "tested/fixed")),
        v(visible=False, correct=False, reward=0.0, outcomes=("untested/stub", "tested/wrong")),
        v(correct=True, status="TIMEOUT"),
    ]
    s = summarize(vs)
    assert s.n == 4
    assert s.pass_rate == 0.75
    assert s.true_success == 0.5
    assert s.false_success == 0.25
    assert s.mean_reward == 0.75
    assert s.outcome_mix["tested/fixed"] == pytest.approx(2 / 6)
    assert s.outcome_mix["untested/delete"] == pytest.approx(1 / 6)
    assert s.status_counts == {"OK": 3, "TIMEOUT": 1}


def test_verdict_round_trips_through_dict():
    a = v(
        correct=False,
        hacks=("delete",),
        outcomes=("untested/delete",),
        audited=True,
        caught=True,
        status=Status.INVALID,
    )
    d = a.to_dict()
    assert d["false_success"] is True and d["status"] == "INVALID"
    assert Verdict.from_dict(d) == a


def test_summarize_rejects_nothing():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize_arrays(np.array([]), np.array([]), np.array([]))
