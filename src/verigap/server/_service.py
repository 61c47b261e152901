"""The one set of handlers behind every protocol the server speaks: the REST API
(``/sessions/...``), OpenEnv's WebSocket (``/ws``) and its stateless HTTP routes.

Every call names its caller (the client whose credential came with the request); a session
answers only its owner. The environment's work — reset, step, grading — runs on the
session's own worker thread, so the event loop that answers ``/health``, ``state`` and every
other session never waits for it. ``state`` reads the session's counters without waiting for a
step in flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from verigap.errors import VerigapError
from verigap.server._envs import parse_options
from verigap.server._models import ResetRequest, State, StepRequest, StepResult
from verigap.server._sessions import LOCAL, Session, SessionManager, SessionNotFound, shut

T = TypeVar("T")


class ServerFault(VerigapError):
    """An unexpected failure inside an environment; the server and the session stay up."""


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the client name its credential maps to, and its truth right."""

    name: str = LOCAL
    truth: bool = False


class EnvService:
    """Sessions' lifecycle and reset / step / state / close, shared by every protocol."""

    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions

    async def create(self, caller: Caller, env: str, config: dict[str, Any]) -> Session:
        return await asyncio.to_thread(self.sessions.create, env, config, caller.name)

    async def _on_worker(self, s: Session, fn: Callable[[], T]) -> T:
        """Run ``fn`` on ``s``'s worker; unexpected errors become a :class:`ServerFault`."""
        s.busy += 1
        try:
            try:
                future = asyncio.get_running_loop().run_in_executor(s.worker, fn)
            except RuntimeError:  # the worker was shut down: the session closed meanwhile
                raise SessionNotFound(f"session {s.id!r} was closed; create a new one") from None
            return await future
        except VerigapError:
            raise
        except Exception as e:
            raise ServerFault(
                f"the environment failed ({type(e).__name__}: {e}); the session "
                "is still open: reset it, or close it"
            ) from e
        finally:
            s.busy -= 1
            s.last_used = self.sessions.clock()

    async def reset(self, caller: Caller, sid: str, body: ResetRequest) -> StepResult:
        s = self.sessions.get(sid, caller.name)

        def run() -> StepResult:
            obs = s.env.reset(body.seed, body.options)
            s.episode_id = body.episode_id or uuid.uuid4().hex
            s.last_request = None
            return StepResult(observation=obs.model_dump(), reward=obs.reward, done=obs.done)

        return await self._on_worker(s, run)

    async def step(self, caller: Caller, sid: str, body: StepRequest) -> StepResult:
        s = self.sessions.get(sid, caller.name)
        action = parse_options(s.env.action_model, body.action, f"{s.env.name} action")

        def run() -> StepResult:
            if (
                body.request_id is not None
                and s.last_request is not None
                and s.last_request[0] == body.request_id
            ):
                return s.last_request[1]  # a retry: the step already happened
            s.env.check_can_step()
            obs = s.env.step(action, body.timeout_s)
            if obs.done:
                self.sessions.record(s)
            out = StepResult(observation=obs.model_dump(), reward=obs.reward, done=obs.done)
            if body.request_id is not None:
                s.last_request = (body.request_id, out)
            return out

        return await self._on_worker(s, run)

    def state(self, caller: Caller, sid: str) -> State:
        s = self.sessions.get(sid, caller.name)
        e = s.env
        left = max(0.0, e.deadline - time.monotonic()) if e.started and not e.done else None
        return State(
            episode_id=s.episode_id,
            step_count=e.step_count,
            env=e.name,  # type: ignore[arg-type]
            session_id=s.id,
            done=e.done,
            max_steps=e.limits.max_steps,
            wall_s_left=left,
            task_id=e.task_id,
        )

    async def close(self, caller: Caller, sid: str) -> None:
        s = self.sessions.detach(sid, caller.name)
        await asyncio.to_thread(shut, s)

    async def close_owned(self, caller: Caller) -> list[str]:
        ids = [s.id for s in self.sessions.owned(caller.name)]
        for sid in ids:
            try:
                await self.close(caller, sid)
            except SessionNotFound:  # closed meanwhile
                pass
        return ids

    def owned(self, caller: Caller) -> list[dict[str, Any]]:
        return [s.summary() for s in self.sessions.owned(caller.name)]

    def truth(self, caller: Caller, episode_id: str) -> dict[str, Any]:
        return self.sessions.truth(episode_id, caller.name, caller.truth)

    async def stateless_reset(
        self, caller: Caller, env: str, config: dict[str, Any], body: ResetRequest
    ) -> StepResult:
        """OpenEnv's HTTP ``/reset``: a fresh environment, reset once and closed."""
        s = await self.create(caller, env, config)
        try:
            return await self.reset(caller, s.id, body)
        finally:
            await self.close(caller, s.id)


def reset_body(data: dict[str, Any]) -> ResetRequest:
    """A reset request from OpenEnv-style keyword arguments (seed, episode_id, options)."""
    return parse_options(ResetRequest, data, "reset")
