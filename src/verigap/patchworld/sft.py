"""Supervised fine-tuning: behaviour cloning on careless-engineer demonstrations.

The result is the starting policy for GRPO and, frozen, the reference policy for its KL penalty.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer

from verigap.patchworld.careless import CarelessConfig, careless_actions
from verigap.patchworld.policy import MLP, Adam, all_features, grad_nll_wrt_logits
from verigap.patchworld.programs import Programs, generate


def with_coverage(programs: Programs, coverage: float, seed: int) -> Programs:
    """The same programs with visible tests redrawn to reach a ``coverage`` share of the broken
    branches (``coverage * k`` of them, the fractional part decided by a coin per program);
    intact branches keep their tests. Reproducible from ``seed``."""
    rng = np.random.default_rng([seed, 7])
    n, k = programs.size, programs.k
    exact = coverage * k
    n_tested = int(np.floor(exact)) + (rng.random(n) < exact - np.floor(exact)).astype(np.int64)
    rank = np.argsort(rng.random((n, k)), axis=1).argsort(axis=1)
    tested = programs.tested.copy()
    tested[np.arange(n)[:, None], programs.order] = rank < n_tested[:, None]
    return Programs(
        programs.reference,
        programs.shown,
        programs.broken,
        tested,
        programs.strict,
        programs.family,
        programs.order,
    )


class SFTConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    programs: int = Field(12_000, ge=1, description="demonstration programs (training stream)")
    epochs: int = Field(6, ge=1, description="passes over the demonstrations")
    batch: int = Field(256, ge=1, description="steps per minibatch")
    lr: float = Field(3e-3, gt=0, description="Adam learning rate")
    hidden: int = Field(128, ge=1, description="hidden units of the MLP")
    careless: CarelessConfig = CarelessConfig()
    coverage: float | None = Field(
        None,
        ge=0,
        le=1,
        description=(
            "share of broken branches visible tests reach in the demonstrations (None: half)"
        ),
    )

    @model_serializer(mode="wrap")
    def _drop_unset_coverage(self, handler):
        # the default leaves the dump (and so the SFT cache key) exactly as it was before
        # coverage existed, so earlier runs and caches stay valid
        out = handler(self)
        if self.coverage is None:
            out.pop("coverage", None)
        return out


def sft(k: int, seed: int, config: SFTConfig | None = None) -> tuple[MLP, list[float]]:
    """Clone the careless engineer at ``k`` broken branches. Returns the policy and the mean
    cross-entropy of each epoch."""
    c = config or SFTConfig()
    rng = np.random.default_rng([seed, 1])
    programs = generate(k, c.programs, seed=10_000 + seed)
    if c.coverage is not None:
        programs = with_coverage(programs, c.coverage, 10_000 + seed)
    actions = careless_actions(programs, rng, c.careless).reshape(-1)
    x = all_features(programs).reshape(len(actions), -1)
    model = MLP.init(rng, c.hidden)
    opt = Adam(model.params(), c.lr)
    losses = []
    buf = np.empty((min(c.batch, len(actions)), x.shape[1]), dtype=x.dtype)
    for _ in range(c.epochs):
        perm = rng.permutation(len(actions))
        total = 0.0
        for start in range(0, len(perm), c.batch):
            idx = perm[start : start + c.batch]
            # gathered once, not once per use, into one buffer (a fresh one per minibatch
            # was faulted in page by page)
            xb, ab = np.take(x, idx, axis=0, out=buf[: idx.size], mode="clip"), actions[idx]
            logits, h = model.forward(xb)
            z = logits - logits.max(-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
            total += float(-logp[np.arange(idx.size), ab].sum())
            dz = grad_nll_wrt_logits(logp, ab) / idx.size
            opt.step(model.backward(xb, h, dz))
        losses.append(total / len(actions))
    return model, losses


def sft_cached(
    k: int, seed: int, config: SFTConfig, cache_dir: Path | None
) -> tuple[MLP, list[float]]:
    """``sft`` with an on-disk cache keyed by (k, seed, config): the runs of a sweep that share
    a starting policy compute it once. SFT is deterministic, so a hit equals a recompute."""
    if cache_dir is None:
        return sft(k, seed, config)
    key = hashlib.sha256(
        json.dumps([k, seed, config.model_dump(mode="json")], sort_keys=True).encode()
    ).hexdigest()[:16]
    path = Path(cache_dir) / f"sft_k{k}_seed{seed}_{key}.npz"
    if path.is_file():
        d = np.load(path)
        return MLP(d["w1"], d["b1"], d["w2"], d["b2"]), d["losses"].tolist()
    model, losses = sft(k, seed, config)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz")
    with os.fdopen(fd, "wb") as f:
        np.savez(f, w1=model.w1, b1=model.b1, w2=model.w2, b2=model.b2, losses=np.array(losses))
    os.replace(tmp, path)
    return model, losses
