"""Proximal Policy Optimization for discrete actions, in one file, top to bottom.

config dataclass -> environments -> network -> maths -> training loop. Run it as
``python -m substrates.ppo_single --config config.json --run-dir out/``; it writes
``out/metrics.jsonl`` (one JSON object per finished episode and per iteration).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .envs import make_vec_env, save_policy


@dataclass
class Args:
    seed: int = 1
    """seed for Python, NumPy, Torch and the environments"""
    env_id: str = "CartPole-v1"
    """which vectorized task to train on"""
    total_timesteps: int = 40_000
    """environment steps, summed over all envs"""
    learning_rate: float = 2.5e-4
    """Adam step size at the start (annealed linearly to 0 when anneal_lr)"""
    num_envs: int = 4
    """parallel environments"""
    num_steps: int = 128
    """steps per env per rollout"""
    anneal_lr: bool = True
    """decay the learning rate linearly over the iterations"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """lambda of generalized advantage estimation"""
    num_minibatches: int = 4
    """minibatches per epoch"""
    update_epochs: int = 4
    """passes over each rollout"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: float = 0.2
    """surrogate clipping range"""
    clip_vloss: bool = True
    """clip the value update to the same range around the rollout's values"""
    ent_coef: float = 0.01
    """weight of the entropy bonus"""
    vf_coef: float = 0.5
    """weight of the value loss"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    hidden: int = 64
    """width of both hidden layers"""


# ALGO LOGIC: network
def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class MLP(nn.Module):
    """Two tanh hidden layers, called weight by weight (nn.Sequential costs more at 4 envs)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, out_std: float) -> None:
        super().__init__()
        self.l1 = layer_init(nn.Linear(in_dim, hidden))
        self.l2 = layer_init(nn.Linear(hidden, hidden))
        self.l3 = layer_init(nn.Linear(hidden, out_dim), std=out_std)
        self.weights = (*self.l1.parameters(), *self.l2.parameters(), *self.l3.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = self.weights  # a plain tuple: no nn.Module attribute look-ups
        x = torch.tanh(F.linear(x, w1, b1))
        x = torch.tanh(F.linear(x, w2, b2))
        return F.linear(x, w3, b3)


class Agent(nn.Module):
    """Separate actor and critic networks."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = MLP(obs_dim, hidden, 1, out_std=1.0)
        self.actor = MLP(obs_dim, hidden, num_actions, out_std=0.01)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic.forward(x).squeeze(-1)  # .forward: skips nn.Module.__call__

    def get_logprob_entropy(self, x: torch.Tensor, action: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
        return categorical_logprob_entropy(self.actor.forward(x), action)


# ALGO LOGIC: maths, as small pure functions
def categorical_logprob_entropy(logits: torch.Tensor, action: torch.Tensor
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(action) and the entropy of the softmax policy given by ``logits``."""
    logp = torch.log_softmax(logits, dim=-1)
    logprob = logp.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return logprob, entropy


def sample_categorical(logits: np.ndarray, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Draw one action per row of ``logits`` by inverting the CDF; return (actions, log pi(a)).

    NumPy, not torch.distributions: at 4 envs the per-call overhead of the latter dominates."""
    n, k = logits.shape
    logp = logits - logits.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    cdf = np.exp(logp).cumsum(-1)  # the method: np.cumsum's wrapper costs more at 4 rows
    action = (rng.random((n, 1)) > cdf).sum(-1)
    return np.minimum(action, k - 1, out=action), logp[np.arange(n), action]


def compute_gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray,
                last_value: np.ndarray, gamma: float, gae_lambda: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation over a (steps, envs) rollout.

    ``dones[t]`` says the episode ended at step t, so step t must not bootstrap from the
    next observation (a fresh episode). Returns (advantages, returns = advantages + values).
    """
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    lastgaelam = np.zeros_like(last_value)
    for t in reversed(range(num_steps)):
        nextvalues = last_value if t == num_steps - 1 else values[t + 1]
        nextnonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def approx_kl_estimators(logratio: torch.Tensor) -> tuple[float, float]:
    """Two estimators of KL(old || new) from log(new/old) at samples from the old policy:
    the naive mean(-logratio), and mean((ratio - 1) - logratio), which is unbiased and never
    negative (http://joschu.net/blog/kl-approx.html)."""
    ratio = logratio.exp()
    return float((-logratio).mean()), float(((ratio - 1) - logratio).mean())


def explained_variance(y_pred: np.ndarray, y_true: np.ndarray) -> float:
    """1 - Var[y_true - y_pred] / Var[y_true]: 1 is a perfect value function, 0 no better than
    a constant; NaN when the targets have no variance."""
    var_y = np.var(y_true)
    return float("nan") if var_y == 0 else float(1 - np.var(y_true - y_pred) / var_y)


def train(args: Args, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size

    # TRY NOT TO MODIFY: seeding and determinism
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_deterministic_debug_mode("error")  # = use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    env_seed, action_seed = np.random.SeedSequence(args.seed).spawn(2)
    action_rng = np.random.default_rng(action_seed)

    envs = make_vec_env(args.env_id, args.num_envs, int(env_seed.generate_state(1)[0]))
    agent = Agent(envs.obs_dim, envs.num_actions, args.hidden)
    # torch.optim.Adam(fused=True)'s update, without torch.optim (see class Adam, at the end)
    optimizer = Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: storage setup (NumPy while acting, Torch views for the update)
    obs = np.zeros((args.num_steps, args.num_envs, envs.obs_dim), dtype=np.float32)
    actions = np.zeros((args.num_steps, args.num_envs), dtype=np.int64)
    logprobs = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    rewards = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    dones = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)
    values = np.zeros((args.num_steps, args.num_envs), dtype=np.float32)

    log = open(run_dir / "metrics.jsonl", "w")  # noqa: SIM115 - closed at the end of train
    global_step = 0
    start_time = time.time()
    next_obs = envs.reset()

    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            # ALGO LOGIC: action logic
            with torch.inference_mode():
                x = torch.from_numpy(next_obs)
                logits = agent.actor(x).numpy()
                values[step] = agent.get_value(x).numpy()
            action, logprobs[step] = sample_categorical(logits, action_rng)
            actions[step] = action

            out = envs.step(action)
            rewards[step] = out.reward
            # a time-limit cut is not a real end: bootstrap it from the observation it cut off
            cut = out.truncated & ~out.terminated
            if cut.any():
                with torch.inference_mode():
                    rewards[step, cut] += args.gamma * agent.get_value(
                        torch.from_numpy(out.final_obs[cut])).numpy()
            dones[step] = out.terminated | out.truncated
            next_obs = out.obs
            for ep_return, ep_length in zip(out.episode_returns, out.episode_lengths, strict=True):
                log.write(json.dumps({"kind": "episode", "global_step": global_step,
                                      "return": float(ep_return), "length": int(ep_length)}) + "\n")

        # bootstrap value if not done
        with torch.inference_mode():
            next_value = agent.get_value(torch.from_numpy(next_obs)).numpy()
        advantages, returns = compute_gae(rewards, values, dones, next_value,
                                          args.gamma, args.gae_lambda)

        # flatten the batch
        b_obs = torch.from_numpy(obs.reshape((-1, envs.obs_dim)))
        b_logprobs = torch.from_numpy(logprobs.reshape(-1))
        b_actions = torch.from_numpy(actions.reshape(-1))
        b_advantages = torch.from_numpy(advantages.reshape(-1))
        b_returns = torch.from_numpy(returns.reshape(-1))
        b_values = torch.from_numpy(values.reshape(-1))

        # Optimizing the policy and value network
        b_inds = np.arange(batch_size)
        stats: dict[str, list[float]] = {k: [] for k in (
            "policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac",
            "grad_norm")}
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, minibatch_size):
                mb_inds = torch.from_numpy(b_inds[start:start + minibatch_size])  # index once

                newlogprob, entropy = agent.get_logprob_entropy(b_obs[mb_inds], b_actions[mb_inds])
                newvalue = agent.get_value(b_obs[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    old_approx_kl, approx_kl = approx_kl_estimators(logratio)
                    clipfrac = float(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

                for key, val in (("policy_loss", pg_loss.item()), ("value_loss", v_loss.item()),
                                 ("entropy", entropy_loss.item()), ("old_approx_kl", old_approx_kl),
                                 ("approx_kl", approx_kl), ("clipfrac", clipfrac),
                                 ("grad_norm", grad_norm.item())):
                    stats[key].append(val)

        record = {"kind": "iteration", "iteration": iteration, "global_step": global_step,
                  "learning_rate": optimizer.param_groups[0]["lr"],
                  "explained_variance": explained_variance(b_values.numpy(), b_returns.numpy()),
                  "sps": int(global_step / (time.time() - start_time))}
        record.update({k: float(np.mean(v)) for k, v in stats.items()})
        log.write(json.dumps(record) + "\n")
        log.flush()
    log.close()
    # the final policy, for the evaluation that scores it
    save_policy(run_dir, [w.detach().numpy() for w in agent.actor.weights])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, help="JSON object of Args fields to override")
    parser.add_argument("--run-dir", type=Path, required=True)
    opts = parser.parse_args(argv)
    overrides = json.loads(opts.config.read_text()) if opts.config else {}
    unknown = set(overrides) - {f.name for f in fields(Args)}
    if unknown:
        parser.error(f"unknown config fields {sorted(unknown)}")
    args = Args(**overrides)
    (opts.run_dir).mkdir(parents=True, exist_ok=True)
    (opts.run_dir / "args.json").write_text(json.dumps(asdict(args), indent=2))
    train(args, opts.run_dir)


# ALGO LOGIC: optimizer
class Adam:
    """Adam with the part of torch.optim's interface the loop uses (``param_groups[0]["lr"]``,
    ``zero_grad``, ``step``). For each parameter p with gradient g, at step t:

        m = beta1 m + (1 - beta1) g        v = beta2 v + (1 - beta2) g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    ``step`` runs the fused CPU kernel that torch.optim.Adam(fused=True) runs, so the numbers are
    the same to the bit. torch.optim itself is not used because its first call imports the
    torch.compile stack, about 2 s of CPU in every run.
    """

    def __init__(self, params, lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params = list(params)
        self.param_groups = [{"params": self.params, "lr": lr}]
        self.eps, self.betas = eps, betas
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.zeros(()) for _ in self.params]  # t of each parameter, as float32

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        steps = [self.steps[i] for i in live]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_([self.params[i] for i in live], [self.params[i].grad for i in live],
                           [self.exp_avg[i] for i in live], [self.exp_avg_sq[i] for i in live],
                           [], steps, lr=self.param_groups[0]["lr"], beta1=self.betas[0],
                           beta2=self.betas[1], weight_decay=0.0, eps=self.eps, amsgrad=False,
                           maximize=False)


if __name__ == "__main__":
    main()
