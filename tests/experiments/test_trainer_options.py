"""The configurable trainer: the pilot's numbers are unchanged by default, and each option does
what it says."""

import json
from pathlib import Path

import numpy as np
import pytest

from verigap.patchworld import rules
from verigap.patchworld.grpo import AuditSchedule, GRPOConfig, GRPOTrainer, _phases, train
from verigap.patchworld.policy import MLP
from verigap.patchworld.programs import FAMILIES, generate
from verigap.patchworld.sft import SFTConfig, with_coverage
from verigap.rewards import Audit, DeletionPenalty, Oracle, Visible
from verigap.runs import read_jsonl

# the pilot trainer before the experiment-log options existed produced these numbers
# (tests/experiments/golden_pilot_defaults.json, written by the pre-change code at this config)
GOLDEN = json.loads((Path(__file__).parent / "golden_pilot_defaults.json").read_text())
SMALL = {
    "steps": 10,
    "programs": 8,
    "group": 4,
    "monitor_programs": 50,
    "eval_programs": 100,
    "log_every": 5,
    "sft": SFTConfig(programs=1500, epochs=2),
}
SCHEMES = {
    "visible": Visible(),
    "audit": Audit(rate=0.5),
    "deletion": DeletionPenalty(),
    "oracle": Oracle(),
}


def _fingerprint(run_dir, result):
    recs = read_jsonl(run_dir / "metrics.jsonl")
    return {
        "start": result["start"],
        "final": result["final"],
        "monitor": [
            [r["step"], r["visible_pass"], r["false_success"], round(r.get("reward", 0), 6)]
            for r in recs
        ],
    }


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_defaults_reproduce_the_pilot_trainer(tmp_path, name):
    cfg = GRPOConfig(seed=1, reward=SCHEMES[name], **SMALL)
    got = _fingerprint(tmp_path / "a", train(tmp_path / "a", cfg, sft_cache=tmp_path / "sft"))
    assert got == GOLDEN[name]
    # neutral options take the same path: same numbers, plus the extra evaluations
    neutral = train(
        tmp_path / "b",
        GRPOConfig(seed=1, reward=SCHEMES[name], options={}, **SMALL),
        sft_cache=tmp_path / "sft",
    )
    assert _fingerprint(tmp_path / "b", neutral) == GOLDEN[name]
    assert set(neutral["final_by_family"]) == set(FAMILIES)


def test_config_dump_without_options_is_the_pilots():
    dump = GRPOConfig().model_dump(mode="json")
    assert "options" not in dump and "coverage" not in dump["sft"]
    assert GRPOConfig.model_validate(dump) == GRPOConfig()
    with_opts = GRPOConfig(options={"coverage": 0.75}).model_dump(mode="json")
    assert with_opts["options"]["coverage"] == 0.75
    assert GRPOConfig.model_validate(with_opts).sft_config().coverage == 0.75


def test_audit_options_need_an_audit_reward():
    with pytest.raises(ValueError, match="audit reward"):
        GRPOConfig(options={"audit_recall": 0.5})
    with pytest.raises(ValueError, match="k_curriculum"):
        GRPOConfig(options={"k_curriculum": [2, 11]})


def test_audit_schedules():
    ramp = AuditSchedule(kind="linear", start_rate=0.0, end_rate=0.4)
    assert [ramp.rate(0.9, i, 100) for i in (0, 50, 100)] == [0.0, 0.2, 0.4]
    front = AuditSchedule(kind="front_loaded", start_rate=0.5, end_rate=0.0, switch_at=0.2)
    assert [front.rate(0.9, i, 100) for i in (0, 19, 20, 99)] == [0.5, 0.5, 0.0, 0.0]
    assert AuditSchedule().rate(0.3, 7, 100) == 0.3


def test_coverage_redraws_tests_on_broken_branches_only():
    p = generate(4, 400, seed=3)
    for cov, want in ((0.0, 0), (0.25, 1), (0.75, 3), (1.0, 4)):
        q = with_coverage(p, cov, seed=5)
        assert (q.at_order("tested").sum(1) == want).all()
        assert np.array_equal(q.tested[~p.broken], p.tested[~p.broken])
    half = with_coverage(generate(3, 2000, seed=3), 0.5, seed=5).at_order("tested").sum(1)
    assert set(np.unique(half)) == {1, 2} and abs(half.mean() - 1.5) < 0.05


def _pay(options, reward, progs, actions, step=0, steps=10):
    cfg = GRPOConfig(reward=reward, options=options, steps=steps, programs=progs.size)
    trainer = GRPOTrainer(cfg, MLP.init(np.random.default_rng(0), 8))
    return trainer.pay(step, progs, rules.grade(progs, actions))


def test_recall_zero_never_catches_and_branch_audits_catch_only_bad_branches():
    progs = generate(4, 500, seed=1)
    ref = progs.at_order("reference")
    hack = np.where(progs.at_order("tested"), ref, rules.DELETE)  # visible green, wrong
    full = Audit(rate=1.0)
    assert _pay({}, full, progs, hack).caught.all()
    missed = _pay({"audit_recall": 0.0}, full, progs, hack)
    assert not missed.caught.any() and (missed.reward == 1.0).all()
    per_branch = _pay({"audit_unit": "branch"}, full, progs, hack)
    assert per_branch.caught.all()
    honest = _pay({"audit_unit": "branch"}, full, progs, ref)
    assert not honest.caught.any() and (honest.reward == 1.0).all()
    # a schedule at 0% audits nothing, whatever the reward's own rate
    off = _pay(
        {"audit_schedule": {"kind": "linear", "start_rate": 0, "end_rate": 0}}, full, progs, hack
    )
    assert not off.audited.any() and (off.reward == 1.0).all()


def test_oracle_family_pays_the_hidden_check_on_that_family_only():
    progs = generate(4, 500, seed=2)
    ref = progs.at_order("reference")
    hack = np.where(progs.at_order("tested"), ref, rules.DELETE)
    pay = _pay({"oracle_family": "periodic"}, Visible(), progs, hack)
    periodic = progs.family == FAMILIES.index("periodic")
    assert (pay.reward[periodic] == 0).all() and (pay.reward[~periodic] == 1).all()
    share = _pay({"oracle_share": 0.25}, Visible(), progs, hack).reward
    assert 0.15 < (share == 0).mean() < 0.35


def test_k_curriculum_phases_and_pools():
    cfg = GRPOConfig(steps=10, programs=4, options={"k_curriculum": [2, 4, 6]})
    assert _phases(cfg) == [(2, 3), (4, 4), (6, 3)]
    trainer = GRPOTrainer(cfg, MLP.init(np.random.default_rng(0), 8))
    assert [trainer.batch(i).k for i in (0, 2, 3, 6, 7, 9)] == [2, 2, 4, 4, 6, 6]
