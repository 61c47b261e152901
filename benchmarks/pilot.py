"""GRPO speed on Patch World: steps per second and how they grow with batch, group size and k,
measured in one run against the default configuration; `--sweep` also times the whole 42-run
pilot sweep on this machine (into a temporary directory).

`--compare REF` times the sweep's groups of runs (``pilot.group_jobs``) against the same runs
with the code at git REF (extracted into a temporary directory), alternating old and new group
by group, each in its own process with its own SFT cache: the old code trains the runs one after
another with ``train`` in one process (as a pool worker of the old sweep did), the new one with
``train_group``. Every run's result, metrics and policy must be identical apart from its wall
time. The CPU seconds (user + system of the child) are the figure to compare on a shared
machine; the ratio and the load average go to ``results/patchworld/pilot_speed.json``.

`--adam float32` also measures route B, a change of numerics that keeps every
hyperparameter: a third arm, the new code with an Adam that does its whole update in float32
(``FLOAT32_ADAM`` below, as deep-learning frameworks keep a float32 model's Adam) instead of
dividing in float64, timed in the same alternation. Its results differ from the old code's;
each run's final held-out numbers per arm, and per setting the old code's beside that arm's
(``per_setting``: means over seeds), go into the results file.

Run: `python benchmarks/pilot.py [--steps 200] [--sweep]` or
`python benchmarks/pilot.py --compare 53c16d4 [--groups 9] [--adam float32]` (9: the sweep).
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

import numpy as np
from threadpoolctl import threadpool_limits

from verigap import numerics
from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer
from verigap.patchworld.pilot import group_jobs, jobs, run_pilot
from verigap.patchworld.sft import SFTConfig, sft
from verigap.runs import Job


def steps_per_second(steps: int, **overrides) -> float:
    c = GRPOConfig(steps=steps, **overrides)
    start, _ = sft(c.k, 0, SFTConfig(programs=500, epochs=1))
    trainer = GRPOTrainer(c, start)
    t0 = time.perf_counter()
    for i in range(steps):
        trainer.step(i)
    return steps / (time.perf_counter() - t0)


BEFORE = "53c16d4"  # main before the issue-19 speed work

# The float32 Adam of ``--adam float32`` (route B, not in the package): the same update as
# ``policy.Adam`` with ``step`` and ``eps`` rounded to the parameters' dtype, so no operation
# widens to float64.
FLOAT32_ADAM = r"""
import numpy as np
from verigap.patchworld import group, grpo, policy, sft

class Float32Adam(policy.Adam):
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr, betas, eps)
        self._den = [np.empty_like(p) for p in params]

    def step(self, grads):
        self.t += 1
        b1, b2 = self.betas
        step = self.lr * np.sqrt(1 - b2**self.t) / (1 - b1**self.t)
        eps = self.eps * np.sqrt(1 - b2**self.t)
        for p, g, m, v, (tmp, _, _), den in zip(self.params, grads, self.m, self.v, self._buf,
                                                self._den, strict=True):
            g = g.astype(p.dtype, copy=False)
            m *= b1
            m += np.multiply(g, 1 - b1, out=tmp)
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v += tmp
            np.sqrt(v, out=den)
            den += p.dtype.type(eps)
            np.multiply(m, p.dtype.type(step), out=tmp)
            tmp /= den
            p -= tmp

for module in (policy, sft, group, grpo):
    module.Adam = Float32Adam
"""

CHILD = r"""
import hashlib, json, sys
from pathlib import Path
mode, cfgs, dirs = sys.argv[1], json.loads(sys.argv[2]), [Path(d) for d in json.loads(sys.argv[3])]
sft_cache = Path(sys.argv[4])
if len(sys.argv) > 5:
    exec(sys.argv[5])  # FLOAT32_ADAM, before anything builds an optimiser
from verigap.patchworld.grpo import train
if mode == "each":
    results = [train(d, c, sft_cache=sft_cache) for d, c in zip(dirs, cfgs)]
else:
    from verigap.patchworld.group import train_group
    results = [train_group(dirs[0], cfgs, sft_cache=sft_cache, other_dirs=dirs[1:])]
    (dirs[0] / "result.json").write_text(json.dumps(results[0]))  # as the executor does
    results += [json.loads((d / "result.json").read_text()) for d in dirs[1:]]
out = []
for d, r in zip(dirs, results):
    r.pop("wall_s")
    r["metrics_sha256"] = hashlib.sha256((d / "metrics.jsonl").read_bytes()).hexdigest()
    out.append(json.loads(json.dumps(r)))
print("RESULTS " + json.dumps(out, sort_keys=True))
"""


def _source_at(ref: str, dest: Path) -> Path:
    """The ``src`` tree of git ``ref``, extracted under ``dest``; returns its path."""
    root = Path(__file__).resolve().parent.parent
    tar = subprocess.run(
        ["git", "-C", str(root), "archive", ref, "src"], check=True, capture_output=True
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest / "src"


def _policies(dirs: list[Path]) -> list[list[bytes]]:
    out = []
    for d in dirs:
        with np.load(d / "policy.npz") as z:
            out.append([z[f].tobytes() for f in z.files])
    return out


def _timed_group(
    src: Path,
    mode: str,
    cfgs: list[dict],
    dirs: list[Path],
    sft_cache: Path,
    patch: str | None = None,
) -> tuple[float, list[dict], list[list[bytes]]]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    env.update(
        PYTHONPATH=str(src), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            mode,
            json.dumps(cfgs),
            json.dumps([str(d) for d in dirs]),
            str(sft_cache),
            *([patch] if patch else []),
        ],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULTS "))
    return cpu, json.loads(line[len("RESULTS ") :]), _policies(dirs)


def sweep_groups() -> list[Job]:
    """The sweep's group jobs, big and small groups alternating, so a few are varied; the small
    ones (a k-spread setting's three seeds) from the largest k down, the costliest first and the
    one grouping helps least (three seeds share nothing but the NumPy calls)."""
    groups = group_jobs(jobs(Path("unused")))
    big = [g for g in groups if len(g.kwargs["configs"]) > 3]
    small = sorted(
        (g for g in groups if len(g.kwargs["configs"]) <= 3),
        key=lambda g: -g.kwargs["configs"][0]["k"],
    )
    out = []
    for i in range(max(len(big), len(small))):
        out += big[i : i + 1] + small[i : i + 1]
    return out


FINAL = ("visible_pass", "true_success", "false_success")


def per_setting(rows: list[dict], arm_new: str = "new") -> dict[str, dict]:
    """Each setting's final held-out numbers, the old code's and arm ``arm_new``'s (as
    ``new_...``), as means over its seeds."""
    runs: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        for arm, source in (("old", "old"), ("new", arm_new)):
            for run, final in row[f"final_{source}"].items():
                setting = run.rsplit("/", 1)[0]
                runs.setdefault(setting, {"old": [], "new": []})[arm].append(final)
    return {
        setting: {
            f"{arm}_{m}": statistics.fmean(f[m] for f in arms[arm])
            for arm in ("old", "new")
            for m in FINAL
        }
        | {"seeds": len(arms["new"])}
        for setting, arms in runs.items()
    }


def compare(
    ref: str, n_groups: int, out: Path | None, adam: str = "package", keep: Path | None = None
) -> dict:
    """CPU time of the first ``n_groups`` sweep groups, old (``ref``, run by run) against new
    (``train_group``), alternating. ``adam="float32"`` adds a third arm, the new code with
    ``FLOAT32_ADAM`` (route B), timed in the same alternation; the per-setting numbers then set
    the old code's beside that arm's. ``keep``: the last arm's runs go there (laid out as
    `verigap pilot` lays them out)."""
    load_before = os.getloadavg()
    new_src = Path(__file__).resolve().parent.parent / "src"
    arms = [("old", "each", None), ("new", "group", None)]
    if adam == "float32":
        arms.append(("float32", "group", FLOAT32_ADAM))
    last = arms[-1][0]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        old_src = _source_at(ref, tmp / "old")
        for job in sweep_groups()[:n_groups]:
            cfgs = job.kwargs["configs"]
            names = [
                str(Path(p).relative_to("unused")) for p in [job.run_dir, *job.kwargs["other_dirs"]]
            ]
            row: dict = {"group": job.name, "runs": names, "loadavg": list(os.getloadavg())}
            seen = {}
            for name, mode, patch in arms:
                dirs = [(keep if keep and name == last else tmp / name) / n for n in names]
                cpu, results, policies = _timed_group(
                    old_src if name == "old" else new_src,
                    mode,
                    cfgs,
                    dirs,
                    tmp / name / "_sft",
                    patch,
                )
                row[f"{name}_cpu_s"] = cpu
                seen[name] = (results, policies)
                row[f"final_{name}"] = {
                    n: {k: r["final"][k] for k in FINAL}
                    for n, r in zip(names, results, strict=True)
                }
            row["identical"] = seen["old"] == seen["new"]
            if adam == "float32":
                row["float32_identical_to_old"] = seen["old"] == seen["float32"]
            print(
                f"{job.name:28s} {len(names)} runs  "
                + "  ".join(f"{name} {row[f'{name}_cpu_s']:6.1f}" for name, _, _ in arms)
                + f" CPU-s  identical={row['identical']}",
                flush=True,
            )
            rows.append(row)
    cpu = {name: sum(r[f"{name}_cpu_s"] for r in rows) for name, _, _ in arms}
    summary = {
        "before_ref": ref,
        "adam": adam,
        "groups": len(rows),
        "runs": sum(len(r["runs"]) for r in rows),
        "old_cpu_s": cpu["old"],
        "new_cpu_s": cpu["new"],
        "cpu_ratio_old_over_new": cpu["old"] / cpu["new"],
        "median_group_ratio": statistics.median(r["old_cpu_s"] / r["new_cpu_s"] for r in rows),
        "all_identical": all(r["identical"] for r in rows),
        "identical_means": "every run's result.json (apart from wall_s), metrics.jsonl and "
        "policy.npz arrays byte for byte",
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
    }
    if adam == "float32":
        summary |= {
            "float32_cpu_s": cpu["float32"],
            "cpu_ratio_old_over_float32": cpu["old"] / cpu["float32"],
            "cpu_ratio_new_over_float32": cpu["new"] / cpu["float32"],
            "median_group_ratio_float32": statistics.median(
                r["old_cpu_s"] / r["float32_cpu_s"] for r in rows
            ),
            "float32_any_identical_to_old": any(r["float32_identical_to_old"] for r in rows),
        }
    summary |= {"per_setting": per_setting(rows, last), "per_group": rows}
    print(
        f"\n{summary['runs']} runs in {len(rows)} groups: "
        + ", ".join(f"{name} {cpu[name]:.1f}" for name, _, _ in arms)
        + f" CPU-s; old / new "
        f"{cpu['old'] / cpu['new']:.2f}x"
        + (f", old / float32 {cpu['old'] / cpu['float32']:.2f}x" if adam == "float32" else "")
        + f"; new identical to old: {summary['all_identical']}"
    )
    if out is not None:
        from verigap.results import write_result

        flag = f" --adam {adam}" if adam != "package" else ""
        write_result(
            out,
            summary,
            command=f"PYTHONPATH=src python benchmarks/pilot.py "
            f"--compare {ref} --groups {n_groups}{flag} --out {out}",
        )
    return summary


def profile(ks: list[int], out: Path | None) -> dict:
    """Where one sweep group's CPU goes, per k in ``ks`` (its group from ``sweep_groups``, all
    steps): process CPU seconds by phase (SFT, GRPO steps, evaluation, program generation and
    the rest) and, inside them, by the calls that dominate (forward and backward passes, Adam's
    step, observation building). Each phase and call is timed once, at its outermost entry."""
    import collections

    from verigap.patchworld import group, grpo, policy, sft

    spent: collections.Counter = collections.Counter()
    active: set[str] = set()

    def timed(owner, attr: str, label: str) -> None:
        fn = getattr(owner, attr)

        def wrapper(*a, **kw):
            if label in active:
                return fn(*a, **kw)
            active.add(label)
            t0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent[label] += time.process_time() - t0
                active.discard(label)

        setattr(owner, attr, wrapper)

    for owner, attr, label in (
        (group, "sft_cached", "phase: SFT"),
        (group.GroupTrainer, "step", "phase: GRPO steps"),
        (group, "evaluate", "phase: evaluation"),
        (grpo, "generate", "phase: training programs"),
        (group, "generate", "phase: monitor programs"),
        (group, "heldout_set", "phase: held-out programs"),
        (policy.Adam, "step", "call: Adam step (SFT and GRPO)"),
        (policy.MLP, "forward", "call: MLP forward (SFT and evaluation)"),
        (policy.MLP, "backward", "call: MLP backward (SFT)"),
        (group, "_forward", "call: stacked forward (GRPO, policy and reference)"),
        (sft, "all_features", "call: SFT observations"),
        (group.GroupTrainer, "observations", "call: GRPO observations"),
    ):
        timed(owner, attr, label)
    rows = []
    by_k = {g.kwargs["configs"][0]["k"]: g for g in sweep_groups()}
    with tempfile.TemporaryDirectory() as d:
        for k in ks:
            job = by_k[k]
            spent.clear()
            cfgs = job.kwargs["configs"]
            dirs = [Path(d) / str(k) / str(j) for j in range(len(cfgs))]
            t0 = time.process_time()
            group.train_group(dirs[0], cfgs, sft_cache=Path(d) / "_sft", other_dirs=dirs[1:])
            total = time.process_time() - t0
            phases = sum(v for key, v in spent.items() if key.startswith("phase"))
            row = {
                "k": k,
                "group": job.name,
                "runs": len(cfgs),
                "cpu_s": total,
                "cpu_s_by": dict(spent) | {"phase: other": total - phases},
            }
            print(f"k={k} {job.name}: {total:.1f} CPU-s")
            for key, v in sorted(row["cpu_s_by"].items(), key=lambda kv: -kv[1]):
                print(f"  {key:52s} {v:6.2f}  {v / total:6.1%}")
            rows.append(row)
    summary = {
        "groups": rows,
        "loadavg_after": list(os.getloadavg()),
        "note": "process CPU of one process (threads limited to 1); calls are timed "
        "inside their phases, so the call rows overlap the phase rows",
    }
    if out is not None:
        from verigap.results import write_result

        write_result(
            out,
            summary,
            command="PYTHONPATH=src python benchmarks/pilot.py "
            f"--profile {' '.join(map(str, ks))} --out {out}",
        )
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sweep", action="store_true", help="also time the full 42-run sweep")
    ap.add_argument(
        "--compare",
        metavar="REF",
        nargs="?",
        const=BEFORE,
        help=f"time pilot runs against git REF (default {BEFORE}) instead",
    )
    ap.add_argument(
        "--groups",
        type=int,
        default=2,
        help="with --compare: how many of the sweep's 9 groups of runs",
    )
    ap.add_argument("--out", type=Path, help="with --compare or --profile: the results file")
    ap.add_argument(
        "--profile",
        type=int,
        nargs="+",
        metavar="K",
        help="time the phases of the sweep's group at each k instead",
    )
    ap.add_argument(
        "--keep", type=Path, help="with --compare: keep the new arm's runs in this directory"
    )
    ap.add_argument(
        "--adam",
        choices=("package", "float32"),
        default="package",
        help="with --compare: the new arm's Adam (float32: route B, numbers change)",
    )
    args = ap.parse_args()
    if args.profile:
        profile(args.profile, args.out)
        return
    if args.compare:
        compare(args.compare, args.groups, args.out, args.adam, args.keep)
        return
    with threadpool_limits(1):
        base = steps_per_second(args.steps)
        print(f"default (32 programs x 8 rollouts, k=4): {base:8.1f} GRPO steps/s (1 core)")
        for name, grid in (("programs", (16, 64, 128)), ("group", (4, 16, 32)), ("k", (1, 8, 10))):
            for v in grid:
                sps = steps_per_second(args.steps, **{name: v})
                print(
                    f"  {name:>8} = {v:<4d} {sps:8.1f} steps/s   ratio to default "
                    f"{sps / base:5.2f}x"
                )
    if args.sweep:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            run_pilot(Path(d), progress=True)
            wall = time.perf_counter() - t0
        print(f"full pilot sweep (42 runs x 1000 steps, {os.cpu_count()} cores): {wall:.0f} s")


if __name__ == "__main__":
    numerics.reexec_if_needed()  # a library loaded before the pin: start again, pinned
    main()
