"""The hand-vectorized envs reproduce Gymnasium's CartPole-v1 and Acrobot-v1 step for step."""

import gymnasium as gym
import numpy as np
import pytest

from verigap.silentbug.substrates.envs import VecAcrobot, VecCartPole, make_vec_env


def _sync(env: gym.Env, vec) -> None:
    env.reset()
    env.unwrapped.state = vec.state[0].copy()


def _compare(env_id: str, vec, policy, steps: int) -> dict[str, int]:
    env = gym.make(env_id)
    vec.reset()
    _sync(env, vec)
    seen = {"terminated": 0, "truncated": 0}
    rng = np.random.default_rng(7)
    for _ in range(steps):
        a = policy(vec.state[0], rng)
        g_obs, g_rew, g_term, g_trunc, _ = env.step(a)
        out = vec.step(np.array([a]))
        np.testing.assert_array_equal(out.final_obs[0], g_obs)
        assert out.reward[0] == g_rew
        assert bool(out.terminated[0]) == g_term
        assert bool(out.truncated[0]) == g_trunc
        if g_term or g_trunc:
            seen["terminated"] += g_term
            seen["truncated"] += g_trunc
            assert len(out.episode_returns) == 1
            _sync(env, vec)
    return seen


def test_cartpole_matches_gymnasium_including_time_limit():
    def balance(s, rng):  # mostly a balancing controller, so some episodes reach 500 steps
        return int(rng.integers(2)) if rng.random() < 0.05 else int(s[2] + 0.5 * s[3] > 0)

    def noisy(s, rng):
        return int(rng.integers(2)) if rng.random() < 0.5 else int(s[2] + 0.5 * s[3] > 0)

    seen = _compare("CartPole-v1", VecCartPole(1, seed=0), balance, 2500)
    seen2 = _compare("CartPole-v1", VecCartPole(1, seed=1), noisy, 1500)
    assert seen["truncated"] >= 1 and seen2["terminated"] >= 1


def test_acrobot_matches_gymnasium_including_termination():
    def pump(s, rng):  # torque along the second joint's velocity pumps energy: reaches the goal
        return int(rng.integers(3)) if rng.random() < 0.2 else (2 if s[3] > 0 else 0)

    seen = _compare("Acrobot-v1", VecAcrobot(1, seed=0), pump, 1500)
    assert seen["terminated"] >= 1


def test_vectorized_envs_autoreset_and_report_final_obs():
    env = VecCartPole(3, seed=0)
    env.reset()
    for _ in range(200):
        out = env.step(np.zeros(3, dtype=np.int64))  # always push left: episodes end fast
        done = out.terminated | out.truncated
        if done.any():
            assert not np.array_equal(out.obs[done], out.final_obs[done])
            assert (env.elapsed[done] == 0).all()
            return
    pytest.fail("no episode ended")


def test_make_vec_env_names_known_ids():
    with pytest.raises(ValueError, match="CartPole-v1"):
        make_vec_env("Pong-v5", 2, 0)
