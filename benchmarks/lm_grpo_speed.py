"""Seconds per GRPO step of a real language model on Patch World as text, on this machine.

    nice -n 10 python benchmarks/lm_grpo_speed.py --model local:smollm2 --steps 3 \
        [--out results/agents/lm_grpo_speed.json]

TRL's GRPOTrainer with the pre-registered schedule (predictions_language_model.yaml: 4 prompts
x 8 completions of at most 48 tokens, LoRA r=16, KL beta 0.04), started from the base model (no
SFT: speed, not learning, is measured). The file also holds what the pre-registered experiment
would cost at that speed (3 seeds x 3 language-model settings x 200 steps), which decides whether
it fits a session.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from verigap import trl as vt
from verigap.agents._local import load_model, resolve_weights
from verigap.results import write_result


class StepClock(TrainerCallback):
    """Wall time of each optimizer step (generation, rewards, forward and backward); calls
    ``on_step`` after each, so a measurement stopped early keeps the steps it finished."""

    def __init__(self, on_step) -> None:  # noqa: ANN001
        self.times: list[float] = []
        self._t = 0.0
        self.on_step = on_step

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001 - TRL's signature
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001
        self.times.append(round(time.perf_counter() - self._t, 2))
        self.on_step(self.times, state.log_history)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--prompts-per-step", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("results/agents/lm_grpo_speed.json"))
    a = ap.parse_args(argv)
    import torch

    torch.manual_seed(0)
    t0 = time.perf_counter()
    model, tok = load_model(resolve_weights(a.model.partition(":")[2]))
    load_s = time.perf_counter() - t0
    cfg = vt.LMExperimentConfig(model=a.model, steps=a.steps, group=a.group,
                                prompts_per_step=a.prompts_per_step)
    work = Path(tempfile.mkdtemp(prefix="verigap-lm-grpo-"))
    trainer = vt.grpo_trainer(model, tok, cfg, work, log_path=work / "m.jsonl")
    scale = (4 * 8) / (cfg.prompts_per_step * cfg.group)

    def write(times: list[float], history: list[dict]) -> None:
        per_step = sorted(times)[len(times) // 2]
        planned_steps = 3 * 3 * 200
        data = {"model": a.model, "load_s": round(load_s, 1), "steps": len(times),
                "prompts_per_step": cfg.prompts_per_step, "group": cfg.group,
                "max_completion_length": cfg.max_completion_length, "lora_r": cfg.lora_r,
                "beta": cfg.beta, "step_s": times, "median_step_s": per_step,
                "load_avg_1min": round(os.getloadavg()[0], 2),
                "trl_log": [{k: v for k, v in r.items()
                             if k.startswith(("reward", "kl", "loss", "completions/mean"))}
                            for r in history if "loss" in r],
                "plan": {"runs": 9, "grpo_steps": planned_steps,
                         # the registered step has 4 x 8 completions; a smaller measured step
                         # is scaled by the completion count (generation and backward are
                         # both linear in it)
                         "scale_to_registered_step": scale,
                         "grpo_cpu_hours": round(planned_steps * per_step * scale / 3600, 1)}}
        write_result(a.out, data, command="nice -n 10 python " + " ".join(sys.argv))
        print(times, data["plan"], flush=True)

    trainer.add_callback(StepClock(write))
    trainer.train()


if __name__ == "__main__":
    main()
