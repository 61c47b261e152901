"""The auditor comparison: its settings share runs with the multi-agent log, and it reports
every auditor at every budget from real (tiny) runs."""

from verigap.experiments.auditors import (
    KINDS,
    RATES,
    REGISTRY,
    compare,
    comparison_registry,
    comparison_table,
)
from verigap.experiments.registry import load_registry, parse_registry
from verigap.experiments.runner import config_key


def test_shared_settings_are_the_multiagent_logs_own_runs():
    base = load_registry(REGISTRY)
    reg = comparison_registry(base)
    assert len(reg.settings) == len(KINDS) * len(RATES)
    for name in ("random_audit_10", "learned_audit_10", "learned_audit_2"):
        ours = reg.config(name, 0).model_dump(mode="json")
        theirs = base.config(name, 0).model_dump(mode="json")
        assert config_key(ours) == config_key(theirs)
    rule = reg.config("rule_audit_10", 0).options.auditor
    blind = reg.config("learned_no_outcomes_audit_2", 0).options.auditor
    assert rule.kind == "rule" and blind.features == "no_outcomes" and blind.rate == 0.02


def test_compare_runs_every_auditor_and_tabulates_it(tmp_path):
    base = parse_registry(
        {
            "seeds": [0],
            "quick": {
                "steps": 2,
                "programs": 4,
                "group": 2,
                "log_every": 1,
                "monitor_programs": 20,
                "eval_programs": 40,
                "sft": {"programs": 200, "epochs": 1},
            },
            "settings": {"visible": {}},
            "predictions": [],
        }
    )
    data = compare(base, tmp_path, quick=True, executor="serial", progress=False)
    assert set(data["settings"]) == {f"{k}_audit_{r}" for k in KINDS for r in RATES}
    row = data["settings"]["rule_audit_10"]
    assert len(row["final_false_success"]["seeds"]) == 1
    assert 0 <= row["auditor_recall"]["mean"] <= 1
    table = comparison_table(data)
    assert table.count("\n") == len(data["settings"]) + 1
    assert "| learned_no_outcomes_audit_2 |" in table
