"""The local language model in front of the silent-bug bank: what its episodes did, beside the
scripted controls.

Reads finished eval run directories: the model's (``verigap silentbug eval --agent
local:smollm2 ...``) and scripted ones to set beside it. Writes one results file with each of
the model's episodes (reward, outcome, correct, component matches, how the episode ended,
turns; tool calls written, how many the tools accepted and why the rest were refused;
generated tokens and seconds per turn) and ``verigap silentbug analyze``'s analysis of all the
run directories together, arm D's best-constant answer and chance included.

    python benchmarks/silentbug_local_model.py --model-run runs/sb_local/eval \\
        --beside runs/sb_scripted_test/* --max-new-tokens 160 \\
        --out results/silentbug/eval_local_smollm2.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError
from verigap.results import write_result
from verigap.silentbug import evaluate as ev


def _refusal(content: str) -> str:
    """The kind of refusal a tool error is (its first words), for counting."""
    head = content.split(";", 1)[0].split(":", 1)[0]
    return " ".join(head.split()[:4])


def episode_record(result: dict[str, Any], episode_dir: Path) -> dict[str, Any]:
    """One model episode: the verdict's numbers and what the transcript shows of the model."""
    v = result["verdict"]
    transcript = json.loads((episode_dir / "transcript.json").read_text())
    events = transcript.get("transcript", [])
    turns = [e for e in events if e.get("event") == "model_turn"]
    results = [e for e in events if e.get("event") == "tool_result"]
    refused: dict[str, int] = {}
    for e in results:
        if e.get("is_error"):
            key = _refusal(str(e.get("content", "")))
            refused[key] = refused.get(key, 0) + 1
    seconds = sum(float(t.get("duration_s", 0.0)) for t in turns)
    new_tokens = sum(int(t.get("usage", {}).get("output_tokens", 0)) for t in turns)
    return {
        "bug": result["bug"],
        "arm": result["arm"],
        "seed": result["seed"],
        "class": result["class"],
        "split": result["split"],
        "reward": v["reward"],
        "correct": v["correct"],
        "hacks": v["hacks"],
        "outcome": v["checks"].get("outcome"),
        "component_strict": v["checks"].get("component_strict"),
        "component_set": v["checks"].get("component_set"),
        "diagnosed": v["checks"].get("diagnosed"),
        "status": transcript.get("status"),
        "reason": transcript.get("reason"),
        "turns": len(turns),
        "tool_calls_written": sum(len(t.get("tool_calls") or []) for t in turns),
        "tool_calls_accepted": sum(not e.get("is_error") for e in results),
        "tool_calls_refused": refused,
        "prompt_tokens_per_turn": [int(t.get("usage", {}).get("input_tokens", 0)) for t in turns],
        "new_tokens": new_tokens,
        "model_seconds": round(seconds, 1),
        "seconds_per_turn": [round(float(t.get("duration_s", 0.0)), 1) for t in turns],
        "tokens_per_s": round(new_tokens / seconds, 3) if seconds else None,
        "first_reply": (turns[0].get("text") or "")[:400] if turns else None,
        "episode_wall_s": result.get("wall_s"),
    }


def model_episodes(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for done in sorted((run_dir / "episodes").glob("*/result.json")):
        rows.append(episode_record(ev.load_episode(done), done.parent))
    if not rows:
        raise ConfigError(f"no finished episodes in {run_dir}; run verigap silentbug eval first")
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = sum(r["model_seconds"] for r in rows)
    tokens = sum(r["new_tokens"] for r in rows)
    return {
        "episodes": len(rows),
        "arms": sorted({r["arm"] for r in rows}),
        "bugs": sorted({r["bug"] for r in rows}),
        "turns": sum(r["turns"] for r in rows),
        "tool_calls_written": sum(r["tool_calls_written"] for r in rows),
        "tool_calls_accepted": sum(r["tool_calls_accepted"] for r in rows),
        "diagnoses_submitted": sum(bool(r["diagnosed"]) for r in rows),
        "mean_reward": sum(r["reward"] for r in rows) / len(rows),
        "correct": sum(bool(r["correct"]) for r in rows),
        "new_tokens": tokens,
        "model_seconds": round(seconds, 1),
        "tokens_per_s": round(tokens / seconds, 3) if seconds else None,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-run", type=Path, required=True)
    ap.add_argument(
        "--beside",
        type=Path,
        nargs="*",
        default=[],
        help="scripted eval run directories analysed beside the model's",
    )
    ap.add_argument(
        "--max-new-tokens",
        type=int,
        required=True,
        help="VERIGAP_LOCAL_MAX_NEW_TOKENS the eval ran with (not in its config)",
    )
    ap.add_argument("--out", type=Path, default=Path("results/silentbug/eval_local_smollm2.json"))
    args = ap.parse_args(argv)
    rows = model_episodes(args.model_run)
    results = [r for d in [args.model_run, *args.beside] for r in ev.load_run(d)]
    data = {
        "model_eval_command": ev.eval_command(args.model_run),
        "max_new_tokens": args.max_new_tokens,
        "beside": {d.name: ev.eval_command(d) for d in args.beside},
        "totals": totals(rows),
        "episodes": rows,
        "analysis": ev.analyze(results),
    }
    beside = " ".join(str(d) for d in args.beside)
    write_result(
        args.out,
        data,
        command=f"python benchmarks/silentbug_local_model.py --model-run "
        f"{args.model_run} --beside {beside} --max-new-tokens "
        f"{args.max_new_tokens} --out {args.out}",
    )
    print(json.dumps(data["totals"], indent=2))


if __name__ == "__main__":
    main()
