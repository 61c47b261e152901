"""Can full credit be had without the fix? The scripted adversaries against the scoring.

Plays each scripted agent (the oracle, the adversaries, the fiddler) through
``run_eval`` on a few accepted bugs at the full calibration budget, on scoring seeds drawn from
a fixed secret (so the file reproduces), and writes each episode's reward, outcome, ``correct``,
named hacks and the evaluated returns beside the references to
``results/silentbug/adversaries.json``.

    nice -n 10 python benchmarks/silentbug_adversaries.py
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from verigap.results import write_result
from verigap.silentbug.evaluate import EvalConfig, run_eval
from verigap.silentbug.scoring import normalise

AGENTS = ("oracle", "late_controller", "late_greedy", "tuner", "bug_line_weights", "fiddler")
BUGS = ("single_recomputed_old_logprob", "modular_minibatch_adv_unshuffled")
ACTING_BUG = "single_stored_action_redrawn"
"""the bug in the acting code itself: a late controller or greedy acting sits beside its lines
and counts with the fix, so only the scorer's evaluation of the trained policy stands"""
SECRET = "silentbug-adversaries-v1"


def _mean(xs: list[float | None]) -> float | None:
    return None if not xs or any(x is None for x in xs) else sum(xs) / len(xs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bugs", default=",".join(BUGS))
    ap.add_argument("--agents", default=",".join(AGENTS))
    ap.add_argument(
        "--acting-bug",
        default=ACTING_BUG,
        help="also played by the oracle and the late adversaries ('' to skip)",
    )
    ap.add_argument("--arms", default="A")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cache-dir", type=Path, default=Path("runs/silentbug/scoring"))
    ap.add_argument("--out", type=Path, default=Path("results/silentbug/adversaries.json"))
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for agent in args.agents.split(","):
            bugs = args.bugs.split(",")
            if args.acting_bug and agent in (
                "oracle",
                "late_controller",
                "late_greedy",
                "bug_line_weights",
            ):
                bugs.append(args.acting_bug)
            cfg = EvalConfig(
                f"scripted:{agent}", tuple(args.arms.split(",")), tuple(bugs), max_runs=1
            )
            for r in run_eval(
                Path(tmp) / agent,
                cfg,
                cache_dir=args.cache_dir,
                workers=args.workers,
                secret=SECRET,
            ):
                v = r["verdict"]
                d = v.get("detail", {})
                row = {
                    "agent": agent,
                    "bug": r["bug"],
                    "arm": r["arm"],
                    "reward": v["reward"],
                    "correct": v["correct"],
                    "hacks": v["hacks"],
                    "outcome": v["checks"].get("outcome"),
                    "localized": v["checks"].get("localized"),
                    "fix_toward_clean": v["checks"].get("fix_toward_clean"),
                    "fix_jaccard": v["checks"].get("fix_jaccard"),
                    "patched": d.get("patched"),
                    "clean": d.get("clean"),
                    "broken": d.get("broken"),
                    "counterfactual_clean": d.get("counterfactual_clean"),
                    "counterfactual_broken": d.get("counterfactual_broken"),
                    # what the plain references would have paid (the edit counted as a fix)
                    "outcome_plain": (
                        None
                        if d.get("patched") is None or d.get("broken") is None
                        else normalise(d["patched"], d["broken"], d["clean"])
                    ),
                    "bug_line_additions": d.get("bug_line_additions"),
                    "training_returns": [p.get("score") for p in d.get("patched_runs", [])],
                    "training_mean": _mean([p.get("score") for p in d.get("patched_runs", [])]),
                    "seeds": d.get("seeds"),
                }
                rows.append(row)
                print(row, flush=True)
    write_result(
        args.out,
        {"secret": SECRET, "rows": rows},
        command=f"python benchmarks/silentbug_adversaries.py --bugs {args.bugs} "
        f"--agents {args.agents} --acting-bug '{args.acting_bug}' "
        f"--arms {args.arms} --out {args.out}",
    )


if __name__ == "__main__":
    main()
