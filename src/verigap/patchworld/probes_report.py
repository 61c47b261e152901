"""The probes and the transformer-vs-MLP table across seeds, from the transformer log's runs.

``probe_log`` runs (or reads back, runs are resumable and keyed by config like the experiment
log's, so it shares runs with ``verigap experiments run --registry
.../predictions_transformer.yaml``) every setting of a registry for every seed, then writes:

- ``probes``: for the probe setting, each phase (start / final), target and statistic, the
  per-seed values, their mean and standard deviation, and the mean by layer;
- ``settings``: every setting's policy, reward, start and final visible pass, true and false
  success (per seed and mean) and the run's CPU time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from verigap.experiments.registry import Registry
from verigap.experiments.runner import config_key, run_experiment
from verigap.patchworld.probes import STATS, TARGETS
from verigap.runs import Job, run_jobs

RATES = ("visible_pass", "true_success", "false_success")


def _mean_sd(values: list[float]) -> dict[str, Any]:
    return {"seeds": values, "mean": float(np.mean(values)), "std": float(np.std(values))}


def probe_log(
    reg: Registry,
    setting: str,
    runs_dir: Path,
    quick: bool = False,
    workers: int | None = None,
    progress: bool = True,
    executor: str = "process",
) -> dict[str, Any]:
    if setting not in reg.settings:
        raise ValueError(
            f"no setting {setting!r} in the registry (known: {', '.join(sorted(reg.settings))})"
        )
    if reg.config(setting, reg.seeds[0]).policy.kind != "transformer":
        raise ValueError(f"setting {setting!r} is not a transformer policy; probes need one")
    jobs: dict[tuple[str, int], Job] = {}
    for s in reg.settings:
        for seed in reg.seeds:
            cfg = reg.config(s, seed, quick=quick).model_dump(mode="json")
            run_dir = runs_dir / config_key(cfg) / f"seed{seed}"
            jobs[(s, seed)] = Job(
                name=f"{s}/seed{seed}",
                run_dir=run_dir,
                fn=run_experiment,
                kwargs={"config": cfg, "sft_cache": runs_dir / "_sft"},
                config=cfg,
            )
    unique = {j.run_dir: j for j in jobs.values()}
    by_name = run_jobs(
        list(unique.values()),
        executor=executor,  # type: ignore[arg-type]
        workers=workers,
        progress=progress,
        description="transformer log (quick)" if quick else "transformer log",
    )
    res = {key: by_name[unique[j.run_dir].name] for key, j in jobs.items()}
    seeds = reg.seeds
    probes: dict[str, Any] = {}
    for when in ("start", "final"):
        probes[when] = {}
        for target in TARGETS:
            per = [res[(setting, s)]["probes"][when][target] for s in seeds]
            probes[when][target] = {
                **{stat: _mean_sd([p[stat] for p in per]) for stat in STATS},
                "positive_rate": _mean_sd([p["positive_rate"] for p in per]),
                "by_layer": {
                    stat: np.mean([p["by_layer"][stat] for p in per], 0).tolist() for stat in STATS
                },
            }
    settings = {}
    for s in reg.settings:
        runs = [res[(s, seed)] for seed in seeds]
        cfg = runs[0]["config"]
        settings[s] = {
            "policy": cfg.get("policy", {}).get("kind", "mlp"),
            "reward": runs[0]["setting"],
            "steps": cfg["steps"],
            **{
                f"{when}_{r}": _mean_sd([run[when][r] for run in runs])
                for when in ("start", "final")
                for r in RATES
            },
            "kl_final": _mean_sd([run["kl_final"] for run in runs]),
            "cpu_s": _mean_sd([float(run.get("cpu_s", 0.0)) for run in runs]),
        }
    return {
        "setting": setting,
        "seeds": seeds,
        "scale": "quick" if quick else "full",
        "probe_programs": res[(setting, seeds[0])]["probes"]["programs"],
        "probes": probes,
        "settings": settings,
        "cpu_s_all_runs": float(sum(float(r.get("cpu_s", 0.0)) for r in by_name.values())),
    }


def probe_figure(data: dict[str, Any], path: str | Path) -> Path:
    """Balanced accuracy by layer for each target, before and after GRPO, with the controls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TARGETS), figsize=(4 * len(TARGETS), 3.4), sharey=True)
    for ax, target in zip(axes, TARGETS, strict=True):
        for when, style in (("start", "--"), ("final", "-")):
            layers = data["probes"][when][target]["by_layer"]
            x = np.arange(len(layers["bacc"]))
            ax.plot(x, layers["bacc"], style, marker="o", color="C0", label=f"probe ({when})")
            ax.plot(
                x, layers["control"], style, marker="s", color="C1", label=f"control task ({when})"
            )
            ax.plot(
                x,
                layers["shuffled"],
                style,
                marker="x",
                color="C2",
                label=f"shuffled labels ({when})",
            )
            if "input" in layers:  # the same probe on the input token alone, no network
                ax.plot(x, layers["input"], style, color="C3", label=f"input only ({when})")
        ax.axhline(0.5, color="grey", lw=0.8)
        ax.set_title(f"{target}")
        ax.set_xticks(x, ["embed"] + [f"block {i + 1}" for i in range(len(x) - 1)])
        ax.set_ylim(0.3, 1.02)
    axes[0].set_ylabel("balanced accuracy, held-out programs")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"Linear probes on the transformer ({data['setting']}, mean of "
        f"{len(data['seeds'])} seeds): dashed = SFT start, solid = after GRPO",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
