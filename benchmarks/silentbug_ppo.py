"""Speed of the CartPole PPO substrates against a straightforward baseline, in one run.

The baseline is PPO written the plain CleanRL way (Gymnasium SyncVectorEnv, nn.Sequential,
torch.distributions.Categorical, torch buffers, stepping one Python env at a time). Every
implementation trains 40k CartPole-v1 steps (4 envs x 128 steps, 4 epochs, 4 minibatches) in a
fresh ``python -I`` process on one thread, timed from launch (start-up included). Runs alternate
so machine load hits all of them alike; compare the ratios, not the absolute seconds. CPU
seconds (the child's user + system time) are printed too: on a shared machine they are the
better estimate of the wall time on one idle core. ``--out`` writes the figures, with the
load average before and after, through ``verigap.results.write_result``.

Two more rows run the substrates the way calibration runs them, through
``verigap.silentbug.runner.run_workspace`` (``ppo_single_preloaded``, ``ppo_modular_preloaded``):
forked from a preloaded interpreter that imported NumPy
and Torch once per worker (its one-off start-up is recorded apart, as ``preloaded_startup_s``).
For a like-for-like figure the baseline is run that way too (``baseline_preloaded``): forked from
an interpreter that imported what it imports and ran each kind of op it uses once, so neither
side pays start-up (``speedup_cpu_vs_preloaded_baseline`` on the preloaded rows).

``--variant DIR`` also runs a changed copy of the substrates (every ``*.diff`` in DIR applied to
the pristine package), fresh and preloaded, as rows ``<entry>+<DIR name>``. It is how a change
that moves the numbers is measured before anyone decides to land it: its ratios sit beside the
pristine rows and the baseline of the same run, and its scores per seed beside theirs.
``benchmarks/variants/numpy_acting`` acts with a NumPy forward pass.

The baseline is lighter than CleanRL's own ``ppo.py`` (no TensorBoard writer, no entropy in the
rollout, no KL or clip-fraction statistics), so the ratios understate the gap to the real script.

    PYTHONPATH=src python benchmarks/silentbug_ppo.py --repeats 3 \
        --out results/silentbug/ppo_speed.json
    PYTHONPATH=src python benchmarks/silentbug_ppo.py --repeats 2 \
        --variant benchmarks/variants/numpy_acting \
        --out results/investigations/ppo_numpy_acting_speed.json
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

from verigap import numerics

BASELINE = r"""
import json, sys, time
import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

seed, out = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(seed); np.random.seed(seed); torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
n_envs, n_steps, total, epochs, n_mb = 4, 128, 40_000, 4, 4
gamma, lam, clip, ent_coef, vf_coef, max_gn, lr = 0.99, 0.95, 0.2, 0.01, 0.5, 0.5, 2.5e-4
envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n_envs)],
                                autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)

def lin(i, o, std=np.sqrt(2)):
    layer = nn.Linear(i, o); nn.init.orthogonal_(layer.weight, std); nn.init.zeros_(layer.bias)
    return layer

critic = nn.Sequential(lin(4, 64), nn.Tanh(), lin(64, 64), nn.Tanh(), lin(64, 1, 1.0))
actor = nn.Sequential(lin(4, 64), nn.Tanh(), lin(64, 64), nn.Tanh(), lin(64, 2, 0.01))
params = list(actor.parameters()) + list(critic.parameters())
opt = torch.optim.Adam(params, lr=lr, eps=1e-5)
obs_b = torch.zeros((n_steps, n_envs, 4)); act_b = torch.zeros((n_steps, n_envs))
logp_b = torch.zeros((n_steps, n_envs)); rew_b = torch.zeros((n_steps, n_envs))
done_b = torch.zeros((n_steps, n_envs)); val_b = torch.zeros((n_steps, n_envs))
obs, _ = envs.reset(seed=seed); obs = torch.tensor(obs)
ep_ret = np.zeros(n_envs); returns = []; step = 0
iters = total // (n_envs * n_steps)
for it in range(iters):
    opt.param_groups[0]["lr"] = lr * (1 - it / iters)
    for t in range(n_steps):
        step += n_envs
        obs_b[t] = obs
        with torch.no_grad():
            dist = Categorical(logits=actor(obs))
            a = dist.sample()
            logp_b[t] = dist.log_prob(a); val_b[t] = critic(obs).flatten()
        act_b[t] = a
        o, r, term, trunc, _ = envs.step(a.numpy())
        ep_ret += r
        for i in np.flatnonzero(term | trunc):
            returns.append((step, ep_ret[i])); ep_ret[i] = 0
        rew_b[t] = torch.tensor(r); done_b[t] = torch.tensor(term | trunc, dtype=torch.float32)
        obs = torch.tensor(o)
    with torch.no_grad():
        nv = critic(obs).flatten(); adv = torch.zeros_like(rew_b); last = 0
        for t in reversed(range(n_steps)):
            nxt = nv if t == n_steps - 1 else val_b[t + 1]
            delta = rew_b[t] + gamma * nxt * (1 - done_b[t]) - val_b[t]
            adv[t] = last = delta + gamma * lam * (1 - done_b[t]) * last
        ret = adv + val_b
    b = [x.reshape(-1, *x.shape[2:]) for x in (obs_b, act_b, logp_b, adv, ret, val_b)]
    idx = np.arange(n_envs * n_steps)
    for _ in range(epochs):
        np.random.shuffle(idx)
        for s in range(0, len(idx), len(idx) // n_mb):
            mb = idx[s:s + len(idx) // n_mb]
            dist = Categorical(logits=actor(b[0][mb]))
            ratio = (dist.log_prob(b[1][mb]) - b[2][mb]).exp()
            A = b[3][mb]; A = (A - A.mean()) / (A.std() + 1e-8)
            pg = torch.max(-A * ratio, -A * ratio.clamp(1 - clip, 1 + clip)).mean()
            v = critic(b[0][mb]).flatten()
            vc = b[5][mb] + (v - b[5][mb]).clamp(-clip, clip)
            vl = 0.5 * torch.max((v - b[4][mb]) ** 2, (vc - b[4][mb]) ** 2).mean()
            loss = pg - ent_coef * dist.entropy().mean() + vf_coef * vl
            opt.zero_grad(); loss.backward(); nn.utils.clip_grad_norm_(params, max_gn); opt.step()
late = [r for s, r in returns if s > 0.8 * total]
json.dump({"score": float(np.mean(late)), "steps": step}, open(out, "w"))
"""

OURS = r"""
import importlib, json, sys
sys.path.insert(0, sys.argv[3])
seed, out, _, entry = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
import pathlib
run = pathlib.Path(out).with_suffix("")
cfg = run.with_suffix(".cfg.json"); cfg.write_text(json.dumps({"seed": seed}))
importlib.import_module("substrates." + entry).main(["--config", str(cfg), "--run-dir", str(run)])
recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
late = [r["return"] for r in recs if r["kind"] == "episode" and r["global_step"] > 32000]
steps = max(r["global_step"] for r in recs)
json.dump({"score": sum(late) / len(late), "steps": steps}, open(out, "w"))
"""


# The baseline's preloaded interpreter: it imports what the baseline imports and runs each kind
# of op once (an Adam step pulls in torch.optim's compiler stack), then forks one child per job
# line "seed out" on stdin; the child runs the baseline with those arguments. The child reseeds
# every generator it uses, so what the warm-up drew does not change its numbers.
BASELINE_PRELOADER = r"""
import json, os, sys, time
import gymnasium as gym, numpy as np, torch
from torch import nn
from torch.distributions import Categorical

code = compile(open(sys.argv[1]).read(), "baseline", "exec")
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
_net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
_opt = torch.optim.Adam(_net.parameters(), lr=1e-3, eps=1e-5)
_d = Categorical(logits=_net(torch.ones(4, 4)))
(_d.log_prob(_d.sample()).exp().clamp(0.8, 1.2).mean() - _d.entropy().mean()).backward()
nn.utils.clip_grad_norm_(list(_net.parameters()), 0.5)
_opt.step()
_env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")],
                                autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
_env.reset(seed=0); _env.step(np.zeros(1, dtype=np.int64)); _env.close()
del _net, _opt, _d, _env
for line in sys.stdin:
    seed, out = line.split()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        sys.argv = ["baseline", seed, out]
        exec(code, {"__name__": "__main__"})
        os._exit(0)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                      "wall_s": time.perf_counter() - started,
                      "cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)
"""


class _PreloadedBaseline:
    """The baseline forked from a preloaded interpreter (one run at a time)."""

    def __init__(self, tmp: Path) -> None:
        script = tmp / "baseline.py"
        script.write_text(BASELINE)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", BASELINE_PRELOADER, str(script)],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_child_env(),
        )

    def run(self, seed: int, tmp: Path) -> dict:
        out = tmp / f"baseline-preloaded-{seed}-{time.monotonic_ns()}.json"
        self.proc.stdin.write(f"{seed} {out}\n")
        self.proc.stdin.flush()
        done = json.loads(self.proc.stdout.readline())
        assert done["returncode"] == 0, done
        result = json.loads(out.read_text())
        return {
            "wall_s": done["wall_s"],
            "cpu_s": done["cpu_s"],
            "sps": result["steps"] / done["wall_s"],
            "score": result["score"],
        }

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _child_env() -> dict[str, str]:
    from verigap.silentbug.runner import training_env  # the runner's threads and pinned kernels

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    env.update(training_env())
    return env


def _run(code: str, seed: int, tmp: Path, name: str, extra: list[str]) -> dict:
    out = tmp / f"{name}-{seed}-{time.monotonic_ns()}.json"
    env = _child_env()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-I", "-c", code, str(seed), str(out), *extra], check=True, env=env
    )
    wall = time.perf_counter() - started
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    result = json.loads(out.read_text())
    return {"wall_s": wall, "cpu_s": cpu, "sps": result["steps"] / wall, "score": result["score"]}


def variant_files(variant: Path) -> dict[str, str]:
    """The substrates package with every ``*.diff`` under ``variant`` applied (one file each)."""
    from verigap.silentbug.patching import apply_unified_diff, parse_unified_diff
    from verigap.silentbug.substrate import pristine_files

    files = pristine_files()
    diffs = sorted(variant.glob("*.diff"))
    if not diffs:
        raise SystemExit(f"--variant {variant}: no *.diff files there")
    for diff in diffs:
        text = diff.read_text()
        target = parse_unified_diff(text)[0]
        if target not in files:
            raise SystemExit(f"{diff}: patches {target!r}, not a file of the substrates package")
        files[target] = apply_unified_diff(files[target], text)
    return files


def _run_preloaded(
    substrate: str, seed: int, tmp: Path, files: dict[str, str] | None = None
) -> dict:
    from verigap.silentbug.runner import run_workspace
    from verigap.silentbug.substrate import SUBSTRATES, pristine_files, workspace_files

    sub = SUBSTRATES[substrate]
    res = run_workspace(
        tmp / f"{substrate}-{seed}-{time.monotonic_ns()}",
        files=workspace_files(substrate, files or pristine_files()),
        entry=sub.entry,
        config={**sub.config, "seed": seed},
    )
    assert res["status"] == "ok", res
    return {
        "wall_s": res["wall_s"],
        "cpu_s": res["cpu_s"],
        "sps": 40_000 / res["wall_s"],
        "score": res["score"],
    }


def _preloaded_startup(tmp: Path) -> float:
    """Wall seconds until the preloaded interpreter has run a job that does nothing."""
    from verigap.silentbug.runner import run_workspace

    started = time.perf_counter()
    run_workspace(
        tmp / "noop",
        files={"__init__.py": "", "noop.py": "def main(argv): pass\n"},
        entry="noop",
        config={"seed": 0, "total_timesteps": 1},
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2, help="seeds per implementation")
    parser.add_argument("--json", type=Path, help="write the measurements here (plain JSON)")
    parser.add_argument("--out", type=Path, help="write a results file (with provenance) here")
    parser.add_argument(
        "--variant",
        type=Path,
        help="also run the substrates with this directory's *.diff files applied",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    from verigap.silentbug.substrate import substrate_root, write_workspace

    root = str(substrate_root().parent)  # the directory that holds the 'substrates' package
    impls = {
        "baseline (CleanRL-style)": (BASELINE, []),
        "ppo_single": (OURS, [root, "ppo_single"]),
        "ppo_modular": (OURS, [root, "ppo_modular.train"]),
    }
    preloaded = {
        "ppo_single_preloaded": ("cartpole_single", None),
        "ppo_modular_preloaded": ("cartpole_modular", None),
    }
    tmp_dir = tempfile.TemporaryDirectory()
    tmp = tmp_dir.name
    if args.variant:
        changed = variant_files(args.variant)
        vroot = str(write_workspace(changed, Path(tmp) / "variant"))
        tag = args.variant.name
        impls |= {
            f"ppo_single+{tag}": (OURS, [vroot, "ppo_single"]),
            f"ppo_modular+{tag}": (OURS, [vroot, "ppo_modular.train"]),
        }
        preloaded |= {
            f"ppo_single+{tag}_preloaded": ("cartpole_single", changed),
            f"ppo_modular+{tag}_preloaded": ("cartpole_modular", changed),
        }
    rows: dict[str, list[dict]] = {k: [] for k in [*impls, "baseline_preloaded", *preloaded]}
    with tmp_dir:
        startup = _preloaded_startup(Path(tmp))
        baseline_preloaded = _PreloadedBaseline(Path(tmp))
        for seed in range(1, args.repeats + 1):
            for name, (code, extra) in impls.items():
                rows[name].append(_run(code, seed, Path(tmp), name.split()[0], extra))
                print(f"seed {seed} {name:26s} {rows[name][-1]}", flush=True)
            rows["baseline_preloaded"].append(baseline_preloaded.run(seed, Path(tmp)))
            print(
                f"seed {seed} {'baseline_preloaded':26s} {rows['baseline_preloaded'][-1]}",
                flush=True,
            )
            for name, (substrate, files) in preloaded.items():
                rows[name].append(_run_preloaded(substrate, seed, Path(tmp), files))
                print(f"seed {seed} {name:26s} {rows[name][-1]}", flush=True)
        baseline_preloaded.close()
    base = statistics.mean(r["wall_s"] for r in rows["baseline (CleanRL-style)"])
    base_cpu = statistics.mean(r["cpu_s"] for r in rows["baseline (CleanRL-style)"])
    summary = {}
    print(f"\npreloaded interpreter start-up (once per worker): {startup:.2f} s wall")
    print(
        f"\n{'implementation':32s} {'wall s':>7s} {'cpu s':>7s} {'SPS':>7s} "
        f"{'wall x':>7s} {'cpu x':>7s} {'score':>7s}"
    )
    for name, rs in rows.items():
        wall = statistics.mean(r["wall_s"] for r in rs)
        cpu = statistics.mean(r["cpu_s"] for r in rs)
        summary[name] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "sps": statistics.mean(r["sps"] for r in rs),
            "speedup_wall": base / wall,
            "speedup_cpu": base_cpu / cpu,
            "score": statistics.mean(r["score"] for r in rs),
            "runs": rs,
        }
    pre_wall = summary["baseline_preloaded"]["wall_s"]
    pre_cpu = summary["baseline_preloaded"]["cpu_s"]
    for name in ["baseline_preloaded", *preloaded]:
        summary[name]["speedup_wall_vs_preloaded_baseline"] = pre_wall / summary[name]["wall_s"]
        summary[name]["speedup_cpu_vs_preloaded_baseline"] = pre_cpu / summary[name]["cpu_s"]
    for name, row in summary.items():  # a variant's scores per seed against the pristine row's
        if "+" in name:
            pristine = name.split("+")[0] + ("_preloaded" if name.endswith("_preloaded") else "")
            row["same_scores_as_pristine"] = [r["score"] for r in row["runs"]] == [
                r["score"] for r in summary[pristine]["runs"]
            ]
    for name, row in summary.items():
        wall, cpu = row["wall_s"], row["cpu_s"]
        like = (
            f"  (like for like, both preloaded: "
            f"{row['speedup_cpu_vs_preloaded_baseline']:.2f}x cpu)"
            if "speedup_cpu_vs_preloaded_baseline" in row
            else ""
        )
        print(
            f"{name:32s} {wall:7.2f} {cpu:7.2f} {row['sps']:7.0f} "
            f"{base / wall:6.2f}x {base_cpu / cpu:6.2f}x {row['score']:7.1f}{like}"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    if args.out:
        from verigap.results import write_result

        write_result(
            args.out,
            {
                "implementations": summary,
                "repeats": args.repeats,
                "baseline": "baseline (CleanRL-style)",
                "baseline_cpu_s": base_cpu,
                "baseline_wall_s": base,
                "baseline_score": summary["baseline (CleanRL-style)"]["score"],
                "preloaded_startup_s": startup,
                "variant": str(args.variant) if args.variant else None,
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
            },
            command=f"PYTHONPATH=src python benchmarks/silentbug_ppo.py "
            f"--repeats {args.repeats}"
            + (f" --variant {args.variant}" if args.variant else "")
            + f" --out {args.out}",
        )


if __name__ == "__main__":
    numerics.reexec_if_needed()  # a library loaded before the pin: start again, pinned
    main()
