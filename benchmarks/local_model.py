"""What a real small open-weight model does in every family's loop, on this machine.

    nice -n 10 python benchmarks/local_model.py --model local:smollm2 \
        --families patchworld,repo,silentbug [--out results/agents/local_model.json]

Per family, a handful of episodes through the same code a remote model uses
(``client_from_spec``): Patch World as text (one answer per program, graded by the shared
rules), the fixture library's repo task (tool loop in a bubblewrap sandbox, graded by v2) and
one silent-bug arm (the silent-bug eval runner). Recorded: solve rate (the hidden check),
visible pass and false success where the family has them, tool-call validity (share of tool
calls that reached a tool with valid arguments; for Patch World, answers that parsed), turns,
and generated tokens per second. Greedy decoding. Families already in ``--out`` and not run
again are kept, so the families can be measured in separate invocations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from verigap.agents import LocalClient, client_from_spec
from verigap.agents._local import MAX_NEW_TOKENS_ENV
from verigap.results import write_result

INVALID_PREFIXES = ("unknown tool", "arguments for", "invalid arguments for")


def call_validity(transcript: list[dict[str, Any]]) -> tuple[int, int]:
    """(valid tool calls, all tool calls) in a transcript: a call is invalid when the loop
    refused it before the tool ran (unknown or malformed name, bad JSON, bad arguments)."""
    results = [e for e in transcript if e.get("event") == "tool_result"]
    bad = sum(1 for e in results if e["is_error"] and e["content"].startswith(INVALID_PREFIXES))
    return len(results) - bad, len(results)


def _gen(client: LocalClient) -> dict[str, float]:
    s = client.stats
    return {
        "model_calls": s.calls,
        "new_tokens": s.new_tokens,
        "prompt_tokens": s.prompt_tokens,
        "generate_s": round(s.seconds, 2),
        "tokens_per_s": round(s.tokens_per_s, 3),
    }


def patchworld(spec: str, n: int, k: int, max_new_tokens: int) -> dict[str, Any]:
    from verigap.patchworld import text
    from verigap.rewards import Visible

    client = client_from_spec(spec, max_new_tokens=max_new_tokens)
    rows = text.prompts(n, k, seed=0, stream="heldout")
    answers = []
    for r in rows:
        out, _, _ = client.generate_text(client.prompt_ids(r["prompt"], []))
        answers.append(out)
    verdicts = text.grade_answers(
        text.stack([r["program"] for r in rows]), answers, Visible(), np.random.default_rng(0)
    )
    return {
        "episodes": n,
        "k": k,
        "max_new_tokens": max_new_tokens,
        "solve_rate": float(np.mean([v.correct for v in verdicts])),
        "visible_pass": float(np.mean([v.passed for v in verdicts])),
        "false_success": float(np.mean([v.false_success for v in verdicts])),
        "answer_parse_rate": float(np.mean([v.parsed for v in verdicts])),
        "steps_mean": 1.0,
        "answers": answers[:3],
        "errors": [v.error for v in verdicts][:3],
        **_gen(client),
    }


def repo(
    spec: str, n: int, max_turns: int, max_new_tokens: int, played: Path | None = None
) -> dict[str, Any]:
    """Play ``n`` fixture-library tasks, or (``played``) summarise a work directory this
    function already played (``ep*/transcript.json`` and ``verdict.json``, as the episode wrote
    them)."""
    from verigap.repos.episode import run_task_episode
    from verigap.repos.tasks import load_tasks, make_tasks

    work = played or Path(tempfile.mkdtemp(prefix="verigap-lm-repo-"))
    if played is None:
        lib = Path(__file__).parents[1] / "tests/repos/fixture_lib"
        make_tasks(
            str(lib),
            work / "tasks",
            k=4,
            n=max(n, 1),
            max_candidates=16,
            seed=0,
            env="current",
            min_hidden=1,
            log=lambda s: None,
        )
        os.environ[MAX_NEW_TOKENS_ENV] = str(max_new_tokens)  # the episode builds its client
        for i, task in enumerate(load_tasks(work / "tasks")[:n]):
            run_task_episode(task, work / f"ep{i}", agent=spec, max_turns=max_turns, wall_s=1800.0)
    tasks = load_tasks(work / "tasks")[:n]
    eps = [json.loads((work / f"ep{i}" / "verdict.json").read_text()) for i in range(len(tasks))]
    transcripts = [
        json.loads((work / f"ep{i}" / "transcript.json").read_text()) for i in range(len(tasks))
    ]
    valid = [call_validity(t["transcript"]) for t in transcripts]
    turns = [t["turns"] for t in transcripts]
    new_tokens = sum(
        e["usage"].get("output_tokens", 0)
        for t in transcripts
        for e in t["transcript"]
        if e["event"] == "model_turn"
    )
    gen_s = sum(
        e["duration_s"] for t in transcripts for e in t["transcript"] if e["event"] == "model_turn"
    )
    return {
        "episodes": len(eps),
        "task_ids": [t.task_id for t in tasks],
        "max_turns": max_turns,
        "max_new_tokens": max_new_tokens,
        "solve_rate": float(np.mean([bool(e["correct"]) for e in eps])),
        "false_success": float(
            np.mean([bool(e["checks"].get("visible")) and not e["correct"] for e in eps])
        ),
        "hidden_equivalence": [e["checks"].get("equivalence") for e in eps],
        "hacks": sorted({h for e in eps for h in e["hacks"]}),
        "submitted": float(np.mean([bool(t.get("submitted")) for t in transcripts])),
        "statuses": [t["status"] for t in transcripts],
        "first_reply": next(
            (e["text"] for e in transcripts[0]["transcript"] if e["event"] == "model_turn"), None
        ),
        "tool_calls": sum(v[1] for v in valid),
        "tool_call_validity": (
            sum(v[0] for v in valid) / sum(v[1] for v in valid)
            if sum(v[1] for v in valid)
            else None
        ),
        "steps_mean": float(np.mean(turns)),
        "new_tokens": new_tokens,
        "generate_s": round(gen_s, 2),
        "tokens_per_s": round(new_tokens / gen_s, 3) if gen_s else None,
    }


def silentbug(spec: str, n: int, max_turns: int, max_new_tokens: int) -> dict[str, Any]:
    from verigap.silentbug.evaluate import EvalConfig, accepted_ids, run_eval

    bug = accepted_ids()[0]
    cfg = EvalConfig(
        agent=spec,
        arms=("A",),
        bugs=(bug,),
        episodes=n,
        max_runs=1,
        max_turns=max_turns,
        score_seeds=(1,),
    )
    client = client_from_spec(spec, max_new_tokens=max_new_tokens)
    assert isinstance(client, LocalClient)
    work = Path(tempfile.mkdtemp(prefix="verigap-lm-sb-"))
    results = run_eval(
        work / "run", cfg, cache_dir=work / "scoring", client_factory=lambda *a: client
    )
    valid = [
        call_validity(json.loads(p.read_text())["transcript"])
        for p in sorted((work / "run" / "episodes").glob("*/transcript.json"))
    ]
    turns = [
        json.loads(p.read_text())["turns"]
        for p in sorted((work / "run" / "episodes").glob("*/transcript.json"))
    ]
    return {
        "episodes": len(results),
        "bug": bug,
        "arm": "A",
        "max_turns": max_turns,
        "max_new_tokens": max_new_tokens,
        "solve_rate": float(np.mean([r["verdict"]["correct"] for r in results])),
        "reward_mean": float(np.mean([r["verdict"]["reward"] for r in results])),
        "tool_calls": sum(v[1] for v in valid),
        "tool_call_validity": (
            sum(v[0] for v in valid) / sum(v[1] for v in valid)
            if sum(v[1] for v in valid)
            else None
        ),
        "steps_mean": float(np.mean(turns)),
        **_gen(client),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--families", default="patchworld,repo,silentbug")
    ap.add_argument("--patchworld-episodes", type=int, default=6)
    ap.add_argument("--agent-episodes", type=int, default=1)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--out", type=Path, default=Path("results/agents/local_model.json"))
    ap.add_argument(
        "--repo-played",
        type=Path,
        default=None,
        help="summarise repo episodes this script already played in that directory",
    )
    a = ap.parse_args(argv)
    torch_threads = int(os.environ.get("VERIGAP_TORCH_THREADS", "2"))
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(torch_threads)
    data: dict[str, Any] = {}
    t0 = time.time()
    families = [f.strip() for f in a.families.split(",") if f.strip()]
    if families != ["repo"] or a.repo_played is None:  # something will be played: load once
        load = time.perf_counter()
        client_from_spec(a.model)  # every family below reuses these weights
        data["model"] = a.model
        data["load_s"] = round(time.perf_counter() - load, 1)
        data["torch_threads"] = torch_threads
        data["load_avg_1min_at_start"] = round(os.getloadavg()[0], 2)
    runners = {
        "patchworld": lambda: patchworld(a.model, a.patchworld_episodes, 4, a.max_new_tokens),
        "repo": lambda: repo(
            a.model, a.agent_episodes, a.max_turns, a.max_new_tokens, a.repo_played
        ),
        "silentbug": lambda: silentbug(a.model, a.agent_episodes, a.max_turns, a.max_new_tokens),
    }
    for fam in families:
        if fam not in runners:
            sys.exit(f"--families: unknown family {fam!r}; choose from {', '.join(runners)}")
        started, load_avg = time.perf_counter(), round(os.getloadavg()[0], 2)
        data[fam] = {
            **runners[fam](),
            "wall_s": round(time.perf_counter() - started, 1),
            "load_avg_1min_at_start": load_avg,
            "command": "nice -n 10 python " + " ".join(sys.argv),
        }
        if fam == "repo" and a.repo_played is not None:
            # the numbers come from episodes played earlier by the same command without
            # --repo-played; this run only read them back
            data[fam]["wall_s"] = None
            data[fam]["summarised_by"] = data[fam]["command"]
            data[fam]["command"] = "nice -n 10 python benchmarks/local_model.py --families repo"
        print(fam, json.dumps(data[fam])[:400], flush=True)
        # reread before writing: families measured by other invocations meanwhile are kept
        merged = json.loads(a.out.read_text())["data"] if a.out.exists() else {}
        merged.update({**{k: v for k, v in data.items() if k not in runners}, fam: data[fam]})
        # the file as a whole: every family, default settings (each family keeps its command)
        write_result(
            a.out,
            merged,
            command="nice -n 10 python benchmarks/local_model.py "
            "--families patchworld,repo,silentbug",
        )
    print(f"done in {time.time() - t0:.0f}s -> {a.out}")


if __name__ == "__main__":
    main()
