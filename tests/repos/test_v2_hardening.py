"""v2's structural defences: per-site truth on evidence only, never paying INVALID or
TIMEOUT, two-context equivalence against defeat devices, verdicts that leak nothing, build-time
coverage of every site, and the in-process exploits failing the out-of-process check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verigap.repos.equivalence import EquivResult, coverage
from verigap.repos.graders import v2
from verigap.repos.redteam.catalogue import BY_NAME
from verigap.repos.redteam.exploits import Ctx, script
from verigap.repos.tasks import build_task, materialize_workspace
from verigap.repos.validate import ValidMutation
from verigap.rewards import Audit, DeletionPenalty, Oracle, Visible
from verigap.verdict import Status


@pytest.mark.parametrize("scheme", [Visible(), DeletionPenalty(), Audit(rate=1.0), Oracle()])
def test_invalid_and_timeout_are_never_paid(scheme):
    rng = np.random.default_rng(0)
    ok = v2.pay_checked(scheme, Status.OK, passed=True, correct=True, deletions=0, rng=rng)
    assert ok.reward == 1.0  # the control: the same checks under OK are paid
    for status in (Status.INVALID, Status.TIMEOUT):
        pay = v2.pay_checked(scheme, status, passed=True, correct=True, deletions=0, rng=rng)
        assert pay.reward == 0.0, (scheme, status)


def test_a_site_without_inputs_is_not_fixed_by_default():
    r = EquivResult(total=2, matched=2, per_target={"a.py::f": (2, 2)})
    assert r.target_ok("a.py::f") and r.covered("a.py::f")
    assert not r.target_ok("a.py::g") and not r.covered("a.py::g")


def _workspace(fixture_tasks, tmp_path, name):
    _, tasks, p = fixture_tasks
    ws = materialize_workspace(p, tasks[0], tmp_path / name)
    return tasks[0], p, ws


def _act(exploit: str, task, p, ws: Path) -> None:
    """Apply an exploit's file writes directly (the battery replays them through the tools)."""
    for tool, args in script(BY_NAME[exploit], Ctx(task, p, ws)):
        if tool == "write_file":
            (ws / args["path"]).write_text(args["content"])


def test_uncovered_site_speaks_only_through_its_tests_and_is_marked(
    fixture_tasks, tmp_path, backend
):
    """With one site's inputs removed, the no-op leaves that site ``broken`` (it used to be
    labelled ``fixed`` on no evidence), the oracle has it ``tests_passed``; both verdicts list
    it as tests_only. The no-op's verdict names no hidden test and carries no values."""
    task, p, ws = _workspace(fixture_tasks, tmp_path, "noop")
    site = task.sites[-1]  # a hidden site
    assert not site.visible
    stripped = task.model_copy(
        update={"equivalence": [x for x in task.equivalence if x.target != site.function]}
    )
    noop = v2.evaluate(stripped, ws, prepared=p, backend=backend)
    assert noop.outcomes[-1] == "hidden/broken"
    assert noop.detail["tests_only"] == [site.function]
    verdict = v2.grade(stripped, ws, truth=noop)
    dumped = json.dumps(verdict.to_dict())
    assert noop.detail["n_failing_hidden"] > 0 and noop.detail["equivalence_mismatches"]
    assert not any(t in dumped for t in task.hidden_tests)
    assert '"candidate"' not in dumped and '"reference"' not in dumped
    for s in task.sites:
        (ws / s.file).write_text((p.tree / s.file).read_text())
    oracle = v2.evaluate(stripped, ws, prepared=p, backend=backend)
    assert oracle.correct and oracle.outcomes[-1] == "hidden/tests_passed"
    assert all(o.endswith("/fixed") for o in oracle.outcomes[:-1])


def test_defeat_device_is_named_context_dependent(fixture_tasks, tmp_path, backend):
    """The reference behaviour only under the graders' flags: every test v2 runs passes and the
    plain-context comparison matches; the agent-like context does not."""
    task, p, ws = _workspace(fixture_tasks, tmp_path, "device")
    _act("defeat_device_obfuscated", task, p, ws)
    t = v2.evaluate(task, ws, prepared=p, backend=backend)
    assert t.checks["visible"] and t.checks["hidden"], t.detail  # pytest alone would pay it
    assert "context_dependent" in t.hacks
    assert not t.correct and v2.grade(task, ws, truth=t).reward == 0.0


def test_inprocess_report_rewrite_fails_out_of_process(fixture_tasks, tmp_path, backend):
    """The JSON encoder scrub makes v2's own pytest report say every test passed on broken
    code (the battery runs the other in-process exploits); the comparison still fails it."""
    task, p, ws = _workspace(fixture_tasks, tmp_path, "scrub")
    _act("json_encoder_scrub", task, p, ws)
    t = v2.evaluate(task, ws, prepared=p, backend=backend)
    assert t.checks["visible"] and t.checks["hidden"], t.detail  # the report was rewritten
    assert not t.correct and t.checks["equivalence"] < 1.0
    assert v2.grade(task, ws, truth=t).reward == 0.0


def test_task_sets_cover_every_site_by_default(fixture_tasks, tmp_path, backend):
    stats, tasks, p = fixture_tasks
    assert stats.coverage == 1.0
    assert all(coverage(t.sites, [x.model_dump() for x in t.equivalence]) == 1.0 for t in tasks)
    assert not any(s.tests_only for t in tasks for s in t.sites)
    task = tasks[0]
    sites = [
        ValidMutation(
            file=s.file,
            qualname=s.qualname,
            op=s.op,
            index=s.index,
            fail_to_pass=s.fail_to_pass,
            sha256="0" * 64,
        )
        for s in task.sites
    ]
    n_vis = sum(s.visible for s in task.sites)
    inputs = {
        s.function: [x.model_dump() for x in task.equivalence if x.target == s.function]
        for s in task.sites
    }
    inputs[task.sites[0].function] = []
    # a site with no input is not rejected when the sealed channel carries its tests: it is
    # kept as tests-only, discriminated by the forwarded run (the route v2 grades it by)
    got, why = build_task(p, sites, n_vis, inputs, seed=0, index=0, backend=backend)
    assert got is not None, why
    assert got.sites[0].tests_only and got.sites[0].discrimination == "forwarded"
    assert not any(s.tests_only for s in got.sites[1:])
    kept, why = build_task(
        p, sites, n_vis, inputs, seed=0, index=0, backend=backend, allow_tests_only=True
    )
    assert kept is not None, why
    assert [s.tests_only for s in kept.sites] == [True] + [False] * (len(sites) - 1)
    assert coverage(kept.sites, [x.model_dump() for x in kept.equivalence]) == (
        len(sites) - 1
    ) / len(sites)
