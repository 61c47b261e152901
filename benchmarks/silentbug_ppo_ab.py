"""The substrates package now against the same package at a git commit, in one process:
CPU seconds per CartPole run of ``ppo_single`` and ``ppo_modular`` and whether every logged number
is the same to the bit (issue 19: speed changes must not move the calibrated numbers).

Each variant is a copy of ``src/verigap/silentbug/substrates`` (the commit's from ``git archive``,
the current one from the working tree), imported as ``substrates`` after NumPy and Torch are
imported (as in the runner's preloaded interpreter). Runs alternate, A B B A ..., ``--rounds`` of
each per entry; a run's CPU is the thread time of its ``main`` (imports excluded). ``same_metrics``
compares the whole ``metrics.jsonl`` of each seed without the wall-clock ``sps`` field.

    PYTHONPATH=src python benchmarks/silentbug_ppo_ab.py --compare-commit 4047207 --rounds 4 \
        --out results/silentbug/ppo_ab.json
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
    tar = subprocess.run(["git", "archive", "--format=tar", commit, SUBSTRATES], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")
    return (dest / SUBSTRATES).parent


def _one_run(package_parent: Path, entry: str, seed: int, steps: int, work: Path) -> dict:
    for mod in [m for m in sys.modules if m == "substrates" or m.startswith("substrates.")]:
        del sys.modules[mod]
    sys.path.insert(0, str(package_parent))
    try:
        module = importlib.import_module(f"substrates.{entry}")
    finally:
        sys.path.remove(str(package_parent))
    run = Path(tempfile.mkdtemp(dir=work))
    (run / "config.json").write_text(json.dumps({"seed": seed, "total_timesteps": steps}))
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
    parser.add_argument("--out", type=Path, help="write a results file here")
    args = parser.parse_args()
    load_before = os.getloadavg()

    import numpy  # noqa: F401 - imported before timing, as the preloaded runner does
    import torch

    from verigap.silentbug.substrate import substrate_root

    torch.set_num_threads(1)
    summary: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        parents = {f"at {args.compare_commit}": _package_at(args.compare_commit, Path(tmp) / "a"),
                   "now": substrate_root().parent}
        for entry in ENTRIES:
            cpu: dict[str, list[float]] = {v: [] for v in parents}
            metrics: dict[str, list] = {}
            for r in range(args.rounds):
                for variant in (list(parents) if r % 2 == 0 else list(reversed(parents))):
                    run = _one_run(parents[variant], entry, args.seed, args.steps, Path(tmp))
                    cpu[variant].append(run["cpu_s"])
                    metrics.setdefault(variant, run["metrics"])
                    print(f"{entry} round {r} {variant}: {run['cpu_s']:.2f} CPU-s", flush=True)
            before, now = (statistics.median(cpu[v]) for v in parents)
            same = metrics[f"at {args.compare_commit}"] == metrics["now"]
            late = [m["return"] for m in metrics["now"]
                    if m["kind"] == "episode" and m["global_step"] > 0.8 * args.steps]
            summary[entry.split(".")[0]] = {
                "cpu_s_at_commit": before, "cpu_s_now": now, "speedup": before / now,
                "same_metrics": same, "score": sum(late) / len(late) if late else None,
                "runs_cpu_s": cpu}
            print(f"{entry}: {before:.2f} -> {now:.2f} CPU-s, {before / now:.3f}x, "
                  f"same metrics to the bit: {same}", flush=True)
    if args.out:
        from verigap.results import write_result

        write_result(args.out, {"entries": summary, "compare_commit": args.compare_commit,
                                "seed": args.seed, "steps": args.steps, "rounds": args.rounds,
                                "loadavg_before": list(load_before),
                                "loadavg_after": list(os.getloadavg())},
                     command="PYTHONPATH=src python benchmarks/silentbug_ppo_ab.py "
                             f"--compare-commit {args.compare_commit} --rounds {args.rounds} "
                             f"--seed {args.seed} --steps {args.steps} --out {args.out}")


if __name__ == "__main__":
    main()
