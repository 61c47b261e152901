"""The local-model client on a tiny random Llama built in the test: no weights, no download."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from verigap.agents import (  # noqa: E402
    Budget,
    EpisodeStatus,
    LocalClient,
    ToolSpec,
    client_from_spec,
    parse_tool_calls,
    run_episode,
    standard_tools,
)
from verigap.agents._local import MALFORMED, resolve_weights, to_chat_messages  # noqa: E402
from verigap.agents._tiny import tiny_chat_model  # noqa: E402
from verigap.errors import ConfigError  # noqa: E402

SPEC = ToolSpec(
    "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
)


def test_parse_valid_call_and_surrounding_text() -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    rest, calls = parse_tool_calls(text, 3)
    assert rest == "Let me look."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_3_0", "read_file", {"path": "a.py"})
    ]


def test_parse_bad_json_keeps_the_name_and_raw_text() -> None:
    rest, calls = parse_tool_calls(
        '<tool_call>{"name": "run", "arguments": {"command": ls}}</tool_call>', 1
    )
    assert rest is None and calls[0].name == "run"
    with pytest.raises(json.JSONDecodeError):
        json.loads(calls[0].arguments)


def test_parse_nameless_and_unclosed_blocks() -> None:
    _, calls = parse_tool_calls('<tool_call>oops</tool_call> then <tool_call>{"name": "submit"', 1)
    assert [c.name for c in calls] == [MALFORMED, "submit"]
    assert parse_tool_calls("no calls here", 1) == ("no calls here", ())


def test_chat_messages_describe_tools_and_fold_tool_results_into_user_turns() -> None:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "name": "read_file", "arguments": '{"path": "x"}'}],
        },
        {
            "role": "tool",
            "tool_call_id": "c",
            "name": "read_file",
            "content": "boom",
            "is_error": True,
        },
        {"role": "user", "content": "nudge"},
    ]
    chat = to_chat_messages(msgs, [SPEC])
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert "- read_file(path: string)" in chat[0]["content"] and "<tool_call>" in chat[0]["content"]
    assert '"name": "read_file"' in chat[2]["content"]
    assert (
        chat[3]["content"].startswith("[tool error for read_file]\nboom")
        and "nudge" in chat[3]["content"]
    )


def test_tiny_model_renders_the_chat_template() -> None:
    model, tok = tiny_chat_model()
    client = LocalClient(model, tok, max_new_tokens=4)
    ids = client.prompt_ids(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], []
    )
    assert tok.decode(ids[0]) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_greedy_is_deterministic_and_sampling_follows_the_seed() -> None:
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "fix add"}]
    outs = []
    for temperature, seed in ((0.0, 0), (0.0, 5), (1.0, 1), (1.0, 1), (1.0, 2)):
        model, tok = tiny_chat_model(seed=0)
        c = LocalClient(model, tok, max_new_tokens=12, temperature=temperature, seed=seed)
        outs.append(c.generate_text(c.prompt_ids(msgs, []))[0])
        assert c.stats.new_tokens == 12 and c.stats.calls == 1
    assert outs[0] == outs[1]  # greedy ignores the seed
    assert outs[2] == outs[3] and outs[2] != outs[4]


def test_random_model_plays_an_episode_and_every_turn_gets_an_answer(box) -> None:
    """A model that writes no valid call is nudged each turn; the episode ends at the cap."""
    model, tok = tiny_chat_model()
    client = LocalClient(model, tok, max_new_tokens=8)
    ep = run_episode(
        client, standard_tools(box), "You fix bugs.", "Fix calc.py.", Budget(max_turns=2)
    )
    assert ep.status == EpisodeStatus.TURN_CAP and ep.turns == 2
    turns = [e for e in ep.transcript if e["event"] == "model_turn"]
    assert all(t["usage"]["output_tokens"] == 8 for t in turns)
    answered = [e["event"] for e in ep.transcript if e["event"] in ("nudge", "tool_result")]
    assert len(answered) >= 2


def test_malformed_call_from_the_model_becomes_an_error_observation(box) -> None:
    """The model's text goes through the client's parser; a bad block is answered, not fatal."""
    model, tok = tiny_chat_model()

    class Replies(LocalClient):
        """The real client with the decoder's text replaced (the random model writes noise)."""

        replies = iter(
            [
                '<tool_call>{"name": "read_file", "arguments": {path}}</tool_call>',
                '<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}',
                '<tool_call>{"name": "submit", "arguments": {"summary": "x"}}</tool_call>',
            ]
        )

        def generate_text(self, input_ids):  # type: ignore[override]
            super().generate_text(input_ids)
            return next(self.replies), 1, "stop"

    ep = run_episode(
        Replies(model, tok, max_new_tokens=1), standard_tools(box), "S", "U", Budget(max_turns=5)
    )
    results = [e for e in ep.transcript if e["event"] == "tool_result"]
    assert results[0]["is_error"] and "not valid JSON" in results[0]["content"]
    assert not results[1]["is_error"] and "return a - b" in results[1]["content"]
    assert ep.status == EpisodeStatus.OK and ep.submitted


def test_specs_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="local:smollm2"):
        client_from_spec("local:")
    with pytest.raises(ConfigError, match="no such file"):
        resolve_weights("/nonexistent/model.gguf")
    with pytest.raises(ConfigError, match="use openai:MODEL"):
        client_from_spec("mystery:model")


def test_tokenizer_without_chat_template_is_refused() -> None:
    model, tok = tiny_chat_model()
    tok.chat_template = None
    with pytest.raises(ConfigError, match="chat template"):
        LocalClient(model, tok)


def test_local_spec_loads_a_saved_model_directory(tmp_path) -> None:
    """``local:/path/dir``: the same loader a GGUF file or the smollm2 package goes through."""
    model, tok = tiny_chat_model(seed=3)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    a = client_from_spec(f"local:{tmp_path / 'm'}", max_new_tokens=6)
    b = LocalClient(model, tok, max_new_tokens=6)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert a.generate_text(a.prompt_ids(msgs, []))[0] == b.generate_text(b.prompt_ids(msgs, []))[0]
    assert client_from_spec(f"local:{tmp_path / 'm'}").model is a.model  # loaded once
    with pytest.raises(ConfigError, match="must be .gguf"):
        resolve_weights(str(tmp_path / "m" / "config.json"))


def test_max_new_tokens_default_comes_from_the_environment(monkeypatch) -> None:
    model, tok = tiny_chat_model()
    monkeypatch.setenv("VERIGAP_LOCAL_MAX_NEW_TOKENS", "3")
    assert LocalClient(model, tok).max_new_tokens == 3


def test_families_accept_local_specs() -> None:
    from verigap.repos import episode
    from verigap.silentbug import evaluate

    assert episode.parse_agent("local:smollm2") == ("local", "smollm2")
    assert evaluate.parse_agent("local:/models/x.gguf") == ("local", "/models/x.gguf")
    with pytest.raises(ConfigError, match="local:smollm2"):
        episode.parse_agent("local:")
