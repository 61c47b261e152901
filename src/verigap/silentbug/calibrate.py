"""Calibration: clean vs broken runs over seeds at a fixed budget, and the acceptance rule.

A bug is accepted only if clean - broken >= 3 x the larger seed std (and positive); a broken run
that crashes or times out is not silent and is rejected; an omission bug (and an interaction
bug that names the mechanism it defeats) is refused unless the ablation on its substrate showed
that mechanism is load-bearing. Every run is cached
by the hash of its workspace and config; runs go to a process pool with a progress bar.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.results import make_meta, write_result
from verigap.runs import METRICS, RESULT, Executor, Job, read_jsonl, run_jobs
from verigap.silentbug.ablation import (
    AblationRow,
    ablation_jobs,
    ablation_rows,
    arm_from,
    checked_arm,
    clean_jobs,
    run_timing,
)
from verigap.silentbug.bank import Bug, Registry, broken_files, load_registry
from verigap.silentbug.calibration_file import (  # noqa: F401  (re-exported)
    _refuse_constant,
    provenance,
    read_baselines,
    strict,
)
from verigap.silentbug.runner import learning_curve, plan_run
from verigap.silentbug.stats import SIGMAS, Arm, Gap, gap
from verigap.silentbug.substrate import SUBSTRATES, pristine_files

RULE = (
    f"accepted iff clean - broken > 0 and >= {SIGMAS:g} x max(sample std of clean, of broken) "
    "over seeds, every broken run finished (silent), and for omission bugs (and interaction "
    "bugs naming a mechanism) the ablation of that mechanism on the same substrate cleared "
    "the same rule"
)


@dataclass(frozen=True)
class BugResult:
    bug: Bug
    clean: Arm
    broken: Arm
    gap: Gap
    verdict: str  # accepted | rejected | refused
    reason: str
    statuses: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        b = self.bug
        return {
            "id": b.id,
            "substrate": b.substrate,
            "class": b.bug_class,
            "component": b.component,
            "mechanism": b.mechanism,
            "file": b.file,
            "clean": self.clean.to_dict(),
            "broken": self.broken.to_dict(),
            **self.gap.to_dict(),
            "verdict": self.verdict,
            "reason": self.reason,
            "broken_status": list(self.statuses),
        }


@dataclass(frozen=True)
class Calibration:
    results: list[BugResult]
    ablations: list[AblationRow]
    clean: dict[str, Arm]
    seeds: tuple[int, ...]
    wall_s: float
    runs_total: int
    runs_executed: int
    timing: dict[str, Any] = field(default_factory=dict)

    def accepted(self) -> list[BugResult]:
        return [r for r in self.results if r.verdict == "accepted"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "rule": RULE,
            "seeds": list(self.seeds),
            "score": "mean undiscounted episode return over episodes ending in the last 20% "
            "of the timestep budget",
            "substrates": {
                name: {
                    "config": SUBSTRATES[name].config,
                    "description": SUBSTRATES[name].description,
                    "clean": arm.to_dict(),
                }
                for name, arm in self.clean.items()
            },
            "ablations": [a.to_dict() for a in self.ablations],
            "bugs": {r.bug.id: r.to_dict() for r in self.results},
            "summary": {
                "bugs": len(self.results),
                "accepted": len(self.accepted()),
                "rejected": sum(r.verdict == "rejected" for r in self.results),
                "refused": sum(r.verdict == "refused" for r in self.results),
                "accepted_ids": [r.bug.id for r in self.accepted()],
            },
            "wall_s": round(self.wall_s, 1),
            "runs_total": self.runs_total,
            "runs_executed": self.runs_executed,
            "timing": self.timing,
        }


def judge(
    bug: Bug, clean: Arm, broken: Arm, statuses: Sequence[str], mechanism_load_bearing: bool | None
) -> tuple[Gap, str, str]:
    """(gap, verdict, reason) for one bug from its numbers."""
    g = gap(clean, broken)
    if bug.mechanism and not mechanism_load_bearing:
        return (
            g,
            "refused",
            (
                f"ablation did not show {bug.mechanism!r} load-bearing on "
                f"{bug.substrate}; a {bug.bug_class} bug of it is not a task "
                "there (its broken runs are skipped)"
            ),
        )
    if any(s != "ok" for s in statuses):
        return g, "rejected", "a broken run crashed or timed out: the bug is not silent"
    if g.clears:
        return g, "accepted", "clean - broken clears 3 x the larger seed std"
    if g.margin <= 0:
        return g, "rejected", "broken did as well as or better than clean"
    return g, "rejected", "the gap is within seed noise"


def calibrate(
    bug_ids: Sequence[str] | None = None,
    *,
    seeds: int = 3,
    cache_dir: Path = Path("runs/silentbug"),
    out: Path | None = None,
    registry: Registry | None = None,
    executor: Executor = "process",
    workers: int | None = None,
    progress: bool = True,
    merge: bool = False,
) -> Calibration:
    """Run (or read from cache) every clean, broken and needed ablation run; judge each bug.

    With ``merge``, an existing ``out`` keeps the bugs and ablation rows this call did not
    calibrate (each with the provenance of the call that did); the rest are replaced."""
    started = time.time()
    registry = registry or load_registry()
    bugs = [registry.get(i) for i in bug_ids] if bug_ids else list(registry.bugs)
    seed_list = tuple(range(1, seeds + 1))
    pristine = pristine_files()

    substrates = sorted({b.substrate for b in bugs})
    pairs = sorted({(b.substrate, b.mechanism) for b in bugs if b.mechanism})
    # phase 1: clean runs and the ablations that omission bugs rely on
    jobs: list[Job] = []
    for sub in substrates:
        jobs += clean_jobs(cache_dir, sub, pristine, seed_list)
    for sub, mech in pairs:
        jobs += ablation_jobs(cache_dir, sub, mech, pristine, seed_list)
    fresh = {j.name for j in jobs if not (j.run_dir / "result.json").is_file()}
    results = run_jobs(
        jobs,
        executor=executor,
        workers=workers,
        progress=progress,
        description="silentbug calibrate: clean + ablations",
    )
    clean = {
        sub: checked_arm(results, clean_jobs(cache_dir, sub, pristine, seed_list))
        for sub in substrates
    }
    ablations = ablation_rows(results, cache_dir, pristine, pairs, seed_list)
    load_bearing = {(a.substrate, a.mechanism): a.load_bearing for a in ablations}

    # phase 2: broken runs; a bug whose mechanism is not load-bearing is refused whatever its
    # numbers, so it is not run
    broken_by_bug: dict[str, list[Job]] = {}
    for bug in bugs:
        if bug.mechanism and not load_bearing[(bug.substrate, bug.mechanism)]:
            broken_by_bug[bug.id] = []
            continue
        files = broken_files(bug, pristine)
        broken_by_bug[bug.id] = [
            plan_run(cache_dir, bug.substrate, bug.id, files, {}, s) for s in seed_list
        ]
    broken_jobs = [j for js in broken_by_bug.values() for j in js]
    fresh |= {j.name for j in broken_jobs if not (j.run_dir / "result.json").is_file()}
    results.update(
        run_jobs(
            broken_jobs,
            executor=executor,
            workers=workers,
            progress=progress,
            description="silentbug calibrate: broken",
        )
    )
    jobs += broken_jobs

    bug_results = []
    for bug in bugs:
        broken = arm_from(results, broken_by_bug[bug.id])
        statuses = tuple(results[j.name]["status"] for j in broken_by_bug[bug.id])
        g, verdict, reason = judge(
            bug,
            clean[bug.substrate],
            broken,
            statuses,
            load_bearing.get((bug.substrate, bug.mechanism or "")),
        )
        bug_results.append(
            BugResult(bug, clean[bug.substrate], broken, g, verdict, reason, statuses)
        )
    cal = Calibration(
        bug_results,
        ablations,
        clean,
        seed_list,
        time.time() - started,
        len(jobs),
        len(fresh),
        run_timing(results, fresh),
    )
    if out is not None:
        ids = "".join(f" --bug {i}" for i in bug_ids or ())
        command = (
            f"verigap silentbug calibrate{ids} --seeds {seeds} --cache-dir {cache_dir} "
            f"--out {out}" + (" --merge" if merge else "")
        )
        data = strict(cal.to_dict())
        if merge and out.is_file():
            data = merge_calibration(read_baselines(out), provenance(out), data, make_meta(command))
        write_result(out, data, command=command)
    return cal


def _invocations(cal: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """What each invocation behind a (merged) calibration ran: its command, wall time, runs
    executed and cached, and their CPU time."""
    if "invocations" in cal:
        return list(cal["invocations"])
    if "timing" not in cal:  # the first calibration recorded no timing
        return []
    return [
        {
            "command": meta.get("command"),
            "written_at": meta.get("written_at"),
            **{k: cal.get(k) for k in ("wall_s", "runs_total", "runs_executed", "timing")},
        }
    ]


def merge_calibration(
    old: dict[str, Any], old_meta: dict[str, Any], new: dict[str, Any], new_meta: dict[str, Any]
) -> dict[str, Any]:
    """``new`` laid over ``old``: bugs, ablation rows and clean substrates that ``new``
    calibrated replace those of ``old``; every entry says which invocation (command, commit,
    machine, versions) produced it, so numbers from two machines are never mistaken for one
    run. Seeds must match; the summary is recomputed over the merged bugs."""
    if old.get("seeds") != new["seeds"]:
        raise ConfigError(
            f"cannot merge a calibration over seeds {new['seeds']} into one over "
            f"{old.get('seeds')}; rerun the whole calibration with those seeds"
        )
    by = {k: v for k, v in new_meta.items() if k != "argv"}
    was = {k: v for k, v in old_meta.items() if k != "argv"}

    def tag(entry: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "calibrated_by": entry.get("calibrated_by", meta)}

    bugs = {k: tag(v, was) for k, v in old["bugs"].items()}
    bugs.update({k: tag(v, by) for k, v in new["bugs"].items()})
    rows = {(r["substrate"], r["mechanism"]): tag(r, was) for r in old.get("ablations", [])}
    rows.update({(r["substrate"], r["mechanism"]): tag(r, by) for r in new["ablations"]})
    subs = {k: tag(v, was) for k, v in old.get("substrates", {}).items()}
    subs.update({k: tag(v, by) for k, v in new["substrates"].items()})
    accepted = [k for k, b in bugs.items() if b["verdict"] == "accepted"]
    return {
        **new,
        "bugs": bugs,
        "invocations": [*_invocations(old, old_meta), *_invocations(new, new_meta)],
        "ablations": [rows[k] for k in sorted(rows)],
        "substrates": dict(sorted(subs.items())),
        "summary": {
            "bugs": len(bugs),
            "accepted": len(accepted),
            "rejected": sum(b["verdict"] == "rejected" for b in bugs.values()),
            "refused": sum(b["verdict"] == "refused" for b in bugs.values()),
            "accepted_ids": accepted,
        },
        "merged": True,
    }


def cached_curves(
    substrates: Sequence[str],
    label: str = "clean",
    *,
    seeds: int = 3,
    bins: int = 5,
    cache_dir: Path = Path("runs/silentbug"),
    train: bool = False,
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """Learning curves of finished runs in the cache (clean, a bug, or ``ablate-<mechanism>``);
    ``train``: first run the ones the cache lacks (the same runs calibrate and ablate use)."""
    registry = load_registry()
    pristine = pristine_files()
    jobs = []
    for sub in substrates:
        if sub not in SUBSTRATES:
            raise ConfigError(f"unknown substrate {sub!r}; choose from {sorted(SUBSTRATES)}")
        files, overrides = pristine, {}
        if label.startswith("ablate-"):
            overrides = SUBSTRATES[sub].ablations.get(label.removeprefix("ablate-"), {})
        elif label != "clean":
            files = broken_files(registry.get(label), pristine)
        jobs += [
            (sub, seed, plan_run(cache_dir, sub, label, files, overrides, seed))
            for seed in range(1, seeds + 1)
        ]
    if train:
        run_jobs(
            [j for _, _, j in jobs], workers=workers, progress=False, description="silentbug curves"
        )
    rows = []
    for sub, seed, job in jobs:
        if not (job.run_dir / RESULT).is_file():
            continue
        records = read_jsonl(job.run_dir / METRICS)
        total = int(job.kwargs["config"]["total_timesteps"])
        rows.append(
            {
                "substrate": sub,
                "label": label,
                "seed": seed,
                "curve": learning_curve(records, total, bins),
            }
        )
    if not rows:
        raise ConfigError(
            f"no finished {label!r} runs in {cache_dir}; run calibrate/ablate "
            "first, or pass --train"
        )
    return rows


def _fmt(x: float) -> str:
    return f"{x:.1f}" if x == x else "-"


def markdown_tables(cal: Calibration) -> str:
    """The calibration as Markdown tables (bugs, clean baselines), for docs and issue notes."""
    lines = [
        "| bug | substrate | class | clean | broken | margin | threshold | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in cal.results:
        ran = bool(r.broken.scores)
        lines.append(
            f"| `{r.bug.id}` | {r.bug.substrate} | {r.bug.bug_class} | "
            f"{_fmt(r.clean.mean)} ± {_fmt(r.clean.std)} | "
            + (
                f"{_fmt(r.broken.mean)} ± {_fmt(r.broken.std)} | {_fmt(r.gap.margin)} | "
                f"{_fmt(r.gap.threshold)} | "
                if ran
                else "not run | - | - | "
            )
            + f"{r.verdict} |"
        )
    lines += [
        "",
        "| substrate | clean scores (seeds " + ", ".join(map(str, cal.seeds)) + ") | mean ± std |",
        "|---|---|---|",
    ]
    for name, arm in cal.clean.items():
        lines.append(
            f"| {name} | {', '.join(_fmt(x) for x in arm.scores)} | "
            f"{_fmt(arm.mean)} ± {_fmt(arm.std)} |"
        )
    return "\n".join(lines)
