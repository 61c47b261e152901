"""The multi-agent registry (predictions_multiagent.yaml) loads, and its predictions run end to
end at a tiny scale through the same runner as the main log, second agents' metrics included."""

from pathlib import Path

import pytest
import yaml

from verigap.errors import ConfigError
from verigap.experiments.multiagent import (
    auditors_table,
    cost_table,
    dynamics_table,
    summarize,
    weights_table,
    writers_table,
)
from verigap.experiments.registry import load_registry, parse_registry
from verigap.experiments.render import verdicts_table
from verigap.experiments.runner import run_log
from verigap.results import read_meta

REGISTRY = Path(__file__).parents[2] / "src/verigap/experiments/predictions_multiagent.yaml"
TINY = {
    "steps": 4,
    "programs": 4,
    "group": 2,
    "log_every": 2,
    "monitor_programs": 20,
    "eval_programs": 40,
    "sft": {"programs": 200, "epochs": 1},
}


def test_the_registry_loads_with_at_least_eight_predictions():
    reg = load_registry(REGISTRY)
    assert len(reg.predictions) >= 8 and reg.seeds == [0, 1, 2]
    kinds = {
        reg.config(s, 0).options.auditor.kind
        for s in reg.settings
        if reg.config(s, 0).options.auditor
    }
    assert kinds == {"random", "random_passed", "learned"}
    assert any(reg.config(s, 0).options.test_writer for s in reg.settings)


def test_a_bad_agent_setting_names_the_field():
    doc = yaml.safe_load(REGISTRY.read_text())
    doc["settings"]["learned_audit_10"] = {
        "reward": {"kind": "audit", "rate": 0.1},
        "options": {"auditor": {"kind": "learned", "rate": 0.1}},
    }
    with pytest.raises(ConfigError, match="setting learned_audit_10.*kind: visible"):
        parse_registry(doc)
    doc["settings"]["learned_audit_10"] = {"options": {"auditor": {"kind": "learned"}}}
    with pytest.raises(ConfigError, match="setting learned_audit_10, field options.auditor.rate"):
        parse_registry(doc)


@pytest.mark.slow
def test_agent_predictions_run_end_to_end(tmp_path):
    keep = {"learned_audit_10", "random_audit_10", "writer_learned_seen"}
    doc = yaml.safe_load(REGISTRY.read_text()) | {"quick": TINY}
    doc["settings"] = {k: v for k, v in doc["settings"].items() if k in keep}
    needs = {p.id: set(p.criterion.settings_used()) for p in load_registry(REGISTRY).predictions}
    doc["predictions"] = [p for p in doc["predictions"] if keep >= needs[p["id"]]]
    reg = parse_registry(doc)
    ids = [p.id for p in reg.predictions]
    assert len(ids) >= 4
    data = run_log(
        reg,
        ids,
        runs_dir=tmp_path / "runs",
        results_path=tmp_path / "v.json",
        quick=True,
        executor="serial",
        progress=False,
        registry_path=REGISTRY,
    )
    assert set(data["predictions"]) == set(ids)
    cmd = read_meta(tmp_path / "v.json")["command"]
    assert "--registry" in cmd and cmd.split("--registry ")[1].startswith(
        str(REGISTRY.relative_to(Path.cwd())) if REGISTRY.is_relative_to(Path.cwd()) else "/"
    )
    for e in data["predictions"].values():
        assert e["verdict"] in ("supported", "refuted", "inconclusive")
        for metrics in e["values"].values():
            assert all(len(v) == 3 for v in metrics.values())
    assert all(i in verdicts_table(data) for i in ids)
    assert f"| {len(ids)} |" in cost_table(data)
    summary = summarize(reg, tmp_path / "runs", quick=True)
    audit = summary["settings"]["learned_audit_10"]
    assert len(audit["auditor_precision"]) == 3 and "writer_catch_rate" not in audit
    assert len(summary["settings"]["writer_learned_seen"]["late_writer_catch_rate"]) == 3
    assert "hacks caught per audit" in auditors_table(summary)
    assert "writer_learned_seen" in writers_table(summary)
    assert "passed*deleted" in weights_table(summary)
    assert len(summary["curves"]["learned_audit_10"]["auditor_precision"]["4"]) == 3
    assert "learned_audit_10" in dynamics_table(summary)
    with pytest.raises(ConfigError, match="has not finished"):
        summarize(reg, tmp_path / "elsewhere", quick=True)
