"""The language model's SFT start on Patch World as text: does it write answers that parse?

    python benchmarks/lm_sft_start.py [--seed 0] [--out results/llm/lm_sft_start.json]

LoRA SFT on the careless engineer's demonstrations with the experiment log's SFT fields
(``verigap.trl.LMExperimentConfig`` defaults, the registered schedule), then the greedy held-out
evaluation the log's runs start from: answers parsed, visible pass, true and false success. The
GRPO stage only has a signal when some sampled answers parse, so this is the first number to
check after any change to the SFT. The start is stored where the log's runs find it
(``--sft-cache``), so they do not train it again. Pinned numerics; one seed per call, records
kept per seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from verigap import numerics  # first: the pin acts only before PyTorch loads

numerics.apply()
from verigap import trl as vt  # noqa: E402
from verigap.agents._local import load_model, resolve_weights  # noqa: E402
from verigap.results import read_result, write_result  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/llm/lm_sft_start.json"))
    ap.add_argument(
        "--sft-cache",
        type=Path,
        default=Path("runs/experiments-language-model/_sft"),
        help="where the experiment log's runs look for their SFT start (shared, not retrained)",
    )
    a = ap.parse_args(argv)
    if not a.model.startswith("local:"):
        print("error: --model takes a local model spec, e.g. local:smollm2", file=sys.stderr)
        return 2
    cfg = vt.LMExperimentConfig(model=a.model, seed=a.seed)
    t0 = time.perf_counter()
    model, tok = load_model(resolve_weights(a.model.split(":", 1)[1]))
    with tempfile.TemporaryDirectory() as tmp:
        _, ev, cpu = vt.sft_start(cfg, model, tok, Path(tmp), a.sft_cache)
    if cpu == 0.0:  # found in the cache: report what training it cost when it was made
        cpu = json.loads((a.sft_cache / vt.sft_key(cfg) / "start.json").read_text())["cpu_s"]
    fields = (
        "model",
        "k",
        "prompt",
        "sft_programs",
        "sft_epochs",
        "sft_lr",
        "sft_batch",
        "lora_r",
        "eval_programs",
    )
    record = {
        "config": {k: asdict(cfg)[k] for k in fields},
        "sft_loss": "completion_only",
        "eval": ev,
        "cpu_s": round(cpu, 1),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    old = read_result(a.out) if a.out.is_file() else {"seeds": {}}
    old["seeds"][str(a.seed)] = record
    write_result(
        a.out,
        old,
        command=" ".join(["python", "benchmarks/lm_sft_start.py", *(argv or sys.argv[1:])]),
    )
    print(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
