"""Both SDK clients, end to end, against a loopback HTTP server speaking each wire format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from verigap.agents import (
    AnthropicClient,
    Budget,
    EpisodeStatus,
    ModelError,
    OpenAIClient,
    RetryPolicy,
    ToolSpec,
    run_episode,
    standard_tools,
    to_anthropic_messages,
    to_openai_messages,
)
from verigap.errors import ConfigError
from verigap.sandbox import Sandbox

FAST = RetryPolicy(max_attempts=3, initial_delay_s=0.001, max_delay_s=0.01)


@pytest.fixture
def api(fake_model_server: Any) -> Any:
    """The suite's loopback model API (``fake_model_server`` in tests/conftest.py)."""
    return fake_model_server


# ---- OpenAI chat completions wire format -----------------------------------------------------


def oa_tool_turn(call_id: str, name: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": f"chatcmpl-{call_id}",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def oa_error(status: int) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": f"status {status}", "type": "x", "code": None}}


def test_openai_client_drives_an_episode_end_to_end(api: Any, box: Sandbox) -> None:
    api.responses = [
        oa_tool_turn("c1", "read_file", {"path": "calc.py"}),
        oa_tool_turn("c2", "edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        oa_tool_turn("c3", "run", {"command": "python test_calc.py"}),
        oa_tool_turn("c4", "submit", {"summary": "sign fixed"}),
    ]
    client = OpenAIClient("test-model", base_url=f"{api.url}/v1", temperature=0.0, retry=FAST)
    ep = run_episode(client, standard_tools(box), "sys", "fix it", Budget(max_turns=6))
    assert ep.status == EpisodeStatus.OK and ep.submitted and ep.submission == "sign fixed"
    assert box.read_file("calc.py").endswith("return a + b\n")
    assert len(api.requests) == 4
    first, last = api.requests[0], api.requests[-1]
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-test-openai"
    assert first["body"]["model"] == "test-model" and first["body"]["temperature"] == 0.0
    assert first["body"]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix it"},
    ]
    edit = next(t for t in first["body"]["tools"] if t["function"]["name"] == "edit_file")
    assert edit["type"] == "function" and edit["function"]["parameters"]["required"] == [
        "path",
        "old",
        "new",
    ]
    # The fourth request carries the whole conversation back in OpenAI's shape.
    msgs = last["body"]["messages"]
    assert msgs[2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'},
    }
    assert msgs[3]["role"] == "tool" and msgs[3]["tool_call_id"] == "c1"
    assert "return a - b" in msgs[3]["content"]
    assert msgs[7]["tool_call_id"] == "c3" and "tests passed" in msgs[7]["content"]
    turn = next(e for e in ep.transcript if e["event"] == "model_turn")
    assert turn["usage"] == {"input_tokens": 11, "output_tokens": 7}
    assert turn["stop_reason"] == "tool_calls"


def test_openai_retries_rate_limits_and_server_errors(api: Any) -> None:
    api.responses = [oa_error(429), oa_error(503), oa_tool_turn("c1", "submit", {})]
    client = OpenAIClient("m", base_url=f"{api.url}/v1", retry=FAST)
    turn = client.complete([{"role": "user", "content": "hi"}], [])
    assert turn.tool_calls[0].name == "submit" and len(api.requests) == 3
    assert "tools" not in api.requests[0]["body"]


def test_openai_gives_up_after_max_attempts_and_does_not_retry_bad_requests(api: Any) -> None:
    client = OpenAIClient("m", base_url=f"{api.url}/v1", retry=FAST)
    api.responses = [oa_error(500)] * 3
    with pytest.raises(ModelError, match="after 3 attempts.*HTTP 500"):
        client.complete([{"role": "user", "content": "hi"}], [])
    assert len(api.requests) == 3
    api.responses = [oa_error(400), oa_tool_turn("c1", "submit", {})]
    with pytest.raises(ModelError, match="HTTP 400.*not retrying"):
        client.complete([{"role": "user", "content": "hi"}], [])
    assert len(api.requests) == 4


def test_a_failing_model_ends_the_episode_as_error(api: Any, box: Sandbox) -> None:
    api.responses = [oa_tool_turn("c1", "list_files", {}), oa_error(401)]
    client = OpenAIClient("m", base_url=f"{api.url}/v1", retry=FAST)
    ep = run_episode(client, standard_tools(box), "s", "u")
    assert ep.status == EpisodeStatus.ERROR and "HTTP 401" in ep.reason and ep.turns == 1


def test_missing_keys_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MY_ANTHROPIC_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        OpenAIClient("m")
    with pytest.raises(ConfigError, match="MY_ANTHROPIC_KEY is not set"):
        AnthropicClient("m", api_key_env="MY_ANTHROPIC_KEY")
    assert OpenAIClient("m", base_url="http://127.0.0.1:9/v1", api_key_env=None).model == "m"


# ---- Anthropic messages wire format ----------------------------------------------------------


def an_turn(blocks: list[dict[str, Any]], stop: str = "tool_use") -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 21, "output_tokens": 9},
    }


def an_tool(call_id: str, name: str, args: dict[str, Any], text: str | None = None):
    blocks = [{"type": "text", "text": text}] if text else []
    return an_turn([*blocks, {"type": "tool_use", "id": call_id, "name": name, "input": args}])


def test_anthropic_client_drives_an_episode_end_to_end(api: Any, box: Sandbox) -> None:
    api.responses = [
        an_tool("tu1", "read_file", {"path": "calc.py"}, text="Let me look."),
        an_turn([{"type": "text", "text": "Done, I think."}], stop="end_turn"),  # gets nudged
        an_tool("tu2", "edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        an_tool("tu3", "report_impossible", {"reason": "cannot verify"}),
    ]
    client = AnthropicClient("claude-test", base_url=api.url, max_tokens=512, retry=FAST)
    ep = run_episode(client, standard_tools(box), "be careful", "fix it")
    assert ep.status == EpisodeStatus.OK and ep.impossible_reported and not ep.submitted
    assert ep.impossible_reason == "cannot verify"
    assert box.read_file("calc.py").endswith("return a + b\n")
    assert [r["path"] for r in api.requests] == ["/v1/messages"] * 5
    first, last = api.requests[0], api.requests[-1]
    # SDK versions differ on the header (x-api-key or a bearer token); the key is the env's.
    sent = first["headers"].get("x-api-key") or first["headers"].get("authorization", "")
    assert sent.endswith("sk-test-anthropic")
    assert "anthropic-version" in first["headers"]
    assert first["body"]["system"] == "be careful" and first["body"]["max_tokens"] == 512
    schema = next(t for t in first["body"]["tools"] if t["name"] == "read_file")["input_schema"]
    assert schema["properties"]["path"]["type"] == "string"
    msgs = last["body"]["messages"]
    assert [m["role"] for m in msgs] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert msgs[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "tu1", "name": "read_file", "input": {"path": "calc.py"}},
    ]
    result = msgs[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "tu1"
    assert "return a - b" in result["content"] and result["is_error"] is False
    assert msgs[4]["content"][0]["text"].startswith("You replied without calling a tool")
    assert msgs[6]["content"][0]["content"] == "edited calc.py: replaced 1 occurrence"
    turn = next(e for e in ep.transcript if e["event"] == "model_turn")
    assert turn["text"] == "Let me look." and turn["usage"] == {
        "input_tokens": 21,
        "output_tokens": 9,
    }


def test_anthropic_error_results_are_flagged(api: Any, box: Sandbox) -> None:
    api.responses = [an_tool("tu1", "read_file", {"path": "nope.py"}), an_tool("tu2", "submit", {})]
    client = AnthropicClient("claude-test", base_url=api.url, retry=FAST)
    run_episode(client, standard_tools(box), "s", "u")
    block = api.requests[1]["body"]["messages"][2]["content"][0]
    assert block["is_error"] is True and "does not exist" in block["content"]


# ---- conversion and backoff details ------------------------------------------------------------


def test_message_conversion_keeps_roles_valid() -> None:
    neutral = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "name": "x", "arguments": "{bad json"},
                {"id": "b", "name": "y", "arguments": "{}"},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "name": "x", "content": "err", "is_error": True},
        {"role": "tool", "tool_call_id": "b", "name": "y", "content": "ok", "is_error": False},
        {"role": "assistant", "content": "text only", "tool_calls": []},
        {"role": "user", "content": "nudge"},
    ]
    system, msgs = to_anthropic_messages(neutral)
    assert system == "S"
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"][0]["input"] == {}  # unparseable arguments cannot be replayed as-is
    assert [b["tool_use_id"] for b in msgs[2]["content"]] == ["a", "b"]
    oa = to_openai_messages(neutral)
    assert oa[2]["tool_calls"][0]["function"]["arguments"] == "{bad json"
    assert "tool_calls" not in oa[5] and oa[3] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "err",
    }


def test_retry_policy_backs_off_exponentially_and_honours_retry_after() -> None:
    p = RetryPolicy(initial_delay_s=1.0, max_delay_s=8.0, multiplier=2.0, jitter=0.0)
    assert [p.delay(a) for a in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert p.delay(1, retry_after=5.0) == 5.0
    assert p.delay(1, retry_after=100.0) == 8.0
    jittered = RetryPolicy(initial_delay_s=1.0, jitter=0.5).delay(1)
    assert 1.0 <= jittered <= 1.5


def test_tool_specs_reach_both_providers_unchanged() -> None:
    spec = ToolSpec("t", "d", {"type": "object", "properties": {}, "additionalProperties": False})
    from verigap.agents._clients import to_openai_tools

    assert to_openai_tools([spec])[0]["function"]["parameters"] is spec.parameters
