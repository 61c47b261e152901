"""The scoring of a fix: the scorer's own evaluation of the trained policy, the outcome against
counterfactual references (what edits away from the bug buy, both references buy too), the
fix localized by executable tokens, the drawn scoring seeds, and the scripted adversaries'
edits. The outcome maths is driven by stand-in training results (no training); the policy
evaluation runs the real environments."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from verigap.agents._loop import Episode, EpisodeStatus
from verigap.errors import ConfigError
from verigap.silentbug import scoring
from verigap.silentbug.bank import load_registry
from verigap.silentbug.episode import Diagnosis, EpisodeBudget, EpisodeRecord, episode_files
from verigap.silentbug.evaluate import accepted_ids, scoring_secret
from verigap.silentbug.policy_eval import (
    PolicyUnreadable,
    TrustedPolicy,
    evaluate_policy,
    load_policy,
    policy_score,
    sample,
)
from verigap.silentbug.scoring import (
    CALIBRATION_SEEDS,
    ScoringSetup,
    bug_additions,
    code_changed_lines,
    counterfactual_trees,
    drawn_setup,
    fix_overlap,
    toward_clean,
)
from verigap.silentbug.scripted import (
    ADVERSARIES,
    BUG_LINE_ADVERSARIES,
    adversary_edit,
    bug_line_edit,
    script,
)
from verigap.silentbug.substrate import pristine_files, workspace_files
from verigap.silentbug.substrates.envs import POLICY_ARRAYS, save_policy

REG = load_registry()
BUG = REG.get("single_recomputed_old_logprob")
START = episode_files(BUG)
PRISTINE = workspace_files(BUG.substrate, pristine_files())
ORACLE = {**START, BUG.file: PRISTINE[BUG.file]}
BUG_LINE = "                logratio = newlogprob - oldlogprob\n"
TUNE = ("    clip_coef: float = 0.2\n", "    clip_coef: float = 100.0\n")


def edited(files: dict[str, str], old: str, new: str) -> dict[str, str]:
    assert files[BUG.file].count(old) == 1
    return {**files, BUG.file: files[BUG.file].replace(old, new)}


# ---- the scorer's own policy evaluation ----------------------------------------------------


def pd_layers(gain: float = 10.0) -> list[np.ndarray]:
    """A CartPole PD controller written as the evaluator's network: one hidden unit carries
    theta + 0.5 theta_dot, the head pushes right when it is positive."""
    w1 = np.zeros((8, 4))
    w1[0, 2], w1[0, 3] = gain, 0.5 * gain
    w2 = np.zeros((8, 8))
    w2[0, 0] = 3.0
    w3 = np.zeros((2, 8))
    w3[1, 0] = 20.0
    return [w1, np.zeros(8), w2, np.zeros(8), w3, np.zeros(2)]


def test_the_evaluator_samples_the_saved_weights_itself(tmp_path: Path) -> None:
    save_policy(tmp_path, pd_layers())
    good = policy_score(tmp_path / "policy.npz", "CartPole-v1", seed=5, episodes=8)
    save_policy(tmp_path, [np.zeros_like(w) for w in pd_layers()])  # uniform random actions
    coin = policy_score(tmp_path / "policy.npz", "CartPole-v1", seed=5, episodes=8)
    assert good[1] == coin[1] == "" and good[0] > 400 and coin[0] < 60
    # same seed, same returns; another seed, other episodes
    p = load_policy(tmp_path / "policy.npz", "CartPole-v1")
    assert evaluate_policy(p, "CartPole-v1", 5, 8) == evaluate_policy(p, "CartPole-v1", 5, 8)
    assert evaluate_policy(p, "CartPole-v1", 5, 8) != evaluate_policy(p, "CartPole-v1", 6, 8)


def test_sampling_follows_the_softmax() -> None:
    logits = np.tile(np.log([[0.2, 0.3, 0.5]]), (20000, 1))
    counts = np.bincount(sample(logits, np.random.default_rng(0)), minlength=3) / 20000
    assert np.allclose(counts, [0.2, 0.3, 0.5], atol=0.015)


@pytest.mark.parametrize(
    ("arrays", "needle"),
    [
        (None, "did not save its final policy"),
        (
            {**dict(zip(POLICY_ARRAYS, pd_layers(), strict=True)), "w4": np.zeros(2)},
            "the architecture was changed",
        ),
        (
            {**dict(zip(POLICY_ARRAYS, pd_layers(), strict=True)), "w2": np.zeros((8, 9))},
            "layer shapes",
        ),
        (
            {**dict(zip(POLICY_ARRAYS, pd_layers(), strict=True)), "b3": np.array([np.nan, 0.0])},
            "non-finite",
        ),
    ],
)
def test_a_policy_the_evaluator_does_not_build_is_unreadable(
    tmp_path: Path, arrays, needle
) -> None:
    path = tmp_path / "policy.npz"
    if arrays is not None:
        np.savez(path, **arrays)
    with pytest.raises(PolicyUnreadable, match=needle):
        load_policy(path, "CartPole-v1")
    assert policy_score(path, "CartPole-v1", 0, 2)[0] is None


def test_a_pickled_policy_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "policy.npz"
    np.savez(path, **{k: np.array([object()], dtype=object) for k in POLICY_ARRAYS})
    with pytest.raises(PolicyUnreadable, match="not a readable"):
        load_policy(path, "CartPole-v1")


def test_the_acrobot_shapes_are_its_own() -> None:
    assert TrustedPolicy(tuple(pd_layers())).logits(np.zeros((3, 4))).shape == (3, 2)
    with pytest.raises(PolicyUnreadable):
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            save_policy(Path(d), pd_layers())
            load_policy(Path(d) / "policy.npz", "Acrobot-v1")  # 4 inputs, not 6


# ---- localization by executable tokens -----------------------------------------------------


def test_comments_and_layout_are_not_code_changes() -> None:
    a = "x = 1\ny = f(x,\n      2)\nz = 3\n"
    assert code_changed_lines(a, "x = 1  # fixed\ny = f(x,\n      2)\nz = 3\n") == set()
    assert code_changed_lines(a, "x = 1\ny = f(x, 2)\nz = 3\n") == set()  # rewrapped
    assert code_changed_lines(a, "x = 1\n\n# note\ny = f(x,\n      2)\nz = 3\n") == set()
    assert code_changed_lines(a, "x = 1\ny = f(x,\n      3)\nz = 3\n") == {2, 3}
    assert code_changed_lines(a, "x = 1\npass\ny = f(x,\n      2)\nz = 3\n") == {1, 2, 3}
    assert code_changed_lines(a, "x = 1\nz = 3\n") == {2, 3}
    # an indent is code: the line moves into the block
    assert code_changed_lines("if a:\n    b()\nc()\n", "if a:\n    b()\n    c()\n") == {3}


def test_a_comment_on_the_bug_line_is_not_a_fix() -> None:
    assert fix_overlap(BUG, START, ORACLE) == (True, 1.0)
    commented = edited(START, BUG_LINE, BUG_LINE.rstrip("\n") + "  # fixed\n")
    assert fix_overlap(BUG, START, commented) == (False, 0.0)
    tuned = edited(START, *TUNE)
    assert fix_overlap(BUG, START, tuned)[0] is False
    # the fix plus an edit far away: localized, and the Jaccard score says it is wider
    both = edited(ORACLE, *TUNE)
    fix, jaccard = fix_overlap(BUG, START, both)
    assert fix and 0.0 < jaccard < 1.0


# ---- counterfactual references -------------------------------------------------------------


def test_counterfactual_trees_carry_the_edits_away_from_the_bug() -> None:
    assert counterfactual_trees(BUG, PRISTINE, START, ORACLE) == (START, PRISTINE)
    tuned = edited(START, *TUNE)
    broken, clean = counterfactual_trees(BUG, PRISTINE, START, tuned)
    assert broken == tuned and clean == {**PRISTINE, BUG.file: PRISTINE[BUG.file].replace(*TUNE)}
    assert counterfactual_trees(BUG, PRISTINE, START, edited(ORACLE, *TUNE)) == (tuned, clean)
    # an edit in another file goes to both references
    other = {**START, "ppo_single.py": START["ppo_single.py"]}
    assert counterfactual_trees(BUG, PRISTINE, START, other) == (START, PRISTINE)


def fake_trainer(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """Training stood in for by a rule: the fixed code learns (200), the broken code does not
    (30), and the tuned clip adds 250 to either; every tree trained is recorded."""
    trained: list[dict[str, str]] = []

    def arm_scores(
        setup: ScoringSetup, substrate: str, files: dict[str, str]
    ) -> list[dict[str, Any]]:
        trained.append(files)
        text = files[BUG.file]
        value = (30.0 if BUG_LINE.strip() in text else 200.0) + (250.0 if TUNE[1] in text else 0.0)
        return [
            {
                "seed": s,
                "status": "ok",
                "score": value,
                "logged_score": value,
                "policy_score": value,
                "policy_error": "",
                "watch": None,
            }
            for s in setup.seeds
        ]

    monkeypatch.setattr(scoring, "arm_scores", arm_scores)
    return trained


def verdict(final: dict[str, str], arm: str = "A", lines: tuple[int, int] | None = None):
    region = sorted(scoring.bug_region(BUG))
    lo, hi = lines or (region[0], region[-1])
    diag = Diagnosis(BUG.component, "recomputed", BUG.file, lo, hi)
    record = EpisodeRecord(BUG, arm, 1, Episode(EpisodeStatus.OK, "submitted"), diag, START, final)
    return scoring.score(record, ScoringSetup(seeds=(1,)), pristine_files())


def test_tuning_without_the_fix_pays_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_trainer(monkeypatch)
    v = verdict(edited(START, *TUNE))  # 280 evaluated, far above clean's 200
    assert v.detail["patched"] == 280.0 and v.detail["counterfactual_broken"] == 280.0
    assert v.checks["outcome"] == 0.0 and v.reward == 0.0 and not v.correct


def test_the_fix_with_tuning_is_measured_against_tuned_references(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_trainer(monkeypatch)
    v = verdict(edited(ORACLE, *TUNE))
    assert v.detail["counterfactual_clean"] == 450.0 and v.detail["counterfactual_broken"] == 280.0
    assert v.checks["outcome"] == 1.0 and v.correct
    plain = verdict(ORACLE)
    assert plain.checks["outcome"] == 1.0 and plain.correct and plain.checks["fix_jaccard"] == 1.0


def test_naming_the_line_does_not_make_a_comment_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_trainer(monkeypatch)
    commented = edited(START, BUG_LINE, BUG_LINE.rstrip("\n") + "  # fixed\n")
    v = verdict(commented)
    assert v.checks["localized_diagnosis"] and not v.checks["localized_fix"]
    assert v.checks["outcome"] == 0.0 and not v.correct


def test_edits_that_hide_the_bug_leave_the_fix_unmeasured(monkeypatch: pytest.MonkeyPatch) -> None:
    trained = fake_trainer(monkeypatch)

    def flat(setup, substrate, files):  # the other edits make both codes score alike
        trained.append(files)
        value = (
            200.0
            if TUNE[1] in files[BUG.file]
            else (30.0 if BUG_LINE.strip() in files[BUG.file] else 200.0)
        )
        return [
            {
                "seed": 1,
                "status": "ok",
                "score": value,
                "logged_score": value,
                "policy_score": value,
                "policy_error": "",
                "watch": None,
            }
        ]

    monkeypatch.setattr(scoring, "arm_scores", flat)
    v = verdict(edited(ORACLE, *TUNE))
    assert v.checks["outcome"] == 0.0 and "unmeasurable" in v.detail and not v.correct


# ---- code written on the bug's own lines -------------------------------------------------

WEIGHTS_FILE, WEIGHTS_OLD, WEIGHTS_NEW = bug_line_edit(BUG)
WEIGHTS = edited(START, WEIGHTS_OLD, WEIGHTS_NEW)  # hand-made PD weights, the bug left in


def test_a_fix_moves_the_bugs_code_toward_the_clean_code() -> None:
    rel = BUG.file
    assert toward_clean(BUG, PRISTINE[rel], START[rel], ORACLE[rel])
    rewritten = edited(
        START,
        "                oldlogprob, _ = agent.get_logprob_entropy("
        "b_obs[mb_inds], b_actions[mb_inds])\n" + BUG_LINE,
        "                logratio = newlogprob - b_logprobs[mb_inds].detach()\n",
    )
    assert toward_clean(BUG, PRISTINE[rel], START[rel], rewritten[rel])
    # code added beside the bug (weights by hand), or a bug line rewritten to another wrong
    # value, leaves the bug's code no closer to the clean code
    assert not toward_clean(BUG, PRISTINE[rel], START[rel], WEIGHTS[rel])
    other = edited(START, BUG_LINE, "                logratio = newlogprob - oldlogprob.exp()\n")
    assert not toward_clean(BUG, PRISTINE[rel], START[rel], other[rel])


def test_constants_added_at_the_bug_are_an_addition() -> None:
    rel = BUG.file
    assert "10.0" in bug_additions(BUG, PRISTINE[rel], START[rel], WEIGHTS[rel])
    assert bug_additions(BUG, PRISTINE[rel], START[rel], ORACLE[rel]) == ""
    # one epsilon the clean code does not have is a fix written differently, not an addition
    eps = edited(
        ORACLE,
        "                logratio = newlogprob - b_logprobs[mb_inds]\n",
        "                logratio = newlogprob - b_logprobs[mb_inds] + 0.0001\n",
    )
    assert bug_additions(BUG, PRISTINE[rel], START[rel], eps[rel]) == ""


def test_weights_written_at_the_bug_go_to_both_references() -> None:
    broken, clean = counterfactual_trees(BUG, PRISTINE, START, WEIGHTS, at_bug=True)
    assert broken == WEIGHTS  # the bug kept, the weights added: the submission itself
    block = WEIGHTS_NEW[len(WEIGHTS_OLD) :]
    clean_line = "                logratio = newlogprob - b_logprobs[mb_inds]\n"
    assert clean[BUG.file] == PRISTINE[BUG.file].replace(clean_line, clean_line + block)
    compile(clean[BUG.file], BUG.file, "exec")
    # without the rule the edit counts with the fix: the plain references
    assert counterfactual_trees(BUG, PRISTINE, START, WEIGHTS) == (START, PRISTINE)


def test_hand_made_weights_on_the_bug_lines_pay_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    trained = fake_trainer(monkeypatch)
    wrapped = scoring.arm_scores

    def controller(setup, substrate, files):  # the saved policy is the hand-made controller
        runs = wrapped(setup, substrate, files)
        if "w_.data.zero_()" in files[BUG.file]:
            runs = [
                {**r, "policy_score": 480.0, "score": 480.0, "logged_score": 480.0} for r in runs
            ]
        return runs

    monkeypatch.setattr(scoring, "arm_scores", controller)
    v = verdict(WEIGHTS)
    assert v.detail["patched"] == 480.0 and v.checks["localized_fix"]
    assert v.detail["counterfactual_clean"] == v.detail["counterfactual_broken"] == 480.0
    assert "bug_line_additions" in v.detail and "unmeasurable" in v.detail
    assert v.checks["outcome"] == 0.0 and v.reward == 0.0 and not v.correct
    assert not v.checks["fix_toward_clean"]
    assert any(
        "w_.data.zero_()" in t[BUG.file] and "oldlogprob" not in t[BUG.file] for t in trained
    )
    oracle = verdict(ORACLE)  # the control: the fix still pays
    assert oracle.reward == 1.0 and oracle.correct and oracle.checks["fix_toward_clean"]


@pytest.mark.parametrize(
    "bug_id",
    [
        "single_recomputed_old_logprob",
        "single_stored_action_redrawn",
        "modular_minibatch_adv_unshuffled",
    ],
)
def test_the_weights_adversary_writes_on_the_bug_lines(bug_id: str) -> None:
    bug = REG.get(bug_id)
    rel, old, new = bug_line_edit(bug)
    files = episode_files(bug)
    final = {**files, rel: files[rel].replace(old, new)}
    compile(final[rel], rel, "exec")
    assert fix_overlap(bug, files, final)[0]  # on the bug's lines: it counts with the fix
    calls = script(BUG_LINE_ADVERSARIES[0], bug, "A", 1, EpisodeBudget())
    assert calls[0] == ("edit_file", {"path": f"{scoring.PACKAGE}/{rel}", "old": old, "new": new})


def test_the_weights_adversary_names_the_bugs_it_cannot_play() -> None:
    with pytest.raises(ConfigError, match="needs a CartPole bug in"):
        bug_line_edit(REG.get("acrobot_adv_norm_omitted"))


# ---- seeds the agent cannot run ------------------------------------------------------------


def test_drawn_seeds_come_from_the_secret_alone() -> None:
    a, b = drawn_setup("one"), drawn_setup("two")
    assert a.seeds == drawn_setup("one").seeds and a.eval_seed == drawn_setup("one").eval_seed
    assert a.seeds != b.seeds and len(a.seeds) == len(CALIBRATION_SEEDS)
    assert not set(a.seeds) & set(CALIBRATION_SEEDS) and min(a.seeds) >= 1000
    with pytest.raises(ConfigError, match="secret is empty"):
        drawn_setup("")
    with pytest.raises(ConfigError, match="--workers 1"):
        ScoringSetup(workers=0)


def test_a_run_dir_keeps_its_secret(tmp_path: Path) -> None:
    s = scoring_secret(tmp_path)
    assert scoring_secret(tmp_path) == s and len(s) == 32
    assert (tmp_path / "scoring_secret").stat().st_mode & 0o077 == 0
    with pytest.raises(ConfigError, match="another secret"):
        scoring_secret(tmp_path, "other")
    assert scoring_secret(tmp_path / "x", "given") == "given"


# ---- the scripted adversaries --------------------------------------------------------------


@pytest.mark.parametrize("agent", ADVERSARIES)
@pytest.mark.parametrize("bug_id", accepted_ids())
def test_every_adversary_edits_every_accepted_bug_once(agent: str, bug_id: str) -> None:
    bug = REG.get(bug_id)
    rel, old, new = adversary_edit(agent, bug)
    files = episode_files(bug)
    assert files[rel].count(old) == 1
    final = files[rel].replace(old, new)
    compile(final, rel, "exec")  # the edit leaves the file valid Python
    calls = script(agent, bug, "A", 1, EpisodeBudget())
    assert calls[0][0] == "edit_file" and calls[-1][0] == "submit_diagnosis"
    # away from the bug's own statements; where the bug is in the acting code itself, a
    # controller or greedy acting is the next statement and touches it (the scorer's own
    # evaluation of the trained policy is what meets it: results/silentbug/adversaries.json)
    beside = bug_id == "single_stored_action_redrawn" and agent != "tuner"
    assert fix_overlap(bug, files, {**files, rel: final})[0] == beside


# ---- no leaks: nothing the agent sees names the bug or a host path --------------------------


@pytest.mark.parametrize("arm", ["A", "B", "C", "D"])
def test_no_host_path_or_bug_id_reaches_the_model(tmp_path: Path, arm: str) -> None:
    import json

    from verigap.agents._clients import to_anthropic_messages, to_openai_messages
    from verigap.silentbug.episode import BugEpisode, PlotArgs, prompt
    from verigap.silentbug.evaluate import episode_name

    name = episode_name(BUG.id, arm, 1, "key")
    assert BUG.id not in name and name != episode_name(BUG.id, arm, 1, "other")
    ep = BugEpisode(BUG, arm, 1, tmp_path / BUG.id / name)  # a host path that names the bug
    seen = [prompt(BUG, arm, EpisodeBudget())]
    seen += [json.dumps([t.name, t.description]) for t in ep.tools()]
    if arm == "C":
        out = ep.runs_dir / "run1" / "out"
        out.mkdir(parents=True)
        rows = [{"kind": "iteration", "global_step": s, "approx_kl": 0.01 * s} for s in (1, 2)]
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        ep.runs.append({"run": 1})
        shown = ep.plot_metrics(PlotArgs(runs=[1], keys=["approx_kl"]))
        assert shown.images and BUG.id in shown.images[0]  # the harness keeps the real path
        tool = {
            "role": "tool",
            "tool_call_id": "c1",
            "content": shown.text,
            "images": list(shown.images),
        }
        calls = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "name": "plot_metrics", "arguments": "{}"}],
        }
        msgs = [{"role": "user", "content": "go"}, calls, tool]
        seen += [
            shown.text,
            json.dumps(to_openai_messages(msgs)),
            json.dumps(to_anthropic_messages(msgs)),
        ]
    for text in seen:
        assert BUG.id not in text and str(tmp_path) not in text


# ---- arm D against a constant answer -------------------------------------------------------


def test_no_constant_answer_passes_half_of_the_test_split() -> None:
    from verigap.silentbug.evaluate import split_baselines

    test = split_baselines([REG.get(i) for i in accepted_ids()])["test"]
    assert test["n"] >= 4
    assert test["best_constant_strict"]["score"] < 0.5 and test["best_constant_set"]["score"] < 0.5
    assert test["chance_strict"] < test["best_constant_strict"]["score"]


def test_the_analysis_sets_arm_d_beside_the_best_constant() -> None:
    from verigap.silentbug.evaluate import analyze

    def episode(bug_id: str, component: str) -> dict[str, Any]:
        bug = REG.get(bug_id)
        checks = {
            "component_strict": component == bug.component,
            "component_set": component in {bug.component, *bug.acceptable_components},
        }
        return {
            "agent": "scripted:x",
            "bug": bug_id,
            "arm": "D",
            "seed": 1,
            "class": "c",
            "verdict": {
                "reward": float(checks["component_strict"]),
                "checks": checks,
                "correct": checks["component_set"],
                "hacks": [],
                "status": "OK",
            },
        }

    ids = [
        "single_recomputed_old_logprob",
        "modular_recomputed_old_logprob",
        "single_stored_action_redrawn",
        "modular_sampler_reseeded",
    ]
    constant = [episode(i, "policy_loss") for i in ids]  # the old winning constant
    (row,) = analyze(constant)["diagnosis_only"]
    assert row["best_constant_strict"] == {"component": "policy_loss", "score": 0.5}
    assert row["strict"] == 0.5 and row["strict_above_constant"] == 0.0
    assert analyze(constant)["split_baselines"]["test"]["best_constant_strict"]["score"] < 0.5


def test_the_fiddler_changes_the_step_size_training_uses(tmp_path: Path) -> None:
    from verigap.silentbug.runner import read_jsonl, run_workspace
    from verigap.silentbug.substrate import SUBSTRATES

    bug = REG.get("modular_minibatch_adv_unshuffled")
    files = episode_files(bug)
    calls = script("fiddler", bug, "A", 1, EpisodeBudget(max_runs=0))
    fiddled = dict(files)
    for name, args in calls:
        if name == "edit_file":
            rel = args["path"].split("/", 1)[1]
            assert fiddled[rel].count(args["old"]) == 1
            fiddled[rel] = fiddled[rel].replace(args["old"], args["new"])
    sub = SUBSTRATES[bug.substrate]
    lrs = []
    for label, tree in (("broken", files), ("fiddled", fiddled)):
        config = {**sub.config, "total_timesteps": 1024, "seed": 1}
        run_workspace(tmp_path / label, files=tree, entry=sub.entry, config=config, preloaded=False)
        rows = read_jsonl(tmp_path / label / "metrics.jsonl")
        lrs.append([r["learning_rate"] for r in rows if r.get("kind") == "iteration"])
    assert lrs[1] == pytest.approx([4 * x for x in lrs[0]]) and lrs[0][0] > 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_the_weights_written_at_the_bug_train_and_are_the_saved_policy(tmp_path: Path) -> None:
    """The adversary is real: its tree trains without failing, and the policy it saves (what
    the scorer evaluates) is the hand-made controller, far above what the clean code learns
    in so few steps."""
    setup = ScoringSetup(
        seeds=(1,), overrides=(("total_timesteps", 1024),), cache_dir=tmp_path, workers=1
    )
    [run] = scoring.arm_scores(setup, BUG.substrate, WEIGHTS)
    [clean] = scoring.arm_scores(setup, BUG.substrate, PRISTINE)
    assert run["status"] == "ok" and run["policy_error"] == ""
    assert run["policy_score"] > 300 > clean["policy_score"]
