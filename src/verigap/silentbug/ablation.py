"""Ablation: remove one stability mechanism from the clean code and measure what it costs.

This runs before any omission bug is trusted (seed 003's invariant 6): removing a mechanism that
never carried weight cannot make a task, so calibration refuses omission bugs whose mechanism
did not clear the same rule here (clean - ablated >= 3 x the larger seed std).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.results import write_result
from verigap.runs import Executor, Job, run_jobs
from verigap.silentbug.runner import plan_run
from verigap.silentbug.stats import Arm, Gap, gap
from verigap.silentbug.substrate import SUBSTRATES, pristine_files


@dataclass(frozen=True)
class AblationRow:
    substrate: str
    mechanism: str
    clean: Arm
    ablated: Arm
    gap: Gap

    @property
    def load_bearing(self) -> bool:
        return self.gap.clears

    def to_dict(self) -> dict[str, Any]:
        return {
            "substrate": self.substrate,
            "mechanism": self.mechanism,
            "clean": self.clean.to_dict(),
            "ablated": self.ablated.to_dict(),
            **self.gap.to_dict(),
            "load_bearing": self.load_bearing,
            "override": SUBSTRATES[self.substrate].ablations[self.mechanism],
        }


def run_timing(results: dict[str, dict[str, Any]], fresh: set[str]) -> dict[str, Any]:
    """Wall and CPU seconds of the training runs behind a calibration, summed over all of them
    and over those this invocation executed (the rest were read from the cache, timed when
    they ran), with the load average at the end: machine-specific, unlike the verdicts."""

    def total(key: str, names: Sequence[str] | set[str]) -> float:
        return round(sum(float(results[n].get(key) or 0.0) for n in names), 1)

    return {
        "runs_cpu_s": total("cpu_s", results),
        "runs_wall_s": total("wall_s", results),
        "executed_cpu_s": total("cpu_s", fresh),
        "executed_wall_s": total("wall_s", fresh),
        "runs_cached": len(results) - len(fresh),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "note": "wall_s above is this invocation's wall time; runs_*_s sum every run it "
        "used, including cached runs timed when they ran; executed_*_s only the "
        "runs it ran",
    }


def clean_jobs(
    cache_dir: Path, substrate: str, files: dict[str, str], seeds: Sequence[int]
) -> list[Job]:
    return [plan_run(cache_dir, substrate, "clean", files, {}, s) for s in seeds]


def ablation_jobs(
    cache_dir: Path, substrate: str, mechanism: str, files: dict[str, str], seeds: Sequence[int]
) -> list[Job]:
    sub = SUBSTRATES[substrate]
    if mechanism not in sub.ablations:
        raise ConfigError(
            f"substrate {substrate!r} has no ablation {mechanism!r}; "
            f"choose from {sorted(sub.ablations) or 'none'}"
        )
    return [
        plan_run(cache_dir, substrate, f"ablate-{mechanism}", files, sub.ablations[mechanism], s)
        for s in seeds
    ]


def arm_from(results: dict[str, dict[str, Any]], jobs: Iterable[Job]) -> Arm:
    return Arm(tuple(float(results[j.name]["score"]) for j in jobs))


def checked_arm(results: dict[str, dict[str, Any]], jobs: Iterable[Job]) -> Arm:
    """``arm_from`` for runs a verdict rests on (clean, ablated): a run that crashed, timed
    out or scored nothing fails loudly instead of becoming a NaN margin."""
    jobs = list(jobs)
    for j in jobs:
        r = results[j.name]
        score = r.get("score")
        if r.get("status") != "ok" or score is None or score != score:
            raise ConfigError(
                f"run {j.name} {r.get('status')} (score {score}); see {j.run_dir / 'train.log'}."
                " A clean or ablation run must finish for its verdict to mean anything: fix "
                "the substrate or the budget and rerun"
            )
    return arm_from(results, jobs)


def ablation_rows(
    results: dict[str, dict[str, Any]],
    cache_dir: Path,
    files: dict[str, str],
    pairs: Iterable[tuple[str, str]],
    seeds: Sequence[int],
) -> list[AblationRow]:
    rows = []
    for substrate, mechanism in pairs:
        clean = checked_arm(results, clean_jobs(cache_dir, substrate, files, seeds))
        ablated = checked_arm(results, ablation_jobs(cache_dir, substrate, mechanism, files, seeds))
        rows.append(AblationRow(substrate, mechanism, clean, ablated, gap(clean, ablated)))
    return rows


def ablate(
    substrates: Sequence[str] = ("acrobot_modular",),
    mechanisms: Sequence[str] | None = None,
    *,
    seeds: int = 3,
    cache_dir: Path = Path("runs/silentbug"),
    out: Path | None = None,
    executor: Executor = "process",
    workers: int | None = None,
    progress: bool = True,
    merge: bool = False,
) -> list[AblationRow]:
    """Clean vs each mechanism removed, per substrate, over ``seeds`` seeds (cached runs)."""
    seed_list = tuple(range(1, seeds + 1))
    files = pristine_files()
    pairs: list[tuple[str, str]] = []
    for sub in substrates:
        if sub not in SUBSTRATES:
            raise ConfigError(f"unknown substrate {sub!r}; choose from {sorted(SUBSTRATES)}")
        known = SUBSTRATES[sub].ablations
        if not known:
            raise ConfigError(f"substrate {sub!r} has no ablation switches; use a modular one")
        pairs += [(sub, m) for m in (mechanisms or sorted(known))]
    started = time.time()
    jobs = [j for sub in substrates for j in clean_jobs(cache_dir, sub, files, seed_list)]
    for sub, mech in pairs:
        jobs += ablation_jobs(cache_dir, sub, mech, files, seed_list)
    fresh = {j.name for j in jobs if not (j.run_dir / "result.json").is_file()}
    results = run_jobs(
        jobs, executor=executor, workers=workers, progress=progress, description="silentbug ablate"
    )
    rows = ablation_rows(results, cache_dir, files, pairs, seed_list)
    if out is not None:
        from verigap.results import make_meta
        from verigap.silentbug.calibration_file import provenance, read_baselines, strict

        flags = "".join(f" --substrate {s}" for s in substrates) + "".join(
            f" --mechanism {m}" for m in mechanisms or ()
        )
        command = (
            f"verigap silentbug ablate{flags} --seeds {seeds} --cache-dir {cache_dir} "
            f"--out {out}" + (" --merge" if merge else "")
        )
        data = strict(
            {
                "version": 1,
                "seeds": list(seed_list),
                "rows": [r.to_dict() for r in rows],
                "wall_s": round(time.time() - started, 1),
                "runs_total": len(jobs),
                "runs_executed": len(fresh),
                "timing": run_timing(results, fresh),
            }
        )
        if merge and out.is_file():
            old = read_baselines(out)  # a results file or the first, bare format
            if old.get("seeds") != data["seeds"]:
                raise ConfigError(
                    f"cannot merge ablations over seeds {data['seeds']} into "
                    f"{out} (seeds {old.get('seeds')}); rerun it whole"
                )
            was = {k: v for k, v in provenance(out).items() if k != "argv"}
            by = {k: v for k, v in make_meta(command).items() if k != "argv"}
            keyed = {
                (r["substrate"], r["mechanism"]): {"calibrated_by": was, **r} for r in old["rows"]
            }
            keyed.update(
                {(r["substrate"], r["mechanism"]): {**r, "calibrated_by": by} for r in data["rows"]}
            )
            data = {**data, "rows": [keyed[k] for k in sorted(keyed)], "merged": True}
        write_result(out, data, command=command)
    return rows


def markdown_table(rows: Sequence[AblationRow]) -> str:
    """Ablation rows as a Markdown table."""

    def f(x: float) -> str:
        return f"{x:.1f}"

    lines = [
        "| substrate | removed | clean | ablated (per seed) | drop | 3 x max std | load-bearing |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.substrate} | {r.mechanism} | {f(r.clean.mean)} ± {f(r.clean.std)} | "
            f"{f(r.ablated.mean)} ± {f(r.ablated.std)} ({', '.join(f(x) for x in r.ablated.scores)})"
            f" | {f(r.gap.margin)} | {f(r.gap.threshold)} | {'yes' if r.load_bearing else 'no'} |"
        )
    return "\n".join(lines)
