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
    """A reward scheme as a TRL reward function. Audits draw from an rng seeded per graded
    batch (the run's seed and the batch's step), so the same run pays the same rewards, and a
    run resumed from a checkpoint pays what the uninterrupted run paid. Every graded batch is
    appended to ``log`` (and to ``log_path`` as JSON lines when given); ``log`` starts from
    ``prior``, the records of the steps a resumed run has already taken."""

    def __init__(
        self,
        scheme: RewardScheme,
        *,
        seed: int = 0,
        log_path: Path | None = None,
        prior: list[dict[str, Any]] | None = None,
    ):
        self.scheme = scheme
        self.__name__ = scheme.label
        self.seed = seed
        self.log: list[dict[str, Any]] = list(prior or [])
        self.log_path = log_path

    def __call__(
        self, prompts: list[Any], completions: list[Any], program: list[dict[str, Any]], **_: Any
    ) -> list[float]:
        step = len(self.log) + 1
        verdicts = text.grade_answers(
            text.stack(program),
            [_completion_text(c) for c in completions],
            self.scheme,
            np.random.default_rng([self.seed, 0x7E1, step]),
        )
        rec = {
            "step": step,
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
    scheme: RewardScheme,
    *,
    seed: int = 0,
    log_path: Path | None = None,
    prior: list[dict[str, Any]] | None = None,
) -> tuple[list[Any], list[float]]:
    """(reward functions, reward weights) for ``GRPOTrainer``: the scheme pays, the truth is
    logged at weight 0."""
    return (
        [
            SchemeReward(scheme, seed=seed, log_path=log_path, prior=prior),
            *(TruthMetric(n) for n in TRUTH),
        ],
        [1.0] + [0.0] * len(TRUTH),
    )


def prompt_dataset(
    n: int, k: int = 4, *, seed: int = 0, stream: str = "train", style: str = "full"
) -> Any:
    """A ``datasets.Dataset`` of conversational prompts with a ``program`` column."""
    from datasets import Dataset

    return Dataset.from_list(text.prompts(n, k, seed=seed, stream=stream, style=style))


def sft_dataset(n: int, k: int = 4, *, seed: int = 0, style: str = "full") -> Any:
    """The careless engineer's demonstrations as a conversational prompt-completion
    ``datasets.Dataset`` (``prompt``: system and user turns, ``completion``: the answer), so
    TRL puts the loss on the answer alone: a loss over the whole conversation spends the few
    SFT steps on learning to reproduce the prompt, and the start never writes an answer."""
    from datasets import Dataset

    return Dataset.from_list(
        [
            {"prompt": d["messages"][:-1], "completion": d["messages"][-1:]}
            for d in text.careless_demonstrations(n, k, seed=seed, style=style)
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
    k: int = 1
    """broken branches per program: at k=1 half the programs have no tested broken branch, so
    a 135M start that rarely infers an exact value still passes (and hacks) sometimes"""
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
    max_completion_length: int = 12
    """tokens per sampled answer: SmolLM2 writes one token per digit, so one answer line and
    the end of turn take up to 10 (four lines: 40)"""
    temperature: float = 1.0
    top_p: float = 1.0
    """nucleus sampling in GRPO's generation (1.0: the whole distribution)"""
    prompt: str = "compact"
    """how a program is rendered (``verigap.patchworld.text.PROMPT_STYLES``)"""
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
        train_dataset=sft_dataset(cfg.sft_programs, cfg.k, seed=cfg.seed, style=cfg.prompt),
        peft_config=lora_config(cfg) if peft else None,
    )


def grpo_trainer(
    model: Any,
    tokenizer: Any,
    cfg: LMExperimentConfig,
    out: Path,
    peft: bool = True,
    log_path: Path | None = None,
    prior: list[dict[str, Any]] | None = None,
    save_every: int = 0,
) -> Any:
    """TRL's ``GRPOTrainer``: ``prompts_per_step`` prompts x ``group`` completions per step,
    KL ``beta`` against the reference (the adapter disabled), rewards from the config's scheme,
    the truth logged beside them. With ``save_every`` > 0 it keeps one checkpoint in ``out``
    (adapter, optimizer, scheduler, RNG states, trainer state), rewritten every ``save_every``
    steps, that ``train(resume_from_checkpoint=...)`` continues from; ``prior`` is the reward
    log of the steps taken before it."""
    from trl import GRPOConfig, GRPOTrainer

    funcs, weights = reward_functions(cfg.scheme(), seed=cfg.seed, log_path=log_path, prior=prior)
    batch = cfg.prompts_per_step * cfg.group
    saving = (
        {"save_strategy": "steps", "save_steps": save_every, "save_total_limit": 1}
        if save_every > 0
        else {}
    )
    args = GRPOConfig(
        max_steps=cfg.steps,
        learning_rate=cfg.lr,
        beta=cfg.beta,
        num_generations=cfg.group,
        per_device_train_batch_size=batch,
        generation_batch_size=batch,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        reward_weights=weights,
        **{**_common(out, cfg.seed, cfg.gradient_checkpointing), **saving},
    )
    data = prompt_dataset(
        max(cfg.steps * cfg.prompts_per_step, 8), cfg.k, seed=cfg.seed, style=cfg.prompt
    )
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=funcs,
        args=args,
        train_dataset=data,
        peft_config=lora_config(cfg) if peft else None,
    )


def evaluate(
    model: Any, tokenizer: Any, n: int, k: int = 4, style: str = "full"
) -> dict[str, float]:
    """Greedy held-out evaluation: visible pass, true success, false success, parse rate."""
    from verigap.agents import LocalClient
    from verigap.rewards import Visible

    client = LocalClient(model, tokenizer, max_new_tokens=16 * k)
    rows = text.prompts(n, k, seed=0, stream="heldout", style=style)
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
    if cfg.prompt != "full":  # keys of starts made before prompt styles existed stay valid
        keep = (*keep, "prompt")
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
    ev = evaluate(merged, tokenizer, cfg.eval_programs, cfg.k, cfg.prompt)
    cpu = time.process_time() - c0
    if slot is not None:
        write_json_atomic(slot / "start.json", {"eval": ev, "cpu_s": cpu, "config": asdict(cfg)})
    return merged, ev, cpu


class _Progress:
    """A trainer callback: after every GRPO step, the CPU and wall seconds the GRPO stage has
    spent so far (over every session of a resumed run), one JSON line per step, and an optional
    stop after ``stop_after`` steps, as a session's end stops a run."""

    def __init__(self, path: Path, cpu0: float, wall0: float, stop_after: int | None) -> None:
        self.path, self.stop_after = path, stop_after
        self.cpu0, self.wall0 = cpu0, wall0
        self.c, self.t = time.process_time(), time.perf_counter()

    def totals(self) -> tuple[float, float]:
        return (
            self.cpu0 + time.process_time() - self.c,
            self.wall0 + time.perf_counter() - self.t,
        )

    def callback(self) -> Any:
        from transformers import TrainerCallback

        progress = self

        class Cb(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
                cpu, wall = progress.totals()
                with progress.path.open("a") as f:
                    rec = {
                        "step": state.global_step,
                        "cpu_s": round(cpu, 2),
                        "wall_s": round(wall, 2),
                    }
                    f.write(json.dumps(rec) + "\n")
                if progress.stop_after is not None and state.global_step >= progress.stop_after:
                    control.should_training_stop = True
                    control.should_save = True
                return control

        return Cb()


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _rewrite_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)


def last_checkpoint(grpo_dir: Path) -> tuple[Path | None, int]:
    """(the newest complete GRPO checkpoint in ``grpo_dir``, its step), or (None, 0). A
    checkpoint counts once its trainer state is written whole, which the trainer does last."""
    best: tuple[Path | None, int] = (None, 0)
    for d in grpo_dir.glob("checkpoint-*") if grpo_dir.is_dir() else ():
        try:
            step = int(json.loads((d / "trainer_state.json").read_text())["global_step"])
        except (OSError, ValueError, KeyError):  # not written yet, or cut off by a kill
            continue
        if step > best[1]:
            best = (d, step)
    return best


def run_experiment(
    cfg: LMExperimentConfig,
    run_dir: Path,
    *,
    model: Any = None,
    tokenizer: Any = None,
    sft_cache: Path | None = None,
    save_every: int = 1,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """SFT then GRPO into ``run_dir``; a run whose ``result.json`` exists is skipped (resume).
    ``model``/``tokenizer`` override ``cfg.model`` (tests pass a tiny random model).

    ``metrics.jsonl`` gets one record per GRPO step as it is graded (the training batch's
    reward, visible pass, true and false success), so a run stopped early keeps its curve. The
    GRPO stage keeps a checkpoint in ``run_dir/grpo`` every ``save_every`` steps; a run that
    stopped (a session's end, or ``stop_after`` steps) continues from it on the next call with
    the numbers the uninterrupted run would have had, and returns ``{"status": "partial", ...}``
    until it finishes. The result has the experiment log's shape: ``start`` and ``final``
    (greedy held-out rates), ``config``, ``curve`` and the CPU seconds of each stage."""
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
    log, progress = run_dir / "metrics.jsonl", run_dir / "progress.jsonl"
    ckpt, done_steps = last_checkpoint(run_dir / "grpo")
    # what a stopped session logged past its checkpoint is taken again, identically
    prior = [r for r in _jsonl(log) if r["step"] <= done_steps]
    spent = [r for r in _jsonl(progress) if r["step"] <= done_steps]
    _rewrite_jsonl(log, prior)
    _rewrite_jsonl(progress, spent)
    torch.manual_seed(cfg.seed)
    grpo = grpo_trainer(
        model, tokenizer, cfg, run_dir / "grpo", log_path=log, prior=prior, save_every=save_every
    )
    before = spent[-1] if spent else {"cpu_s": 0.0, "wall_s": 0.0}
    meter = _Progress(progress, before["cpu_s"], before["wall_s"], stop_after)
    grpo.add_callback(meter.callback())
    grpo.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    c_grpo, t_grpo = meter.totals()
    if grpo.state.global_step < cfg.steps:
        return {"status": "partial", "steps_done": grpo.state.global_step, "start": start}
    final = evaluate(grpo.model, tokenizer, cfg.eval_programs, cfg.k, cfg.prompt)
    curve = _jsonl(log)
    result = {
        "config": json.loads(json.dumps(asdict(cfg))),
        "start": start,
        "final": final,
        "curve": curve,
        "sft_cpu_s": round(sft_cpu, 1),
        "grpo_wall_s": round(t_grpo, 1),
        "grpo_cpu_s": round(c_grpo, 1),
        "cpu_s_per_grpo_step": round(c_grpo / max(1, cfg.steps), 2),
        "cpu_s": round(time.process_time() - c0 + before["cpu_s"], 1),
        "trl_log": [r for r in grpo.state.log_history if "loss" in r],
    }
    write_json_atomic(done, result)
    return result
