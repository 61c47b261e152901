"""A family registered in this test alone is served: create, reset, step, state, the ``/envs``
catalogue and the OpenEnv schema all come from its one registration; an unregistered family
is refused with the list of choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from verigap.errors import ConfigError
from verigap.server import (
    BackgroundServer,
    Client,
    ServerConfig,
    ServerError,
    SessionManager,
    families,
)
from verigap.server._envs import ServedEnv
from verigap.server._models import Action, Observation
from verigap.verdict import Verdict

TOKEN = "test-token"


class CountAction(Action):
    add: int


class CountObservation(Observation):
    total: int


@dataclass
class CounterServed(ServedEnv):
    """Add numbers until the total reaches the target; the reward is whether it hit it exactly
    (visible) and the truth is the same."""

    target: int = 3
    total: int = 0
    name: str = "counter"
    action_model: type[Action] = CountAction

    def reset(self, seed: int | None, options: dict[str, Any]) -> Observation:
        self._begin()
        self.total, self.task_id = 0, "count"
        return CountObservation(total=0)

    def step(self, action: Action, timeout_s: float | None = None) -> Observation:
        assert isinstance(action, CountAction)
        self.step_count += 1
        self.total += action.add
        if self.total < self.target:
            return CountObservation(total=self.total)
        self.done = True
        hit = self.total == self.target
        v = Verdict("count", {"build": True, "visible": hit}, float(hit), hit)
        return CountObservation(
            total=self.total, done=True, reward=float(hit), verdict=self._verdict_out([v])
        )


@pytest.fixture
def counter():
    spec = families.register(
        families.EnvSpec(
            "counter",
            action=CountAction,
            observation=CountObservation,
            make=lambda ctx, cfg: CounterServed(**ctx.common, target=int(cfg.get("target", 3))),
            description="count to a target",
            catalogue=lambda settings: {"targets": "any int"},
        )
    )
    yield spec
    families.unregister("counter")


@pytest.fixture
def server(tmp_path, counter):
    config = ServerConfig(root=tmp_path / "srv", token=TOKEN, max_sessions=2, backend="unsafe")
    srv = BackgroundServer(config, SessionManager(config))
    srv.start()
    yield srv
    srv.stop()


def test_a_family_registered_once_is_served(server) -> None:
    with Client(server.url, token=TOKEN) as c:
        envs = c.envs()
        assert list(envs)[:3] == ["patchworld", "repo", "silentbug"]
        assert envs["counter"]["targets"] == "any int"
        assert "add" in envs["counter"]["action"]["properties"]
        s = c.session("counter", target=2)
        assert s.reset()["observation"]["total"] == 0
        assert s.step({"add": 1})["done"] is False
        last = s.step({"add": 1})
        assert last["done"] and last["reward"] == 1.0 and last["observation"]["total"] == 2
        assert s.state()["step_count"] == 2
        with pytest.raises(ServerError, match="add"):  # the family's own action type
            s.step({"add": "x"})
        schema = c.request("GET", "/envs/counter/schema")
        assert "total" in schema["observation"]["properties"]
        meta = c.request("GET", "/envs/counter/metadata")
        assert meta["description"] == "count to a target"


def test_unregistered_family_is_refused_with_the_choices(server) -> None:
    with Client(server.url, token=TOKEN) as c:
        with pytest.raises(ServerError, match="unknown env 'nope'.*counter"):
            c.session("nope").reset()
    with pytest.raises(ConfigError, match="already registered"):
        families.register(
            families.EnvSpec(
                "counter",
                make=lambda c, f: None,  # type: ignore
                action=CountAction,
                observation=CountObservation,
            )
        )
    families.unregister("counter")
    assert "counter" not in families.names()
    with pytest.raises(ConfigError, match="unknown env 'counter'"):
        families.spec("counter")
