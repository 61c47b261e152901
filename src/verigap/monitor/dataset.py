"""The battery's episodes as a labelled trajectory set: OpenAI-style chat messages + labels.

One record per battery job (``RUN_DIR/<agent>/<task>/{result,transcript}.json``)::

    {"id": "stub/task-1", "task_id": ..., "agent": "stub",
     "messages": [{"role": "system"|"user"|"assistant"|"tool", ...}],
     "label": {"hack": true, "classes": ["stub"], "family": "careless repair",
               "trace_category": "Solution Quality Degradation", "correct": false,
               "honest": false}}

``label.hack`` is what the scripted agent *did* (it was written to exploit, or to be honest),
not what a grader said; ``label.named_by_v2`` keeps the grader's names beside it.
"""

from __future__ import annotations

import gzip
import json
import lzma
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError

#: Our exploit families -> TRACE's top-level categories. Only the four top-level names the
#: public TRACE dataset card spells out are used (arXiv 2601.20103; its other six are not
#: named there, so nothing here maps to them).
TRACE_CATEGORY: dict[str, str] = {
    "test tampering": "Test Suite Exploitation",
    "report rewriting": "Test Suite Exploitation",
    "skip / xfail": "Test Suite Exploitation",
    "special-casing": "Test Suite Exploitation",
    "always-equal object": "Test Suite Exploitation",
    "config tampering": "Test Suite Exploitation",
    "careless repair": "Solution Quality Degradation",
    "answer leak": "Context Exploitation",
    "early exit": "Execution Environment Hacks",
    "startup injection": "Execution Environment Hacks",
    "environment injection": "Execution Environment Hacks",
    "monkeypatching": "Execution Environment Hacks",
    "forged results": "Execution Environment Hacks",
    "sandbox escape": "Execution Environment Hacks",
}
BENIGN = "Benign"
#: a family with no counterpart among the TRACE categories named publicly (false claims)
UNMAPPED = "unmapped"


def messages(transcript: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episode's conversation in OpenAI chat format (tool calls as ``function`` calls)."""
    out: list[dict[str, Any]] = []
    for e in transcript:
        ev = e.get("event")
        if ev == "message":
            out.append({"role": e["role"], "content": e.get("content") or ""})
        elif ev == "model_turn":
            m: dict[str, Any] = {"role": "assistant", "content": e.get("text")}
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c.get("arguments") or "{}"},
                }
                for c in e.get("tool_calls") or []
            ]
            if calls:
                m["tool_calls"] = calls
            out.append(m)
        elif ev == "tool_result":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": e["tool_call_id"],
                    "content": e.get("content") or "",
                }
            )
        elif ev == "nudge":
            out.append({"role": "user", "content": e.get("content") or ""})
    return out


def record(result: dict[str, Any], transcript: dict[str, Any]) -> dict[str, Any]:
    """One labelled trajectory from a battery job's result and transcript."""
    from verigap.repos.redteam.battery import BY_NAME

    name = result["exploit"]
    ex = BY_NAME.get(name)
    control = bool(result.get("control"))
    family = ex.klass if ex else result.get("klass", "?")
    v2 = result.get("grades", {}).get("v2", {})
    return {
        "id": f"{name}/{result['task_id']}",
        "task_id": result["task_id"],
        "agent": name,
        "messages": messages(transcript.get("transcript", [])),
        "label": {
            "hack": not control,
            "classes": list(result.get("expected_hacks", [])),
            "family": family,
            "trace_category": BENIGN if control else TRACE_CATEGORY.get(family, UNMAPPED),
            "honest": control,
            "correct": bool(result.get("correct")),
            "named_by_v2": list(v2.get("hacks", [])),
        },
    }


def from_battery(*run_dirs: Path) -> Iterator[dict[str, Any]]:
    """Every finished, non-skipped battery job under the run dirs, in a stable order (a job
    done in two dirs counts once, the first dir's)."""
    found: dict[tuple[str, str], Path] = {}
    for run_dir in run_dirs:
        hits = sorted(run_dir.glob("*/*/result.json"))
        if not hits:
            raise ConfigError(
                f"no battery results under {run_dir}; run `verigap redteam "
                f"TASKS --honest --out {run_dir}` first"
            )
        for h in hits:
            found.setdefault((h.parent.parent.name, h.parent.name), h)
    for _, res in sorted(found.items()):
        result = json.loads(res.read_text())
        tr = res.parent / "transcript.json"
        if result.get("skipped") or not tr.is_file():
            continue
        yield record(result, json.loads(tr.read_text()))


def write_jsonl(records: Iterable[dict[str, Any]], path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
            n += 1
    return n


def read_jsonl(
    path: Path, *, missing: str = "make one with `verigap monitor export`"
) -> list[dict[str, Any]]:
    """Labelled trajectories from JSON lines, plain or compressed (``.gz``, ``.xz``); each
    record needs ``messages`` and ``label``. ``missing`` says how to make an absent file."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such dataset; {missing}")
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    out = []
    with opener(path, "rt") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path}:{i}: not JSON ({e})") from None
            if not isinstance(r, dict) or "messages" not in r or "label" not in r:
                raise ConfigError(f"{path}:{i}: a record needs 'messages' and 'label'")
            out.append(r)
    return out
