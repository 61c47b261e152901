"""The committed feature tasks (``data/feature_tasks/PROJECT/*.json``, mined from the bundled
projects' history) agree with their results file, and each one was kept for the right reasons:
its real change correct and paid by v1 and v2, its no-op paid by neither, every hidden test
failing at the base, and a ticket that quotes no line of the implementation.

Grading every task again takes hours on two cores, so the fast tests read the verdicts each task
recorded when it was graded at mining time; the slow one mines a sample again from the bundles
and grades it afresh.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from verigap.repos.schema import RepoTask
from verigap.repos.tasks import unit_of
from verigap.repos.tickets import implementation_lines
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "feature_tasks"
RESULT = ROOT / "results" / "repos" / "feature_tasks.json"
BUNDLES = Path(os.environ.get("VERIGAP_BUNDLES", ROOT.parent / "shared" / "repos"))


def _tasks() -> list[RepoTask]:
    return [RepoTask.load(f) for f in sorted(DATA.glob("*/*.json"))]


@pytest.fixture(scope="module")
def tasks() -> list[RepoTask]:
    found = _tasks()
    if not found:
        pytest.skip("no feature tasks committed yet (benchmarks/repos_mining.py features)")
    return found


def test_the_committed_set_is_the_results_file(tasks):
    data = read_result(RESULT)
    assert sorted(t.task_id for t in tasks) == sorted(r["task_id"] for r in data["tasks"])
    kept_twice = len(data["kept_by_two_walks"])  # walks that overlap keep a task twice
    assert data["kept"] == len(tasks) == sum(w["kept"] for w in data["walks"]) - kept_twice
    by_project = {p: sum(t.origin["project"] == p for t in tasks) for p in data["per_project"]}
    assert by_project == data["per_project"]
    assert data["projects_with_tasks"] == len({t.origin["project"] for t in tasks})
    for w in data["walks"]:  # every commit walked is a task, a reason, or not reached
        assert w["walked"] == w["kept"] + sum(w["rejected"].values()) + w["not_tried"]


def test_every_kept_task_was_paid_for_the_real_change_only(tasks):
    for t in tasks:
        assert t.kind == "feature" and t.origin["kind"] == "mined feature", t.task_id
        v = json.loads(t.origin["verdicts"])
        assert v["oracle"] == {"correct": True, "v1": True, "v2": True}, t.task_id
        assert v["noop"] == {"correct": False, "v1": False, "v2": False}, t.task_id


def test_every_hidden_test_fails_at_the_base(tasks):
    for t in tasks:
        assert t.hidden_tests and not set(t.hidden_tests) & set(t.visible_tests), t.task_id
        failing_units = {unit_of(x) for x in t.fail_to_pass}
        assert {unit_of(x) for x in t.hidden_tests} <= failing_units, t.task_id
        # the no-op fails a visible test: an acceptance test, or old tests that need the name
        assert set(t.fail_to_pass) & set(t.visible_tests), t.task_id


def _body_lines(site) -> list[str]:
    return implementation_lines(site.original, site.qualname.rpartition(".")[2])


def test_no_ticket_quotes_an_implementation_line(tasks):
    for t in tasks:
        assert t.prompt.startswith("Feature request"), t.task_id
        body = [ln for s in t.sites for ln in _body_lines(s)]
        assert body, t.task_id  # the check below reads real code
        quoted = [ln for ln in body if len(ln) > 12 and ln in t.prompt]
        assert not quoted, (t.task_id, quoted[:3])


def test_the_quote_check_can_fail(tasks):
    """Control: a ticket that pastes a body line is caught by the same check."""
    t = tasks[0]
    line = next(ln for s in t.sites for ln in _body_lines(s) if len(ln) > 12)
    leaky = t.prompt + "\n" + line
    assert [ln for s in t.sites for ln in _body_lines(s) if len(ln) > 12 and ln in leaky]


@pytest.mark.slow
def test_a_sample_mined_again_from_the_bundles_is_the_same_and_paid(
    tasks, repo_cache, tmp_path, backend
):
    """One task per project whose code no package in this interpreter provides, mined again
    from its bundle: the same task (tests, sites, reference tree), kept again after its real
    change and no-op were graded afresh by v1 and v2."""
    from verigap.repos.mine import mine
    from verigap.repos.tasks import load_tasks

    sample: dict[str, RepoTask] = {}
    for t in tasks:  # more-itertools is installed here: mining beside it would strip it
        if t.origin["project"] in ("inflection", "toolz"):
            sample.setdefault(t.origin["project"], t)
    if not sample:
        pytest.skip("no committed task from a project this test can re-mine")
    for project, t in sample.items():
        bundle = BUNDLES / f"{project}.bundle"
        if not bundle.is_file():
            pytest.skip(f"{bundle} not found: the git bundles live in ../shared/repos")
        repo = tmp_path / project
        subprocess.run(["git", "clone", "-q", str(bundle), str(repo)], check=True)
        sha = t.origin["commit"]
        stats = mine(
            repo,
            tmp_path / f"{project}-tasks",
            rev_range=f"{sha}^..{sha}",
            kind="feature",
            env="current",
            backend=backend,
            log=lambda s: None,
        )
        assert stats.tasks == 1, stats.rejected
        (again,) = load_tasks(tmp_path / f"{project}-tasks")
        assert json.loads(again.origin["verdicts"]) == json.loads(t.origin["verdicts"])
        for field in ("task_id", "visible_tests", "hidden_tests", "fail_to_pass", "prompt"):
            assert getattr(again, field) == getattr(t, field), (project, field)
        assert again.source.tree_sha256 == t.source.tree_sha256
        assert [s.original for s in again.sites] == [s.original for s in t.sites]
