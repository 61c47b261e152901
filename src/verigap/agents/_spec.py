"""One place that turns a ``provider:name`` string into a model client.

``openai:MODEL``, ``anthropic:MODEL`` and ``local:WEIGHTS`` are built here; ``scripted:NAME``
depends on the task family (each family owns its scripts), so families handle that prefix
themselves and pass every other spec through :func:`client_from_spec`.
"""

from __future__ import annotations

from typing import Any

from verigap.agents._types import ModelClient
from verigap.errors import ConfigError

MODEL_PROVIDERS = ("openai", "anthropic", "local")
"""Providers of real models; ``scripted`` is each family's own."""

SPEC_HELP = "openai:MODEL, anthropic:MODEL or local:smollm2 (or local:/path/to/model.gguf|dir)"


def is_model_spec(spec: str) -> bool:
    """``provider:name`` with a real-model provider and a non-empty name."""
    provider, _, name = spec.partition(":")
    return provider in MODEL_PROVIDERS and bool(name)


def client_from_spec(
    spec: str,
    *,
    base_url: str | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: int | None = None,
    **local: Any,
) -> ModelClient:
    """A client for ``spec``; deterministic decoding (temperature 0) unless asked otherwise.

    ``seed`` and ``max_new_tokens`` apply to local models (a remote API takes no seed here);
    extra keyword arguments go to :class:`LocalClient`.
    """
    provider, _, name = spec.partition(":")
    if not is_model_spec(spec):
        raise ConfigError(f"model spec {spec!r}: use {SPEC_HELP}")
    if provider == "openai":
        from verigap.agents._clients import OpenAIClient

        return OpenAIClient(
            name, base_url=base_url, temperature=temperature, max_tokens=max_new_tokens
        )
    if provider == "anthropic":
        from verigap.agents._clients import AnthropicClient

        return AnthropicClient(
            name,
            base_url=base_url,
            temperature=temperature,
            **({"max_tokens": max_new_tokens} if max_new_tokens else {}),
        )
    from verigap.agents._local import LocalClient

    return LocalClient.from_spec(
        name,
        temperature=temperature,
        seed=seed,
        **({"max_new_tokens": max_new_tokens} if max_new_tokens else {}),
        **local,
    )
