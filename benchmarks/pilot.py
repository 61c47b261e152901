"""GRPO speed on Patch World: steps per second and how they grow with batch, group size and k,
measured in one run against the default configuration; `--sweep` also times the whole 42-run
pilot sweep on this machine (into a temporary directory).

Run: `python benchmarks/pilot.py [--steps 200] [--sweep]`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer
from verigap.patchworld.pilot import run_pilot
from verigap.patchworld.sft import SFTConfig, sft


def steps_per_second(steps: int, **overrides) -> float:
    c = GRPOConfig(steps=steps, **overrides)
    start, _ = sft(c.k, 0, SFTConfig(programs=500, epochs=1))
    trainer = GRPOTrainer(c, start)
    t0 = time.perf_counter()
    for i in range(steps):
        trainer.step(i)
    return steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sweep", action="store_true", help="also time the full 42-run sweep")
    args = ap.parse_args()
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
