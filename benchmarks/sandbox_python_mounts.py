"""What showing the base Python install only at a neutral path costs.

Runs ``benchmarks/sandbox.py --reps N`` on the source of ``--before`` (a git revision:
the base install mounted at its own path) and on this checkout's ``src`` (at
``/run/verigap/python``, a relocated interpreter mounted over it), alternating
(before, after, before, ...) for ``--rounds`` rounds so that machine drift hits both alike,
and records per side the median over rounds of the per-command "added" wall time (a sandbox
per command, and persistent) and of the workspace creation (``materialize`` +
``make_sandbox``). Writes ``results/sandbox/python_mounts_cost.json`` with the load average.

    PYTHONPATH=src python benchmarks/sandbox_python_mounts.py [--before REV] [--rounds 3] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from verigap.results import write_result

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    ("true", "bwrap"),
    ("true", "bwrap_persistent"),
    ("python_c_pass", "bwrap"),
    ("python_c_pass", "bwrap_persistent"),
]


def _run(src: Path, reps: int, out: Path) -> dict:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "sandbox.py"),
            "--reps",
            str(reps),
            "--out",
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(src)},
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    cmd = json.loads((out / "command_overhead.json").read_text())["data"]
    ws = json.loads((out / "workspace.json").read_text())["data"]
    got = {f"{c}/{r}": cmd["commands"][c][r]["added_wall_median_ms"] for c, r in ROWS}
    got["workspace_now_ms"] = ws["rows"]["now"]["wall_median_ms"]
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="git revision (default: merge-base with main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="results/sandbox/python_mounts_cost.json")
    args = ap.parse_args()
    rev = (
        args.before
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    load0 = os.getloadavg()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="vg-pymounts-") as tmp_s:
        tmp = Path(tmp_s)
        old = tmp / "before"
        old.mkdir()
        archive = subprocess.run(
            ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        sides = {"before": old / "src", "after": ROOT / "src"}
        for i in range(args.rounds):
            for side, src in sides.items():
                runs[side].append(_run(src, args.reps, tmp / f"{side}-{i}"))
                print(side, i, runs[side][-1], flush=True)
    keys = list(runs["after"][0])
    summary = {
        k: {side: round(statistics.median(r[k] for r in runs[side]), 2) for side in runs}
        for k in keys
    }
    for v in summary.values():
        v["after_minus_before_ms"] = round(v["after"] - v["before"], 2)
    data = {
        "before_rev": rev,
        "rounds": args.rounds,
        "reps": args.reps,
        "summary_median_ms": summary,
        "runs": runs,
        "load_average_before": list(load0),
        "load_average_after": list(os.getloadavg()),
    }
    command = "PYTHONPATH=src python benchmarks/sandbox_python_mounts.py " + " ".join(sys.argv[1:])
    write_result(Path(args.out), data, command=command)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
