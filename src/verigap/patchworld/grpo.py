"""GRPO with a KL penalty to the SFT policy, on batched Patch World, in NumPy.

One step: draw ``programs`` training programs, sample ``group`` whole episodes of each from the
current policy, pay them with the reward scheme (the shared layer), normalise rewards within
each program's group (a group with zero variance contributes nothing), and take one Adam step
on

    loss = -mean_{episodes, steps}[ A * log pi(a | s) ] + kl_coef * mean_{steps}[ KL(pi || pi_ref) ]

The KL term is the exact KL between the two 34-way categoricals at each visited state (no
sampling estimator: the action space is small enough to sum over). Because a step's observation
depends only on the program and the step index, the forward pass runs once per (program, step)
and the ``group`` samples share it; the gradient sums over them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator
from threadpoolctl import threadpool_limits

from verigap import numerics
from verigap.patchworld import rules
from verigap.patchworld.multiagent import (
    Auditor,
    AuditorConfig,
    TestWriter,
    TestWriterConfig,
    agent_summary,
)
from verigap.patchworld.policy import (
    MLP,
    Adam,
    act,
    all_features,
    categorical_kl,
    grad_kl_wrt_logits,
    log_softmax,
    sample_group,
)
from verigap.patchworld.programs import FAMILIES, Programs, generate, heldout_set
from verigap.patchworld.sft import SFTConfig, sft_cached, with_coverage
from verigap.patchworld.transformer import PolicyConfig
from verigap.rewards import Audit, BatchPayout, RewardScheme, Visible
from verigap.runs import METRICS, JsonlWriter, write_json_atomic
from verigap.verdict import summarize_arrays


class AuditSchedule(BaseModel):
    """How the audit rate moves over a run (with an ``Audit`` reward only).

    ``constant``: the reward's own rate throughout. ``linear``: from ``start_rate`` to
    ``end_rate`` in a straight line over the steps (a ramp up or a decay). ``front_loaded``:
    ``start_rate`` for the first ``switch_at`` share of the steps, ``end_rate`` after.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["constant", "linear", "front_loaded"] = "constant"
    start_rate: float = Field(0.0, ge=0, le=1)
    end_rate: float = Field(0.0, ge=0, le=1)
    switch_at: float = Field(0.5, ge=0, le=1, description="front_loaded: share of steps")

    def rate(self, base: float, step: int, steps: int) -> float:
        if self.kind == "constant":
            return base
        frac = step / max(1, steps)
        if self.kind == "linear":
            return self.start_rate + (self.end_rate - self.start_rate) * frac
        return self.start_rate if frac < self.switch_at else self.end_rate


class TrainerOptions(BaseModel):
    """What the experiment log varies beyond the pilot. Absent (None) on a GRPOConfig, the
    trainer is exactly the pilot's; every option's default is also the pilot's behaviour."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    audit_schedule: AuditSchedule = AuditSchedule()
    audit_recall: float = Field(
        1.0, ge=0, le=1, description="share of the hacks an audit that looks catches"
    )
    audit_unit: Literal["episode", "branch"] = Field(
        "episode",
        description="episode: the hidden check on the whole program; branch: each "
        "broken branch is audited on its own with the audit rate",
    )
    coverage: float | None = Field(
        None,
        ge=0,
        le=1,
        description=(
            "share of broken branches the visible tests reach, in SFT, training and evaluation "
            "(None: half, as in the pilot)"
        ),
    )
    oracle_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description=("share of training programs (fixed by content hash) paid by the hidden check"),
    )
    oracle_family: Literal["arithmetic", "periodic"] | None = Field(
        None, description="programs of this pattern family are paid by the hidden check"
    )
    k_curriculum: tuple[int, ...] = Field(
        (),
        description=(
            "k of each of equal-length training phases (empty: the config's k throughout)"
        ),
    )
    eval_ks: tuple[int, ...] = Field((), description="also evaluate held-out programs at these k")
    auditor: AuditorConfig | None = Field(
        None,
        description=(
            "a second agent that spends the audit budget (multiagent.py); needs reward: visible"
        ),
    )
    test_writer: TestWriterConfig | None = Field(
        None,
        description=(
            "a second agent that adds visible tests to untested broken branches (multiagent.py)"
        ),
    )

    @model_validator(mode="after")
    def _ks(self) -> TrainerOptions:
        for name in ("k_curriculum", "eval_ks"):
            bad = [k for k in getattr(self, name) if not 1 <= k <= 10]
            if bad:
                raise ValueError(f"{name}: k must lie in 1..10, got {bad}")
        if self.auditor is not None and (self.oracle_share > 0 or self.oracle_family):
            raise ValueError(
                "options.auditor pays every episode itself; drop oracle_share / "
                "oracle_family or the auditor"
            )
        return self

    @model_serializer(mode="wrap")
    def _drop_unset_agents(self, handler):
        # without second agents the dump (and so every registry hash and run key) is unchanged
        out = handler(self)
        for name in ("auditor", "test_writer"):
            if getattr(self, name) is None:
                out.pop(name, None)
        return out

    @property
    def audit_tweaked(self) -> bool:
        return (
            self.audit_schedule.kind != "constant"
            or self.audit_recall < 1.0
            or self.audit_unit != "episode"
        )


class GRPOConfig(BaseModel):
    """One GRPO run. Every field has a default; the pilot sweep varies reward, k and seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(4, ge=1, le=10, description="broken branches per program")
    seed: int = Field(0, ge=0, description="seeds SFT, sampling, audits and program draws")
    steps: int = Field(1000, ge=0, description="GRPO steps")
    programs: int = Field(32, ge=1, description="programs per step")
    group: int = Field(8, ge=2, description="rollouts per program (the GRPO group)")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate")
    kl_coef: float = Field(0.01, ge=0, description="weight of KL(pi || pi_sft)")
    reward: RewardScheme = Field(default_factory=Visible, description="what the policy is paid")
    log_every: int = Field(50, ge=1, description="steps between monitoring evaluations")
    monitor_programs: int = Field(500, ge=1, description="fixed held-out monitoring set size")
    eval_programs: int = Field(2000, ge=1, description="held-out programs for the final eval")
    sft: SFTConfig = SFTConfig()
    options: TrainerOptions | None = Field(
        None, description="experiment-log options (None: the pilot trainer, unchanged)"
    )
    policy: PolicyConfig = Field(PolicyConfig(), description="mlp (the pilot's) | transformer")

    @model_validator(mode="after")
    def _options_fit(self) -> GRPOConfig:
        o = self.options
        if o is not None and o.audit_tweaked and not isinstance(self.reward, Audit):
            raise ValueError(
                "options: audit_schedule, audit_recall and audit_unit need an "
                "audit reward (reward: {kind: audit, rate: ...})"
            )
        if o is not None and o.auditor is not None and not isinstance(self.reward, Visible):
            raise ValueError(
                "options.auditor supplies the audits itself; use reward: "
                "{kind: visible} with it (the auditor's rate is the budget)"
            )
        return self

    @model_serializer(mode="wrap")
    def _drop_unset_options(self, handler):
        # without options the dump is exactly the pilot's, so finished pilot runs still match
        out = handler(self)
        if self.options is None:
            out.pop("options", None)
        if self.policy == PolicyConfig():
            out.pop("policy", None)
        return out

    def sft_config(self) -> SFTConfig:
        """The SFT config, with the visible-test coverage of the options when one is set."""
        if self.options is None or self.options.coverage is None:
            return self.sft
        return self.sft.model_copy(update={"coverage": self.options.coverage})

    def programs_as_configured(self, programs: Programs, seed: int) -> Programs:
        """Programs with the configured visible-test coverage (unchanged by default)."""
        if self.options is None or self.options.coverage is None:
            return programs
        return with_coverage(programs, self.options.coverage, seed)


def group_advantages(rewards: np.ndarray) -> np.ndarray:
    """(..., B, G) rewards -> advantages normalised within each row (the last axis is the group);
    zero-variance rows give 0."""
    mean = rewards.mean(axis=-1, keepdims=True)
    std = rewards.std(axis=-1, keepdims=True)
    return np.where(std > 1e-8, (rewards - mean) / np.where(std > 1e-8, std, 1.0), 0.0)


def evaluate(
    model: MLP,
    programs: Programs,
    rng: np.random.Generator | None = None,
    greedy: bool = True,
    feats: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """Visible pass, true and false success and the outcome mix of a policy on ``programs``
    (``feats``: the MLP's observations of ``programs`` per step, when already built)."""
    actions = (
        act(model, programs, rng, greedy=greedy, feats=feats)
        if isinstance(model, MLP)
        else model.act(programs, rng, greedy=greedy)
    )
    grades = rules.grade(programs, actions)
    s = summarize_arrays(
        grades.passed,
        grades.correct,
        grades.passed.astype(float),
        outcome_counts=grades.outcome_counts(),
    )
    return {
        "visible_pass": s.pass_rate,
        "true_success": s.true_success,
        "false_success": s.false_success,
        "outcomes": grades.outcome_counts(),
    }


def _phases(config: GRPOConfig) -> list[tuple[int, int]]:
    """(k, steps) of each training phase: one phase unless a k curriculum is set."""
    ks = config.options.k_curriculum if config.options else ()
    if not ks:
        return [(config.k, config.steps)]
    bounds = [round(j * config.steps / len(ks)) for j in range(len(ks) + 1)]
    return [(k, bounds[j + 1] - bounds[j]) for j, k in enumerate(ks)]


def training_pools(config: GRPOConfig) -> list[tuple[int, Programs]]:
    """(first step, training programs) of each phase; step ``i`` takes ``config.programs`` of
    them in order (``GRPOTrainer.batch``)."""
    pools = []
    first = 0
    for j, (k, steps) in enumerate(_phases(config)):
        n = max(1, steps) * config.programs
        seed = 20_000 + config.seed + 1_000_003 * j
        pools.append((first, config.programs_as_configured(generate(k, n, seed=seed), seed)))
        first += steps
    return pools


class GRPOTrainer:
    """Holds the policy, the frozen reference and the optimiser; ``step()`` is one update.
    The four policy hooks (``_optimizer``, ``_forward``, ``_reference_log_probs``, ``_update``)
    are the MLP's here; ``transformer_policy.TransformerTrainer`` overrides them."""

    def __init__(self, config: GRPOConfig, start: MLP) -> None:
        self.c = config
        self.model = start.copy()
        self.reference = start.copy()
        self.opt = self._optimizer()
        self.rng = np.random.default_rng([config.seed, 2])
        # options draw from their own stream, so the pilot's stream is never disturbed
        self.aux = np.random.default_rng([config.seed, 3])
        self.pools = training_pools(config)
        self.pool = self.pools[0][1]
        o = config.options
        self.auditor = Auditor(o.auditor, config.seed) if o and o.auditor else None
        self.writer = TestWriter(o.test_writer, config.seed) if o and o.test_writer else None

    def batch(self, i: int) -> Programs:
        """The training programs of step ``i``."""
        first, pool = next(p for p in reversed(self.pools) if p[0] <= i)
        j = i - first
        return pool[np.arange(j * self.c.programs, (j + 1) * self.c.programs) % pool.size]

    def pay(self, i: int, progs: Programs, grades: rules.Grades) -> BatchPayout:
        """The reward of step ``i``'s episodes: the scheme's, changed by the options if set."""
        c, o = self.c, self.c.options
        if o is None or (not o.audit_tweaked and o.oracle_share == 0 and o.oracle_family is None):
            return c.reward.pay_batch(grades.passed, grades.correct, grades.deletions, self.rng)
        passed, correct = grades.passed, grades.correct
        if o.audit_tweaked:
            assert isinstance(c.reward, Audit)  # the config validator guarantees it
            rate = o.audit_schedule.rate(c.reward.rate, i, c.steps)
            if o.audit_unit == "episode":
                audited = self.rng.random(passed.size) < rate
                hit = ~correct
            else:
                looked = self.rng.random(grades.outcome.shape) < rate
                audited = looked.any(1)
                hit = (looked & (grades.outcome != rules.FIXED)).any(1)
            caught = audited & passed & hit
            if o.audit_recall < 1.0:
                caught &= self.aux.random(passed.size) < o.audit_recall
            pay = BatchPayout(
                np.where(caught, c.reward.penalty, passed.astype(np.float64)), audited, caught
            )
        else:
            pay = c.reward.pay_batch(passed, correct, grades.deletions, self.rng)
        oracle = np.zeros(passed.size, dtype=bool)
        if o.oracle_share > 0:
            oracle |= (progs.content_hash() % np.uint64(1000)) < round(o.oracle_share * 1000)
        if o.oracle_family is not None:
            oracle |= progs.family == FAMILIES.index(o.oracle_family)
        if oracle.any():
            pay = BatchPayout(
                np.where(oracle, correct.astype(np.float64), pay.reward),
                pay.audited | oracle,
                pay.caught & ~oracle,
            )
        return pay

    def _optimizer(self) -> Adam:
        return Adam(self.model.params(), self.c.lr)

    def _forward(self, progs: Programs) -> tuple[np.ndarray, Any]:
        """(B*k, 34) logits, rows program-major then step, and what ``_update`` needs."""
        x = all_features(progs).reshape(progs.size * progs.k, -1)
        logits, h = self.model.forward(x)
        return logits, (x, h)

    def _reference_log_probs(self, progs: Programs, saved: Any) -> np.ndarray:
        return self.reference.log_probs(saved[0])

    def _update(self, saved: Any, dz: np.ndarray) -> None:
        """One optimiser step on the loss whose gradient w.r.t. the logits is ``dz``."""
        x, h = saved
        self.opt.step(self.model.backward(x, h, dz.astype(np.float32)))

    def mean_kl(self, start: MLP, programs: Programs) -> float:
        """Mean KL(policy || start) over every acting state of ``programs``."""
        x = all_features(programs).reshape(programs.size * programs.k, -1)
        return float(categorical_kl(self.model.log_probs(x), start.log_probs(x)).mean())

    def extra_results(self, start: MLP) -> dict[str, Any]:
        """Policy-specific additions to a run's result (the transformer adds its probes)."""
        return {}

    def save(self, run_dir: Path) -> None:
        np.savez_compressed(run_dir / "policy.npz", *self.model.params())

    def step(self, i: int) -> dict[str, float]:
        c = self.c
        progs = self.batch(i)
        b, k, g = progs.size, progs.k, c.group
        logits, saved = self._forward(progs)
        logp = log_softmax(logits)
        if self.writer is not None:  # a second agent adds tests before the coder acts
            seen, seen_logp = progs, logp.reshape(b, k, -1)
            progs, written = self.writer.write(seen, seen_logp)
            if self.writer.c.seen_by_coder:
                logits, saved = self._forward(progs)
                logp = log_softmax(logits)
        logq = self._reference_log_probs(progs, saved)
        # G episodes per program: sample each step's action from the shared distribution
        actions = sample_group(logp, self.rng, g)  # (b*k, g)
        episode_actions = actions.reshape(b, k, g).transpose(0, 2, 1).reshape(b * g, k)
        rep = progs[np.repeat(np.arange(b), g)]
        grades = rules.grade(rep, episode_actions)
        agents: dict[str, float] = {}
        if self.auditor is not None:
            chosen = np.take_along_axis(logp, actions, axis=1)  # (b*k, g)
            chosen = chosen.reshape(b, k, g).transpose(0, 2, 1).reshape(b * g, k)
            pay, agents = self.auditor.pay_and_learn(grades, chosen)
        else:
            pay = self.pay(i, rep, grades)
        if self.writer is not None:
            agents |= self.writer.pay_and_learn(seen, seen_logp, written, grades, g)
        if agents:
            agents["train_false_success"] = float(grades.false_success.mean())
        adv = group_advantages(pay.reward.reshape(b, g))  # (b, g)
        # gradient of the loss w.r.t. the logits of each (program, step) row
        n_samples = b * g * k
        adv_rows = np.repeat(adv, k, axis=0)  # (b*k, g), matches x's row order
        p = np.exp(logp)
        dz = p * adv_rows.sum(1, keepdims=True)
        rows = np.repeat(np.arange(b * k), g)
        np.add.at(dz, (rows, actions.reshape(-1)), -adv_rows.reshape(-1))
        dz /= n_samples
        dz += c.kl_coef * grad_kl_wrt_logits(logp, logq) / (b * k)
        self._update(saved, dz)
        kl = categorical_kl(logp, logq)
        return {
            "reward": float(pay.reward.mean()),
            "train_pass": float(grades.passed.mean()),
            "train_correct": float(grades.correct.mean()),
            "kl": float(kl.mean()),
            "audited": float(pay.audited.mean()),
            "caught": float(pay.caught.mean()),
            "zero_variance_groups": float((np.abs(adv).sum(1) == 0).mean()),
        } | agents


def train(
    run_dir: Path, config: dict[str, Any] | GRPOConfig, sft_cache: Path | None = None
) -> dict[str, Any]:
    """A whole pilot run into ``run_dir``: SFT, GRPO with monitoring, then greedy evaluation on
    the held-out programs. Returns the result (the executor writes it as result.json).
    ``sft_cache`` shares starting policies between runs with the same k, seed and SFT config."""
    numerics.require()
    c = config if isinstance(config, GRPOConfig) else GRPOConfig.model_validate(config)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "config.json", c.model_dump(mode="json"))
    t0 = time.perf_counter()
    trainer_cls = GRPOTrainer
    with threadpool_limits(1):
        if c.policy.kind == "transformer":
            from verigap.patchworld.transformer_policy import TransformerTrainer, sft_start

            trainer_cls = TransformerTrainer
            start, sft_losses = sft_start(c, sft_cache)
        else:
            start, sft_losses = sft_cached(c.k, c.seed, c.sft_config(), sft_cache)
        monitor = c.programs_as_configured(
            generate(c.k, c.monitor_programs, seed=1, stream="heldout"), 1
        )
        heldout = c.programs_as_configured(heldout_set(c.k, c.eval_programs), 0)
        trainer = trainer_cls(c, start)
        with JsonlWriter(run_dir / METRICS) as log:
            window: list[dict[str, float]] = []
            for i in range(c.steps + 1):
                if i % c.log_every == 0 or i == c.steps:
                    rec = {"step": i, **evaluate(trainer.model, monitor)}
                    if window:
                        rec |= {key: float(np.mean([w[key] for w in window])) for key in window[0]}
                    log.write(rec)
                    window = []
                if i < c.steps:
                    window.append(trainer.step(i))
        result = {
            "config": c.model_dump(mode="json"),
            "setting": c.reward.label,
            "start": evaluate(start, heldout),
            "final": evaluate(trainer.model, heldout),
            "sft_loss": sft_losses,
            "kl_final": trainer.mean_kl(start, heldout),
            "wall_s": time.perf_counter() - t0,
        }
        if c.options is not None:
            result |= _option_evals(c, start, trainer.model, heldout)
            result |= agent_summary(trainer.auditor, trainer.writer)
        result |= trainer.extra_results(start)
    trainer.save(run_dir)
    return result


def _option_evals(c: GRPOConfig, start: MLP, model: MLP, heldout: Programs) -> dict[str, Any]:
    """Extra held-out evaluations of an experiment-log run: by pattern family, and at other k."""
    out: dict[str, Any] = {"final_by_family": {}, "start_by_k": {}, "final_by_k": {}}
    for idx, name in enumerate(FAMILIES):
        part = heldout[heldout.family == idx]
        if part.size:
            out["final_by_family"][name] = evaluate(model, part)
    for k in c.options.eval_ks if c.options else ():
        other = c.programs_as_configured(heldout_set(k, c.eval_programs), 0)
        out["start_by_k"][str(k)] = evaluate(start, other)
        out["final_by_k"][str(k)] = evaluate(model, other)
    return out
