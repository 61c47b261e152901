"""Patch World GRPO trained through the HTTP API: the end-to-end example of ``verigap serve``.

The trainer holds only the policy. Every step it resets one server-side Patch World session on
the step's programs (``programs`` x ``group`` episodes, the same pool
:class:`verigap.patchworld.grpo.GRPOTrainer` draws from), reads the observations, samples the
actions, steps the episodes over HTTP and learns from the rewards the server pays. Features are
built from the observations alone (broken branches are acted on in ascending order, so the
acting order is the observation's ``broken`` mask), and sampling consumes the random stream in
the same order as the in-process trainer, so with a reward scheme that draws no randomness
(visible, oracle, deletion) the two runs give the same numbers: ``tests/server`` checks it.

    python -m verigap.server.grpo_http --steps 20   # writes results/server/grpo_http.json
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from verigap.errors import ConfigError
from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer, group_advantages
from verigap.patchworld.policy import (
    MLP,
    Adam,
    all_features,
    categorical_kl,
    grad_kl_wrt_logits,
    log_softmax,
    sample,
)
from verigap.patchworld.programs import Programs
from verigap.rewards import RewardScheme
from verigap.server._client import RemoteSession, patchworld_arrays

POOL_SEED = 20_000  # GRPOTrainer's pool: generate(k, steps * programs, seed=20_000 + seed)


def scheme_spec(scheme: RewardScheme) -> str:
    """The short form the server parses, for schemes whose payout draws no randomness."""
    d = scheme.model_dump()
    if d["kind"] in ("visible", "oracle"):
        return d["kind"]
    if d["kind"] == "deletion_penalty":
        return f"deletion:{d['per_deletion']}"
    raise ConfigError(
        f"reward {scheme.label}: its payout draws random numbers on the server, "
        "so an HTTP run cannot match the in-process one number for number; use "
        "visible, oracle or deletion"
    )


def programs_from_observation(obs: dict[str, np.ndarray], k: int) -> Programs:
    """What the policy's features need, rebuilt from a served observation. The reference and
    family are not observed and stay unknown (-1)."""
    broken = obs["broken"].astype(bool)
    order = np.argsort(~broken, axis=1, kind="stable")[:, :k]  # broken branches, ascending
    b = broken.shape[0]
    return Programs(
        reference=np.full_like(obs["values"], -1),
        shown=obs["values"],
        broken=broken,
        tested=obs["tested"].astype(bool),
        strict=obs["strict"].astype(bool),
        family=np.full(b, -1),
        order=order,
    )


class HTTPGRPOTrainer:
    """:class:`GRPOTrainer`'s update, with the episodes played on a server."""

    def __init__(self, config: GRPOConfig, start: MLP, session: RemoteSession) -> None:
        scheme_spec(config.reward)
        self.c = config
        self.session = session
        self.model = start.copy()
        self.reference = start.copy()
        self.opt = Adam(self.model.params(), config.lr)
        self.rng = np.random.default_rng([config.seed, 2])
        self.pool_size = max(1, config.steps) * config.programs

    def step(self, i: int) -> dict[str, float]:
        c = self.c
        idx = np.arange(i * c.programs, (i + 1) * c.programs) % self.pool_size
        b, k, g = c.programs, c.k, c.group
        out = self.session.reset(
            seed=i,
            options={
                "pool_seed": POOL_SEED + c.seed,
                "pool_size": self.pool_size,
                "indices": np.repeat(idx, g).tolist(),
            },
        )
        progs = programs_from_observation(patchworld_arrays(out["observation"]), k)
        progs = progs[np.arange(0, b * g, g)]  # one row per program; the group shares it
        # ALGO LOGIC: the same forward pass and sampling order as GRPOTrainer.step
        x = all_features(progs).reshape(b * k, -1)
        logits, h = self.model.forward(x)
        logp = log_softmax(logits)
        logq = self.reference.log_probs(x)
        actions = np.stack([sample(logp, self.rng) for _ in range(g)], axis=1)  # (b*k, g)
        episode_actions = actions.reshape(b, k, g).transpose(0, 2, 1).reshape(b * g, k)
        for t in range(k):  # the environment steps happen on the server
            out = self.session.step({"actions": episode_actions[:, t].tolist()})
        final = out["observation"]
        reward = np.asarray(final["rewards"], dtype=np.float64)
        verdicts = final["verdict"]
        adv = group_advantages(reward.reshape(b, g))
        n_samples = b * g * k
        adv_rows = np.repeat(adv, k, axis=0)
        p = np.exp(logp)
        dz = p * adv_rows.sum(1, keepdims=True)
        rows = np.repeat(np.arange(b * k), g)
        np.add.at(dz, (rows, actions.reshape(-1)), -adv_rows.reshape(-1))
        dz /= n_samples
        dz += c.kl_coef * grad_kl_wrt_logits(logp, logq) / (b * k)
        self.opt.step(self.model.backward(x, h, dz.astype(np.float32)))
        metrics = {
            "reward": float(reward.mean()),
            "train_pass": float(np.mean([v["passed"] for v in verdicts])),
            "kl": float(categorical_kl(logp, logq).mean()),
            "zero_variance_groups": float((np.abs(adv).sum(1) == 0).mean()),
        }
        if "correct" in verdicts[0]:  # only when the operator reveals the truth
            metrics["train_correct"] = float(np.mean([v["correct"] for v in verdicts]))
        return metrics


def compare(config: GRPOConfig, start: MLP, session: RemoteSession) -> dict[str, Any]:
    """Train ``config.steps`` steps in-process and over HTTP from ``start``; the per-step metrics
    of both and the largest parameter difference at the end."""
    local, remote = GRPOTrainer(config, start), HTTPGRPOTrainer(config, start, session)
    rows = []
    t_local = t_http = 0.0
    for i in range(config.steps):
        t0 = time.perf_counter()
        a = local.step(i)
        t1 = time.perf_counter()
        b = remote.step(i)
        t_http += time.perf_counter() - t1
        t_local += t1 - t0
        rows.append({"step": i, "in_process": a, "http": b})
    diff = max(
        float(np.abs(p - q).max())
        for p, q in zip(local.model.params(), remote.model.params(), strict=True)
    )
    return {"steps": rows, "max_param_abs_diff": diff, "in_process_s": t_local, "http_s": t_http}


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - exercised via tests
    import tempfile
    from pathlib import Path

    from verigap.patchworld.sft import SFTConfig, sft
    from verigap.results import write_result
    from verigap.server import BackgroundServer, Client, ServerConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--programs", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--sft-programs", type=int, default=2000)
    ap.add_argument("--out", default="results/server/grpo_http.json")
    a = ap.parse_args(argv)
    config = GRPOConfig(
        steps=a.steps, programs=a.programs, group=a.group, sft=SFTConfig(programs=a.sft_programs)
    )
    start, _ = sft(config.k, config.seed, config.sft)
    with (
        tempfile.TemporaryDirectory() as root,
        BackgroundServer(ServerConfig(root=Path(root), reveal_truth=True)) as url,
        Client(url) as client,
    ):
        with client.session("patchworld", k=config.k, reward=scheme_spec(config.reward)) as s:
            res = compare(config, start, s)
    same = all(r["in_process"][key] == r["http"][key] for r in res["steps"] for key in r["http"])
    data = {"config": config.model_dump(mode="json"), "equal_metrics": same, **res}
    cmd = "python -m verigap.server.grpo_http " + " ".join(sys.argv[1:] if argv is None else argv)
    write_result(Path(a.out), data, command=cmd.strip())
    print(
        f"{a.steps} steps: metrics equal={same}, max |param diff|="
        f"{res['max_param_abs_diff']:.3g}; in-process {res['in_process_s']:.2f} s, "
        f"over HTTP {res['http_s']:.2f} s"
    )


if __name__ == "__main__":  # pragma: no cover
    main()
