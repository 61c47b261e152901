"""A task is written only when its reference is paid: the real fix correct and paid by v1 and
v2, the no-op paid by neither. The check grades for real (it needs the sandbox backend the
repo tests use); its control is an "oracle" that writes nothing, which must be refused."""

from __future__ import annotations

from pathlib import Path

from verigap.repos import baselines
from verigap.repos.paid import grade_reference, keep_if_paid
from verigap.repos.tasks import make_tasks

from .conftest import FIXTURE_LIB


def test_the_reference_of_a_pinned_task_is_paid_and_an_empty_oracle_is_refused(
    fixture_tasks, backend, monkeypatch
):
    _, tasks, p = fixture_tasks
    verdicts, why = grade_reference(tasks[0], backend=backend, prepared=p)
    assert why is None
    assert verdicts == {
        "oracle": {"correct": True, "v1": True, "v2": True},
        "noop": {"correct": False, "v1": False, "v2": False},
    }
    real = baselines.edits
    monkeypatch.setattr(
        baselines, "edits", lambda name, t, pp: {} if name == "oracle" else real(name, t, pp)
    )
    assert keep_if_paid(tasks[0], p, backend=backend) == (
        "reference check: the real fix is not correct on the hidden check"
    )


def test_the_cheap_no_op_check_of_make_tasks_refuses_a_no_op_that_v1_pays(
    fixture_tasks, backend, monkeypatch
):
    """keep_if_paid asks only v1's visible run of the no-op: a "no-op" that is really the fix
    is paid there, and the task is refused (the real no-op is not: the pinned task is kept)."""
    _, tasks, p = fixture_tasks
    assert keep_if_paid(tasks[0], p, backend=backend) is None
    real = baselines.edits
    monkeypatch.setattr(
        baselines,
        "edits",
        lambda name, t, pp: real("oracle", t, pp) if name == "noop" else real(name, t, pp),
    )
    assert (
        keep_if_paid(tasks[0], p, backend=backend)
        == "reference check: the no-op is paid or correct"
    )


def test_a_failing_test_outside_the_visible_split_in_the_shown_run_refuses_the_task(
    fixture_tasks, backend, monkeypatch
):
    """The agent's own first run must fail the visible failures and nothing else: a test file
    beside the visible ones (as a doctest of a hidden site would be) that fails there shows
    the agent more than the task means, and the task is refused."""
    _, tasks, p = fixture_tasks
    task = tasks[0]
    folder = Path(task.visible_test_files[0]).parent
    real = baselines.edits

    def edits(name, t, pp):
        if name != "noop":
            return real(name, t, pp)
        return {str(folder / "test_outside.py"): "def test_outside():\n    assert False\n"}

    monkeypatch.setattr(baselines, "edits", edits)
    assert keep_if_paid(task, p, backend=backend) == (
        "reference check: the test command shown to the agent fails tests outside the visible ones"
    )


def test_make_tasks_writes_no_task_its_keep_check_refuses(repo_cache, tmp_path, backend):
    asked = []

    def refuse(task, prepared):
        asked.append(task.task_id)
        return "refused by the test"

    stats = make_tasks(
        str(FIXTURE_LIB),
        tmp_path / "out",
        k=2,
        n=2,
        max_candidates=16,
        max_tries=3,
        env="current",
        backend=backend,
        min_hidden=1,
        keep=refuse,
        log=lambda s: None,
    )
    assert stats.tasks == 0 and len(asked) >= 1
    assert stats.task_rejected == {"refused by the test": len(asked)}
    assert not list((tmp_path / "out").glob("*-s0-*.json"))
