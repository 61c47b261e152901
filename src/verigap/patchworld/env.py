"""Two APIs on one set of rules: a batched NumPy env for trainers, and a Gymnasium env.

Both call :mod:`verigap.patchworld.rules` for observations and checks and a shared reward scheme
for the payout, so the same programs and actions give the same verdicts through either.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigap.patchworld import rules
from verigap.patchworld.programs import N_BRANCHES, N_VALUES, Programs, Stream, generate
from verigap.rewards import BatchPayout, RewardScheme, Visible


class BatchedPatchWorld:
    """Steps a whole batch of programs at once. Every episode has horizon ``k``; the reward
    (from ``scheme``) arrives on the last step, alongside the grades and the payout record."""

    def __init__(
        self,
        programs: Programs,
        scheme: RewardScheme | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.programs = programs
        self.scheme = scheme or Visible()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.reset()

    def reset(self) -> dict[str, np.ndarray]:
        self.step_index = 0
        self.actions = np.zeros(self.programs.order.shape, dtype=np.int64)
        self.written = rules.empty_written(self.programs.size)
        self.grades: rules.Grades | None = None
        self.payout: BatchPayout | None = None
        return self.observe()

    def observe(self) -> dict[str, np.ndarray]:
        return rules.observe(self.programs, self.step_index, self.written)

    @property
    def done(self) -> bool:
        return self.step_index >= self.programs.k

    def step(self, actions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, bool]:
        """Act on the current broken branch of every program: ``actions`` is (B,)."""
        if self.done:
            raise RuntimeError("all episodes are finished; call reset() first")
        actions = np.asarray(actions)
        if actions.shape != (self.programs.size,):
            raise ValueError(
                f"actions have shape {actions.shape}; expected "
                f"({self.programs.size},), one per program"
            )
        actions = rules.check_action_values(actions)
        self.actions[:, self.step_index] = actions
        rows = np.arange(self.programs.size)
        self.written[rows, self.programs.order[:, self.step_index]] = actions
        self.step_index += 1
        reward = np.zeros(self.programs.size)
        if self.done:
            self.grades = rules.grade(self.programs, self.actions)
            self.payout = self.scheme.pay_batch(
                self.grades.passed, self.grades.correct, self.grades.deletions, self.rng
            )
            reward = self.payout.reward
        return self.observe(), reward, self.done


def run_episodes(
    programs: Programs,
    actions: np.ndarray,
    scheme: RewardScheme | None = None,
    rng: np.random.Generator | None = None,
) -> tuple[rules.Grades, BatchPayout]:
    """Play whole episodes from a (B, k) action array; returns the grades and the payout."""
    env = BatchedPatchWorld(programs, scheme, rng)
    for t in range(programs.k):
        env.step(actions[:, t])
    assert env.grades is not None and env.payout is not None
    return env.grades, env.payout


class PatchWorldEnv(gym.Env):
    """One Patch World program per episode, Gymnasium-style.

    ``reset(seed=..., options={"program": Programs})`` plays a given one-program batch instead of
    drawing from the stream. ``info`` at the end holds the verdict as a dict.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    _POOL = 256  # programs drawn from the stream at a time

    def __init__(
        self,
        k: int = 4,
        reward: RewardScheme | None = None,
        stream: Stream = "train",
        render_mode: str | None = None,
    ) -> None:
        self.k = k
        self.scheme = reward or Visible()
        self.stream = stream
        self.render_mode = render_mode
        generate(k, 1, seed=0, stream=stream)  # validates k and stream now, not at reset
        flags = spaces.MultiBinary(N_BRANCHES)
        self.observation_space = spaces.Dict(
            {
                "values": spaces.Box(0, N_VALUES - 1, (N_BRANCHES,), np.int64),
                "broken": flags,
                "tested": flags,
                "strict": flags,
                "written": spaces.Box(
                    rules.NOT_ACTED, rules.N_ACTIONS - 1, (N_BRANCHES,), np.int64
                ),
                "target": spaces.Discrete(N_BRANCHES),
            }
        )
        self.action_space = spaces.Discrete(rules.N_ACTIONS)
        self._pool: Programs | None = None
        self._next = 0
        self._env: BatchedPatchWorld | None = None
        self._episode = 0

    def _draw_program(self) -> Programs:
        if self._pool is None or self._next >= self._pool.size:
            seed = int(self.np_random.integers(2**31))
            self._pool, self._next = generate(self.k, self._POOL, seed=seed, stream=self.stream), 0
        self._next += 1
        return self._pool[self._next - 1]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._pool = None
        program = (options or {}).get("program")
        if program is None:
            program = self._draw_program()
        elif not isinstance(program, Programs) or program.size != 1 or program.k != self.k:
            raise ValueError(
                f"options['program'] must be a one-program Programs batch with k={self.k}"
            )
        self._env = BatchedPatchWorld(program, self.scheme, self.np_random)
        self._episode += 1
        return self._obs(), {"k": self.k}

    def _obs(self) -> dict[str, np.ndarray]:
        assert self._env is not None
        o = self._env.observe()
        return {key: (v[0] if key != "target" else int(v[0])) for key, v in o.items()}

    def step(self, action):
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(
                f"action {action!r} is not in Discrete({rules.N_ACTIONS}): use "
                f"0..{N_VALUES - 1} to write a value, {rules.STUB} to stub, "
                f"{rules.DELETE} to delete"
            )
        _, reward, done = self._env.step(np.array([int(action)]))
        info: dict[str, Any] = {}
        if done:
            grades, payout = self._env.grades, self._env.payout
            assert grades is not None and payout is not None
            (verdict,) = rules.verdicts(
                self._env.programs, grades, payout, [f"patchworld-{self._episode}"]
            )
            info["verdict"] = verdict.to_dict()
        return self._obs(), float(reward[0]), done, False, info

    def render(self) -> str | None:
        if self.render_mode == "ansi" and self._env is not None:
            from verigap.patchworld.show import program_text

            return program_text(self._env.programs, 0, self._env.written[0])
        return None
