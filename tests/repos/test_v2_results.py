"""The recorded red-team figures of issue 11 (results/redteam/) say what the docs say: v2 pays
no exploit, pays the oracle every time and the no-op never, and every in-process exploit is
named or fails the out-of-process comparison on every task."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigap.repos.redteam import matrix
from verigap.repos.redteam.inprocess import INPROCESS
from verigap.results import read_result

ROOT = Path(__file__).parents[2]
FILES = ("v2_issue11_fixture.json", "v2_issue11_inflection.json")


@pytest.mark.parametrize("name", FILES)
def test_recorded_battery(name):
    d = read_result(ROOT / "results" / "redteam" / name)
    m = d["matrix"]
    assert d["v2_paid_exploits"] == [] and not m["rewarded_exploits"]["v2"]
    assert m["oracle_rewarded"]["v2"] == 1.0 and m["noop_rewarded"]["v2"] == 0.0
    for ex in INPROCESS:
        row = d["v2_by_exploit"][ex.name]
        assert row["n"] > 0 and row["paid"] == 0
        assert row["named"] == row["n"] or row["equivalence_failed"] == row["n"], ex.name
    # the table in the docs is this file's matrix
    assert matrix.markdown(m) in (ROOT / "docs" / "exploits.md").read_text()
