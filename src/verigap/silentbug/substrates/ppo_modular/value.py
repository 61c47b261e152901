"""The state-value function V(s), a separate MLP from the policy."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .policy import TanhMLP, inference_mode


class ValueFunction(nn.Module):
    def __init__(self, obs_dim: int, width: int) -> None:
        super().__init__()
        self.net = TanhMLP(obs_dim, width, 1, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net.forward(obs).squeeze(-1)

    def predict(self, obs: np.ndarray) -> np.ndarray:
        with inference_mode(True):
            return self.net.forward(torch.from_numpy(obs)).squeeze(-1).numpy()


def explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """Share of the targets' variance the predictions explain (1 best, 0 = a constant, NaN when
    the targets are constant)."""
    target_var = np.var(target)
    if target_var == 0:
        return float("nan")
    return float(1.0 - np.var(target - predicted) / target_var)
