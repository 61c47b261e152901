"""``python -m verigap.repos.webfeatures``: build the feature tasks and their results file.

build [--only SHA ...]   validate candidates (in the sandbox), save kept tasks and rows
merge FILE ...           one results file from the rows of partial builds (newest wins)
tickets                  rewrite the saved tasks' tickets from tickets.yaml (no test runs)
play --agents A,B --tasks T ...   play tasks through the episode loop; verdicts and a summary
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verigap.errors import ConfigError
from verigap.repos.webfeatures.build import (
    DATA,
    build_one,
    candidates,
    export,
    full_ticket,
    load_tickets,
    new_names,
    open_bundle,
    ticket_for,
)
from verigap.repos.webfeatures.play import PLAY_COMMAND, play
from verigap.repos.webfeatures.task import FeatureTask
from verigap.results import write_result

PROJECT = "flask-todolist"
TASKS_DIR = DATA / "tasks"
RESULTS = Path("results/repos/web_features.json")
COMMAND = "python -m verigap.repos.webfeatures build"


def build_rows(
    only: list[str], tasks_dir: Path, backend: str, on_row: Callable[[list[dict]], None]
) -> list[dict]:
    """Validate every candidate (or those ``only`` names) that has a ticket; save kept tasks.

    ``on_row`` gets the rows so far after each candidate (the caller saves them: a stopped
    build keeps what it finished).
    """
    tickets = load_tickets()
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-webfeatures-") as tmp:
        repo = open_bundle(PROJECT, Path(tmp))
        for cand in candidates(repo):
            if only and not any(cand.sha.startswith(o) for o in only):
                continue
            ticket = ticket_for(tickets, cand.sha)
            row: dict = {"commit": cand.sha[:8], "subject": cand.subject}
            if ticket is None:
                rows.append({**row, "kept": False, "reason": "no ticket written for it"})
                on_row(rows)
                continue
            start = time.monotonic()
            work = Path(tmp) / cand.sha[:8]
            work.mkdir()
            built = build_one(repo, cand, ticket, backend=backend, work=work)
            row.update(kept=built.task is not None, reason=built.reason, **built.detail)
            row["seconds"] = round(time.monotonic() - start, 1)
            if built.task is not None:
                built.task.save(tasks_dir / f"{built.task.task_id}.json")
                row.update(
                    task_id=built.task.task_id,
                    layers=built.task.layers,
                    browser=built.task.browser_check is not None,
                    fail_to_pass=len(built.task.fail_to_pass),
                    pass_to_pass=len(built.task.pass_to_pass),
                    visible_tests=len(built.task.visible_tests),
                )
            print(f"{row['commit']} kept={row['kept']} {row['reason']}", file=sys.stderr)
            rows.append(row)
            on_row(rows)
    return rows


def summarize(rows: list[dict]) -> dict:
    """The results file's data: counts over the kept tasks, and every row."""
    kept = [r for r in rows if r["kept"]]
    seen = [r for r in kept if r["visible_tests"] > 0]  # the agent can run some of its tests
    three = [r for r in kept if len(r["layers"]) == 3]
    return {
        "project": PROJECT,
        "candidates": len(rows),
        "kept": len(kept),
        "rejected": {
            reason: sum(r["reason"] == reason for r in rows)
            for reason in sorted({r["reason"] for r in rows if not r["kept"]})
        },
        "all_three_layers": len(three),
        "with_browser_check": sum(r["browser"] for r in kept),
        "fail_to_pass_tests": sum(r["fail_to_pass"] for r in kept),
        "reference_paid": sum(r["reference"]["reward"] == 1.0 for r in kept),
        "empty_paid": sum(r["empty"]["reward"] == 1.0 for r in kept),
        "by_layers": {
            ("+".join(k) or "none"): sum(tuple(r["layers"]) == k for r in kept)
            for k in sorted({tuple(r["layers"]) for r in kept})
        },
        "empty_with_visible_tests": len(seen),
        # the unchanged base passes every test the agent can run (they passed there when the
        # task was built), yet adds nothing: a reward from those tests alone would pay it
        "empty_false_success": sum(
            r["empty"]["checks"].get("visible", False) and not r["empty"]["correct"] for r in seen
        ),
        "rows": rows,
    }


def merge(rows_lists: list[list[dict]], tasks_dir: Path = TASKS_DIR) -> list[dict]:
    """Rows by commit, a later list replacing an earlier one, in history order; a kept row
    without its count of visible tests takes it from the saved task."""
    by_commit: dict[str, dict] = {}
    for rows in rows_lists:
        by_commit.update({r["commit"]: dict(r) for r in rows})
    for r in by_commit.values():
        if r["kept"] and "visible_tests" not in r:
            task = FeatureTask.load(tasks_dir / f"{r['task_id']}.json")
            r["visible_tests"] = len(task.visible_tests)
        if r["kept"] and r["visible_tests"] == 0 and "visible" in r["empty"]["checks"]:
            # rows built before the rule that a task without visible tests reports no visible
            # check (``verdict_from``): the same verdict under that rule
            checks = {k: v for k, v in r["empty"]["checks"].items() if k != "visible"}
            r["empty"] = {**r["empty"], "checks": checks, "passed": False, "false_success": False}
    with tempfile.TemporaryDirectory(prefix="verigap-webfeatures-") as tmp:
        order = [c.sha[:8] for c in candidates(open_bundle(PROJECT, Path(tmp)))]
    return sorted(by_commit.values(), key=lambda r: order.index(r["commit"]))


def _rows_of(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())["data"]["rows"]
    except (OSError, ValueError, KeyError) as e:
        raise ConfigError(
            f"{path}: not a web-features results file ({e}); build it first"
        ) from None


def rewrite_tickets(tasks_dir: Path) -> int:
    """Recompute each saved task's ticket (the story, the requests, the new names)."""
    tickets = load_tickets()
    n = 0
    with tempfile.TemporaryDirectory(prefix="verigap-webfeatures-") as tmp:
        repo = open_bundle(PROJECT, Path(tmp))
        for path in sorted(tasks_dir.glob("*.json")):
            task = FeatureTask.load(path)
            story = ticket_for(tickets, task.reference)
            if story is None:
                raise ConfigError(f"no ticket in tickets.yaml for {task.reference[:8]}")
            base = export(repo, task.base, Path(tmp) / task.task_id)
            names = new_names(task.hidden_files, base)
            text = full_ticket(story, task.hidden_files, task.fail_to_pass, names)
            task.model_copy(update={"ticket": text}).save(path)
            n += 1
    return n


def play_command(argv: list[str]) -> str:
    """The line that reproduces a play run (the subcommand's name is in ``PLAY_COMMAND``)."""
    rest = argv[1:] if argv[:1] == ["play"] else argv
    return " ".join([PLAY_COMMAND, *rest])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verigap.repos.webfeatures")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="validate the candidates and write tasks and results")
    b.add_argument("--only", nargs="*", default=[], help="commit sha prefixes to build")
    b.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    b.add_argument("--save", default=str(RESULTS), help="results file ('' for none)")
    b.add_argument("--backend", default="bwrap", choices=["bwrap", "unsafe"])
    m = sub.add_parser("merge", help="one results file from partial builds' results files")
    m.add_argument("files", nargs="+", type=Path)
    m.add_argument("--save", type=Path, default=RESULTS)
    m.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    t = sub.add_parser("tickets", help="rewrite the saved tasks' tickets from tickets.yaml")
    t.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    p = sub.add_parser("play", help="play tasks through the episode loop and grade them")
    p.add_argument(
        "--agents",
        required=True,
        help="comma-separated: scripted:oracle, "
        "scripted:noop, scripted:sloppy or a model spec such as local:smollm2",
    )
    p.add_argument("--tasks", nargs="+", required=True, help="task ids or commit prefixes")
    p.add_argument("--save", type=Path, required=True, help="results file to write")
    p.add_argument("--max-turns", type=int, default=30, help="a model's turn budget")
    p.add_argument("--max-new-tokens", type=int, default=256, help="a local model's tokens/turn")
    p.add_argument("--wall-s", type=float, default=900.0, help="an episode's wall-clock budget")
    p.add_argument("--reward", default=None, help="reward scheme (default: visible)")
    p.add_argument("--backend", default="bwrap", choices=["bwrap", "unsafe"])
    args = ap.parse_args(argv)
    try:
        if args.cmd == "play":
            summary = play(
                [a.strip() for a in args.agents.split(",") if a.strip()],
                args.tasks,
                args.save,
                max_turns=args.max_turns,
                max_new_tokens=args.max_new_tokens,
                wall_s=args.wall_s,
                reward=args.reward,
                backend=args.backend,
                command=play_command(argv if argv is not None else sys.argv[1:]),
            )
            for agent, row in summary["by_agent"].items():
                print(
                    f"{agent}: paid {row['paid']}/{row['episodes']}, "
                    f"correct {row['correct']}, false success {row['false_success']}",
                    file=sys.stderr,
                )
            return 0
        if args.cmd == "tickets":
            print(f"rewrote {rewrite_tickets(args.tasks_dir)} tickets", file=sys.stderr)
            return 0
        if args.cmd == "merge":
            rows = merge([_rows_of(f) for f in args.files], args.tasks_dir)
            save: Path | None = args.save
        else:
            args.tasks_dir.mkdir(parents=True, exist_ok=True)
            save = Path(args.save) if args.save else None
            # a partial build (--only) keeps the rows of the commits it does not rebuild
            earlier = _rows_of(save) if save is not None and save.is_file() and args.only else []

            def keep(rows: list[dict]) -> None:
                if save is not None:
                    done = merge([earlier, rows], args.tasks_dir)
                    write_result(save, summarize(done), command=COMMAND)

            built = build_rows(args.only, args.tasks_dir, args.backend, keep)
            rows = merge([earlier, built], args.tasks_dir)
        s = summarize(rows)
        if save is not None:
            write_result(save, s, command=COMMAND)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"kept {s['kept']} of {s['candidates']} candidates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
