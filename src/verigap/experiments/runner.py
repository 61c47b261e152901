"""Running the log: one job per (trainer config, seed), shared by every prediction that needs it.

Runs live in ``RUNS/<config hash>/seed<N>``: two settings with the same resolved config, and
every prediction that names them, share one run; a finished run (result.json) is never redone,
so an interrupted log resumes where it stopped. SFT starting policies are cached across runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from verigap.experiments.language_model import run_language_model, stored_config
from verigap.experiments.metrics import AGENT_KEYS, metric_value
from verigap.experiments.registry import DEFAULT_REGISTRY, Registry
from verigap.experiments.verdicts import Values, log_summary, merge_entries, verdict_entry
from verigap.patchworld.grpo import train
from verigap.results import read_result, write_result
from verigap.runs import METRICS, Executor, Job, config_key, is_complete, read_jsonl, run_jobs

RUNS = Path("runs/experiments")
RESULTS = Path("results/experiments/verdicts.json")
COMMAND = "verigap experiments run"
CURVE_KEYS = (
    "step",
    "visible_pass",
    "true_success",
    "false_success",
    "reward",
    "caught",
    *AGENT_KEYS,
)


def run_experiment(run_dir: Path, config: dict[str, Any], sft_cache: Path) -> dict[str, Any]:
    """One trainer run; its result also carries the monitored curve the curve metrics read."""
    cpu0 = time.process_time()
    result = train(run_dir, config, sft_cache=sft_cache)
    result["cpu_s"] = time.process_time() - cpu0
    result["curve"] = [
        {k: r[k] for k in CURVE_KEYS if k in r} for r in read_jsonl(Path(run_dir) / METRICS)
    ]
    return result


def selected(reg: Registry, ids: list[str] | None) -> list:
    return [reg.prediction(i) for i in ids] if ids else list(reg.predictions)


def cheapest_first(reg: Registry, preds: list) -> list[str]:
    """The settings the predictions need, ordered so that predictions complete early: take the
    prediction whose still-missing settings cost the fewest training steps, schedule those,
    repeat. An interrupted log then holds as many finished predictions as it can."""
    cost = {
        s: max(1, reg.config(s, reg.seeds[0]).steps)
        for p in preds
        for s in p.criterion.settings_used()
    }
    order: list[str] = []
    todo = list(preds)
    while todo:
        missing = {p.id: sorted(set(p.criterion.settings_used()) - set(order)) for p in todo}
        best = min(todo, key=lambda p: sum(cost[s] for s in missing[p.id]))
        order += missing[best.id]
        todo.remove(best)
    return order


def plan(
    reg: Registry, ids: list[str] | None, runs_dir: Path, quick: bool = False
) -> tuple[list[Job], dict[tuple[str, int], Path]]:
    """The jobs the chosen predictions need (deduplicated by config) and where each
    (setting, seed) run lives."""
    needed = cheapest_first(reg, selected(reg, ids))
    jobs: dict[Path, Job] = {}
    where: dict[tuple[str, int], Path] = {}
    for s in needed:
        for seed in reg.seeds:
            cfg = reg.run_config(s, seed, quick=quick)
            run_dir = runs_dir / config_key(cfg) / f"seed{seed}"
            where[(s, seed)] = run_dir
            lm = reg.trainer_of(s) == "language_model"
            if run_dir not in jobs:
                jobs[run_dir] = Job(
                    name=f"{s}/seed{seed}",
                    run_dir=run_dir,
                    fn=run_language_model if lm else run_experiment,
                    kwargs={"config": cfg, "sft_cache": runs_dir / "_sft"},
                    config=stored_config(cfg) if lm else cfg,
                )
    return list(jobs.values()), where


def collect(
    reg: Registry,
    preds: list,
    results: dict[Path, dict[str, Any]],
    where: dict[tuple[str, int], Path],
) -> Values:
    """values[setting][metric] = one number per seed, for every metric the predictions use."""
    out: Values = {}
    for p in preds:
        for s in p.criterion.settings_used():
            for m in p.criterion.metrics_used():
                out.setdefault(s, {})[m] = [
                    metric_value(m, results[where[(s, seed)]]) for seed in reg.seeds
                ]
    return out


def _whole_log(reg: Registry, runs_dir: Path, quick: bool) -> dict[str, int]:
    """The size of the whole log: distinct runs, GRPO steps, and how many have finished."""
    jobs, _ = plan(reg, None, runs_dir, quick)
    done = [j for j in jobs if is_complete(j.run_dir)]
    return {
        "runs": len(jobs),
        "grpo_steps": sum(int(j.config["steps"]) for j in jobs if j.config),
        "runs_finished": len(done),
        "grpo_steps_finished": sum(int(j.config["steps"]) for j in done if j.config),
    }


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def finished(
    reg: Registry, ids: list[str] | None, runs_dir: Path, quick: bool = False
) -> list[str]:
    """The ids (of ``ids``, default all) whose runs have all finished."""
    out = []
    for p in selected(reg, ids):
        _, where = plan(reg, [p.id], runs_dir, quick)
        if all(is_complete(d) for d in where.values()):
            out.append(p.id)
    return out


def _rel(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (else as given)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def run_log(
    reg: Registry,
    ids: list[str] | None = None,
    *,
    runs_dir: Path = RUNS,
    results_path: Path | None = RESULTS,
    quick: bool = False,
    executor: Executor = "process",
    workers: int | None = None,
    progress: bool = True,
    registry_path: Path = DEFAULT_REGISTRY,
    finished_only: bool = False,
) -> dict[str, Any]:
    """Run (or resume) what the chosen predictions need, compute their verdicts and, when
    ``results_path`` is given, fold them into that results file. Returns the file's data.
    ``finished_only`` starts no run: it judges only the predictions whose runs all finished."""
    if finished_only:
        ids = finished(reg, ids, runs_dir, quick)
        if not ids:
            raise ValueError(f"no prediction has all its runs finished in {runs_dir}")
    preds = selected(reg, ids)
    jobs, where = plan(reg, ids, runs_dir, quick)
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    by_name = run_jobs(
        jobs,
        executor=executor,
        workers=workers,
        progress=progress,
        description="experiment log (quick)" if quick else "experiment log",
    )
    results = {job.run_dir: by_name[job.name] for job in jobs}
    values = collect(reg, preds, results, where)
    entries = [verdict_entry(reg, p, values) for p in preds]
    old: dict[str, Any] = {}
    if results_path is not None and results_path.is_file():
        old = read_result(results_path)
    data = {
        "registry": str(registry_path),
        "scale": "quick" if quick else "full",
        "seeds": reg.seeds,
        "predictions": (merged := merge_entries(old.get("predictions", {}), entries)),
        "summary": log_summary(merged),
        "runs": {
            job.name: {
                "cpu_s": float(results[job.run_dir].get("cpu_s", 0.0)),
                "steps": int(job.config["steps"]) if job.config else 0,
            }
            for job in jobs
        },
        "whole_log": _whole_log(reg, runs_dir, quick),
        "last_invocation": {
            "ids": [p.id for p in preds],
            "runs": len(jobs),
            "run_cpu_s_sum": sum(float(r.get("cpu_s", 0.0)) for r in results.values()),
            "cpu_s": _cpu_s() - cpu0,
            "wall_s": time.perf_counter() - wall0,
        },
    }
    if old.get("scale") not in (None, data["scale"]):
        raise ValueError(
            f"{results_path} holds {old['scale']} verdicts; write {data['scale']} "
            "ones to another file"
        )
    if results_path is not None:
        cmd = COMMAND + (" --quick" if quick else "") + (" " + " ".join(ids) if ids else "")
        if Path(registry_path) != DEFAULT_REGISTRY:  # a command that reproduces this file
            cmd += f" --registry {_rel(registry_path)} --results {results_path}"
        write_result(results_path, data, command=cmd)
    return data
