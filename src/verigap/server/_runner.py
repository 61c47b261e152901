"""Running the server: in the foreground (``verigap serve``) or on a loopback thread.

The thread form is what the tests, the load benchmark and the HTTP training example use: a real
uvicorn server on a real socket, so every request goes through HTTP.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from verigap.server._app import create_app
from verigap.server._sessions import ServerConfig, SessionManager


class BackgroundServer:
    """``with BackgroundServer(config) as url:`` serves on 127.0.0.1 (a free port) until exit."""

    def __init__(
        self,
        config: ServerConfig,
        manager: SessionManager | None = None,
        port: int = 0,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.app = create_app(config, manager)
        self.sessions: SessionManager = self.app.state.sessions
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_level="warning",
                ws_max_size=ws_max_size(config),
                timeout_graceful_shutdown=30,
            )
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._start_timeout_s = start_timeout_s

    def start(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:  # a readiness wait with a deadline, not a sleep-as-sync
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start; see the log above")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join()
        self._sock.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(config: ServerConfig, host: str, port: int) -> None:
    uvicorn.run(
        create_app(config), host=host, port=port, log_level="info", ws_max_size=ws_max_size(config)
    )


def ws_max_size(config: ServerConfig) -> int:
    """A WebSocket message may be as large as an HTTP body: the sandbox's file limit plus a
    1 MiB envelope (uvicorn's own default is 16 MiB)."""
    return (config.max_file_mb + 1) * 2**20
