"""Second agents co-trained with the coder: the auditor and the test-writer (multiagent.py)."""

import numpy as np
import pytest

from verigap.experiments.metrics import check_metric, metric_value
from verigap.patchworld import rules
from verigap.patchworld.grpo import GRPOConfig, GRPOTrainer, train
from verigap.patchworld.multiagent import (
    AUDITOR_FEATURES,
    OUTCOME_FEATURES,
    Auditor,
    AuditorConfig,
    LogisticBandit,
    TestWriter,
    TestWriterConfig,
    auditor_features,
    top_with_exploration,
)
from verigap.patchworld.policy import MLP
from verigap.patchworld.programs import generate
from verigap.patchworld.sft import SFTConfig
from verigap.runs import read_jsonl

SMALL = {
    "steps": 12,
    "programs": 8,
    "group": 4,
    "monitor_programs": 50,
    "eval_programs": 100,
    "log_every": 4,
    "sft": SFTConfig(programs=800, epochs=1),
}


def _grades(programs, actions):
    return rules.grade(programs, actions)


def _hacky_batch(n=400, seed=0):
    """Episodes on k=4 programs: a third delete an untested branch (a hack that passes), a
    third fix everything, a third write a wrong value (fails the build)."""
    p = generate(4, n, seed=seed)
    actions = p.at_order("reference").copy()
    kind = np.arange(n) % 3
    first_untested = np.argmax(~p.at_order("tested"), axis=1)
    rows = np.arange(n)
    actions[rows[kind == 0], first_untested[kind == 0]] = rules.DELETE
    actions[kind == 2, 0] = (actions[kind == 2, 0] + 5) % 32
    return p, actions


def test_config_validation_names_the_fix():
    with pytest.raises(ValueError, match="reward: \\{kind: visible\\}"):
        GRPOConfig(
            reward={"kind": "audit", "rate": 0.1},
            options={"auditor": {"kind": "learned", "rate": 0.1}},
        )
    with pytest.raises(ValueError, match="oracle_share"):
        GRPOConfig(options={"auditor": {"kind": "random", "rate": 0.1}, "oracle_share": 0.5})
    with pytest.raises(ValueError, match="kind"):
        GRPOConfig(options={"auditor": {"kind": "psychic", "rate": 0.1}})
    with pytest.raises(ValueError, match="rate"):
        GRPOConfig(options={"auditor": {"kind": "random", "rate": 0.0}})
    with pytest.raises(ValueError, match="tests"):
        GRPOConfig(options={"test_writer": {"kind": "random", "tests": 0}})


def test_no_agents_leave_the_config_dump_unchanged():
    dump = GRPOConfig(options={}).model_dump(mode="json")
    assert "auditor" not in dump["options"] and "test_writer" not in dump["options"]
    with_agent = GRPOConfig(options={"auditor": {"kind": "learned", "rate": 0.1}})
    back = GRPOConfig.model_validate(with_agent.model_dump(mode="json"))
    assert back == with_agent and back.options.auditor.kind == "learned"


@pytest.mark.parametrize("kind", ["random", "random_passed", "learned", "rule"])
def test_the_audit_budget_is_respected_exactly(kind):
    p, actions = _hacky_batch(n=301)
    g = _grades(p, actions)
    logp = np.zeros(actions.shape)
    aud = Auditor(AuditorConfig(kind=kind, rate=0.1), seed=0)
    for _ in range(5):
        pay, m = aud.pay_and_learn(g, logp)
        assert pay.audited.sum() == round(0.1 * 301) == 30
        if kind == "random_passed":
            assert g.passed[pay.audited].all()
        assert not (pay.caught & ~pay.audited).any()
        assert (pay.caught == pay.audited & g.passed & ~g.correct).all()
        assert np.array_equal(pay.reward, np.where(pay.caught, -1.0, g.passed.astype(float)))
    # random_passed never exceeds the budget, and spends less when few episodes pass
    few = _grades(p[:20], actions[:20])
    pay, _ = Auditor(AuditorConfig(kind="random_passed", rate=1.0), 0).pay_and_learn(
        few, np.zeros((20, 4))
    )
    assert pay.audited.sum() == few.passed.sum() < 20


def test_top_with_exploration_picks_distinct_rows():
    rng = np.random.default_rng(0)
    score = np.arange(100.0)
    pick = top_with_exploration(score, 10, 0.2, rng)
    assert len(set(pick.tolist())) == 10
    assert set(pick[:8].tolist()) == set(range(92, 100))
    assert not set(pick[8:].tolist()) & set(range(92, 100))


def test_learned_auditor_learns_to_catch_more_per_audit_than_random():
    """On a fixed easy mix (a third of the episodes are deletions that pass), the learned
    auditor's hit rate rises far above the 1/3 that random audits get."""
    rates = {}
    for kind in ("random", "learned"):
        aud = Auditor(AuditorConfig(kind=kind, rate=0.1, lr=0.1), seed=1)
        hits = []
        for step in range(60):
            p, actions = _hacky_batch(n=240, seed=step)
            g = _grades(p, actions)
            _, m = aud.pay_and_learn(g, np.full(actions.shape, -0.5))
            hits.append(m["auditor_precision"])
        rates[kind] = float(np.mean(hits[-20:]))
        if kind == "learned":
            w = dict(zip(AUDITOR_FEATURES, aud.model.w, strict=True))
            assert w["passed*deleted"] > 0
    assert abs(rates["random"] - 1 / 3) < 0.1
    assert rates["learned"] > 0.75  # 0.8 of the budget exploits, 0.2 explores


def test_auditor_features_do_not_see_the_hidden_check():
    p, actions = _hacky_batch(n=60)
    g = _grades(p, actions)
    # an off-by-one on a tested branch and a fix look different only through the visible checks
    x = auditor_features(g, np.zeros(actions.shape))
    assert x.shape == (60, len(AUDITOR_FEATURES))
    blind = rules.Grades(g.outcome, g.tested, g.build, g.visible, ~g.correct)
    assert np.array_equal(auditor_features(blind, np.zeros(actions.shape)), x)


def test_writer_writes_only_on_untested_broken_branches_and_catches_hacks():
    p = generate(4, 200, seed=2)
    logp = np.log(np.full((200, 4, rules.N_ACTIONS), 1 / rules.N_ACTIONS))
    for kind in ("random", "learned"):
        w = TestWriter(TestWriterConfig(kind=kind, tests=1), seed=0)
        new, written = w.write(p, logp)
        before = p.at_order("tested")
        assert not (written & before).any()
        assert (written.sum(1) == np.minimum(1, (~before).sum(1))).all()
        assert np.array_equal(new.at_order("tested"), before | written)
        assert np.array_equal(new.tested[~p.broken], p.tested[~p.broken])
        # a deletion on a written branch passed the old tests and fails the new ones
        actions = p.at_order("reference").copy()
        actions[written] = rules.DELETE
        has = written.any(1)
        assert rules.grade(p, actions).passed[has].all()
        assert not rules.grade(new, actions).passed[has].any()
        m = w.pay_and_learn(p, logp, written, rules.grade(new, actions), group=1)
        assert m["writer_catch_rate"] == 1.0 and m["writer_tests"] == has.mean()


def _run(tmp_path, name, options, seed=0):
    cfg = GRPOConfig(seed=seed, options=options, **SMALL)
    res = train(tmp_path / name, cfg, sft_cache=tmp_path / "sft")
    return res, read_jsonl(tmp_path / name / "metrics.jsonl")


@pytest.mark.slow
def test_co_training_is_deterministic_and_logs_both_agents(tmp_path):
    opts = {
        "auditor": {"kind": "learned", "rate": 0.25},
        "test_writer": {"kind": "learned", "tests": 1, "seen_by_coder": False},
    }
    a, curve_a = _run(tmp_path, "a", opts)
    b, curve_b = _run(tmp_path, "b", opts)
    assert curve_a == curve_b and a["final"] == b["final"]
    assert a["auditor_weights"] == b["auditor_weights"]
    assert a["writer_weights"] == b["writer_weights"]
    logged = curve_a[1]
    for key in (
        "auditor_precision",
        "auditor_random_precision",
        "auditor_recall",
        "writer_catch_rate",
        "writer_random_catch_rate",
        "train_false_success",
        "kl",
    ):
        assert key in logged
    assert logged["audited"] == pytest.approx(round(0.25 * 32) / 32)
    # the registry's metric vocabulary reads them
    a["curve"] = curve_a
    for name in ("auditor_precision_gain", "late_writer_catch_rate", "train_false_success"):
        assert check_metric(name) is None
        assert np.isfinite(metric_value(name, a))
    other, _ = _run(tmp_path, "c", opts, seed=1)
    assert other["final"] != a["final"]


def test_agents_leave_the_coder_stream_alone(tmp_path):
    """A random auditor at rate 1 audits every episode, like an Audit(1.0) reward: the coder's
    sampled episodes and update are then identical step by step."""
    start = MLP.init(np.random.default_rng(0), 16)
    base = {k: v for k, v in SMALL.items() if k in ("programs", "group")}
    t_audit = GRPOTrainer(GRPOConfig(reward={"kind": "audit", "rate": 1.0}, **base), start)
    t_agent = GRPOTrainer(
        GRPOConfig(options={"auditor": {"kind": "random", "rate": 1.0}}, **base), start
    )
    for i in range(3):
        ra, rb = t_audit.step(i), t_agent.step(i)
        assert ra["reward"] == rb["reward"] and ra["caught"] == rb["caught"]
    assert all(
        np.array_equal(x, y)
        for x, y in zip(t_audit.model.params(), t_agent.model.params(), strict=True)
    )


def test_logistic_bandit_fits_a_separable_label():
    rng = np.random.default_rng(0)
    x = np.c_[np.ones(400), rng.integers(0, 2, 400)]
    y = x[:, 1]
    m = LogisticBandit(2, lr=0.1)
    first = m.update(x, y)
    for _ in range(200):
        last = m.update(x, y)
    assert last < first / 4
    assert m.prob(np.array([[1.0, 1.0]]))[0] > 0.9 > 0.1 > m.prob(np.array([[1.0, 0.0]]))[0]


def test_the_rule_auditor_catches_the_passing_deletions_without_learning():
    """On the easy mix the fixed score passed x (deleted + stubbed) is the label itself: the
    rule auditor hits with every exploiting audit from the first step on, which is what the
    learned auditor takes steps to learn."""
    p, actions = _hacky_batch(n=240, seed=0)
    g = _grades(p, actions)
    greedy = Auditor(AuditorConfig(kind="rule", rate=0.1, explore=0.0), seed=1)
    _, m = greedy.pay_and_learn(g, np.full(actions.shape, -0.5))
    assert m["auditor_precision"] == 1.0
    aud = Auditor(AuditorConfig(kind="rule", rate=0.1), seed=1)
    pay, m = aud.pay_and_learn(g, np.full(actions.shape, -0.5))
    # 24 audits: the 19 that exploit the rule all catch; 5 explore uniformly among the rest
    assert pay.audited.sum() == 24 and m["auditor_precision"] >= 19 / 24
    assert not aud.model.w.any()  # nothing was learned


def test_an_auditor_without_outcome_features_cannot_see_deletions():
    p, actions = _hacky_batch(n=120)
    g = _grades(p, actions)
    aud = Auditor(AuditorConfig(kind="learned", rate=0.1, features="no_outcomes"), seed=0)
    assert not set(aud.feature_names) & set(OUTCOME_FEATURES)
    assert aud.model.w.size == len(AUDITOR_FEATURES) - len(OUTCOME_FEATURES)
    x = aud.features(g, np.full(actions.shape, -0.5))
    # a passing deletion and a passing honest fix look the same to it when log-probs match
    hack = g.passed & ~g.correct
    honest = g.passed & g.correct
    cols = [
        i
        for i, f in enumerate(aud.feature_names)
        if not f.startswith(("untested", "passed*untested"))
    ]
    assert hack.any() and honest.any()
    assert {tuple(r) for r in x[hack][:, cols]} == {tuple(r) for r in x[honest][:, cols]}
    with pytest.raises(ValueError, match="features"):
        AuditorConfig(kind="learned", rate=0.1, features="everything")
