"""The pilot's faster paths give the very numbers of the plain ones.

``all_features`` builds every step's observation in one pass and ``sample_group`` draws a whole
GRPO group at once; both must equal the per-step and per-sample code bit for bit, or the pilot's
per-seed results would move. ``train_group`` trains several runs side by side; each run's
result, metrics and policy must equal what ``train`` gives it alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verigap.errors import ConfigError
from verigap.patchworld.group import GroupTrainer, train_group
from verigap.patchworld.grpo import GRPOConfig, train
from verigap.patchworld.pilot import group_jobs, jobs
from verigap.patchworld.policy import (
    N_FEATURES,
    Adam,
    all_features,
    categorical_kl,
    count_below,
    features,
    grad_kl_wrt_logits,
    kl_with_grad,
    sample,
    sample_group,
)
from verigap.patchworld.programs import generate
from verigap.patchworld.sft import SFTConfig
from verigap.rewards import Audit, DeletionPenalty, Visible
from verigap.runs import read_jsonl


@pytest.mark.parametrize("k", [1, 2, 4, 10])
def test_all_features_equals_stacked_per_step_features(k):
    programs = generate(k, 200, seed=30 + k)
    fast = all_features(programs)
    plain = np.stack([features(programs, t) for t in range(k)], axis=1)
    assert fast.shape == (200, k, N_FEATURES)
    assert fast.dtype == plain.dtype == np.float32
    assert np.array_equal(fast, plain)
    assert fast.any(axis=2).all()  # every row carries an observation (a zero row would pass)


@pytest.mark.parametrize(("rows", "n"), [(1, 1), (64, 8), (13, 3)])
def test_sample_group_draws_what_repeated_sample_draws(rows, n):
    logp = np.log(np.random.default_rng(rows).dirichlet(np.ones(34) * 0.3, rows)).astype(np.float32)
    fast_rng, plain_rng = np.random.default_rng(7), np.random.default_rng(7)
    fast = sample_group(logp, fast_rng, n)
    plain = np.stack([sample(logp, plain_rng) for _ in range(n)], axis=1)
    assert fast.shape == (rows, n)
    assert np.array_equal(fast, plain)
    assert fast_rng.random() == plain_rng.random()  # the stream continues where it did
    if rows * n > 8:
        assert len(np.unique(fast)) > 1  # real draws, not one repeated action


def test_count_below_counts_what_the_float64_comparison_counts():
    rng = np.random.default_rng(11)
    cdf = np.cumsum(rng.dirichlet(np.ones(34) * 0.3, 400), axis=1).astype(np.float32)
    u = rng.random((5, 400, 1)) * cdf[:, -1:]  # as sample_group draws them
    # ties and near-ties: u equal to an entry, or one float64 step either side of it
    at = cdf[np.arange(400), rng.integers(0, 34, 400)].astype(np.float64)[:, None]
    for v in (u, at, np.nextafter(at, 0.0), np.nextafter(at, 2.0)):
        fast = count_below(cdf, v)
        assert fast.dtype == np.int64
        assert np.array_equal(fast, (cdf.astype(np.float64) < v).sum(axis=-1))
    assert len(np.unique(count_below(cdf, u))) > 5  # varied counts, not one value


def test_content_hash_is_the_plain_column_by_column_hash():
    programs = generate(4, 300, seed=21)
    parts = [programs.reference, programs.shown, programs.broken, programs.tested, programs.strict]
    cols = np.concatenate([np.asarray(p, dtype=np.uint64) for p in parts], axis=1)
    h = np.full(programs.size, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(cols.shape[1]):
            h = (h ^ (cols[:, j] + np.uint64(j * 0x9E3779B1))) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
    assert np.array_equal(programs.content_hash(), h)
    assert len(np.unique(h)) == programs.size


# ---- groups of runs (pilot sweep) ----------------------------------------------------------

TINY = {
    "k": 3,
    "steps": 6,
    "programs": 16,
    "group": 8,
    "lr": 0.02,
    "monitor_programs": 60,
    "eval_programs": 120,
    "log_every": 3,
    "sft": SFTConfig(programs=2000, epochs=2),
}


def _run_files(d: Path) -> tuple[str, list[np.ndarray]]:
    with np.load(d / "policy.npz") as z:
        return (d / "metrics.jsonl").read_text(), [z[f] for f in z.files]


def _plain_adam(params, grads_seq, lr, betas=(0.9, 0.999), eps=1e-8):
    """The Adam update as one expression per parameter, with NumPy's float64 scalars."""
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2 = betas
    for t, grads in enumerate(grads_seq, start=1):
        step = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        e = eps * np.sqrt(1 - b2**t)
        for p, g, mm, vv in zip(params, grads, m, v, strict=True):
            mm *= b1
            mm += (1 - b1) * g
            vv *= b2
            vv += (1 - b2) * (g * g)
            p -= (step * mm / (np.sqrt(vv) + e)).astype(p.dtype)


def test_adam_with_buffers_takes_the_plain_expression_s_steps_bit_for_bit():
    rng = np.random.default_rng(3)
    shapes = [(287, 128), (128,), (3, 128, 34)]  # a stacked (group) parameter too
    start = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [
        [(rng.standard_normal(s) * 10.0 ** rng.integers(-6, 2)).astype(np.float32) for s in shapes]
        for _ in range(30)
    ]
    fast, plain = [p.copy() for p in start], [p.copy() for p in start]
    opt = Adam(fast, lr=3e-3)
    for g in grads:
        opt.step(g)
    _plain_adam(plain, grads, lr=3e-3)
    for f, p, s in zip(fast, plain, start, strict=True):
        assert f.dtype == np.float32
        assert np.array_equal(f, p)
        assert not np.array_equal(f, s)  # the steps moved the parameters
    # a float32 division instead of float64 differs somewhere: the check can fail
    lossy = [p.copy() for p in start]
    m = [np.zeros_like(p) for p in start]
    for p, g, mm in zip(lossy, grads[0], m, strict=True):
        mm += 0.1 * g
        p -= (
            np.float32(3e-3 * np.sqrt(1e-3) / 0.1)
            * mm
            / (np.sqrt(np.float32(1e-3) * g * g) + np.float32(1e-8 * np.sqrt(1e-3)))
        )
    one = [p.copy() for p in start]
    Adam(one, lr=3e-3).step(grads[0])
    assert not all(np.array_equal(a, b) for a, b in zip(one, lossy, strict=True))


def test_kl_with_grad_equals_the_two_plain_functions():
    rng = np.random.default_rng(5)
    logp, logq = (
        np.log(rng.dirichlet(np.ones(34) * 0.4, (3, 50))).astype(np.float32) for _ in range(2)
    )
    kl, grad = kl_with_grad(logp, logq, np.exp(logp))
    assert np.array_equal(kl, categorical_kl(logp, logq))
    assert np.array_equal(grad, grad_kl_wrt_logits(logp, logq))
    assert (kl > 0).all()


SEEDS_REWARDS = {
    # two seeds, members gather their seed's programs and reference
    "mixed": (
        (0, Visible()),
        (1, Audit(rate=0.5)),
        (0, Audit(rate=0.25)),
        (1, DeletionPenalty(per_deletion=0.5)),
    ),
    # one seed: every member reads the seed's observations by broadcasting
    "one_seed": ((0, Visible()), (0, Audit(rate=0.5)), (0, DeletionPenalty(per_deletion=0.5))),
    # one member per seed, in seed order: each member reads its own seed's observations
    "seed_each": ((0, Visible()), (1, Visible()), (2, Visible())),
}


@pytest.mark.parametrize("layout", list(SEEDS_REWARDS))
def test_a_group_trains_every_run_to_the_numbers_it_gets_alone(tmp_path, monkeypatch, layout):
    # four rewards, two of which draw from the run's generator (audits) besides the sampling;
    # observations built 4 steps at a time, so the 6 steps cross a chunk boundary
    monkeypatch.setattr(GroupTrainer, "CHUNK", 4)
    configs = [GRPOConfig(seed=s, reward=r, **TINY) for s, r in SEEDS_REWARDS[layout]]
    alone = [
        train(tmp_path / "alone" / str(j), c, sft_cache=tmp_path / "sft")
        for j, c in enumerate(configs)
    ]
    dirs = [tmp_path / "group" / str(j) for j in range(len(configs))]
    first = train_group(
        dirs[0],
        [c.model_dump(mode="json") for c in configs],
        sft_cache=tmp_path / "sft",
        other_dirs=dirs[1:],
    )
    together = [first] + [json.loads((d / "result.json").read_text()) for d in dirs[1:]]
    assert not (dirs[0] / "result.json").exists()  # the executor writes the first one last
    for j, (a, g) in enumerate(zip(alone, together, strict=True)):
        a = json.loads(json.dumps(a))
        assert a.pop("wall_s") > 0 and g.pop("wall_s") > 0
        assert g == a
        metrics_a, policy_a = _run_files(tmp_path / "alone" / str(j))
        metrics_g, policy_g = _run_files(dirs[j])
        assert metrics_g == metrics_a
        assert all(np.array_equal(x, y) for x, y in zip(policy_a, policy_g, strict=True))
    # the runs really differ from each other, and training moved the policy
    assert len({json.dumps(r["final"], sort_keys=True) for r in together}) > 1
    assert min(r["kl_final"] for r in together) > 0
    if layout != "seed_each":
        assert read_jsonl(dirs[1] / "metrics.jsonl")[1]["audited"] > 0


def test_a_group_takes_only_runs_that_differ_in_seed_and_reward(tmp_path):
    with pytest.raises(ConfigError, match="seed and reward"):
        train_group(
            tmp_path / "a",
            [GRPOConfig(**TINY), GRPOConfig(**{**TINY, "k": 4})],
            other_dirs=[tmp_path / "b"],
        )
    with pytest.raises(ConfigError, match="2 configs but 1 run"):
        train_group(tmp_path / "a", [GRPOConfig(**TINY), GRPOConfig(**{**TINY, "seed": 1})])


def test_the_sweep_groups_runs_that_share_a_start_and_joins_the_lone_ones(tmp_path):
    groups = group_jobs(jobs(tmp_path))
    members = [[g.run_dir, *g.kwargs["other_dirs"]] for g in groups]
    runs = [d for m in members for d in m]
    assert sorted(runs) == sorted(j.run_dir for j in jobs(tmp_path))  # each run exactly once
    by_first = {m[0].relative_to(tmp_path).as_posix(): m for m in members}
    assert sorted(len(m) for m in members) == [3] * 6 + [8] * 3
    assert {d.name for d in by_first["visible/seed1"]} == {"seed1"}  # k=4: one seed each
    assert {d.parent.name for d in by_first["visible_k6/seed0"]} == {"visible_k6"}
    for g in groups:
        cfgs = [GRPOConfig.model_validate(c) for c in g.kwargs["configs"]]
        assert len({(c.k, c.steps) for c in cfgs}) == 1
    quick = group_jobs(jobs(tmp_path, quick=True, seeds=(0,)))
    assert sorted(len(g.kwargs["configs"]) for g in quick) == [1] * 6 + [8]
