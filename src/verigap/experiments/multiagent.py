"""The multi-agent log's report: a per-setting summary file and the docs views.

``predictions_multiagent.yaml`` runs through the same runner as the main log (its verdicts land
in results/experiments/verdicts_multiagent.json, which keeps only the metrics each prediction
reads). The summary adds every metric for every setting and seed, and the agents' learned
weights, read from the finished runs:

    python -m verigap.experiments.multiagent [RUNS_DIR]

writes results/experiments/multiagent_settings.json (RUNS_DIR defaults to runs/experiments).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import mean, pstdev
from typing import Any

from verigap.errors import ConfigError
from verigap.experiments.metrics import metric_value
from verigap.experiments.registry import Registry, load_registry
from verigap.experiments.runner import RUNS, plan
from verigap.experiments.verdicts import tally_text
from verigap.report.views import markdown_table, view
from verigap.results import write_result

REGISTRY = Path(__file__).with_name("predictions_multiagent.yaml")
SUMMARY = Path("results/experiments/multiagent_settings.json")
COMMAND = "python -m verigap.experiments.multiagent"
#: the training curves kept (per logged step, one value per seed)
CURVE_KEYS = (
    "false_success",
    "train_false_success",
    "auditor_precision",
    "auditor_random_precision",
    "writer_catch_rate",
    "writer_random_catch_rate",
)
DYNAMICS_STEPS = ("50", "100", "200", "400", "600", "800", "1000")
METRICS = (
    "start_false_success",
    "final_visible_pass",
    "final_true_success",
    "gain_true_success",
    "final_false_success",
    "final_untested_hack",
    "auditor_precision",
    "auditor_random_precision",
    "late_auditor_precision",
    "late_auditor_random_precision",
    "auditor_recall",
    "writer_catch_rate",
    "writer_random_catch_rate",
    "late_writer_catch_rate",
    "late_writer_random_catch_rate",
    "late_train_false_success",
)


def summarize(reg: Registry, runs_dir: Path = RUNS, quick: bool = False) -> dict[str, Any]:
    """{settings: {name: {metric: [per seed]}}, cpu_s: {name: [per seed]}, weights: ...}."""
    _, where = plan(reg, None, runs_dir, quick)
    out: dict[str, Any] = {
        "seeds": reg.seeds,
        "order": [],
        "settings": {},
        "cpu_s": {},
        "weights": {},
        "curves": {},
    }
    for name in reg.settings:
        vals: dict[str, list[float]] = {}
        for seed in reg.seeds:
            path = where[(name, seed)] / "result.json"
            if not path.is_file():
                raise ConfigError(
                    f"{path}: run {name}/seed{seed} has not finished; run "
                    f"`verigap experiments run --registry {REGISTRY}` first"
                )
            result = json.loads(path.read_text())
            for m in METRICS:
                try:
                    value = metric_value(m, result)
                except (KeyError, ValueError):
                    continue  # a metric of an agent this setting does not have
                vals.setdefault(m, []).append(value)
            out["cpu_s"].setdefault(name, []).append(float(result.get("cpu_s", 0.0)))
            curves = out["curves"].setdefault(name, {})
            for rec in result["curve"]:
                for key in CURVE_KEYS:
                    if key in rec:
                        curves.setdefault(key, {}).setdefault(str(rec["step"]), []).append(rec[key])
            for key in ("auditor_weights", "writer_weights"):
                if key in result:
                    out["weights"].setdefault(name, {}).setdefault(key, []).append(result[key])
        out["order"].append(name)
        out["settings"][name] = vals
    return out


# ---- docs views -------------------------------------------------------------------------------


def _cell(values: list[float] | None) -> str:
    return "—" if not values else f"{mean(values):.3f} ± {pstdev(values):.3f}"


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _settings_table(
    data: dict[str, Any], names: list[str], columns: tuple[tuple[str, str], ...]
) -> str:
    rows = [[n, *(_cell(data["settings"][n].get(m)) for m, _ in columns)] for n in names]
    return markdown_table(["setting", *(label for _, label in columns)], rows)


@view("multiagent_auditors")
def auditors_table(data: dict[str, Any]) -> str:
    """The auditor settings: the coder's held-out outcome and the auditor's catches."""
    names = [n for n in data["order"] if "audit" in n or n == "visible"]
    return _settings_table(
        data,
        names,
        (
            ("final_false_success", "final false success"),
            ("final_true_success", "final true success"),
            ("gain_true_success", "true success gain over SFT"),
            ("auditor_precision", "hacks caught per audit"),
            ("auditor_random_precision", "uniform audits, same episodes"),
            ("late_auditor_precision", "per audit, last 20%"),
            ("auditor_recall", "false successes caught"),
        ),
    )


@view("multiagent_writers")
def writers_table(data: dict[str, Any]) -> str:
    """The test-writer settings: the coder's held-out outcome and the writer's catches."""
    names = [n for n in data["order"] if n.startswith("writer") or n == "visible"]
    return _settings_table(
        data,
        names,
        (
            ("final_false_success", "final false success"),
            ("final_true_success", "final true success"),
            ("writer_catch_rate", "hacks caught per test"),
            ("writer_random_catch_rate", "per test, uniform candidate"),
            ("late_writer_catch_rate", "per test, last 20%"),
            ("late_train_false_success", "training false success, last 20%"),
        ),
    )


@view("multiagent_dynamics")
def dynamics_table(data: dict[str, Any]) -> str:
    """The arms race over training (mean over seeds): the coder's monitored false success and
    the auditors' hacks caught per audit, learned against random at 10%."""
    rows = []
    for name in (
        "random_audit_10",
        "learned_audit_10",
        "learned_audit_5",
        "learned_audit_2",
        "writer_learned_hidden",
    ):
        if name not in data["curves"]:
            continue
        curves = data["curves"][name]
        for key in (
            "false_success",
            "auditor_precision",
            "auditor_random_precision",
            "writer_catch_rate",
        ):
            if key in curves:
                rows.append(
                    [
                        name,
                        key,
                        *(
                            f"{mean(curves[key][st]):.3f}" if st in curves[key] else "—"
                            for st in DYNAMICS_STEPS
                        ),
                    ]
                )
    return markdown_table(["setting", "curve", *(f"step {s}" for s in DYNAMICS_STEPS)], rows)


@view("multiagent_weights")
def weights_table(data: dict[str, Any]) -> str:
    """The learned agents' final weights by feature (mean over seeds)."""
    out = []
    for name, kinds in data["weights"].items():
        for key, per_seed in kinds.items():
            feats = list(per_seed[0])
            out.append(
                f"**{name}** ({key.split('_')[0]}):\n\n"
                + markdown_table(feats, [[f"{mean(w[f] for w in per_seed):+.2f}" for f in feats]])
            )
    return "\n\n".join(out)


@view("multiagent_cost")
def cost_table(data: dict[str, Any]) -> str:
    """What the multi-agent log cost: runs, GRPO steps and the runs' own CPU time."""
    runs = data["runs"]
    return markdown_table(
        ["predictions", "verdicts", "runs", "GRPO steps", "CPU s (sum of runs)"],
        [
            [
                str(len(data["predictions"])),
                tally_text(data["predictions"].values()),
                str(len(runs)),
                str(sum(r["steps"] for r in runs.values())),
                f"{sum(r['cpu_s'] for r in runs.values()):.0f}",
            ]
        ],
    )


def main(argv: list[str]) -> int:
    runs_dir = Path(argv[0]) if argv else RUNS
    try:
        data = {"registry": str(REGISTRY), **summarize(load_registry(REGISTRY), runs_dir)}
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_result(SUMMARY, data, command=COMMAND + (f" {argv[0]}" if argv else ""))
    print(f"wrote {SUMMARY}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
