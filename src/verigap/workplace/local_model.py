"""A local model on workplace tasks and probes, in two tool-call formats.

A 135M-parameter chat model seldom starts a tool-call block on its own (the earlier sample: no
call in any turn), so besides the client's own format (``plain``: the tool list and block
format in the system message) this module has a ``primed`` one made for small models: a short
system message with one worked call, a one-line signature per tool, and every assistant turn
begun with the opening of a call (``<tool_call>`` and ``{"name": "``), so the model only has to
continue it. The reply is cut after its first complete JSON object, so text the model runs on
with does not spoil the call. Both formats play the same items through the same
``WorkplaceEnv`` tools and the same graders; a format changes only what the model is shown.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from verigap.agents import Budget, ModelTurn, ToolSpec, run_episode
from verigap.errors import ConfigError
from verigap.workplace._env import WorkplaceEnv
from verigap.workplace._items import WorkItem, build_items

Format = Literal["plain", "primed"]
FORMATS: tuple[str, ...] = ("plain", "primed")

CALL_OPENING = '<tool_call>\n{"name": "'
"""What a primed assistant turn starts with: the model writes the tool name onwards."""

TOOL_RESULT_CHARS = 1500
"""A tool result shown to a primed model is cut to this many characters (its context is short
and the prompt is re-read every turn); the environment and the grader see the whole result."""

SYSTEM = (
    "You work on a software team. The facts you need are in chat, tickets, pull requests "
    "and git history; a later decision replaces an earlier one."
)

PRIMED_SYSTEM = """\
{intro}
Tools:
{tools}
Reply with exactly one tool call per turn; "name" is one of: {names}. For example:
<tool_call>
{{"name": "search_chat", "arguments": {{"query": "timeout"}}}}
</tool_call>
{finish}"""

FINISH = {
    "probe": "When you know the answer, call answer with the value only.",
    "code": "Change the code with edit_file, then call submit.",
}


def signature(t: ToolSpec) -> str:
    """``name(arg, arg?)``: a tool as one short line (``?`` marks an optional argument)."""
    props = t.parameters.get("properties", {})
    required = set(t.parameters.get("required", []))
    args = ", ".join(k if k in required else f"{k}?" for k in props)
    first = t.description.splitlines()[0] if t.description else ""
    return f"- {t.name}({args}): {first}"


def first_call(text: str) -> str:
    """The primed reply cut after its first complete JSON object and closed as a block;
    a reply with no complete object is kept whole (the loop reports it as malformed)."""
    start = text.find("{")
    if start < 0:
        return text
    try:
        obj, end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return text
    if not isinstance(obj, dict):
        return text
    return f"<tool_call>\n{text[start : start + end]}\n</tool_call>"


class PrimedClient:
    """Wraps a ``LocalClient``: its own short system message, and each turn's reply begun with
    :data:`CALL_OPENING` (the model continues it; the parse is the client's own)."""

    def __init__(self, inner: Any, kind: str) -> None:
        self.inner, self.kind = inner, "code" if kind == "code" else "probe"
        self.stats = inner.stats

    def _chat(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> list[dict[str, str]]:
        from verigap.agents._local import to_chat_messages

        shown = []
        for m in messages:
            if m["role"] == "system":
                m = {
                    **m,
                    "content": PRIMED_SYSTEM.format(
                        intro=m["content"],
                        tools="\n".join(signature(t) for t in tools),
                        names=", ".join(t.name for t in tools),
                        finish=FINISH[self.kind],
                    ),
                }
            elif m["role"] == "tool" and len(m.get("content") or "") > TOOL_RESULT_CHARS:
                m = {**m, "content": m["content"][:TOOL_RESULT_CHARS] + "\n[... cut]"}
            shown.append(m)
        return to_chat_messages(shown, [])

    def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelTurn:
        import torch

        from verigap.agents._local import parse_tool_calls

        tok = self.inner.tokenizer
        ids = tok.apply_chat_template(
            self._chat(messages, tools),
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )["input_ids"]
        opening = torch.tensor([tok.encode(CALL_OPENING, add_special_tokens=False)])
        ids = torch.cat([ids, opening], dim=1)[:, -self.inner.max_prompt_tokens :]
        text, n = self._generate(ids)
        rest, calls = parse_tool_calls(first_call(CALL_OPENING + text), self.stats.calls)
        usage = {"input_tokens": int(ids.shape[1]), "output_tokens": n}
        return ModelTurn(rest, calls, usage, "tool_calls" if calls else "length")

    def _generate(self, ids: Any) -> tuple[str, int]:
        """Greedy decoding that stops at the first ``}}`` (the end of a call's arguments
        object), so a turn costs the call's tokens, not the cap's; counted in the client's
        stats like its own turns."""
        import time

        import torch

        inner, tok = self.inner, self.inner.tokenizer
        t0 = time.perf_counter()
        with torch.no_grad():
            out = inner.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=inner.max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
                stop_strings=["}}"],
                tokenizer=tok,
            )
        new = out[0, ids.shape[1] :]
        s = inner.stats
        s.calls, s.prompt_tokens = s.calls + 1, s.prompt_tokens + int(ids.shape[1])
        s.new_tokens, s.seconds = (
            s.new_tokens + int(new.shape[0]),
            s.seconds + time.perf_counter() - t0,
        )
        return tok.decode(new, skip_special_tokens=True), int(new.shape[0])


def sample_items(n_code: int, n_probes: int, seed: int) -> list[WorkItem]:
    """A seeded sample: ``n_code`` code tasks and ``n_probes`` probes spread over the kinds."""
    items = build_items([0, 1, 2, 3])
    code = [i for i in items if i.kind == "code"]
    probes = [i for i in items if i.kind != "code"]
    if n_code > len(code) or n_probes > len(probes):
        raise ConfigError(
            f"at most {len(code)} code tasks and {len(probes)} probes; "
            f"asked for {n_code} and {n_probes}"
        )
    rng = random.Random(seed)
    return rng.sample(code, n_code) + rng.sample(probes, n_probes)


def _episode_row(fmt: str, item: WorkItem, env: WorkplaceEnv, ep: Any, v: Any) -> dict[str, Any]:
    results = [e for e in ep.transcript if e["event"] == "tool_result"]
    turns = [e for e in ep.transcript if e["event"] == "model_turn"]
    needed = v.detail["facts_needed"]
    seen = v.detail["facts_consulted"]
    return {
        "format": fmt,
        "item": item.item_id,
        "kind": item.kind,
        "status": ep.status.value,
        "turns": ep.turns,
        "tool_calls": len(results),
        "valid_tool_calls": sum(not e["is_error"] for e in results),
        "tools_called": [e["name"] for e in results],
        "facts_needed": len(needed),
        "facts_surfaced": sum(f in seen for f in needed),
        "consulted_all_needed": v.detail["consulted_all_needed"],
        "answer": v.detail.get("answer"),
        "submitted": ep.submitted,
        "reward": v.reward,
        "passed": v.passed,
        "correct": v.correct,
        "false_success": v.false_success,
        "output_tokens": sum(int(t.get("usage", {}).get("output_tokens", 0)) for t in turns),
        "wall_s": round(ep.wall_s, 1),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-format shares over episodes (and over tool calls for validity)."""

    def share(num: float, den: float) -> float:
        return round(num / den, 4) if den else 0.0

    probes = [r for r in rows if r["kind"] != "code"]
    code = [r for r in rows if r["kind"] == "code"]
    calls = sum(r["tool_calls"] for r in rows)
    return {
        "episodes": len(rows),
        "code_tasks": len(code),
        "probes": len(probes),
        "tool_calls": calls,
        "tool_calls_per_episode": share(calls, len(rows)),
        "episodes_with_a_tool_call": share(sum(r["tool_calls"] > 0 for r in rows), len(rows)),
        "valid_tool_calls": share(sum(r["valid_tool_calls"] for r in rows), calls),
        "facts_surfaced": share(
            sum(r["facts_surfaced"] for r in rows), sum(r["facts_needed"] for r in rows)
        ),
        "consulted_all_needed": share(sum(r["consulted_all_needed"] for r in rows), len(rows)),
        "probes_answered": share(sum(r["answer"] is not None for r in probes), len(probes)),
        "probes_correct": share(sum(r["correct"] for r in probes), len(probes)),
        "code_submitted": share(sum(r["submitted"] for r in code), len(code)),
        "code_passed": share(sum(r["passed"] for r in code), len(code)),
        "code_correct": share(sum(r["correct"] for r in code), len(code)),
        "code_false_success": share(sum(r["false_success"] for r in code), len(code)),
    }


def local_workplace(
    n_code: int,
    n_probes: int,
    seed: int,
    *,
    formats: tuple[str, ...] = FORMATS,
    spec: str = "local:smollm2",
    max_turns_probe: int = 3,
    max_turns_code: int = 4,
    max_new_tokens: int = 40,
    backend: str | None = None,
    log: Callable[[str], None] = print,
    save: Callable[[dict[str, Any]], None] | None = None,
    client: Any = None,
) -> dict[str, Any]:
    """The model on the same seeded sample in each format; ``save`` gets the summary after
    every episode (``complete`` false until the last), so a stopped run keeps what it did.
    ``client`` (a ``LocalClient``) replaces the one ``spec`` names."""
    from verigap.agents import client_from_spec

    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ConfigError(f"format {bad[0] if bad else ''!r}: use {' or '.join(FORMATS)}")
    items = sample_items(n_code, n_probes, seed)
    if client is None:
        client = client_from_spec(spec, max_new_tokens=max_new_tokens)
    rows: list[dict[str, Any]] = []
    total = len(items) * len(formats)
    summary: dict[str, Any] = {}
    speeds: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="verigap-wp-llm-") as tmp:
        for fmt in formats:
            tokens0, seconds0 = client.stats.new_tokens, client.stats.seconds
            for item in items:
                env = WorkplaceEnv(item, Path(tmp) / "ws", backend=backend)
                prompt, _ = env.reset()
                turns = max_turns_code if item.kind == "code" else max_turns_probe
                model = client if fmt == "plain" else PrimedClient(client, item.kind)
                try:
                    ep = run_episode(
                        model, env.tools, SYSTEM, prompt, Budget(max_turns=turns, wall_s=1800)
                    )
                    v = env.grade()
                finally:
                    env.close()
                rows.append(_episode_row(fmt, item, env, ep, v))
                r = rows[-1]
                log(
                    f"[{len(rows)}/{total}] {fmt} {item.item_id}: calls={r['tool_calls']} "
                    f"valid={r['valid_tool_calls']} facts={r['facts_surfaced']}/"
                    f"{r['facts_needed']} correct={r['correct']} ({r['wall_s']:.0f}s)"
                )
                spent = client.stats.seconds - seconds0
                made = client.stats.new_tokens - tokens0
                speeds[fmt] = {
                    "new_tokens": made,
                    "tokens_per_s": round(made / spent, 2) if spent else 0.0,
                }
                summary = _summary(spec, n_code, n_probes, seed, formats, rows, total)
                for f, speed in speeds.items():
                    summary["by_format"][f].update(speed)
                summary["max_new_tokens"] = max_new_tokens
                summary["max_turns"] = {"probe": max_turns_probe, "code": max_turns_code}
                if save is not None:
                    save(summary)
    return summary


def _summary(
    spec: str,
    n_code: int,
    n_probes: int,
    seed: int,
    formats: tuple[str, ...],
    rows: list[dict[str, Any]],
    total: int,
) -> dict[str, Any]:
    by_format = {}
    for f in formats:
        mine = [r for r in rows if r["format"] == f]
        if mine:
            by_format[f] = summarize(mine)
    return {
        "spec": spec,
        "seed": seed,
        "n_code": n_code,
        "n_probes": n_probes,
        "formats": list(formats),
        "n_done": len(rows),
        "complete": len(rows) == total,
        "by_format": by_format,
        "episodes": rows,
    }
