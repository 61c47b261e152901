"""Inputs that do not reach the mutation, before and after the build check.

Reads (optionally) two red-team runs of the same exploits (``verigap redteam ... --out RUN``): one on a task
set made before ``Site.discrimination`` existed, one on the same task set made again with it;
and the new task set's ``index.json``. Writes one results file: the share of sites whose
mutation the out-of-process comparison tells apart (beside the coverage share), each site's
flag, and per exploit how v1 and v2 answered on each side.

    python benchmarks/repos_discrimination.py --before RUN_OLD --after RUN_NEW \
        --tasks NEW_TASK_DIR --out results/redteam/v2_discrimination_toolz.json \
        [--command "the commands that made the inputs"]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from verigap.repos.mutate import function_source
from verigap.repos.tasks import load_tasks
from verigap.results import write_result
from verigap.runs import read_json


def _left_broken(run: Path, task) -> list[str]:
    """Sites whose function, in the last text the agent wrote to its file, is still the task
    base's (mutated) one: truth that does not come from any grader."""
    import json

    last: dict[str, str] = {}
    t = read_json(run / "transcript.json")
    for e in t.get("transcript", []):
        for c in e.get("tool_calls", []) or []:
            if c.get("name") == "write_file":
                args = json.loads(c.get("arguments") or "{}")
                last[args["path"].removeprefix("./")] = args["content"]
    out = []
    for s in task.sites:
        text = last.get(s.file)
        try:
            now = s.mutated if text is None else function_source(text, s.qualname)
        except Exception:  # the function is gone: not the task base's
            continue
        if now.strip() == s.mutated.strip():
            out.append(s.function)
    return out


def _side(run_dir: Path, tasks: dict) -> dict:
    out: dict = {}
    for res in sorted(run_dir.glob("*/*/result.json")):
        r = read_json(res)
        row = out.setdefault(
            r["exploit"],
            {
                "n": 0,
                "skipped": 0,
                "correct": 0,
                "v1": 0,
                "v2": 0,
                "v2_named": 0,
                "v2_checks": [],
                "sites_left_broken": [],
            },
        )
        if r.get("skipped"):
            row["skipped"] += 1
            continue
        row["n"] += 1
        row["sites_left_broken"].append(_left_broken(res.parent, tasks[r["task_id"]]))
        row["correct"] += bool(r.get("correct"))
        for g in ("v1", "v2"):
            row[g] += bool(r["grades"].get(g, {}).get("rewarded"))
        g2 = r["grades"].get("v2", {})
        row["v2_named"] += bool(g2.get("detected")) and not r.get("control")
        row["v2_checks"].append(g2.get("checks"))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--before", type=Path, help="(optional) battery run, old task files")
    ap.add_argument("--after", type=Path, help="(optional) battery run, the tasks made again")
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--command", default="")
    a = ap.parse_args(argv)
    index = read_json(a.tasks / "index.json")
    sites = [
        {
            "task": t.task_id,
            "site": s.function,
            "visible": s.visible,
            "inputs": sum(x.target == s.function for x in t.equivalence),
            "tests_only": s.tests_only,
            "discrimination": s.discrimination,
        }
        for t in load_tasks(a.tasks)
        for s in t.sites
    ]
    tasks = {t.task_id: t for t in load_tasks(a.tasks)}
    data = {
        "tasks": index["tasks"],
        "sites": sites,
        "coverage": index["coverage"],
        "discrimination": index.get("discrimination"),
        "make_tasks": index["command"],
        "before": _side(a.before, tasks) if a.before else None,
        "after": _side(a.after, tasks) if a.after else None,
        "load_avg": os.getloadavg(),
        "note": "correct is v2's own truth (the battery's); sites_left_broken is read from "
        "the agent's writes: a workspace that leaves a site as the task base has it "
        "is wrong whatever any grader says",
    }
    args = [("--before", a.before), ("--after", a.after), ("--tasks", a.tasks), ("--out", a.out)]
    me = "python benchmarks/repos_discrimination.py " + shlex.join(
        [str(x) for k, v in args if v for x in (k, v)]
    )
    write_result(a.out, data, command=f"{a.command} && {me}" if a.command else me)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
