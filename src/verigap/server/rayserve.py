"""The environment server on Ray Serve: a stateless router in front of stateful shards.

A verigap session is state in one process (its environment, its worker thread, its workspace),
so every request of a session must reach the process that created it. Ray Serve spreads a
deployment's requests over its replicas with no affinity, so each shard is a deployment of its
own with exactly one replica (Ray places the shards on the cluster's nodes), owning its own
``root`` and a session-id prefix (``s0-``, ``s1-``, ...). The router — Serve's FastAPI ingress,
as many replicas as wanted, holding no state — reads the prefix of the session id in the path
and calls that shard's handle; an id with no known prefix goes to the shard its hash picks,
which answers exactly what one server answers for an unknown session.

Each shard runs the ordinary server (:func:`verigap.server.create_app`) on its own node's
loopback and the router forwards each request to it whole, headers included, so tokens,
ownership, budgets and every error are the single server's. Requests that concern every shard
are fanned out: ``GET``/``DELETE /sessions`` merge the shards' answers, ``GET /health`` sums
them, ``/episodes/{id}/truth`` asks each shard (episode ids are the client's choice, so they
carry no prefix). ``POST /sessions`` goes round-robin and moves to the next shard on a ``429``.
An OpenEnv WebSocket is pinned to one shard when it connects: the router holds the client's
socket, and the shard holds a socket of its own to its server, one reply per message.
"""

# no `from __future__ import annotations`: FastAPI reads the route signatures of the classes
# built inside _app, whose names (Request, WebSocket) live only in its scope

import contextlib
import itertools
import json
import re
import uuid
import zlib
from typing import Any

from verigap.errors import ConfigError
from verigap.server._sessions import ServerConfig

_SESSION_PATH = re.compile(r"^/sessions/([^/]+)(/.*)?$")
_TRUTH_PATH = re.compile(r"^/episodes/[^/]+/truth$")
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"}
_METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH"]


def shard_configs(config: ServerConfig, shards: int) -> list[ServerConfig]:
    """One config per shard: its own root under ``config.root`` and its own session prefix."""
    if shards < 1:
        raise ConfigError(f"shards={shards}: serve on at least one shard")
    return [
        config.model_copy(update={"root": config.root / f"shard{i}", "session_prefix": f"s{i}-"})
        for i in range(shards)
    ]


def shard_of(session_id: str, shards: int) -> int:
    """The shard that holds ``session_id``: its prefix, or (an id no shard made) a stable hash,
    so the request still meets a real server that answers 401/404 as one process would."""
    head, sep, _ = session_id.partition("-")
    if sep and head[:1] == "s" and head[1:].isdigit() and int(head[1:]) < shards:
        return int(head[1:])
    return zlib.crc32(session_id.encode()) % shards


def _app(shard_cpus: float, max_ongoing: int) -> Any:
    """The Serve application's two deployments (built here so that importing this module needs
    no Ray)."""
    try:
        import httpx
        from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
        from fastapi.responses import Response
        from ray import serve
    except ImportError as e:
        raise ConfigError(
            f"serving on Ray Serve needs {e.name}: pip install 'verigap[server,ray]'"
        ) from None

    @serve.deployment(
        num_replicas=1, max_ongoing_requests=max_ongoing, ray_actor_options={"num_cpus": shard_cpus}
    )
    class Shard:
        """One ordinary verigap server on this node's loopback, reached only through Serve."""

        def __init__(self, config: ServerConfig) -> None:
            from verigap.server._runner import BackgroundServer

            self.server = BackgroundServer(config)
            self.url = self.server.start()
            self.http = httpx.AsyncClient(base_url=self.url, timeout=None)
            self.sockets: dict[str, Any] = {}

        async def forward(
            self, method: str, path: str, query: str, headers: list[tuple[str, str]], body: bytes
        ) -> tuple[int, list[tuple[str, str]], bytes]:
            r = await self.http.request(
                method, path + (f"?{query}" if query else ""), headers=headers, content=body
            )
            return (
                r.status_code,
                [(k, v) for k, v in r.headers.items() if k.lower() not in _HOP],
                r.content,
            )

        async def ws_open(self, key: str, path: str, headers: list[tuple[str, str]]) -> None:
            from websockets.asyncio.client import connect

            self.sockets[key] = await connect(
                "ws" + self.url[4:] + path,
                max_size=None,
                additional_headers=headers,
                open_timeout=60,
            )

        async def ws_exchange(self, key: str, text: str) -> str | None:
            """Send one client message; its one reply, or None when the server hung up (after
            ``close``, or a refused credential)."""
            from websockets.exceptions import ConnectionClosed

            sock = self.sockets.get(key)
            if sock is None:
                return None
            try:
                await sock.send(text)
                return await sock.recv()
            except ConnectionClosed:
                await self.ws_close(key)
                return None

        async def ws_close(self, key: str) -> None:
            sock = self.sockets.pop(key, None)
            if sock is not None:
                await sock.close()

        def node(self) -> str:
            """The Ray node this shard runs on (tests and benchmarks check the spread)."""
            import ray

            return ray.get_runtime_context().get_node_id()

        def __del__(self) -> None:  # Serve stops a replica: close its sessions and workspaces
            with contextlib.suppress(Exception):
                self.server.stop()

    ingress = FastAPI(title="verigap on Ray Serve", docs_url=None, redoc_url=None, openapi_url=None)

    @serve.deployment(max_ongoing_requests=max_ongoing, ray_actor_options={"num_cpus": 0})
    @serve.ingress(ingress)
    class Router:
        """Routes each request to the shard that holds its session; holds no state."""

        def __init__(self, *shards: Any) -> None:
            self.shards = list(shards)
            self.turn = itertools.count()

        def _next(self) -> int:
            return next(self.turn) % len(self.shards)

        async def _send(
            self, i: int, request: Request, path: str, body: bytes
        ) -> tuple[int, list[tuple[str, str]], bytes]:
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
            return await self.shards[i].forward.remote(
                request.method, path, request.url.query, headers, body
            )

        async def _all(
            self, request: Request, path: str, body: bytes
        ) -> list[tuple[int, list[tuple[str, str]], bytes]]:
            import asyncio

            return list(
                await asyncio.gather(
                    *(self._send(i, request, path, body) for i in range(len(self.shards)))
                )
            )

        @ingress.api_route("/{path:path}", methods=_METHODS)
        async def route(self, request: Request, path: str) -> Response:
            path = "/" + path
            body = await request.body()
            m = _SESSION_PATH.match(path)
            if m:
                out = await self._send(shard_of(m.group(1), len(self.shards)), request, path, body)
            elif path == "/sessions" and request.method == "POST":
                start = self._next()
                for k in range(len(self.shards)):
                    out = await self._send((start + k) % len(self.shards), request, path, body)
                    if out[0] != 429:
                        break
            elif path in ("/sessions", "/health") or _TRUTH_PATH.match(path):
                out = _merge(path, request.method, await self._all(request, path, body))
            else:
                out = await self._send(self._next(), request, path, body)
            status, headers, content = out
            return Response(content, status_code=status, headers=dict(headers))

        @ingress.websocket("/ws")
        async def ws_root(self, ws: WebSocket) -> None:
            await self._socket(ws)

        @ingress.websocket("/envs/{env}/ws")
        async def ws_env(self, ws: WebSocket, env: str) -> None:
            await self._socket(ws)

        async def _socket(self, ws: WebSocket) -> None:
            """Pin the socket to one shard; relay each message and its one reply."""
            await ws.accept()
            shard, key = self.shards[self._next()], uuid.uuid4().hex
            headers = [(k, v) for k, v in ws.headers.items() if k.lower() == "authorization"]
            path = ws.url.path + (f"?{ws.url.query}" if ws.url.query else "")
            await shard.ws_open.remote(key, path, headers)
            try:
                while True:
                    reply = await shard.ws_exchange.remote(key, await ws.receive_text())
                    if reply is None:
                        break
                    await ws.send_text(reply)
            except WebSocketDisconnect:
                pass
            finally:
                await shard.ws_close.remote(key)
                with contextlib.suppress(RuntimeError):
                    await ws.close()

    return Shard, Router


def _merge(
    path: str, method: str, outs: list[tuple[int, list[tuple[str, str]], bytes]]
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One answer from every shard's: a refusal (401, 403) as any shard gave it, else the
    merged lists (``/sessions``), the summed count (``/health``) or the shard that knew the
    episode (``/episodes/{id}/truth``; a 404 from every shard is the first shard's 404)."""
    if path.startswith("/episodes/"):
        return next((o for o in outs if o[0] == 200), outs[0])
    bad = next((o for o in outs if o[0] != 200), None)
    if bad is not None:
        return bad
    parts = [json.loads(o[2]) for o in outs]
    if path == "/health":
        merged: dict[str, Any] = {
            "status": "healthy",
            "sessions": sum(p["sessions"] for p in parts),
            "shards": len(parts),
        }
    elif method == "GET":
        merged = {
            "client": parts[0]["client"],
            "sessions": [s for p in parts for s in p["sessions"]],
        }
    else:
        merged = {"closed": [s for p in parts for s in p["closed"]]}
    return 200, [("content-type", "application/json")], json.dumps(merged).encode()


def deploy(
    config: ServerConfig,
    shards: int = 2,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    router_replicas: int = 1,
    shard_cpus: float = 1.0,
    max_ongoing: int = 256,
    name: str = "verigap",
) -> str:
    """Serve ``config`` on the Ray cluster this process is connected to (``ray.init``), as
    ``shards`` single-replica shard deployments behind a router; returns the base URL. Each
    shard asks Ray for ``shard_cpus`` CPUs, which is what spreads the shards over the nodes;
    ``config.max_sessions`` is per shard."""
    from ray import serve

    Shard, Router = _app(shard_cpus, max_ongoing)
    bound = [
        Shard.options(name=f"shard{i}").bind(c) for i, c in enumerate(shard_configs(config, shards))
    ]
    serve.start(proxy_location="HeadOnly", http_options={"host": host, "port": port})
    serve.run(
        Router.options(num_replicas=router_replicas).bind(*bound),
        name=name,
        route_prefix="/",
        blocking=False,
    )
    return f"http://{host}:{port}"


def shard_nodes(shards: int, name: str = "verigap") -> list[str]:
    """The Ray node id each shard of the running application is on."""
    from ray import serve

    return [
        serve.get_deployment_handle(f"shard{i}", app_name=name).node.remote().result()
        for i in range(shards)
    ]


def shutdown(name: str = "verigap") -> None:
    """Delete the application (its shards close their sessions) and stop Serve."""
    from ray import serve

    with contextlib.suppress(Exception):
        serve.delete(name)
    serve.shutdown()
