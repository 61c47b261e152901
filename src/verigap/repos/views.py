"""Views of the repo-task results files, for the docs markers and the site (see docs/results.md).

- ``repos_generality``: ``results/repos/generality.json`` (``benchmarks/repos_generality.py``),
  per project whether it fetched, prepared and yielded tasks, or the reason it did not;
- ``repos_generality_change``: ``results/repos/generality_change.json`` (the same benchmark's
  ``--compare``), per project rerun, its row before and after;
- ``repos_baselines``: a ``verigap repos run ... --save`` file, per grader and scripted agent.
(v2's grading cost is ``results/repos/v2_speed.json``, quoted in ``docs/exploits.md``.)
"""

from __future__ import annotations

from typing import Any

from verigap.report.views import markdown_table, view

_YES = {True: "yes", False: "no"}


@view("repos_generality")
def generality_table(data: dict[str, Any]) -> str:
    """Per project: fetched, prepared, tasks built (at k), their sites that are methods, crash
    share, v1/v2 on the oracle and the no-op (on the graded sample), and the reason the user saw
    when it yielded fewer tasks than asked (or where a time limit stopped it); then the summary
    line."""
    rows = []
    for r in data["projects"]:
        g = r.get("grading")
        pay = {
            a: f"{g['paid'][f'v1/{a}']}/{g['graded']} / {g['paid'][f'v2/{a}']}/{g['graded']}"
            if g and "paid" in g
            else "-"
            for a in ("oracle", "noop")
        }
        crash = "-" if r.get("crash_share_valid") is None else f"{r['crash_share_valid']:.0%}"
        reason = r["reason"].splitlines()[0][:160] if r["reason"] else ""
        if r.get("stopped") and r["stopped"] not in reason:
            reason = f"{r['stopped']}; {reason}" if reason else r["stopped"]
        tasks = f"{r['tasks']} ({r['k']})" if "k" in r else str(r["tasks"])
        bound = (
            "-"
            if r.get("upper_bound") is None
            else f"{'>= ' * bool(r.get('upper_bound_capped'))}{r['upper_bound']}"
        )
        secs = "-" if r.get("upper_bound") is None else f"{r['make_tasks_s']:.0f}"
        rows.append(
            [
                r["spec"],
                r["case"],
                _YES[r["fetched"]],
                _YES[r["prepared"]],
                tasks,
                bound,
                secs,
                "-" if r.get("method_sites") is None else str(r["method_sites"]),
                crash,
                pay["oracle"],
                pay["noop"],
                reason.replace("|", "/"),
            ]
        )
    table = markdown_table(
        [
            "project",
            "case",
            "fetched",
            "prepared",
            "tasks (k)",
            "could make",
            "make-tasks s",
            "method sites",
            "crash share",
            "v1 / v2 pay oracle",
            "v1 / v2 pay no-op",
            "reason",
        ],
        rows,
    )
    sm = data["summary"]
    share = sm["crash_share_of_valid_mutations"]
    searched = ""
    if sm.get("searched"):
        med = sm.get("median_s_to_10_tasks")
        searched = (
            f" Of the {sm['searched']} rows made by the combination search, "
            f"{sm['with_10_tasks']} reached 10 tasks; median seconds to 10 tasks "
            f"(make-tasks after preparing): {'-' if med is None else f'{med:.0f}'}."
        )
    return (
        f"{table}\n\n{sm['with_tasks']} of {sm['projects']} projects yield tasks "
        f"({sm['fetched']} fetched, {sm['prepared']} prepared); crash-at-first-call share "
        f"of valid mutations: {'-' if share is None else f'{share:.0%}'} (dropped by "
        f"default, so none is a site of a built task).{searched}"
    )


@view("repos_baselines")
def baselines_table(data: dict[str, Any]) -> str:
    """Per grader and agent: share paid, reward, visible pass, correct, false success, paid and wrong."""
    return markdown_table(
        [
            "grader",
            "agent",
            "episodes",
            "paid",
            "mean reward",
            "visible pass",
            "correct",
            "paid & wrong",
        ],
        [
            [
                r["grader"],
                r["agent"],
                str(r["n"]),
                f"{r['paid']:.0%}",
                f"{r['mean_reward']:.2f}",
                f"{r['pass_rate']:.0%}",
                f"{r['true_success']:.0%}",
                f"{r['paid_wrong']:.0%}",
            ]
            for r in data["rows"]
        ],
    )


@view("repos_generality_change")
def generality_change_table(data: dict[str, Any]) -> str:
    """Per project rerun: tasks (k), could make, make-tasks seconds and where they went
    (validation, the tasks stage), the tasks' sites that are methods, and v2 on the oracle and
    the no-op over the graded sample, before and after."""

    def cell(b: dict[str, Any] | None) -> list[str]:
        if b is None:  # the earlier run had no row for the project
            return ["no row", "-", "-", "-", "-", "-"]
        secs = "-" if b.get("make_tasks_s") is None else f"{b['make_tasks_s']:.0f}"
        stages = (
            "-" if b.get("validate_s") is None else f"{b['validate_s']:.0f} / {b['tasks_s']:.0f}"
        )
        bound = "-" if b.get("upper_bound") is None else str(b["upper_bound"])
        k = f" ({b['k']})" if b.get("k") else ""
        g = b.get("grading") or {}
        pay = (
            f"{g['paid']['v2/oracle']}/{g['graded']} / {g['paid']['v2/noop']}/{g['graded']}"
            if "paid" in g
            else "-"
        )
        methods = "-" if b.get("method_sites") is None else str(b["method_sites"])
        return [f"{b['tasks']}{k}", bound, secs, stages, methods, pay]

    rows = [[r["spec"], *cell(r["before"]), *cell(r["after"])] for r in data["projects"]]
    side = ["tasks (k)", "could make", "make-tasks s", "validate / tasks s", "method sites"]
    return markdown_table(
        [
            "project",
            *(f"before: {c}" if i == 0 else c for i, c in enumerate(side)),
            "v2 pays oracle / no-op",
            *(f"after: {c}" if i == 0 else c for i, c in enumerate(side)),
            "v2 pays oracle / no-op",
        ],
        rows,
    )
