"""The HTTP app: verigap's session API and OpenEnv's protocol, over one set of handlers.

Session API (a session belongs to the client whose credential created it)::

    POST   /sessions                {"env": "repo", "config": {...}}  -> SessionInfo
    GET    /sessions                                                  -> your open sessions
    DELETE /sessions                                                  -> close all of yours
    POST   /sessions/{id}/reset     {"seed": 0, "options": {...}}     -> StepResult
    POST   /sessions/{id}/step      {"action": {...}, "timeout_s": .., "request_id": ..}
    GET    /sessions/{id}/state                                       -> State
    DELETE /sessions/{id}
    GET    /episodes/{episode_id}/truth   full verdicts, for a client allowed the truth
    GET    /envs, GET /health (no token needed for /health)

OpenEnv (``openenv-core``'s clients): ``/ws`` (one session per WebSocket, closed with it),
stateless ``POST /reset`` and ``/step``, ``GET /state``, ``/schema``, ``/metadata``,
``/health``, at the root (the family chosen by the reset's ``env`` argument, default
patchworld) and under ``/envs/{env}/`` for each family; on a tool episode's socket the MCP step
actions ``list_tools`` and ``call_tool`` work too. A WebSocket client sends its token as the
password of its URL (``http://name:TOKEN@host:port``: HTTP Basic).

Every error is JSON with a ``detail`` (a WebSocket's: ``{"type": "error", "data": {...}}``)
that says what was wrong and how to fix it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import json
from typing import Any

from fastapi import Depends, FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import ValidationError

from verigap.errors import ConfigError, SandboxUnavailable, VerigapError
from verigap.server import families
from verigap.server._envs import EpisodeStateError, PayloadTooLarge
from verigap.server._models import CreateSession as CreateBody
from verigap.server._models import (
    ResetRequest,
    SessionInfo,
    State,
    StepRequest,
    StepResult,
)
from verigap.server._service import Caller, EnvService, ServerFault, reset_body
from verigap.server._sessions import (
    LOCAL,
    ServerConfig,
    Session,
    SessionManager,
    SessionNotFound,
    TooManySessions,
    TruthNotAllowed,
)

DEFAULT_ENV = "patchworld"
"""The family an OpenEnv client at the root gets when its reset names none."""

_STATUS: list[tuple[type[Exception], int]] = [
    (SessionNotFound, 404),
    (TooManySessions, 429),
    (EpisodeStateError, 409),
    (PayloadTooLarge, 413),
    (TruthNotAllowed, 403),
    (SandboxUnavailable, 503),
    (ServerFault, 500),
    (ConfigError, 422),
    (VerigapError, 400),
]
_WS_CODE = {
    404: "SESSION_ERROR",
    429: "CAPACITY_REACHED",
    422: "VALIDATION_ERROR",
    401: "UNAUTHORIZED",
}


class Unauthorized(VerigapError):
    pass


def status_of(e: VerigapError) -> int:
    if isinstance(e, Unauthorized):
        return 401
    return next(c for t, c in _STATUS if isinstance(e, t))


def _message(e: ValidationError | RequestValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}" for err in e.errors()
    )


def _error(detail: str, status: int) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer, Basic realm="verigap"'} if status == 401 else None
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class _Guard:
    """Outermost layer: caps request bodies at the sandbox's file limit (plus an envelope) and
    answers any unexpected exception with JSON, so no bad request ever gets a bare 500 or a
    dropped connection."""

    def __init__(self, app: Any, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = PayloadTooLarge(
            f"request body over {self.max_body / 2**20:.0f} MiB, the "
            "server's cap (--max-file-mb plus a 1 MiB envelope); send "
            "large files in parts or generate them with a command"
        )
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _error(str(too_big), 413)(scope, receive, send)
            return
        seen, started = 0, False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise too_big
            return message

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except Exception as e:
            if started:
                raise
            if isinstance(e, VerigapError):
                await _error(str(e), status_of(e))(scope, receive, send)
                return
            await _error(f"internal error ({type(e).__name__}: {e}); the server is still up", 500)(
                scope, receive, send
            )


def create_app(config: ServerConfig, manager: SessionManager | None = None) -> FastAPI:
    """The app for one server process; ``manager`` may be injected (tests pass a fake clock)."""
    sessions = manager if manager is not None else SessionManager(config)
    service = EnvService(sessions)
    creds = config.credentials()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async def reaper() -> None:
            while True:
                await asyncio.sleep(max(1.0, min(config.idle_s, 60.0) / 4))
                await asyncio.to_thread(sessions.reap)

        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.to_thread(sessions.close_all)

    guarded = bool(creds)
    app = FastAPI(
        title="verigap",
        lifespan=lifespan,
        docs_url=None if guarded else "/docs",
        redoc_url=None,
        openapi_url=None if guarded else "/openapi.json",
        description="verigap environments over HTTP and OpenEnv's WebSocket",
    )
    app.state.sessions = sessions
    app.state.service = service
    app.add_middleware(_Guard, max_body=(config.max_file_mb + 1) * 2**20)

    def identify(authorization: str | None) -> Caller:
        """The caller a request's Authorization header names (Bearer TOKEN or Basic)."""
        if not creds:
            return Caller(LOCAL, config.reveal_truth)
        if not authorization:
            raise Unauthorized(
                "missing bearer token: send 'Authorization: Bearer <token>' "
                "(an OpenEnv client: put the token in the URL, "
                "http://NAME:TOKEN@host:port)"
            )
        scheme, _, value = authorization.partition(" ")
        token = value.strip()
        if scheme.lower() == "basic":
            try:
                token = base64.b64decode(token).decode().partition(":")[2]
            except ValueError:
                raise Unauthorized("malformed Basic credentials") from None
        elif scheme.lower() != "bearer":
            raise Unauthorized(f"unsupported Authorization scheme {scheme!r}: use Bearer")
        for known, (name, truth) in creds.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                return Caller(name, truth)
        raise Unauthorized("wrong bearer token")

    def auth(request: Request) -> Caller:
        return identify(request.headers.get("authorization"))

    @app.exception_handler(VerigapError)
    async def verigap_error(request: Request, exc: VerigapError) -> JSONResponse:
        return _error(str(exc), status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(f"bad request body: {_message(exc)}", 422)

    # ---- health, docs, catalogue ------------------------------------------------------------

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "sessions": len(sessions)}

    if guarded:

        @app.get("/openapi.json", include_in_schema=False)
        async def openapi(caller: Caller = Depends(auth)) -> JSONResponse:
            return JSONResponse(app.openapi())

        @app.get("/docs", include_in_schema=False)
        async def docs(caller: Caller = Depends(auth)) -> HTMLResponse:
            return get_swagger_ui_html(openapi_url="/openapi.json", title="verigap")

    @app.get("/envs")
    async def envs(caller: Caller = Depends(auth)) -> dict[str, Any]:
        return {
            name: {"action": sp.action.model_json_schema(), **sp.catalogue(config)}
            for name in families.names()
            for sp in [families.spec(name)]
        }

    # ---- the session API --------------------------------------------------------------------

    @app.post("/sessions")
    async def create(body: CreateBody, caller: Caller = Depends(auth)) -> SessionInfo:
        s = await service.create(caller, body.env, body.config)
        return SessionInfo(
            session_id=s.id,
            env=body.env,
            owner=s.owner,
            action_schema=s.env.action_model.model_json_schema(),
        )

    @app.get("/sessions")
    async def list_sessions(caller: Caller = Depends(auth)) -> dict[str, Any]:
        return {"client": caller.name, "sessions": service.owned(caller)}

    @app.delete("/sessions")
    async def close_mine(caller: Caller = Depends(auth)) -> dict[str, Any]:
        return {"closed": await service.close_owned(caller)}

    @app.post("/sessions/{sid}/reset")
    async def reset(
        sid: str, body: ResetRequest | None = None, caller: Caller = Depends(auth)
    ) -> StepResult:
        return await service.reset(caller, sid, body or ResetRequest())

    @app.post("/sessions/{sid}/step")
    async def step(sid: str, body: StepRequest, caller: Caller = Depends(auth)) -> StepResult:
        return await service.step(caller, sid, body)

    @app.get("/sessions/{sid}/state")
    async def state(sid: str, caller: Caller = Depends(auth)) -> State:
        return service.state(caller, sid)

    @app.delete("/sessions/{sid}")
    async def close(sid: str, caller: Caller = Depends(auth)) -> dict[str, str]:
        await service.close(caller, sid)
        return {"closed": sid}

    @app.get("/episodes/{episode_id}/truth")
    async def truth(episode_id: str, caller: Caller = Depends(auth)) -> dict[str, Any]:
        return service.truth(caller, episode_id)

    # ---- OpenEnv ----------------------------------------------------------------------------

    def family(env: str | None) -> str:
        return families.known(env or DEFAULT_ENV)

    async def openenv_reset(request: Request, env: str | None, caller: Caller) -> StepResult:
        raw = await request.body()
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            raise ConfigError(f"bad request body: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise ConfigError("bad request body: send a JSON object")
        name = family(env or data.pop("env", None))
        config_ = data.pop("config", None) or {}
        return await service.stateless_reset(caller, name, config_, reset_body(data))

    def openenv_step() -> None:
        raise EpisodeStateError(
            "HTTP /step is stateless in OpenEnv and a verigap episode needs its reset: hold a "
            "session over the WebSocket (/ws, what openenv-core's clients do) or use "
            "POST /sessions and /sessions/{id}/step"
        )

    def metadata(env: str) -> dict[str, Any]:
        what = families.spec(env).description
        from verigap import __version__

        return {
            "name": f"verigap/{env}",
            "description": what,
            "version": __version__,
            "readme_content": None,
            "author": "verigap",
            "documentation_url": None,
        }

    def schema(env: str) -> dict[str, Any]:
        sp = families.spec(env)
        return {
            "action": sp.action.model_json_schema(),
            "observation": sp.observation.model_json_schema(),
            "state": State.model_json_schema(),
        }

    blank_state = {"episode_id": None, "step_count": 0}

    for prefix in ("", "/envs/{env}"):
        app.add_api_route(
            f"{prefix}/schema",
            lambda env=None, caller=Depends(auth): schema(family(env)),
            methods=["GET"],
            tags=["OpenEnv"],
        )
        app.add_api_route(
            f"{prefix}/metadata",
            lambda env=None, caller=Depends(auth): metadata(family(env)),
            methods=["GET"],
            tags=["OpenEnv"],
        )
        app.add_api_route(
            f"{prefix}/state",
            lambda env=None, caller=Depends(auth): {**blank_state, "env": family(env)},
            methods=["GET"],
            tags=["OpenEnv"],
        )
        app.add_api_route(
            f"{prefix}/step",
            lambda env=None, caller=Depends(auth): openenv_step(),
            methods=["POST"],
            tags=["OpenEnv"],
        )
    app.add_api_route("/envs/{env}/health", health, methods=["GET"], tags=["OpenEnv"])

    @app.post("/reset", tags=["OpenEnv"])
    async def openenv_reset_root(request: Request, caller: Caller = Depends(auth)) -> StepResult:
        return await openenv_reset(request, None, caller)

    @app.post("/envs/{env}/reset", tags=["OpenEnv"])
    async def openenv_reset_env(
        env: str, request: Request, caller: Caller = Depends(auth)
    ) -> StepResult:
        return await openenv_reset(request, family(env), caller)

    @app.websocket("/ws")
    async def ws_root(ws: WebSocket) -> None:
        await _websocket(ws, None)

    @app.websocket("/envs/{env}/ws")
    async def ws_env(ws: WebSocket, env: str) -> None:
        await _websocket(ws, env)

    async def _step(session: Session, caller: Caller, data: dict[str, Any]) -> dict[str, Any]:
        """One WebSocket step: a family's action, or OpenEnv's MCP tool actions
        (``{"type": "list_tools"}``, ``{"type": "call_tool", "tool_name", "arguments"}``) on a
        tool episode, answered in MCP's observation shape (what ``MCPToolClient`` reads)."""
        kind = data.get("type")
        if kind not in ("list_tools", "call_tool"):
            return (await service.step(caller, session.id, StepRequest(action=data))).model_dump()
        specs = getattr(session.env, "tool_specs", None)
        if specs is None:
            raise ConfigError(
                f"{session.env.name} has no tools; its action is "
                f"{list(session.env.action_model.model_fields)}"
            )
        if kind == "list_tools":
            return {
                "observation": {"tools": specs(), "metadata": {}},
                "reward": None,
                "done": False,
            }
        call = {"tool": data.get("tool_name") or "", "arguments": data.get("arguments") or {}}
        out = await service.step(caller, session.id, StepRequest(action=call))
        obs = out.observation
        return {
            "observation": {
                "tool_name": call["tool"],
                "result": obs["text"],
                "error": None,
                "is_error": obs["is_error"],
                "verdict": obs["verdict"],
                "metadata": obs["metadata"],
            },
            "reward": out.reward,
            "done": out.done,
        }

    async def _websocket(ws: WebSocket, fixed: str | None) -> None:
        await ws.accept()

        async def error(e: VerigapError | str, code: str | None = None) -> None:
            status = status_of(e) if isinstance(e, VerigapError) else 400
            await ws.send_text(
                json.dumps(
                    {
                        "type": "error",
                        "data": {
                            "message": str(e),
                            "code": code or _WS_CODE.get(status, "EXECUTION_ERROR"),
                            "status": status,
                        },
                    }
                )
            )

        try:
            caller = identify(ws.headers.get("authorization"))
            if fixed is not None:
                family(fixed)
        except VerigapError as e:  # answer every message with the reason, then hang up
            with contextlib.suppress(WebSocketDisconnect):
                for _ in range(8):
                    raw = await ws.receive_text()
                    await error(e)
                    if '"close"' in raw:
                        break
            with contextlib.suppress(RuntimeError):
                await ws.close(code=1008)
            return
        session: Session | None = None
        try:
            while True:
                raw = await ws.receive_text()
                try:
                    msg = json.loads(raw)
                    if not isinstance(msg, dict):
                        raise ValueError("not an object")
                except ValueError as e:
                    await error(
                        f"invalid JSON message ({e}); send "
                        '{"type": "reset"|"step"|"state"|"close", "data": {...}}',
                        "INVALID_JSON",
                    )
                    continue
                kind = msg.get("type")
                data = msg.get("data") or {}
                try:
                    if kind == "close":
                        break
                    if not isinstance(data, dict):
                        raise ConfigError(f"{kind} message: data must be a JSON object")
                    if kind == "reset":
                        data = dict(data)
                        asked = data.pop("env", None)
                        if fixed is not None and asked not in (None, fixed):
                            raise ConfigError(
                                f"this WebSocket serves {fixed}; connect to "
                                f"/envs/{asked}/ws for {asked}"
                            )
                        name = family(fixed or asked or (session.env.name if session else None))
                        cfg = data.pop("config", None) or {}
                        body = reset_body(data)
                        if session is None or session.env.name != name or session.config != cfg:
                            if session is not None:
                                old, session = session, None
                                await service.close(caller, old.id)
                            session = await service.create(caller, name, cfg)
                        out: Any = await service.reset(caller, session.id, body)
                        reply = {"type": "observation", "data": out.model_dump()}
                    elif kind == "step":
                        if session is None:
                            raise EpisodeStateError("no episode yet: send a reset first")
                        reply = {"type": "observation", "data": await _step(session, caller, data)}
                    elif kind == "state":
                        reply = {
                            "type": "state",
                            "data": blank_state
                            if session is None
                            else service.state(caller, session.id).model_dump(),
                        }
                    else:
                        await error(
                            f"unknown message type {kind!r}; use reset, step, state or close",
                            "UNKNOWN_TYPE",
                        )
                        continue
                except VerigapError as e:
                    await error(e)
                    continue
                await ws.send_text(json.dumps(reply))
        except WebSocketDisconnect:
            pass
        finally:
            if session is not None:  # the session lives as long as its socket
                with contextlib.suppress(SessionNotFound):
                    await service.close(caller, session.id)
            with contextlib.suppress(RuntimeError):
                await ws.close()

    return app
