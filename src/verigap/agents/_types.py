"""Provider-neutral types shared by the loop, the tools and the model clients.

Messages inside verigap are plain dicts in one neutral shape; each client converts them to
its provider's wire format and back:

- ``{"role": "system" | "user", "content": str}``
- ``{"role": "assistant", "content": str | None, "tool_calls": [{"id", "name", "arguments"}]}``
  where ``arguments`` is the raw JSON text the model produced (it may be invalid);
- ``{"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}``,
  plus ``"images": [png path, ...]`` when the tool returned a ``ToolOutput`` with images.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """What a model is told about a tool: a name, a description and a JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model made it. ``arguments`` is raw JSON text, unvalidated."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @staticmethod
    def of(id: str, name: str, args: dict[str, Any] | str) -> ToolCall:
        """Build a call from a dict (serialised here) or from raw JSON text."""
        return ToolCall(id, name, args if isinstance(args, str) else json.dumps(args))


@dataclass(frozen=True)
class ModelTurn:
    """One model response: optional text, zero or more tool calls, usage and stop reason."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None

    def to_message(self) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": self.text,
            "tool_calls": [c.to_message() for c in self.tool_calls],
        }


class ModelClient(Protocol):
    """Anything that turns a conversation and tool specs into the next model turn."""

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn: ...
