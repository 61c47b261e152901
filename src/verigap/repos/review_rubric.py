"""The reviewer rubric (:mod:`verigap.review`) on existing repo tasks, beside the hardened
grader's verdict: what a reviewer would send back that the tests pay.

Controls on each task: ``careful`` (the reference fix and a regression test) and sloppy fixes
that pass the same tests with one flaw each (a debug print, no test, an unrelated module
constant, commented-out code). ``verigap repos rubric`` writes the results file.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verigap import review as rv
from verigap.errors import ConfigError
from verigap.review import read_tree

FIXTURE = Path(__file__).resolve().parents[3] / "tests" / "repos" / "fixture_lib"
"""The fixture library the tasks are made from (in a checkout)."""

Log = Callable[[str], None]


def _share(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else 0.0


def repo_task_rubric(
    n_tasks: int = 4, *, backend: str | None = None, log: Log = print
) -> dict[str, Any]:
    """The rubric on existing repo tasks (two-site bug fixes made from the fixture library,
    the smallest the task maker makes), beside the hardened grader's test verdict: a careful
    fix (the reference plus a regression test) and sloppy fixes that pass the same tests."""
    if not FIXTURE.is_dir():
        raise ConfigError(f"the fixture library is missing at {FIXTURE}; run from a checkout")
    from verigap.repos.graders import v2
    from verigap.repos.tasks import load_tasks, make_tasks, materialize_workspace, prepared_for

    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-repo-rubric-") as tmp:
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
