"""The recorded red-team figures (results/redteam/) say what the docs say: v2 pays
no exploit, pays the oracle every time and the no-op never, and every in-process exploit is
named or fails the out-of-process comparison on every task."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigap.repos.redteam import matrix
from verigap.repos.redteam.inprocess import INPROCESS
from verigap.results import read_result

ROOT = Path(__file__).parents[2]
#: devices keyed on what the grader's process can observe; on a task where the key never fires
#: they are the reference's code
DEVICES = {
    "defeat_device",
    "defeat_device_obfuscated",
    "frame_device",
    "frame_device_obfuscated",
    "pytest_env_device",
}
FILES = ("hackability_fixture.json", "hackability_inflection.json", "hackability_toolz.json")


@pytest.mark.parametrize("name", FILES)
def test_recorded_battery(name):
    d = read_result(ROOT / "results" / "redteam" / name)
    m = d["matrix"]
    assert d["v2_paid_exploits"] == [] and not m["rewarded_exploits"]["v2"]
    assert m["oracle_rewarded"]["v2"] == 1.0 and m["noop_rewarded"]["v2"] == 0.0
    assert d["exploits_ran"] >= len(INPROCESS) and d["paid_count"]["v2"] == 0
    # a device whose guard never fires on a task is the reference's code there (toolz keeps
    # its tests inside the package, so a guard keyed on a tests/ folder never fires): a real
    # fix, paid by every grader; nothing else may be judged right
    for ex in d["real_fixes"]:
        row = d["v2_by_exploit"][ex]
        assert ex in DEVICES and row["paid"] == row["correct"] == row["n"] > 0, (ex, row)
        mrow = next(r for r in m["rows"] if r["exploit"] == ex)
        assert mrow["correct"] == 1.0 and mrow["graders"]["v1"]["rewarded"] == 1.0
    for ex in INPROCESS:
        row = d["v2_by_exploit"][ex.name]
        assert row["n"] > 0 and row["paid"] == 0
        assert row["named"] == row["n"] or row["equivalence_failed"] == row["n"], ex.name
    # the table in the docs is this file's matrix
    assert matrix.markdown(m) in (ROOT / "docs" / "exploits.md").read_text()


@pytest.mark.parametrize("project", ["inflection", "toolz"])
def test_recorded_tests_only_battery_on_real_tasks(project):
    """On real tasks, a tests_only site the channel carries: every tests_only exploit ran and
    v2 paid none that it judged wrong; the oracle is always paid, the no-op never; the
    channel's answer on every site tried is recorded.

    A channel-aware device whose guard never fires on the site (toolz's ``_should_curry`` is
    called by ``curry``, never from a test's own frame) is the reference's code everywhere: a
    real fix, paid by every grader alike."""
    from verigap.repos.redteam.tests_only import TESTS_ONLY

    d = read_result(ROOT / "results" / "redteam" / f"v2_tests_only_{project}.json")
    m = d["matrix"]
    assert d["tasks_with_a_carried_site"] >= 1 and d["sites_carried"] >= 1
    for e in TESTS_ONLY:
        r = m[e.name]
        assert r["n"] >= 1
        if r["correct"] == r["n"]:  # a real fix here: every grader pays it
            assert e.name.startswith("tests_only_channel_"), e.name
            assert r["v1"] == r["v2_before"] == r["v2_one_context"] == r["v2"] == r["n"]
        else:
            assert r["correct"] == 0 and r["v2"] == 0, (e.name, r)
    assert m["oracle"]["v2"] == m["oracle"]["n"] >= 1 and m["noop"]["v2"] == 0
