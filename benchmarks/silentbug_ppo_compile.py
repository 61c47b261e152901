"""Would ``torch.compile`` take the PPO update off eager Torch's per-op cost?

The substrates' update is dozens of small Torch ops per minibatch of 128 rows; eager dispatch, not
arithmetic, is most of its time. This measures the one in-Torch way out: ``ppo_single``'s
minibatch loss (actor and critic forward, clipped surrogate, clipped value loss, entropy)
compiled with ``torch.compile`` (its backward compiled with it; gradient clipping and the Adam
step as in a run), against the same function eager.

Each arm is one fresh ``python -I`` process on one thread that takes exactly the 1,248 update
steps of a 40k-step run, as a scoring run would: eager; compiled with an empty Inductor cache;
compiled with the cache an earlier compile left (the best case for a run that starts fresh).
Compilation runs in the process (``TORCHINDUCTOR_COMPILE_THREADS=1``), so the process's CPU is
all of it. Arms alternate for ``--rounds`` rounds. Per arm: the whole process's CPU seconds
(measured from outside: imports, compilation, helper processes and exit included), and from
inside the ``torch.compile`` call's CPU (it imports the compiler stack), the first call's
(compilation, or loading it from the cache) and the CPU per minibatch after it.
``net_cpu_s_vs_eager``: eager's whole-process CPU minus the arm's (positive: compiling saved
CPU over one run's update), median over rounds.

    PYTHONPATH=src python benchmarks/silentbug_ppo_compile.py --rounds 3 \
        --out results/investigations/ppo_compiled_update.json
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
from pathlib import Path

from verigap import numerics

ARM = r"""
import json, sys, time
t0 = time.process_time()
import numpy as np, torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
from substrates import ppo_single as p
imported = time.process_time() - t0
compiled, n = sys.argv[2] == "compiled", int(sys.argv[3])
torch.manual_seed(1)
agent = p.Agent(4, 2, 64)
opt = p.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
rng = np.random.default_rng(1)
obs = torch.from_numpy(rng.normal(size=(128, 4)).astype(np.float32))
act = torch.from_numpy(rng.integers(0, 2, 128))
old_logp = torch.from_numpy(np.log(rng.uniform(0.3, 0.7, 128)).astype(np.float32))
adv = torch.from_numpy(rng.normal(size=128).astype(np.float32))
ret = torch.from_numpy(rng.normal(size=128).astype(np.float32))
old_v = torch.from_numpy(rng.normal(size=128).astype(np.float32))

def loss_fn(obs, act, old_logp, adv, ret, old_v):
    newlogprob, entropy = agent.get_logprob_entropy(obs, act)
    newvalue = agent.get_value(obs)
    ratio = (newlogprob - old_logp).exp()
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-a * ratio, -a * torch.clamp(ratio, 0.8, 1.2)).mean()
    v_clipped = old_v + torch.clamp(newvalue - old_v, -0.2, 0.2)
    v = 0.5 * torch.max((newvalue - ret) ** 2, (v_clipped - ret) ** 2).mean()
    return pg - 0.01 * entropy.mean() + 0.5 * v

t_setup = time.process_time()
fn = torch.compile(loss_fn) if compiled else loss_fn  # compiling imports torch._dynamo here
setup = time.process_time() - t_setup
args = (obs, act, old_logp, adv, ret, old_v)

def step():
    opt.zero_grad()
    fn(*args).backward()
    torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
    opt.step()

t1 = time.process_time(); step(); first = time.process_time() - t1
t2 = time.process_time()
for _ in range(n):
    step()
per = (time.process_time() - t2) / n
print(json.dumps({"import_cpu_s": imported, "setup_cpu_s": setup, "first_call_cpu_s": first,
                  "per_minibatch_cpu_ms": 1e3 * per}))
"""

MINIBATCHES_PER_RUN = 40_000 // 512 * 16  # iterations x (4 epochs x 4 minibatches)
ARMS = ("eager", "compiled_cold_cache", "compiled_warm_cache")


def _arm(root: str, kind: str, cache: Path) -> dict:
    """One arm in a fresh process: its in-process figures and its whole CPU from outside."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    env.update(
        numerics.env(),
        OMP_NUM_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(cache),
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            ARM,
            root,
            "eager" if kind == "eager" else "compiled",
            str(MINIBATCHES_PER_RUN - 1),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process_cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three arms")
    parser.add_argument("--out", type=Path, help="write a results file (with provenance) here")
    args = parser.parse_args()
    from verigap.silentbug.substrate import substrate_root

    root = str(substrate_root().parent)
    load_before = os.getloadavg()
    runs: dict[str, list[dict]] = {a: [] for a in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm"
        _arm(root, "compiled_warm_cache", warm)  # fills the cache the warm arm reads
        for r in range(args.rounds):
            for arm in ARMS:
                cache = warm if arm == "compiled_warm_cache" else Path(tmp) / f"cold{r}-{arm}"
                runs[arm].append(_arm(root, arm, cache))
                print(f"round {r + 1} {arm:20s} {runs[arm][-1]}", flush=True)
    arms = {}
    for arm, rs in runs.items():
        arms[arm] = {
            key: statistics.median(x[key] for x in rs)
            for key in (
                "process_cpu_s",
                "import_cpu_s",
                "setup_cpu_s",
                "first_call_cpu_s",
                "per_minibatch_cpu_ms",
            )
        }
        arms[arm]["net_cpu_s_vs_eager"] = statistics.median(
            e["process_cpu_s"] - x["process_cpu_s"] for e, x in zip(runs["eager"], rs, strict=True)
        )
        arms[arm]["runs"] = rs
    eager_update = arms["eager"]["per_minibatch_cpu_ms"] * MINIBATCHES_PER_RUN / 1e3
    print(
        f"\neager update of a 40k-step run: {eager_update:.2f} CPU-s "
        f"({MINIBATCHES_PER_RUN} minibatches); medians over {args.rounds} rounds:"
    )
    for name, a in arms.items():
        print(
            f"{name:20s} process {a['process_cpu_s']:6.2f} CPU-s  torch.compile "
            f"{a['setup_cpu_s']:5.2f} s  first call "
            f"{a['first_call_cpu_s']:6.2f} s  per minibatch {a['per_minibatch_cpu_ms']:6.3f} ms"
            f"  saved vs eager per run {a['net_cpu_s_vs_eager']:+6.2f} CPU-s",
            flush=True,
        )
    if args.out:
        from verigap.results import write_result

        write_result(
            args.out,
            {
                "arms": arms,
                "rounds": args.rounds,
                "minibatches_per_run": MINIBATCHES_PER_RUN,
                "eager_update_cpu_s_per_run": eager_update,
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
            },
            command=f"PYTHONPATH=src python benchmarks/silentbug_ppo_compile.py "
            f"--rounds {args.rounds} --out {args.out}",
        )


if __name__ == "__main__":
    numerics.reexec_if_needed()  # a library loaded before the pin: start again, pinned
    main()
