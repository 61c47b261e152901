"""The small PyTorch transformer policy for Patch World: SFT, the GRPO trainer's policy hooks,
and the numbers a run adds (its probes).

The network (``Net``) is a pre-norm transformer encoder over the 12 branch tokens of
``transformer.tokens`` with learned position embeddings and a linear head to the 34 actions on
every token. ``TransformerPolicy`` wraps it with the NumPy-facing calls the trainer and the
evaluation use. Training uses exactly the GRPO step of ``grpo.GRPOTrainer``: the gradient of the
loss with respect to the logits is computed there in NumPy and pushed through the network with
``logits.backward(dz)``; only the optimiser differs (``torch.optim.Adam``, same hyper-parameters).

Determinism: weights are drawn from a generator seeded by the run's seed, actions from the
trainer's NumPy generator, and ``deterministic()`` pins torch to one thread, to deterministic
algorithms and to the kernels ``verigap.numerics`` pins, so the same config gives the same
numbers run after run and on any x86-64 machine with AVX2.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from verigap import numerics
from verigap.patchworld import rules
from verigap.patchworld.careless import careless_actions
from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer
from verigap.patchworld.policy import log_softmax, sample
from verigap.patchworld.programs import N_BRANCHES, Programs, generate
from verigap.patchworld.sft import SFTConfig, with_coverage
from verigap.patchworld.transformer import N_TOKEN_FEATURES, PolicyConfig, tokens


def deterministic() -> None:
    """One thread, deterministic algorithms and the pinned kernels (``verigap.numerics``): the
    same config gives the same numbers run after run, and machine after machine."""
    numerics.pin_torch()
    numerics.require()


class Block(nn.Module):
    """Pre-norm self-attention over the branch tokens, then a GELU MLP, each residual."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (
            self.qkv(self.norm1(x))
            .view(b, n, 3, self.heads, d // self.heads)
            .permute(2, 0, 3, 1, 4)
        )  # each (b, heads, n, d_head)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.out((att @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.ff(self.norm2(x))


class Net(nn.Module):
    def __init__(self, c: PolicyConfig) -> None:
        super().__init__()
        self.embed = nn.Linear(N_TOKEN_FEATURES, c.d_model)
        self.pos = nn.Parameter(torch.randn(N_BRANCHES, c.d_model) * 0.1)
        self.blocks = nn.ModuleList(Block(c.d_model, c.heads, c.ff) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, rules.N_ACTIONS)
        with torch.no_grad():  # start near uniform, as the MLP's small output layer does
            self.head.weight.mul_(0.1)
            self.head.bias.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(B, 12, 34) logits and the hidden states: the embedding, then each block's output
        (the last one after the final norm)."""
        h = self.embed(x) + self.pos
        hidden = [h]
        for block in self.blocks:
            h = block(h)
            hidden.append(h)
        h = self.norm(h)
        hidden[-1] = h
        return self.head(h), hidden


class TransformerPolicy:
    """A ``Net`` with the calls the trainer, evaluation and probes make, in NumPy terms."""

    def __init__(self, config: PolicyConfig, seed: int) -> None:
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1_000_003 * seed + 17)
            self.net = Net(config)

    def copy(self) -> TransformerPolicy:
        return copy.deepcopy(self)

    def step_logits(self, programs: Programs) -> torch.Tensor:
        """(B, k, 34) logits for acting on each broken branch, in acting order (with grad)."""
        logits, _ = self.net(torch.from_numpy(tokens(programs)))
        idx = torch.from_numpy(programs.order)[:, :, None].expand(-1, -1, rules.N_ACTIONS)
        return torch.gather(logits, 1, idx)

    def log_probs(self, programs: Programs) -> np.ndarray:
        """(B, k, 34) float32 log-probabilities, no gradient."""
        with torch.no_grad():
            return log_softmax(self.step_logits(programs).numpy())

    def act(
        self, programs: Programs, rng: np.random.Generator | None, greedy: bool = False
    ) -> np.ndarray:
        """(B, k) actions, drawn step by step as ``policy.act`` draws them for the MLP."""
        logp = self.log_probs(programs)
        out = np.zeros(programs.order.shape, dtype=np.int64)
        for t in range(programs.k):
            out[:, t] = logp[:, t].argmax(-1) if greedy else sample(logp[:, t], rng)
        return out

    def hidden(self, programs: Programs) -> list[np.ndarray]:
        """Frozen hidden states, one (B, 12, d_model) array per layer (embedding first)."""
        with torch.no_grad():
            _, hidden = self.net(torch.from_numpy(tokens(programs)))
        return [h.numpy() for h in hidden]

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.net.state_dict().items()}

    def load(self, state: dict[str, torch.Tensor]) -> TransformerPolicy:
        self.net.load_state_dict(state)
        return self


# ---- SFT ---------------------------------------------------------------------------------


def sft_transformer(
    k: int, seed: int, sft: SFTConfig, policy: PolicyConfig
) -> tuple[TransformerPolicy, list[float]]:
    """Clone the careless engineer at ``k`` broken branches on the same demonstrations the MLP
    clones (same programs, same actions). A minibatch holds ``sft.batch // k`` programs, so it
    covers as many acting steps as the MLP's. Returns the policy and each epoch's mean
    cross-entropy per step."""
    deterministic()
    rng = np.random.default_rng([seed, 1])
    programs = generate(k, sft.programs, seed=10_000 + seed)
    if sft.coverage is not None:
        programs = with_coverage(programs, sft.coverage, 10_000 + seed)
    actions = torch.from_numpy(careless_actions(programs, rng, sft.careless))
    model = TransformerPolicy(policy, seed)
    opt = torch.optim.Adam(model.net.parameters(), lr=sft.lr)
    per_batch = max(1, sft.batch // k)
    losses = []
    for _ in range(sft.epochs):
        perm = rng.permutation(programs.size)
        total = 0.0
        for start in range(0, perm.size, per_batch):
            idx = perm[start : start + per_batch]
            logits = model.step_logits(programs[idx]).reshape(-1, rules.N_ACTIONS)
            loss = nn.functional.cross_entropy(logits, actions[idx].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * logits.shape[0]
        losses.append(total / actions.numel())
    return model, losses


def sft_start(c: GRPOConfig, cache_dir: Path | None) -> tuple[TransformerPolicy, list[float]]:
    """The SFT starting policy of run ``c``, cached on disk by (k, seed, SFT and policy config)
    like ``sft.sft_cached``; SFT is deterministic, so a hit equals a recompute."""
    sft, policy = c.sft_config(), c.policy
    if cache_dir is None:
        return sft_transformer(c.k, c.seed, sft, policy)
    key = hashlib.sha256(
        json.dumps(
            [c.k, c.seed, sft.model_dump(mode="json"), policy.model_dump(mode="json")],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    path = Path(cache_dir) / f"sft_transformer_k{c.k}_seed{c.seed}_{key}.pt"
    if path.is_file():
        saved = torch.load(path, weights_only=True)
        deterministic()
        return TransformerPolicy(policy, c.seed).load(saved["state"]), saved["losses"].tolist()
    model, losses = sft_transformer(c.k, c.seed, sft, policy)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".pt")
    with os.fdopen(fd, "wb") as f:
        torch.save({"state": model.state(), "losses": torch.tensor(losses, dtype=torch.float64)}, f)
    os.replace(tmp, path)
    return model, losses


# ---- GRPO --------------------------------------------------------------------------------


class TransformerTrainer(GRPOTrainer):
    """``GRPOTrainer`` with the transformer behind its policy hooks; the step is the same."""

    def _optimizer(self) -> torch.optim.Optimizer:
        deterministic()
        return torch.optim.Adam(self.model.net.parameters(), lr=self.c.lr)

    def _forward(self, progs: Programs) -> tuple[np.ndarray, Any]:
        logits = self.model.step_logits(progs).reshape(-1, rules.N_ACTIONS)
        return logits.detach().numpy(), (logits, progs)

    def _reference_log_probs(self, progs: Programs, saved: Any) -> np.ndarray:
        # the programs the policy's forward pass saw (a test-writer may since have added tests)
        return self.reference.log_probs(saved[1]).reshape(-1, rules.N_ACTIONS)

    def _update(self, saved: Any, dz: np.ndarray) -> None:
        self.opt.zero_grad(set_to_none=True)
        saved[0].backward(torch.from_numpy(dz.astype(np.float32)))
        self.opt.step()

    def mean_kl(self, start: TransformerPolicy, programs: Programs) -> float:
        logp, logq = self.model.log_probs(programs), start.log_probs(programs)
        return float((np.exp(logp) * (logp - logq)).sum(-1).mean())

    def extra_results(self, start: TransformerPolicy) -> dict[str, Any]:
        from verigap.patchworld.probes import probe_report

        return {
            "probes": probe_report(
                start,
                self.model,
                self.c.k,
                self.c.seed,
                lambda p: self.c.programs_as_configured(p, 0),
            )
        }

    def save(self, run_dir: Path) -> None:
        torch.save(self.model.state(), Path(run_dir) / "policy.pt")
