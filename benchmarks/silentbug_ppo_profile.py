"""Where a ``ppo_single`` CartPole run spends its CPU, section by section, per env step and per
minibatch (what is left between the substrate and 3x the CleanRL-style baseline).

A copy of ``ppo_single.py`` gets a timer call before chosen statements of ``train`` (matched by
their text, so the copy follows the file); each section's thread CPU time is summed over a whole
run, after NumPy and Torch are imported (as in the runner's preloaded interpreter). The timer
calls cost about a microsecond each, so the sections add up to slightly more than a plain run.

Optional ``--compare-commit C``: ``ppo_single.py`` as it was at commit C (a before/after of a
speed change, in one process). Optional ``--numpy-forward``: the rollout's two forward passes
done in NumPy on views of the Torch weights (a different floating-point path: the bank would
need a recalibration), to measure what that change buys. The variants run alternately,
``--rounds`` times each; the tables show the median of each section.

    PYTHONPATH=src python benchmarks/silentbug_ppo_profile.py --rounds 2 --numpy-forward \
        --out results/silentbug/ppo_profile.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (text a statement of train() starts with, the section it opens); rollout sections count per
# env step (num_envs envs at once), update sections per minibatch.
SECTIONS = [
    ("obs[step] = next_obs", "rollout: store obs"),
    (
        (
            "with torch.inference_mode():\n                x = torch.from_numpy",
            "logits = np_forward(",
        ),
        "rollout: actor forward",
    ),
    (
        ("values[step] = agent.get_value(x)", "values[step] = np_forward("),
        "rollout: critic forward",
    ),
    ("action, logprobs[step] = sample_categorical", "rollout: sample action (NumPy)"),
    ("actions[step] = action", "rollout: store action"),
    ("out = envs.step(action)", "rollout: env step (NumPy CartPole)"),
    ("rewards[step] = out.reward", "rollout: rewards, time-limit bootstrap, dones"),
    ("for ep_return, ep_length in zip", "rollout: episode log lines"),
    ("# bootstrap value if not done", "per iteration: GAE, flatten"),
    ("np.random.shuffle(b_inds)", "update: shuffle, index"),
    ("newlogprob, entropy = agent.get_logprob_entropy", "update: actor forward, log-prob, entropy"),
    ("newvalue = agent.get_value(b_obs[mb_inds])", "update: critic forward"),
    ("logratio = newlogprob - b_logprobs", "update: ratio"),
    ("with torch.no_grad():\n                    old_approx_kl", "update: KL, clip fraction"),
    ("mb_advantages = b_advantages[mb_inds]", "update: advantage normalization"),
    ("# Policy loss", "update: policy loss"),
    ("# Value loss", "update: value loss"),
    ("entropy_loss = entropy.mean()", "update: total loss"),
    ("optimizer.zero_grad()", "update: zero_grad"),
    ("loss.backward()", "update: backward"),
    ("grad_norm = nn.utils.clip_grad_norm_", "update: clip_grad_norm_"),
    ("optimizer.step()", "update: Adam (fused kernel)"),
    ('for key, val in (("policy_loss"', "update: .item() statistics"),
    ('record = {"kind": "iteration"', "per iteration: metrics record"),
]

UNIT = {"rollout": "step", "update": "minibatch", "per iteration": "iteration"}
VARIANT_KEYS = {
    "torch forward (as committed)": "torch_forward",
    "numpy forward (prototype, other float path)": "numpy_forward",
}


def slug(label: str) -> str:
    """A results key for a section label (docs markers take no spaces)."""
    return "_".join("".join(c if c.isalnum() else " " for c in label.lower()).split())


TIMER = """
import time as _time
SECTION_CPU = {}
_LAST = [0.0, None]


def _tick(label):
    now = _time.thread_time()
    if _LAST[1] is not None:
        SECTION_CPU[_LAST[1]] = SECTION_CPU.get(_LAST[1], 0.0) + now - _LAST[0]
    _LAST[0], _LAST[1] = now, label
"""

NUMPY_FORWARD = [  # (text in ppo_single.py, replacement) for the --numpy-forward variant
    (
        "            with torch.inference_mode():\n                x = torch.from_numpy(next_obs)\n"
        "                logits = agent.actor(x).numpy()\n"
        "                values[step] = agent.get_value(x).numpy()\n",
        "            logits = np_forward(actor_w, next_obs)\n"
        "            values[step] = np_forward(critic_w, next_obs)[:, 0]\n",
    ),
    (
        "                    rewards[step, cut] += args.gamma * agent.get_value(\n"
        "                        torch.from_numpy(out.final_obs[cut])).numpy()\n",
        "                    rewards[step, cut] += args.gamma * np_forward(\n"
        "                        critic_w, out.final_obs[cut])[:, 0]\n",
    ),
    (
        "    next_obs = envs.reset()\n",
        "    next_obs = envs.reset()\n"
        "    actor_w = [p.detach().numpy() for p in agent.actor.weights]  # views: Adam works in place\n"
        "    critic_w = [p.detach().numpy() for p in agent.critic.weights]\n",
    ),
]
NP_FORWARD_FN = """

def np_forward(wb, x):
    w1, b1, w2, b2, w3, b3 = wb
    h = np.tanh(x @ w1.T + b1)
    h = np.tanh(h @ w2.T + b2)
    return h @ w3.T + b3
"""


def instrument(text: str, numpy_forward: bool) -> str:
    """``ppo_single.py``'s text with a ``_tick`` before each section's first statement."""
    if numpy_forward:
        for old, new in NUMPY_FORWARD:
            if old not in text:
                raise SystemExit(f"--numpy-forward: text not found: {old!r}")
            text = text.replace(old, new, 1)
        text += NP_FORWARD_FN
    head, sep, body = text.partition("def train(")
    for starts, label in SECTIONS:
        found = [body.find(s) for s in ((starts,) if isinstance(starts, str) else starts)]
        at = max(found)
        if at < 0:
            raise SystemExit(f"section start not found in ppo_single.train: {starts!r}")
        line_start = body.rfind("\n", 0, at) + 1
        indent = body[line_start:at]
        body = body[:line_start] + f"{indent}_tick({label!r})\n" + body[line_start:]
    body = body.replace("    log.close()\n", "    _tick(None)\n    log.close()\n", 1)
    return (
        head.replace(
            "from .envs import make_vec_env, save_policy\n",
            "from .envs import make_vec_env, save_policy\n" + TIMER,
            1,
        )
        + sep
        + body
    )


def _one_run(package_dir: Path, name: str, seed: int, steps: int, work: Path) -> dict:
    sys.path.insert(0, str(package_dir))
    try:
        for mod in [m for m in sys.modules if m == "substrates" or m.startswith("substrates.")]:
            del sys.modules[mod]
        module = importlib.import_module(f"substrates.{name}")
    finally:
        sys.path.remove(str(package_dir))
    run = work / f"{package_dir.name}-{seed}"
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"seed": seed, "total_timesteps": steps}))
    started = time.thread_time()
    module.main(["--config", str(run / "config.json"), "--run-dir", str(run)])
    total = time.thread_time() - started
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    late = [
        r["return"] for r in records if r["kind"] == "episode" and r["global_step"] > 0.8 * steps
    ]
    return {
        "cpu_s": total,
        "sections_s": dict(module.SECTION_CPU),
        "score": sum(late) / len(late) if late else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs per variant")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument(
        "--numpy-forward",
        action="store_true",
        help="also time the NumPy-forward variant (a different float path)",
    )
    parser.add_argument(
        "--compare-commit",
        metavar="COMMIT",
        help="also time ppo_single.py as it was at this git commit",
    )
    parser.add_argument("--out", type=Path, help="write a results file here")
    args = parser.parse_args()
    load_before = os.getloadavg()

    import numpy  # noqa: F401 - imported before timing, as the preloaded runner does
    import torch

    from verigap.silentbug.substrate import substrate_root

    torch.set_num_threads(1)
    source = (substrate_root() / "ppo_single.py").read_text()
    variants: dict[str, bool | str] = {"torch forward (as committed)": False}
    if args.numpy_forward:
        variants["numpy forward (prototype, other float path)"] = True
    if args.compare_commit:
        variants[f"at commit {args.compare_commit}"] = args.compare_commit
        VARIANT_KEYS[f"at commit {args.compare_commit}"] = "at_commit"
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {}
        for i, (variant, np_fwd) in enumerate(variants.items()):
            pkg = Path(tmp) / f"v{i}" / "substrates"
            shutil.copytree(substrate_root(), pkg)
            text = (
                source
                if not isinstance(np_fwd, str)
                else subprocess.run(
                    ["git", "show", f"{np_fwd}:src/verigap/silentbug/substrates/ppo_single.py"],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            (pkg / "ppo_single.py").write_text(instrument(text, np_fwd is True))
            dirs[variant] = pkg.parent
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for variant in order:
                runs[variant].append(
                    _one_run(dirs[variant], "ppo_single", args.seed, args.steps, Path(tmp) / "runs")
                )
                print(
                    f"round {r} {variant}: {runs[variant][-1]['cpu_s']:.2f} CPU-s, "
                    f"score {runs[variant][-1]['score']:.1f}",
                    flush=True,
                )

    batch = 4 * 128
    iterations = args.steps // batch
    per = {"rollout": iterations * 128, "update": iterations * 16, "per iteration": iterations}
    summary = {}
    for variant, rs in runs.items():
        table = {}
        for _, label in SECTIONS:
            sec = statistics.median(r["sections_s"].get(label, 0.0) for r in rs)
            unit = label.split(":")[0]
            table[slug(label)] = {
                "label": label,
                "cpu_s": sec,
                "per": UNIT[unit],
                "us": sec / per[unit] * 1e6,
            }
        totals = {
            unit: sum(row["cpu_s"] for row in table.values() if row["per"] == UNIT[unit])
            for unit in per
        }
        cpu = statistics.median(r["cpu_s"] for r in rs)
        summary[VARIANT_KEYS[variant]] = {
            "variant": variant,
            "cpu_s": cpu,
            "score": rs[0]["score"],
            "sections": table,
            "rollout_cpu_s": totals["rollout"],
            "update_cpu_s": totals["update"],
            "rollout_us_per_step": totals["rollout"] / per["rollout"] * 1e6,
            "update_us_per_minibatch": totals["update"] / per["update"] * 1e6,
            "runs": rs,
        }
        print(f"\n{variant}: {cpu:.2f} CPU-s for {args.steps} steps (score {rs[0]['score']:.1f})")
        for row in table.values():
            print(
                f"  {row['label']:48s} {row['cpu_s']:6.2f} s {row['us']:8.1f} us per {row['per']}"
            )
    if "at_commit" in summary:
        summary["speedup_over_commit"] = (
            summary["at_commit"]["cpu_s"] / summary["torch_forward"]["cpu_s"]
        )
        summary["same_score_as_commit"] = (
            summary["at_commit"]["score"] == summary["torch_forward"]["score"]
        )
        print(
            f"\nnow against {args.compare_commit}: {summary['speedup_over_commit']:.3f}x "
            f"(same score: {summary['same_score_as_commit']})"
        )
    if "numpy_forward" in summary:
        summary["numpy_forward_speedup"] = (
            summary["torch_forward"]["cpu_s"] / summary["numpy_forward"]["cpu_s"]
        )
        print(f"\nNumPy forward: {summary['numpy_forward_speedup']:.3f}x the CPU of torch forward")
    if args.out:
        from verigap.results import write_result

        write_result(
            args.out,
            {
                **summary,
                "seed": args.seed,
                "steps": args.steps,
                "rounds": args.rounds,
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
            },
            command="PYTHONPATH=src python benchmarks/silentbug_ppo_profile.py "
            f"--rounds {args.rounds} --seed {args.seed} --steps {args.steps}"
            f"{' --numpy-forward' if args.numpy_forward else ''}"
            f"{f' --compare-commit {args.compare_commit}' if args.compare_commit else ''}"
            f" --out {args.out}",
        )


if __name__ == "__main__":
    main()
