"""The training loop: seed, build, then alternate rollout -> advantages -> update, logging each."""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from ..envs import make_vec_env, save_policy
from .advantage import gae_advantages, value_targets
from .config import Config, dump_config, load_config
from .policy import Policy
from .rollout import Collector, Trajectories
from .update import Adam, Batch, optimize
from .value import ValueFunction, explained_variance


def seed_everything(seed: int) -> tuple[int, np.random.Generator, np.random.Generator]:
    """Seed every RNG and make Torch deterministic; return (env seed, action rng, minibatch rng)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_deterministic_debug_mode("error")  # = use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    env_ss, act_ss, mb_ss = np.random.SeedSequence(seed).spawn(3)
    return (int(env_ss.generate_state(1)[0]), np.random.default_rng(act_ss),
            np.random.default_rng(mb_ss))


def to_batch(buf: Trajectories, advantages: np.ndarray, targets: np.ndarray) -> Batch:
    flat = lambda a: torch.from_numpy(a.reshape(-1, *a.shape[2:]))  # noqa: E731
    return Batch(flat(buf.observations), flat(buf.chosen), flat(buf.behaviour_log_probs),
                 flat(advantages), flat(targets), flat(buf.value_estimates))


def run(cfg: Config, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, out_dir / "config_resolved.json")
    env_seed, act_rng, mb_rng = seed_everything(cfg.seed)
    env = make_vec_env(cfg.env_id, cfg.n_workers, env_seed)
    policy = Policy(env.obs_dim, env.num_actions, cfg.width)
    value_fn = ValueFunction(env.obs_dim, cfg.width)
    # the update torch.optim.Adam(fused=True) makes, without torch.optim (see update.Adam)
    optimizer = Adam([*policy.parameters(), *value_fn.parameters()], lr=cfg.lr, eps=1e-5)
    collector = Collector(env, cfg, act_rng)
    buf = Trajectories.allocate(cfg.horizon, cfg.n_workers, env.obs_dim)

    with open(out_dir / "metrics.jsonl", "w") as log:
        def on_episode(step: int, ret: float, length: int) -> None:
            log.write(json.dumps({"kind": "episode", "global_step": step, "return": ret,
                                  "length": length}) + "\n")

        started = time.time()
        for update in range(1, cfg.n_updates + 1):
            lr_now = cfg.lr * (1.0 - (update - 1.0) / cfg.n_updates) if cfg.lr_decay else cfg.lr
            for group in optimizer.param_groups:
                group["lr"] = lr_now

            collector.collect(policy, value_fn, buf, on_episode)
            advantages = gae_advantages(buf.rewards, buf.value_estimates, buf.ended,
                                        buf.final_value, cfg.discount, cfg.trace_decay)
            targets = value_targets(advantages, buf.value_estimates)
            stats = optimize(policy, value_fn, optimizer, to_batch(buf, advantages, targets),
                             cfg, mb_rng)

            record = {"kind": "iteration", "iteration": update,
                      "global_step": collector.steps_done, "learning_rate": lr_now,
                      "explained_variance": explained_variance(buf.value_estimates, targets),
                      "sps": int(collector.steps_done / (time.time() - started)), **stats}
            log.write(json.dumps(record) + "\n")
            log.flush()
    # the final policy, for the evaluation that scores it
    save_policy(out_dir, [w.detach().numpy() for w in policy.net.weights])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, help="JSON object overriding Config fields")
    parser.add_argument("--run-dir", type=Path, required=True)
    opts = parser.parse_args(argv)
    run(load_config(opts.config), opts.run_dir)


if __name__ == "__main__":
    main()
