"""Settings of the language-model experiment log and the job that runs one of them.

A registry whose ``trainer`` is ``language_model`` (predictions_language_model.yaml) describes
each setting in the file's own nesting (``sft``, ``grpo``, ``lora``); :class:`LMSetting` checks
it strictly and turns it into :class:`verigap.trl.LMExperimentConfig`, whose flat fields are
what a run directory's config and hash hold. A setting may instead name ``trainer:
numpy_mlp``: the registry then builds the NumPy MLP trainer's config from that setting alone
(the MLP pilot's defaults), so one log can compare the two trainers.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRAINERS = ("numpy_mlp", "language_model")


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Sft(_Strict):
    programs: int = Field(64, ge=1)
    epochs: int = Field(1, ge=1)
    lr: float = Field(5e-4, gt=0)
    batch: int = Field(2, ge=1, description="demonstrations per optimizer step")


class _Grpo(_Strict):
    steps: int = Field(50, ge=1)
    prompts_per_step: int = Field(1, ge=1)
    group: int = Field(4, ge=2, description="completions per prompt; GRPO needs two to compare")
    beta: float = Field(0.04, ge=0)
    lr: float = Field(1e-4, gt=0)
    max_completion_length: int = Field(12, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling; 1.0 samples everything")


class _Lora(_Strict):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )


class LMSetting(_Strict):
    """One language-model run as the registry writes it."""

    trainer: Literal["language_model"] = "language_model"
    model: str = "local:smollm2"
    k: int = Field(1, ge=1)
    prompt: Literal["full", "compact"] = Field(
        "compact", description="how a program is rendered (patchworld.text.PROMPT_STYLES)"
    )
    sft: _Sft = Field(default_factory=_Sft)
    grpo: _Grpo = Field(default_factory=_Grpo)
    lora: _Lora = Field(default_factory=_Lora)
    eval_programs: int = Field(50, ge=1)
    reward: dict[str, Any] = Field(default_factory=lambda: {"kind": "visible"})
    seed: int = 0
    options: None = None
    """no per-k evaluations (the MLP trainer's ``options.eval_ks``)"""
    policy: None = None
    """no probes (the MLP trainer's transformer policy)"""

    @property
    def steps(self) -> int:
        return self.grpo.steps

    def experiment_config(self) -> Any:
        """The same run as :class:`verigap.trl.LMExperimentConfig`."""
        from verigap.rewards import scheme_from_dict
        from verigap.trl import LMExperimentConfig

        scheme_from_dict(self.reward)  # a bad scheme fails here, naming itself
        g, s, lo = self.grpo, self.sft, self.lora
        return LMExperimentConfig(
            model=self.model,
            reward=dict(self.reward),
            seed=self.seed,
            k=self.k,
            sft_programs=s.programs,
            sft_epochs=s.epochs,
            sft_lr=s.lr,
            sft_batch=s.batch,
            steps=g.steps,
            prompts_per_step=g.prompts_per_step,
            group=g.group,
            beta=g.beta,
            lr=g.lr,
            max_completion_length=g.max_completion_length,
            temperature=g.temperature,
            top_p=g.top_p,
            prompt=self.prompt,
            lora_r=lo.r,
            lora_alpha=lo.alpha,
            lora_targets=tuple(lo.target_modules),
            eval_programs=self.eval_programs,
        )

    def run_config(self) -> dict[str, Any]:
        """The flat config a run directory stores and is keyed by."""
        return {**asdict(self.experiment_config()), "trainer": "language_model"}


def run_language_model(run_dir: Path, config: dict[str, Any], sft_cache: Path) -> dict[str, Any]:
    """One language-model run (the experiment runner's job): SFT (shared per seed through
    ``sft_cache``), GRPO, evaluations; the result carries ``start``, ``final`` and the curve."""
    from verigap.trl import run_experiment

    result = run_experiment(_lm_config(config), Path(run_dir), sft_cache=sft_cache)
    if result.get("status") == "partial":  # the executor would store it as the run's result
        raise RuntimeError(f"{run_dir}: GRPO stopped at step {result['steps_done']}; run it again")
    return result


def _lm_config(config: dict[str, Any]):
    """The trainer's config from a registry run config (which also names the trainer)."""
    from verigap.trl import LMExperimentConfig

    fields = {k: v for k, v in config.items() if k != "trainer"}
    fields["lora_targets"] = tuple(fields["lora_targets"])
    return LMExperimentConfig(**fields)


def stored_config(config: dict[str, Any]) -> dict[str, Any]:
    """What a language-model run writes as its ``config.json`` for this registry config: the
    runner compares a finished run with this, not with the registry's own form (which names
    the trainer and holds tuples), or no finished run could ever be read back."""
    return json.loads(json.dumps(asdict(_lm_config(config))))


CURVE_FIELDS = (
    "step",
    "reward",
    "visible_pass",
    "true_success",
    "false_success",
    "answer_parsed",
    "deletions",
)
"""Per training step (the language model: the step's sampled completions; the MLP: its
monitoring evaluations): what was paid and the truth beside it; for the language model also how
many sampled answers parsed, since an answer that does not parse is paid as a failed build,
and how many branches its answers deleted (the hack visible-only pay can reward)."""


def curve_summary(curve: list[dict[str, Any]], last: int = 10) -> dict[str, dict[str, float]]:
    """Means of every curve field over all logged steps and over the last ``last`` of them: a
    language model's step logs a handful of sampled answers, so one step says little and the
    mean over steps is what the docs quote."""
    fields = [f for f in CURVE_FIELDS if f != "step"]

    def mean(rows: list[dict[str, Any]]) -> dict[str, float]:
        return {f: sum(r[f] for r in rows) / len(rows) for f in fields if all(f in r for r in rows)}

    if not curve:
        return {}
    return {"all_steps": mean(curve), f"last_{last}_steps": mean(curve[-last:])}


def _steps_with_reward_variance(run_dir: Path) -> int | None:
    """How many GRPO steps had a group whose rewards differed (TRL's ``frac_reward_zero_std``
    below one): the only steps whose advantage, and so whose update, is not zero. Read from a
    finished run's TRL log, or an unfinished one's newest checkpoint; None without either."""
    import json

    from verigap.trl import last_checkpoint

    done = run_dir / "result.json"
    if done.is_file():
        log = json.loads(done.read_text()).get("trl_log")
    else:
        ckpt, _ = last_checkpoint(run_dir / "grpo")
        if ckpt is None:
            return None
        log = json.loads((ckpt / "trainer_state.json").read_text())["log_history"]
    if log is None:
        return None
    return sum(1 for r in log if "frac_reward_zero_std" in r and r["frac_reward_zero_std"] < 1)


def _grpo_cost(run_dir: Path) -> dict[str, float]:
    """The GRPO stage's CPU and wall seconds so far and per step, from the run's
    ``progress.jsonl`` (the language model's trainer writes one line per step, across every
    session of a resumed run); empty for runs without it."""
    import json

    path = run_dir / "progress.jsonl"
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        return {}
    last = rows[-1]
    return {
        "steps": last["step"],
        "cpu_s": last["cpu_s"],
        "wall_s": last["wall_s"],
        "cpu_s_per_step": round(last["cpu_s"] / last["step"], 1),
        "wall_s_per_step": round(last["wall_s"] / last["step"], 1),
    }


def _read_curve(run_dir: Path) -> list[dict[str, Any]]:
    import json

    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: r[k] for k in CURVE_FIELDS if k in r} for r in rows]


def _cached_start(runs_dir: Path, cfg: dict[str, Any]) -> dict[str, float] | None:
    """A language-model run's SFT-start evaluation, stored once its SFT has finished (the
    runner caches it under ``runs_dir/_sft``), so an unfinished run still shows its start."""
    import json

    if cfg.get("trainer") != "language_model":
        return None
    from verigap.trl import LMExperimentConfig, sft_key

    fields = {k: v for k, v in cfg.items() if k != "trainer"}
    fields["lora_targets"] = tuple(fields["lora_targets"])
    path = runs_dir / "_sft" / sft_key(LMExperimentConfig(**fields)) / "start.json"
    return json.loads(path.read_text())["eval"] if path.is_file() else None


def run_curves(
    reg: Any, runs_dir: Path, settings: list[str] | None = None, quick: bool = False
) -> dict[str, Any]:
    """Every run's curve as it stands, finished or not: per setting and seed its status
    (``finished``, ``partial`` with the steps done, or ``not started``), the curve, the
    held-out start rates once its SFT has finished and the final rates of a finished run. A
    partial curve is labelled so."""
    import json

    from verigap.runs import RESULT, config_key

    out: dict[str, Any] = {}
    for s in settings or list(reg.settings):
        per_seed = {}
        for seed in reg.seeds:
            cfg = reg.run_config(s, seed, quick=quick)
            run_dir = Path(runs_dir) / config_key(cfg) / f"seed{seed}"
            curve = _read_curve(run_dir)
            rec: dict[str, Any] = {
                "steps": int(cfg["steps"]),
                "curve": curve,
                "steps_done": max((r["step"] for r in curve), default=0),
            }
            if (run_dir / RESULT).is_file():
                res = json.loads((run_dir / RESULT).read_text())
                rec.update(
                    status="finished",
                    start=res["start"],
                    final=res["final"],
                    cpu_s=res.get("cpu_s"),
                )
                if not curve and res.get("curve"):
                    rec["curve"] = [{k: r[k] for k in CURVE_FIELDS if k in r} for r in res["curve"]]
            else:
                rec["status"] = "partial" if curve else "not started"
                start = _cached_start(Path(runs_dir), cfg)
                if start is not None:
                    rec["start"] = start
            rec["curve_mean"] = curve_summary(rec["curve"])
            varied = _steps_with_reward_variance(run_dir)
            if varied is not None:
                rec["steps_with_reward_variance"] = varied
            cost = _grpo_cost(run_dir)
            if cost:
                rec["grpo_cost"] = cost
            per_seed[str(seed)] = rec
        out[s] = {"trainer": reg.trainer_of(s), "seeds": per_seed}
    return out
