"""Hand-vectorized NumPy versions of two Gymnasium classic-control tasks.

Why not ``gymnasium.vector.SyncVectorEnv``: at 4 envs its per-step Python overhead costs more
than the physics, and the speed goal (40k CartPole steps in under 6 s) leaves no room for it.
The dynamics reproduce CartPole-v1 and Acrobot-v1 exactly (tests compare them step for step with
Gymnasium). Episodes reset in the same step they end ("same-step autoreset"); the observation
that ended the episode is returned as ``final_obs`` so the learner can bootstrap truncations.

This module is copied into every calibration workspace, so it imports only NumPy.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class StepResult:
    """What one vectorized step returns (arrays have the env axis first)."""

    obs: np.ndarray  # next observation, already reset where an episode ended
    reward: np.ndarray
    terminated: np.ndarray  # the task ended (pole fell, tip above the line)
    truncated: np.ndarray  # the time limit cut the episode
    final_obs: np.ndarray  # observation before the reset (equals obs where nothing ended)
    episode_returns: np.ndarray  # undiscounted returns of the episodes that ended this step
    episode_lengths: np.ndarray


class _VecEnv(ABC):
    """Shared bookkeeping: time limit, same-step autoreset, episode statistics."""

    obs_dim: int
    num_actions: int
    max_episode_steps: int

    def __init__(self, num_envs: int, seed: int) -> None:
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros((num_envs, 4))
        self.elapsed = np.zeros(num_envs, dtype=np.int64)
        self.ep_return = np.zeros(num_envs)

    def reset(self) -> np.ndarray:
        self.state = self._initial_state(self.num_envs)
        self.elapsed[:] = 0
        self.ep_return[:] = 0.0
        return self._obs(self.state)

    def step(self, actions: np.ndarray) -> StepResult:
        self.state, reward, terminated = self._dynamics(self.state, np.asarray(actions))
        self.elapsed += 1
        self.ep_return += reward
        truncated = self.elapsed >= self.max_episode_steps
        done = terminated | truncated
        final_obs = self._obs(self.state)
        obs = final_obs
        ep_returns, ep_lengths = _NO_RETURNS, _NO_LENGTHS  # most steps end no episode
        if done.any():
            ep_returns, ep_lengths = self.ep_return[done], self.elapsed[done]  # copies
            self.state[done] = self._initial_state(int(done.sum()))
            self.elapsed[done] = 0
            self.ep_return[done] = 0.0
            obs = self._obs(self.state)
        return StepResult(obs, reward, terminated, truncated, final_obs, ep_returns, ep_lengths)

    @abstractmethod
    def _initial_state(self, n: int) -> np.ndarray:
        """Start states for ``n`` fresh episodes."""

    @abstractmethod
    def _dynamics(self, state: np.ndarray, actions: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(next state, reward, terminated) for every env."""

    @abstractmethod
    def _obs(self, state: np.ndarray) -> np.ndarray:
        """The float32 observation of each state."""


class VecCartPole(_VecEnv):
    """CartPole-v1: reward 1 per step, terminate when the pole or cart leaves its bounds, 500 steps."""

    obs_dim = 4
    num_actions = 2
    max_episode_steps = 500
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def _initial_state(self, n: int) -> np.ndarray:
        return self.rng.uniform(-0.05, 0.05, size=(n, 4))

    def _obs(self, state: np.ndarray) -> np.ndarray:
        return state.astype(np.float32)

    def _dynamics(self, state, actions):
        # Gymnasium's arithmetic on Python floats, env by env (at 4 envs, faster than ~40 tiny
        # NumPy calls, and the same IEEE double operations in the same order, so the same bits).
        # cos and sin stay NumPy's, on the same array as always.
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        new, terminated = [], []
        for (x, x_dot, theta, theta_dot), action, costheta, sintheta in zip(
                state.tolist(), actions.tolist(), np.cos(state[:, 2]).tolist(),
                np.sin(state[:, 2]).tolist(), strict=True):
            force = self.force_mag if action == 1 else -self.force_mag
            temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass
            thetaacc = (self.gravity * sintheta - costheta * temp) / (
                self.length * (4.0 / 3.0 - self.masspole * (costheta * costheta) / total_mass))
            xacc = temp - polemass_length * thetaacc * costheta / total_mass
            x, theta = x + self.tau * x_dot, theta + self.tau * theta_dot
            new.append((x, x_dot + self.tau * xacc, theta, theta_dot + self.tau * thetaacc))
            terminated.append(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold)
        return np.array(new), np.ones(len(state)), np.array(terminated)


class VecAcrobot(_VecEnv):
    """Acrobot-v1 ("book" dynamics, RK4, dt 0.2): reward -1 per step until the tip swings above
    the line, 500 steps. Long episodes and a constant negative reward make correct bootstrapping
    and the scale of advantages matter, which CartPole hides."""

    obs_dim = 6
    num_actions = 3
    max_episode_steps = 500
    dt = 0.2
    m1 = m2 = l1 = 1.0
    lc1 = lc2 = 0.5
    moi = 1.0
    max_vel_1, max_vel_2 = 4 * math.pi, 9 * math.pi
    torques = np.array([-1.0, 0.0, 1.0])

    def _initial_state(self, n: int) -> np.ndarray:
        # Gymnasium draws the start state in float32; keep that rounding so states match exactly.
        return self.rng.uniform(-0.1, 0.1, size=(n, 4)).astype(np.float32).astype(np.float64)

    def _obs(self, s: np.ndarray) -> np.ndarray:
        return np.stack([np.cos(s[:, 0]), np.sin(s[:, 0]), np.cos(s[:, 1]), np.sin(s[:, 1]),
                         s[:, 2], s[:, 3]], axis=1).astype(np.float32)

    def _dsdt(self, s: np.ndarray, a: np.ndarray) -> np.ndarray:
        m1, m2, l1, lc1, lc2, moi, g = self.m1, self.m2, self.l1, self.lc1, self.lc2, self.moi, 9.8
        theta1, theta2, dtheta1, dtheta2 = s.T
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * np.cos(theta2)) + moi + moi
        d2 = m2 * (lc2**2 + l1 * lc2 * np.cos(theta2)) + moi
        phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - math.pi / 2.0)
        phi1 = (-m2 * l1 * lc2 * dtheta2**2 * np.sin(theta2)
                - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * np.sin(theta2)
                + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - math.pi / 2) + phi2)
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * np.sin(theta2) - phi2) / (
            m2 * lc2**2 + moi - d2**2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2], axis=1)

    def _dynamics(self, state, actions):
        a = self.torques[actions]
        dt, dt2 = self.dt, self.dt / 2.0
        k1 = self._dsdt(state, a)
        k2 = self._dsdt(state + dt2 * k1, a)
        k3 = self._dsdt(state + dt2 * k2, a)
        k4 = self._dsdt(state + dt * k3, a)
        ns = state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        ns[:, 0] = _wrap(ns[:, 0], -math.pi, math.pi)
        ns[:, 1] = _wrap(ns[:, 1], -math.pi, math.pi)
        ns[:, 2] = np.minimum(np.maximum(ns[:, 2], -self.max_vel_1), self.max_vel_1)
        ns[:, 3] = np.minimum(np.maximum(ns[:, 3], -self.max_vel_2), self.max_vel_2)
        terminated = -np.cos(ns[:, 0]) - np.cos(ns[:, 1] + ns[:, 0]) > 1.0
        reward = np.where(terminated, 0.0, -1.0)
        return ns, reward, terminated


def _wrap(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Wrap angles into [low, high] by repeated subtraction, as Gymnasium does (same rounding)."""
    diff = high - low
    x = x.copy()
    while (over := x > high).any():
        x[over] -= diff
    while (under := x < low).any():
        x[under] += diff
    return x


_NO_RETURNS, _NO_LENGTHS = np.zeros(0), np.zeros(0, dtype=np.int64)

ENVS: dict[str, type[_VecEnv]] = {"CartPole-v1": VecCartPole, "Acrobot-v1": VecAcrobot}


def make_vec_env(env_id: str, num_envs: int, seed: int) -> _VecEnv:
    """The vectorized env for a Gymnasium id; a clear error names the ids that exist."""
    if env_id not in ENVS:
        raise ValueError(f"env_id {env_id!r} is not vectorized here; choose one of {sorted(ENVS)}")
    return ENVS[env_id](num_envs, seed)


# ---- the final policy, for the evaluation that scores it ------------------------------------
# Here, in a file the agent may not edit, so the format is the scorer's, not the candidate's.

POLICY_FILE = "policy.npz"
"""where a run leaves its final policy, inside its run directory"""
POLICY_ARRAYS = ("w1", "b1", "w2", "b2", "w3", "b3")
"""the policy network's layers in ``F.linear`` layout (weight: out x in), input to logits"""


def save_policy(run_dir: Path, layers: Sequence[np.ndarray]) -> None:
    """Write the final policy as plain arrays (no pickle), so the scorer rebuilds the network
    in its own code and samples it on episodes the training never saw."""
    np.savez(run_dir / POLICY_FILE, **dict(zip(POLICY_ARRAYS, layers, strict=True)))
