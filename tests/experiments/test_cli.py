"""`verigap experiments ...` end to end at --quick scale: run, resume, verdicts, bad input."""

import json

import yaml
from typer.testing import CliRunner

from verigap.cli import app

runner = CliRunner()
TINY = {
    "steps": 4,
    "programs": 4,
    "group": 2,
    "log_every": 2,
    "monitor_programs": 20,
    "eval_programs": 40,
    "sft": {"programs": 200, "epochs": 1},
}


def _registry(tmp_path, **over):
    doc = {
        "seeds": [0, 1, 2],
        "quick": TINY,
        "settings": {
            "visible": {},
            "visible_too": {},
            "full_coverage": {"options": {"coverage": 1.0}},
        },
        "predictions": [
            {
                "id": "C1",
                "question": "Control: can anything pass wrongly when every broken "
                "branch is tested?",
                "prediction": "No: false success stays under 1%.",
                "criterion": {
                    "kind": "threshold",
                    "setting": "full_coverage",
                    "metric": "final_false_success",
                    "compare": "<",
                    "value": 0.01,
                },
            },
            # far below zero: every seed and the t interval (wide on three tiny runs) refute it
            {
                "id": "C2",
                "question": "Must refute: is false success ever far below zero?",
                "prediction": "False success is below -0.5.",
                "criterion": {
                    "kind": "threshold",
                    "setting": "visible",
                    "metric": "final_false_success",
                    "compare": "<",
                    "value": -0.5,
                },
            },
            {
                "id": "C3",
                "question": "Same config twice",
                "prediction": "identical runs.",
                "criterion": {
                    "kind": "contrast",
                    "a": "visible",
                    "b": "visible_too",
                    "metric": "final_visible_pass",
                    "compare": "<=",
                    "value": 0.0,
                },
            },
        ],
        **over,
    }
    path = tmp_path / "reg.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_quick_run_resume_and_verdicts(tmp_path):
    reg = _registry(tmp_path)
    out = tmp_path / "runs"
    args = [
        "experiments",
        "run",
        "--quick",
        "--registry",
        str(reg),
        "--out",
        str(out),
        "--executor",
        "serial",
    ]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    # visible and visible_too share one config, so one run per seed serves both
    assert len(list(out.glob("*/seed0/result.json"))) == 2
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/seed*/result.json")}
    r = runner.invoke(app, args + ["C1"])
    assert r.exit_code == 0, r.output
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/seed*/result.json")} == stamps

    # judging finished runs only starts nothing and finds every prediction finished
    r = runner.invoke(app, args + ["--finished-only"])
    assert r.exit_code == 0 and "3 predictions" in r.output, r.output
    r = runner.invoke(
        app,
        [
            "experiments",
            "verdicts",
            "--json",
            "--registry",
            str(reg),
            "--results",
            str(out / "verdicts.json"),
        ],
    )
    assert r.exit_code == 0, r.output
    rows = {row["id"]: row for row in json.loads(r.output)}
    assert rows["C1"]["verdict"] == "supported" and rows["C1"]["statistic"] == 0.0
    assert rows["C2"]["verdict"] == "refuted"  # a rule that must refute, refutes
    assert rows["C3"]["verdict"] == "supported" and rows["C3"]["statistic"] == 0.0
    assert len(rows["C1"]["values"]["full_coverage"]["final_false_success"]) == 3


def test_shipped_log_quick_subset(tmp_path):
    """Two predictions of the real registry at --quick scale: E31 is a control that holds at
    any scale (with every broken branch tested a wrong program cannot pass)."""
    out = tmp_path / "runs"
    r = runner.invoke(
        app,
        ["experiments", "run", "E31", "E13", "--quick", "--out", str(out), "--executor", "serial"],
    )
    assert r.exit_code == 0, r.output
    data = json.loads((out / "verdicts.json").read_text())["data"]
    assert set(data["predictions"]) == {"E31", "E13"}
    assert data["predictions"]["E31"]["verdict"] == "supported"
    assert data["scale"] == "quick"


def test_bad_registry_is_one_error_line(tmp_path):
    reg = _registry(tmp_path)
    doc = yaml.safe_load(reg.read_text())
    doc["predictions"][1]["criterion"]["metric"] = "falseness"
    reg.write_text(yaml.safe_dump(doc))
    r = runner.invoke(app, ["experiments", "list", "--registry", str(reg)])
    assert r.exit_code == 2
    assert "error:" in r.output and "prediction C2, field criterion.metric" in r.output


def test_rejudge_amends_stored_verdicts_in_place_and_list_marks_sanity_checks(tmp_path):
    """A results file judged by the first rule: `rejudge` keeps that verdict beside the
    current rule's and writes the summary the docs quote; no run is needed."""
    from verigap.experiments.registry import load_registry
    from verigap.experiments.verdicts import decide_bootstrap, verdict_entry
    from verigap.results import read_result, write_result

    doc = {
        "seeds": [0, 1, 2],
        "settings": {"a": {}, "b": {}},
        "predictions": [
            {
                "id": "S1",
                "question": "Stubs rise?",
                "prediction": "Stubs rise by 10 points.",
                "criterion": {
                    "kind": "contrast",
                    "a": "a",
                    "b": "b",
                    "metric": "final_untested_stub",
                    "compare": ">",
                    "value": 0.1,
                },
            },
            {
                "id": "S2",
                "question": "Control?",
                "prediction": "Nothing passes wrongly.",
                "sanity_check": "Every broken branch is tested here, so passing implies correct.",
                "criterion": {
                    "kind": "threshold",
                    "setting": "a",
                    "metric": "final_false_success",
                    "compare": "<",
                    "value": 0.01,
                },
            },
        ],
    }
    reg_path = tmp_path / "reg.yaml"
    reg_path.write_text(yaml.safe_dump(doc))
    reg = load_registry(reg_path)
    values = {
        "a": {
            "final_untested_stub": [0.00025, 0.39575, 0.41375],
            "final_false_success": [0.0, 0.0, 0.0],
        },
        "b": {"final_untested_stub": [0.0, 0.0, 0.0]},
    }
    old = {}
    for p in reg.predictions:
        e = verdict_entry(reg, p, values)
        for k in ("rule", "seed_statistics", "sanity_check"):
            e.pop(k)
        old[p.id] = {**e, **decide_bootstrap(p.criterion, p.id, values), "superseded": []}
    results = tmp_path / "verdicts.json"
    write_result(results, {"predictions": old, "scale": "full"}, command="verigap experiments run")

    r = runner.invoke(
        app, ["experiments", "rejudge", "--registry", str(reg_path), "--results", str(results)]
    )
    assert r.exit_code == 0, r.output
    assert "1 of 1" in r.output and "S1 supported → inconclusive" in " ".join(r.output.split())
    data = read_result(results)
    assert data["predictions"]["S1"]["verdict"] == "inconclusive"
    assert data["predictions"]["S1"]["superseded"][0]["verdict"] == "supported"
    assert data["summary"]["n_rule_changed"] == 1 and data["summary"]["n_sanity_checks"] == 1
    assert data["summary"]["n_predictions"] == 1

    r = runner.invoke(app, ["experiments", "list", "--registry", str(reg_path)])
    assert r.exit_code == 0 and "S2 (sanity check)" in " ".join(r.output.split())
    r = runner.invoke(
        app,
        [
            "experiments",
            "rejudge",
            "--registry",
            str(reg_path),
            "--results",
            str(tmp_path / "missing.json"),
        ],
    )
    assert r.exit_code == 2 and "error" in r.output
