"""Agents: the tool-calling episode loop, the standard tools and the model clients.

>>> box = make_sandbox(materialize(task_src, workdir))
>>> client = client_from_spec("openai:gpt-4.1-mini")   # or anthropic:..., local:smollm2
>>> ep = run_episode(client, standard_tools(box), SYSTEM, task_prompt, Budget(max_turns=40))
>>> ep.status, ep.submitted, ep.to_json()
"""

from verigap.agents._clients import (
    AnthropicClient,
    ModelError,
    OpenAIClient,
    RetryPolicy,
    ScriptedClient,
    ScriptExhausted,
    call_with_retries,
    to_anthropic_messages,
    to_openai_messages,
)
from verigap.agents._local import LocalClient, parse_tool_calls
from verigap.agents._loop import NUDGE, Budget, Episode, EpisodeStatus, run_episode
from verigap.agents._spec import MODEL_PROVIDERS, SPEC_HELP, client_from_spec, is_model_spec
from verigap.agents._tools import (
    Tool,
    ToolArgs,
    ToolError,
    ToolOutput,
    command_timeout,
    format_exec,
    standard_tools,
)
from verigap.agents._types import ModelClient, ModelTurn, ToolCall, ToolSpec

__all__ = [
    "NUDGE",
    "AnthropicClient",
    "Budget",
    "LocalClient",
    "MODEL_PROVIDERS",
    "SPEC_HELP",
    "Episode",
    "EpisodeStatus",
    "ModelClient",
    "ModelError",
    "ModelTurn",
    "OpenAIClient",
    "RetryPolicy",
    "ScriptExhausted",
    "ScriptedClient",
    "Tool",
    "ToolArgs",
    "ToolCall",
    "ToolError",
    "ToolOutput",
    "ToolSpec",
    "call_with_retries",
    "client_from_spec",
    "command_timeout",
    "format_exec",
    "is_model_spec",
    "parse_tool_calls",
    "run_episode",
    "standard_tools",
    "to_anthropic_messages",
    "to_openai_messages",
]
