"""SFT, GRPO and the pilot sweep: determinism, resume, and (slow) the reward-hacking shape."""

import json

import numpy as np
import pytest

from verigap.errors import ConfigError
from verigap.patchworld.grpo import GRPOConfig, train
from verigap.patchworld.pilot import jobs, run_pilot, settings
from verigap.patchworld.sft import SFTConfig, sft
from verigap.rewards import Audit, Oracle, Visible
from verigap.runs import read_jsonl

TINY = {
    "steps": 6,
    "programs": 8,
    "group": 4,
    "monitor_programs": 50,
    "eval_programs": 100,
    "log_every": 3,
    "sft": SFTConfig(programs=300, epochs=1),
}


def test_sft_learns_from_the_careless_engineer():
    _, losses = sft(4, 0, SFTConfig(programs=2000, epochs=3))
    assert losses[-1] < losses[0] < np.log(34)


def test_same_seed_same_numbers_bit_for_bit(tmp_path):
    a = train(tmp_path / "a", GRPOConfig(seed=3, reward=Audit(rate=0.5), **TINY))
    b = train(tmp_path / "b", GRPOConfig(seed=3, reward=Audit(rate=0.5), **TINY))
    c = train(tmp_path / "c", GRPOConfig(seed=4, reward=Audit(rate=0.5), **TINY))
    for key in ("start", "final", "kl_final", "sft_loss"):
        assert a[key] == b[key]
    assert (tmp_path / "a/metrics.jsonl").read_text() == (tmp_path / "b/metrics.jsonl").read_text()
    assert a["final"] != c["final"] or a["kl_final"] != c["kl_final"]
    assert np.array_equal(
        np.load(tmp_path / "a/policy.npz")["arr_0"], np.load(tmp_path / "b/policy.npz")["arr_0"]
    )


def test_metrics_log_every_field(tmp_path):
    train(tmp_path, GRPOConfig(**TINY))
    recs = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in recs] == [0, 3, 6]
    for key in ("visible_pass", "true_success", "false_success", "outcomes"):
        assert key in recs[0]
    for key in ("reward", "kl", "train_pass", "train_correct", "audited", "caught"):
        assert key in recs[1]
    assert recs[1]["kl"] >= 0
    assert json.loads((tmp_path / "config.json").read_text())["reward"] == {"kind": "visible"}


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="group"):
        GRPOConfig(group=1)
    with pytest.raises(ValueError, match="rate"):
        GRPOConfig.model_validate({"reward": {"kind": "audit", "rate": 2}})


def test_pilot_has_fourteen_settings_three_seeds(tmp_path):
    s = settings()
    assert len(s) == 14
    assert sorted({x.k for x in s}) == [1, 2, 3, 4, 6, 8, 10]
    assert len(jobs(tmp_path)) == 42
    assert {x.name for x in settings(long=True)} == {"long_visible", "long_audit_25"}


def test_pilot_resumes_without_redoing_finished_runs(tmp_path, monkeypatch):
    import verigap.patchworld.pilot as pilot

    monkeypatch.setattr(pilot, "QUICK", {**TINY, "steps": 2})
    first = run_pilot(tmp_path, quick=True, executor="serial", seeds=(0,), progress=False)
    assert len(first) == 14
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/seed0/result.json")}
    (tmp_path / "oracle/seed0/result.json").unlink()
    calls = []
    real = pilot.train_group
    monkeypatch.setattr(
        pilot,
        "train_group",
        lambda d, configs, **k: calls.append(len(configs)) or real(d, configs, **k),
    )
    again = run_pilot(tmp_path, quick=True, executor="serial", seeds=(0,), progress=False)
    assert calls == [1]  # only the deleted run was redone
    assert again["visible/seed0"] == first["visible/seed0"]
    assert all(p.stat().st_mtime_ns == t for p, t in stamp.items() if "oracle" not in str(p))
    # a finished run with a different config is an error, not a silent reuse
    monkeypatch.setattr(pilot, "QUICK", {**TINY, "steps": 3})
    with pytest.raises(ConfigError, match="different config"):
        run_pilot(tmp_path, quick=True, executor="serial", seeds=(0,), progress=False)


@pytest.mark.slow
def test_visible_reward_teaches_the_hack_and_full_audits_prevent_it(tmp_path):
    """The seed's headline, at 1/3 of its budget: visible-only GRPO raises passing and drives
    false success up; auditing every episode keeps it near zero; oracle reward never pays it."""
    short = {"steps": 300, "eval_programs": 1000, "monitor_programs": 200, "log_every": 100}
    vis = train(tmp_path / "v", GRPOConfig(reward=Visible(), **short))
    aud = train(tmp_path / "a", GRPOConfig(reward=Audit(rate=1.0), **short))
    ora = train(tmp_path / "o", GRPOConfig(reward=Oracle(), **short))
    assert vis["final"]["visible_pass"] > vis["start"]["visible_pass"] + 0.1
    assert vis["final"]["true_success"] < vis["start"]["true_success"] - 0.1
    assert vis["final"]["false_success"] > 0.3
    assert aud["final"]["false_success"] < 0.05
    assert ora["final"]["false_success"] < 0.05
    untested_deletes = vis["final"]["outcomes"]["untested/delete"]
    assert untested_deletes > 2 * vis["start"]["outcomes"]["untested/delete"]


def test_sft_cache_returns_the_same_policy(tmp_path):
    from verigap.patchworld.sft import sft_cached

    cfg = SFTConfig(programs=200, epochs=1)
    a, la = sft_cached(4, 1, cfg, tmp_path)
    b, lb = sft_cached(4, 1, cfg, tmp_path)  # from disk
    c, _ = sft(4, 1, cfg)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    assert la == lb
    for x, y, z in zip(a.params(), b.params(), c.params(), strict=True):
        assert np.array_equal(x, y) and np.array_equal(x, z)
