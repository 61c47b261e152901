"""GRPO with a KL penalty to the SFT policy, on batched Patch World, in NumPy.

One step: draw ``programs`` training programs, sample ``group`` whole episodes of each from the
current policy, pay them with the reward scheme (the shared layer), normalise rewards within
each program's group (a group with zero variance contributes nothing), and take one Adam step
on

    loss = -mean_{episodes, steps}[ A * log pi(a | s) ] + kl_coef * mean_{steps}[ KL(pi || pi_ref) ]

The KL term is the exact KL between the two 34-way categoricals at each visited state (no
sampling estimator: the action space is small enough to sum over). Because a step's observation
depends only on the program and the step index, the forward pass runs once per (program, step)
and the ``group`` samples share it; the gradient sums over them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from threadpoolctl import threadpool_limits

from verigap.patchworld import rules
from verigap.patchworld.policy import (
    MLP,
    Adam,
    act,
    all_features,
    categorical_kl,
    grad_kl_wrt_logits,
    log_softmax,
    sample,
)
from verigap.patchworld.programs import Programs, generate, heldout_set
from verigap.patchworld.sft import SFTConfig, sft_cached
from verigap.rewards import RewardScheme, Visible
from verigap.runs import METRICS, JsonlWriter, write_json_atomic
from verigap.verdict import summarize_arrays


class GRPOConfig(BaseModel):
    """One GRPO run. Every field has a default; the pilot sweep varies reward, k and seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(4, ge=1, le=10, description="broken branches per program")
    seed: int = Field(0, ge=0, description="seeds SFT, sampling, audits and program draws")
    steps: int = Field(1000, ge=0, description="GRPO steps")
    programs: int = Field(32, ge=1, description="programs per step")
    group: int = Field(8, ge=2, description="rollouts per program (the GRPO group)")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate")
    kl_coef: float = Field(0.01, ge=0, description="weight of KL(pi || pi_sft)")
    reward: RewardScheme = Field(default_factory=Visible, description="what the policy is paid")
    log_every: int = Field(50, ge=1, description="steps between monitoring evaluations")
    monitor_programs: int = Field(500, ge=1, description="fixed held-out monitoring set size")
    eval_programs: int = Field(2000, ge=1, description="held-out programs for the final eval")
    sft: SFTConfig = SFTConfig()


def group_advantages(rewards: np.ndarray) -> np.ndarray:
    """(B, G) rewards -> advantages normalised within each row; zero-variance rows give 0."""
    mean = rewards.mean(axis=1, keepdims=True)
    std = rewards.std(axis=1, keepdims=True)
    return np.where(std > 1e-8, (rewards - mean) / np.where(std > 1e-8, std, 1.0), 0.0)


def evaluate(model: MLP, programs: Programs, rng: np.random.Generator | None = None,
             greedy: bool = True) -> dict[str, Any]:
    """Visible pass, true and false success and the outcome mix of a policy on ``programs``."""
    grades = rules.grade(programs, act(model, programs, rng, greedy=greedy))
    s = summarize_arrays(grades.passed, grades.correct, grades.passed.astype(float),
                         outcome_counts=grades.outcome_counts())
    return {"visible_pass": s.pass_rate, "true_success": s.true_success,
            "false_success": s.false_success, "outcomes": grades.outcome_counts()}


class GRPOTrainer:
    """Holds the policy, the frozen reference and the optimiser; ``step()`` is one update."""

    def __init__(self, config: GRPOConfig, start: MLP) -> None:
        self.c = config
        self.model = start.copy()
        self.reference = start.copy()
        self.opt = Adam(self.model.params(), config.lr)
        self.rng = np.random.default_rng([config.seed, 2])
        n = max(1, config.steps) * config.programs
        self.pool = generate(config.k, n, seed=20_000 + config.seed)

    def step(self, i: int) -> dict[str, float]:
        c = self.c
        progs = self.pool[np.arange(i * c.programs, (i + 1) * c.programs) % self.pool.size]
        b, k, g = progs.size, progs.k, c.group
        x = all_features(progs).reshape(b * k, -1)  # rows: program-major, then step
        logits, h = self.model.forward(x)
        logp = log_softmax(logits)
        logq = self.reference.log_probs(x)
        # G episodes per program: sample each step's action from the shared distribution
        actions = np.stack([sample(logp, self.rng) for _ in range(g)], axis=1)  # (b*k, g)
        episode_actions = actions.reshape(b, k, g).transpose(0, 2, 1).reshape(b * g, k)
        rep = progs[np.repeat(np.arange(b), g)]
        grades = rules.grade(rep, episode_actions)
        pay = c.reward.pay_batch(grades.passed, grades.correct, grades.deletions, self.rng)
        adv = group_advantages(pay.reward.reshape(b, g))  # (b, g)
        # gradient of the loss w.r.t. the logits of each (program, step) row
        n_samples = b * g * k
        adv_rows = np.repeat(adv, k, axis=0)  # (b*k, g), matches x's row order
        p = np.exp(logp)
        dz = p * adv_rows.sum(1, keepdims=True)
        rows = np.repeat(np.arange(b * k), g)
        np.add.at(dz, (rows, actions.reshape(-1)), -adv_rows.reshape(-1))
        dz /= n_samples
        dz += c.kl_coef * grad_kl_wrt_logits(logp, logq) / (b * k)
        self.opt.step(self.model.backward(x, h, dz.astype(np.float32)))
        kl = categorical_kl(logp, logq)
        return {
            "reward": float(pay.reward.mean()),
            "train_pass": float(grades.passed.mean()),
            "train_correct": float(grades.correct.mean()),
            "kl": float(kl.mean()),
            "audited": float(pay.audited.mean()),
            "caught": float(pay.caught.mean()),
            "zero_variance_groups": float((np.abs(adv).sum(1) == 0).mean()),
        }


def train(run_dir: Path, config: dict[str, Any] | GRPOConfig,
          sft_cache: Path | None = None) -> dict[str, Any]:
    """A whole pilot run into ``run_dir``: SFT, GRPO with monitoring, then greedy evaluation on
    the held-out programs. Returns the result (the executor writes it as result.json).
    ``sft_cache`` shares starting policies between runs with the same k, seed and SFT config."""
    c = config if isinstance(config, GRPOConfig) else GRPOConfig.model_validate(config)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "config.json", c.model_dump(mode="json"))
    t0 = time.perf_counter()
    with threadpool_limits(1):
        start, sft_losses = sft_cached(c.k, c.seed, c.sft, sft_cache)
        monitor = generate(c.k, c.monitor_programs, seed=1, stream="heldout")
        heldout = heldout_set(c.k, c.eval_programs)
        trainer = GRPOTrainer(c, start)
        with JsonlWriter(run_dir / METRICS) as log:
            window: list[dict[str, float]] = []
            for i in range(c.steps + 1):
                if i % c.log_every == 0 or i == c.steps:
                    rec = {"step": i, **evaluate(trainer.model, monitor)}
                    if window:
                        rec |= {key: float(np.mean([w[key] for w in window])) for key in window[0]}
                    log.write(rec)
                    window = []
                if i < c.steps:
                    window.append(trainer.step(i))
        x_heldout = all_features(heldout).reshape(-1, start.w1.shape[0])
        result = {
            "config": c.model_dump(mode="json"),
            "setting": c.reward.label,
            "start": evaluate(start, heldout),
            "final": evaluate(trainer.model, heldout),
            "sft_loss": sft_losses,
            "kl_final": float(categorical_kl(trainer.model.log_probs(x_heldout),
                                             start.log_probs(x_heldout)).mean()),
            "wall_s": time.perf_counter() - t0,
        }
    np.savez_compressed(run_dir / "policy.npz", *trainer.model.params())
    return result
