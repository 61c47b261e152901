"""Is a task's reference paid? The real fix (``scripted:oracle``) and the no-op graded on the
task's own workspace, before the task is kept.

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
from verigap.repos.shown_command import shown_refusal
from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for

Verdicts = dict[str, dict[str, bool]]  # agent -> {correct, v1, v2}


def _graded(name: str, task: RepoTask, p: Prepared, *, backend: str | None, full: bool) -> dict:
    """``name``'s verdicts on the task's workspace: v1 always; v2 and the truth when ``full``,
    otherwise why the agent's own test run refuses the task (``shown``, or ``None``)."""
    with tempfile.TemporaryDirectory(prefix="vg-paid-") as tmp:
        ws = materialize_workspace(p, task, Path(tmp) / "ws")
        for f, text in baselines.edits(name, task, p).items():
            (ws / f).write_text(text)
        if not full:
            res = v1.run_visible(p, ws, backend=backend)
            return {
                "v1": res.returncode == 0 and not res.timed_out,
                "shown": shown_refusal(
                    p, ws, set(task.fail_to_pass) & set(task.visible_tests), backend=backend
                ),
            }
        truth = v2.evaluate(task, ws, prepared=p, backend=backend)
        r2 = v2.grade(task, ws, prepared=p, truth=truth, backend=backend)
        r1 = v1.grade(task, ws, prepared=p, truth=truth, backend=backend)
    out = {"correct": truth.correct, "v1": r1.reward > 0, "v2": r2.reward > 0}
    if not out["v2"]:
        failed = sorted(k for k, v in r2.checks.items() if v is False)
        out["why_v2"] = (f" (fails: {', '.join(failed)})" if failed else "") + (
            f" (names: {', '.join(sorted(r2.hacks))})" if r2.hacks else ""
        )
    return out


def _refusal(paid: dict) -> str | None:
    """Why the verdicts so far refuse the task, or ``None``."""
    oracle, noop = paid.get("oracle"), paid.get("noop")
    if oracle is not None:
        if not oracle["correct"]:
            return "the real fix is not correct on the hidden check"
        if not oracle["v2"]:
            return "the real fix is not paid by v2" + oracle.get("why_v2", "")
        if not oracle["v1"]:
            return "the real fix is not paid by v1"
    if noop is not None and (noop["v1"] or noop.get("v2") or noop.get("correct")):
        return "the no-op is paid or correct"
    return noop.get("shown") if noop is not None else None


def grade_reference(
    task: RepoTask, *, backend: str | None, prepared: Prepared | None = None
) -> tuple[Verdicts, str | None]:
    """The oracle's and the no-op's verdicts by v1 and v2, and why the task must not be kept
    (``None`` when the oracle is correct and paid by both and the no-op by neither)."""
    p = prepared or prepared_for(task, backend=backend)
    paid: Verdicts = {}
    for name in ("oracle", "noop"):
        paid[name] = _graded(name, task, p, backend=backend, full=True)
        why = _refusal(paid)
        if why:
            break
    return {a: {k: v[k] for k in ("correct", "v1", "v2")} for a, v in paid.items()}, why


def keep_if_paid(task: RepoTask, prepared: Prepared, *, backend: str | None = None) -> str | None:
    """``make_tasks``' ``keep`` check: why ``task`` must not be written, or ``None``.

    The oracle is graded in full (v2's evaluation and v1's run). The no-op of a made task is
    its mutated code, which make-tasks has already shown fails visible tests and the hidden
    checks, so v2 cannot pay it nor call it correct; only v1's run of the visible suite in the
    workspace is asked of it, and the agent's own first run: the shown test command must fail
    exactly the visible failures (mining asks the same, ``shown_command.shown_refusal``). The
    no-op's v2 evaluation (its hidden tests, sealed-channel tests and comparison runs) is
    skipped; mined tasks, whose no-op nothing has checked, still get it
    (:func:`grade_reference`)."""
    paid = {"oracle": _graded("oracle", task, prepared, backend=backend, full=True)}
    if not _refusal(paid):
        paid["noop"] = _graded("noop", task, prepared, backend=backend, full=False)
    why = _refusal(paid)
    return why and f"reference check: {why}"
