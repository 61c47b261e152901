"""Several pilot runs trained side by side in one process, each with the very numbers ``train``
gives it alone.

The pilot's runs differ only in seed and reward scheme. A group stacks its members' MLPs along a
leading axis, so one GRPO step is one NumPy call per operation for the whole group instead of
one per run: at the pilot's sizes (32 programs x 4 steps) the calls' overhead, not their
arithmetic, was most of a step's time. Members that share a seed also share their starting
policy, training programs, observations and reference log-probabilities, computed once for them.

Why the numbers stay the same: ``np.matmul`` on stacked arrays calls the same BLAS product per
member as the 2-D ``@`` does; every other operation works element by element or along one row
(softmaxes, sampling, grading, group advantages); each member draws from its own generators in
the same order as alone; and means that a sum's order could change are taken per member.
``tests/patchworld/test_speed_equivalence.py`` checks whole runs bit for bit against ``train``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from verigap.errors import ConfigError
from verigap.patchworld import rules
from verigap.patchworld.grpo import (
    GRPOConfig,
    _phases,
    evaluate,
    group_advantages,
    training_pools,
)
from verigap.patchworld.policy import (
    MLP,
    N_FEATURES,
    Adam,
    all_features,
    categorical_kl,
    count_below,
    features,
    kl_with_grad,
    log_softmax,
)
from verigap.patchworld.programs import Programs, generate, heldout_set
from verigap.patchworld.sft import sft_cached
from verigap.runs import METRICS, RESULT, JsonlWriter, write_json_atomic


def shape_key(config: GRPOConfig) -> str:
    """What members of one group must share: the config apart from seed and reward."""
    d = config.model_dump(mode="json")
    d.pop("seed")
    d.pop("reward")
    return json.dumps(d, sort_keys=True)


def _forward(x: np.ndarray, w1, b1, w2, b2) -> tuple[np.ndarray, np.ndarray]:
    """``MLP.forward`` for stacked parameters (M, ...) and observations (M, rows, F)."""
    h = np.tanh(np.matmul(x, w1) + b1[:, None, :])
    return np.matmul(h, w2) + b2[:, None, :], h


class GroupTrainer:
    """GRPO for several pilot configs at once (same ``shape_key``; pilot trainer, no options)."""

    def __init__(self, configs: list[GRPOConfig], starts: dict[int, MLP]) -> None:
        c = configs[0]
        if any(shape_key(o) != shape_key(c) for o in configs):
            raise ConfigError("a group's runs may differ only in seed and reward")
        if c.options is not None or c.policy.kind != "mlp" or len(_phases(c)) != 1:
            raise ConfigError("groups train the pilot's MLP trainer only (no options)")
        self.c, self.configs, self.m = c, configs, len(configs)
        self.seeds = sorted({o.seed for o in configs})
        self.su = np.array([self.seeds.index(o.seed) for o in configs])  # member -> seed slot
        self.pools = [
            training_pools(o)[0][1]
            for o in (next(x for x in configs if x.seed == s) for s in self.seeds)
        ]
        self.rngs = [np.random.default_rng([o.seed, 2]) for o in configs]
        ref = [starts[s] for s in self.seeds]
        self.ref = [np.stack([getattr(r, n) for r in ref]) for n in ("w1", "b1", "w2", "b2")]
        self.params = [w[self.su].copy() for w in self.ref]  # (M, ...) each, updated in place
        self.opt = Adam(self.params, c.lr)
        # the members' MLPs are views of the stacked parameters
        self.models = [MLP(*[w[j] for w in self.params]) for j in range(self.m)]
        b, g = c.programs, c.group
        self.ep_rows = (self.su[:, None] * b + np.repeat(np.arange(b), g)[None, :]).reshape(-1)
        self._chunk: tuple[int, np.ndarray] = (-1, np.empty((0, 0)))
        # members' observations: the seeds' own when members and seeds line up (or one seed
        # serves all, by broadcasting), else gathered per member
        self.own = len(self.seeds) == 1 or np.array_equal(self.su, np.arange(self.m))

    CHUNK = 10  # steps whose observations are built in one ``all_features`` call per seed

    def observations(self, i: int) -> np.ndarray:
        """(U, rows, F): step ``i``'s observations per seed. They are built for ``CHUNK`` steps
        at a time (``all_features`` works program by program, so the values are the same), in
        place in one array per chunk; step ``i``'s are a view of it."""
        first, xs = self._chunk
        if not first <= i < first + xs.shape[1]:
            b, k, n = self.c.programs, self.c.k, min(self.CHUNK, max(1, self.c.steps - i))
            idx = np.arange(i * b, (i + n) * b)
            xs = np.zeros((len(self.pools), n, b * k, N_FEATURES), dtype=np.float32)
            for pool, out in zip(self.pools, xs, strict=True):
                all_features(pool[idx % pool.size], out=out.reshape(n * b, k, N_FEATURES))
            first = i
            self._chunk = (first, xs)
        return xs[:, i - first]

    def step(self, i: int) -> list[dict[str, float]]:
        c, m = self.c, self.m
        b, k, g = c.programs, c.k, c.group
        rows = b * k
        idx = np.arange(i * b, (i + 1) * b)
        progs = [pool[idx % pool.size] for pool in self.pools]
        xs = self.observations(i)  # (U, rows, F)
        x = xs if self.own else xs[self.su]
        logits, h = _forward(x, *self.params)
        logp = log_softmax(logits)  # (M, rows, 34)
        logq = log_softmax(_forward(xs, *self.ref)[0])[self.su]
        probs = np.exp(logp)
        # sample_group, member by member draws from each member's own generator
        cdf = np.cumsum(probs, axis=-1)
        u = np.stack([r.random((g, rows)) for r in self.rngs])[..., None] * cdf[:, None, :, -1:]
        actions = np.minimum(count_below(cdf[:, None], u), cdf.shape[-1] - 1)
        actions = actions.transpose(0, 2, 1)  # (M, rows, g)
        episodes = actions.reshape(m, b, k, g).transpose(0, 1, 3, 2).reshape(m * b * g, k)
        # each program's branches in acting order, gathered once per program, not per episode
        ordered = [
            np.concatenate([pr.at_order(name) for pr in progs])[self.ep_rows]
            for name in ("reference", "strict", "tested")
        ]
        grades = rules.grade_ordered(rules.check_action_values(episodes), *ordered)
        passed, correct = grades.passed.reshape(m, -1), grades.correct.reshape(m, -1)
        deletions = grades.deletions.reshape(m, -1)
        pays = [
            o.reward.pay_batch(passed[j], correct[j], deletions[j], self.rngs[j])
            for j, o in enumerate(self.configs)
        ]
        reward = np.stack([p.reward for p in pays])
        adv = group_advantages(reward.reshape(m, b, g))  # (M, b, g)
        adv_rows = np.repeat(adv, k, axis=1)  # (M, rows, g)
        dz = probs * adv_rows.sum(-1, keepdims=True)
        np.add.at(
            dz,
            (
                np.repeat(np.arange(m), rows * g),
                np.tile(np.repeat(np.arange(rows), g), m),
                actions.reshape(-1),
            ),
            -adv_rows.reshape(-1),
        )
        dz /= b * g * k
        kl, grad_kl = kl_with_grad(logp, logq, probs)
        dz += c.kl_coef * grad_kl / (b * k)
        dz = dz.astype(np.float32)
        dh = np.matmul(dz, self.params[2].transpose(0, 2, 1)) * (1.0 - h * h)
        self.opt.step(
            [
                np.matmul(x.transpose(0, 2, 1), dh),
                dh.sum(1),
                np.matmul(h.transpose(0, 2, 1), dz),
                dz.sum(1),
            ]
        )
        # a mean along the last axis sums each member's row as the 1-D mean does (a test checks)
        stats = {
            "reward": reward.mean(-1),
            "train_pass": passed.mean(-1),
            "train_correct": correct.mean(-1),
            "kl": kl.mean(-1),
            "audited": np.stack([p.audited for p in pays]).mean(-1),
            "caught": np.stack([p.caught for p in pays]).mean(-1),
            "zero_variance_groups": (np.abs(adv).sum(-1) == 0).mean(-1),
        }
        columns = {key: v.tolist() for key, v in stats.items()}
        return [{key: float(v[j]) for key, v in columns.items()} for j in range(m)]


def _feats(programs: Programs) -> list[np.ndarray]:
    return [features(programs, t) for t in range(programs.k)]


def train_group(
    run_dir: Path,
    configs: list[dict[str, Any] | GRPOConfig],
    sft_cache: Path | None = None,
    other_dirs: list[Path] = (),
) -> dict[str, Any]:
    """``train`` for several runs at once: ``configs[0]`` trains into ``run_dir`` and the rest
    into ``other_dirs``, each directory written as ``train`` would (config, metrics, policy),
    with result.json for the others; the first's result is returned, for the executor to write
    last. A run's ``wall_s`` is its share of the group's wall time."""
    cs = [c if isinstance(c, GRPOConfig) else GRPOConfig.model_validate(c) for c in configs]
    dirs = [Path(run_dir), *[Path(d) for d in other_dirs]]
    if len(dirs) != len(cs):
        raise ConfigError(f"train_group: {len(cs)} configs but {len(dirs)} run directories")
    for d, c in zip(dirs, cs, strict=True):
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(d / "config.json", c.model_dump(mode="json"))
    c = cs[0]
    t0 = time.perf_counter()
    with threadpool_limits(1):
        sfts = {
            s: sft_cached(c.k, s, c.sft_config(), sft_cache) for s in sorted({o.seed for o in cs})
        }
        trainer = GroupTrainer(cs, {s: start for s, (start, _) in sfts.items()})
        monitor = generate(c.k, c.monitor_programs, seed=1, stream="heldout")
        heldout = heldout_set(c.k, c.eval_programs)
        mon_feats, held_feats = _feats(monitor), _feats(heldout)
        logs = [JsonlWriter(d / METRICS) for d in dirs]
        try:
            windows: list[list[dict[str, float]]] = [[] for _ in cs]
            for i in range(c.steps + 1):
                if i % c.log_every == 0 or i == c.steps:
                    for j, model in enumerate(trainer.models):
                        rec = {"step": i, **evaluate(model, monitor, feats=mon_feats)}
                        if windows[j]:
                            rec |= {
                                key: float(np.mean([w[key] for w in windows[j]]))
                                for key in windows[j][0]
                            }
                        logs[j].write(rec)
                        windows[j] = []
                if i < c.steps:
                    for j, stats in enumerate(trainer.step(i)):
                        windows[j].append(stats)
        finally:
            for log in logs:
                log.close()
        x = all_features(heldout).reshape(heldout.size * heldout.k, -1)
        start_eval = {
            s: evaluate(start, heldout, feats=held_feats) for s, (start, _) in sfts.items()
        }
        start_logp = {s: start.log_probs(x) for s, (start, _) in sfts.items()}
        results = []
        for o, model in zip(cs, trainer.models, strict=True):
            results.append(
                {
                    "config": o.model_dump(mode="json"),
                    "setting": o.reward.label,
                    "start": start_eval[o.seed],
                    "final": evaluate(model, heldout, feats=held_feats),
                    "sft_loss": sfts[o.seed][1],
                    "kl_final": float(
                        categorical_kl(model.log_probs(x), start_logp[o.seed]).mean()
                    ),
                }
            )
    wall = (time.perf_counter() - t0) / len(cs)
    for d, model, result in zip(dirs, trainer.models, results, strict=True):
        result["wall_s"] = wall
        np.savez_compressed(d / "policy.npz", *model.params())
    for d, result in zip(dirs[1:], results[1:], strict=True):
        write_json_atomic(d / RESULT, result)
    return results[0]
