"""Collecting experience: run the policy in the vectorized env and fill a fixed-size buffer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .config import Config
from .policy import Policy
from .value import ValueFunction


@dataclass
class Trajectories:
    """One rollout, arrays shaped (horizon, n_workers[, obs_dim]). ``ended[t]`` is true when the
    episode finished at step t (terminated or cut by the time limit)."""

    observations: np.ndarray
    chosen: np.ndarray
    behaviour_log_probs: np.ndarray
    rewards: np.ndarray
    ended: np.ndarray
    value_estimates: np.ndarray
    final_value: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))

    @classmethod
    def allocate(cls, horizon: int, n_workers: int, obs_dim: int) -> Trajectories:
        shape = (horizon, n_workers)
        return cls(np.zeros((*shape, obs_dim), np.float32), np.zeros(shape, np.int64),
                   np.zeros(shape, np.float32), np.zeros(shape, np.float32),
                   np.zeros(shape, np.float32), np.zeros(shape, np.float32))


class Collector:
    """Keeps the env's current observation across rollouts."""

    def __init__(self, env, cfg: Config, rng: np.random.Generator) -> None:
        self.env = env
        self.cfg = cfg
        self.rng = rng
        self.current_obs = env.reset()
        self.steps_done = 0

    def collect(self, policy: Policy, value_fn: ValueFunction, buf: Trajectories,
                on_episode: Callable[[int, float, int], None]) -> Trajectories:
        cfg = self.cfg
        for t in range(cfg.horizon):
            self.steps_done += cfg.n_workers
            buf.observations[t] = self.current_obs
            buf.value_estimates[t] = value_fn.predict(self.current_obs)
            buf.chosen[t], buf.behaviour_log_probs[t] = policy.act(self.current_obs, self.rng)

            step = self.env.step(buf.chosen[t])
            buf.rewards[t] = cfg.reward_scale * step.reward
            if cfg.bootstrap:
                # a time-limit cut is not an ending: credit what the cut-off state was worth
                cut = step.truncated & ~step.terminated
                if cut.any():
                    buf.rewards[t, cut] += cfg.discount * value_fn.predict(step.final_obs[cut])
            buf.ended[t] = step.terminated | step.truncated
            self.current_obs = step.obs
            for ret, length in zip(step.episode_returns, step.episode_lengths, strict=True):
                on_episode(self.steps_done, float(ret), int(length))

        if cfg.bootstrap:
            buf.final_value = value_fn.predict(self.current_obs)
        else:
            buf.final_value = np.zeros(cfg.n_workers, np.float32)
        return buf
