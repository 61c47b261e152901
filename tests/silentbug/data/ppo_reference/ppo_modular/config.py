"""Training configuration: one frozen dataclass, every field documented."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Config:
    seed: int = 1
    """seeds Python, NumPy, Torch and the environments"""
    env_id: str = "CartPole-v1"
    """vectorized task (see envs.ENVS)"""
    total_timesteps: int = 40_000
    """environment steps summed over all workers"""
    n_workers: int = 4
    """parallel environments"""
    horizon: int = 128
    """steps each worker collects per rollout"""
    epochs: int = 4
    """optimization passes over each rollout"""
    n_minibatches: int = 4
    """minibatches per pass"""
    lr: float = 2.5e-4
    """initial Adam step size"""
    lr_decay: bool = True
    """decay the step size linearly to zero over training"""
    reward_scale: float = 1.0
    """multiply rewards by this before learning, so value targets are O(1)"""
    discount: float = 0.99
    """gamma"""
    trace_decay: float = 0.95
    """lambda of GAE"""
    ratio_clip: float = 0.2
    """epsilon of the clipped surrogate (also the value-clipping range)"""
    value_weight: float = 0.5
    """weight of the value loss in the total loss"""
    entropy_weight: float = 0.01
    """weight of the entropy bonus (0 removes it)"""
    grad_clip: float = 0.5
    """max global gradient norm (0 turns clipping off)"""
    normalize_advantages: bool = True
    """standardize advantages per minibatch"""
    clip_value_loss: bool = True
    """pessimistic clipped value loss around the rollout's predictions"""
    bootstrap: bool = True
    """bootstrap from V(s') at time-limit cuts and at the end of each rollout (False treats both as terminal)"""
    width: int = 64
    """hidden width of the policy and value networks"""

    @property
    def batch_size(self) -> int:
        return self.n_workers * self.horizon

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.n_minibatches

    @property
    def n_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    def with_overrides(self, **overrides: Any) -> Config:
        return replace(self, **overrides)


def load_config(path: Path | None) -> Config:
    """Defaults overridden by a JSON object; unknown keys are an error that names them."""
    data = json.loads(path.read_text()) if path else {}
    unknown = set(data) - {f.name for f in fields(Config)}
    if unknown:
        raise SystemExit(f"config: unknown fields {sorted(unknown)}; known: {[f.name for f in fields(Config)]}")
    return Config(**data)


def dump_config(cfg: Config, path: Path) -> None:
    path.write_text(json.dumps(asdict(cfg), indent=2))
