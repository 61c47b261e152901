"""The HTTP API: sessions, and reset / step / state / close on each (OpenEnv-style JSON).

    POST   /sessions                {"env": "repo", "config": {...}}  -> SessionInfo
    POST   /sessions/{id}/reset     {"seed": 0, "options": {...}}     -> StepResult
    POST   /sessions/{id}/step      {"action": {...}}                 -> StepResult
    GET    /sessions/{id}/state                                       -> State
    DELETE /sessions/{id}
    GET    /envs, GET /health (no token needed for /health)

Every bad request is a 4xx whose JSON ``detail`` says what was wrong and how to fix it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError

from verigap.errors import ConfigError, SandboxUnavailable, VerigapError
from verigap.server._envs import EpisodeStateError, parse_options
from verigap.server._models import CreateSession as CreateBody
from verigap.server._models import (
    PatchWorldAction,
    ResetRequest,
    SessionInfo,
    State,
    StepRequest,
    StepResult,
    ToolAction,
)
from verigap.server._sessions import (
    ServerConfig,
    SessionManager,
    SessionNotFound,
    TooManySessions,
)

_STATUS: list[tuple[type[Exception], int]] = [
    (SessionNotFound, 404), (TooManySessions, 429), (EpisodeStateError, 409),
    (SandboxUnavailable, 503), (ConfigError, 422), (VerigapError, 400),
]


class Unauthorized(VerigapError):
    pass


def _message(e: ValidationError | RequestValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}"
                     for err in e.errors())


def create_app(config: ServerConfig, manager: SessionManager | None = None) -> FastAPI:
    """The app for one server process; ``manager`` may be injected (tests pass a fake clock)."""
    sessions = manager if manager is not None else SessionManager(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async def reaper() -> None:
            while True:
                await asyncio.sleep(max(1.0, config.idle_s / 4))
                await asyncio.to_thread(sessions.reap)

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.to_thread(sessions.close_all)

    app = FastAPI(title="verigap", lifespan=lifespan,
                  description="verigap environments over HTTP (OpenEnv-style reset/step/state)")
    app.state.sessions = sessions
    bearer = HTTPBearer(auto_error=False)

    def auth(cred: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if config.token is None:
            return
        if cred is None:
            raise Unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
        if not _equal(cred.credentials, config.token):
            raise Unauthorized("wrong bearer token")

    @app.exception_handler(VerigapError)
    async def verigap_error(request: Request, exc: VerigapError) -> JSONResponse:
        if isinstance(exc, Unauthorized):
            return JSONResponse({"detail": str(exc)}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        code = next(c for t, c in _STATUS if isinstance(exc, t))
        return JSONResponse({"detail": str(exc)}, status_code=code)

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": f"bad request body: {_message(exc)}"}, status_code=422)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "healthy", "sessions": len(sessions)}

    @app.get("/envs", dependencies=[Depends(auth)])
    def envs() -> dict[str, Any]:
        return {"patchworld": {"action": PatchWorldAction.model_json_schema()},
                "repo": {"action": ToolAction.model_json_schema(), "tasks": sorted(config.tasks)},
                "silentbug": {"action": ToolAction.model_json_schema()}}

    @app.post("/sessions", dependencies=[Depends(auth)])
    def create(body: CreateBody) -> SessionInfo:
        s = sessions.create(body.env, body.config)
        return SessionInfo(session_id=s.id, env=body.env,
                           action_schema=s.env.action_model.model_json_schema())

    @app.post("/sessions/{sid}/reset", dependencies=[Depends(auth)])
    def reset(sid: str, body: ResetRequest | None = None) -> StepResult:
        body = body or ResetRequest()
        s = sessions.get(sid)
        with s.lock:
            obs = s.env.reset(body.seed, body.options)
            s.episode_id = body.episode_id or uuid.uuid4().hex
            s.last_used = sessions.clock()
        return StepResult(observation=obs.model_dump(), reward=obs.reward, done=obs.done)

    @app.post("/sessions/{sid}/step", dependencies=[Depends(auth)])
    def step(sid: str, body: StepRequest) -> StepResult:
        s = sessions.get(sid)
        action = parse_options(s.env.action_model, body.action, f"{s.env.name} action")
        with s.lock:
            s.env.check_can_step()
            obs = s.env.step(action)
            if obs.done:
                sessions.record(s)
            s.last_used = sessions.clock()
        return StepResult(observation=obs.model_dump(), reward=obs.reward, done=obs.done)

    @app.get("/sessions/{sid}/state", dependencies=[Depends(auth)])
    def state(sid: str) -> State:
        s = sessions.get(sid)
        with s.lock:
            e = s.env
            left = max(0.0, e.deadline - time.monotonic()) if e.started and not e.done else None
            return State(episode_id=s.episode_id, step_count=e.step_count, env=e.name,
                         session_id=s.id, done=e.done, max_steps=e.limits.max_steps,
                         wall_s_left=left, task_id=e.task_id)

    @app.delete("/sessions/{sid}", dependencies=[Depends(auth)])
    def close(sid: str) -> dict[str, str]:
        sessions.close(sid)
        return {"closed": sid}

    return app


def _equal(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())

