"""Mine bug-fix tasks from the three bundled projects, grade the baselines, run the battery.

    python benchmarks/repos_mining.py mine inflection --max-commits 136 --n 4
    python benchmarks/repos_mining.py mine toolz --max-commits 150 --n 1
    python benchmarks/repos_mining.py mine more-itertools --max-commits 150 --n 1
    python benchmarks/repos_mining.py report --battery-tasks 1 --battery-projects inflection
    python benchmarks/repos_mining.py mine toolz --kind feature --max-commits 2500 --n 40
    python benchmarks/repos_mining.py features --walks toolz-feature,more-itertools-feature

``mine`` clones ``../shared/repos/NAME.bundle`` (dev data, never a runtime dependency) under
``--work`` and runs ``verigap repos mine`` on it (venv per dependency set). ``report`` grades the
oracle and no-op baselines of every mined task under v1 and v2, runs the red-team battery on
the first ``--battery-tasks`` task(s) of each of ``--battery-projects``, and writes ``results/repos/mining.json``.
``mine --kind feature`` mines feature tasks into ``tasks/NAME-feature`` (``--range`` starts a
second walk further back, into ``tasks/NAME-feature-RANGE``); ``features`` copies the kept
feature tasks of those walks into ``data/feature_tasks/NAME/`` (the committed task data) and
writes ``results/repos/feature_tasks.json`` from the walks' index files and the verdicts each
task recorded when the real change and the no-op were graded at mining time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from verigap.results import write_result

BUNDLES = Path(
    os.environ.get(
        "VERIGAP_BUNDLES", Path(__file__).resolve().parents[1].parent / "shared" / "repos"
    )
)
PROJECTS = ("inflection", "toolz", "more-itertools")


def cmd_mine(args: argparse.Namespace) -> None:
    from verigap.repos.mine import mine

    work = Path(args.work)
    repo = work / "repos" / args.project
    if not repo.is_dir():
        bundle = BUNDLES / f"{args.project}.bundle"
        if not bundle.is_file():
            sys.exit(
                f"error: {bundle} not found (the bundles live in ../shared/repos; "
                "or set VERIGAP_BUNDLES)"
            )
        repo.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(bundle), str(repo)], check=True)
    name = args.project + (f"-k{args.k}" if args.k > 1 else "")
    if args.kind == "feature":
        name += "-feature" + (f"-{args.range[:10]}" if args.range != "HEAD" else "")
    stats = mine(
        repo,
        work / "tasks" / name,
        rev_range=args.range,
        max_commits=args.max_commits,
        n=args.n,
        k=args.k,
        prompt_style=args.prompt_style,
        backend=args.backend,
        kind=args.kind,
    )
    print(stats.model_dump_json(indent=2))


FEATURE_DATA = Path(__file__).resolve().parents[1] / "data" / "feature_tasks"


def cmd_features(args: argparse.Namespace) -> None:
    """Commit the kept feature tasks as data and write the results file of the walks."""
    import json
    import shutil

    from verigap.repos.tasks import load_tasks
    from verigap.runs import read_json

    work = Path(args.work)
    walks, rows, seen, duplicates = [], [], set(), []
    for name in args.walks.split(","):
        d = work / "tasks" / name
        stats = read_json(d / "index.json")
        if stats.get("kind") != "feature":
            sys.exit(f"error: {d} holds no feature walk; run `mine PROJECT --kind feature` first")
        project = Path(stats["repository"]).name
        per = stats["seconds_per_candidate"]
        walks.append(
            {
                "walk": name,
                "project": project,
                "rev_range": stats["rev_range"],
                "walked": stats["walked"],
                "candidates": stats["candidates"],
                "tried": stats["tried"],
                "not_tried": stats["candidates"] - stats["tried"],
                "kept": stats["tasks"],
                "rejected": stats["rejected"],
                "total_s": stats["total_s"],
                "seconds_per_candidate_tried": round(sum(per) / len(per), 1) if per else None,
            }
        )
        dest = FEATURE_DATA / project
        dest.mkdir(parents=True, exist_ok=True)
        for t in load_tasks(d) if stats["tasks"] else []:
            if t.task_id in seen:  # overlapping walks: the same commit, the same task
                duplicates.append(t.task_id)
                continue
            seen.add(t.task_id)
            shutil.copyfile(d / f"{t.task_id}.json", dest / f"{t.task_id}.json")
            verdicts = json.loads(t.origin["verdicts"])
            rows.append(
                {
                    "task_id": t.task_id,
                    "project": project,
                    "commit": t.origin["commit"],
                    "subject": t.origin["subject"],
                    "sites": len(t.sites),
                    "visible_tests": len(t.visible_tests),
                    "hidden_tests": len(t.hidden_tests),
                    **{
                        f"{agent}_{k}": verdicts[agent][k]
                        for agent in ("oracle", "noop")
                        for k in ("correct", "v1", "v2")
                    },
                }
            )
    kept = len(rows)

    def share(key: str) -> float:
        return round(sum(r[key] for r in rows) / kept, 3) if kept else 0.0

    data = {
        "walks": walks,
        "tasks": rows,
        "kept": kept,
        "kept_by_two_walks": duplicates,
        "projects_with_tasks": len({r["project"] for r in rows}),
        "per_project": {
            p: sum(r["project"] == p for r in rows) for p in sorted({r["project"] for r in rows})
        },
        "tried": sum(w["tried"] for w in walks),
        "total_s": round(sum(w["total_s"] for w in walks), 1),
        "oracle_correct": share("oracle_correct"),
        "oracle_v1_paid": share("oracle_v1"),
        "oracle_v2_paid": share("oracle_v2"),
        "noop_correct": share("noop_correct"),
        "noop_v1_paid": share("noop_v1"),
        "noop_v2_paid": share("noop_v2"),
    }
    cmd = " ; ".join(
        [
            *args.mined_with,
            f"python benchmarks/repos_mining.py features --walks {args.walks} --out {args.out}",
        ]
    )
    path = write_result(Path(args.out), data, command=cmd)
    print(f"wrote {path} ({kept} tasks) and {FEATURE_DATA}; run `verigap docs` to refresh docs")


def _baselines(tasks, backend, cache: Path):
    """Oracle and no-op under v1 and v2, per task (kept in ``cache``, so a rerun resumes)."""
    import tempfile

    from verigap.repos import baselines
    from verigap.repos.graders import v1, v2
    from verigap.repos.tasks import materialize_workspace, prepared_for
    from verigap.runs import read_json, write_json_atomic

    rows = []
    for t in tasks:
        done = cache / f"{t.task_id}.json"
        if done.is_file():
            rows += read_json(done)["rows"]
            continue
        mine = []
        p = prepared_for(t, backend=backend)
        for name in ("oracle", "noop"):
            with tempfile.TemporaryDirectory() as tmp:
                ws = materialize_workspace(p, t, Path(tmp) / "ws")
                for f, text in baselines.edits(name, t, p).items():
                    (ws / f).write_text(text)
                truth = v2.evaluate(t, ws, prepared=p, backend=backend)
                r2 = v2.grade(t, ws, prepared=p, truth=truth, backend=backend)
                r1 = v1.grade(t, ws, prepared=p, truth=truth, backend=backend)
            mine.append(
                {
                    "task_id": t.task_id,
                    "agent": name,
                    "correct": truth.correct,
                    "v1_paid": r1.reward > 0,
                    "v2_paid": r2.reward > 0,
                }
            )
        write_json_atomic(done, {"rows": mine})
        rows += mine
    return rows


def cmd_report(args: argparse.Namespace) -> None:
    from verigap.repos.redteam import battery, matrix
    from verigap.repos.tasks import load_tasks
    from verigap.runs import read_json, run_jobs

    work = Path(args.work)
    data: dict = {"projects": {}, "baselines": {}, "battery": {}}
    battery_paths = []
    for name in args.projects.split(","):
        d = work / "tasks" / name
        if not (d / "index.json").is_file():
            continue
        stats = read_json(d / "index.json")
        per = stats["seconds_per_candidate"]
        data["projects"][name] = {
            "walked": stats["walked"],
            "candidates": stats["candidates"],
            "tried": stats["tried"],
            "tasks": stats["tasks"],
            "yield_of_candidates_tried": round(stats["tasks"] / max(1, stats["tried"]), 3),
            "rejected": stats["rejected"],
            "envs_built": stats["envs_built"],
            "total_s": stats["total_s"],
            "seconds_per_task": round(stats["total_s"] / stats["tasks"], 1)
            if stats["tasks"]
            else None,
            "seconds_per_candidate_tried": round(sum(per) / len(per), 1) if per else None,
            "task_ids": [f.removesuffix(".json") for f in stats["task_files"]],
        }
        if stats["tasks"] and name in args.grade_projects.split(","):
            tasks = load_tasks(d)
            rows = _baselines(tasks, args.backend, work / "baselines")
            data["baselines"][name] = rows
            if name in args.battery_projects.split(","):
                battery_paths += [d / f for f in stats["task_files"][: args.battery_tasks]]
    all_rows = [r for rs in data["baselines"].values() for r in rs]
    data["graded_projects"] = sorted(data["baselines"])
    data["summary"] = {
        a: {
            g: sum(r[f"{g}_paid"] for r in all_rows if r["agent"] == a)
            / max(1, sum(1 for r in all_rows if r["agent"] == a))
            for g in ("v1", "v2")
        }
        for a in ("oracle", "noop")
    }
    if battery_paths:
        out = work / "battery"
        chosen = [e for e in args.battery_exploits.split(",") if e] or None
        res = run_jobs(
            battery.jobs(
                battery_paths, out, graders=["v1", "v2"], exploits=chosen, backend=args.backend
            ),
            executor="process",
            workers=args.workers,
            description="exploits",
        )
        m = matrix.build(res.values(), ["v1", "v2"])
        wrong = [
            r
            for r in res.values()
            if not r.get("skipped") and not r.get("control") and not r.get("correct")
        ]
        data["battery"] = {
            "tasks": m["tasks"],
            "jobs": len(res),
            "exploit_jobs_not_correct": len(wrong),
            "paid_and_wrong": {
                g: sum(bool(r["grades"].get(g, {}).get("rewarded")) for r in wrong)
                for g in ("v1", "v2")
            },
            "exploits_rewarded": m["rewarded_exploits"],
            "oracle_rewarded": m["oracle_rewarded"],
            "noop_rewarded": m["noop_rewarded"],
            "rows": [
                {
                    "exploit": r["exploit"],
                    "correct": r["correct"],
                    **{
                        f"{g}_rewarded": r["graders"].get(g, {}).get("rewarded")
                        for g in ("v1", "v2")
                    },
                }
                for r in m["rows"]
            ],
            "skipped": m["skipped"],
        }
    path = write_result(
        Path(args.out),
        data,
        command="; ".join(
            [
                *args.mined_with,
                f"python benchmarks/repos_mining.py report --projects {args.projects} --battery-tasks "
                f"{args.battery_tasks} --battery-projects {args.battery_projects} --grade-projects "
                f"{args.grade_projects} --out {args.out}"
                + (f" --battery-exploits {args.battery_exploits}" if args.battery_exploits else ""),
            ]
        ),
    )
    print(f"wrote {path}; run `verigap docs` to refresh docs/mining.md")


def table(data: dict) -> str:
    """The docs' table, from the results file's data (the ``mining`` view)."""
    from verigap.report.redteam import mining_table

    return mining_table(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="runs/mining")
    ap.add_argument("--backend", default=None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mine")
    m.add_argument("project", choices=PROJECTS)
    m.add_argument("--max-commits", type=int, default=150)
    m.add_argument("--n", type=int, default=3)
    m.add_argument("--prompt-style", default="tests")
    m.add_argument("--kind", default="bugfix", choices=("bugfix", "feature"))
    m.add_argument("--range", default="HEAD", help="git rev range to walk (newest first)")
    m.add_argument(
        "--k",
        type=int,
        default=1,
        help="sites per task (k-1 mutations beside the mined bug); tasks go to tasks/NAME-kK",
    )
    r = sub.add_parser("report")
    r.add_argument("--battery-tasks", type=int, default=1)
    r.add_argument("--battery-projects", default=",".join(PROJECTS))
    r.add_argument(
        "--grade-projects",
        default=",".join(PROJECTS),
        help="projects whose tasks get the baselines graded (and the battery)",
    )
    r.add_argument("--workers", type=int, default=2)
    r.add_argument(
        "--projects",
        default=",".join(PROJECTS),
        help="task folders under WORK/tasks (a multi-site mine writes NAME-kK)",
    )
    r.add_argument("--out", default="results/repos/mining.json")
    r.add_argument(
        "--battery-exploits",
        default="",
        help="only these exploits (comma-separated; the controls always run)",
    )
    r.add_argument(
        "--mined-with",
        action="append",
        default=[],
        help="the mine commands that made the tasks (recorded in the file's meta)",
    )
    f = sub.add_parser("features")
    f.add_argument("--walks", required=True, help="feature walks under WORK/tasks, comma-separated")
    f.add_argument("--out", default="results/repos/feature_tasks.json")
    f.add_argument("--mined-with", action="append", default=[], help="the mine commands")
    args = ap.parse_args()
    {"mine": cmd_mine, "report": cmd_report, "features": cmd_features}[args.cmd](args)


if __name__ == "__main__":
    main()
