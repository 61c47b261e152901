"""The generality results file keeps its promises, and docs/repos.md shows it through its view."""

from __future__ import annotations

from pathlib import Path

from verigap.report.views import get_view
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]


def test_generality_results_say_why_and_pay_only_the_oracle():
    data = read_result(ROOT / "results" / "repos" / "generality.json")
    doc = (ROOT / "docs" / "repos.md").read_text()
    assert "<!-- results results/repos/generality.json view:repos_generality -->" in doc
    assert get_view("repos_generality")(data) in doc  # tests/test_docs.py checks every marker
    assert all(r["tasks"] or r["reason"] for r in data["projects"])  # every failure says why
    assert all(r.get("command") for r in data["projects"])  # and which command made each row
    for r in data["projects"]:  # the oracle is paid by both graders, the no-op by neither
        if r["tasks"]:
            g = r.get("grading") or {}
            if "paid" not in g:  # only a run stopped before grading leaves tasks ungraded
                assert r.get("stopped"), r["spec"]
                continue
            assert g["paid"]["v1/oracle"] == g["paid"]["v2/oracle"] == g["graded"]
            assert g["paid"]["v1/noop"] == g["paid"]["v2/noop"] == 0


def test_the_view_shows_a_row_stopped_before_grading():
    row = {
        "spec": "demo==1",
        "case": "a case",
        "fetched": True,
        "prepared": True,
        "tasks": 3,
        "k": "2-4",
        "upper_bound": 40,
        "make_tasks_s": 300.0,
        "method_sites": 2,
        "grading": {"pending": True},
        "reason": "",
        "stopped": "stopped by SIGTERM in grading after 310 s: 3 task(s) written",
    }
    summary = {
        "projects": 1,
        "fetched": 1,
        "prepared": 1,
        "with_tasks": 1,
        "crash_share_of_valid_mutations": None,
    }
    text = get_view("repos_generality")({"projects": [row], "summary": summary})
    line = next(x for x in text.splitlines() if x.startswith("| demo==1"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[4:9] == ["3 (2-4)", "40", "300", "2", "-"]
    assert cells[9] == cells[10] == "-"  # not graded: no pay figures
    assert cells[11].startswith("stopped by SIGTERM in grading")


def test_the_before_after_table_compares_the_committed_rows():
    """Every row of the change file is a project whose row in generality.json was made by
    another command than its row in the earlier file, with both rows' numbers as they are."""
    change = read_result(ROOT / "results" / "repos" / "generality_change.json")
    earlier = {
        r["spec"]: r
        for r in read_result(ROOT / "results" / "repos" / "generality_earlier.json")["projects"]
    }
    now = {
        r["spec"]: r
        for r in read_result(ROOT / "results" / "repos" / "generality.json")["projects"]
    }
    assert change["projects"]
    for row in change["projects"]:
        spec = row["spec"]
        if row["before"] is None:  # a project the earlier file has no row for
            assert spec not in earlier and row["after"]["tasks"] == now[spec]["tasks"]
            continue
        assert row["before"]["tasks"] == earlier[spec]["tasks"]
        assert row["after"]["tasks"] == now[spec]["tasks"]
        assert row["after"]["command"] != row["before"]["command"]
    doc = (ROOT / "docs" / "repos.md").read_text()
    assert get_view("repos_generality_change")(change) in doc
