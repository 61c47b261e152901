"""The substrates package now against the same package at a git commit, in one process:
CPU seconds per CartPole run of ``ppo_single`` and ``ppo_modular`` and whether every logged number
is the same to the bit (speed changes must not move the calibrated numbers).

Each variant is a copy of ``src/verigap/silentbug/substrates`` (the commit's from ``git archive``,
the current one from the working tree), imported as ``substrates`` after NumPy and Torch are
imported (as in the runner's preloaded interpreter). Runs alternate, A B B A ..., ``--rounds`` of
each per entry; a run's CPU is the thread time of its ``main`` (imports excluded). ``same_metrics``
compares the whole ``metrics.jsonl`` of each seed without the wall-clock ``sps`` field.

``--bugs`` (with ``--rounds 0``, no timing) checks the bank instead: every bug's patch applied
to both packages, each broken tree trained ``--steps`` steps, every logged number compared (the
calibration scored those trees, so a speed change must keep them too).

    PYTHONPATH=src python benchmarks/silentbug_ppo_ab.py --compare-commit 4047207 --rounds 4 \
        --out results/silentbug/ppo_ab.json
    PYTHONPATH=src python benchmarks/silentbug_ppo_ab.py --compare-commit 4047207 --rounds 0 \
        --bugs --seed 3 --steps 2048 --out results/silentbug/ppo_ab_bugs.json
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ENTRIES = ("ppo_single", "ppo_modular.train")
SUBSTRATES = "src/verigap/silentbug/substrates"


def _package_at(commit: str, dest: Path) -> Path:
    """The substrates package as it was at ``commit``, unpacked under ``dest``; returns the
    directory that holds ``substrates``."""
    tar = subprocess.run(
        ["git", "archive", "--format=tar", commit, SUBSTRATES], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")
    return (dest / SUBSTRATES).parent


def _bank_check(old_parent: Path, seed: int, steps: int, work: Path) -> dict[str, bool]:
    """Bug id -> whether its broken tree logs the same numbers on both packages."""
    from verigap.silentbug.bank import broken_files, load_registry
    from verigap.silentbug.substrate import SUBSTRATES, pristine_files, write_workspace

    old = {
        p.relative_to(old_parent / "substrates").as_posix(): p.read_text()
        for p in sorted((old_parent / "substrates").rglob("*.py"))
    }
    same = {}
    for i, bug in enumerate(load_registry().bugs):
        entry = SUBSTRATES[bug.substrate].entry
        config = {**SUBSTRATES[bug.substrate].config, "seed": seed, "total_timesteps": steps}
        logged = [
            _one_run(
                write_workspace(broken_files(bug, files), work / f"bug{i}-{name}"),
                entry,
                seed,
                steps,
                work,
                config,
            )["metrics"]
            for name, files in (("old", old), ("now", pristine_files()))
        ]
        same[bug.id] = logged[0] == logged[1]
        print(f"{bug.id}: same metrics to the bit: {same[bug.id]}", flush=True)
    return same


def _one_run(
    package_parent: Path, entry: str, seed: int, steps: int, work: Path, config: dict | None = None
) -> dict:
    for mod in [m for m in sys.modules if m == "substrates" or m.startswith("substrates.")]:
        del sys.modules[mod]
    sys.path.insert(0, str(package_parent))
    try:
        module = importlib.import_module(f"substrates.{entry}")
    finally:
        sys.path.remove(str(package_parent))
    run = Path(tempfile.mkdtemp(dir=work))
    (run / "config.json").write_text(json.dumps(config or {"seed": seed, "total_timesteps": steps}))
    started = time.thread_time()
    module.main(["--config", str(run / "config.json"), "--run-dir", str(run / "out")])
    cpu = time.thread_time() - started
    records = [json.loads(x) for x in (run / "out" / "metrics.jsonl").read_text().splitlines()]
    return {"cpu_s": cpu, "metrics": [{k: v for k, v in r.items() if k != "sps"} for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--compare-commit", required=True, metavar="COMMIT")
    parser.add_argument("--rounds", type=int, default=4, help="runs per variant and entry")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument(
        "--bugs",
        action="store_true",
        help="also check every bank bug's broken tree on both packages",
    )
    parser.add_argument("--out", type=Path, help="write a results file here")
    args = parser.parse_args()
    load_before = os.getloadavg()

    import numpy  # noqa: F401 - imported before timing, as the preloaded runner does
    import torch

    from verigap.silentbug.substrate import substrate_root

    torch.set_num_threads(1)
    summary: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        parents = {
            f"at {args.compare_commit}": _package_at(args.compare_commit, Path(tmp) / "a"),
            "now": substrate_root().parent,
        }
        for entry in ENTRIES if args.rounds > 0 else ():
            cpu: dict[str, list[float]] = {v: [] for v in parents}
            metrics: dict[str, list] = {}
            for r in range(args.rounds):
                for variant in list(parents) if r % 2 == 0 else list(reversed(parents)):
                    run = _one_run(parents[variant], entry, args.seed, args.steps, Path(tmp))
                    cpu[variant].append(run["cpu_s"])
                    metrics.setdefault(variant, run["metrics"])
                    print(f"{entry} round {r} {variant}: {run['cpu_s']:.2f} CPU-s", flush=True)
            before, now = (statistics.median(cpu[v]) for v in parents)
            same = metrics[f"at {args.compare_commit}"] == metrics["now"]
            late = [
                m["return"]
                for m in metrics["now"]
                if m["kind"] == "episode" and m["global_step"] > 0.8 * args.steps
            ]
            summary[entry.split(".")[0]] = {
                "cpu_s_at_commit": before,
                "cpu_s_now": now,
                "speedup": before / now,
                "same_metrics": same,
                "score": sum(late) / len(late) if late else None,
                "runs_cpu_s": cpu,
            }
            print(
                f"{entry}: {before:.2f} -> {now:.2f} CPU-s, {before / now:.3f}x, "
                f"same metrics to the bit: {same}",
                flush=True,
            )
        bugs = (
            _bank_check(parents[f"at {args.compare_commit}"], args.seed, args.steps, Path(tmp))
            if args.bugs
            else None
        )
    if args.out:
        from verigap.results import write_result

        extra = (
            {} if bugs is None else {"bugs_same_metrics": bugs, "bugs_all_same": all(bugs.values())}
        )
        write_result(
            args.out,
            {
                "entries": summary,
                **extra,
                "compare_commit": args.compare_commit,
                "seed": args.seed,
                "steps": args.steps,
                "rounds": args.rounds,
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
            },
            command="PYTHONPATH=src python benchmarks/silentbug_ppo_ab.py "
            f"--compare-commit {args.compare_commit} --rounds {args.rounds} "
            f"--seed {args.seed} --steps {args.steps}"
            f"{' --bugs' if args.bugs else ''} --out {args.out}",
        )


if __name__ == "__main__":
    main()
