import json
import time

import pytest
from pydantic import Field

from verigap.agents import (
    NUDGE,
    Budget,
    EpisodeStatus,
    ModelTurn,
    ScriptedClient,
    Tool,
    ToolArgs,
    ToolCall,
    command_timeout,
    run_episode,
    standard_tools,
)
from verigap.errors import ConfigError
from verigap.sandbox import Sandbox

SYSTEM = "You fix bugs."
TASK = "Make test_calc.py pass, then submit."


def tool_results(ep) -> list[dict]:
    return [e for e in ep.transcript if e["event"] == "tool_result"]


def test_scripted_agent_reads_edits_runs_and_submits_in_a_sandbox(box: Sandbox, task_src) -> None:
    client = ScriptedClient(
        [
            ("list_files", {}),
            ("read_file", {"path": "calc.py"}),
            ("run", {"command": "python test_calc.py"}),
            ("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
            ("run", {"command": "python test_calc.py"}),
            ("submit", {"summary": "fixed the sign in add"}),
        ]
    )
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK, Budget(max_turns=10))
    assert (ep.status, ep.submitted, ep.impossible_reported) == (EpisodeStatus.OK, True, False)
    assert ep.submission == "fixed the sign in add" and ep.turns == 6
    assert ep.reason == "submitted on turn 6"
    assert box.read_file("calc.py") == "def add(a, b):\n    return a + b\n"
    assert (task_src / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    results = tool_results(ep)
    assert results[2]["content"].startswith("exit code 1")
    assert (
        results[4]["content"].startswith("exit code 0") and "tests passed" in results[4]["content"]
    )
    assert all(not r["is_error"] for r in results)
    # The transcript is JSON, ordered, timed, and holds every message, call and result.
    data = json.loads(ep.to_json())
    events = [e["event"] for e in data["transcript"]]
    assert events[:2] == ["message", "message"] and events[-1] == "end"
    assert events.count("model_turn") == 6 and events.count("tool_result") == 6
    times = [e["t"] for e in data["transcript"]]
    assert times == sorted(times)
    turn = data["transcript"][2]
    assert turn["tool_calls"] == [{"id": "call_1_0", "name": "list_files", "arguments": "{}"}]
    assert {"t_start", "duration_s"} <= set(turn)
    assert data["status"] == "OK" and data["transcript"][-1]["status"] == "OK"
    # The model saw each result as a tool message answering its call id.
    last_seen = client.seen[-1]
    assert last_seen[-1]["role"] == "tool" and last_seen[-1]["tool_call_id"] == "call_5_0"


@pytest.mark.parametrize(
    "call, msg",
    [
        (ToolCall("x", "rm_rf", "{}"), "unknown tool 'rm_rf'; available tools: list_files"),
        (ToolCall("x", "read_file", '{"path": '), "not valid JSON"),
        (ToolCall("x", "read_file", '["calc.py"]'), "must be a JSON object, got list"),
        (ToolCall("x", "read_file", '{"path": 3}'), "path: Input should be a valid string"),
        (ToolCall("x", "read_file", '{"path": "calc.py", "mode": "r"}'), "mode: Extra inputs"),
    ],
)
def test_bad_calls_become_error_observations_and_the_episode_goes_on(
    box: Sandbox, call: ToolCall, msg: str
) -> None:
    client = ScriptedClient([ModelTurn(None, (call,)), ("submit", {})])
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK)
    first = tool_results(ep)[0]
    assert first["is_error"] and msg in first["content"], first["content"]
    assert ep.status == EpisodeStatus.OK and ep.submitted


class BoomArgs(ToolArgs):
    n: int = Field(description="a number")


def test_a_tool_that_raises_does_not_end_the_episode(box: Sandbox) -> None:
    def boom(args: BoomArgs) -> str:
        raise RuntimeError(f"internal failure {args.n}")

    tools = [*standard_tools(box), Tool("boom", "Always fails.", BoomArgs, boom)]
    client = ScriptedClient([("boom", {"n": 7}), ("submit", {})])
    ep = run_episode(client, tools, SYSTEM, TASK)
    assert (
        tool_results(ep)[0]["content"] == "error: boom failed with RuntimeError: internal failure 7"
    )
    assert ep.status == EpisodeStatus.OK


def test_a_reply_without_tool_calls_is_nudged(box: Sandbox) -> None:
    client = ScriptedClient(["I think it is fixed.", ("submit", {})])
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK)
    assert ep.status == EpisodeStatus.OK and ep.turns == 2
    assert client.seen[1][-1] == {"role": "user", "content": NUDGE}
    assert client.seen[1][-2]["content"] == "I think it is fixed."
    assert [e["event"] for e in ep.transcript].count("nudge") == 1


def test_report_impossible_is_recorded_and_is_not_a_submission(box: Sandbox) -> None:
    client = ScriptedClient(
        [
            ("report_impossible", {"reason": ""}),
            ("report_impossible", {"reason": "tests contradict"}),
        ]
    )
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK)
    assert tool_results(ep)[0]["is_error"]  # an empty reason is refused, the episode goes on
    assert (ep.status, ep.submitted, ep.impossible_reported) == (EpisodeStatus.OK, False, True)
    assert (
        ep.impossible_reason == "tests contradict" and ep.reason == "reported impossible on turn 2"
    )


def test_calls_after_submit_in_the_same_turn_are_skipped(box: Sandbox) -> None:
    client = ScriptedClient(
        [[("submit", {}), ("write_file", {"path": "late.txt", "content": "x"})]]
    )
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK)
    assert ep.submitted and not (box.root / "late.txt").exists()
    assert ep.transcript[-2]["event"] == "tool_skipped"


def test_turn_cap(box: Sandbox) -> None:
    client = ScriptedClient([("list_files", {})] * 10)
    ep = run_episode(client, standard_tools(box), SYSTEM, TASK, Budget(max_turns=3))
    assert ep.status == EpisodeStatus.TURN_CAP and ep.turns == 3 and len(client.seen) == 3
    assert "turn budget of 3" in ep.reason and not ep.submitted


class NapArgs(ToolArgs):
    s: float


def test_wall_clock_cap_stops_between_and_within_turns(box: Sandbox) -> None:
    nap = Tool("nap", "Sleep.", NapArgs, lambda a: time.sleep(a.s) or "rested")
    tools = [*standard_tools(box), nap]
    # Margins of a second: a loaded 2-core machine can stall a few hundred milliseconds.
    client = ScriptedClient([[("nap", {"s": 1.2}), ("list_files", {})], ("submit", {})])
    ep = run_episode(client, tools, SYSTEM, TASK, Budget(wall_s=1.0))
    assert ep.status == EpisodeStatus.WALL_CLOCK_CAP and "during turn 1" in ep.reason
    results = tool_results(ep)
    assert results[1]["content"] == "not run: wall-clock budget used up" and results[1]["is_error"]
    client = ScriptedClient([("nap", {"s": 1.2}), ("submit", {})])
    ep = run_episode(client, tools, SYSTEM, TASK, Budget(wall_s=1.0))
    assert ep.status == EpisodeStatus.WALL_CLOCK_CAP and "before turn 2" in ep.reason
    assert not ep.submitted


def test_commands_get_the_per_command_timeout(box: Sandbox) -> None:
    seen: list[float] = []

    class Empty(ToolArgs):
        pass

    probe = Tool(
        "probe",
        "Report the command timeout.",
        Empty,
        lambda a: seen.append(command_timeout()) or "ok",
    )
    client = ScriptedClient([("probe", {}), ("run", {"command": "sleep 10"}), ("submit", {})])
    t0 = time.monotonic()
    ep = run_episode(
        client, [*standard_tools(box), probe], SYSTEM, TASK, Budget(command_timeout_s=0.5)
    )
    assert seen == [0.5]
    assert tool_results(ep)[1]["content"].startswith("timed out")
    assert time.monotonic() - t0 < 8
    assert command_timeout(default=12.0) == 12.0  # outside an episode


def test_client_failure_is_an_error_status_with_the_reason(box: Sandbox) -> None:
    ep = run_episode(ScriptedClient([("list_files", {})]), standard_tools(box), SYSTEM, TASK)
    assert ep.status == EpisodeStatus.ERROR
    assert "ScriptExhausted" in ep.reason and "turn 2" in ep.reason
    assert ep.transcript[-2]["event"] == "model_error"


def test_huge_observations_are_capped(box: Sandbox) -> None:
    class Empty(ToolArgs):
        pass

    big = Tool("big", "Huge output.", Empty, lambda a: "A" * 60_000 + "B" * 200_000 + "C" * 60_000)
    ep = run_episode(
        ScriptedClient([("big", {}), ("submit", {})]), [big, *standard_tools(box)], SYSTEM, TASK
    )
    content = tool_results(ep)[0]["content"]
    assert len(content) < 101_000 and content.startswith("A") and content.endswith("C")
    assert "characters omitted" in content


def test_bad_budgets_and_duplicate_tools_are_config_errors(box: Sandbox) -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        Budget(max_turns=0)
    tools = standard_tools(box)
    with pytest.raises(ConfigError, match="unique"):
        run_episode(ScriptedClient([]), [*tools, tools[0]], SYSTEM, TASK)
