"""Steps per second of the batched Patch World API against the Gymnasium API, in one run.

A "step" is one action on one program. Run: `python benchmarks/patchworld_env.py [--batch N]`.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

from verigap import numerics
from verigap.patchworld import ENV_ID, BatchedPatchWorld, generate
from verigap.patchworld.rules import N_ACTIONS


def gym_sps(episodes: int, k: int) -> float:
    env = gym.make(ENV_ID, k=k).unwrapped  # unwrapped: no checker/order wrappers in the loop
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            _, _, done, _, _ = env.step(int(rng.integers(N_ACTIONS)))
    return episodes * k / (time.perf_counter() - t0)


def batched_sps(batch: int, rounds: int, k: int) -> float:
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for r in range(rounds):
        env = BatchedPatchWorld(generate(k, batch, seed=r), rng=rng)
        env.reset()
        while not env.done:
            env.step(rng.integers(0, N_ACTIONS, batch))
    return rounds * batch * k / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4)
    args = ap.parse_args()
    g = gym_sps(2000, args.k)
    b = batched_sps(args.batch, 20, args.k)
    print(
        f"gymnasium API : {g:>12,.0f} steps/s (one program at a time, program generation included)"
    )
    print(f"batched API   : {b:>12,.0f} steps/s (batch {args.batch}, program generation included)")
    print(f"ratio batched / gymnasium: {b / g:.1f}x")


if __name__ == "__main__":
    numerics.reexec_if_needed()  # a library loaded before the pin: start again, pinned
    main()
