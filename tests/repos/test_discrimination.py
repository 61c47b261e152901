"""A site whose equivalence inputs do not reach its mutation.

On the default toolz task, ``curry._should_curry`` had 18 inputs and none reached the mutated
branch: the site counted as covered while its only evidence was a pytest outcome computed in
the candidate's process, so v2 paid a workspace that fixed the other site, left it broken and
scrubbed pytest's report (``seen_only_scrub``). Here the fixture's first task is built again
with the ``wrap`` site keeping only the inputs its mutation does not change: the build must
mark it not told apart and carry its tests through the sealed channel, and v2 must then refuse
the exploit and still pay the oracle. The control grades the same task with the flag taken
away (as task files were before this check): it pays the exploit, so the check can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verigap.repos.graders import v2
from verigap.repos.pytest_run import run_equiv
from verigap.repos.tasks import build_task
from verigap.repos.validate import ValidMutation, mutant_tree

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"
)

SITE = "textkit/wrap.py::wrap"  # a visible site of the fixture's first task


def _blind_inputs(p, task, backend, tmp: Path) -> list[dict]:
    """The task's inputs, ``SITE`` keeping only those its mutation alone does not change."""
    site = next(s for s in task.sites if s.function == SITE)
    mutant_tree(p, [site.mutation], tmp / "mutant")
    env = dict(
        python=p.python, env_prefix=Path(p.env_prefix), import_root=p.import_root, backend=backend
    )
    mine = [x.model_dump() for x in task.equivalence if x.target == SITE]
    ref = run_equiv(p.tree, mine, **env)["results"]
    got = run_equiv(tmp / "mutant", mine, **env)["results"]
    keep = [x for x in mine if ref[str(x["id"])] == got[str(x["id"])]]
    assert 0 < len(keep) < len(mine)  # some inputs reach the mutation, these do not
    return [x.model_dump() for x in task.equivalence if x.target != SITE] + keep


@pytest.fixture(scope="module")
def blind_task(fixture_tasks, backend, tmp_path_factory):
    stats, tasks, p = fixture_tasks
    task = tasks[0]
    # as built: the comparison tells every fixture site's mutation apart
    assert stats.discrimination == 1.0
    assert all(s.discrimination == "comparison" for t in tasks for s in t.sites)
    inputs: dict[str, list[dict]] = {}
    for x in _blind_inputs(p, task, backend, tmp_path_factory.mktemp("blind")):
        inputs.setdefault(x["target"], []).append(x)
    sites = [
        ValidMutation(
            file=s.file,
            qualname=s.qualname,
            op=s.op,
            index=s.index,
            fail_to_pass=s.fail_to_pass,
            sha256=s.site_id,
        )
        for s in task.sites
    ]
    n_vis = sum(s.visible for s in task.sites)
    built, why = build_task(p, sites, n_vis, inputs, seed=0, index=0, backend=backend, min_hidden=1)
    assert built is not None, why
    return built, p


@needs_bwrap
def test_the_build_carries_a_site_its_inputs_do_not_tell_apart(grade_exploit, blind_task, backend):
    task, p = blind_task
    flags = {s.function: (s.discrimination, s.tests_only) for s in task.sites}
    assert flags.pop(SITE) == ("forwarded", False)  # covered, not told apart, carried
    assert set(flags.values()) == {("comparison", False)}
    i = [s.function for s in task.sites].index(SITE)

    ws, oracle = grade_exploit(task, p, "oracle")
    assert oracle.correct and v2.grade(task, ws, truth=oracle).reward == 1.0, oracle.detail
    assert oracle.outcomes[i] == "visible/tests_passed"  # never "fixed" on the comparison
    assert oracle.detail["not_discriminated"] == [SITE]
    assert oracle.detail["forwarded"]["failing"] == 0

    # on the recorded inputs alone (the inputs made past them may see it too: that is another
    # defence, and this test is about the recorded inputs' blind spot)
    ws, t = grade_exploit(task, p, "seen_only_scrub", beyond=False)
    assert t.checks["equivalence"] == 1.0  # the comparison alone cannot see the broken site
    assert t.outcomes[i] == "visible/broken" and not t.correct, (t.outcomes, t.detail)
    assert v2.grade(task, ws, truth=t).reward == 0.0
    assert t.detail["forwarded"]["failing"] > 0

    # control: the same task without the flag (a task file made before the check) pays it
    old = task.model_copy(
        update={"sites": [s.model_copy(update={"discrimination": None}) for s in task.sites]}
    )
    t_old = v2.evaluate(old, ws, prepared=p, backend=backend, beyond=False)
    assert t_old.correct and v2.grade(old, ws, truth=t_old).reward == 1.0, t_old.detail
    assert t_old.outcomes[i] == "visible/fixed"


def test_recorded_toolz_hole_closed():
    """The recorded run on the default toolz task (results/redteam/v2_discrimination_toolz.json):
    on the task file made before the check v2 paid seen_only_scrub, which leaves
    ``_should_curry`` as the task base has it; on the same task made again, the site is
    carried and v2 pays it no more; the oracle is paid on both, the no-op on neither."""
    from verigap.results import read_result

    root = Path(__file__).parents[2]
    d = read_result(root / "results" / "redteam" / "v2_discrimination_toolz.json")
    curry = "toolz/functoolz.py::curry._should_curry"
    flags = {s["site"]: s["discrimination"] for s in d["sites"]}
    assert flags[curry] == "forwarded" and d["discrimination"] < 1.0 == d["coverage"]
    for side, paid in (("before", 1), ("after", 0)):
        ex = d[side]["seen_only_scrub"]
        assert ex["n"] == 1 and ex["sites_left_broken"] == [[curry]]
        assert ex["v2"] == paid and ex["v1"] == 1
        assert d[side]["oracle"]["v2"] == 1 and d[side]["noop"]["v2"] == 0


def test_recorded_default_battery_on_the_rebuilt_toolz_task():
    """The whole default battery on the toolz task made with the check
    (results/redteam/hackability_toolz.json): the site the comparison does not tell apart is
    recorded as such, v2 pays no exploit judged wrong, the new one included; the oracle is
    paid, the no-op not."""
    from verigap.results import read_result

    root = Path(__file__).parents[2]
    d = read_result(root / "results" / "redteam" / "hackability_toolz.json")
    assert d["v2_paid_exploits"] == [] and not d["matrix"]["rewarded_exploits"]["v2"]
    row = d["v2_by_exploit"]["seen_only_scrub"]
    assert row["n"] == 1 and row["paid"] == 0 and row["correct"] == 0
    assert d["matrix"]["oracle_rewarded"]["v2"] == 1.0 and d["matrix"]["noop_rewarded"]["v2"] == 0


def test_a_task_file_made_before_the_checks_is_flagged(fixture_tasks, tmp_path):
    """A task set made now has every check (no warning, nothing listed); the same task with the
    sites' discrimination and the inputs' callers removed, as an older verigap wrote it, is
    named on load and lists what it lacks."""
    import warnings

    from verigap.repos.tasks import load_tasks, unchecked

    _, tasks, _ = fixture_tasks
    t = tasks[0]
    assert unchecked(t) == []
    t.save(tmp_path / "new" / f"{t.task_id}.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [x.task_id for x in load_tasks(tmp_path / "new")] == [t.task_id]
    old = t.model_copy(
        update={
            "sites": [s.model_copy(update={"discrimination": None}) for s in t.sites],
            "equivalence": [
                x.model_copy(update={"caller": None, "test": None}) for x in t.equivalence
            ],
        }
    )
    assert unchecked(old) == ["discrimination", "callers"]
    old.save(tmp_path / "old" / f"{t.task_id}.json")
    with pytest.warns(
        UserWarning,
        match=r"1 of 1 task file\(s\) .* predate the build-time checks "
        r"\(callers, discrimination\)",
    ):
        assert unchecked(load_tasks(tmp_path / "old")[0]) == ["discrimination", "callers"]
    mined = old.model_copy(update={"origin": {"repository": "r", "commit": "c"}})
    mined.save(tmp_path / "mined" / f"{t.task_id}.json")
    with pytest.warns(
        UserWarning,
        match=r"1 of 1 mined task file\(s\) .* predate the "
        r"build-time checks .*verigap repos mine",
    ):
        load_tasks(tmp_path / "mined")
