"""One PPO optimization phase: clipped surrogate, (clipped) value loss, entropy bonus."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .advantage import standardize
from .config import Config
from .policy import Policy
from .value import ValueFunction


@dataclass
class Batch:
    """A flattened rollout as tensors."""

    observations: torch.Tensor
    chosen: torch.Tensor
    behaviour_log_probs: torch.Tensor
    advantages: torch.Tensor
    targets: torch.Tensor
    old_values: torch.Tensor

    def __len__(self) -> int:
        return len(self.chosen)


def kl_estimates(log_ratio: torch.Tensor) -> tuple[float, float]:
    """KL(behaviour || current) estimated at behaviour samples: k1 = E[-log r] (can go
    negative) and k3 = E[(r - 1) - log r] (unbiased, non-negative); r = pi_new / pi_old."""
    r = log_ratio.exp()
    return float((-log_ratio).mean()), float(((r - 1) - log_ratio).mean())


def clipped_surrogate(advantages: torch.Tensor, ratio: torch.Tensor, eps: float) -> torch.Tensor:
    """Negative PPO objective: mean of max(-A r, -A clip(r, 1-eps, 1+eps))."""
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - eps, 1 + eps)
    return torch.max(unclipped, clipped).mean()


def value_loss(predicted: torch.Tensor, targets: torch.Tensor, old: torch.Tensor,
               clip: bool, eps: float) -> torch.Tensor:
    """Half squared error; if ``clip``, the pessimistic max with a prediction kept within eps
    of the rollout's own estimate."""
    squared = (predicted - targets) ** 2
    if clip:
        kept_close = old + torch.clamp(predicted - old, -eps, eps)
        squared = torch.max(squared, (kept_close - targets) ** 2)
    return 0.5 * squared.mean()


def optimize(policy: Policy, value_fn: ValueFunction, optimizer: torch.optim.Optimizer,
             batch: Batch, cfg: Config, rng: np.random.Generator) -> dict[str, float]:
    """Run ``cfg.epochs`` passes of shuffled minibatches; return mean diagnostics."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    log: dict[str, list[float]] = {k: [] for k in (
        "policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac",
        "grad_norm")}
    for _ in range(cfg.epochs):
        order = rng.permutation(len(batch))
        for lo in range(0, len(batch), cfg.minibatch_size):
            idx = torch.from_numpy(order[lo:lo + cfg.minibatch_size])
            obs = batch.observations[idx]

            log_probs, entropy = policy.evaluate(obs, batch.chosen[idx])
            log_ratio = log_probs - batch.behaviour_log_probs[idx]
            ratio = log_ratio.exp()

            adv = batch.advantages[idx]
            if cfg.normalize_advantages:
                adv = standardize(adv)

            surrogate = clipped_surrogate(adv, ratio, cfg.ratio_clip)
            v_loss = value_loss(value_fn(obs), batch.targets[idx], batch.old_values[idx],
                                cfg.clip_value_loss, cfg.ratio_clip)
            mean_entropy = entropy.mean()
            total = surrogate + cfg.value_weight * v_loss - cfg.entropy_weight * mean_entropy

            optimizer.zero_grad()
            total.backward()
            max_norm = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
            grad_norm = nn.utils.clip_grad_norm_(params, max_norm)
            optimizer.step()

            with torch.no_grad():
                k1, k3 = kl_estimates(log_ratio)
                clipped = float(((ratio - 1).abs() > cfg.ratio_clip).float().mean())
            for key, val in (("policy_loss", surrogate.item()), ("value_loss", v_loss.item()),
                             ("entropy", mean_entropy.item()), ("old_approx_kl", k1),
                             ("approx_kl", k3), ("clipfrac", clipped),
                             ("grad_norm", grad_norm.item())):
                log[key].append(val)
    return {k: float(np.mean(v)) for k, v in log.items()}


class Adam:
    """Adam with the part of torch.optim's interface that training uses (``param_groups``,
    ``zero_grad``, ``step``). Per parameter p with gradient g, at step t:

        m = beta1 m + (1 - beta1) g        v = beta2 v + (1 - beta2) g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    ``step`` calls the fused CPU kernel that torch.optim.Adam(fused=True) calls, so results match
    it bit for bit; torch.optim is avoided because its first use imports the torch.compile stack
    (about 2 s of CPU per run).
    """

    def __init__(self, params, lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params = list(params)
        self.param_groups = [{"params": self.params, "lr": lr}]
        self.eps, self.betas = eps, betas
        self.first_moment = [torch.zeros_like(p) for p in self.params]
        self.second_moment = [torch.zeros_like(p) for p in self.params]
        self.step_counts = [torch.zeros(()) for _ in self.params]  # float32, as torch keeps them

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        counts = [self.step_counts[i] for i in live]
        torch._foreach_add_(counts, 1)
        torch._fused_adam_([self.params[i] for i in live], [self.params[i].grad for i in live],
                           [self.first_moment[i] for i in live],
                           [self.second_moment[i] for i in live], [], counts,
                           lr=self.param_groups[0]["lr"], beta1=self.betas[0],
                           beta2=self.betas[1], weight_decay=0.0, eps=self.eps, amsgrad=False,
                           maximize=False)
