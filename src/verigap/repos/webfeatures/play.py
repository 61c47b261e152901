"""Agents playing the web-app feature tasks: every (agent, task) episode graded, one results file.

The results file is rewritten after every episode (a stopped run keeps what it finished). Its
summary keeps, per agent, what the reward paid apart from what was correct, and for each
control where the truth came from: a submission the HTTP tests pass and the browser check
refuses is counted as ``browser_caught``. A model's row adds how it used its turns (tool calls
the tools accepted, turns without a call) and its generation speed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.repos.webfeatures.episode import CONTROLS, find_task, run_web_episode
from verigap.results import write_result

PLAY_COMMAND = "python -m verigap.repos.webfeatures play"


def check_agent(agent: str) -> str:
    """``agent`` if playable: a scripted control or a model spec."""
    kind, _, name = agent.partition(":")
    if kind == "scripted" and name in CONTROLS:
        return agent
    from verigap.agents import is_model_spec

    if kind != "scripted" and is_model_spec(agent):
        return agent
    raise ConfigError(
        f"--agents: {agent!r} is not an agent; use scripted:oracle, scripted:noop, "
        "scripted:sloppy or a model spec (local:smollm2, openai:MODEL, anthropic:MODEL)"
    )


def _row(agent: str, r: dict[str, Any], seconds: float) -> dict[str, Any]:
    checks = r["checks"]
    return {
        "agent": agent,
        "task_id": r["task_id"],
        "layers": r["detail"]["layers"],
        "reward": r["reward"],
        "correct": r["correct"],
        "false_success": r["false_success"],
        "status": r["status"],
        "hacks": r["hacks"],
        "checks": checks,
        "failed_hidden": len(r["detail"]["failed"]),
        "browser_caught": bool(checks.get("hidden_http")) and checks.get("browser") is False,
        "submitted": bool(r["submitted"]),
        "turns": r["turns"],
        "tool_calls": r["tool_calls"],
        "valid_tool_calls": r["valid_tool_calls"],
        "turns_without_call": r["turns_without_call"],
        "seconds": round(seconds, 1),
    }


def summarize(rows: list[dict[str, Any]], speed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per agent: episodes, paid, correct, false success, what caught a wrong submission."""
    by_agent: dict[str, dict[str, Any]] = {}
    for agent in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == agent]
        wrong = [r for r in mine if not r["correct"]]
        with_browser = [r for r in mine if "browser" in r["checks"]]
        out = {
            "episodes": len(mine),
            "paid": sum(r["reward"] > 0 for r in mine),
            "correct": sum(r["correct"] for r in mine),
            "false_success": sum(r["false_success"] for r in mine),
            "with_browser_check": len(with_browser),
            "browser_caught": sum(r["browser_caught"] for r in mine),
            "http_caught": sum(not r["checks"]["hidden_http"] for r in wrong),
            "submitted": sum(r["submitted"] for r in mine),
            "turns": sum(r["turns"] for r in mine),
            "tool_calls": sum(r["tool_calls"] for r in mine),
            "valid_tool_calls": sum(r["valid_tool_calls"] for r in mine),
            "turns_without_call": sum(r["turns_without_call"] for r in mine),
            "not_ok_status": sum(r["status"] != "OK" for r in mine),
        }
        out["solve_rate"] = out["correct"] / len(mine)
        out["valid_call_rate"] = out["valid_tool_calls"] / out["turns"] if out["turns"] else 0.0
        out.update(speed.get(agent, {}))
        by_agent[agent] = out
    return {"episodes": len(rows), "by_agent": by_agent, "rows": rows}


def play(
    agents: Sequence[str],
    tasks: Sequence[str],
    save: Path,
    *,
    max_turns: int = 30,
    max_new_tokens: int = 256,
    wall_s: float = 900.0,
    reward: str | None = None,
    backend: str = "bwrap",
    command: str = PLAY_COMMAND,
) -> dict[str, Any]:
    """Play every task with every agent (a model loaded once per agent); ``save`` is
    rewritten after every episode."""
    if not agents:
        raise ConfigError("--agents: name at least one agent, e.g. scripted:oracle")
    if max_turns < 1 or max_new_tokens < 1 or wall_s <= 0:
        raise ConfigError("--max-turns, --max-new-tokens and --wall-s must be positive")
    agents = [check_agent(a) for a in agents]
    chosen = [find_task(t) for t in tasks]  # every id checked before any episode runs
    if reward:
        from verigap.rewards import parse_scheme

        try:
            parse_scheme(reward)
        except ValueError as e:
            raise ConfigError(f"--reward: {e}") from None
    rows: list[dict[str, Any]] = []
    speed: dict[str, dict[str, Any]] = {}
    clients: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="verigap-webplay-runs-") as tmp:
        # task by task, every agent on each: a run stopped early keeps whole comparisons
        for i, task in enumerate(chosen):
            for agent in agents:
                if not agent.startswith("scripted:") and agent not in clients:
                    from verigap.agents import client_from_spec

                    clients[agent] = client_from_spec(agent, max_new_tokens=max_new_tokens)
                client = clients.get(agent)
                start = time.monotonic()
                r = run_web_episode(
                    task,
                    Path(tmp) / agent.replace(":", "_") / task.task_id,
                    agent=agent,
                    client=client,
                    reward=reward,
                    seed=i,
                    backend=backend,
                    max_turns=max_turns,
                    wall_s=wall_s,
                )
                rows.append(_row(agent, r, time.monotonic() - start))
                stats = getattr(client, "stats", None)
                if stats is not None:
                    speed[agent] = {
                        "new_tokens": stats.new_tokens,
                        "prompt_tokens": stats.prompt_tokens,
                        "generation_s": round(stats.seconds, 1),
                        "tokens_per_s": round(stats.tokens_per_s, 3),
                        "max_turns": max_turns,
                        "max_new_tokens": max_new_tokens,
                    }
                write_result(save, summarize(rows, speed), command=command)
    return summarize(rows, speed)
