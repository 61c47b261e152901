"""A Python client for ``verigap serve``, and Gymnasium wrappers over it.

>>> client = Client("http://127.0.0.1:8000", token="...")
>>> with client.session("repo", grader="v2") as s:
...     first = s.reset(seed=0, options={"task": "textkit-k4-000"})
...     out = s.step({"tool": "run", "arguments": {"command": "python -m pytest -q"}})

Server errors arrive as :class:`ServerError` carrying the HTTP status and the server's message;
a server that cannot be reached is :class:`ServerUnreachable`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import httpx
import numpy as np
from gymnasium import spaces

from verigap.errors import VerigapError


class ServerError(VerigapError):
    """The server refused a request (4xx/5xx); ``status`` and the server's ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"server answered {status}: {detail}")
        self.status, self.detail = status, detail


class ServerUnreachable(VerigapError):
    """No answer: the server is down, restarting, or the request timed out."""


class Client:
    """Talks to one server; thread-safe enough for one session per thread (httpx pools)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def request(self, method: str, path: str, json: Any = None) -> Any:
        try:
            r = self._http.request(method, path, json=json)
        except httpx.TimeoutException as e:
            raise ServerUnreachable(
                f"{method} {self.base_url}{path} timed out ({e}); the step "
                "may still finish on the server: check GET .../state "
                "before retrying"
            ) from None
        except httpx.TransportError as e:
            raise ServerUnreachable(
                f"cannot reach {self.base_url} ({e}); is `verigap serve` running there?"
            ) from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ServerError(r.status_code, str(detail))
        return r.json()

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def envs(self) -> dict[str, Any]:
        return self.request("GET", "/envs")

    def session(self, env: str, **config: Any) -> RemoteSession:
        info = self.request("POST", "/sessions", {"env": env, "config": config})
        return RemoteSession(self, info["session_id"], env)

    def sessions(self) -> list[dict[str, Any]]:
        """This client's open sessions (another client's are never listed)."""
        return self.request("GET", "/sessions")["sessions"]

    def close_sessions(self) -> list[str]:
        """Close every session of this client (a crashed script's leftovers included)."""
        return self.request("DELETE", "/sessions")["closed"]

    def truth(self, episode_id: str) -> dict[str, Any]:
        """The full verdicts of one of this client's finished episodes (needs the right)."""
        return self.request("GET", f"/episodes/{episode_id}/truth")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteSession:
    """One server-side session: reset / step / state / close, returning the JSON as dicts."""

    def __init__(self, client: Client, session_id: str, env: str) -> None:
        self.client, self.id, self.env = client, session_id, env

    def reset(
        self,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        episode_id: str | None = None,
    ) -> dict[str, Any]:
        body = {"seed": seed, "options": options or {}, "episode_id": episode_id}
        return self.client.request("POST", f"/sessions/{self.id}/reset", body)

    def step(
        self, action: dict[str, Any], timeout_s: float | None = None, request_id: str | None = None
    ) -> dict[str, Any]:
        """One step; ``request_id`` makes a retry safe (the server answers the first result)."""
        body: dict[str, Any] = {"action": action}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        if request_id is not None:
            body["request_id"] = request_id
        return self.client.request("POST", f"/sessions/{self.id}/step", body)

    def state(self) -> dict[str, Any]:
        return self.client.request("GET", f"/sessions/{self.id}/state")

    def close(self) -> None:
        self.client.request("DELETE", f"/sessions/{self.id}")

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except ServerError as e:
            if e.status != 404:  # already gone (expired, restarted) is fine on exit
                raise


def patchworld_arrays(observation: dict[str, Any]) -> dict[str, np.ndarray]:
    """A served Patch World observation as (B, 12) int arrays and a (B,) target."""
    return {
        k: np.asarray(observation[k], dtype=np.int64)
        for k in ("values", "broken", "tested", "strict", "written", "target")
    }


class RemotePatchWorldEnv(gym.Env):
    """Patch World through the HTTP API, with :class:`verigap.patchworld.PatchWorldEnv`'s
    spaces and signatures (one program per episode). It draws programs the way the local env
    does (a pool of 256 from a seed taken from ``np_random``, played in order), so the same
    seed gives the same program here and in-process."""

    metadata = {"render_modes": []}

    def __init__(
        self, client: Client, k: int = 4, reward: str = "visible", stream: str = "train"
    ) -> None:
        from verigap.patchworld.env import PatchWorldEnv

        local = PatchWorldEnv(k=k, stream=stream)  # validates k and stream; lends its spaces
        self.observation_space, self.action_space = local.observation_space, local.action_space
        self._pool_size = local._POOL
        self._pool_seed: int | None = None
        self._next = 0
        self.session = client.session("patchworld", k=k, reward=reward, stream=stream)
        self._closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._pool_seed = None
        options = dict(options or {})
        if not options:  # the local env's draw: the next program of the seeded pool
            if self._pool_seed is None or self._next >= self._pool_size:
                self._pool_seed, self._next = int(self.np_random.integers(2**31)), 0
            options = {
                "pool_seed": self._pool_seed,
                "pool_size": self._pool_size,
                "indices": [self._next],
            }
            self._next += 1
        out = self.session.reset(seed=int(self.np_random.integers(2**31)), options=options)
        return self._obs(out["observation"]), {"k": out["observation"]["metadata"]["k"]}

    def _obs(self, o: dict[str, Any]) -> dict[str, Any]:
        a = patchworld_arrays(o)
        return {k: (v[0] if k != "target" else int(v[0])) for k, v in a.items()}

    def step(self, action: int):
        out = self.session.step({"actions": [int(action)]})
        o = out["observation"]
        info: dict[str, Any] = {}
        if out["done"]:
            info["verdict"] = o["verdict"][0]
        reward = float(o["rewards"][0]) if o["rewards"] is not None else 0.0
        return self._obs(o), reward, bool(out["done"]), False, info

    def close(self) -> None:
        if not self._closed:  # Gymnasium allows close() twice
            self._closed = True
            self.session.close()


class AnyText(spaces.Space[str]):
    """Any string up to ``max_length`` characters: a tool's output (Gymnasium's ``Text`` only
    holds a fixed alphabet, and tool output may hold any character)."""

    def __init__(self, max_length: int = 1_000_000, seed: int | None = None) -> None:
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(0, 32))
        return "".join(chr(int(c)) for c in self.np_random.integers(32, 127, n))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length


class ToolCallSpace(spaces.Space[dict]):
    """Tool calls ``{"tool": NAME, "arguments": {...}}`` for the session's tools. ``sample``
    draws one of the tools that need no arguments, called with none (a valid, cheap call)."""

    def __init__(self, tools: list[dict[str, Any]], seed: int | None = None) -> None:
        self.tools = sorted(t["name"] for t in tools)
        self.bare = sorted(
            t["name"] for t in tools if not (t.get("parameters") or {}).get("required")
        )
        super().__init__(dtype=object, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        names = self.bare or self.tools
        return {"tool": names[int(self.np_random.integers(len(names)))], "arguments": {}}

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, dict)
            and x.get("tool") in self.tools
            and isinstance(x.get("arguments", {}), dict)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace) and other.tools == self.tools


class RemoteToolEnv(gym.Env):
    """A repo or silent-bug episode through the HTTP API: actions are ``{"tool", "arguments"}``
    dicts, observations the tool's text. ``truncated`` is set when a budget ended the episode.
    ``options`` are the reset options used when ``reset`` gets none (e.g. ``{"task": ID}``);
    the action space is learnt from the server's tool list at the first reset (made here when
    ``options`` suffice to start one)."""

    metadata = {"render_modes": []}
    observation_space = AnyText()

    def __init__(
        self,
        client: Client,
        env: str = "repo",
        options: dict[str, Any] | None = None,
        **config: Any,
    ) -> None:
        self.session = client.session(env, **config)
        self._options = dict(options or {})
        self._closed = False
        if self._options:  # enough to start an episode: learn the tools now
            self.reset(seed=0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        o = self.session.reset(seed=seed, options={**self._options, **(options or {})})[
            "observation"
        ]
        if not hasattr(self, "action_space"):
            self.action_space = ToolCallSpace(o["tools"])
        return o["text"], {"tools": o["tools"], "system": o["metadata"].get("system")}

    def step(self, action: dict[str, Any]):
        out = self.session.step(action)
        o = out["observation"]
        info: dict[str, Any] = {"is_error": o["is_error"]}
        ended = o["metadata"].get("ended")
        if out["done"]:
            info["verdict"], info["ended"] = o["verdict"], ended
        truncated = bool(out["done"]) and ended not in ("submitted", "reported impossible")
        return (
            o["text"],
            float(out["reward"] or 0.0),
            bool(out["done"]) and not truncated,
            truncated,
            info,
        )

    def close(self) -> None:
        if not self._closed:  # Gymnasium allows close() twice
            self._closed = True
            self.session.close()
