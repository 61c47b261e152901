"""The transformer policy: config, determinism, every reward scheme through the shared trainer,
learning beats an untrained network, and the probes with their controls.

CI installs the torch extra (Makefile TEST_EXTRAS), so torch is required here, not skipped.
"""

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.experiments.metrics import check_metric, metric_value
from verigap.experiments.registry import parse_registry
from verigap.patchworld import rules
from verigap.patchworld.grpo import GRPOConfig, evaluate, train
from verigap.patchworld.probes import (
    balanced_accuracy,
    fit_logistic,
    input_bacc,
    input_features,
    input_types,
    predict,
    probe_scores,
)
from verigap.patchworld.programs import generate, heldout_set
from verigap.patchworld.sft import SFTConfig
from verigap.patchworld.transformer import N_TOKEN_FEATURES, PolicyConfig, tokens
from verigap.patchworld.transformer_policy import (
    TransformerPolicy,
    TransformerTrainer,
    sft_transformer,
)
from verigap.runs import read_jsonl

TF = {"kind": "transformer"}
TINY = {
    "steps": 6,
    "programs": 8,
    "group": 4,
    "log_every": 3,
    "monitor_programs": 40,
    "eval_programs": 80,
    "sft": SFTConfig(programs=300, epochs=1),
    "policy": TF,
}


def _fingerprint(run_dir, result):
    return {
        "start": result["start"],
        "final": result["final"],
        "kl": result["kl_final"],
        "sft": result["sft_loss"],
        "probe": result["probes"]["start"]["tested"]["bacc"],
        "monitor": [
            [r["step"], r["visible_pass"], r["false_success"], r.get("reward")]
            for r in read_jsonl(run_dir / "metrics.jsonl")
        ],
    }


def test_policy_field_defaults_to_the_mlp_and_leaves_the_dump_alone():
    assert "policy" not in GRPOConfig().model_dump(mode="json")
    dump = GRPOConfig(policy=TF).model_dump(mode="json")
    assert dump["policy"]["kind"] == "transformer"
    assert GRPOConfig.model_validate(dump).policy.d_model == 32
    with pytest.raises(ValueError, match="leave them out"):
        PolicyConfig(kind="mlp", d_model=64)
    with pytest.raises(ValueError, match="multiple of heads"):
        PolicyConfig(kind="transformer", d_model=30, heads=4)


def test_tokens_carry_each_branch():
    p = generate(4, 3, seed=0)
    t = tokens(p)
    assert t.shape == (3, 12, N_TOKEN_FEATURES)
    assert (t[:, :, :32].argmax(-1) == p.shown).all()
    assert (t[:, :, 33] == p.broken).all() and (t[:, :, 34] == p.tested).all()
    assert (t[:, :, 35] == p.strict).all()


def test_same_seed_same_numbers_other_seed_other_numbers(tmp_path):
    a = train(tmp_path / "a", GRPOConfig(seed=0, **TINY))
    b = train(tmp_path / "b", GRPOConfig(seed=0, **TINY))
    c = train(tmp_path / "c", GRPOConfig(seed=1, **TINY))
    fa, fb, fc = (_fingerprint(tmp_path / n, r) for n, r in (("a", a), ("b", b), ("c", c)))
    assert fa == fb
    assert fa["sft"] != fc["sft"] and fa["final"]["outcomes"] != fc["final"]["outcomes"]
    assert fa["probe"] != fc["probe"]
    assert (tmp_path / "a" / "policy.pt").is_file()


@pytest.mark.parametrize(
    "reward",
    [
        {"kind": "visible"},
        {"kind": "oracle"},
        {"kind": "audit", "rate": 0.5},
        {"kind": "deletion_penalty", "per_deletion": 1.0},
    ],
)
def test_every_reward_scheme_trains_the_transformer(tmp_path, reward):
    cfg = GRPOConfig(
        seed=2, reward=reward, options={"eval_ks": [2]}, **{**TINY, "steps": 3, "log_every": 3}
    )
    r = train(tmp_path / "run", cfg, sft_cache=tmp_path / "sft")
    assert r["setting"] == cfg.reward.label
    assert set(r["final_by_k"]) == {"2"} and set(r["probes"]) >= {"start", "final"}
    assert any(rec.get("reward") is not None for rec in read_jsonl(tmp_path / "run/metrics.jsonl"))
    if reward["kind"] == "audit":
        assert (
            np.mean(
                [
                    rec["audited"]
                    for rec in read_jsonl(tmp_path / "run/metrics.jsonl")
                    if "audited" in rec
                ]
            )
            > 0.3
        )
    # a cached SFT start gives the same run
    again = train(tmp_path / "run2", cfg, sft_cache=tmp_path / "sft")
    assert again["final"] == r["final"] and again["sft_loss"] == r["sft_loss"]


def _fixed_share(result):
    o = result["outcomes"]
    return sum(v for key, v in o.items() if key.endswith("/fixed")) / sum(o.values())


@pytest.mark.slow
def test_sft_beats_an_untrained_transformer():
    # about 6 s of CPU: 375 SFT updates of 32 programs, past the early plateau of the loss
    held = heldout_set(4, 300)
    untrained = evaluate(TransformerPolicy(PolicyConfig(kind="transformer"), 0), held)
    model, losses = sft_transformer(
        4, 0, SFTConfig(programs=6000, epochs=2, batch=128), PolicyConfig(kind="transformer")
    )
    trained = evaluate(model, held)
    assert losses[-1] < losses[0] - 0.3 and losses[0] < np.log(rules.N_ACTIONS) + 0.1
    assert untrained["true_success"] < 0.02 and _fixed_share(untrained) < 0.1
    assert trained["true_success"] > untrained["true_success"] + 0.08, (trained, untrained)
    assert _fixed_share(trained) > _fixed_share(untrained) + 0.3
    assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    # GRPO from this start, paid by the oracle, gets paid and moves the policy
    trainer = TransformerTrainer(GRPOConfig(steps=5, reward={"kind": "oracle"}, policy=TF), model)
    stats = [trainer.step(i) for i in range(5)]
    assert sum(s["reward"] for s in stats) > 0
    assert trainer.mean_kl(model, held) > 0


def test_logistic_probe_finds_a_linear_label_and_not_a_shuffled_one():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 8))
    y = x @ rng.standard_normal(8) > 0.3
    model = fit_logistic(x[:1000], y[:1000])
    assert balanced_accuracy(y[1000:], predict(model, x[1000:])) > 0.95
    shuffled = fit_logistic(x[:1000], rng.permutation(y[:1000]))
    assert abs(balanced_accuracy(y[1000:], predict(shuffled, x[1000:])) - 0.5) < 0.08
    assert balanced_accuracy(np.ones(5, bool), np.zeros(5, bool)) == 0.5


def test_probe_controls_on_real_hidden_states():
    model, _ = sft_transformer(
        4, 0, SFTConfig(programs=600, epochs=1), PolicyConfig(kind="transformer")
    )
    train_p, test_p = generate(4, 300, seed=5), generate(4, 300, seed=5, stream="heldout")
    h_tr, h_te = model.hidden(train_p)[-1], model.hidden(test_p)[-1]
    types = [input_types(p).reshape(-1) for p in (train_p, test_p)]
    feats = [input_features(p) for p in (train_p, test_p)]
    feats = [f.reshape(-1, f.shape[-1]) for f in feats]
    y_tr, y_te = train_p.broken.reshape(-1), test_p.broken.reshape(-1)
    base = input_bacc(feats[0], y_tr, feats[1], y_te)
    s = probe_scores(
        h_tr.reshape(-1, 32), y_tr, h_te.reshape(-1, 32), y_te, types[0], types[1], 0, base
    )
    assert s["bacc"] > 0.9  # "broken" is an input feature: a probe must find it
    assert abs(s["shuffled"] - 0.5) < 0.1
    # ... and so does a probe on the input alone: the hidden state is credited with nothing
    assert s["input"] > 0.99
    assert s["selectivity"] == s["bacc"] - max(s["control"], s["input"]) < 0.02


def test_input_types_carry_the_flags_so_the_control_label_is_not_the_flag():
    """Two tokens that differ only in a flag are different types: the control task gives them
    independent random labels, so a control label cannot be a function of position and shown
    value with the flag read on top."""
    p = generate(4, 200, seed=3)
    types = input_types(p)
    pos_value = np.arange(12)[None, :] * 32 + p.shown
    assert len(np.unique(types)) > len(np.unique(pos_value))
    flags = p.broken * 4 + p.tested * 2 + p.strict
    assert np.array_equal(types % 8, flags) and np.array_equal(types // 8, pos_value)


def test_probe_metrics_and_their_registry_checks():
    probes = {"start": {"hack": {"bacc": 0.7}}, "final": {"hack": {"bacc": 0.9}}}
    assert check_metric("probe_gain_hack_bacc") is None
    assert metric_value("probe_gain_hack_bacc", {"probes": probes}) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="no probes"):
        metric_value("probe_final_hack_bacc", {})
    doc = {
        "settings": {"mlp": {}},
        "predictions": [
            {
                "id": "P1",
                "question": "q",
                "prediction": "p",
                "criterion": {
                    "kind": "threshold",
                    "setting": "mlp",
                    "metric": "probe_final_tested_bacc",
                    "compare": ">",
                    "value": 0.5,
                },
            }
        ],
    }
    with pytest.raises(ConfigError, match="P1.*only a transformer policy has"):
        parse_registry(doc)
    doc["settings"]["mlp"] = {"policy": TF}
    parse_registry(doc)


def test_probes_cli_quick(tmp_path):
    reg = tmp_path / "reg.yaml"
    reg.write_text(
        yaml.safe_dump(
            {
                "seeds": [0],
                "quick": {k: v for k, v in TINY.items() if k not in ("sft", "policy")}
                | {"steps": 2, "sft": {"programs": 200, "epochs": 1}},
                "settings": {"tf": {"policy": TF}, "mlp": {}},
                "predictions": [],
            }
        )
    )
    runs = CliRunner()
    args = [
        "patchworld",
        "probes",
        "--quick",
        "--registry",
        str(reg),
        "--setting",
        "tf",
        "--runs",
        str(tmp_path / "runs"),
        "--workers",
        "1",
    ]
    r = runs.invoke(app, args + ["--figure", str(tmp_path / "p.png")])
    assert r.exit_code == 0, r.output
    from verigap.results import read_result

    data = read_result(tmp_path / "runs" / "probes.json")
    assert set(data["settings"]) == {"tf", "mlp"}
    assert data["settings"]["tf"]["policy"] == "transformer"
    assert len(data["probes"]["final"]["hack"]["by_layer"]["bacc"]) == 3
    assert (tmp_path / "p.png").stat().st_size > 1000
    r = runs.invoke(app, args[:-4] + ["--setting", "mlp", "--runs", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "not a transformer" in r.output
