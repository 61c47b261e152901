"""Model clients behind one method, ``complete(messages, tools) -> ModelTurn``.

- ``OpenAIClient``: chat completions through the official ``openai`` SDK; any
  OpenAI-compatible server (vLLM, SGLang, Ollama, ...) works through ``base_url``.
- ``AnthropicClient``: the Messages API through the official ``anthropic`` SDK.
- ``ScriptedClient``: replays a fixed list of tool calls; for tests and baselines.

API keys are read only from environment variables. The SDKs' own retries are switched off
and replaced by ``RetryPolicy`` so that backoff is explicit, configurable and testable.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from verigap.agents._types import ModelTurn, ToolCall, ToolSpec
from verigap.errors import ConfigError, VerigapError

_RETRY_STATUS = {408, 409, 429}


class ModelError(VerigapError, RuntimeError):
    """A model request failed for good (not retryable, or out of retries)."""


class ScriptExhausted(VerigapError, RuntimeError):
    """A ScriptedClient was asked for more turns than its script holds."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for rate limits (429), timeouts, conflicts and server errors."""

    max_attempts: int = 5
    initial_delay_s: float = 1.0
    max_delay_s: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.1
    """Fraction of each delay added at random, so parallel episodes do not retry in step."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        base = min(self.max_delay_s, self.initial_delay_s * self.multiplier ** (attempt - 1))
        if retry_after is not None:
            base = max(base, min(retry_after, self.max_delay_s))
        return base * (1.0 + self.jitter * random.random())


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def call_with_retries(
    fn: Callable[[], Any],
    policy: RetryPolicy,
    sdk: Any,
    provider: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """Call ``fn``; retry on the SDK's connection errors and retryable HTTP statuses."""
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return fn()
        except sdk.APIStatusError as exc:
            retryable = exc.status_code in _RETRY_STATUS or exc.status_code >= 500
            detail, wait_hint = f"HTTP {exc.status_code}: {exc.message}", _retry_after(exc)
        except sdk.APIConnectionError as exc:
            retryable, detail, wait_hint = True, f"{type(exc).__name__}: {exc}", None
        if not retryable:
            raise ModelError(f"{provider} request failed ({detail}); not retrying")
        if attempt == policy.max_attempts:
            raise ModelError(f"{provider} request failed after {attempt} attempts ({detail})")
        sleep(policy.delay(attempt, wait_hint))
    raise AssertionError("unreachable")


def _key_from_env(var: str, provider: str) -> str:
    import os

    key = os.environ.get(var)
    if not key:
        raise ConfigError(
            f"{provider}: environment variable {var} is not set. Keys are read only from the "
            f"environment: `export {var}=...` (or pass api_key_env= naming another variable)."
        )
    return key


def _import_sdk(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise ConfigError(
            f"the `{name}` package is not installed; install it with `pip install 'verigap[agents]'`"
        ) from None


# ---- OpenAI-compatible chat completions ---------------------------------------------------


def _png_base64(path: str) -> str:
    import base64
    from pathlib import Path

    return base64.b64encode(Path(path).read_bytes()).decode("ascii")


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions messages. Tool messages carry text only, so images a tool returned
    follow the turn's tool messages as one user message of ``image_url`` parts (captioned by
    file name: the host path is the harness's, not the model's)."""
    from pathlib import Path

    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (tool_call_id, png path)

    def flush() -> None:
        if not pending:
            return
        parts: list[dict[str, Any]] = [
            {
                "type": "text",
                "text": "Images returned by the tool calls above, in order: "
                + ", ".join(f"{cid}: {Path(path).name}" for cid, path in pending),
            }
        ]
        for _, path in pending:
            url = "data:image/png;base64," + _png_base64(path)
            parts.append({"type": "image_url", "image_url": {"url": url}})
        out.append({"role": "user", "content": parts})
        pending.clear()

    for m in messages:
        if m["role"] != "tool":
            flush()
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
            pending.extend((m["tool_call_id"], p) for p in m.get("images") or [])
        else:
            out.append({"role": m["role"], "content": m["content"]})
    flush()
    return out


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


class OpenAIClient:
    """Chat completions via the official SDK. ``base_url`` points it at vLLM/SGLang/Ollama.

    ``api_key_env=None`` is for local servers that need no key.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        temperature: float | None = None,
        max_tokens: int | None = None,
        request_timeout_s: float = 120.0,
        retry: RetryPolicy = RetryPolicy(),
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self._sdk = _import_sdk("openai")
        key = "EMPTY" if api_key_env is None else _key_from_env(api_key_env, "OpenAIClient")
        self._client = self._sdk.OpenAI(
            api_key=key, base_url=base_url, max_retries=0, timeout=request_timeout_s
        )
        self.model = model
        self.retry = retry
        self._params: dict[str, Any] = {}
        if temperature is not None:
            self._params["temperature"] = temperature
        if max_tokens is not None:
            self._params["max_tokens"] = max_tokens
        if extra_body:
            self._params["extra_body"] = extra_body

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            **self._params,
        }
        if tools:
            kwargs["tools"] = to_openai_tools(tools)
        resp = call_with_retries(
            lambda: self._client.chat.completions.create(**kwargs), self.retry, self._sdk, "OpenAI"
        )
        if not resp.choices:
            raise ModelError("OpenAI response had no choices")
        choice = resp.choices[0]
        calls = tuple(
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (choice.message.tool_calls or [])
        )
        usage = {}
        if resp.usage is not None:
            usage = {
                "input_tokens": resp.usage.prompt_tokens,
                "output_tokens": resp.usage.completion_tokens,
            }
        return ModelTurn(choice.message.content, calls, usage, choice.finish_reason)


# ---- Anthropic messages -----------------------------------------------------------------


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages): tool results become user-turn blocks; same-role turns merge."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m["role"]
        if role == "system":
            system.append(m["content"])
        elif role == "user":
            push("user", [{"type": "text", "text": m["content"]}])
        elif role == "tool":
            content: str | list[dict[str, Any]] = m["content"]
            if m.get("images"):
                content = [{"type": "text", "text": m["content"]}] + [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": _png_base64(p),
                        },
                    }
                    for p in m["images"]
                ]
            push(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m["tool_call_id"],
                        "content": content,
                        "is_error": bool(m.get("is_error")),
                    }
                ],
            )
        else:
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                try:
                    args = json.loads(c["arguments"]) if c["arguments"] else {}
                except json.JSONDecodeError:
                    args = {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": c["id"],
                        "name": c["name"],
                        "input": args if isinstance(args, dict) else {},
                    }
                )
            push("assistant", blocks or [{"type": "text", "text": "(no reply)"}])
    return "\n\n".join(system), out


class AnthropicClient:
    """The Messages API via the official ``anthropic`` SDK."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        max_tokens: int = 4096,
        temperature: float | None = None,
        request_timeout_s: float = 120.0,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self._sdk = _import_sdk("anthropic")
        key = _key_from_env(api_key_env, "AnthropicClient")
        self._client = self._sdk.Anthropic(
            api_key=key, base_url=base_url, max_retries=0, timeout=request_timeout_s
        )
        self.model = model
        self.retry = retry
        self.max_tokens = max_tokens
        self.temperature = temperature

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn:
        system, wire = to_anthropic_messages(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": wire,
        }
        if system:
            kwargs["system"] = system
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
        resp = call_with_retries(
            lambda: self._client.messages.create(**kwargs), self.retry, self._sdk, "Anthropic"
        )
        texts = [b.text for b in resp.content if b.type == "text"]
        calls = tuple(
            ToolCall(b.id, b.name, json.dumps(b.input))
            for b in resp.content
            if b.type == "tool_use"
        )
        usage = {"input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens}
        return ModelTurn("\n".join(texts) if texts else None, calls, usage, resp.stop_reason)


# ---- scripted ---------------------------------------------------------------------------

Step = ModelTurn | str | tuple[str, dict[str, Any] | str] | list[tuple[str, dict[str, Any] | str]]


class ScriptedClient:
    """Replays a script, one step per turn. A step is a ``ModelTurn``; a string (a reply
    with no tool call); a ``(tool_name, arguments)`` pair; a list of pairs (several calls
    in one turn); or a callable ``messages -> step`` for a baseline that reacts.
    Arguments may be a dict or raw JSON text (to test malformed calls).

    ``seen`` keeps the messages each turn was asked with, for tests and debugging.
    """

    def __init__(self, steps: Sequence[Step | Callable[[list[dict[str, Any]]], Step]]) -> None:
        self.steps = list(steps)
        self.seen: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn:
        turn = len(self.seen)
        self.seen.append([dict(m) for m in messages])
        if turn >= len(self.steps):
            raise ScriptExhausted(
                f"scripted client has {len(self.steps)} steps and was asked for turn {turn + 1}"
            )
        step = self.steps[turn]
        if callable(step):
            step = step(messages)
        return self._to_turn(step, turn + 1)

    @staticmethod
    def _to_turn(step: Step, turn: int) -> ModelTurn:
        if isinstance(step, ModelTurn):
            return step
        if isinstance(step, str):
            return ModelTurn(step)
        pairs = [step] if isinstance(step, tuple) else list(step)
        calls = tuple(
            ToolCall.of(f"call_{turn}_{i}", name, args) for i, (name, args) in enumerate(pairs)
        )
        return ModelTurn(None, calls, stop_reason="tool_calls")
