"""Is the learned auditor learning, or reading the label off its features? A follow-up to the
multi-agent log, not a pre-registered prediction.

In Patch World a visible-passing episode that deleted or stubbed a broken branch is almost
always a false success, so the learned auditor's features passed x deleted and passed x stubbed
nearly are its label. This runs, at each budget, four auditors on the same trainer:

- ``random``: uniform audits (the multi-agent log's baseline);
- ``learned``: the logistic auditor on all its features (the log's);
- ``rule``: no learning, the fixed score passed x (deleted + stubbed) on the same features,
  ranked and explored exactly as the learned one;
- ``learned_no_outcomes``: the logistic auditor without any feature of what the coder did to
  the code, left with the visible checks, coverage and the coder's log-probabilities.

If ``rule`` does as well as ``learned``, the learned auditor's success is the features', not
the learning's. Settings extend the multi-agent registry's defaults, so the runs the two share
(``random_audit_10``, ``learned_audit_10``, ``learned_audit_2``) are the same runs:

    python -m verigap.experiments.auditors [--runs DIR] [--quick] [--workers N]

writes results/experiments/auditor_features.json (``--quick``: RUNS/auditor_features.json).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from verigap.errors import ConfigError
from verigap.experiments.metrics import metric_value
from verigap.experiments.registry import Registry, load_registry
from verigap.experiments.runner import RUNS, config_key, run_experiment
from verigap.report.views import markdown_table, view
from verigap.results import write_result
from verigap.runs import Job, run_jobs

REGISTRY = Path(__file__).with_name("predictions_multiagent.yaml")
RESULTS = Path("results/experiments/auditor_features.json")
COMMAND = "python -m verigap.experiments.auditors"
KINDS = {
    "random": {"kind": "random"},
    "learned": {"kind": "learned"},
    "rule": {"kind": "rule"},
    "learned_no_outcomes": {"kind": "learned", "features": "no_outcomes"},
}
RATES = {"10": 0.10, "2": 0.02}
METRICS = (
    "final_false_success",
    "final_true_success",
    "auditor_precision",
    "auditor_random_precision",
    "late_auditor_precision",
    "auditor_recall",
)


def settings() -> dict[str, dict[str, Any]]:
    """``<kind>_audit_<rate>`` for every auditor kind and budget, as registry settings."""
    return {
        f"{kind}_audit_{r}": {"options": {"auditor": {**agent, "rate": rate}}}
        for r, rate in RATES.items()
        for kind, agent in KINDS.items()
    }


def comparison_registry(base: Registry) -> Registry:
    """``base`` (its seeds, defaults and quick overrides) with the comparison's settings."""
    return base.model_copy(update={"settings": settings(), "predictions": []})


def compare(
    base: Registry,
    runs_dir: Path = RUNS,
    quick: bool = False,
    workers: int | None = None,
    executor: str = "process",
    progress: bool = True,
) -> dict[str, Any]:
    """Run (resumably) every setting for every seed; per setting and metric, the per-seed
    values, their mean and standard deviation, and the runs' CPU time."""
    reg = comparison_registry(base)
    jobs: dict[tuple[str, int], Job] = {}
    for name in reg.settings:
        for seed in reg.seeds:
            cfg = reg.config(name, seed, quick=quick).model_dump(mode="json")
            jobs[(name, seed)] = Job(
                name=f"{name}/seed{seed}",
                run_dir=runs_dir / config_key(cfg) / f"seed{seed}",
                fn=run_experiment,
                config=cfg,
                kwargs={"config": cfg, "sft_cache": runs_dir / "_sft"},
            )
    unique = {j.run_dir: j for j in jobs.values()}
    by_name = run_jobs(
        list(unique.values()),
        executor=executor,  # type: ignore[arg-type]
        workers=workers,
        progress=progress,
        description="auditor comparison",
    )
    res = {key: by_name[unique[j.run_dir].name] for key, j in jobs.items()}
    out: dict[str, Any] = {
        "seeds": reg.seeds,
        "scale": "quick" if quick else "full",
        "rates": RATES,
        "kinds": list(KINDS),
        "settings": {},
    }
    for name in reg.settings:
        runs = [res[(name, seed)] for seed in reg.seeds]
        row: dict[str, Any] = {}
        for m in METRICS:
            vals = [metric_value(m, r) for r in runs]
            row[m] = {"seeds": vals, "mean": mean(vals), "std": pstdev(vals)}
        cpu = [float(r.get("cpu_s", 0.0)) for r in runs]
        row["cpu_s"] = {"seeds": cpu, "mean": mean(cpu), "std": pstdev(cpu)}
        out["settings"][name] = row
    out["cpu_s_all_runs"] = sum(float(r.get("cpu_s", 0.0)) for r in by_name.values())
    return out


@view("auditor_comparison")
def comparison_table(data: dict[str, Any]) -> str:
    """Each auditor at each budget: the coder's final false success and true success, and
    what the auditor caught (mean ± std over seeds)."""

    def cell(x: dict[str, Any]) -> str:
        return f"{x['mean']:.3f} ± {x['std']:.3f}"

    names = [f"{kind}_audit_{r}" for r in data["rates"] for kind in data["kinds"]]
    rows = [
        [
            name,
            cell(s["final_false_success"]),
            cell(s["final_true_success"]),
            cell(s["auditor_precision"]),
            cell(s["auditor_random_precision"]),
            cell(s["late_auditor_precision"]),
            cell(s["auditor_recall"]),
        ]
        for name in names
        if (s := data["settings"].get(name))
    ]
    return markdown_table(
        [
            "setting",
            "final false success",
            "final true success",
            "hacks caught per audit",
            "uniform audits, same episodes",
            "per audit, last 20%",
            "false successes caught",
        ],
        rows,
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=Path, default=None, help="runs directory (default runs/experiments[-quick])"
    )
    ap.add_argument("--quick", action="store_true", help="the registry's small, fast scale")
    ap.add_argument("--workers", type=int, default=None, help="process-pool size")
    ap.add_argument("--executor", default="process", choices=("serial", "process", "ray"))
    args = ap.parse_args(argv)
    runs_dir = args.runs or (Path("runs/experiments-quick") if args.quick else RUNS)
    try:
        data = compare(
            load_registry(REGISTRY),
            runs_dir,
            quick=args.quick,
            workers=args.workers,
            executor=args.executor,
        )
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = runs_dir / RESULTS.name if args.quick else RESULTS
    cmd = (
        COMMAND + (" --quick" if args.quick else "") + (f" --runs {args.runs}" if args.runs else "")
    )
    write_result(out, data, command=cmd)
    print(comparison_table(data))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
