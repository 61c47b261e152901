"""Seconds per GRPO step of a real language model on Patch World as text, phase by phase.

    python benchmarks/lm_grpo_speed.py --model local:smollm2 --steps 2 --prompts-per-step 1 \
        --group 4 --max-completion-length 32 [--gradient-checkpointing] \
        [--out results/agents/lm_grpo_speed.json]

TRL's GRPOTrainer started from the base model (no SFT: speed, not learning, is measured), LoRA
r=16, KL beta 0.04. Each step is split into its phases by timing TRL's own methods: generation,
the reference model's forward (for the KL), the policy's forward (the loss) and the rest of the
step (backward and optimizer). Every phase has wall seconds and this process's CPU seconds: on a
shared machine the wall time is mostly waiting for a core, the CPU time is what the step costs.
``--gradient-checkpointing`` measures TRL's default (a second forward inside the backward); the
file holds one record per setting measured, so before and after sit side by side.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from verigap import numerics  # first: the pin acts only before PyTorch loads

numerics.apply()
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from verigap import trl as vt  # noqa: E402
from verigap.agents._local import load_model, resolve_weights  # noqa: E402
from verigap.results import read_result, write_result  # noqa: E402

PHASES = {
    "_generate": "generate",
    "_get_per_token_logps_and_entropies": "logprobs",
    "_compute_loss": "loss_forward",
    "training_step": "step",
}
"""TRL methods timed, and the phase each measures (``logprobs`` runs once for the reference
model's KL term and once inside the loss; the loss call is subtracted out below)."""


class PhaseClock:
    """Wall and CPU seconds spent inside chosen methods of a trainer class, per call."""

    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[float, float]]] = {}

    def wrap(self, cls: type, name: str) -> None:
        f = getattr(cls, name)

        @functools.wraps(f)
        def timed(*a: Any, **k: Any) -> Any:
            w, c = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                self.calls.setdefault(name, []).append(
                    (time.perf_counter() - w, time.process_time() - c)
                )

        setattr(cls, name, timed)

    def step_phases(self, i: int) -> dict[str, dict[str, float]]:
        """Step ``i``'s phases: generate, reference forward, loss forward, backward+rest."""
        get = self.calls.get
        step, gen, loss = get("training_step")[i], get("_generate")[i], get("_compute_loss")[i]
        ref = get("_get_per_token_logps_and_entropies")[2 * i]  # the first call is the KL's
        rest = tuple(s - g - r - lo for s, g, r, lo in zip(step, gen, ref, loss, strict=True))
        return {
            name: {"wall_s": round(v[0], 2), "cpu_s": round(v[1], 2)}
            for name, v in (
                ("generate", gen),
                ("reference_forward", ref),
                ("loss_forward", loss),
                ("backward_and_rest", rest),
                ("step", step),
            )
        }


class StepDone(TrainerCallback):
    def __init__(self, on_step) -> None:  # noqa: ANN001
        self.on_step = on_step

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001 - TRL's signature
        self.on_step(state.log_history)


def _autogroup() -> str | None:
    try:
        return Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="local:smollm2")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--prompts-per-step", type=int, default=1)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-completion-length", type=int, default=32)
    ap.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="TRL's default: a second forward inside the backward",
    )
    ap.add_argument("--out", type=Path, default=Path("results/agents/lm_grpo_speed.json"))
    a = ap.parse_args(argv)
    numerics.reexec_if_needed()  # pinned, as the experiment runs (one thread), or refuse
    import torch

    clock = PhaseClock()
    for name in PHASES:
        clock.wrap(GRPOTrainer, name)
    torch.manual_seed(0)
    t0, c0 = time.perf_counter(), time.process_time()
    model, tok = load_model(resolve_weights(a.model.partition(":")[2]))
    load = {
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
    }
    cfg = vt.LMExperimentConfig(
        model=a.model,
        steps=a.steps,
        group=a.group,
        prompts_per_step=a.prompts_per_step,
        max_completion_length=a.max_completion_length,
        gradient_checkpointing=a.gradient_checkpointing,
    )
    work = Path(tempfile.mkdtemp(prefix="verigap-lm-grpo-"))
    trainer = vt.grpo_trainer(model, tok, cfg, work, log_path=work / "m.jsonl")
    key = "checkpointing" if a.gradient_checkpointing else "no_checkpointing"
    if numerics.mode() != "pinned":
        key += f"_{numerics.mode()}"

    def write(history: list[dict]) -> None:
        lock_path = Path(tempfile.gettempdir()) / f"{a.out.name}.lock"
        with open(lock_path, "w") as lock:  # the two settings may run side by side
            fcntl.flock(lock, fcntl.LOCK_EX)
            _write(history)

    def _write(history: list[dict]) -> None:
        steps = [clock.step_phases(i) for i in range(len(clock.calls.get("training_step", [])))]
        cpu = sorted(s["step"]["cpu_s"] for s in steps)
        old = read_result(a.out) if a.out.is_file() else {}
        runs = {k: v for k, v in (old.get("runs") or {}).items() if k != key}
        runs[key] = {
            "model": a.model,
            "load": load,
            "threads": torch.get_num_threads(),
            "prompts_per_step": cfg.prompts_per_step,
            "group": cfg.group,
            "max_completion_length": cfg.max_completion_length,
            "lora_r": cfg.lora_r,
            "beta": cfg.beta,
            "gradient_checkpointing": cfg.gradient_checkpointing,
            "steps": steps,
            "median_step_cpu_s": cpu[len(cpu) // 2],
            "load_avg_1min": round(os.getloadavg()[0], 2),
            "autogroup": _autogroup(),
            "numerics": numerics.mode(),
            "completion_tokens": [r.get("completions/mean_length") for r in history if "loss" in r],
            "command": "python " + " ".join(sys.argv),
        }
        data = {"runs": runs}
        if {"checkpointing", "no_checkpointing"} <= runs.keys():
            data["checkpointing_cpu_ratio"] = round(
                runs["checkpointing"]["median_step_cpu_s"]
                / runs["no_checkpointing"]["median_step_cpu_s"],
                2,
            )
        write_result(a.out, data, command="python " + " ".join(sys.argv))
        print(key, steps[-1], flush=True)

    trainer.add_callback(StepDone(write))
    trainer.train()


if __name__ == "__main__":
    main()
