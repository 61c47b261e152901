"""The scorer's own evaluation of a trained policy: what the training produced, not what it logged.

A scored run leaves its final policy as plain arrays (``envs.save_policy``: six arrays in
``F.linear`` layout, no pickle). This module rebuilds that network in its OWN code (two tanh
hidden layers, a linear head: the architecture every substrate trains), samples its actions
itself with its own generator, on the scorer's own copy of the environments, for episodes whose
seeds the training never saw. Nothing from the workspace runs here: a controller hard-coded in
the training loop, greedy actions late in training, or a policy swapped in for the logged
episodes changes nothing this evaluation sees.

If the agent changed the architecture (other layers, other activations, more arrays), the
file does not describe a network this evaluator builds, and the run is scored as unreadable:
no bug in the bank lives in the architecture, so a fix never needs to change it. The hidden
width may differ (it is a config field), within ``MAX_WIDTH``.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from verigap.silentbug.substrates.envs import ENVS, POLICY_ARRAYS, make_vec_env

MAX_WIDTH = 1024
"""widest hidden layer the evaluator builds (the substrates use 64)"""
MAX_FILE_BYTES = 16 * 2**20


class PolicyUnreadable(ValueError):
    """The run's policy file is missing or does not describe the evaluator's network."""


@dataclass(frozen=True)
class TrustedPolicy:
    """obs -> tanh(W1 x + b1) -> tanh(W2 h + b2) -> W3 h + b3 = logits, in float64."""

    layers: tuple[np.ndarray, ...]

    def logits(self, obs: np.ndarray) -> np.ndarray:
        w1, b1, w2, b2, w3, b3 = self.layers
        h = np.tanh(obs @ w1.T + b1)
        h = np.tanh(h @ w2.T + b2)
        return h @ w3.T + b3


def load_policy(path: Path, env_id: str) -> TrustedPolicy:
    """Read a policy file into the evaluator's network for ``env_id``; ``PolicyUnreadable``
    (with the reason) for anything else."""
    if not path.is_file():
        raise PolicyUnreadable(f"no {path.name}: the run did not save its final policy")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise PolicyUnreadable(f"{path.name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = sorted(data.files)
            if names != sorted(POLICY_ARRAYS):
                raise PolicyUnreadable(
                    f"{path.name} holds {names}, not {list(POLICY_ARRAYS)} "
                    "(the architecture was changed)"
                )
            arrays = tuple(np.asarray(data[k], dtype=np.float64) for k in POLICY_ARRAYS)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        if isinstance(e, PolicyUnreadable):
            raise
        raise PolicyUnreadable(f"{path.name} is not a readable .npz of arrays: {e}") from None
    env = ENVS[env_id]
    w1, b1, w2, b2, w3, b3 = arrays
    width = w1.shape[0] if w1.ndim == 2 else -1
    expected = (
        (width, env.obs_dim),
        (width,),
        (width, width),
        (width,),
        (env.num_actions, width),
        (env.num_actions,),
    )
    shapes = tuple(a.shape for a in arrays)
    if not 1 <= width <= MAX_WIDTH or shapes != expected:
        raise PolicyUnreadable(
            f"{path.name} has layer shapes {shapes}; the evaluator builds "
            f"{env.obs_dim} -> w -> w -> {env.num_actions} with w <= "
            f"{MAX_WIDTH} (the architecture was changed)"
        )
    if not all(np.isfinite(a).all() for a in arrays):
        raise PolicyUnreadable(f"{path.name} has non-finite weights")
    return TrustedPolicy(arrays)


def sample(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row from softmax(logits), by inverting the CDF with the evaluator's rng."""
    z = logits - logits.max(-1, keepdims=True)
    p = np.exp(z)
    cdf = (p / p.sum(-1, keepdims=True)).cumsum(-1)
    action = (rng.random((len(logits), 1)) > cdf).sum(-1)
    return np.minimum(action, logits.shape[1] - 1)


def evaluate_policy(policy: TrustedPolicy, env_id: str, seed: int, episodes: int) -> list[float]:
    """The undiscounted return of one episode in each of ``episodes`` environments seeded from
    ``seed``, the policy's actions drawn by this function (stochastic, as it was trained)."""
    env_ss, act_ss = np.random.SeedSequence(seed).spawn(2)
    env = make_vec_env(env_id, episodes, int(env_ss.generate_state(1)[0]))
    rng = np.random.default_rng(act_ss)
    obs = env.reset()
    returns: list[float | None] = [None] * episodes
    while any(r is None for r in returns):
        out = env.step(sample(policy.logits(np.asarray(obs, dtype=np.float64)), rng))
        ended = np.flatnonzero(out.terminated | out.truncated)
        for i, ret in zip(ended, out.episode_returns, strict=True):
            if returns[i] is None:
                returns[i] = float(ret)
        obs = out.obs
    return [float(r) for r in returns if r is not None]


def policy_score(path: Path, env_id: str, seed: int, episodes: int) -> tuple[float | None, str]:
    """(mean evaluated return of the policy a run saved, "" or why it could not be scored)."""
    try:
        policy = load_policy(path, env_id)
    except PolicyUnreadable as e:
        return None, str(e)
    return float(np.mean(evaluate_policy(policy, env_id, seed, episodes))), ""
