"""verigap's reward schemes as TRL reward functions, for Patch World as text.

TRL's ``GRPOTrainer`` calls each reward function with the prompts, the completions and the
dataset's other columns, and logs every function's mean per step. :func:`reward_functions`
returns the scheme that pays the policy (weight 1) and the checks it must not see (weight 0):
``visible_pass``, ``true_success``, ``false_success`` and ``answer_parsed``. Weighted zero they
change no advantage, and TRL logs them beside the reward from step 1, so pass rate and true
success are tracked separately from the start::

    from trl import GRPOConfig, GRPOTrainer
    from verigap import trl as vt
    from verigap.rewards import Audit

    funcs, weights = vt.reward_functions(Audit(rate=0.25), seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=funcs,
                          args=GRPOConfig(..., reward_weights=weights, beta=0.04),
                          train_dataset=vt.prompt_dataset(256, seed=0))
    trainer.train()   # logs rewards/audit_25/mean and rewards/true_success/mean, ...

:func:`sft_trainer` and :func:`grpo_trainer` build TRL's trainers (LoRA through PEFT) for the
careless-engineer SFT and the GRPO stage; :func:`run_experiment` runs both into a run
directory (``config.json``, ``metrics.jsonl``, ``result.json`` written last).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verigap.patchworld import text
from verigap.rewards import RewardScheme, scheme_from_dict
from verigap.runs import write_json_atomic

TRUTH = ("visible_pass", "true_success", "false_success", "answer_parsed")
"""Checks logged beside the reward with weight 0: seen by the researcher, not the policy."""


def _completion_text(c: Any) -> str:
    """TRL passes a string (standard format) or a list of messages (conversational)."""
    if isinstance(c, str):
        return c
    if isinstance(c, list) and c and isinstance(c[-1], dict):
        return str(c[-1].get("content") or "")
    raise TypeError(f"cannot read a completion of type {type(c).__name__}")


class SchemeReward:
    """A reward scheme as a TRL reward function. Audits draw from an rng seeded once, in
    completion order, so the same run pays the same rewards. Every graded batch is appended to
    ``log`` (and to ``log_path`` as JSON lines when given)."""

    def __init__(self, scheme: RewardScheme, *, seed: int = 0, log_path: Path | None = None):
        self.scheme = scheme
        self.__name__ = scheme.label
        self.rng = np.random.default_rng([seed, 0x7E1])
        self.log: list[dict[str, Any]] = []
        self.log_path = log_path

    def __call__(
        self, prompts: list[Any], completions: list[Any], program: list[dict[str, Any]], **_: Any
    ) -> list[float]:
        verdicts = text.grade_answers(
            text.stack(program), [_completion_text(c) for c in completions], self.scheme, self.rng
        )
        rec = {
            "step": len(self.log) + 1,
            "n": len(verdicts),
            "reward": float(np.mean([v.reward for v in verdicts])),
            **{name: float(np.mean([_truth(v, name) for v in verdicts])) for name in TRUTH},
            "caught": int(sum(v.caught for v in verdicts)),
            "deletions": int(sum(v.deletions for v in verdicts)),
        }
        self.log.append(rec)
        if self.log_path is not None:
            with self.log_path.open("a") as f:
                f.write(json.dumps(rec) + "\n")
        return [v.reward for v in verdicts]


def _truth(v: text.TextVerdict, name: str) -> float:
    return float(
        {
            "visible_pass": v.passed,
            "true_success": v.correct,
            "false_success": v.false_success,
            "answer_parsed": v.parsed,
        }[name]
    )


class TruthMetric:
    """One check as a reward function, for logging only (use weight 0)."""

    def __init__(self, name: str) -> None:
        if name not in TRUTH:
            raise ValueError(f"unknown check {name!r}; choose from {', '.join(TRUTH)}")
        self.__name__ = name

    def __call__(
        self, prompts: list[Any], completions: list[Any], program: list[dict[str, Any]], **_: Any
    ) -> list[float]:
        from verigap.rewards import Visible

        verdicts = text.grade_answers(
            text.stack(program),
            [_completion_text(c) for c in completions],
            Visible(),
            np.random.default_rng(0),
        )
        return [_truth(v, self.__name__) for v in verdicts]


def reward_functions(
    scheme: RewardScheme, *, seed: int = 0, log_path: Path | None = None
) -> tuple[list[Any], list[float]]:
    """(reward functions, reward weights) for ``GRPOTrainer``: the scheme pays, the truth is
    logged at weight 0."""
    return (
        [SchemeReward(scheme, seed=seed, log_path=log_path), *(TruthMetric(n) for n in TRUTH)],
        [1.0] + [0.0] * len(TRUTH),
    )


def prompt_dataset(n: int, k: int = 4, *, seed: int = 0, stream: str = "train") -> Any:
    """A ``datasets.Dataset`` of conversational prompts with a ``program`` column."""
    from datasets import Dataset

    return Dataset.from_list(text.prompts(n, k, seed=seed, stream=stream))


def sft_dataset(n: int, k: int = 4, *, seed: int = 0) -> Any:
    """The careless engineer's demonstrations as a conversational prompt-completion
    ``datasets.Dataset`` (``prompt``: system and user turns, ``completion``: the answer), so
    TRL puts the loss on the answer alone: a loss over the whole conversation spends the few
    SFT steps on learning to reproduce the prompt, and the start never writes an answer."""
    from datasets import Dataset

    return Dataset.from_list(
        [
            {"prompt": d["messages"][:-1], "completion": d["messages"][-1:]}
            for d in text.careless_demonstrations(n, k, seed=seed)
        ]
    )


@dataclass(frozen=True)
class LMExperimentConfig:
    """One language-model run: LoRA SFT on careless demonstrations, then GRPO with a KL."""

    model: str = "local:smollm2"
    """a local model spec (``verigap.agents.client_from_spec``)"""
    reward: dict[str, Any] = field(default_factory=lambda: {"kind": "visible"})
    """the reward scheme that pays the policy"""
    seed: int = 0
    k: int = 4
    sft_programs: int = 64
    sft_epochs: int = 1
    sft_lr: float = 5e-4
    sft_batch: int = 2
    """demonstrations per SFT optimizer step: at a fixed SFT compute, a smaller batch is more
    steps, and 8 steps were too few for the start to learn where an answer ends"""
    steps: int = 50
    prompts_per_step: int = 1
    group: int = 4
    """completions per prompt (GRPO's group)"""
    beta: float = 0.04
    """KL penalty against the SFT policy (the LoRA adapter disabled)"""
    lr: float = 1e-4
    max_completion_length: int = 40
    """tokens per sampled answer: SmolLM2 writes one token per digit, so four answer lines
    and the end of turn take up to 40"""
    temperature: float = 1.0
    lora_r: int = 16
    lora_alpha: int = 32
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    eval_programs: int = 50
    gradient_checkpointing: bool = False
    """TRL's default is on: it saves accelerator memory by running each forward again in the
    backward. A 135M model on CPU has memory to spare, so on CPU it only costs a forward"""

    def scheme(self) -> RewardScheme:
        return scheme_from_dict(self.reward)


def lora_config(cfg: LMExperimentConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(cfg.lora_targets),
        task_type="CAUSAL_LM",
    )


def _common(out: Path, seed: int, checkpointing: bool = False) -> dict[str, Any]:
    return {
        "output_dir": str(out),
        "report_to": [],
        "save_strategy": "no",
        "use_cpu": True,
        "seed": seed,
        "data_seed": seed,
        "logging_steps": 1,
        "disable_tqdm": True,
        "bf16": False,
        "fp16": False,
        "dataloader_num_workers": 0,
        "gradient_checkpointing": checkpointing,
    }


def sft_trainer(
    model: Any, tokenizer: Any, cfg: LMExperimentConfig, out: Path, peft: bool = True
) -> Any:
    """TRL's ``SFTTrainer`` on the careless demonstrations (completion-only loss)."""
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        num_train_epochs=cfg.sft_epochs,
        learning_rate=cfg.sft_lr,
        per_device_train_batch_size=cfg.sft_batch,
        completion_only_loss=True,
        max_length=None,  # demonstrations are short by construction; truncation would cut answers
        **_common(out, cfg.seed, cfg.gradient_checkpointing),
    )
    return SFTTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=sft_dataset(cfg.sft_programs, cfg.k, seed=cfg.seed),
        peft_config=lora_config(cfg) if peft else None,
    )


def grpo_trainer(
    model: Any,
    tokenizer: Any,
    cfg: LMExperimentConfig,
    out: Path,
    peft: bool = True,
    log_path: Path | None = None,
) -> Any:
    """TRL's ``GRPOTrainer``: ``prompts_per_step`` prompts x ``group`` completions per step,
    KL ``beta`` against the reference (the adapter disabled), rewards from the config's scheme,
    the truth logged beside them."""
    from trl import GRPOConfig, GRPOTrainer

    funcs, weights = reward_functions(cfg.scheme(), seed=cfg.seed, log_path=log_path)
    batch = cfg.prompts_per_step * cfg.group
    args = GRPOConfig(
        max_steps=cfg.steps,
        learning_rate=cfg.lr,
        beta=cfg.beta,
        num_generations=cfg.group,
        per_device_train_batch_size=batch,
        generation_batch_size=batch,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        reward_weights=weights,
        **_common(out, cfg.seed, cfg.gradient_checkpointing),
    )
    data = prompt_dataset(max(cfg.steps * cfg.prompts_per_step, 8), cfg.k, seed=cfg.seed)
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=funcs,
        args=args,
        train_dataset=data,
        peft_config=lora_config(cfg) if peft else None,
    )


def evaluate(model: Any, tokenizer: Any, n: int, k: int = 4) -> dict[str, float]:
    """Greedy held-out evaluation: visible pass, true success, false success, parse rate."""
    from verigap.agents import LocalClient
    from verigap.rewards import Visible

    client = LocalClient(model, tokenizer, max_new_tokens=16 * k)
    rows = text.prompts(n, k, seed=0, stream="heldout")
    answers = [client.generate_text(client.prompt_ids(r["prompt"], []))[0] for r in rows]
    vs = text.grade_answers(
        text.stack([r["program"] for r in rows]), answers, Visible(), np.random.default_rng(0)
    )
    return {name: float(np.mean([_truth(v, name) for v in vs])) for name in TRUTH}


def sft_key(cfg: LMExperimentConfig) -> str:
    """What the SFT start depends on: runs that differ only in their GRPO stage share it."""
    import hashlib

    d = asdict(cfg)
    keep = (
        "model",
        "seed",
        "k",
        "sft_programs",
        "sft_epochs",
        "sft_lr",
        "sft_batch",
        "lora_r",
        "lora_alpha",
        "lora_targets",
        "eval_programs",
        "gradient_checkpointing",
    )
    # starts trained with the loss on the whole conversation are not this start
    d = {**d, "sft_loss": "completion_only"}
    keep = (*keep, "sft_loss")
    return hashlib.sha256(json.dumps({k: d[k] for k in keep}, sort_keys=True).encode()).hexdigest()[
        :12
    ]


def sft_start(
    cfg: LMExperimentConfig, model: Any, tokenizer: Any, out: Path, cache: Path | None = None
) -> tuple[Any, dict[str, float], float]:
    """(the SFT policy with its adapter merged, its greedy held-out evaluation, CPU seconds).

    With ``cache``, the adapter and the evaluation are stored in ``cache/<sft_key>`` and the
    next run with the same SFT fields loads them instead of training: the visible, audit and
    oracle runs of one seed start from the same policy, as the MLP log's runs do."""
    if cache is None:
        return _sft_start(cfg, model, tokenizer, out, None)
    import fcntl

    slot = cache / sft_key(cfg)
    slot.mkdir(parents=True, exist_ok=True)
    with open(slot / "lock", "w") as lock:  # two runs of one seed: one trains, one waits
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _sft_start(cfg, model, tokenizer, out, slot)


def _sft_start(
    cfg: LMExperimentConfig, model: Any, tokenizer: Any, out: Path, slot: Path | None
) -> tuple[Any, dict[str, float], float]:
    import torch

    if slot is not None and (slot / "start.json").is_file():
        from peft import PeftModel

        start = json.loads((slot / "start.json").read_text())
        merged = PeftModel.from_pretrained(model, slot / "adapter").merge_and_unload()
        return merged, start["eval"], 0.0
    c0 = time.process_time()
    torch.manual_seed(cfg.seed)
    sft = sft_trainer(model, tokenizer, cfg, out)
    sft.train()
    if slot is not None:
        sft.model.save_pretrained(slot / "adapter")
    merged = sft.model.merge_and_unload()
    ev = evaluate(merged, tokenizer, cfg.eval_programs, cfg.k)
    cpu = time.process_time() - c0
    if slot is not None:
        write_json_atomic(slot / "start.json", {"eval": ev, "cpu_s": cpu, "config": asdict(cfg)})
    return merged, ev, cpu


def run_experiment(
    cfg: LMExperimentConfig,
    run_dir: Path,
    *,
    model: Any = None,
    tokenizer: Any = None,
    sft_cache: Path | None = None,
) -> dict[str, Any]:
    """SFT then GRPO into ``run_dir``; a run whose ``result.json`` exists is skipped (resume).
    ``model``/``tokenizer`` override ``cfg.model`` (tests pass a tiny random model).

    ``metrics.jsonl`` gets one record per GRPO step as it is graded (the training batch's
    reward, visible pass, true and false success), so a run stopped early keeps its curve. The
    result has the experiment log's shape: ``start`` and ``final`` (greedy held-out rates),
    ``config``, ``curve`` and the CPU seconds of each stage."""
    import torch

    done = run_dir / "result.json"
    if done.is_file():
        return json.loads(done.read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "config.json", asdict(cfg))
    torch.manual_seed(cfg.seed)
    c0 = time.process_time()
    if model is None:
        from verigap.agents._local import load_model, resolve_weights

        model, tokenizer = load_model(resolve_weights(cfg.model.partition(":")[2]))
    model, start, sft_cpu = sft_start(cfg, model, tokenizer, run_dir / "sft", sft_cache)
    log = run_dir / "metrics.jsonl"
    log.unlink(missing_ok=True)
    torch.manual_seed(cfg.seed)
    grpo = grpo_trainer(model, tokenizer, cfg, run_dir / "grpo", log_path=log)
    t1, c1 = time.perf_counter(), time.process_time()
    grpo.train()
    t_grpo, c_grpo = time.perf_counter() - t1, time.process_time() - c1
    final = evaluate(grpo.model, tokenizer, cfg.eval_programs, cfg.k)
    curve = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    result = {
        "config": json.loads(json.dumps(asdict(cfg))),
        "start": start,
        "final": final,
        "curve": curve,
        "sft_cpu_s": round(sft_cpu, 1),
        "grpo_wall_s": round(t_grpo, 1),
        "grpo_cpu_s": round(c_grpo, 1),
        "cpu_s_per_grpo_step": round(c_grpo / max(1, cfg.steps), 2),
        "cpu_s": round(time.process_time() - c0, 1),
        "trl_log": [r for r in grpo.state.log_history if "loss" in r],
    }
    write_json_atomic(done, result)
    return result
