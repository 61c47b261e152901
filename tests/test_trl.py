"""verigap.trl: reward schemes as TRL reward functions, and one GRPO step on a tiny random model."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("trl")

from verigap import trl as vt  # noqa: E402
from verigap.patchworld import rules, text  # noqa: E402
from verigap.patchworld.programs import generate  # noqa: E402
from verigap.rewards import Audit, DeletionPenalty, Oracle, Visible  # noqa: E402


def _batch():
    """Three programs and, per program, a correct answer and an all-delete answer."""
    progs = generate(4, 3, seed=5)
    rows = [text.program_record(progs[i]) for i in range(3)]
    good = [text.format_answer(progs[i], progs[i].at_order("reference")[0]) for i in range(3)]
    bad = [text.format_answer(progs[i], np.full(4, rules.DELETE)) for i in range(3)]
    return progs, rows, good, bad


def test_scheme_rewards_match_the_shared_grader_and_truth_is_separate(tmp_path) -> None:
    progs, rows, good, bad = _batch()
    completions = [[{"role": "assistant", "content": a}] for a in good + bad + ["nonsense"]]
    program = rows + rows + rows[:1]
    funcs, weights = vt.reward_functions(Visible(), log_path=tmp_path / "log.jsonl")
    assert weights == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [f.__name__ for f in funcs] == ["visible", *vt.TRUTH]
    paid = funcs[0](None, completions, program)
    g = rules.grade(progs, np.full((3, 4), rules.DELETE))
    assert paid == [1.0] * 3 + [float(p) for p in g.passed] + [0.0]
    assert funcs[2](None, completions, program) == [1.0] * 3 + [0.0] * 4  # true_success
    fs = funcs[3](None, completions, program)
    assert fs[3:6] == [float(p) for p in g.passed] and fs[6] == 0.0
    assert funcs[4](None, completions, program)[-1] == 0.0  # nonsense does not parse
    logged = json.loads((tmp_path / "log.jsonl").read_text())
    assert logged["n"] == 7 and logged["true_success"] == pytest.approx(3 / 7)


def test_penalty_oracle_and_audit_schemes() -> None:
    _, rows, good, bad = _batch()
    assert vt.SchemeReward(DeletionPenalty(per_deletion=0.5))(None, bad, rows)[0] <= -1.0
    assert vt.SchemeReward(Oracle())(None, good + bad, rows + rows) == [1.0] * 3 + [0.0] * 3
    a = vt.SchemeReward(Audit(rate=1.0, penalty=-1.0))(None, bad, rows)
    assert all(r in (-1.0, 0.0) for r in a)  # every visible pass on deletions is caught
    assert vt.SchemeReward(Audit(rate=0.5), seed=3)(None, bad, rows) == vt.SchemeReward(
        Audit(rate=0.5), seed=3
    )(None, bad, rows)


def test_datasets_carry_prompts_programs_and_demonstrations() -> None:
    ds = vt.prompt_dataset(4, seed=1)
    assert ds.column_names == ["prompt", "program"] and len(ds) == 4
    assert ds[0]["prompt"][1]["content"] == text.render_prompt(
        text.program_from_record(ds[0]["program"])
    )
    sft = vt.sft_dataset(3, seed=1)
    assert [m["role"] for m in sft[0]["prompt"]] == ["system", "user"]
    assert [m["role"] for m in sft[0]["completion"]] == ["assistant"]
    compact = vt.prompt_dataset(2, seed=1, style="compact")
    assert compact[0]["prompt"][1]["content"] == text.render_prompt(
        text.program_from_record(compact[0]["program"]), "compact"
    )


def test_sft_key_names_the_prompt_style_and_keeps_older_starts_valid() -> None:
    full = vt.LMExperimentConfig(
        k=4, prompt="full", sft_programs=64, sft_epochs=1, sft_lr=5e-4, sft_batch=2, lora_r=16
    )
    # the key of the start made before prompt styles existed (its cache is on disk)
    assert vt.sft_key(full) == "6527769dba58"
    assert vt.sft_key(replace(full, prompt="compact")) != vt.sft_key(full)
    # GRPO-only fields do not change the start
    assert vt.sft_key(replace(full, top_p=0.9, max_completion_length=20)) == vt.sft_key(full)


def test_sft_puts_the_loss_on_the_answer_alone(tmp_path) -> None:
    """TRL's collator masks the prompt: the tokens that carry loss are the answer's (and the
    end of turn), never the system or user turns."""
    from verigap.agents._tiny import tiny_chat_model

    model, tok = tiny_chat_model(seed=0)
    cfg = vt.LMExperimentConfig(sft_programs=2, k=2)
    trainer = vt.sft_trainer(model, tok, cfg, tmp_path, peft=False)
    batch = trainer.data_collator([trainer.train_dataset[0]])
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    learned = tok.decode(ids[labels != -100])
    answer = vt.sft_dataset(2, k=2)[0]["completion"][0]["content"]
    assert learned.startswith(answer) and len(learned) < len(answer) + 16  # + the end of turn
    assert (labels != -100).sum() < len(ids) / 10  # the prompt is most of the sequence


@pytest.mark.slow
def test_one_grpo_step_on_a_tiny_random_model(tmp_path) -> None:
    """TRL's GRPOTrainer with a LoRA adapter and a KL penalty takes one step; the truth metrics
    are logged beside the reward. (A random model writes no answer that parses, so every
    reward is 0 and the group advantage, and with it the update, is zero: TRL reports it.)"""
    from peft import PeftModel

    from verigap.agents._tiny import tiny_chat_model

    model, tok = tiny_chat_model(seed=0)
    cfg = vt.LMExperimentConfig(
        steps=1,
        prompts_per_step=2,
        group=2,
        max_completion_length=8,
        lora_r=4,
        lora_alpha=8,
        beta=0.04,
    )
    trainer = vt.grpo_trainer(model, tok, cfg, tmp_path / "grpo", log_path=tmp_path / "m.jsonl")
    assert isinstance(trainer.model, PeftModel)
    trainer.train()
    assert trainer.state.global_step == 1
    logs = trainer.state.log_history[0]
    for name in ("visible", *vt.TRUTH):
        assert f"rewards/{name}/mean" in logs
    assert "kl" in logs and logs["frac_reward_zero_std"] == 1.0
    assert logs["completions/mean_length"] == 8
    rec = json.loads((tmp_path / "m.jsonl").read_text())
    assert rec["n"] == 4 and rec["answer_parsed"] == 0.0


@pytest.mark.slow
def test_run_experiment_writes_a_resumable_run_directory(tmp_path) -> None:
    """LoRA SFT on careless demonstrations, evaluation, one GRPO step, evaluation; the result
    is written last and a second call returns it without training again."""
    from verigap.agents._tiny import tiny_chat_model

    model, tok = tiny_chat_model(seed=1)
    cfg = vt.LMExperimentConfig(
        sft_programs=8,
        steps=1,
        prompts_per_step=2,
        group=2,
        max_completion_length=8,
        lora_r=4,
        lora_alpha=8,
        eval_programs=2,
        reward={"kind": "audit", "rate": 0.25},
    )
    result = vt.run_experiment(cfg, tmp_path / "run", model=model, tokenizer=tok)
    run = tmp_path / "run"
    assert json.loads((run / "config.json").read_text())["reward"] == {
        "kind": "audit",
        "rate": 0.25,
    }
    assert set(result["start"]) == set(result["final"]) == set(vt.TRUTH)
    assert result["config"]["steps"] == 1 and result["cpu_s"] > 0
    assert [r["step"] for r in result["curve"]] == [1] and result["curve"][0]["n"] == 4
    assert (run / "metrics.jsonl").read_text().count("\n") == 1
    stamp = (run / "result.json").stat().st_mtime_ns
    assert (
        vt.run_experiment(cfg, run) == result and (run / "result.json").stat().st_mtime_ns == stamp
    )


@pytest.mark.slow
def test_sft_start_is_cached_per_seed_and_loads_to_the_same_policy(tmp_path) -> None:
    """Two runs that differ only in their reward share one SFT: the second loads the stored
    adapter, and the merged policy it gets is the first one's, weight for weight."""
    import torch

    from verigap.agents._tiny import tiny_chat_model

    cfg = vt.LMExperimentConfig(sft_programs=8, lora_r=4, lora_alpha=8, eval_programs=2)
    other = vt.LMExperimentConfig(**{**cfg.__dict__, "reward": {"kind": "oracle"}})
    assert vt.sft_key(cfg) == vt.sft_key(other)
    assert vt.sft_key(cfg) != vt.sft_key(vt.LMExperimentConfig(**{**cfg.__dict__, "seed": 1}))
    m1, tok = tiny_chat_model(seed=2)
    a, ev_a, cpu_a = vt.sft_start(cfg, m1, tok, tmp_path / "a", tmp_path / "cache")
    m2, _ = tiny_chat_model(seed=2)
    b, ev_b, cpu_b = vt.sft_start(other, m2, tok, tmp_path / "b", tmp_path / "cache")
    assert cpu_a > 0 and cpu_b == 0.0 and ev_a == ev_b
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    base = tiny_chat_model(seed=2)[0].state_dict()
    assert any(not torch.equal(sa[k], base[k]) for k in sa)  # SFT moved the weights


@pytest.mark.slow
def test_same_config_and_seed_give_the_same_run(tmp_path) -> None:
    """Pinned, two runs of one config and seed log the same rewards, truth and TRL losses, step
    for step (sampling, audits and the update all repeat)."""
    from verigap.agents._tiny import tiny_chat_model

    cfg = vt.LMExperimentConfig(
        sft_programs=8,
        steps=2,
        prompts_per_step=1,
        group=2,
        max_completion_length=8,
        lora_r=4,
        lora_alpha=8,
        eval_programs=2,
        reward={"kind": "audit", "rate": 0.5},
    )
    runs = []
    for name, c in (
        ("a", cfg),
        ("b", cfg),
        ("other_seed", vt.LMExperimentConfig(**{**cfg.__dict__, "seed": 1})),
    ):
        model, tok = tiny_chat_model(seed=3)
        r = vt.run_experiment(c, tmp_path / name, model=model, tokenizer=tok)
        runs.append((r, (tmp_path / name / "metrics.jsonl").read_text()))
    (ra, la), (rb, lb), (rc, _) = runs
    assert la == lb and la.count("\n") == 2
    keys = ("loss", "kl", "reward", "grad_norm", "entropy", "completions/mean_length")
    assert [{k: s.get(k) for k in keys} for s in ra["trl_log"]] == [
        {k: s.get(k) for k in keys} for s in rb["trl_log"]
    ]
    assert ra["start"] == rb["start"] and ra["final"] == rb["final"]
    # the control: another seed samples other completions, so its entropies differ
    assert [s["entropy"] for s in ra["trl_log"]] != [s["entropy"] for s in rc["trl_log"]]


@pytest.mark.slow
def test_a_stopped_run_resumes_from_its_checkpoint_to_the_uninterrupted_numbers(
    tmp_path, monkeypatch
) -> None:
    """Four GRPO steps in one go, and the same run stopped after two (with a third step half
    logged, as a session killed mid-step leaves it) then resumed: the same reward log, TRL
    losses, KL, gradient norms and final evaluation. A random model writes no answer that
    parses, so the grader here pays a reward that varies per completion and per step's rng:
    the updates are real, and sampling, audit draws, optimizer and scheduler must all resume."""
    from dataclasses import replace

    from verigap.agents._tiny import tiny_chat_model

    grade = text.grade_answers

    def varied(programs, answers, scheme, rng):
        return [
            replace(v, reward=len(set(a)) / 8 + float(rng.random()))
            for v, a in zip(grade(programs, answers, scheme, rng), answers, strict=True)
        ]

    monkeypatch.setattr(text, "grade_answers", varied)
    cfg = vt.LMExperimentConfig(
        sft_programs=8,
        steps=4,
        prompts_per_step=1,
        group=2,
        max_completion_length=8,
        lora_r=4,
        lora_alpha=8,
        eval_programs=2,
        lr=1e-2,
        reward={"kind": "audit", "rate": 0.5},
    )

    def run(name: str, **kw):
        model, tok = tiny_chat_model(seed=4)  # a new session loads the model afresh
        return vt.run_experiment(cfg, tmp_path / name, model=model, tokenizer=tok, **kw)

    whole = run("whole")
    part = run("stopped", stop_after=2)
    stopped = tmp_path / "stopped"
    assert part["status"] == "partial" and part["steps_done"] == 2
    assert not (stopped / "result.json").exists()
    assert vt.last_checkpoint(stopped / "grpo")[1] == 2
    with (stopped / "metrics.jsonl").open("a") as f:  # step 3 graded, then the session ended
        f.write(json.dumps({"step": 3, "reward": -1.0}) + "\n")
    resumed = run("stopped")
    assert (stopped / "metrics.jsonl").read_text() == (tmp_path / "whole/metrics.jsonl").read_text()
    keys = ("loss", "kl", "reward", "reward_std", "grad_norm", "entropy", "learning_rate")
    assert [{k: s.get(k) for k in keys} for s in resumed["trl_log"]] == [
        {k: s.get(k) for k in keys} for s in whole["trl_log"]
    ]
    assert resumed["curve"] == whole["curve"] and len(whole["curve"]) == 4
    assert resumed["final"] == whole["final"] and resumed["start"] == whole["start"]
    steps = [json.loads(x)["step"] for x in (stopped / "progress.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4] and resumed["grpo_cpu_s"] > 0
    # the controls: the policy did move (else equal logs prove nothing), and a resume that
    # cannot restore the sampling RNG's state is not the uninterrupted run
    assert any(s["grad_norm"] > 0 for s in whole["trl_log"])
    assert len({s["kl"] for s in whole["trl_log"]}) > 1
    assert run("lost_rng", stop_after=2)["status"] == "partial"
    ckpt, _ = vt.last_checkpoint(tmp_path / "lost_rng/grpo")
    (ckpt / "rng_state.pth").unlink()
    lost = run("lost_rng")
    assert lost["curve"][:2] == whole["curve"][:2]
    assert [s["entropy"] for s in lost["trl_log"][2:]] != [
        s["entropy"] for s in whole["trl_log"][2:]
    ]


def test_last_checkpoint_skips_one_a_kill_cut_off(tmp_path) -> None:
    """The newest checkpoint whose trainer state is whole; a half-written or missing state (a
    session killed while saving) falls back to the one before."""
    for step, state in ((2, {"global_step": 2}), (3, '{"global_st'), (4, None)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        if state is not None:
            text_ = state if isinstance(state, str) else json.dumps(state)
            (d / "trainer_state.json").write_text(text_)
    assert vt.last_checkpoint(tmp_path) == (tmp_path / "checkpoint-2", 2)
    assert vt.last_checkpoint(tmp_path / "absent") == (None, 0)
