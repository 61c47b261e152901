"""The registry: the shipped log loads; bad entries fail with one line naming entry and field."""

import copy

import pytest

from verigap.errors import ConfigError
from verigap.experiments.registry import load_registry, parse_registry

GOOD = {
    "seeds": [0, 1, 2],
    "defaults": {"options": {"eval_ks": [2]}},
    "settings": {"visible": {}, "audit": {"reward": {"kind": "audit", "rate": 0.25}}},
    "predictions": [
        {
            "id": "A1",
            "question": "q?",
            "prediction": "p.",
            "criterion": {
                "kind": "contrast",
                "a": "audit",
                "b": "visible",
                "metric": "final_false_success",
                "compare": "<",
                "value": 0,
            },
        },
        {
            "id": "A2",
            "question": "q?",
            "prediction": "p.",
            "criterion": {
                "kind": "threshold",
                "setting": "visible",
                "metric": "final_false_success_k2",
                "compare": ">",
                "value": 0.1,
            },
        },
    ],
}


def test_the_shipped_log_loads_with_at_least_35_predictions():
    reg = load_registry()
    assert len(reg.predictions) >= 35
    assert len({p.id for p in reg.predictions}) == len(reg.predictions)
    hashes = {reg.prediction_hash(p) for p in reg.predictions}
    assert len(hashes) == len(reg.predictions)


def _bad(mutate):
    doc = copy.deepcopy(GOOD)
    mutate(doc)
    with pytest.raises(ConfigError) as e:
        parse_registry(doc, "reg.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_good_registry_parses():
    reg = parse_registry(copy.deepcopy(GOOD))
    assert reg.config("audit", 1).reward.rate == 0.25
    assert reg.config("audit", 1).options.eval_ks == (2,)


def test_unknown_metric_names_entry_and_field():
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(metric="final_fals_success"))
    assert "prediction A1, field criterion.metric: unknown metric 'final_fals_success'" in msg


def test_unknown_setting_names_entry_and_field():
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(b="audit_11"))
    assert "prediction A1, field criterion.b: unknown setting 'audit_11'" in msg


def test_duplicate_id():
    msg = _bad(lambda d: d["predictions"][1].update(id="A1"))
    assert "prediction A1, field id: duplicate id (entries 1 and 2)" in msg


def test_uncomputable_criteria():
    msg = _bad(lambda d: d["predictions"][1]["criterion"].update(metric="final_false_success_k8"))
    assert "prediction A2, field criterion.metric" in msg and "eval_ks" in msg
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(b="audit"))
    assert "prediction A1, field criterion: cannot be computed" in msg and "itself" in msg
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(min_seeds=5))
    assert "prediction A1, field criterion: cannot be computed: min_seeds=5" in msg


def test_bad_fields_name_entry_and_field():
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(compare="=="))
    assert msg.startswith("reg.yaml: prediction A1, field criterion.contrast.compare")
    msg = _bad(lambda d: d["predictions"][0]["criterion"].update(kind="vibes"))
    assert "prediction A1, field criterion" in msg
    msg = _bad(lambda d: d["settings"]["audit"].update(kl_coeff=0.1))
    assert "setting audit, field kl_coeff" in msg
    msg = _bad(lambda d: d["settings"]["visible"].update(options={"audit_recall": 0.5}))
    assert "setting visible" in msg and "audit reward" in msg
    msg = _bad(lambda d: d["predictions"][0].pop("prediction"))
    assert "prediction A1, field prediction: Field required" in msg


def test_runs_are_scheduled_so_cheap_predictions_finish_first():
    from verigap.experiments.runner import cheapest_first

    doc = copy.deepcopy(GOOD)
    doc["settings"]["long"] = {"steps": 5000}
    doc["predictions"].insert(
        0,
        {
            "id": "L1",
            "question": "q?",
            "prediction": "p.",
            "criterion": {
                "kind": "contrast",
                "a": "long",
                "b": "visible",
                "metric": "final_false_success",
                "compare": "<",
                "value": 0,
            },
        },
    )
    reg = parse_registry(doc)
    assert cheapest_first(reg, reg.predictions) == ["visible", "audit", "long"]
