"""benchmarks/silentbug_local_model.py: what a model's silent-bug episodes did, read back from a
real eval run directory (arm D, so nothing trains): turns, tool calls written and refused,
tokens and seconds, beside the analysis and its arm-D baselines."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from verigap.agents import ScriptedClient
from verigap.agents._types import ModelTurn, ToolCall
from verigap.silentbug.evaluate import EvalConfig, run_eval
from verigap.silentbug.views import local_beside_table, local_model_table

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench():
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("silentbug_local_model")
    finally:
        sys.path.remove(str(BENCH))


def _model_like(cfg, bug, arm, seed) -> ScriptedClient:
    """A model that rambles, writes a malformed call and a call to a tool arm D lacks, then
    submits a diagnosis."""
    usage = {"input_tokens": 700, "output_tokens": 160}
    return ScriptedClient(
        [
            ModelTurn("The code is the code that is the code", (), usage, "length"),
            ModelTurn(
                None,
                (
                    ToolCall("c1", "read_file", '{"path": "x.py"}'),
                    ToolCall("c2", "get_metrics", "{not json"),
                ),
                usage,
                "tool_calls",
            ),
            ("submit_diagnosis", {"component": "value_loss", "mechanism": "a guess"}),
        ]
    )


def test_the_summary_counts_what_the_model_did(tmp_path: Path) -> None:
    bench = _bench()
    cfg = EvalConfig("local:stand-in", ("D",), ("single_stored_action_redrawn",), max_turns=4)
    run_eval(tmp_path / "model", cfg, client_factory=_model_like, cache_dir=tmp_path / "cache")
    scripted = EvalConfig("scripted:noop", ("D",), ("single_stored_action_redrawn",))
    run_eval(tmp_path / "noop", scripted, cache_dir=tmp_path / "cache")
    [row] = bench.model_episodes(tmp_path / "model")
    assert row["turns"] == 3 and row["tool_calls_written"] == 3
    assert row["tool_calls_accepted"] == 1  # the diagnosis; file tools are not arm D's
    assert sum(row["tool_calls_refused"].values()) == 2
    assert row["diagnosed"] and not row["correct"] and row["reward"] == 0.0
    assert row["prompt_tokens_per_turn"][:2] == [700, 700]
    out = tmp_path / "local.json"
    bench.main(
        [
            "--model-run",
            str(tmp_path / "model"),
            "--beside",
            str(tmp_path / "noop"),
            "--max-new-tokens",
            "160",
            "--out",
            str(out),
        ]
    )
    from verigap.results import read_result

    data = read_result(out)
    assert data["totals"]["episodes"] == 1 and data["totals"]["tool_calls_written"] == 3
    agents = {r["agent"] for r in data["analysis"]["rows"]}
    assert agents == {"local:stand-in", "scripted:noop"}
    table = local_beside_table(data)
    assert "best constant, strict" in table and "stand-in" in table
    assert "`single_stored_action_redrawn` | D | 3 | 3 | 1 | yes" in local_model_table(data)
