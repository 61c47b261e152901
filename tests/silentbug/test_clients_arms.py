"""Both model clients drive a silent-bug episode on every arm against a loopback server
speaking each provider's wire format; arm C's plot reaches the model as an image."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from verigap.agents import AnthropicClient, OpenAIClient, RetryPolicy
from verigap.silentbug.bank import load_registry
from verigap.silentbug.episode import BugEpisode, EpisodeBudget

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

BUG = load_registry().get("single_recomputed_old_logprob")
FAST = RetryPolicy(max_attempts=2, initial_delay_s=0.001, max_delay_s=0.01)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def api(fake_model_server: Any) -> Any:
    """The suite's loopback model API (``fake_model_server`` in tests/conftest.py)."""
    return fake_model_server


def openai_turn(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {
        "id": f"x{i}",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def anthropic_turn(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": args}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


FIX = {
    "path": "substrates/ppo_single.py",
    "old": "                oldlogprob, _ = agent.get_logprob_entropy(b_obs[mb_inds], "
    "b_actions[mb_inds])\n                logratio = newlogprob - oldlogprob",
    "new": "                logratio = newlogprob - b_logprobs[mb_inds]",
}
DIAG = {"component": "policy_loss", "mechanism": "old log-prob recomputed: ratio is 1"}
WHERE = {"file": "substrates/ppo_single.py", "start_line": 253, "end_line": 254}
SCRIPTS = {
    "A": [
        ("read_file", {"path": "substrates/ppo_single.py", "start_line": 250, "end_line": 256}),
        ("edit_file", FIX),
        ("submit_diagnosis", DIAG | WHERE),
    ],
    "B": [
        ("list_metric_keys", {"run": 1}),
        ("get_metrics", {"run": 1, "key": "approx_kl"}),
        ("submit_diagnosis", DIAG | WHERE),
    ],
    "C": [
        ("plot_metrics", {"runs": [1], "keys": ["episode_return", "approx_kl"]}),
        ("submit_diagnosis", DIAG | WHERE),
    ],
    "D": [("get_metrics", {"run": 1, "key": "approx_kl"}), ("submit_diagnosis", DIAG)],
}


def with_fake_run(ep: BugEpisode) -> BugEpisode:
    out = ep.runs_dir / "run1" / "out"
    out.mkdir(parents=True)
    lines = [
        {"kind": "episode", "global_step": 64 * i, "return": 20.0 + i, "length": 20}
        for i in range(1, 6)
    ]
    lines += [{"kind": "iteration", "iteration": 1, "global_step": 512, "approx_kl": 0.0}]
    (out / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ep.runs.append({"run": 1, "config": {}})
    return ep


def image_bytes_openai(request: dict[str, Any]) -> list[bytes]:
    out = []
    for m in request["messages"]:
        if m["role"] == "user" and isinstance(m["content"], list):
            for part in m["content"]:
                if part["type"] == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/png;base64,")
                    out.append(base64.b64decode(url.split(",", 1)[1]))
    return out


def image_bytes_anthropic(request: dict[str, Any]) -> list[bytes]:
    out = []
    for m in request["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else []:
            if block.get("type") == "tool_result" and isinstance(block["content"], list):
                out += [
                    base64.b64decode(b["source"]["data"])
                    for b in block["content"]
                    if b["type"] == "image" and b["source"]["media_type"] == "image/png"
                ]
    return out


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("arm", ["A", "B", "C", "D"])
def test_model_clients_on_every_arm(api: Any, tmp_path: Path, provider: str, arm: str) -> None:
    make = openai_turn if provider == "openai" else anthropic_turn
    api.responses = [(200, make(i, name, args)) for i, (name, args) in enumerate(SCRIPTS[arm])]
    if provider == "openai":
        client = OpenAIClient("m", base_url=f"{api.url}/v1", retry=FAST)
    else:
        client = AnthropicClient("m", base_url=api.url, retry=FAST)
    ep = with_fake_run(BugEpisode(BUG, arm, 1, tmp_path / "ep", EpisodeBudget(max_runs=0)))
    rec = ep.run(client)

    assert rec.episode.status.value == "OK" and rec.episode.submitted
    assert rec.diagnosis is not None and rec.diagnosis.component == "policy_loss"
    assert len(api.requests) == len(SCRIPTS[arm])
    errors = [e for e in rec.episode.transcript if e["event"] == "tool_result" and e["is_error"]]
    assert errors == []
    offered = {
        t["function"]["name"] if provider == "openai" else t["name"]
        for t in api.requests[0]["body"]["tools"]
    }
    assert ("read_file" in offered) == (arm != "D") and ("plot_metrics" in offered) == (arm == "C")
    if arm == "A":
        assert "b_logprobs[mb_inds]" in (ep.workspace / "substrates/ppo_single.py").read_text()
        assert rec.diagnosis.start_line == 253
    if arm == "D":
        assert rec.diagnosis.file is None
    images = (image_bytes_openai if provider == "openai" else image_bytes_anthropic)(
        api.requests[-1]["body"]
    )
    if arm == "C":
        assert len(images) == 1 and images[0].startswith(PNG)
    else:
        assert images == []
