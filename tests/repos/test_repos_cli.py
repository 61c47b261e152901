"""`verigap repos run` end to end: scripted baselines act through the agent tools, both graders."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from verigap.cli import app
from verigap.results import read_meta, read_result


def test_run_scripted_baselines_through_the_agent_loop(fixture_tasks, tmp_path):
    _, tasks, _ = fixture_tasks
    path = tmp_path / "task.json"
    tasks[0].save(path)
    out = tmp_path / "runs"
    args = [
        "repos",
        "run",
        str(path),
        "--agent",
        "scripted:oracle",
        "--agent",
        "scripted:careless",
        "--grader",
        "v1",
        "--grader",
        "v2",
        "--out",
        str(out),
        "--executor",
        "serial",
        "--json",
        "--save",
        str(tmp_path / "res" / "b.json"),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = {(r["grader"], r["agent"]): r for r in json.loads(res.output)}
    saved = read_result(tmp_path / "res" / "b.json")  # the same summary, as a results file
    assert saved["rows"] == json.loads(res.output) and saved["tasks"] == 1
    assert saved["by"]["v1/scripted:careless"]["paid"] == 1.0
    assert saved["by"]["v2/scripted:careless"]["paid"] == 0.0
    assert read_meta(tmp_path / "res" / "b.json")["command"].startswith("verigap repos run ")
    assert rows["v1", "scripted:oracle"]["mean_reward"] == 1.0
    assert rows["v2", "scripted:oracle"]["mean_reward"] == 1.0
    assert rows["v2", "scripted:oracle"]["true_success"] == 1.0
    assert rows["v1", "scripted:careless"]["false_success"] == 1.0
    assert rows["v1", "scripted:careless"]["mean_reward"] == 1.0
    assert rows["v2", "scripted:careless"]["mean_reward"] == 0.0
    run_dir = out / "v2" / "scripted_careless" / path.stem
    transcript = json.loads((run_dir / "transcript.json").read_text())
    assert transcript["submitted"] and transcript["status"] == "OK"
    assert any(
        e.get("event") == "tool_result" or e.get("event") == "model_turn"
        for e in transcript["transcript"]
    )
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["checks"]["visible"] and not verdict["checks"]["hidden"]


def test_bad_agent_is_a_clear_error(tmp_path, fixture_tasks):
    _, tasks, _ = fixture_tasks
    path = tmp_path / "task.json"
    tasks[0].save(path)
    res = CliRunner().invoke(app, ["repos", "run", str(path), "--agent", "gpt"])
    assert res.exit_code == 2 and "scripted:oracle" in res.output
