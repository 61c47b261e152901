"""Advantage estimation (GAE) and standardization, as pure NumPy functions."""

from __future__ import annotations

import numpy as np


def gae_advantages(rewards: np.ndarray, values: np.ndarray, ended: np.ndarray,
                   final_value: np.ndarray, discount: float, trace_decay: float) -> np.ndarray:
    """A_t = sum_k (gamma lambda)^k delta_{t+k}, delta_t = r_t + gamma V(s_{t+1}) - V(s_t),
    with the sum and the bootstrap cut where an episode ended (``ended[t]``).
    ``final_value`` is V of the observation after the last step."""
    horizon = len(rewards)
    adv = np.zeros_like(rewards)
    running = np.zeros_like(final_value)
    for t in range(horizon - 1, -1, -1):
        v_next = final_value if t == horizon - 1 else values[t + 1]
        alive = 1.0 - ended[t]
        delta = rewards[t] + discount * alive * v_next - values[t]
        running = delta + discount * trace_decay * alive * running
        adv[t] = running
    return adv


def value_targets(advantages: np.ndarray, values: np.ndarray) -> np.ndarray:
    """lambda-returns: what V(s_t) is regressed on."""
    return advantages + values


def standardize(x, eps: float = 1e-8):
    """Zero mean, unit standard deviation (works on NumPy arrays and Torch tensors)."""
    return (x - x.mean()) / (x.std() + eps)
