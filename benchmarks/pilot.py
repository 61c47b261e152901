"""GRPO speed on Patch World: steps per second and how they grow with batch, group size and k,
measured in one run against the default configuration; `--sweep` also times the whole 42-run
pilot sweep on this machine (into a temporary directory).

`--compare REF` times pilot runs of this checkout against the same runs of the code at git
REF (extracted into a temporary directory), alternating old and new run by run, each in its own
process with its own SFT cache, and checks that every result is identical apart from its wall
time. The CPU seconds (user + system of the child) are the figure to compare on a shared
machine; the ratio and the load average go to ``results/patchworld/pilot_speed.json``.

Run: `python benchmarks/pilot.py [--steps 200] [--sweep]` or
`python benchmarks/pilot.py --compare 53c16d4 [--runs 42]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer
from verigap.patchworld.pilot import jobs, run_pilot
from verigap.patchworld.sft import SFTConfig, sft


def steps_per_second(steps: int, **overrides) -> float:
    c = GRPOConfig(steps=steps, **overrides)
    start, _ = sft(c.k, 0, SFTConfig(programs=500, epochs=1))
    trainer = GRPOTrainer(c, start)
    t0 = time.perf_counter()
    for i in range(steps):
        trainer.step(i)
    return steps / (time.perf_counter() - t0)


BEFORE = "53c16d4"  # main before the issue-19 speed work

CHILD = r'''
import json, sys
from pathlib import Path
from verigap.patchworld.grpo import train
cfg, run_dir = json.loads(sys.argv[1]), Path(sys.argv[2])
result = train(run_dir, cfg, sft_cache=Path(sys.argv[3]))
result.pop("wall_s")
(run_dir / "result.json").write_text(json.dumps(result, sort_keys=True))
'''


def _source_at(ref: str, dest: Path) -> Path:
    """The ``src`` tree of git ``ref``, extracted under ``dest``; returns its path."""
    root = Path(__file__).resolve().parent.parent
    tar = subprocess.run(["git", "-C", str(root), "archive", ref, "src"], check=True,
                         capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest / "src"


def _timed_run(src: Path, cfg: dict, run_dir: Path, sft_cache: Path) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    env.update(PYTHONPATH=str(src), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg), str(run_dir), str(sft_cache)],
                   check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, json.loads((run_dir / "result.json").read_text())


def compare(ref: str, n_runs: int, out: Path | None) -> dict:
    """CPU time of the first ``n_runs`` pilot jobs, old (``ref``) against new, alternating."""
    load_before = os.getloadavg()
    new_src = Path(__file__).resolve().parent.parent / "src"
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        old_src = _source_at(ref, tmp / "old")
        todo = jobs(tmp / "unused")
        # spread the subset over settings first, seeds second, so a small subset is varied
        todo = sorted(todo, key=lambda j: j.name.rsplit("seed", 1)[1])[:n_runs]
        for job in todo:
            row = {"job": job.name}
            for name, src in (("old", old_src), ("new", new_src)):
                cpu, result = _timed_run(src, job.config, tmp / name / job.name,
                                         tmp / name / "_sft")
                row[f"{name}_cpu_s"], row[f"{name}_result"] = cpu, result
            row["identical"] = row["old_result"] == row["new_result"]
            row["final"] = {k: row["new_result"]["final"][k]
                            for k in ("visible_pass", "true_success", "false_success")}
            print(f"{job.name:32s} old {row['old_cpu_s']:6.1f} CPU-s  new "
                  f"{row['new_cpu_s']:6.1f} CPU-s  identical={row['identical']}", flush=True)
            rows.append(row)
    old = sum(r["old_cpu_s"] for r in rows)
    new = sum(r["new_cpu_s"] for r in rows)
    summary = {
        "before_ref": ref, "runs": len(rows), "old_cpu_s": old, "new_cpu_s": new,
        "cpu_ratio_old_over_new": old / new,
        "median_run_ratio": statistics.median(r["old_cpu_s"] / r["new_cpu_s"] for r in rows),
        "all_identical": all(r["identical"] for r in rows),
        "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
        "per_run": [{k: v for k, v in r.items() if not k.endswith("_result")} for r in rows],
    }
    print(f"\n{len(rows)} runs: old {old:.1f} CPU-s, new {new:.1f} CPU-s, ratio "
          f"{old / new:.2f}x, results identical: {summary['all_identical']}")
    if out is not None:
        from verigap.results import write_result

        write_result(out, summary, command=f"PYTHONPATH=src python benchmarks/pilot.py "
                     f"--compare {ref} --runs {n_runs} --out {out}")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sweep", action="store_true", help="also time the full 42-run sweep")
    ap.add_argument("--compare", metavar="REF", nargs="?", const=BEFORE,
                    help=f"time pilot runs against git REF (default {BEFORE}) instead")
    ap.add_argument("--runs", type=int, default=6, help="with --compare: how many of the 42")
    ap.add_argument("--out", type=Path, help="with --compare: write the results file here")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.runs, args.out)
        return
    with threadpool_limits(1):
        base = steps_per_second(args.steps)
        print(f"default (32 programs x 8 rollouts, k=4): {base:8.1f} GRPO steps/s (1 core)")
        for name, grid in (("programs", (16, 64, 128)), ("group", (4, 16, 32)),
                           ("k", (1, 8, 10))):
            for v in grid:
                sps = steps_per_second(args.steps, **{name: v})
                print(f"  {name:>8} = {v:<4d} {sps:8.1f} steps/s   ratio to default "
                      f"{sps / base:5.2f}x")
    if args.sweep:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_pilot(Path(d), progress=True)
            wall = time.perf_counter() - t0
        print(f"full pilot sweep (42 runs x 1000 steps, {os.cpu_count()} cores): {wall:.0f} s")


if __name__ == "__main__":
    main()
