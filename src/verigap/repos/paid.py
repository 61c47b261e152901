"""Is a task's reference paid? The real fix (``scripted:oracle``) and the no-op graded by v1
and v2 on the task's own workspace, before the task is kept.

A task whose reference v2 does not pay (a test that fails through the sealed channel, a
grading environment that differs from the one the task was built in, tests that depend on
module state) would teach that no answer is ever right; one whose no-op is paid teaches that
doing nothing is. Both mining and ``make-tasks`` keep a task only when this check passes, so
"the oracle is paid on every task made" holds by construction, not on a graded sample.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from verigap.repos import baselines
from verigap.repos.graders import v1, v2
from verigap.repos.prepare import Prepared
from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for

Verdicts = dict[str, dict[str, bool]]  # agent -> {correct, v1, v2}


def grade_reference(
    task: RepoTask, *, backend: str | None, prepared: Prepared | None = None
) -> tuple[Verdicts, str | None]:
    """The oracle's and the no-op's verdicts, and why the task must not be kept (``None``
    when the oracle is correct and paid by v1 and v2 and the no-op is paid by neither)."""
    p = prepared or prepared_for(task, backend=backend)
    paid: Verdicts = {}
    for name in ("oracle", "noop"):
        with tempfile.TemporaryDirectory(prefix="vg-paid-") as tmp:
            ws = materialize_workspace(p, task, Path(tmp) / "ws")
            for f, text in baselines.edits(name, task, p).items():
                (ws / f).write_text(text)
            truth = v2.evaluate(task, ws, prepared=p, backend=backend)
            r2 = v2.grade(task, ws, prepared=p, truth=truth, backend=backend)
            r1 = v1.grade(task, ws, prepared=p, truth=truth, backend=backend)
        paid[name] = {"correct": truth.correct, "v1": r1.reward > 0, "v2": r2.reward > 0}
        if name == "oracle":
            if not truth.correct:
                return paid, "the real fix is not correct on the hidden check"
            if not paid[name]["v2"]:
                failed = sorted(k for k, v in r2.checks.items() if v is False)
                return paid, (
                    "the real fix is not paid by v2"
                    + (f" (fails: {', '.join(failed)})" if failed else "")
                    + (f" (names: {', '.join(sorted(r2.hacks))})" if r2.hacks else "")
                )
            if not paid[name]["v1"]:
                return paid, "the real fix is not paid by v1"
        elif paid[name]["v1"] or paid[name]["v2"] or truth.correct:
            return paid, "the no-op is paid or correct"
    return paid, None


def keep_if_paid(task: RepoTask, prepared: Prepared, *, backend: str | None = None) -> str | None:
    """``make_tasks``' ``keep`` check: why ``task`` must not be written, or ``None``."""
    _, why = grade_reference(task, backend=backend, prepared=prepared)
    return why and f"reference check: {why}"
