"""The Gymnasium and batched APIs, the careless engineer, and the CLI."""

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from typer.testing import CliRunner

from verigap.cli import app
from verigap.patchworld import ENV_ID, BatchedPatchWorld, careless_actions, generate, run_episodes
from verigap.patchworld.rules import DELETE, N_ACTIONS
from verigap.rewards import Audit, Visible


def test_registered_env_passes_the_gymnasium_checker():
    env = gym.make(ENV_ID)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_gym_and_batched_apis_agree_on_the_same_programs_and_actions():
    programs = generate(4, 300, seed=9)
    actions = np.random.default_rng(1).integers(0, N_ACTIONS, (300, 4))
    actions[::3] = programs.at_order("reference")[::3]
    actions[1::3, 1] = DELETE
    scheme = Audit(rate=0.5)
    grades, _ = run_episodes(programs, actions, scheme, np.random.default_rng(0))
    env = gym.make(ENV_ID, k=4, reward=scheme).unwrapped
    for i in range(programs.size):
        obs, _ = env.reset(seed=i, options={"program": programs[i]})
        assert obs["target"] == programs.order[i, 0]
        for t in range(4):
            obs, r, term, trunc, info = env.step(int(actions[i, t]))
            assert term == (t == 3) and not trunc
        v = info["verdict"]
        assert v["checks"]["build"] == grades.build[i]
        assert v["checks"]["visible"] == grades.visible[i]
        assert v["correct"] == grades.correct[i]
        assert v["passed"] == grades.passed[i]
        # the reward follows the same scheme rule
        expected = -1.0 if v["caught"] else float(grades.passed[i])
        assert r == expected


def test_batched_env_reports_written_actions_and_rewards_at_the_end():
    programs = generate(4, 5, seed=0)
    env = BatchedPatchWorld(programs, Visible())
    obs = env.reset()
    assert (obs["target"] == programs.order[:, 0]).all()
    refs = programs.at_order("reference")
    for t in range(4):
        obs, reward, done = env.step(refs[:, t])
        assert done == (t == 3)
        if not done:
            assert (reward == 0).all()
            assert (obs["written"][np.arange(5), programs.order[:, t]] == refs[:, t]).all()
    assert (reward == 1).all()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(refs[:, 0])


def test_env_rejects_bad_actions_and_programs():
    env = gym.make(ENV_ID).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match="Discrete"):
        env.step(N_ACTIONS)
    with pytest.raises(ValueError, match="program"):
        env.reset(options={"program": generate(4, 2, seed=0)})
    with pytest.raises(ValueError, match="between 1 and"):
        gym.make(ENV_ID, k=0)


def test_gym_env_is_deterministic_under_seed():
    def play(seed):
        env = gym.make(ENV_ID).unwrapped
        out = []
        obs, _ = env.reset(seed=seed)
        for _ in range(3):
            done = False
            while not done:
                obs, r, done, _, info = env.step(DELETE)
            out.append((obs["values"].tolist(), info["verdict"]["checks"]))
            obs, _ = env.reset()
        return out

    assert play(4) == play(4)
    assert play(4) != play(5)


def test_careless_engineer_matches_the_seed_starting_point():
    programs = generate(4, 20000, seed=3)
    grades, _ = run_episodes(programs, careless_actions(programs, np.random.default_rng(0)))
    assert 0.28 < grades.correct.mean() < 0.34  # seed 000: 31% fully correct
    c = grades.outcome_counts()
    # careless only where no test reaches: no stubs or deletes on tested branches
    assert c["tested/stub"] == 0 and c["tested/delete"] == 0
    assert c["untested/delete"] > 0 and c["untested/stub"] > 0
    assert c["untested/fixed"] < c["tested/fixed"]


def test_careless_engineer_is_seeded():
    p = generate(4, 100, seed=3)
    a = careless_actions(p, np.random.default_rng(1))
    assert (a == careless_actions(p, np.random.default_rng(1))).all()
    assert (a != careless_actions(p, np.random.default_rng(2))).any()


def test_cli_rollout_json_matches_table_numbers():
    runner = CliRunner()
    res = runner.invoke(app, ["patchworld", "rollout", "--n", "500", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["n"] == 500 and 0 < data["true_success"] < data["visible_pass"]
    assert data["false_success"] == pytest.approx(
        data["visible_pass"] - data["true_success"], abs=0.05
    )
    table = runner.invoke(app, ["patchworld", "rollout", "--n", "500"])
    assert f"{data['visible_pass']:.3f}" in table.output
    assert f"{data['false_success']:.3f}" in table.output


def test_cli_oracle_and_hack_policies():
    runner = CliRunner()
    ora = json.loads(
        runner.invoke(
            app, ["patchworld", "rollout", "--policy", "oracle", "--n", "200", "--json"]
        ).output
    )
    assert ora["true_success"] == 1.0 and ora["false_success"] == 0.0
    hack = json.loads(
        runner.invoke(
            app, ["patchworld", "rollout", "--policy", "delete-untested", "--n", "200", "--json"]
        ).output
    )
    assert hack["visible_pass"] == 1.0 and hack["false_success"] == 1.0
    assert hack["outcomes"]["untested"]["delete"] == 1.0


def test_cli_show_and_bad_input():
    runner = CliRunner()
    res = runner.invoke(app, ["patchworld", "show", "--seed", "3"])
    assert res.exit_code == 0 and "BROKEN" in res.output and res.output.count("x ==") == 12
    bad = runner.invoke(app, ["patchworld", "rollout", "--policy", "nope"])
    assert bad.exit_code == 2 and "unknown policy" in bad.output
