"""The policy: an MLP over observations giving a categorical distribution over actions."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# torch.inference_mode() without its Python wrapper (a third of the cost, called every step)
inference_mode = torch._C._InferenceMode


def orthogonal_linear(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class TanhMLP(nn.Module):
    """in -> width -> width -> out with tanh; calls weights directly to skip module overhead."""

    def __init__(self, n_in: int, width: int, n_out: int, out_gain: float) -> None:
        super().__init__()
        self.hidden1 = orthogonal_linear(n_in, width, np.sqrt(2))
        self.hidden2 = orthogonal_linear(width, width, np.sqrt(2))
        self.head = orthogonal_linear(width, n_out, out_gain)
        # (weight, bias) of each layer in a plain tuple: reading it skips nn.Module.__getattr__
        self.weights = (*self.hidden1.parameters(), *self.hidden2.parameters(),
                        *self.head.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = self.weights
        h = torch.tanh(F.linear(x, w1, b1))
        h = torch.tanh(F.linear(h, w2, b2))
        return F.linear(h, w3, b3)


def log_probs_and_entropy(logits: torch.Tensor, chosen: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(chosen | s) and H[pi(. | s)] for a softmax over ``logits``."""
    log_pi = torch.log_softmax(logits, dim=-1)
    chosen_log_pi = log_pi.gather(-1, chosen.long().unsqueeze(-1)).squeeze(-1)
    return chosen_log_pi, -(log_pi.exp() * log_pi).sum(-1)


def draw_actions(logits: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sample an action per row (inverse CDF) and return it with its log-probability."""
    n, k = logits.shape
    shifted = logits - logits.max(-1, keepdims=True)
    log_pi = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    cdf = np.exp(log_pi).cumsum(-1)  # the method: np.cumsum's wrapper costs more at 4 rows
    chosen = (rng.random((n, 1)) > cdf).sum(-1)
    return np.minimum(chosen, k - 1, out=chosen), log_pi[np.arange(n), chosen]


class Policy(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, width: int) -> None:
        super().__init__()
        self.net = TanhMLP(obs_dim, width, n_actions, out_gain=0.01)

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net.forward(obs)  # .forward: nn.Module.__call__ costs more than the layers

    def evaluate(self, obs: torch.Tensor, chosen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log pi(chosen | obs), entropy) with gradients, for the update."""
        return log_probs_and_entropy(self.net.forward(obs), chosen)

    def act(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        with inference_mode(True):
            logits = self.net.forward(torch.from_numpy(obs)).numpy()
        return draw_actions(logits, rng)
