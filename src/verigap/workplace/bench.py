"""The workplace family's measurements, as results data: context agents scored apart, the
reviewer rubric's controls and the rubric on existing repo tasks (the local model's runs are in
``verigap.workplace.local_model``).

Each function returns plain data; ``verigap workplace ...`` writes it with ``write_result``.
Every episode is one line of ``episodes`` so a reader can check any number against its runs.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from verigap.verdict import Verdict
from verigap.workplace._items import KINDS, WorkItem, build_items
from verigap.workplace.agents import CONTEXT_AGENTS, CONTROLS, FLAW_ITEM, run_agent
from verigap.workplace.review import ITEMS

Log = Callable[[str], None]


def _row(agent: str, item: WorkItem, v: Verdict) -> dict[str, Any]:
    return {
        "agent": agent,
        "item": item.item_id,
        "kind": item.kind,
        "project": item.project,
        "reward": v.reward,
        "correct": v.correct,
        "passed": v.passed,
        "matched": v.detail["matched"],
        "consulted_all_needed": v.detail["consulted_all_needed"],
        "tool_calls": len(v.detail["tool_calls"]),
        "review_failed": v.detail.get("review_failed", []),
    }


def _share(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else 0.0


def _mix(rows: list[dict[str, Any]]) -> dict[str, float]:
    c = Counter(r["matched"] for r in rows)
    return {k: round(v / len(rows), 4) for k, v in sorted(c.items())}


def context_scores(
    seeds: Sequence[int], *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """Every context agent on every task and probe: true success, reward, which source its
    answers agree with, and whether its tool calls surfaced the needed facts."""
    items = build_items(list(seeds))
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-wp-") as tmp:
        for item in items:
            for agent in CONTEXT_AGENTS:
                rows.append(
                    _row(agent, item, run_agent(agent, item, Path(tmp) / "ep", backend=backend))
                )
            log(
                f"{item.item_id}: "
                + " ".join(f"{r['agent']}={int(r['correct'])}" for r in rows[-3:])
            )
    per_agent: dict[str, Any] = {}
    for agent in CONTEXT_AGENTS:
        mine = [r for r in rows if r["agent"] == agent]
        per_kind = {}
        for kind in KINDS:
            k_rows = [r for r in mine if r["kind"] == kind]
            per_kind[kind] = {
                "n": len(k_rows),
                "true_success": _share(k_rows, "correct"),
                "mean_reward": round(sum(r["reward"] for r in k_rows) / len(k_rows), 4),
                "false_success": round(
                    sum(r["passed"] and not r["correct"] for r in k_rows) / len(k_rows), 4
                ),
                "matched": _mix(k_rows),
                "consulted_all_needed": _share(k_rows, "consulted_all_needed"),
            }
        per_agent[agent] = {
            "n": len(mine),
            "true_success": _share(mine, "correct"),
            "follows_outdated": round(sum(r["matched"] == "outdated" for r in mine) / len(mine), 4),
            "keeps_code": round(sum(r["matched"] == "code" for r in mine) / len(mine), 4),
            "per_kind": per_kind,
        }
    spread = {
        item.item_id: sorted({item.scenario.where[r.split(":")[-1]] for r in item.needed_facts})
        for item in items
    }
    return {
        "seeds": list(seeds),
        "n_items": len(items),
        "n_by_kind": dict(Counter(i.kind for i in items)),
        "n_by_project": dict(Counter(i.project for i in items)),
        "min_tools_per_item": min(len(v) for v in spread.values()),
        "agents": per_agent,
        "episodes": rows,
    }


def rubric_controls(
    seeds: Sequence[int], *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """Careful and sloppy controls on every code task: the tests and each rubric item."""
    items = [i for i in build_items(list(seeds)) if i.kind == "code"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-wp-") as tmp:
        for item in items:
            for control in CONTROLS:
                v = run_agent(control, item, Path(tmp) / "ep", backend=backend)
                flaw = control.split(":", 1)[1] if ":" in control else None
                item_checked = FLAW_ITEM.get(flaw or "")
                applies = item_checked is None or not v.detail["review"][item_checked].startswith(
                    "n/a"
                )
                rows.append(
                    {
                        **_row(control, item, v),
                        "visible": bool(v.checks["visible"]),
                        "hidden": bool(v.checks["hidden"]),
                        "flaw_item": item_checked,
                        "flaw_applies": applies,
                        "caught": item_checked in v.detail["review_failed"]
                        if item_checked
                        else None,
                    }
                )
            log(
                f"{item.item_id}: "
                + " ".join(
                    f"{r['agent']}:{len(r['review_failed'])}" for r in rows[-len(CONTROLS) :]
                )
            )
    per_control = {}
    for control in CONTROLS:
        mine = [r for r in rows if r["agent"] == control]
        applicable = [r for r in mine if r["flaw_applies"]]
        per_control[control] = {
            "n": len(mine),
            "tests_pass": _share(mine, "hidden"),
            "visible_pass": _share(mine, "visible"),
            "rubric_clean": round(sum(not r["review_failed"] for r in mine) / len(mine), 4),
            "n_applicable": len(applicable),
            "flaw_caught": (
                _share([{"c": r["caught"]} for r in applicable], "c")
                if control != "careful"
                else None
            ),
            "items_failed": dict(Counter(i for r in mine for i in r["review_failed"])),
        }
    caught_not_tests = sum(
        1 for r in rows if r["agent"] != "careful" and r["hidden"] and r["visible"] and r["caught"]
    )
    sloppy = [r for r in rows if r["agent"] != "careful" and r["flaw_applies"]]
    careful = [r for r in rows if r["agent"] == "careful"]
    summary = {
        "careful_tests_pass": _share(careful, "hidden"),
        "careful_rubric_clean": per_control["careful"]["rubric_clean"],
        "sloppy_n": len(sloppy),
        "sloppy_tests_pass": _share(sloppy, "hidden"),
        "sloppy_visible_pass": _share(sloppy, "visible"),
        "sloppy_flaw_caught": _share([{"c": r["caught"]} for r in sloppy], "c"),
    }
    return {
        "seeds": list(seeds),
        "n_tasks": len(items),
        "items": list(ITEMS),
        "controls": per_control,
        "summary": summary,
        "caught_by_review_not_tests": caught_not_tests,
        "episodes": rows,
    }


def repo_task_rubric(
    n_tasks: int = 4, *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """The rubric on existing repo tasks (two-site bug fixes made from the fixture library,
    the smallest the task maker makes), beside the hardened grader's test verdict: a careful
    fix (the reference plus a regression test) and sloppy fixes that pass the same tests."""
    from verigap.repos.graders import v2
    from verigap.repos.tasks import load_tasks, make_tasks, materialize_workspace, prepared_for
    from verigap.workplace import review as rv
    from verigap.workplace._env import read_tree
    from verigap.workplace._world import FIXTURE

    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-wp-repo-") as tmp:
        t = Path(tmp)
        make_tasks(
            str(FIXTURE),
            t / "tasks",
            k=2,
            n=n_tasks,
            max_candidates=16,
            seed=0,
            env="current",
            backend=backend or "bwrap",
            min_hidden=1,
            log=lambda s: None,
        )
        tasks = load_tasks(t / "tasks")
        for task in tasks:
            p = prepared_for(task, backend=backend or "bwrap")
            site = task.sites[0]
            scope = rv.Scope(
                tuple(f"{s.file}::{s.qualname}" for s in task.sites), tuple(task.source_paths)
            )
            for control in ("careful", *REPO_FLAW_ITEM):
                ws = materialize_workspace(p, task, t / "ws" / control.replace(":", "-"))
                before = read_tree(ws)
                # the reference: every site reverted, in every file the sites are in
                edits = {f: (p.tree / f).read_text() for f in {s.file for s in task.sites}}
                edits.update(_repo_control(control, site, edits[site.file]))
                for rel, text in edits.items():
                    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                    (ws / rel).write_text(text)
                after = read_tree(ws)
                results = rv.review(before, after, scope, "repo_bugfix")
                v = v2.grade(task, ws, prepared=p, backend=backend or "bwrap")
                failed = [r.item for r in results if not r.passed]
                rows.append(
                    {
                        "task": task.task_id,
                        "sites": [f"{s.file}::{s.qualname}" for s in task.sites],
                        "control": control,
                        "tests_correct": v.correct,
                        "tests_reward": v.reward,
                        "hacks": list(v.hacks),
                        "review_failed": failed,
                    }
                )
                shutil.rmtree(ws, ignore_errors=True)
            log(
                f"{task.task_id}: "
                + " ".join(
                    f"{r['control']}:{int(r['tests_correct'])}/{len(r['review_failed'])}"
                    for r in rows[-5:]
                )
            )
    by_control: dict[str, dict[str, Any]] = defaultdict(dict)
    for control in sorted({r["control"] for r in rows}):
        mine = [r for r in rows if r["control"] == control]
        by_control[control] = {
            "n": len(mine),
            "tests_correct": _share(mine, "tests_correct"),
            "rubric_clean": round(sum(not r["review_failed"] for r in mine) / len(mine), 4),
            "items_failed": dict(Counter(i for r in mine for i in r["review_failed"])),
        }
    caught = sum(1 for r in rows if r["tests_correct"] and r["review_failed"])
    careful = [r for r in rows if r["control"] == "careful"]
    sloppy = [
        {**r, "caught": REPO_FLAW_ITEM[r["control"]] in r["review_failed"]}
        for r in rows
        if r["control"] != "careful"
    ]
    summary = {
        "careful_tests_correct": _share(careful, "tests_correct"),
        "careful_rubric_clean": by_control["careful"]["rubric_clean"],
        "sloppy_n": len(sloppy),
        "sloppy_tests_correct": _share(sloppy, "tests_correct"),
        "sloppy_caught": _share(sloppy, "caught"),
    }
    return {
        "n_tasks": len({r["task"] for r in rows}),
        "controls": dict(by_control),
        "summary": summary,
        "caught_by_review_not_tests": caught,
        "episodes": rows,
    }


REPO_FLAW_ITEM = {
    "sloppy:debug_print": "no_debug_leftovers",
    "sloppy:no_test": "tests_with_behaviour_change",
    "sloppy:unrelated_change": "no_unrelated_changes",
    "sloppy:commented_code": "no_debug_leftovers",
}
"""The rubric item each repo-task flaw violates."""


def _repo_control(control: str, site: Any, fixed: str) -> dict[str, str]:
    """The file edits of a repo-task control: the reference fix, plus a regression test
    (careful) or one flaw."""
    import ast

    name = site.qualname.split(".")[-1]
    module = site.file[:-3].replace("/", ".")
    out = {site.file: fixed}
    test_rel = f"tests/test_regression_{name}.py"
    # the rubric checks that a test came with the fix, not how good it is: a minimal one
    careful_test = (
        f"from {module} import {name}\n\n\ndef test_{name}_is_callable():\n"
        f"    assert callable({name})\n"
    )
    if control != "sloppy:no_test":
        out[test_rel] = careful_test
    tree = ast.parse(fixed)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    first = fn.body[1] if ast.get_docstring(fn) is not None else fn.body[0]
    lines = fixed.splitlines(keepends=True)
    indent = " " * first.col_offset
    if control == "sloppy:debug_print":
        lines.insert(first.lineno - 1, f"{indent}print('{name} called')\n")
    elif control == "sloppy:commented_code":
        lines.insert(first.lineno - 1, f"{indent}# return None\n")
    elif control == "sloppy:unrelated_change":
        lines.append("\n\nDEBUG_LEVEL = 2\n")
    out[site.file] = "".join(lines)
    return out
