"""Both substrates are deterministic, log every required metric, and (slow) learn CartPole."""

import json

import numpy as np
import pytest

from verigap.runs import read_jsonl, run_jobs
from verigap.silentbug.bank import broken_files, load_registry
from verigap.silentbug.runner import plan_run
from verigap.silentbug.substrate import pristine_files
from verigap.silentbug.substrates import ppo_single
from verigap.silentbug.substrates.ppo_modular import train as modular_train

ITERATION_KEYS = {
    "value_loss",
    "policy_loss",
    "entropy",
    "old_approx_kl",
    "approx_kl",
    "clipfrac",
    "explained_variance",
    "learning_rate",
    "grad_norm",
    "sps",
}


def _single(tmp, seed, env_id="CartPole-v1"):
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / f"c{seed}.json"
    cfg.write_text(
        json.dumps({"seed": seed, "env_id": env_id, "total_timesteps": 1024, "num_steps": 64})
    )
    ppo_single.main(["--config", str(cfg), "--run-dir", str(tmp / f"s{seed}")])
    return read_jsonl(tmp / f"s{seed}" / "metrics.jsonl")


def _modular(tmp, seed, env_id="CartPole-v1"):
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / f"m{seed}.json"
    cfg.write_text(
        json.dumps({"seed": seed, "env_id": env_id, "total_timesteps": 1024, "horizon": 64})
    )
    out = tmp / f"m{seed}-{env_id}"
    modular_train.main(["--config", str(cfg), "--run-dir", str(out)])
    return read_jsonl(out / "metrics.jsonl")


def _without_timing(records):
    return [{k: v for k, v in r.items() if k != "sps"} for r in records]


@pytest.mark.parametrize("run", [_single, _modular], ids=["single", "modular"])
def test_same_seed_same_numbers_and_all_metrics_logged(tmp_path, run):
    a = run(tmp_path / "a", 5)
    b = run(tmp_path / "b", 5)
    c = run(tmp_path / "c", 6)
    assert _without_timing(a) == _without_timing(b)
    assert _without_timing(a) != _without_timing(c)
    iters = [r for r in a if r["kind"] == "iteration"]
    assert len(iters) == 4 and ITERATION_KEYS <= set(iters[0])
    eps = [r for r in a if r["kind"] == "episode"]
    assert eps and {"global_step", "return", "length"} <= set(eps[0])


def test_modular_runs_acrobot(tmp_path):
    recs = _modular(tmp_path, 1, "Acrobot-v1")
    assert any(r["kind"] == "iteration" for r in recs)


def _score(substrate, label, files, seeds, tmp):
    jobs = [plan_run(tmp, substrate, label, files, {}, s) for s in seeds]
    res = run_jobs(jobs, executor="process", workers=2, progress=False)
    assert all(r["status"] == "ok" for r in res.values())
    return [r["score"] for r in res.values()], jobs


@pytest.mark.slow
def test_both_cartpole_substrates_learn_and_the_dead_surrogate_does_not(tmp_path):
    """40k steps: clean runs learn (seed 003's clean reference is ~175); the recomputed
    old log-prob freezes the policy exactly (approx_kl and clipfrac are 0)."""
    files = pristine_files()
    single, _ = _score("cartpole_single", "clean", files, [1, 2], tmp_path)
    modular, _ = _score("cartpole_modular", "clean", files, [1, 2], tmp_path)
    assert np.mean(single) > 120 and np.mean(modular) > 120, (single, modular)
    bug = load_registry().get("single_recomputed_old_logprob")
    broken, jobs = _score(bug.substrate, bug.id, broken_files(bug), [1], tmp_path)
    assert broken[0] < 60
    iters = [r for r in read_jsonl(jobs[0].run_dir / "metrics.jsonl") if r["kind"] == "iteration"]
    assert all(r["approx_kl"] == 0.0 and r["clipfrac"] == 0.0 for r in iters)
