"""Does an SFT start give GRPO a reward signal? Greedy and sampled answers on held-out programs.

    python benchmarks/lm_start_probe.py --label k2_compact --k 2 --prompt compact \
        [--sft-programs 64] [--sft-batch 2] [--sft-lr 5e-4] [--programs 20] [--group 4] \
        [--sample 1.0:1.0 --sample 0.7:0.95] [--out results/llm/lm_start_probe.json]

GRPO compares the answers within a group: where every answer in a group earns the same reward,
the group's advantage is zero and the step teaches nothing. Paid by visible checks, an answer
earns 1 only when it parses and writes the exact reference value on every tested broken branch
(``rules.grade_ordered``). So, for an SFT start (trained here, or loaded from the experiment
log's SFT cache when the same start was made before), on the first ``--programs`` held-out
programs this records: the greedy answer, and a group of ``--group`` answers sampled as TRL's
GRPO samples them (temperature, top-p, no top-k) for each ``--sample T:P``; per setting the
share of answers that parse, the exact-value accuracy on tested broken branches (of parsed
answers), the visible pass and false-success rates, and the share of groups whose visible
rewards differ (at least one pass and one fail). Also the prompt's and the answers' token
counts, which set the cost of a GRPO step. Pinned numerics; records are kept per label.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from verigap import numerics  # first: the pin acts only before PyTorch loads

numerics.apply()
import numpy as np  # noqa: E402

from verigap import trl as vt  # noqa: E402
from verigap.agents._local import load_model, resolve_weights  # noqa: E402
from verigap.patchworld import text  # noqa: E402
from verigap.results import read_result, write_result  # noqa: E402
from verigap.rewards import Visible  # noqa: E402


def _sample_arg(s: str) -> tuple[float, float]:
    try:
        t, p = (float(x) for x in s.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sample takes TEMPERATURE:TOP_P, got {s!r}") from None
    if t <= 0 or not 0 < p <= 1:
        raise argparse.ArgumentTypeError(f"--sample {s!r}: temperature > 0 and 0 < top_p <= 1")
    return t, p


def _answers(model: Any, tok: Any, prompt: list[dict[str, str]], n: int, **kw: Any) -> list[str]:
    import torch

    ids = tok.apply_chat_template(
        prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            num_return_sequences=n,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            **kw,
        )
    return [tok.decode(o[ids.shape[1] :], skip_special_tokens=True) for o in out]


def score(records: list[dict[str, Any]], answers: list[list[str]]) -> dict[str, float]:
    """Rates over groups of answers (one group per program record)."""
    parsed, exact, visible, false_s, varied, lengths = [], [], [], [], [], []
    for rec, group in zip(records, answers, strict=True):
        prog = text.program_from_record(rec)
        vs = text.grade_answers(
            text.stack([rec] * len(group)), group, Visible(), np.random.default_rng(0)
        )
        tested = prog.at_order("tested")[0]
        ref = prog.at_order("reference")[0]
        for a, v in zip(group, vs, strict=True):
            parsed.append(v.parsed)
            visible.append(v.passed)
            false_s.append(v.false_success)
            lengths.append(len(a))
            if v.parsed:
                acts = text.parse_answer(prog, a)
                exact.extend(bool(acts[j] == ref[j]) for j in np.flatnonzero(tested))
        passes = [v.passed for v in vs]
        varied.append(any(passes) and not all(passes))
    return {
        "answer_parsed": float(np.mean(parsed)),
        "tested_branch_exact": float(np.mean(exact)) if exact else 0.0,
        "tested_branches_graded": len(exact),
        "visible_pass": float(np.mean(visible)),
        "false_success": float(np.mean(false_s)),
        "groups_with_reward_variance": float(np.mean(varied)),
        "groups": len(varied),
    }


def prompt_tokens(tok: Any, rows: list[dict[str, Any]]) -> float:
    """Mean tokens of the rows' prompts through the chat template (what a GRPO step reads)."""
    return float(
        np.mean(
            [
                len(
                    tok.apply_chat_template(
                        r["prompt"], add_generation_prompt=True, return_dict=True
                    )["input_ids"]
                )
                for r in rows
            ]
        )
    )


def recount(model: str, out: Path, argv: list[str] | None) -> int:
    """Recompute ``prompt_tokens_mean`` of every record in ``out`` from its config (the first
    version of this script counted the template's output keys, not its tokens)."""
    from transformers import AutoTokenizer

    path = resolve_weights(model.split(":", 1)[1])
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    data = read_result(out)
    for rec in data["probes"].values():
        c = rec["config"]
        n = rec["greedy"]["groups"]
        rows = text.prompts(n, c["k"], seed=0, stream="heldout", style=c.get("prompt", "full"))
        rec["prompt_tokens_mean"] = prompt_tokens(tok, rows)
    write_result(
        out,
        data,
        command=" ".join(["python", "benchmarks/lm_start_probe.py", *(argv or sys.argv[1:])]),
    )
    print({k: r["prompt_tokens_mean"] for k, r in data["probes"].items()})
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="the record's name in the output file")
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--prompt", default="full", choices=text.PROMPT_STYLES)
    ap.add_argument("--sft-programs", type=int, default=64)
    ap.add_argument("--sft-batch", type=int, default=2)
    ap.add_argument("--sft-lr", type=float, default=5e-4)
    ap.add_argument("--programs", type=int, default=20)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=0, help="0: 10 per broken branch")
    ap.add_argument("--sample", type=_sample_arg, action="append", default=None)
    ap.add_argument("--out", type=Path, default=Path("results/llm/lm_start_probe.json"))
    ap.add_argument("--sft-cache", type=Path, default=Path("runs/experiments-language-model/_sft"))
    ap.add_argument(
        "--recount-tokens",
        action="store_true",
        help="only recount every stored record's prompt tokens with the tokenizer (no model)",
    )
    a = ap.parse_args(argv)
    if a.recount_tokens:
        return recount(a.model, a.out, argv)
    if not a.model.startswith("local:"):
        print("error: --model takes a local model spec, e.g. local:smollm2", file=sys.stderr)
        return 2
    import torch

    samples = a.sample or [(1.0, 1.0)]
    cfg = vt.LMExperimentConfig(
        model=a.model,
        seed=a.seed,
        k=a.k,
        prompt=a.prompt,
        sft_programs=a.sft_programs,
        sft_batch=a.sft_batch,
        sft_lr=a.sft_lr,
    )
    cap = a.max_new_tokens or 10 * a.k
    t0, c0 = time.perf_counter(), time.process_time()
    model, tok = load_model(resolve_weights(a.model.split(":", 1)[1]))
    with tempfile.TemporaryDirectory() as tmp:
        model, start, sft_cpu = vt.sft_start(cfg, model, tok, Path(tmp), a.sft_cache)
    rows = text.prompts(a.programs, a.k, seed=0, stream="heldout", style=a.prompt)
    recs = [r["program"] for r in rows]
    greedy = [
        _answers(model, tok, r["prompt"], 1, do_sample=False, max_new_tokens=cap) for r in rows
    ]
    record: dict[str, Any] = {
        "config": {
            f: asdict(cfg)[f]
            for f in ("model", "seed", "k", "prompt", "sft_programs", "sft_batch", "sft_lr")
        },
        "sft_key": vt.sft_key(cfg),
        "start_eval": start,
        "prompt_tokens_mean": prompt_tokens(tok, rows),
        "max_new_tokens": cap,
        "greedy": score(recs, greedy),
        "sampled": {},
        "examples": {"greedy": [g[0] for g in greedy[:3]]},
    }
    for t, p in samples:
        torch.manual_seed(a.seed)
        groups = [
            _answers(
                model,
                tok,
                r["prompt"],
                a.group,
                do_sample=True,
                temperature=t,
                top_p=p,
                top_k=0,
                max_new_tokens=cap,
            )
            for r in rows
        ]
        key = f"temperature {t} top_p {p}"
        record["sampled"][key] = score(recs, groups)
        record["examples"][key] = groups[0]
    record["cpu_s"] = round(time.process_time() - c0, 1)
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    record["sft_cpu_s"] = round(sft_cpu, 1)
    old = read_result(a.out) if a.out.is_file() else {"probes": {}}
    old["probes"][a.label] = record
    write_result(
        a.out,
        old,
        command=" ".join(["python", "benchmarks/lm_start_probe.py", *(argv or sys.argv[1:])]),
    )
    print({k: v for k, v in record.items() if k != "examples"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
