"""The local model's workplace runs without weights: the primed format's prompt and parse, a
scripted stand-in for the model's continuations played through the real tools and graders,
and the summary's shares computed from its episodes."""

from __future__ import annotations

from typing import Any

import pytest

from verigap.agents._local import LocalClient
from verigap.agents._tiny import tiny_chat_model
from verigap.workplace.local_model import (
    CALL_OPENING,
    TOOL_RESULT_CHARS,
    PrimedClient,
    first_call,
    local_workplace,
    sample_items,
    signature,
)

pytest.importorskip("transformers")


def test_first_call_keeps_the_call_and_drops_what_the_model_runs_on_with():
    text = '<tool_call>\n{"name": "search_chat", "arguments": {"query": "x"}}\n\nThe team decided'
    assert first_call(text) == (
        '<tool_call>\n{"name": "search_chat", "arguments": {"query": "x"}}\n</tool_call>'
    )
    assert first_call('<tool_call>\n{"name": "search_chat", "argu').endswith('"argu')


class _Scripted:
    """A stand-in for the model's ``generate``: each call appends the next scripted
    continuation (as tokens) to the prompt it was given."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tok, self.replies, self.prompts = tokenizer, list(replies), []

    def generate(self, ids: Any, **kw: Any) -> Any:
        import torch

        self.prompts.append(self.tok.decode(ids[0]))
        new = self.tok.encode(self.replies.pop(0), add_special_tokens=False)
        return torch.cat([ids, torch.tensor([new])], dim=1)


def _client(replies: list[str]) -> tuple[LocalClient, _Scripted]:
    _, tok = tiny_chat_model()
    model = _Scripted(tok, replies)
    return LocalClient(model, tok, max_new_tokens=40), model


def test_a_primed_turn_continues_the_opening_and_shows_short_tool_lines():
    client, model = _client(['read_ticket", "arguments": {"ticket_id": "WP-100"}} and more'])
    specs = [_spec("read_ticket", {"ticket_id": {"type": "string"}}, ["ticket_id"])]
    long_result = "x" * (TOOL_RESULT_CHARS + 500)
    messages = [
        {"role": "system", "content": "You work on a team."},
        {"role": "user", "content": "Who reviews it?"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "name": "read_ticket", "content": long_result, "is_error": False},
    ]
    turn = PrimedClient(client, "probe_reviewer").complete(messages, specs)
    (call,) = turn.tool_calls
    assert call.name == "read_ticket" and call.arguments == '{"ticket_id": "WP-100"}'
    prompt = model.prompts[0]
    assert prompt.endswith(CALL_OPENING) and "- read_ticket(ticket_id): Read" in prompt
    assert "[... cut]" in prompt and long_result not in prompt
    assert client.stats.calls == 1 and turn.usage["output_tokens"] > 0


def _spec(name: str, props: dict[str, Any], required: list[str]) -> Any:
    from verigap.agents import ToolSpec

    return ToolSpec(name, "Read one ticket.", {"properties": props, "required": required})


def test_signature_marks_optional_arguments():
    spec = _spec("search_chat", {"query": {}, "channel": {}}, ["query"])
    assert signature(spec) == "- search_chat(query, channel?): Read one ticket."


def test_a_scripted_model_through_the_real_tools_and_graders():
    (item,) = sample_items(0, 1, seed=3)
    knob = item.scenario.knob
    replies = [
        f'search_chat", "arguments": {{"query": "{knob.func}"}}}}',
        'no_such_tool", "arguments": {}}',
        f'answer", "arguments": {{"answer": {_literal(item)}}}}}',
    ]
    client, _ = _client(replies)
    data = local_workplace(0, 1, 3, formats=("primed",), client=client, log=lambda s: None)
    (row,) = data["episodes"]
    assert row["tool_calls"] == 3 and row["valid_tool_calls"] == 2
    assert row["tools_called"] == ["search_chat", "no_such_tool", "answer"]
    s = data["by_format"]["primed"]
    assert s["valid_tool_calls"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["probes_answered"] == 1.0 and data["complete"] is True
    assert s["probes_correct"] == float(row["correct"]) == 1.0
    assert s["tokens_per_s"] > 0


def _literal(item: Any) -> str:
    import json

    expected = item.expected
    text = (
        expected
        if item.kind == "probe_reviewer"
        else (json.dumps(expected) if item.kind == "probe_proposals" else repr(expected))
    )
    return json.dumps(text)


def test_an_unknown_format_is_refused_with_the_choices():
    with pytest.raises(Exception, match="plain or primed"):
        local_workplace(0, 1, 0, formats=("fancy",), client=object())
