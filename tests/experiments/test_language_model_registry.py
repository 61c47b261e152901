"""The language-model predictions use the registry's schema and metric vocabulary, and name
settings that are configs of verigap.trl's experiment (or the MLP trainer's)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import yaml

from verigap.experiments.metrics import check_metric
from verigap.experiments.registry import Prediction

REGISTRY = Path(__file__).parents[2] / "src/verigap/experiments/predictions_language_model.yaml"


def test_predictions_validate_and_name_defined_settings() -> None:
    data = yaml.safe_load(REGISTRY.read_text())
    preds = [Prediction.model_validate(p) for p in data["predictions"]]
    assert len({p.id for p in preds}) == len(preds) >= 4
    for p in preds:
        check_metric(p.criterion.metric)
        assert set(p.criterion.settings_used()) <= set(data["settings"])


def test_settings_use_fields_of_the_experiment_config() -> None:
    from verigap.trl import LMExperimentConfig

    data = yaml.safe_load(REGISTRY.read_text())
    known = {f.name for f in fields(LMExperimentConfig)}
    assert {"reward"} >= {k for s in data["settings"].values() if "trainer" not in s for k in s}
    assert data["defaults"]["model"] == LMExperimentConfig().model
    assert data["defaults"]["grpo"]["group"] == LMExperimentConfig().group
    assert data["defaults"]["grpo"]["steps"] == LMExperimentConfig().steps
    assert "beta" in known and data["defaults"]["grpo"]["beta"] == LMExperimentConfig().beta
