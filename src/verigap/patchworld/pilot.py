"""The pilot sweep: 14 settings x 3 seeds of SFT + GRPO, as independent jobs on an executor.

Settings (all k=4 unless named): visible-only; deletion penalty; audits at 5, 10, 25, 50, 100%;
oracle; and visible-only at k = 1, 2, 3, 6, 8, 10. ``--long`` adds the 5000-step follow-up at
25% audits and visible-only. Every run is a directory ``RUNS/<setting>/seed<N>`` that the sweep
skips once it holds result.json, so an interrupted sweep resumes where it stopped.

The runs train in groups (``group.train_group``), each run with the numbers it gets alone: the
runs that share a starting policy (k and seed) train together, and runs alone at theirs join
the others of the same shape (the k-spread settings train their three seeds together).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigap.patchworld.group import shape_key, train_group
from verigap.patchworld.grpo import GRPOConfig, train
from verigap.patchworld.sft import SFTConfig
from verigap.rewards import Audit, DeletionPenalty, Oracle, RewardScheme, Visible
from verigap.runs import Executor, Job, is_complete, run_jobs

SEEDS = (0, 1, 2)
AUDIT_RATES = (0.05, 0.10, 0.25, 0.50, 1.00)
K_SPREAD = (1, 2, 3, 6, 8, 10)
DELETION_COST = 0.5


@dataclass(frozen=True)
class Setting:
    name: str
    reward: RewardScheme
    k: int = 4
    steps: int = 1000


def settings(long: bool = False) -> list[Setting]:
    if long:
        return [
            Setting("long_visible", Visible(), steps=5000),
            Setting("long_audit_25", Audit(rate=0.25), steps=5000),
        ]
    out = [
        Setting("visible", Visible()),
        Setting(f"deletion_penalty_{DELETION_COST:g}", DeletionPenalty(per_deletion=DELETION_COST)),
    ]
    out += [Setting(Audit(rate=r).label, Audit(rate=r)) for r in AUDIT_RATES]
    out.append(Setting("oracle", Oracle()))
    out += [Setting(f"visible_k{k}", Visible(), k=k) for k in K_SPREAD]
    return out


QUICK = {
    "steps": 100,
    "monitor_programs": 200,
    "eval_programs": 500,
    "log_every": 20,
    "sft": SFTConfig(programs=3000, epochs=3),
}


def jobs(
    runs_dir: Path, *, quick: bool = False, long: bool = False, seeds: tuple[int, ...] = SEEDS
) -> list[Job]:
    out = []
    for s in settings(long):
        for seed in seeds:
            overrides: dict[str, Any] = dict(QUICK) if quick else {"steps": s.steps}
            cfg = GRPOConfig(k=s.k, seed=seed, reward=s.reward, **overrides).model_dump(mode="json")
            out.append(
                Job(
                    name=f"{s.name}/seed{seed}",
                    run_dir=runs_dir / s.name / f"seed{seed}",
                    fn=train,
                    kwargs={"config": cfg, "sft_cache": runs_dir / "_sft"},
                    config=cfg,
                )
            )
    return out


def run_pilot(
    runs_dir: Path,
    *,
    quick: bool = False,
    long: bool = False,
    executor: Executor = "process",
    workers: int | None = None,
    seeds: tuple[int, ...] = SEEDS,
    progress: bool = True,
) -> dict[str, dict]:
    """Run (or resume) the sweep; returns every run's result keyed by ``setting/seedN``."""
    todo = jobs(runs_dir, quick=quick, long=long, seeds=seeds)
    label = "pilot (quick)" if quick else "pilot (long)" if long else "pilot"
    run_jobs(
        group_jobs([j for j in todo if not is_complete(j.run_dir)]),
        executor=executor,
        workers=workers,
        progress=progress,
        description=label,
    )
    return run_jobs(todo, executor="serial", progress=False)  # reads back, checks configs


def group_jobs(todo: list[Job]) -> list[Job]:
    """The runs of ``todo`` as group jobs (``train_group``): one per starting policy (same shape,
    k and seed), with the groups of one run merged per shape. A group job's run directory is
    its first run's, whose result.json is written last, so a finished group reads as finished."""
    by_start: dict[tuple[str, int], list[Job]] = {}
    for job in todo:
        c = GRPOConfig.model_validate(job.config)
        by_start.setdefault((shape_key(c), c.seed), []).append(job)
    groups: list[list[Job]] = []
    alone: dict[str, list[Job]] = {}
    for (shape, _), members in by_start.items():
        if len(members) > 1:
            groups.append(members)
        else:
            alone.setdefault(shape, []).extend(members)
    groups += alone.values()
    return [
        Job(
            name=g[0].name + (f" (+{len(g) - 1})" if len(g) > 1 else ""),
            run_dir=g[0].run_dir,
            fn=train_group,
            kwargs={
                "configs": [j.config for j in g],
                "sft_cache": g[0].kwargs["sft_cache"],
                "other_dirs": [j.run_dir for j in g[1:]],
            },
            config=g[0].config,
        )
        for g in groups
    ]
