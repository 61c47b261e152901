"""CPU time per GRPO step: the transformer policy against the NumPy MLP, interleaved in one run.

Both trainers run the pilot's step (32 programs x 8 rollouts, k=4, KL to the start policy) from
an untrained start (the step's cost does not depend on the weights), one thread each. The two are
timed in alternating blocks (MLP, transformer, MLP, ...) so load on a shared machine hits both
alike; the ratio is of the per-step medians of CPU time (wall time is recorded beside it, with
the load average). Writes results/patchworld/transformer_speed.json.

Run: `python benchmarks/patchworld_transformer.py [--rounds 6 --block 10]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_limits

from verigap import numerics
from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer
from verigap.patchworld.policy import MLP
from verigap.patchworld.transformer_policy import TransformerPolicy, TransformerTrainer
from verigap.results import write_result

OUT = "results/patchworld/transformer_speed.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=6, help="MLP/transformer block pairs")
    ap.add_argument("--block", type=int, default=10, help="GRPO steps per block")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    steps = args.rounds * args.block
    mlp_cfg = GRPOConfig(steps=steps)
    tf_cfg = GRPOConfig(steps=steps, policy={"kind": "transformer"})
    load0 = os.getloadavg()
    with threadpool_limits(1):
        trainers = {
            "mlp": GRPOTrainer(mlp_cfg, MLP.init(np.random.default_rng(0))),
            "transformer": TransformerTrainer(tf_cfg, TransformerPolicy(tf_cfg.policy, 0)),
        }
        cpu: dict[str, list[float]] = {name: [] for name in trainers}
        wall: dict[str, list[float]] = {name: [] for name in trainers}
        for r in range(args.rounds):
            for name, trainer in trainers.items():
                for j in range(args.block):
                    c0, w0 = time.process_time(), time.perf_counter()
                    trainer.step(r * args.block + j)
                    cpu[name].append(time.process_time() - c0)
                    wall[name].append(time.perf_counter() - w0)
    med = {n: statistics.median(v) for n, v in cpu.items()}
    med_wall = {n: statistics.median(v) for n, v in wall.items()}
    data = {
        "step": {"programs": mlp_cfg.programs, "group": mlp_cfg.group, "k": mlp_cfg.k},
        "policy": tf_cfg.policy.model_dump(),
        "rounds": args.rounds,
        "block": args.block,
        "cpu_ms_per_step_median": {n: 1e3 * v for n, v in med.items()},
        "wall_ms_per_step_median": {n: 1e3 * v for n, v in med_wall.items()},
        "ratio_cpu_transformer_over_mlp": med["transformer"] / med["mlp"],
        "ratio_wall_transformer_over_mlp": med_wall["transformer"] / med_wall["mlp"],
        "loadavg_before": list(load0),
        "loadavg_after": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
    }
    print(f"MLP         : {1e3 * med['mlp']:7.2f} ms CPU per GRPO step (median)")
    print(f"transformer : {1e3 * med['transformer']:7.2f} ms CPU per GRPO step (median)")
    print(
        f"ratio transformer / MLP: {data['ratio_cpu_transformer_over_mlp']:.2f}x CPU, "
        f"{data['ratio_wall_transformer_over_mlp']:.2f}x wall (load {load0[0]:.1f})"
    )
    cmd = "python benchmarks/patchworld_transformer.py"
    if (args.rounds, args.block) != (6, 10):
        cmd += f" --rounds {args.rounds} --block {args.block}"
    print(write_result(args.out, data, command=cmd))


if __name__ == "__main__":
    numerics.reexec_if_needed()  # a library loaded before the pin: start again, pinned
    main()
