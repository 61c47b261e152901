"""``python -m verigap.repos.webfeatures build``: validate the candidates, write tasks and results."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from verigap.errors import ConfigError
from verigap.repos.webfeatures.build import (
    DATA,
    build_one,
    candidates,
    load_tickets,
    open_bundle,
    ticket_for,
)
from verigap.results import write_result

TASKS_DIR = DATA / "tasks"
RESULTS = Path("results/repos/web_features.json")
COMMAND = "python -m verigap.repos.webfeatures build"


def build(only: list[str], tasks_dir: Path, results: Path | None, backend: str) -> dict:
    """Validate every candidate that has a ticket; save kept tasks; return the summary."""
    tickets = load_tickets()
    rows = []
    with tempfile.TemporaryDirectory(prefix="verigap-webfeatures-") as tmp:
        repo = open_bundle("flask-todolist", Path(tmp))
        for cand in candidates(repo):
            if only and not any(cand.sha.startswith(o) for o in only):
                continue
            ticket = ticket_for(tickets, cand.sha)
            row = {"commit": cand.sha[:8], "subject": cand.subject}
            if ticket is None:
                rows.append({**row, "kept": False, "reason": "no ticket written for it"})
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
                )
            print(f"{row['commit']} kept={row['kept']} {row['reason']}", file=sys.stderr)
            rows.append(row)
    if results is not None and results.is_file() and only:
        # a partial build (--only) keeps the rows of the commits it did not rebuild
        done = {r["commit"] for r in rows}
        old = json.loads(results.read_text())["data"]["rows"]
        rows = [r for r in old if r["commit"] not in done] + rows
        order = {c: i for i, c in enumerate(_order())}
        rows.sort(key=lambda r: order.get(r["commit"], len(order)))
    kept = [r for r in rows if r["kept"]]
    summary = {
        "project": "flask-todolist",
        "candidates": len(rows),
        "kept": len(kept),
        "all_three_layers": sum(len(r["layers"]) == 3 for r in kept),
        "with_browser_check": sum(r["browser"] for r in kept),
        "reference_paid": sum(r["reference"]["reward"] == 1.0 for r in kept),
        "empty_paid": sum(r["empty"]["reward"] == 1.0 for r in kept),
        "empty_false_success": sum(r["empty"]["false_success"] for r in kept),
        "empty_with_visible_tests": sum("visible" in r["empty"]["checks"] for r in kept),
        "rows": rows,
    }
    if results is not None:
        write_result(results, summary, command=COMMAND)
    return summary


def _order() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="verigap-webfeatures-") as tmp:
        return [c.sha[:8] for c in candidates(open_bundle("flask-todolist", Path(tmp)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verigap.repos.webfeatures")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="validate the candidates and write tasks and results")
    b.add_argument("--only", nargs="*", default=[], help="commit sha prefixes to build")
    b.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    b.add_argument("--save", default=str(RESULTS), help="results file ('' for none)")
    b.add_argument("--backend", default="bwrap", choices=["bwrap", "unsafe"])
    args = ap.parse_args(argv)
    try:
        args.tasks_dir.mkdir(parents=True, exist_ok=True)
        save = Path(args.save) if args.save else None
        s = build(args.only, args.tasks_dir, save, args.backend)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"kept {s['kept']} of {s['candidates']} candidates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
